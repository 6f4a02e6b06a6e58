// Quickstart: bucket a trainer's own sample type with the Open-Sora 2.0 rule. This is the
// README's usage snippet, built and run by the tests.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <vbucket/json/bucket_config.hpp>
#include <vbucket/vbucket.hpp>

#ifndef VBUCKET_EXAMPLE_CONFIG
#define VBUCKET_EXAMPLE_CONFIG "tests/data/config_opensora_v2.json"
#endif

struct clip {  // the trainer's own type
  std::string path;
  int frames, h, w;
  float rate;  // NaN for images
};
template <>
struct vbucket::meta_traits<clip> {
  static int frames(const clip& c) { return c.frames; }
  static int height(const clip& c) { return c.h; }
  static int width(const clip& c) { return c.w; }
  static double fps(const clip& c) { return c.rate; }
};
static_assert(vbucket::video_meta<clip>);

int main() {
  const std::vector<clip> clips = {
      {"a.mp4", 240, 1080, 1920, 24.0f}, {"b.mp4", 90, 720, 1280, 30.0f},
      {"c.jpg", 1, 1024, 1024, NAN},     {"d.mp4", 600, 1920, 1080, 60.0f},
      {"e.mp4", 40, 360, 640, 25.0f},    {"f.mp4", 3, 64, 64, 24.0f},
  };
  const auto config =
      vbucket::json::load_bucket_config(VBUCKET_EXAMPLE_CONFIG, vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{.fps_max = 16};
  const vbucket::fast_source source(/*seed=*/42, /*epoch=*/0);
  const auto ids = vbucket::assign_range(config, clips, rule, source);
  for (std::size_t i = 0; i < clips.size(); ++i) {
    if (ids[i] < 0) {
      std::printf("%-6s -> no bucket this epoch\n", clips[i].path.c_str());
      continue;
    }
    const auto& ratio = config.ratio_of(ids[i]);
    std::printf("%-6s -> %s, %lld frames, %s: target %lldx%dx%d, batch %lld\n",
                clips[i].path.c_str(), config.resolution_of(ids[i]).info.name.c_str(),
                static_cast<long long>(config.frames_of(ids[i]).frames), ratio.key.c_str(),
                static_cast<long long>(config.frames_of(ids[i]).frames), ratio.height, ratio.width,
                static_cast<long long>(config.batch_size(ids[i])));
  }
}
