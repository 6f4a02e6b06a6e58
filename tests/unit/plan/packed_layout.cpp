/// Tests of vbucket/plan/packed_layout.hpp on hand-made packed batches: offsets and cu_seqlens
/// written out by hand, the integer sequence length against `latent_tokens`, a custom length,
/// the int32 limit, and the largest batch of a plan.
#include "vbucket/plan/packed_layout.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::max
#include <cstdint>    // std::int64_t, std::uint32_t
#include <span>       // std::span
#include <vector>     // std::vector

#include "vbucket/bucket/rules.hpp"       // opensora_v2_tables
#include "vbucket/plan/plan_options.hpp"  // latent_tokens

#include "vbucket_test/errors.hpp"

namespace {

using vbucket::bucket_id;
using vbucket::packed_batch;
using vbucket::packed_bucket;
using vbucket_test::contains;
using vbucket_test::error_message;

/// Three shapes: an image 256×256, 33 frames 144×256 (not a multiple of 16 wide), 5 frames 20×30.
const std::vector<packed_bucket> shapes = {
    {.frames = 1, .height = 256, .width = 256},
    {.frames = 33, .height = 144, .width = 250},
    {.frames = 5, .height = 20, .width = 30},
};

packed_batch batch_of(const std::vector<std::uint32_t>& indices,
                      const std::vector<bucket_id>& buckets) {
  packed_batch b;
  b.indices = indices;
  b.buckets = buckets;
  b.bucket_info = shapes;
  b.position = 17;
  return b;
}

}  // namespace

TEST_CASE("packed_layout: the integer sequence length rounds partial patches up") {
  constexpr vbucket::latent_sequence_length len;
  static_assert(len(1, 256, 256) == 256);
  static_assert(len(5, 256, 256) == 512);
  static_assert(len(33, 144, 250) == 9 * 9 * 16);  // ⌈250 / 16⌉ = 16
  static_assert(len(5, 20, 30) == 2 * 2 * 2);
  static_assert(len(0, 16, 16) == 1);  // no frame counts as one latent frame
  // Equal to latent_tokens where H and W are multiples of 16.
  for (std::int64_t t : {1, 5, 17, 33, 129})
    for (std::int64_t h : {16, 144, 256, 720})
      CHECK(static_cast<double>(len(t, h, 1280)) == vbucket::latent_tokens(t, h, 1280));
}

TEST_CASE("packed_layout: offsets and cu_seqlens, clip after clip") {
  const std::vector<std::uint32_t> indices{40, 7, 9};
  const std::vector<bucket_id> buckets{1, 0, 2};
  const vbucket::packed_layout l = vbucket::make_packed_layout(batch_of(indices, buckets));
  REQUIRE(l.size() == 3);
  const std::size_t a = 33 * 144 * 250 * 3, b = 256 * 256 * 3, c = 5 * 20 * 30 * 3;
  CHECK(l.clip_offsets == std::vector<std::size_t>{0, a, a + b, a + b + c});
  CHECK(l.cu_seqlens == std::vector<std::int32_t>{0, 1296, 1296 + 256, 1296 + 256 + 8});
  CHECK(l.max_seqlen == 1296);
  CHECK(l.bytes() == a + b + c);
  CHECK(l.tokens() == 1560);
  // A custom length: frames only.
  const auto frames = [](std::int64_t t, std::int64_t, std::int64_t) { return t; };
  const vbucket::packed_layout f = vbucket::make_packed_layout(batch_of(indices, buckets), frames);
  CHECK(f.cu_seqlens == std::vector<std::int32_t>{0, 33, 34, 39});
  CHECK(f.clip_offsets == l.clip_offsets);
  // An empty batch: one offset and one cumulative length, both 0.
  const vbucket::packed_layout e = vbucket::make_packed_layout(batch_of({}, {}));
  CHECK(e.size() == 0);
  CHECK(e.bytes() == 0);
  CHECK(e.tokens() == 0);
  CHECK(vbucket::packed_layout{}.size() == 0);
}

TEST_CASE("packed_layout: lengths that are not positive or overflow int32 are errors") {
  const std::vector<std::uint32_t> indices{40, 7};
  const std::vector<bucket_id> buckets{1, 2};
  const auto negative = [](std::int64_t t, std::int64_t, std::int64_t) { return 5 - t; };
  CHECK(contains(error_message([&] {
                   (void)vbucket::make_packed_layout(batch_of(indices, buckets), negative);
                 }),
                 "sample 40 (33x144x250) has sequence length -28"));
  const auto huge = [](std::int64_t, std::int64_t, std::int64_t) { return std::int64_t{1} << 30; };
  CHECK(contains(
      error_message([&] { (void)vbucket::make_packed_layout(batch_of(indices, buckets), huge); }),
      "the batch at position 17 has more than 2^31 - 1 tokens"));
  const std::vector<std::uint32_t> one{40};
  const std::vector<bucket_id> first{1};
  CHECK(vbucket::make_packed_layout(batch_of(one, first), huge).tokens() == (1 << 30));
}

TEST_CASE("packed_layout: max_packed_batch_bytes is the largest layout of the plan") {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 8},
                                                   {"256px", 33, 1.0, std::nullopt, 4}};
  const vbucket::bucket_config c(specs, vbucket::opensora_v2_tables{});
  std::vector<bucket_id> ids;
  for (std::uint32_t i = 0; i < 60; ++i)
    ids.push_back(c.find("256px", i % 4 == 0 ? 33 : 1, i % 3 == 0 ? "16:9" : "1:1"));
  const vbucket::packed_plan plan = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c,
                                                              {.seed = 5, .token_budget = 9000.0});
  REQUIRE(plan.num_batches() > 1);
  std::size_t largest = 0;
  for (std::uint64_t id = 0; id < plan.num_batches(); ++id)
    largest = std::max(largest, vbucket::make_packed_layout(plan.make_batch(id)).bytes());
  CHECK(vbucket::max_packed_batch_bytes(plan) == largest);
  CHECK(vbucket::max_packed_batch_bytes(plan, 4) == 4 * largest);
  const std::vector<bucket_id> none;
  CHECK(vbucket::max_packed_batch_bytes(vbucket::make_packed_plan(
            std::span<const bucket_id>(none), c, {.token_budget = 9000.0})) == 0);
}
