/// Mistake: a sample type whose metadata members have other names, with no meta_traits
/// specialisation mapping them; the sampler must refuse it at compile time.
#include <string>
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"

struct clip {
  std::string path;
  int length, rows, cols;
  double rate;
};

#ifndef VBUCKET_COMPILE_FAIL
template <>
struct vbucket::meta_traits<clip> {
  static int frames(const clip& c) { return c.length; }
  static int height(const clip& c) { return c.rows; }
  static int width(const clip& c) { return c.cols; }
  static double fps(const clip& c) { return c.rate; }
};
#endif

void make(const vbucket::bucket_config& config, const std::vector<clip>& clips) {
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{});
  (void)sampler.size();
}
