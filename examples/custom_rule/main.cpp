// Write your own rule: "longest fit". Each video goes to the largest resolution it is large
// enough for and the longest frames key it covers after fps thinning, kept with the key's
// p_resolution, else tried one resolution lower; images go to the key 1 the same way. One draw
// per resolution tried, from the sample's own stream, so every rank computes it alone.
//
// A rule is any type with
//   template <vbucket::random_source S>
//   vbucket::bucket_id assign(const bucket_config&, const sample_meta&, std::uint64_t index,
//                             const S& source) const;
// returning a bucket id, vbucket::no_bucket (not used this epoch) or vbucket::invalid_sample.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <vbucket/json/bucket_config.hpp>
#include <vbucket/sample/batch_sampler.hpp>  // the sampler and what it uses (vbucket.hpp: everything)

#ifndef VBUCKET_EXAMPLE_CONFIG
#define VBUCKET_EXAMPLE_CONFIG "tests/data/config_opensora_v2.json"
#endif

struct longest_fit_rule {
  double fps_max = 16.0;

  template <vbucket::random_source Source>
  vbucket::bucket_id assign(const vbucket::bucket_config& config, const vbucket::sample_meta& m,
                            std::uint64_t index, const Source& source) const {
    if (!vbucket::bucketable(m)) return vbucket::invalid_sample;
    const std::int64_t frames = m.num_frames / vbucket::frame_interval(m.fps, fps_max);
    const bool image = m.num_frames == 1;
    auto rng = source.stream(index, 0);
    const auto& resolutions = config.resolutions();  // most pixels first
    for (std::size_t r = vbucket::first_fitting_resolution(config, m); r < resolutions.size();
         ++r) {
      const auto& keys = resolutions[r].frames;  // longest first; the key 1 (images) last
      for (std::size_t k = 0; k < keys.size(); ++k) {
        if ((keys[k].frames == 1) != image || keys[k].frames > frames) continue;
        if (rng.random() < keys[k].p_resolution) return vbucket::bucket_for(config, r, k, m);
        break;  // not kept at this resolution: try the next one
      }
    }
    return vbucket::no_bucket;
  }
};
static_assert(vbucket::bucket_rule<longest_fit_rule>);

int main() {
  const auto config =
      vbucket::json::load_bucket_config(VBUCKET_EXAMPLE_CONFIG, vbucket::opensora_v2_tables{});
  vbucket::meta_table clips;  // or any std::vector of your own sample type
  for (std::int64_t i = 0; i < 5000; ++i)
    clips.push_back({i % 7 == 0 ? 1 : 20 + (i * 37) % 400, 360 + (i * 13) % 900,
                     480 + (i * 29) % 1500,
                     i % 7 == 0 ? NAN : 24.0 + static_cast<double>(i % 4) * 12});

  const longest_fit_rule rule{.fps_max = 16};
  vbucket::batch_sampler sampler(clips, config, rule, {.seed = 7, .world = 4, .rank = 1});
  sampler.set_epoch(0);

  // The rule's promises, checked on every sample of every batch of this rank.
  std::size_t batches = 0, samples = 0, broken = 0;
  for (const vbucket::batch& b : sampler) {
    ++batches;
    for (const std::uint32_t i : b.indices) {
      ++samples;
      const vbucket::sample_meta m = clips[i];
      const std::int64_t usable = m.num_frames / vbucket::frame_interval(m.fps, rule.fps_max);
      const bool image = m.num_frames == 1;
      const auto& res = config.resolution_of(b.bucket);
      const bool fits = static_cast<double>(m.height * m.width) >= res.min_pixels;
      if ((b.frames == 1) != image || b.frames > usable || !fits) ++broken;
    }
  }
  const vbucket::plan_stats stats = sampler.stats();
  std::printf("rank 1 of 4: %zu batches, %zu samples; epoch: %llu samples bucketed, %llu pads\n",
              batches, samples, static_cast<unsigned long long>(stats.total.samples),
              static_cast<unsigned long long>(stats.total.pads));
  if (broken != 0 || batches == 0) {
    std::fprintf(stderr, "%zu samples broke the rule's promises\n", broken);
    return 1;
  }
}
