/// Tests of vbucket/plan/opensora_strings.hpp: Open-Sora's "idx-T-H-W" strings, alone and for every
/// sample of a plan's batches.
#include "vbucket/plan/opensora_strings.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint64_t
#include <span>     // std::span
#include <vector>   // std::vector

#include "vbucket/plan/epoch_plan.hpp"

#include "vbucket_test/random_plans.hpp"

namespace {
using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::epoch_plan;
using vbucket_test::small_config;
}  // namespace

TEST_CASE("opensora_strings: Open-Sora idx-T-H-W strings") {
  const vbucket::indexed_sample s{123456, 65, 272, 480};
  CHECK(vbucket::encode_opensora_index(s) == "123456-65-272-480");
  CHECK(vbucket::decode_opensora_index("123456-65-272-480") == s);
  static_assert(vbucket::try_decode_opensora_index("0-1-2-3")->width == 3);
  for (const char* bad :
       {"", "1-2-3", "1-2-3-4-5", "a-1-2-3", "1--2-3", "-1-2-3-4", "1-2-3-", "1-2-3-4 ", " 1-2-3-4",
        "1-2-3-99999999999999999999", "99999999999999999999999-1-1-1"}) {
    CAPTURE(bad);
    CHECK_FALSE(vbucket::try_decode_opensora_index(bad).has_value());
    CHECK_THROWS_AS((void)vbucket::decode_opensora_index(bad), vbucket::error);
  }
  const bucket_config c = small_config(4, 2, 1);
  std::vector<bucket_id> ids(40);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % c.num_buckets());
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c);
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const auto b = plan.global_batch(p);
    const auto strings = vbucket::encode_opensora_batch(b);
    REQUIRE(strings.size() == b.indices.size());
    for (std::size_t k = 0; k < strings.size(); ++k) {
      const auto d = vbucket::decode_opensora_index(strings[k]);
      CHECK(d.index == b.indices[k]);
      CHECK(d.frames == b.frames);
      CHECK(d.height == b.height);
      CHECK(d.width == b.width);
    }
  }
}
