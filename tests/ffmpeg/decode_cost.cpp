/// Tests of vbucket/ffmpeg/decode_cost.hpp: frames decoded from the keyframe (against the
/// decoder's own count), their mean over Open-Sora's random starts (against brute force), the
/// per-codec fit, the decode-aware batch cost in a plan, and the per-sample decode costs from the
/// frame index (`sample_decode_costs`) in a plan.
#include "vbucket/ffmpeg/decode_cost.hpp"

#include <doctest/doctest.h>

#include <algorithm>   // std::count, std::max
#include <cstddef>     // std::ptrdiff_t
#include <cstdint>     // std::int64_t, std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::exists
#include <optional>    // std::nullopt
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/base/random.hpp"  // vbucket::detail::mix64
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/plan/epoch_plan.hpp"

namespace ff = vbucket::ffmpeg;

TEST_CASE("ffmpeg: frames from the keyframe, and their mean over random starts") {
  const std::vector<std::int64_t> keys = {0, 30, 60, 250};
  CHECK(ff::frames_from_keyframe(keys, 45, 33, 2) == 45 + 64 - 30 + 1);
  CHECK(ff::frames_from_keyframe(keys, 30, 1, 1) == 1);
  CHECK(ff::frames_from_keyframe(keys, 29, 2, 1) == 31);
  CHECK(ff::frames_from_keyframe(keys, 400, 5, 3) == 400 + 12 - 250 + 1);
  // The mean equals brute force over every start temporal_random_crop can draw.
  std::uint64_t state = 7;
  for (int round = 0; round < 200; ++round) {
    state = vbucket::detail::mix64(state + 1);
    const std::int64_t total = 1 + static_cast<std::int64_t>(state % 700);
    const std::int64_t gop = 1 + static_cast<std::int64_t>((state >> 12) % 300);
    const std::int64_t frames = 1 + static_cast<std::int64_t>((state >> 24) % 40);
    const std::int64_t interval = 1 + static_cast<std::int64_t>((state >> 36) % 4);
    std::vector<std::int64_t> k;
    for (std::int64_t f = 0; f < total; f += gop) k.push_back(f);
    CAPTURE(total);
    CAPTURE(gop);
    CAPTURE(frames);
    CAPTURE(interval);
    const double mean = ff::expected_frames_from_keyframe(k, total, frames, interval);
    if (total < (frames - 1) * interval + 1) {
      CHECK(mean == 0.0);
      continue;
    }
    const std::int64_t last = std::max<std::int64_t>(0, total - frames * interval - 1);
    double sum = 0.0;
    for (std::int64_t s = 0; s <= last; ++s)
      sum += static_cast<double>(ff::frames_from_keyframe(k, s, frames, interval));
    CHECK(mean == doctest::Approx(sum / static_cast<double>(last + 1)));
  }
}

TEST_CASE("ffmpeg: the keyframes of a frame index entry bound what the decoder decodes") {
  // Decoding every frame (skip_unwanted off), the decoder decodes the frames from the keyframe
  // before the clip to its last frame, plus at most the few it holds back to reorder (3
  // B-frames); with skipping, never more than from the keyframe.
  const std::string path = std::string(VBUCKET_FFMPEG_CODEC_MEDIA_DIR) + "/h264_pyramid_g30.mp4";
  if (!std::filesystem::exists(path)) return;
  const auto entry = ff::index_video(path);
  REQUIRE(entry.ok());
  const std::vector<std::int64_t> keys = ff::key_frames(*entry);
  CHECK(keys == std::vector<std::int64_t>{0, 30, 60, 90});
  for (std::int64_t start : {0, 7, 30, 44, 61}) {
    CAPTURE(start);
    ff::clip_request req{.start = start, .frames = 9, .interval = 3, .height = 24, .width = 32};
    std::vector<std::uint8_t> out(ff::clip_bytes(req));
    const std::int64_t bound = ff::frames_from_keyframe(keys, start, 9, 3);
    const auto skipping = ff::decode_clip(path, req, out);
    REQUIRE(skipping.ok());
    CHECK(skipping->frames_decoded <= bound + 1);  // + the P-frame a last B-frame needs
    req.skip_unwanted = false;
    const auto all = ff::decode_clip(path, req, out);
    REQUIRE(all.ok());
    CHECK(all->frames_decoded >= bound);
    CHECK(all->frames_decoded <= bound + 4);
  }
}

TEST_CASE("ffmpeg: fit_decode_cost recovers per-codec rates") {
  const std::vector<ff::decode_measurement> m = {
      {"h264", 1'000'000, 60, 0.6}, {"h264", 2'000'000, 30, 0.6}, {"av1", 1'000'000, 100, 3.0}};
  const ff::decode_cost_model model = ff::fit_decode_cost(m);
  CHECK(model.rate("h264") == doctest::Approx(0.01));
  CHECK(model.rate("av1") == doctest::Approx(0.03));
  CHECK(model.rate("vp9") == model.fallback);
  CHECK(model.fallback > 0.01);
  CHECK(model.fallback < 0.03);
  CHECK(model.seconds("av1", 500'000, 10.0) == doctest::Approx(0.15));
  CHECK_THROWS_AS(ff::fit_decode_cost({}), vbucket::error);
}

TEST_CASE("ffmpeg: decode_aware_cost is a batch cost of bucket means, usable by a plan") {
  using vbucket::bucket_spec;
  const std::vector<bucket_spec> specs = {{"256px", 33, 1.0, std::nullopt, 4},
                                          {"256px", 65, 1.0, std::nullopt, 2}};
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  REQUIRE(config.num_buckets() >= 2);
  // Samples 0-3 in bucket 0, 4-5 in bucket 1, one unassigned.
  const std::vector<vbucket::bucket_id> ids = {0, 0, 0, 0, 1, 1, vbucket::no_bucket};
  const std::vector<double> seconds = {1, 2, 3, 6, 10, 20, 99};
  const ff::decode_aware_cost none(config, ids, seconds, 0.0);
  const ff::decode_aware_cost cost(config, ids, seconds, 100.0);
  const vbucket::latent_tokens_cost tokens{};
  CHECK(cost.mean_seconds(0) == doctest::Approx(3.0));
  CHECK(cost.mean_seconds(1) == doctest::Approx(15.0));
  CHECK(none(config, 0, 4) == tokens(config, 0, 4));
  CHECK(cost(config, 1, 2) == doctest::Approx(tokens(config, 1, 2) + 100.0 * 15.0 * 2));
  CHECK_THROWS_AS(ff::decode_aware_cost(config, ids, std::vector<double>(2), 1.0), vbucket::error);
  // A plan made with it loses nothing.
  std::vector<vbucket::bucket_id> many;
  std::vector<double> costs;
  for (std::uint32_t i = 0; i < 400; ++i) {
    many.push_back(static_cast<vbucket::bucket_id>(i % 2));
    costs.push_back(i % 7 == 0 ? 5.0 : 1.0);
  }
  const ff::decode_aware_cost c(config, many, costs, 1e4);
  const auto plan = vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(many), config,
                                             {.seed = 3, .balance_group = 8}, c);
  std::uint64_t slots = 0;
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p)
    slots += plan.global_batch(p).indices.size();
  CHECK(slots == 400);
}

TEST_CASE("ffmpeg: sample_decode_costs from the frame index, and a plan balanced by them") {
  using vbucket::bucket_spec;
  const std::vector<bucket_spec> specs = {{"256px", 33, 1.0, std::nullopt, 4},
                                          {"256px", 65, 1.0, std::nullopt, 2}};
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  // a.mp4: 300 frames, a keyframe every 30; b.mp4 is not in the index (assumed GOP 100).
  ff::frame_index index;
  ff::file_index a;
  a.path = "a.mp4";
  a.frames = 300;
  for (std::int64_t f = 0; f < 300; f += 30) a.keys.push_back({.frame = f});
  index.add(a);
  const ff::decode_cost_model model{{{"h264", 0.002}, {"av1", 0.004}}, 0.003};
  const std::vector<ff::decode_sample> samples = {{"a.mp4", "h264", 1'000'000, 300, 2},
                                                  {"b.mp4", "av1", 500'000, 400, 1},
                                                  {"a.mp4", "vp9", 2'000'000, 300, 3},
                                                  {"b.mp4", "av1", 500'000, 10, 1},
                                                  {"c.mp4", "h264", 1'000'000, 300, 1}};
  const std::vector<vbucket::bucket_id> ids = {0, 1, 0, 0, vbucket::no_bucket};
  // Brute force: the mean over every start temporal_random_crop draws of the frames from the
  // keyframe (every `gop`) at or before the start to the clip's last frame.
  const auto mean_frames = [](std::int64_t total, std::int64_t gop, std::int64_t t,
                              std::int64_t interval) {
    const std::int64_t last = std::max<std::int64_t>(0, total - t * interval - 1);
    double sum = 0.0;
    for (std::int64_t s = 0; s <= last; ++s)
      sum += static_cast<double>(s + (t - 1) * interval - (s / gop) * gop + 1);
    return sum / static_cast<double>(last + 1);
  };
  const std::vector<double> c = ff::sample_decode_costs(config, ids, samples, index, model, 10.0,
                                                        /*assumed_gop=*/100);
  REQUIRE(c.size() == 5);
  const std::int64_t t0 = config.frames_of(0).frames, t1 = config.frames_of(1).frames;
  CHECK(c[0] == doctest::Approx(10.0 * 0.002 * 1.0 * mean_frames(300, 30, t0, 2)));
  CHECK(c[1] == doctest::Approx(10.0 * 0.004 * 0.5 * mean_frames(400, 100, t1, 1)));
  CHECK(c[2] == doctest::Approx(10.0 * 0.003 * 2.0 * mean_frames(300, 30, t0, 3)));  // fallback
  CHECK(c[3] == 0.0);  // too short for the bucket's clip
  CHECK(c[4] == 0.0);  // no bucket
  CHECK_THROWS_AS(ff::sample_decode_costs(config, std::span(ids).first(4), samples, index, model),
                  vbucket::error);
  CHECK_THROWS_AS(ff::sample_decode_costs(config, ids, samples, index, model, -1.0),
                  vbucket::error);

  // A plan balanced by them: every sample dealt once, the costs recorded.
  std::vector<vbucket::bucket_id> many;
  std::vector<ff::decode_sample> rows;
  for (std::uint32_t i = 0; i < 800; ++i) {
    many.push_back(static_cast<vbucket::bucket_id>(i % 2));
    rows.push_back({i % 3 == 0 ? "a.mp4" : "b.mp4", "h264", 1'000'000, 300, 2});
  }
  const std::vector<double> seconds = ff::sample_decode_costs(config, many, rows, index, model);
  const auto plan =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(many), config,
                               {.seed = 3, .balance_group = 8}, ff::no_batch_cost{}, seconds);
  CHECK(plan.sample_cost_hash() == vbucket::sample_costs_hash(seconds));
  std::vector<int> seen(many.size(), 0);
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p)
    for (const std::uint32_t i : plan.global_batch(p).indices) ++seen[i];
  CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(many.size()));
}
