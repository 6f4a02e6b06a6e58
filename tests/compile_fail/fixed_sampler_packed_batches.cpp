/// Mistake: asking a fixed sampler for packed batches. The batching is the sampler's type
/// (`batch_sampler<..., packed_batching>`), so a fixed sampler has no packed accessors: the call
/// does not compile (it used to throw at run time).
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

void make(const vbucket::bucket_config& config) {
  const std::vector<vbucket::sample_meta> clips(4, vbucket::sample_meta{33, 256, 256, 24.0});
#ifdef VBUCKET_COMPILE_FAIL
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{}, {.token_budget = 1e6});
#else
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{}, {.token_budget = 1e6},
                                 vbucket::packed_batching{});
#endif
  for (const vbucket::packed_batch& b : sampler.packed_batches()) (void)b;
}
