/// Mistake: samples in a container without random access (a std::list): the sampler reads
/// sample i by index, so it must refuse the list at compile time instead of walking it.
#include <list>
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

void make(const vbucket::bucket_config& config) {
#ifdef VBUCKET_COMPILE_FAIL
  const std::list<vbucket::sample_meta> clips(4, vbucket::sample_meta{33, 256, 256, 24.0});
#else
  const std::vector<vbucket::sample_meta> clips(4, vbucket::sample_meta{33, 256, 256, 24.0});
#endif
  vbucket::batch_sampler sampler(clips, config);
  (void)sampler.size();
}
