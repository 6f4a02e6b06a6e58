/// Tests of vbucket/bucket/batch_size.hpp: data-parallel size and its validation, global batch,
/// gradient accumulation, bucket tokens, micro-batching and the choice of a micro-batch size.
#include "vbucket/bucket/batch_size.hpp"

#include <doctest/doctest.h>

#include <array>        // std::array
#include <cstdint>      // std::int64_t
#include <limits>       // std::numeric_limits
#include <numeric>      // std::iota
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#define VBUCKET_BATCH_SIZE_TEST_JSON 1
#include "vbucket/json/bucket_config.hpp"
#else
#define VBUCKET_BATCH_SIZE_TEST_JSON 0
#endif

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// A deliberately odd item type: not trivially copyable, no default arithmetic.
struct named_clip {
  std::string path;
  int frames = 0;
};

using vbucket::accumulation_rounding;

// Everything in item 1 is usable in constant expressions.
static_assert(vbucket::data_parallel_size({64, 2, 2, 2}) == 8);
static_assert(vbucket::global_batch_size(4, 8) == 32);
static_assert(vbucket::gradient_accumulation(1024, 4, 32).steps == 8);
static_assert(vbucket::gradient_accumulation(1000, 4, 32, accumulation_rounding::up) ==
              vbucket::accumulation_plan{8, 1024});
static_assert(vbucket::latent_frames(408) == 102);
static_assert(vbucket::token_count(102, 360, 640) == 26 * 900);
static_assert(vbucket::micro_batch_count(10, 4) == 3);
constexpr std::array<vbucket::model_dimension, 2> dit_dims{
    {{"heads", 16, true}, {"hidden size", 1152, false}}};
static_assert(vbucket::data_parallel_size({32, 2, 1, 4}, dit_dims) == 4);

static_assert(std::ranges::random_access_range<vbucket::micro_batch_view<named_clip>>);
static_assert(std::ranges::sized_range<vbucket::micro_batch_view<const named_clip>>);
static_assert(std::ranges::view<vbucket::micro_batch_view<int>>);
static_assert(std::ranges::borrowed_range<vbucket::micro_batch_view<int>>);
static_assert(std::same_as<std::ranges::range_value_t<vbucket::micro_batch_view<const int>>,
                           std::span<const int>>);

}  // namespace

TEST_CASE("data-parallel size") {
  CHECK(vbucket::data_parallel_size({8}) == 8);
  CHECK(vbucket::data_parallel_size({64, 8, 1, 1}) == 8);
  CHECK(vbucket::data_parallel_size({64, 1, 4, 2}) == 8);
  CHECK(vbucket::data_parallel_size({6, 2, 3, 1}) == 1);

  SUBCASE("the world must be divisible by tp · pp · sp") {
    const auto msg = error_message([] { (void)vbucket::data_parallel_size({12, 2, 2, 2}); });
    CHECK(msg == "world size 12 is not divisible by tp · pp · sp = 8 (tp 2 × pp 2 × sp 2)");
  }
  SUBCASE("degrees must be positive") {
    CHECK(error_message([] { (void)vbucket::data_parallel_size({0}); }) ==
          "world size must be a positive integer, got 0");
    CHECK(error_message([] {
            (void)vbucket::data_parallel_size({8, 0, 1, 1});
          }) == "tensor-parallel size must be a positive integer, got 0");
    CHECK(error_message([] {
            (void)vbucket::data_parallel_size({8, 1, -1, 1});
          }) == "pipeline-parallel size must be a positive integer, got -1");
    CHECK(error_message([] {
            (void)vbucket::data_parallel_size({8, 1, 1, 0});
          }) == "sequence-parallel size must be a positive integer, got 0");
  }
  SUBCASE("an overflowing group is an error, not undefined behaviour") {
    constexpr auto big = std::int64_t{1} << 40;
    CHECK(contains(error_message([] {
                     (void)vbucket::data_parallel_size({8, big, big, 1});
                   }),
                   "overflows"));
  }
  SUBCASE("tp must divide the model dimensions") {
    const vbucket::model_dimension dims[] = {{"heads", 16, false}, {"hidden size", 1152, false}};
    CHECK(vbucket::data_parallel_size({16, 8, 1, 1}, dims) == 2);
    CHECK(error_message([&] {
            (void)vbucket::data_parallel_size({12, 3, 1, 1}, dims);
          }) == "tensor-parallel size 3 does not divide heads = 16");
    const vbucket::model_dimension odd_hidden[] = {{"hidden size", 1000, false}};
    CHECK(error_message([&] {
            (void)vbucket::data_parallel_size({16, 16, 1, 1}, odd_hidden);
          }) == "tensor-parallel size 16 does not divide hidden size = 1000");
  }
  SUBCASE("Ulysses sequence parallelism splits heads too") {
    const vbucket::model_dimension heads[] = {{"heads", 24, true}};
    CHECK(vbucket::data_parallel_size({48, 2, 1, 3}, heads) == 8);
    CHECK(error_message([&] {
            (void)vbucket::data_parallel_size({64, 2, 1, 8}, heads);
          }) == "tp · sp = 16 does not divide heads = 24");
    const vbucket::model_dimension bad[] = {{"heads", 0, false}};
    CHECK(error_message([&] { (void)vbucket::data_parallel_size({8}, bad); }) ==
          "heads must be a positive integer, got 0");
  }
}

TEST_CASE("global batch and gradient accumulation") {
  CHECK(vbucket::global_batch_size(1, 1) == 1);
  CHECK(vbucket::global_batch_size(141, 64) == 9024);
  CHECK(error_message([] { (void)vbucket::global_batch_size(0, 8); }) ==
        "per-rank batch size must be a positive integer, got 0");
  CHECK(contains(error_message([] {
                   (void)vbucket::global_batch_size(std::numeric_limits<std::int64_t>::max(), 2);
                 }),
                 "global batch size overflows"));

  SUBCASE("exact") {
    CHECK(vbucket::gradient_accumulation(256, 4, 8) == vbucket::accumulation_plan{8, 256});
    CHECK(vbucket::gradient_accumulation(32, 4, 8) == vbucket::accumulation_plan{1, 32});
    CHECK(error_message([] { (void)vbucket::gradient_accumulation(1000, 4, 32); }) ==
          "target global batch 1000 is not a multiple of one step's global batch 128 (per-rank "
          "batch 4 × data-parallel size 32); the nearest are 896 and 1024");
    CHECK(error_message([] { (void)vbucket::gradient_accumulation(100, 4, 32); }) ==
          "target global batch 100 is smaller than one step's global batch 128 (per-rank batch "
          "4 × data-parallel size 32)");
    CHECK(error_message([] { (void)vbucket::gradient_accumulation(0, 4, 32); }) ==
          "target global batch size must be a positive integer, got 0");
  }
  SUBCASE("rounded") {
    using enum vbucket::accumulation_rounding;
    CHECK(vbucket::gradient_accumulation(1000, 4, 32, up) == vbucket::accumulation_plan{8, 1024});
    CHECK(vbucket::gradient_accumulation(1000, 4, 32, down) == vbucket::accumulation_plan{7, 896});
    CHECK(vbucket::gradient_accumulation(1000, 4, 32, nearest) ==
          vbucket::accumulation_plan{8, 1024});
    CHECK(vbucket::gradient_accumulation(950, 4, 32, nearest) ==
          vbucket::accumulation_plan{7, 896});
    CHECK(vbucket::gradient_accumulation(960, 4, 32, nearest) ==
          vbucket::accumulation_plan{8, 1024});  // a tie goes up
    // A target below one step still takes one step.
    CHECK(vbucket::gradient_accumulation(100, 4, 32, down) == vbucket::accumulation_plan{1, 128});
    CHECK(vbucket::gradient_accumulation(10, 4, 32, nearest) == vbucket::accumulation_plan{1, 128});
    // A multiple is exact in every mode.
    for (auto r : {exact, up, down, nearest})
      CHECK(vbucket::gradient_accumulation(384, 4, 32, r) == vbucket::accumulation_plan{3, 384});
  }
}

TEST_CASE("latent frames, latent pixels and tokens") {
  CHECK(vbucket::latent_frames(1) == 1);
  CHECK(vbucket::latent_frames(4) == 1);
  CHECK(vbucket::latent_frames(5) == 2);
  CHECK(vbucket::latent_frames(51) == 13);
  CHECK(vbucket::latent_frames(102) == 26);
  CHECK(vbucket::latent_frames(129) == 33);
  CHECK(vbucket::latent_frames(102, 1) == 102);
  CHECK(vbucket::latent_frames(17, 8) == 3);
  CHECK(vbucket::latent_pixels(360, 640) == 900);
  CHECK(vbucket::latent_pixels(240, 426) == 399);  // H·W / 256, integer division
  CHECK(vbucket::latent_pixels(256, 256, 8) == 1024);
  CHECK(vbucket::token_count(51, 144, 256) == 13 * 144);
  CHECK(vbucket::token_count(33, 256, 256, {8, 8}) == 5 * 1024);
  CHECK(error_message([] { (void)vbucket::latent_frames(0); }) ==
        "frames must be a positive integer, got 0");
  CHECK(error_message([] { (void)vbucket::latent_frames(5, 0); }) ==
        "temporal compression must be a positive integer, got 0");
  CHECK(error_message([] { (void)vbucket::latent_pixels(8, 8); }) ==
        "8×8 is smaller than one latent pixel at spatial compression 16");
  CHECK(error_message([] { (void)vbucket::latent_pixels(8, 8, 0); }) ==
        "spatial compression must be a positive integer, got 0");
}

TEST_CASE("bucket tokens use the largest aspect entry") {
  vbucket::user_tables tables;
  tables.add("small", 64 * 64,
             vbucket::aspect_table({{"1:1", 1.0, 64, 64}, {"wide", 0.5, 48, 96}}));
  tables.add("big", 128 * 128,
             vbucket::aspect_table({{"tall", 2.0, 192, 96}, {"1:1", 1.0, 128, 128}}));
  const std::vector<vbucket::bucket_spec> specs = {
      {"small", 1, 1.0, {}, 64},
      {"small", 9, 0.5, {}, 8},
      {"big", 17, 0.5, {}, 2},
      {"big", 33, 0.0, {}, std::nullopt},
  };
  const vbucket::bucket_config cfg(specs, tables);
  const auto buckets = vbucket::batch_buckets(cfg);
  REQUIRE(buckets.size() == 4);
  // Order: most pixels first, then most frames first.
  CHECK(buckets[0].name() == "big:33");
  CHECK(buckets[0].tokens == 9 * (192 * 96 / 256));
  CHECK_FALSE(buckets[0].enabled());
  CHECK(buckets[1].name() == "big:17");
  CHECK(buckets[1].tokens == 5 * 72);
  CHECK(buckets[1].batch_size == 2);
  CHECK(buckets[2].name() == "small:9");
  CHECK(buckets[2].tokens == 3 * 18);  // 48·96 = 4608 > 64·64
  CHECK(buckets[3].name() == "small:1");
  CHECK(buckets[3].tokens == 18);
  CHECK(buckets[3].batch_size == 64);
  CHECK(vbucket::find_batch_bucket(buckets, "small", 9) == 2);
  CHECK(vbucket::find_batch_bucket(buckets, "small", 10) == 4);

  // Every ratio of a (resolution, frames) pair has the pair's tokens.
  for (std::size_t id = 0; id < cfg.num_buckets(); ++id) {
    const auto k = cfg.key(static_cast<vbucket::bucket_id>(id));
    CHECK(vbucket::bucket_tokens(cfg, static_cast<vbucket::bucket_id>(id)) ==
          vbucket::bucket_tokens(cfg, static_cast<std::size_t>(k.resolution),
                                 static_cast<std::size_t>(k.frames_index)));
  }
  // Other compressions.
  CHECK(vbucket::batch_buckets(cfg, {1, 8})[0].tokens == 33 * (192 * 96 / 64));

  const auto global = vbucket::global_batch_sizes(cfg, 8);
  REQUIRE(global.size() == cfg.num_buckets());
  for (std::size_t id = 0; id < global.size(); ++id)
    CHECK(global[id] == cfg.batch_size(static_cast<vbucket::bucket_id>(id)) * 8);

  // A bucket too small for the compression is named.
  tables.add("tiny", 16, vbucket::aspect_table({{"1:1", 1.0, 4, 4}}));
  const std::vector<vbucket::bucket_spec> tiny = {{"tiny", 5, 1.0, {}, 1}};
  const vbucket::bucket_config tiny_cfg(tiny, tables);
  CHECK(error_message([&] { (void)vbucket::batch_buckets(tiny_cfg); }) ==
        "bucket \"tiny\" -> \"5\": 4×4 is smaller than one latent pixel at spatial compression "
        "16");
}

#if VBUCKET_BATCH_SIZE_TEST_JSON
TEST_CASE("bucket tokens of the Open-Sora v1.2 config") {
  const auto cfg = vbucket::json::load_bucket_config(
      std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v12.json",
      vbucket::opensora_v12_tables{});
  const auto buckets = vbucket::batch_buckets(cfg);
  CHECK(buckets.size() == 40);
  std::size_t enabled = 0;
  for (const auto& b : buckets) enabled += b.enabled() ? 1u : 0u;
  CHECK(enabled == 37);
  // Largest entries of the v1.2 tables: 360p 350×662, 2048 1024×4096, 144p 144×256.
  const auto at = [&](std::string_view res, std::int64_t frames) {
    const auto i = vbucket::find_batch_bucket(buckets, res, frames);
    REQUIRE(i < buckets.size());
    return buckets[i];
  };
  CHECK(at("360p", 102).tokens == 26 * (350 * 662 / 256));
  CHECK(at("360p", 102).batch_size == 4);
  CHECK(at("2048", 1).tokens == 16384);
  CHECK(at("144p", 1).tokens == 144);
  CHECK(at("144p", 408).tokens == 102 * 144);
  CHECK_FALSE(at("720p", 204).enabled());
}
#endif

TEST_CASE("micro-batches over the caller's contiguous range") {
  std::vector<named_clip> batch(10);
  for (int i = 0; i < 10; ++i) batch[static_cast<std::size_t>(i)] = {"clip" + std::to_string(i), i};

  SUBCASE("m divides unevenly: the last micro-batch is shorter") {
    const auto parts = vbucket::micro_batches(batch, 4);
    REQUIRE(parts.size() == 3);
    CHECK(parts[0].size() == 4);
    CHECK(parts[1].size() == 4);
    CHECK(parts[2].size() == 2);
    CHECK(parts[2][1].path == "clip9");
    int seen = 0;
    for (std::span<named_clip> part : parts)
      for (const auto& c : part) CHECK(c.frames == seen++);
    CHECK(seen == 10);
    CHECK(parts.end() - parts.begin() == 3);
    CHECK((*(parts.begin() + 2)).data() == batch.data() + 8);
  }
  SUBCASE("m larger than the batch: one micro-batch, the whole batch") {
    const auto parts = vbucket::micro_batches(batch, 64);
    REQUIRE(parts.size() == 1);
    CHECK(parts.front().data() == batch.data());
    CHECK(parts.front().size() == 10);
  }
  SUBCASE("m = 1: one item each") {
    const auto parts = vbucket::micro_batches(batch, 1);
    REQUIRE(parts.size() == 10);
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(parts[static_cast<std::ptrdiff_t>(i)].size() == 1);
      CHECK(parts[static_cast<std::ptrdiff_t>(i)].data() == &batch[i]);
    }
  }
  SUBCASE("m equal to the batch") { CHECK(vbucket::micro_batches(batch, 10).size() == 1); }
  SUBCASE("chunks alias the caller's storage") {
    for (auto part : vbucket::micro_batches(batch, 3))
      for (auto& c : part) c.frames *= 2;
    CHECK(batch[9].frames == 18);
  }
  SUBCASE("const ranges give spans of const") {
    const std::vector<named_clip>& view = batch;
    auto parts = vbucket::micro_batches(view, 3);
    static_assert(std::same_as<decltype(*parts.begin()), std::span<const named_clip>>);
    CHECK(parts.size() == 4);
  }
  SUBCASE("spans, arrays and an empty batch") {
    int raw[7] = {0, 1, 2, 3, 4, 5, 6};
    CHECK(vbucket::micro_batches(raw, 2).size() == 4);
    CHECK(vbucket::micro_batches(std::span<int>(raw).subspan(1, 4), 2).size() == 2);
    std::vector<int> empty;
    const auto none = vbucket::micro_batches(empty, 4);
    CHECK(none.size() == 0);
    CHECK(none.begin() == none.end());
  }
  SUBCASE("items of several elements: a clip's frames for VAE encoding") {
    // 5 frames of 2×3 values each, in one flat buffer; micro-batches of 2 frames.
    std::vector<float> frames(5 * 6);
    std::iota(frames.begin(), frames.end(), 0.0f);
    const auto parts = vbucket::micro_batches(frames, 2, 6);
    REQUIRE(parts.size() == 3);
    CHECK(parts[0].size() == 12);
    CHECK(parts[2].size() == 6);
    CHECK(parts[2][0] == 24.0f);
    CHECK(error_message([&] { (void)vbucket::micro_batches(frames, 2, 7); }) ==
          "a batch of 30 elements is not a whole number of items of 7 elements");
    CHECK(error_message([&] { (void)vbucket::micro_batches(frames, 2, 0); }) ==
          "micro-batch item extent must be at least 1");
  }
  SUBCASE("m = 0 is an error") {
    CHECK(error_message([&] { (void)vbucket::micro_batches(batch, 0); }) ==
          "micro-batch size must be at least 1");
  }
  SUBCASE("the iterator is random access") {
    const auto parts = vbucket::micro_batches(batch, 3);
    auto it = parts.begin();
    it += 3;
    CHECK((*it).size() == 1);
    CHECK(it[-1].size() == 3);
    CHECK(it > parts.begin());
    CHECK(--it == parts.begin() + 2);
    CHECK(std::ranges::distance(parts) == 4);
  }
}

TEST_CASE("micro-batch count") {
  CHECK(vbucket::micro_batch_count(0, 4) == 0);
  CHECK(vbucket::micro_batch_count(1, 4) == 1);
  CHECK(vbucket::micro_batch_count(8, 4) == 2);
  CHECK(vbucket::micro_batch_count(9, 4) == 3);
  CHECK(error_message([] { (void)vbucket::micro_batch_count(-1, 4); }) ==
        "item count must not be negative, got -1");
  CHECK(error_message([] { (void)vbucket::micro_batch_count(4, 0); }) ==
        "micro-batch size must be a positive integer, got 0");
}

TEST_CASE("choosing a micro-batch size under a memory budget") {
  // Predicted peak (GiB) of a VAE encode of m clips: 2 GiB fixed + 3 GiB per clip.
  int calls = 0;
  auto predict = [&calls](std::int64_t m) {
    ++calls;
    return 2.0 + 3.0 * static_cast<double>(m);
  };
  CHECK(vbucket::choose_micro_batch(16, 26.0, predict, false) == vbucket::micro_batch_plan{8, 2});
  CHECK(calls <= 6);  // a binary search, not a scan
  CHECK(vbucket::choose_micro_batch(16, 26.0, predict) == vbucket::micro_batch_plan{8, 2});
  // 9 clips under a limit of 8: 5 + 4 balanced, 8 + 1 not.
  CHECK(vbucket::choose_micro_batch(9, 26.0, predict) == vbucket::micro_batch_plan{5, 2});
  CHECK(vbucket::choose_micro_batch(9, 26.0, predict, false) == vbucket::micro_batch_plan{8, 2});
  // Everything fits: one micro-batch of the whole batch.
  CHECK(vbucket::choose_micro_batch(5, 1000.0, predict) == vbucket::micro_batch_plan{5, 1});
  // Only one item at a time.
  CHECK(vbucket::choose_micro_batch(7, 5.0, predict) == vbucket::micro_batch_plan{1, 7});
  // The exact boundary fits.
  CHECK(vbucket::choose_micro_batch(100, 32.0, predict, false).size == 10);

  CHECK(error_message([&] { (void)vbucket::choose_micro_batch(4, 4.0, predict); }) ==
        "a micro-batch of 1 is predicted to need 5.000000, over the budget 4.000000");
  CHECK(error_message([&] { (void)vbucket::choose_micro_batch(0, 4.0, predict); }) ==
        "batch size must be a positive integer, got 0");
  CHECK(error_message([] {
          (void)vbucket::choose_micro_batch(
              4, 4.0, [](std::int64_t) { return std::numeric_limits<double>::quiet_NaN(); });
        }) == "predicted memory of a micro-batch of 1 is NaN");

  // The chosen plan drives micro_batches directly.
  std::vector<int> clips(9);
  const auto plan = vbucket::choose_micro_batch(9, 26.0, predict);
  const auto parts = vbucket::micro_batches(clips, static_cast<std::size_t>(plan.size));
  CHECK(static_cast<std::int64_t>(parts.size()) == plan.count);
  for (auto part : parts) CHECK(predict(static_cast<std::int64_t>(part.size())) <= 26.0);
}
