/// Tests of vbucket/bucket/batch.hpp: what a planned bucket and a batch hold before and after
/// planning.
#include "vbucket/bucket/batch.hpp"

#include <doctest/doctest.h>

#include <cstdint>      // std::uint32_t
#include <span>         // std::span
#include <type_traits>  // std::is_aggregate_v
#include <vector>       // std::vector

#include "vbucket/bucket/rules.hpp"  // opensora_v2_tables
#include "vbucket/plan/epoch_plan.hpp"

static_assert(std::is_aggregate_v<vbucket::plan_bucket>);
static_assert(std::is_aggregate_v<vbucket::batch>);
static_assert(std::is_trivially_copyable_v<vbucket::batch>);  // a span, not a vector

TEST_CASE("batch: defaults say nothing is planned") {
  constexpr vbucket::plan_bucket pb{};
  static_assert(!pb.image());
  static_assert(vbucket::plan_bucket{.frames = 1}.image());
  CHECK(pb.downgrade_to == vbucket::no_bucket);
  CHECK(pb.batch_size == 0);
  const vbucket::batch b{};
  CHECK(b.bucket == vbucket::no_bucket);
  CHECK(b.indices.empty());
  CHECK_FALSE(b.repeat);
}

TEST_CASE("batch: a plan's batches have the bucket's shape and batch size of indices") {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 3},
                                                   {"256px", 33, 1.0, std::nullopt, 2}};
  const vbucket::bucket_config c(specs, vbucket::opensora_v2_tables{});
  const vbucket::bucket_id image = c.find("256px", 1, "1:1"), video = c.find("256px", 33, "16:9");
  const std::vector<vbucket::bucket_id> ids{image, video, image, video, image, vbucket::no_bucket};
  const vbucket::epoch_plan plan =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), c);
  REQUIRE(plan.num_batches() == 2);
  const vbucket::plan_bucket& pi = plan.bucket(image);
  CHECK(pi.image());
  CHECK(pi.grouped == 3);
  CHECK(pi.batches == 1);
  CHECK(pi.height == 256);
  CHECK_FALSE(plan.bucket(video).image());
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const vbucket::batch b = plan.global_batch(p);
    CHECK(b.position == p);
    CHECK(b.indices.size() == plan.bucket(b.bucket).batch_size);
    CHECK(b.frames == plan.bucket(b.bucket).frames);
    CHECK(b.width == plan.bucket(b.bucket).width);
    for (std::uint32_t i : b.indices) CHECK(ids[i] == b.bucket);
  }
}
