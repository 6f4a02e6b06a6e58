/// Tests of vbucket/sample/opensora_held.hpp and the held epochs of `opensora_sampler`: trainer
/// epochs of the length epoch 0 reported, a long data epoch's tail carried into the next trainer
/// epoch, a short one filled with counted repeats — every data batch trained exactly once, in order
/// — and the same slots dealt under any world size.

#include "vbucket/sample/opensora_held.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t, std::uint64_t
#include <map>      // std::map
#include <memory>   // std::make_shared
#include <utility>  // std::pair
#include <vector>   // std::vector

#include "vbucket/sample/opensora_sampler.hpp"
#include "vbucket_test/configs.hpp"

namespace {

using vbucket::held_cursor;
using vbucket::opensora_held;

TEST_CASE("opensora_held: carried tails and counted repeats, every data batch once") {
  // data epochs of 10, 13, 7, 12 and 10 global batches; the quota is epoch 0's 10
  const std::vector<std::uint64_t> n = {10, 13, 7, 12, 10};
  const opensora_held h([&](std::uint64_t e) { return n.at(e); });
  CHECK(h.quota() == 10);
  CHECK(h.next(0, {0, 0}) == held_cursor{1, 0});
  CHECK(h.next(1, {1, 0}) == held_cursor{1, 10});  // 3 of epoch 1 carried
  CHECK(h.next(2, {1, 10}) == held_cursor{3, 0});  // 3 + 7 = 10: exactly
  CHECK(h.cursor(4, 0, {0, 0}) == held_cursor{3, 10});
  // trainer epoch 2 from (1, 10): epoch 1's last 3, then epoch 2's 7
  CHECK(h.slot(2, {1, 10}, 0).epoch == 1);
  CHECK(h.slot(2, {1, 10}, 2).position == 12);
  CHECK(h.slot(2, {1, 10}, 3).epoch == 2);
  CHECK_FALSE(h.slot(2, {1, 10}, 9).repeat);
  // the slots of trainer epochs 0..4, as (data epoch, position): each data batch of epochs 0..3
  // once, the repeats counted, and what is left the tail of epoch 4 and after
  std::map<std::pair<std::uint64_t, std::uint64_t>, int> seen;
  std::uint64_t repeats = 0;
  held_cursor c{};
  for (std::uint64_t e = 0; e < 5; ++e) {
    for (std::uint64_t s = 0; s < h.quota(); ++s) {
      const auto at = h.slot(e, c, s);
      if (at.repeat) {
        ++repeats;
        CHECK(at.epoch == e);
      } else {
        ++seen[{at.epoch, at.position}];
      }
    }
    c = h.next(e, c);
  }
  for (std::uint64_t e = 0; e < 4; ++e)
    for (std::uint64_t p = 0; p < n[e]; ++p) CHECK(seen[{e, p}] == 1);
  std::uint64_t total = 0;
  for (const auto& [where, count] : seen) total += static_cast<std::uint64_t>(count);
  CHECK(total + repeats == 50);
  // steps: ceil, or floor with drop_last; alignment slots past the quota repeat
  CHECK(h.steps_from(0, 3, false) == 4);
  CHECK(h.steps_from(0, 3, true) == 3);
  CHECK(h.steps_from(9, 4, false) == 1);
  CHECK(h.slot(0, {0, 0}, 11).repeat);
}

TEST_CASE("opensora_held: an epoch without batches cannot be filled") {
  const opensora_held h([](std::uint64_t e) { return e == 0 ? std::uint64_t{4} : 0; });
  CHECK_THROWS_WITH_AS((void)h.slot(1, {1, 0}, 0), doctest::Contains("epoch 1 has no batch"),
                       vbucket::error);
}

using clips_t = std::vector<vbucket::sample_meta>;

/// Every rank's batches of trainer epochs 0..3 under `world`, as (epoch, global slot, first
/// sample index, repeat) per batch, with held epochs, and the sampler's epoch lengths.
struct run_result {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::uint32_t>> slots;
  std::vector<std::uint64_t> steps;
};

run_result run(std::uint32_t world, bool drop_last) {
  auto clips = std::make_shared<clips_t>();
  for (int i = 0; i < 900; ++i)
    clips->push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
  const auto config =
      std::make_shared<const vbucket::bucket_config>(vbucket_test::draw_v2_config());
  run_result out;
  for (std::uint32_t r = 0; r < world; ++r) {
    vbucket::opensora_sampler os(vbucket::make_any_sampler(
        std::shared_ptr<const clips_t>(clips), config, vbucket::opensora_v2_rule{},
        {.world = world, .rank = r, .drop_last = drop_last}, 7));
    os.hold_epochs();
    const std::uint64_t len = os.epoch_steps();  // train.py's len(dataloader), taken once
    for (std::uint64_t e = 0; e < 4; ++e) {
      os.set_epoch(e);
      os.started();
      CHECK(os.epoch_steps() == len);
      std::uint64_t k = 0;
      while (const auto b = os.next_batch()) {
        CHECK(b->step == k);
        out.slots[{e, b->position}] = {b->indices.begin(), b->indices.end()};
        ++k;
      }
      CHECK(k == len);  // exactly what train.py runs
      os.finish();
      if (r == 0) out.steps.push_back(os.sampler().num_global_batches());
    }
  }
  return out;
}

TEST_CASE("opensora_sampler: held epochs run the first length at every epoch and world") {
  for (const bool drop_last : {false, true}) {
    const run_result one = run(1, drop_last);
    // the data epochs' lengths differ (the random downgrade): some longer, some shorter
    MESSAGE("data epochs' global batches: " << one.steps[0] << ", " << one.steps[1] << ", "
                                            << one.steps[2] << ", " << one.steps[3]);
    bool longer = false, shorter = false;
    for (std::size_t e = 1; e < 4; ++e) {
      longer = longer || one.steps[e] > one.steps[0];
      shorter = shorter || one.steps[e] < one.steps[0];
    }
    CHECK((longer || shorter));
    for (const std::uint32_t world : {3u, 4u}) {
      const run_result w = run(world, drop_last);
      // slot for slot the world-1 sequence (up to the quota; beyond it alignment repeats)
      const std::uint64_t quota = one.steps[0];
      for (std::uint64_t e = 0; e < 4; ++e)
        for (std::uint64_t s = 0; s < quota; ++s) {
          const auto it = w.slots.find({e, s});
          if (it == w.slots.end()) {
            CHECK(drop_last);  // the incomplete last step
            continue;
          }
          CHECK(it->second == one.slots.at({e, s}));
        }
    }
  }
}

}  // namespace
