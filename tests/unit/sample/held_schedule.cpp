/// Tests of vbucket/sample/held_schedule.hpp: a held trainer epoch's steps, as the drop-in
/// sampler's iteration deals them — the held length at every epoch, carried batches from the data
/// epoch they were drawn in, counted repeats — from any slot, and refused arguments.

#include "vbucket/sample/held_schedule.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t, std::uint64_t
#include <memory>   // std::make_shared
#include <vector>   // std::vector

#include "vbucket/sample/opensora_sampler.hpp"
#include "vbucket_test/configs.hpp"

namespace {

using clips_t = std::vector<vbucket::sample_meta>;

/// A held drop-in sampler of rank `rank` of `world` over 900 clips whose data epochs' lengths
/// differ (the random downgrade of the draw config).
std::unique_ptr<vbucket::opensora_sampler> held_sampler(std::uint32_t world, std::uint32_t rank,
                                                        bool drop_last) {
  auto clips = std::make_shared<clips_t>();
  for (int i = 0; i < 900; ++i)
    clips->push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
  const auto config =
      std::make_shared<const vbucket::bucket_config>(vbucket_test::draw_v2_config());
  auto os = std::make_unique<vbucket::opensora_sampler>(vbucket::make_any_sampler(
      std::shared_ptr<const clips_t>(clips), config, vbucket::opensora_v2_rule{},
      {.world = world, .rank = rank, .drop_last = drop_last}, 7));
  os->hold_epochs();
  return os;
}

TEST_CASE("held_schedule: the sampler's iteration, step for step, from any slot") {
  for (const bool drop_last : {false, true}) {
    const std::uint32_t world = 3;
    bool carried = false, repeated = false;
    for (std::uint32_t r = 0; r < world; ++r) {
      auto os = held_sampler(world, r, drop_last);
      const std::uint64_t len = os->epoch_steps();
      for (std::uint64_t e = 0; e < 4; ++e) {
        os->set_epoch(e);
        os->begin_iteration();
        const vbucket::held_schedule s = os->held_epoch_schedule();
        CHECK(s.steps() == len);
        CHECK(s.plan().epoch() == e);
        CHECK(s.consumed() == 0);
        CHECK(s.quota() == os->quota());
        std::uint64_t k = 0;
        while (const auto b = os->next_batch()) {
          REQUIRE(k < s.steps());
          const vbucket::batch a = s.at(k, r);
          CHECK(a.step == k);
          CHECK(a.position == b->position);
          CHECK(a.repeat == b->repeat);
          CHECK(std::vector<std::uint32_t>(a.indices.begin(), a.indices.end()) ==
                std::vector<std::uint32_t>(b->indices.begin(), b->indices.end()));
          // a batch of an earlier data epoch is of that epoch's plan
          const vbucket::epoch_plan& p = s.plan_at(k, r);
          CHECK(p.epoch() <= e);
          carried = carried || p.epoch() < e;
          repeated = repeated || a.repeat;
          ++k;
        }
        CHECK(k == len);
        os->finish();
        CHECK(s.state_after(2).consumed == 2 * world);
        CHECK(s.state_after(2).epoch == e);
        // from a slot in the middle: the same batches, steps counted from there
        os->set_step(2);
        const vbucket::held_schedule mid = os->held_epoch_schedule();
        CHECK(mid.consumed() == 2 * world);
        CHECK(mid.steps() == len - 2);
        CHECK(mid.at(0, r).position == s.at(2, r).position);
        CHECK(mid.at(0, r).indices.size() == s.at(2, r).indices.size());
        os->reset();
      }
    }
    // These data epochs (282, 289, 278, 285, ...) carry a tail from epoch 2 on and are never
    // short: the counted repeats of a short epoch are python/tests/test_loader_held.py's case.
    CHECK(carried);
    MESSAGE("counted repeats seen: " << repeated);
  }
}

TEST_CASE("held_schedule: plans that do not run to the trainer epoch are refused") {
  auto os = held_sampler(1, 0, false);
  const vbucket::epoch_plan p0 = os->sampler().plan();
  CHECK_THROWS_WITH_AS(vbucket::held_schedule(10, {1, 0}, {p0}, 1, 0, false),
                       doctest::Contains("the plans must run from the cursor's data epoch 1"),
                       vbucket::error);
  CHECK_THROWS_AS(vbucket::held_schedule(10, {0, 0}, {}, 1, 0, false), vbucket::error);
  CHECK_THROWS_AS(vbucket::held_schedule(10, {0, 0}, {p0}, 0, 0, false), vbucket::error);
}

}  // namespace
