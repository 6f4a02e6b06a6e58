/// Mistake: a sampler made over a temporary container. The sampler keeps a view of the samples,
/// which would dangle; it must not compile.
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

void make(const vbucket::bucket_config& config, const std::vector<vbucket::sample_meta>& clips) {
#ifdef VBUCKET_COMPILE_FAIL
  vbucket::batch_sampler sampler(std::vector<vbucket::sample_meta>(clips), config,
                                 vbucket::opensora_v2_rule{});
#else
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{});
#endif
  (void)sampler.size();
}
