/// Mistake: a user rule whose assign() is not const (a rule with hidden state would make the
/// assignment depend on the thread count); the sampler must refuse it at compile time.
#include <cstdint>
#include <vector>

#include "vbucket/batch_sampler.hpp"

struct first_bucket {
  template <class Source>
#ifdef VBUCKET_COMPILE_FAIL
  vbucket::bucket_id assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                            std::uint64_t, const Source&){
#else
  vbucket::bucket_id assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                            std::uint64_t, const Source&) const {
#endif
      return 0;
}
}
;

void make(const vbucket::bucket_config& config, const std::vector<vbucket::sample_meta>& clips) {
  vbucket::batch_sampler sampler(clips, config, first_bucket{});
  (void)sampler.size();
}
