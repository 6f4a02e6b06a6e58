/// Tests of vbucket/plan/plan_options.hpp: policy names and the default batch cost (latent tokens).
#include "vbucket/plan/plan_options.hpp"

#include <doctest/doctest.h>

namespace {
using vbucket::incomplete_policy;
}  // namespace

TEST_CASE("plan_options: policy names") {
  for (auto p : {incomplete_policy::pad, incomplete_policy::drop, incomplete_policy::downgrade})
    CHECK(vbucket::parse_policy(vbucket::policy_name(p)) == p);
  CHECK_FALSE(vbucket::parse_policy("pads").has_value());
}

TEST_CASE("plan_options: latent tokens") {
  CHECK(vbucket::latent_tokens(1, 256, 256) == 256.0);
  CHECK(vbucket::latent_tokens(5, 256, 256) == 512.0);
  CHECK(vbucket::latent_tokens(129, 720, 1280) == 33.0 * 45.0 * 80.0);
  CHECK(vbucket::latent_tokens(4, 16, 16) == 1.0);
}

TEST_CASE("plan_options: one set of defaults (rng numpy, seed 0, epoch 0, pad, world 1)") {
  // The decision: Open-Sora's draws unless fast is asked for.
  static_assert(vbucket::defaults::rng == vbucket::rng_mode::numpy);
  constexpr vbucket::plan_options o{};
  static_assert(o.seed == vbucket::defaults::seed && o.epoch == vbucket::defaults::epoch);
  static_assert(o.policy == vbucket::defaults::policy);
  CHECK(vbucket::parse_rng_mode(vbucket::to_string(vbucket::defaults::rng)) ==
        vbucket::defaults::rng);
}
