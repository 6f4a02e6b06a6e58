/// Tests of vbucket/plan/plan_state.hpp: the resume state as text, round trips and malformed text.
#include "vbucket/plan/plan_state.hpp"

#include <doctest/doctest.h>

#include "vbucket/base/error.hpp"

TEST_CASE("plan_state: resume state as text") {
  const vbucket::plan_state s{1234, 7, 98765};
  CHECK(s.to_string() == "vbucket-plan seed=1234 epoch=7 consumed=98765");
  CHECK(vbucket::plan_state::parse(s.to_string()) == s);
  CHECK(vbucket::plan_state::parse("vbucket-plan consumed=1 seed=2 epoch=3") ==
        vbucket::plan_state{2, 3, 1});
  CHECK(vbucket::plan_state::parse("vbucket-plan seed=18446744073709551615 epoch=0 consumed=0")
            .seed == 18446744073709551615ULL);
  CHECK(s.advanced(3, 64).consumed == 98765 + 192);
  for (const char* bad :
       {"", "seed=1 epoch=2 consumed=3", "vbucket-plan seed=1 epoch=2",
        "vbucket-plan seed=1 epoch=2 consumed=-3",
        "vbucket-plan seed=1 epoch=2 consumed=3 consumed=4",
        "vbucket-plan seed=1 epoch=2 consumed=3x", "vbucket-plan seed=1 epoch=2 foo=3",
        "vbucket-plan seed=18446744073709551616 epoch=0 consumed=0",
        "vbucket-planseed=1 epoch=2 consumed=3"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)vbucket::plan_state::parse(bad), vbucket::error);
  }
}

TEST_CASE("plan_state: resume state text with a balance group") {
  const vbucket::plan_state s{1, 2, 3, 960};
  CHECK(s.to_string() == "vbucket-plan seed=1 epoch=2 consumed=3 balance=960");
  CHECK(vbucket::plan_state::parse(s.to_string()) == s);
  CHECK(vbucket::plan_state::parse("vbucket-plan balance=0 consumed=3 seed=1 epoch=2") ==
        vbucket::plan_state{1, 2, 3, 0u});
  CHECK(vbucket::plan_state::parse("vbucket-plan seed=1 epoch=2 consumed=3 balance=4294967295")
            .balance_group == 4294967295u);
  CHECK(vbucket::plan_state::parse("vbucket-plan seed=1 epoch=2 consumed=3") !=
        vbucket::plan_state{1, 2, 3, 0u});
  for (const char* bad : {"vbucket-plan seed=1 epoch=2 consumed=3 balance=4294967296",
                          "vbucket-plan seed=1 epoch=2 consumed=3 balance=-1",
                          "vbucket-plan seed=1 epoch=2 consumed=3 balance=",
                          "vbucket-plan seed=1 epoch=2 consumed=3 balance=1 balance=1",
                          "vbucket-plan seed=1 epoch=2 balance=1"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)vbucket::plan_state::parse(bad), vbucket::error);
  }
}
