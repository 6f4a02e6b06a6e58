/// Tests of vbucket/ffmpeg/decode_cost.hpp: frames decoded from the keyframe (against the
/// decoder's own count), their mean over Open-Sora's random starts (against brute force), the
/// per-codec fit, and the decode-aware batch cost in a plan.
#include "vbucket/ffmpeg/decode_cost.hpp"

#include <doctest/doctest.h>

#include <cstdint>     // std::int64_t, std::uint8_t, std::uint32_t
#include <filesystem>  // std::filesystem::exists
#include <optional>    // std::nullopt
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/epoch_plan.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/random.hpp"  // vbucket::detail::mix64

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
