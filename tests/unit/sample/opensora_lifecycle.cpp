// opensora_lifecycle: Open-Sora's set_step / state_dict(n) / len over an exact position, and a
// train.py resume under another world size driven through a real batch_sampler.
#include "vbucket/sample/opensora_lifecycle.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/configs.hpp"

namespace {

using vbucket::opensora_lifecycle;
using vbucket::plan_state;

TEST_CASE("opensora_lifecycle: a fresh epoch numbers steps as Open-Sora (k * world)") {
  opensora_lifecycle lc(4);
  CHECK(lc.set_step(3, 100) == std::optional<std::uint64_t>(12));
  CHECK(lc.position_after(5, 100) == 20);
  CHECK(lc.step_of(20) == 5);
  CHECK(lc.epoch_steps(25) == 25);
  CHECK_THROWS_WITH_AS((void)lc.set_step(26, 100),
                       doctest::Contains("past the end of the epoch: it has 25 steps at world 4"),
                       vbucket::error);
  CHECK_THROWS_WITH_AS((void)lc.set_step(std::numeric_limits<std::uint64_t>::max() / 3, 100),
                       doctest::Contains("overflow"), vbucket::error);
}

TEST_CASE("opensora_lifecycle: train.py's resume under another world keeps the saved position") {
  opensora_lifecycle lc(3);
  plan_state saved(1, 0, 10);  // 5 steps of world 2
  saved.world = 2;
  lc.load(saved);
  // set_step(5), as train.py calls it with the checkpoint's step: the loaded position stays
  CHECK_FALSE(lc.set_step(5, 99).has_value());
  CHECK(lc.anchor_step() == 5);
  CHECK(lc.anchor_position() == 10);
  // steps after the resume are world 3's
  CHECK(lc.position_after(5, 100) == 10);
  CHECK(lc.position_after(7, 100) == 16);
  CHECK(lc.step_of(16) == 7);
  CHECK(lc.epoch_steps(30) == 35);  // 5 old steps + 30 new ones
  CHECK_THROWS_WITH_AS((void)lc.position_after(4, 100), doctest::Contains("resumed at step 5"),
                       vbucket::error);
  // a later set_step is Open-Sora's plain one again
  CHECK(lc.set_step(5, 99) == std::optional<std::uint64_t>(15));
  CHECK(lc.anchor_step() == 0);
  // a set_step of another step than the loaded state's is too
  lc.load(saved);
  CHECK(lc.set_step(4, 99) == std::optional<std::uint64_t>(12));
  // an iteration started before set_step: plain too
  lc.load(saved);
  lc.started();
  CHECK(lc.set_step(5, 99) == std::optional<std::uint64_t>(15));
  lc.reset();
  CHECK(lc.anchor_step() == 0);
  CHECK(lc.anchor_position() == 0);
}

struct clip {
  std::int64_t num_frames, height, width;
  double fps;
};

TEST_CASE("opensora_lifecycle: over a batch_sampler, every global batch once across worlds") {
  std::vector<clip> clips;
  for (int i = 0; i < 1500; ++i)
    clips.push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
  const vbucket::bucket_config config = vbucket_test::opensora_v2_config();
  const auto run = [&](std::uint32_t world, std::uint32_t rank) {
    return vbucket::batch_sampler(clips, config, vbucket::opensora_v2_rule{},
                                  {.seed = 5, .world = world, .rank = rank});
  };
  auto whole = run(1, 0);
  const std::uint64_t n = whole.num_global_batches();
  REQUIRE(n > 30);
  for (const auto& worlds : {std::pair{2u, 3u}, {4u, 1u}, {3u, 2u}}) {
    const std::uint32_t old_world = worlds.first, new_world = worlds.second;
    INFO("world " << old_world << " -> " << new_world);
    const std::uint64_t k = 4;
    // rank 0 of the old world saves after k steps
    auto saver = run(old_world, 0);
    const plan_state saved = saver.state_after(k);
    std::multiset<std::uint64_t> seen;
    for (std::uint32_t r = 0; r < old_world; ++r) {
      auto s = run(old_world, r);
      std::uint64_t step = 0;
      for (const vbucket::batch& b : s) {
        if (step++ == k) break;
        if (!b.repeat) seen.insert(b.position);
      }
    }
    for (std::uint32_t r = 0; r < new_world; ++r) {
      auto s = run(new_world, r);
      opensora_lifecycle lc(new_world);
      s.load_state(saved);
      lc.load(saved);
      REQUIRE_FALSE(lc.set_step(k, n).has_value());
      for (const vbucket::batch& b : s)
        if (!b.repeat) seen.insert(b.position);
    }
    CHECK(seen.size() == n);                                          // every global batch ...
    for (std::uint64_t p = 0; p < n; ++p) CHECK(seen.count(p) == 1);  // ... exactly once
  }
}

}  // namespace
