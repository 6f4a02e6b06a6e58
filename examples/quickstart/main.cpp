// Quickstart: a trainer's own sample type through the batch sampler, with checkpoint and resume.
// This is the README's usage snippet, built and run by the tests.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <vbucket/json/bucket_config.hpp>
#include <vbucket/sample/batch_sampler.hpp>  // the sampler and what it uses (vbucket.hpp: everything)

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

/// 600 clips of the usual web-video shapes.
std::vector<clip> make_clips() {
  const int shapes[][2] = {{1080, 1920}, {720, 1280}, {1024, 1024}, {1920, 1080}, {360, 640}};
  const int lengths[] = {1, 48, 97, 130, 300, 1};
  std::vector<clip> clips;
  for (int i = 0; i < 600; ++i)
    clips.push_back({"clip" + std::to_string(i) + ".mp4", lengths[i % 6], shapes[i % 5][0],
                     shapes[i % 5][1],
                     lengths[i % 6] == 1 ? NAN : 24.0f + static_cast<float>(i % 3) * 6.0f});
  return clips;
}

int main() {
  const std::vector<clip> clips = make_clips();
  const auto config =
      vbucket::json::load_bucket_config(VBUCKET_EXAMPLE_CONFIG, vbucket::opensora_v2_tables{});
  const std::uint32_t world = 2, rank = 0;

  // --- the README's snippet: samples to batches -------------------------------------------
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{.fps_max = 16},
                                 {.seed = 42, .world = world, .rank = rank});
  std::string checkpoint;
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    sampler.set_epoch(epoch);
    std::printf("epoch %llu: %zu steps on rank %u, fingerprint %016llx\n",
                static_cast<unsigned long long>(epoch), sampler.size(), rank,
                static_cast<unsigned long long>(sampler.fingerprint()));
    for (const vbucket::batch& b : sampler) {
      // train(b): b.indices are rows of `clips`, all to be cropped to b.frames x b.height x b.width
      sampler.advance(1);
      if (b.step == 2) checkpoint = sampler.state().to_string();  // saved with the model
    }
  }
  // ------------------------------------------------------------------------------------------

  // Resume epoch 1 from the checkpoint under another world size: rank r of 3 gets the rest.
  const vbucket::plan_state saved = vbucket::plan_state::parse(checkpoint);
  std::printf("resuming from \"%s\" on 3 ranks\n", checkpoint.c_str());
  std::uint64_t resumed = 0;
  for (std::uint32_t r = 0; r < 3; ++r) {
    vbucket::batch_sampler other(clips, config, vbucket::opensora_v2_rule{.fps_max = 16},
                                 {.seed = 42, .world = 3, .rank = r});
    other.set_epoch(saved.epoch);
    other.load_state(saved);
    for (const vbucket::batch& b : other) resumed += b.repeat ? 0 : 1;
  }
  // Every global batch of the epoch is trained once: those before the checkpoint and after it.
  const std::uint64_t total = sampler.plan().num_batches();
  std::printf("%llu of %llu global batches left after the checkpoint\n",
              static_cast<unsigned long long>(resumed), static_cast<unsigned long long>(total));
  if (saved.consumed + resumed != total) {
    std::fprintf(stderr, "resume lost or replayed batches\n");
    return 1;
  }
  const vbucket::batch first = sampler.plan().global_batch(0);
  std::printf("first batch of epoch 1: %zu clips of %lldx%lldx%lld\n", first.indices.size(),
              static_cast<long long>(first.frames), static_cast<long long>(first.height),
              static_cast<long long>(first.width));
}
