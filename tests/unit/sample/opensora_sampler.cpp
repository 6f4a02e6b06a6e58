/// Tests of vbucket/sample/opensora_sampler.hpp: Open-Sora's lifecycle sequenced over an
/// any_sampler — set_step / state_after (state_dict(n)) / epoch_steps (__len__) on a fresh epoch,
/// train.py's resume under another world size (load, set_step(k), set_epoch), set_epoch carrying
/// the position over unless the epoch is finished, reset, and snapshot / restore.

#include "vbucket/sample/opensora_sampler.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t, std::uint64_t
#include <memory>   // std::make_shared
#include <set>      // std::multiset
#include <vector>   // std::vector

#include "vbucket_test/configs.hpp"

namespace {

using vbucket::opensora_sampler;
using vbucket::plan_state;

using clips_t = std::vector<vbucket::sample_meta>;

struct fixture {
  std::shared_ptr<const clips_t> clips = [] {
    auto c = std::make_shared<clips_t>();
    for (int i = 0; i < 1500; ++i)
      c->push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
    return c;
  }();
  std::shared_ptr<const vbucket::bucket_config> config =
      std::make_shared<const vbucket::bucket_config>(vbucket_test::opensora_v2_config());

  opensora_sampler make(std::uint32_t world, std::uint32_t rank) const {
    return opensora_sampler(vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{},
                                                      {.world = world, .rank = rank}, 7));
  }
};

/// ceil(a / b)
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

TEST_CASE("opensora_sampler: a fresh epoch numbers steps as Open-Sora (k * world)") {
  const fixture f;
  opensora_sampler os = f.make(2, 1);
  const std::uint64_t n = os.sampler().num_global_batches();
  REQUIRE(n > 40);
  CHECK(os.epoch_steps() == ceil_div(n, 2));
  os.set_step(3);
  CHECK(os.sampler().state().consumed == 6);
  const plan_state s = os.state_after(5);
  CHECK(s.consumed == 10);
  CHECK(s.world == std::optional<std::uint32_t>(2));
  CHECK_THROWS_WITH_AS(os.set_step(ceil_div(n, 2) + 1), doctest::Contains("past the end"),
                       vbucket::error);
  os.reset();
  CHECK(os.sampler().state().consumed == 0);
}

TEST_CASE("opensora_sampler: train.py's resume under another world size keeps the position") {
  const fixture f;
  const std::uint64_t k = 4;
  opensora_sampler saver = f.make(2, 0);
  saver.set_epoch(1);
  const plan_state saved = saver.state_after(k);  // world 2 after 4 steps: position 8
  CHECK(saved.consumed == 8);
  const std::uint64_t n = saver.sampler().num_global_batches();
  std::multiset<std::uint64_t> seen;
  for (std::uint32_t r = 0; r < 2; ++r) {
    opensora_sampler old = f.make(2, r);
    old.set_epoch(1);
    std::uint64_t step = 0;
    for (const vbucket::batch& b : old.sampler().batches()) {
      if (step++ == k) break;
      if (!b.repeat) seen.insert(b.position);
    }
  }
  for (std::uint32_t r = 0; r < 3; ++r) {
    opensora_sampler os = f.make(3, r);
    os.load(saved);  // load_state_dict, then set_step(start_step), then set_epoch(epoch)
    os.set_step(k);
    os.set_epoch(1);
    CHECK(os.sampler().epoch() == 1);
    CHECK(os.sampler().state().consumed == 8);
    // the resumed run numbers its steps from k, each step 3 global batches on
    CHECK(os.state_after(k + 2).consumed == 8 + 2 * 3);
    CHECK(os.epoch_steps() == k + ceil_div(n - 8, 3));
    CHECK_THROWS_WITH_AS((void)os.state_after(k - 1), doctest::Contains("resumed at step"),
                         vbucket::error);
    os.started();
    for (const vbucket::batch& b : os.sampler().batches())
      if (!b.repeat) seen.insert(b.position);
  }
  CHECK(seen.size() == n);  // every global batch exactly once
  for (std::uint64_t p = 0; p < n; ++p) CHECK(seen.count(p) == 1);
}

TEST_CASE("opensora_sampler: set_epoch carries the position over unless the epoch is done") {
  const fixture f;
  opensora_sampler os = f.make(2, 0);
  os.set_step(5);
  os.set_epoch(1);  // Open-Sora keeps its index across set_epoch
  CHECK(os.sampler().epoch() == 1);
  CHECK(os.sampler().state().consumed == 10);
  os.set_epoch(1);  // the same epoch: nothing
  CHECK(os.sampler().state().consumed == 10);
  os.finish();  // the iteration ran to its end
  CHECK(os.finished());
  CHECK(os.epoch_steps() == ceil_div(os.sampler().num_global_batches(), 2));
  os.set_epoch(2);
  CHECK_FALSE(os.finished());
  CHECK(os.sampler().epoch() == 2);
  CHECK(os.sampler().state().consumed == 0);
  // a position at the end of the epoch is done too
  const std::uint64_t end = os.sampler().dealt_end(0);
  os.sampler().move_to(end);
  os.set_epoch(3);
  CHECK(os.sampler().state().consumed == 0);
}

TEST_CASE("opensora_sampler: snapshot and restore, and a null sampler") {
  const fixture f;
  opensora_sampler a = f.make(3, 2);
  plan_state saved = a.sampler().epoch_state(2);  // 2 steps of world 3
  saved.world = 3;
  a.load(saved);
  a.finish();
  const vbucket::opensora_snapshot snap = a.snapshot();
  CHECK(snap.finished);
  CHECK(snap.anchor_step == 2);
  CHECK(snap.anchor_position == 6);
  opensora_sampler b = f.make(3, 2);
  b.restore(snap);
  CHECK(b.finished());
  CHECK(b.sampler().state() == a.sampler().state());
  CHECK(b.lifecycle().anchor_step() == 2);
  CHECK(b.lifecycle().anchor_position() == 6);
  CHECK_THROWS_WITH_AS(opensora_sampler(nullptr), doctest::Contains("null"), vbucket::error);
}

}  // namespace
