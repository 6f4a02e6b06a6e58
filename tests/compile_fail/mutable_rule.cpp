/// Mistake: a user rule whose assign() is not const (a rule with hidden state would make the
/// assignment depend on the thread count); the sampler must refuse it at compile time.
#include <cstdint>
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

/// The rule as it should be: assign() is const.
struct const_first_bucket {
  template <class Source>
  vbucket::bucket_id assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                            std::uint64_t, const Source&) const {
    return 0;
  }
};
/// The mistake: assign() is not const.
struct mutable_first_bucket {
  template <class Source>
  vbucket::bucket_id assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                            std::uint64_t, const Source&) {
    return 0;
  }
};

#ifdef VBUCKET_COMPILE_FAIL
using first_bucket = mutable_first_bucket;
#else
using first_bucket = const_first_bucket;
#endif

void make(const vbucket::bucket_config& config, const std::vector<vbucket::sample_meta>& clips) {
  vbucket::batch_sampler sampler(clips, config, first_bucket{});
  (void)sampler.size();
}
