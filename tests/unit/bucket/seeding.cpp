/// Tests of vbucket/bucket/seeding.hpp: the NumPy epoch seed is Open-Sora's seed + epoch, exact
/// past 2^64; fast mode is fast_source(seed, epoch) and refuses seeds of 2^64 and more; the plan's
/// 64-bit seed; assign_epoch equals the rule with each mode's source, sample by sample.
#include "vbucket/bucket/seeding.hpp"

#include "vbucket/sample/batch_sampler.hpp"  // source_family

#include <doctest/doctest.h>

#include <cstdint>   // std::int64_t, std::uint64_t
#include <optional>  // std::nullopt
#include <random>    // std::mt19937_64
#include <string>    // std::string
#include <vector>    // std::vector

#include "vbucket_test/configs.hpp"

namespace {

using vbucket::big_seed;
using vbucket::rng_mode;

// spec, draw_v2_config, draw_v12_config: configs whose draws matter.
using namespace vbucket_test;

vbucket::meta_table videos(std::size_t n) {
  std::mt19937_64 gen(99);
  const double rates[] = {24.0, 25.0, 30.0, 60.0};
  vbucket::meta_table t;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = gen();
    const auto h = static_cast<std::int64_t>(200 + (r >> 8) % 1900);
    const auto w = static_cast<std::int64_t>(200 + (r >> 24) % 1900);
    const auto frames =
        (r & 7) == 0 ? std::int64_t{1} : static_cast<std::int64_t>(20 + (r >> 40) % 300);
    t.push_back({frames, h, w, rates[(r >> 4) % 4]});
  }
  return t;
}

}  // namespace

TEST_CASE("seeding: rng_mode names") {
  CHECK(vbucket::parse_rng_mode("fast") == rng_mode::fast);
  CHECK(vbucket::parse_rng_mode("numpy") == rng_mode::numpy);
  CHECK(vbucket::parse_rng_mode("NumPy") == std::nullopt);
  CHECK(vbucket::parse_rng_mode("") == std::nullopt);
  CHECK(vbucket::to_string(rng_mode::fast) == "fast");
  CHECK(vbucket::to_string(rng_mode::numpy) == "numpy");
}

TEST_CASE("seeding: the NumPy epoch seed is seed + epoch, exact at any size") {
  struct sum_case {
    const char* seed;
    std::uint64_t epoch;
    const char* sum;  // worked by hand in decimal
  };
  const sum_case cases[] = {
      {"0", 0, "0"},
      {"42", 3, "45"},
      {"18446744073709551615", 0, "18446744073709551615"},
      {"18446744073709551615", 1, "18446744073709551616"},
      {"18446744073709551615", 18446744073709551615ULL, "36893488147419103230"},
      {"99999999999999999999999999999", 1, "100000000000000000000000000000"},
      {"1267650600228229401496703205376", 5, "1267650600228229401496703205381"},
  };
  for (const sum_case& c : cases) {
    INFO(c.seed << " + " << c.epoch);
    CHECK(vbucket::numpy_epoch_seed(big_seed::parse(c.seed), c.epoch).to_string() == c.sum);
    CHECK(vbucket::numpy_epoch_seed(big_seed::parse(c.seed), c.epoch) == big_seed::parse(c.sum));
  }
  const vbucket::numpy_source s =
      vbucket::numpy_epoch_source(big_seed::parse("18446744073709551615"), 2, 17);
  CHECK(s.seed() == big_seed::parse("18446744073709551617"));
  CHECK(s.num_bucket() == 17);
}

TEST_CASE("seeding: fast mode takes seeds below 2^64 and refuses larger ones") {
  CHECK(vbucket::seed_u64(big_seed::parse("18446744073709551615")) == 18446744073709551615ULL);
  CHECK(vbucket::seed_u64(big_seed::parse("4294967296")) == 4294967296ULL);
  CHECK(vbucket::seed_u64(big_seed::parse("18446744073709551616")) == std::nullopt);
  CHECK(vbucket::fast_epoch_source(big_seed(7), 3).key() == vbucket::fast_source(7, 3).key());
  CHECK(vbucket::fast_epoch_source(big_seed::parse("18446744073709551615"), 9).key() ==
        vbucket::fast_source(18446744073709551615ULL, 9).key());
  CHECK_THROWS_WITH_AS((void)vbucket::fast_epoch_source(big_seed::parse("18446744073709551616"), 0),
                       doctest::Contains("seed 18446744073709551616 does not fit in 64 bits"),
                       vbucket::error);
  CHECK_THROWS_AS(vbucket::check_seed(rng_mode::fast, big_seed::parse("18446744073709551616")),
                  vbucket::error);
  CHECK_NOTHROW(vbucket::check_seed(rng_mode::numpy, big_seed::parse("18446744073709551616")));
}

TEST_CASE("seeding: the plan's 64-bit seed") {
  for (const std::uint64_t v : {0ULL, 1ULL, 4294967296ULL, 18446744073709551615ULL})
    CHECK(vbucket::plan_seed(big_seed(v)) == v);
  // Above 2^64 the words are mixed, not truncated: 2^64 and 2^64 · 2 keep apart from 0.
  const std::uint64_t a = vbucket::plan_seed(big_seed::parse("18446744073709551616"));
  const std::uint64_t b = vbucket::plan_seed(big_seed::parse("36893488147419103232"));
  CHECK(a != 0);
  CHECK(b != 0);
  CHECK(a != b);
  CHECK(a == vbucket::plan_seed(big_seed::parse("18446744073709551616")));
}

TEST_CASE("seeding: assign_epoch is the rule with each mode's source, sample by sample") {
  const vbucket::meta_table t = videos(3000);
  SUBCASE("numpy: Open-Sora's seed + epoch, also past 2^64") {
    const vbucket::bucket_config c = draw_v2_config();
    const vbucket::opensora_v2_rule rule{};
    CHECK(vbucket::assign_epoch(c, t, rule, rng_mode::numpy, big_seed(40), 2) ==
          vbucket::assign_all(c, t, rule, vbucket::numpy_source(big_seed(42), c.num_buckets())));
    const auto big = vbucket::assign_epoch(c, t, rule, rng_mode::numpy,
                                           big_seed::parse("18446744073709551615"), 3, 3);
    CHECK(big == vbucket::assign_all(c, t, rule,
                                     vbucket::numpy_source(big_seed::parse("18446744073709551618"),
                                                           c.num_buckets())));
  }
  SUBCASE("fast, Open-Sora 1.2 rule") {
    const vbucket::bucket_config c = draw_v12_config();
    const vbucket::opensora_v12_rule rule{};
    CHECK(vbucket::assign_epoch(c, t, rule, rng_mode::fast, big_seed(5), 4) ==
          vbucket::assign_all(c, t, rule, vbucket::fast_source(5, 4)));
  }
  SUBCASE("fast, Open-Sora 2.0 rule: the sequential rule's buckets (what the README shows)") {
    const vbucket::bucket_config c = draw_v2_config();
    const vbucket::opensora_v2_rule rule{};
    for (const std::uint64_t epoch : {0ULL, 1ULL, 7ULL}) {
      INFO("epoch " << epoch);
      CHECK(vbucket::assign_epoch(c, t, rule, rng_mode::fast, big_seed(11), epoch) ==
            vbucket::assign_all(c, t, rule, vbucket::fast_source(11, epoch)));
    }
  }
  SUBCASE("epochs differ") {
    const vbucket::bucket_config c = draw_v2_config();
    const vbucket::opensora_v2_rule rule{};
    for (const rng_mode mode : {rng_mode::fast, rng_mode::numpy})
      CHECK(vbucket::assign_epoch(c, t, rule, mode, big_seed(1), 0) !=
            vbucket::assign_epoch(c, t, rule, mode, big_seed(1), 1));
  }
  CHECK_THROWS_AS(
      (void)vbucket::assign_epoch(draw_v12_config(), t, vbucket::opensora_v12_rule{},
                                  rng_mode::fast, big_seed::parse("18446744073709551616"), 0),
      vbucket::error);
}

TEST_CASE("seeding: numpy_seed_family draws as numpy_epoch_source, whatever the plan seed") {
  const vbucket::big_seed big = vbucket::big_seed::parse("36893488147419103237");  // 2^65 + 5
  const vbucket::numpy_seed_family family{big};
  for (const std::uint64_t epoch : {0u, 1u, 7u}) {
    const vbucket::numpy_source want = vbucket::numpy_epoch_source(big, epoch, 13);
    for (const std::uint64_t plan_seed :
         {std::uint64_t{0}, std::uint64_t{99}, vbucket::plan_seed(big)}) {
      const vbucket::numpy_source got = family(plan_seed, epoch, 13);
      for (std::uint64_t i = 0; i < 5; ++i) {
        auto a = got.stream(i, 2);
        auto b = want.stream(i, 2);
        CHECK(a.random() == b.random());
      }
    }
  }
  // The family is a sampler's source family, and differs from the epoch's neighbour.
  static_assert(vbucket::source_family<vbucket::numpy_seed_family>);
  auto e0 = family(0, 0, 13).stream(0, 0);
  auto e1 = family(0, 1, 13).stream(0, 0);
  CHECK(e0.random() != e1.random());
}
