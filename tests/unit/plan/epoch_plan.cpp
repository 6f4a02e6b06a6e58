/// Tests of vbucket/plan/epoch_plan.hpp: the planner's guarantees as property tests over random
/// configs, dataset sizes, world sizes and batch sizes (the checks are in
/// vbucket_test/random_plans.hpp); exact resume with the same and another world size; step
/// balance; empty and tiny cases. Statistics, the resume state's text and Open-Sora's strings
/// are in plan_stats.cpp, plan_state.cpp and opensora_strings.cpp.

#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal, std::count
#include <cstdint>    // std::uint32_t, std::uint64_t
#include <limits>     // quiet_NaN
#include <map>        // std::map
#include <optional>   // std::nullopt
#include <ranges>     // std::views
#include <set>        // std::set
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group.hpp"
#include "vbucket/plan/plan_stats.hpp"

#include "vbucket_test/random_plans.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#define VBUCKET_PLAN_TEST_JSON 1
#endif

// test_rng, random_config, check_plan, ... and the vbucket names they use (bucket_config,
// epoch_plan, plan_options, ...).
using namespace vbucket_test;

TEST_CASE("epoch_plan: guarantees over random configs, sizes, worlds and batch sizes") {
  test_rng g{20240611};
  for (int iteration = 0; iteration < 100; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, random_size(g));
    plan_options o;
    o.seed = g.next();
    o.epoch = g.below(5);
    o.policy = random_policy(g);
    const std::uint32_t world = random_world(g);
    o.balance_group = g.chance(0.3) ? world : 0;
    const bool drop_last = g.chance(0.3) || o.policy == incomplete_policy::drop;
    CAPTURE(iteration);
    CAPTURE(ids.size());
    CAPTURE(world);
    CAPTURE(vbucket::policy_name(o.policy));
    CAPTURE(drop_last);
    CAPTURE(o.balance_group);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    check_plan(ids, c, plan, world, drop_last);
    // Another world size deals the same global sequence.
    check_plan(ids, c, plan, random_world(g), drop_last);
  }
}

TEST_CASE("epoch_plan: the plan does not depend on the thread count") {
  test_rng g{77};
  for (int iteration = 0; iteration < 6; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, 30000 + g.below(30000));
    plan_options o;
    o.seed = 5;
    o.epoch = 1;
    o.policy = random_policy(g);
    o.balance_group = iteration % 2 == 0 ? 8 : 0;
    o.threads = 1;
    const epoch_plan one = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    for (unsigned threads : {2u, 3u, 0u}) {
      o.threads = threads;
      const epoch_plan many = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
      REQUIRE(std::ranges::equal(one.slots(), many.slots()));
      REQUIRE(one.num_batches() == many.num_batches());
      for (std::uint64_t p = 0; p < one.num_batches(); ++p)
        REQUIRE(one.ref_at(p) == many.ref_at(p));
    }
  }
}

TEST_CASE(
    "epoch_plan: a plan built in a previous plan's arrays is the fresh plan; shared ones stay") {
  test_rng g{4242};
  int built_in_place = 0;
  for (int iteration = 0; iteration < 8; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> big = random_ids(g, c, 20000 + g.below(20000));
    const std::vector<bucket_id> ids = random_ids(g, c, 1000 + g.below(15000));
    plan_options o;
    o.seed = g.next();
    o.policy = random_policy(g);
    CAPTURE(iteration);
    const auto plan_of = [&](const std::vector<bucket_id>& v) {
      return vbucket::make_epoch_plan(std::span<const bucket_id>(v), c, o);
    };
    const epoch_plan fresh = plan_of(ids);
    // Shared: a copy keeps the data, so nothing is taken and the copy is unchanged.
    epoch_plan held = plan_of(big);
    const epoch_plan copy = held;
    const std::vector<std::uint32_t> copy_slots(copy.slots().begin(), copy.slots().end());
    vbucket::detail::plan_storage none = epoch_plan::take_storage(std::move(held));
    CHECK(!none.slots);
    CHECK(!none.order);
    CHECK(held.num_batches() == 0);
    // Held by nothing else: its arrays are taken and the next plan is built in them.
    epoch_plan last = plan_of(big);
    const std::uint64_t big_batches = last.num_batches();
    vbucket::detail::plan_storage reuse = epoch_plan::take_storage(std::move(last));
    REQUIRE(reuse.slots);
    CHECK(reuse.order_size == big_batches);
    const std::uint32_t* const slots_at = reuse.slots.get();
    const bool fits = reuse.slots_size >= fresh.slots().size();
    const epoch_plan built = vbucket::detail::plan_from_ids(
        std::span<const bucket_id>(ids), c, o, vbucket::latent_tokens_cost{}, std::nullopt, &reuse);
    CHECK((built.slots().data() == slots_at) == fits);
    CHECK(!reuse.slots == fits);
    built_in_place += fits ? 1 : 0;
    REQUIRE(std::ranges::equal(built.slots(), fresh.slots()));
    REQUIRE(built.num_batches() == fresh.num_batches());
    for (std::uint64_t p = 0; p < fresh.num_batches(); ++p)
      REQUIRE(built.ref_at(p) == fresh.ref_at(p));
    REQUIRE(std::ranges::equal(copy.slots(), copy_slots));
  }
  CHECK(built_in_place >= 4);
}

TEST_CASE("epoch_plan: seeds and epochs give different orders, the same key the same plan") {
  const bucket_config c = small_config(4, 2, 1);
  std::vector<bucket_id> ids(400);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % c.num_buckets());
  auto order = [&](std::uint64_t seed, std::uint64_t epoch) {
    const epoch_plan p =
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {seed, epoch});
    std::vector<std::uint32_t> out;
    for (std::uint64_t q = 0; q < p.num_batches(); ++q)
      for (auto i : p.global_batch(q).indices) out.push_back(i);
    return out;
  };
  CHECK(order(1, 0) == order(1, 0));
  CHECK(order(1, 0) != order(1, 1));
  CHECK(order(1, 0) != order(2, 0));
}

TEST_CASE("epoch_plan: resume from every step, same and other world sizes") {
  test_rng g{99};
  for (int iteration = 0; iteration < 24; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, static_cast<std::size_t>(g.below(1500)));
    plan_options o;
    o.seed = g.next();
    o.epoch = g.below(3);
    o.policy = random_policy(g);
    const std::uint32_t world = static_cast<std::uint32_t>(1 + g.below(12));
    o.balance_group = iteration % 3 == 0 ? world : 0;
    const bool drop_last = g.chance(0.3);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const std::uint64_t steps = plan.deal(world, 0, drop_last).steps();
    CAPTURE(iteration);
    CAPTURE(world);
    CAPTURE(drop_last);
    if (steps > 60) {
      // Large cases: a sample of steps.
      for (std::uint64_t k : {std::uint64_t{0}, std::uint64_t{1}, steps / 2, steps - 1, steps})
        for (std::uint32_t w2 :
             {world, std::uint32_t{1}, std::uint32_t{world + 3}, std::uint32_t{64}})
          check_resume(plan, world, k, w2, drop_last);
      continue;
    }
    for (std::uint64_t k = 0; k <= steps; ++k) {
      CAPTURE(k);
      check_resume(plan, world, k, world, drop_last);
      check_resume(plan, world, k, static_cast<std::uint32_t>(1 + g.below(16)), drop_last);
    }
  }
}

TEST_CASE("epoch_plan: consumed counts that are not whole steps, and beyond the epoch") {
  const bucket_config c = small_config(3, 2, 1);
  std::vector<bucket_id> ids(100);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % c.num_buckets());
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {3, 4});
  const std::uint64_t n = plan.num_batches();
  // 7 batches consumed under a world of 7, then a world of 5: position 7 + r starts rank r.
  const epoch_schedule s = plan.deal(5, 7);
  CHECK(s.steps() == (n - 7 + 4) / 5);
  for (std::uint32_t r = 0; r < 5; ++r) CHECK(s.at(0, r).position == 7 + r);
  // Everything consumed (repeats included): nothing left.
  for (std::uint64_t consumed : {n, n + 3, n + 1000}) {
    const epoch_schedule done = plan.deal(4, consumed);
    CHECK(done.steps() == 0);
    CHECK(done.rank(3).empty());
    CHECK(done.repeat_batches() == 0);
  }
  CHECK_THROWS_AS((void)plan.deal(0), vbucket::error);
  CHECK_THROWS_AS((void)plan.deal(2, vbucket::plan_state{3, 5, 0}), vbucket::error);
}

TEST_CASE("epoch_plan: empty dataset, empty and disabled buckets, one-sample buckets") {
  const bucket_config c = small_config(500, 7, 1);
  SUBCASE("empty dataset") {
    const std::vector<bucket_id> none;
    for (auto policy :
         {incomplete_policy::pad, incomplete_policy::drop, incomplete_policy::downgrade}) {
      const epoch_plan plan =
          vbucket::make_epoch_plan(std::span<const bucket_id>(none), c, {1, 0, policy});
      CHECK(plan.num_batches() == 0);
      CHECK(plan.slots().empty());
      for (std::uint32_t w : {1u, 8u, 64u}) {
        const auto s = plan.deal(w);
        CHECK(s.steps() == 0);
        CHECK(s.rank(w - 1).begin() == s.rank(w - 1).end());
      }
      const auto st = vbucket::compute_plan_stats(plan, c);
      CHECK(st.total == vbucket::plan_counts{});
      CHECK(st.buckets.empty());
    }
  }
  SUBCASE("nothing assigned") {
    const std::vector<bucket_id> ids(50, vbucket::no_bucket);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c);
    CHECK(plan.num_batches() == 0);
    CHECK(plan.unassigned() == 50);
    CHECK(plan.deal(3).steps() == 0);
  }
  SUBCASE("one sample, batch size 500: one full batch of 500 copies, 499 pads") {
    const bucket_id image = c.find("256px", 1, "1:1");
    REQUIRE(image >= 0);
    std::vector<bucket_id> ids(10, vbucket::no_bucket);
    ids[6] = image;
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c);
    REQUIRE(plan.num_batches() == 1);
    CHECK(plan.bucket(image).pads == 499);
    const auto b = plan.global_batch(0);
    CHECK(b.indices.size() == 500);
    CHECK(std::ranges::all_of(b.indices, [](std::uint32_t i) { return i == 6; }));
    // Four ranks: three repeats of the only batch, counted.
    const auto s = plan.deal(4);
    CHECK(s.steps() == 1);
    CHECK(s.repeat_batches() == 3);
    CHECK(s.repeat_samples() == 1500);
    CHECK(s.at(0, 3).repeat);
    CHECK(s.at(0, 3).indices.size() == 500);
    // Drop: the sample is dropped, counted.
    const epoch_plan dropped = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c,
                                                        {0, 0, incomplete_policy::drop});
    CHECK(dropped.num_batches() == 0);
    CHECK(dropped.bucket(image).dropped == 1);
  }
  SUBCASE("a bucket smaller than half a batch loses nothing (Open-Sora drops it)") {
    const bucket_id b33 = c.find("256px", 33, "16:9");
    std::vector<bucket_id> ids(3, b33);  // batch size 7
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c);
    REQUIRE(plan.num_batches() == 1);
    const auto b = plan.global_batch(0);
    std::map<std::uint32_t, int> count;
    for (auto i : b.indices) ++count[i];
    CHECK(count.size() == 3);
    // Cycling: 7 slots over 3 samples = 3, 2, 2.
    for (const auto& [i, k] : count) CHECK((k == 2 || k == 3));
  }
  SUBCASE("samples in a disabled bucket are dropped and counted") {
    std::vector<bucket_spec> specs = {{"256px", 1, 0.0, std::nullopt, std::nullopt},
                                      {"256px", 33, 1.0, std::nullopt, 2}};
    const bucket_config d(specs, vbucket::opensora_v2_tables{});
    const bucket_id off = d.find("256px", 1, "1:1");
    const std::vector<bucket_id> ids = {off, off, d.find("256px", 33, "1:1")};
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), d);
    CHECK(plan.bucket(off).dropped == 2);
    CHECK(plan.bucket(off).batches == 0);
    CHECK(plan.num_batches() == 1);
  }
}

TEST_CASE("epoch_plan: downgrade moves leftovers to the nearest smaller compatible bucket") {
  // 256px: 65 frames (bs 4) -> 33 frames (bs 4); 1 frame (bs 3) takes images only.
  const bucket_config c = small_config(3, 4, 4);
  const bucket_id b65 = c.find("256px", 65, "16:9");
  const bucket_id b33 = c.find("256px", 33, "16:9");
  const bucket_id b1 = c.find("256px", 1, "16:9");
  const bucket_id other = c.find("256px", 65, "9:16");
  REQUIRE(b65 >= 0);
  REQUIRE(b33 >= 0);
  REQUIRE(b1 >= 0);
  REQUIRE(other >= 0);
  std::vector<bucket_id> ids;
  ids.insert(ids.end(), 10, b65);   // 10 = 2·4 + 2 leftovers -> 33
  ids.insert(ids.end(), 5, b33);    // 5 + 2 = 7 = 1·4 + 3 -> no smaller video bucket: pad 1
  ids.insert(ids.end(), 4, b1);     // 4 = 1·3 + 1 -> nothing smaller: pad 2
  ids.insert(ids.end(), 3, other);  // 3 -> 33 frames 9:16, which pads 1
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c,
                                                   {9, 0, incomplete_policy::downgrade});
  CHECK(plan.bucket(b65).downgrade_to == b33);
  CHECK(plan.bucket(b33).downgrade_to == vbucket::no_bucket);  // never the image bucket
  CHECK(plan.bucket(b1).downgrade_to == vbucket::no_bucket);
  CHECK(plan.bucket(b65).moved_out == 2);
  CHECK(plan.bucket(b65).batches == 2);
  CHECK(plan.bucket(b33).moved_in == 2);
  CHECK(plan.bucket(b33).moved_out == 0);
  CHECK(plan.bucket(b33).samples == 7);
  CHECK(plan.bucket(b33).pads == 1);
  CHECK(plan.bucket(b33).batches == 2);
  CHECK(plan.bucket(b1).moved_in == 0);
  CHECK(plan.bucket(b1).samples == 4);
  CHECK(plan.bucket(b1).pads == 2);
  CHECK(plan.bucket(b1).batches == 2);
  // 9:16 65 frames: all 3 move to 33 frames 9:16 and stop there, nothing is lost.
  CHECK(plan.bucket(other).moved_out == 3);
  CHECK(plan.bucket(c.find("256px", 33, "9:16")).moved_in == 3);
  CHECK(plan.bucket(c.find("256px", 33, "9:16")).pads == 1);
  check_plan(ids, c, plan, 3, false);
  check_plan(ids, c, plan, 2, true);
}

TEST_CASE("epoch_plan: batches carry bucket, target shape and indices; the range works") {
  const bucket_config c = small_config(5, 3, 2);
  test_rng g{5};
  std::vector<bucket_id> ids(1000);
  for (auto& id : ids) id = static_cast<bucket_id>(g.below(c.num_buckets()));
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {1, 1});
  const epoch_schedule s = plan.deal(6);
  const auto steps = s.rank(2);
  static_assert(std::ranges::random_access_range<decltype(steps)>);
  CHECK(std::ranges::distance(steps) == static_cast<std::ptrdiff_t>(s.steps()));
  CHECK(steps[3].position == 3 * 6 + 2);
  CHECK((*(steps.begin() + 5)).step == 5);
#if !defined(__clang__) || __clang_major__ >= 16  // older clangs lack libstdc++'s views
  std::uint64_t k = 0;
  for (const vbucket::batch& b : steps | std::views::take(4)) CHECK(b.step == k++);
  CHECK(k == 4);
#endif
  const auto from = s.rank(2, 10);
  CHECK(from.size() == s.steps() - 10);
  CHECK(from.front().step == 10);
  CHECK(from.back().step == s.steps() - 1);
  for (const auto& b : steps) {
    const auto& r = c.ratio_of(b.bucket);
    CHECK(b.frames == c.frames_of(b.bucket).frames);
    CHECK(b.height == r.height);
    CHECK(b.width == r.width);
    for (auto i : b.indices) CHECK(ids[i] == b.bucket);
  }
}

TEST_CASE("epoch_plan: groups must match the config") {
  const bucket_config c = small_config(4, 2, 1);
  const std::vector<bucket_id> ids = {0, 1};
  const auto groups = vbucket::group_by_bucket(ids, c.num_buckets() + 1);
  CHECK_THROWS_AS((void)vbucket::make_epoch_plan(groups, c), vbucket::error);
}

TEST_CASE("epoch_plan: downgrade targets are the nearest compatible buckets") {
  test_rng g{123};
  for (int iteration = 0; iteration < 20; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> none;
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(none), c,
                                                     {0, 0, incomplete_policy::downgrade});
    for (std::size_t b = 0; b < c.num_buckets(); ++b) {
      const auto from = static_cast<bucket_id>(b);
      bucket_id best = vbucket::no_bucket;
      double best_tokens = -1.0;
      for (std::size_t t = 0; t < c.num_buckets(); ++t) {
        const auto to = static_cast<bucket_id>(t);
        if (!compatible_downgrade(c, from, to)) continue;
        const double tokens = vbucket::latent_tokens(c.frames_of(to).frames, c.ratio_of(to).height,
                                                     c.ratio_of(to).width);
        if (tokens > best_tokens) {
          best_tokens = tokens;
          best = to;
        }
      }
      CAPTURE(b);
      CHECK(plan.bucket(from).downgrade_to == best);
    }
  }
}

TEST_CASE("epoch_plan: planning from ids groups on the way, with the same result") {
  test_rng g{4242};
  for (int iteration = 0; iteration < 12; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, random_size(g) * 2);
    plan_options o;
    o.seed = g.next();
    o.epoch = 3;
    o.policy = random_policy(g);
    o.balance_group = iteration % 2 == 0 ? 16 : 0;
    o.threads = static_cast<unsigned>(g.below(4));
    const epoch_plan from_ids = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const epoch_plan from_groups =
        vbucket::make_epoch_plan(vbucket::group_by_bucket(ids, c.num_buckets()), c, o);
    REQUIRE(from_ids.num_batches() == from_groups.num_batches());
    REQUIRE(from_ids.unassigned() == from_groups.unassigned());
    REQUIRE(from_ids.invalid() == from_groups.invalid());
    for (std::uint64_t p = 0; p < from_ids.num_batches(); ++p) {
      REQUIRE(from_ids.ref_at(p) == from_groups.ref_at(p));
      REQUIRE(std::ranges::equal(from_ids.global_batch(p).indices,
                                 from_groups.global_batch(p).indices));
    }
  }
  const bucket_config c = small_config(4, 2, 1);
  const std::vector<bucket_id> bad = {0, 1, static_cast<bucket_id>(c.num_buckets())};
  CHECK_THROWS_WITH_AS((void)vbucket::make_epoch_plan(std::span<const bucket_id>(bad), c),
                       doctest::Contains("sample 2 has bucket id"), vbucket::error);
  const std::vector<bucket_id> negative = {0, -1, -2, -7};
  CHECK_THROWS_WITH_AS((void)vbucket::make_epoch_plan(std::span<const bucket_id>(negative), c),
                       doctest::Contains("sample 3 has bucket id -7"), vbucket::error);
}

TEST_CASE("epoch_plan: views outlive the schedule they came from; vectors convert") {
  const bucket_config c = small_config(3, 2, 1);
  std::vector<bucket_id> ids(200);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % c.num_buckets());
  const epoch_plan plan = vbucket::make_epoch_plan(ids, c, {.seed = 1, .epoch = 2});
  const epoch_schedule kept = plan.deal(3);
  std::uint64_t k = 0;
  for (const vbucket::batch& b : plan.deal(3).rank(1)) {  // the schedule is a temporary
    CHECK(b.indices.data() == kept.at(k, 1).indices.data());
    ++k;
  }
  CHECK(k == kept.steps());
  vbucket::rank_steps steps;
  {
    const epoch_plan inner = vbucket::make_epoch_plan(ids, c, {.seed = 1, .epoch = 2});
    steps = inner.deal(5).rank(4);
  }
  CHECK(steps.size() == plan.deal(5).steps());
  CHECK(std::ranges::equal(steps.front().indices, plan.deal(5).at(0, 4).indices));
}

TEST_CASE(
    "epoch_plan: a resume under another world size covers every sample once, balance on "
    "or off") {
  // Issue 14: with step balance the global order depends on the balance group, so the group
  // must not follow the world size. A run of 4 ranks stops after 10 steps; the job restarts on
  // 2 ranks with the same plan options (as a restarted trainer plans again from its flags).
  const bucket_config c = small_config(3, 2, 1);
  test_rng g{1414};
  std::vector<bucket_id> ids(700);
  for (auto& id : ids) {
    const std::uint64_t u = g.below(20);
    id = u == 0 ? vbucket::no_bucket : static_cast<bucket_id>(g.below(c.num_buckets()));
  }
  for (std::uint32_t group : {0u, 3u, 4u, vbucket::default_balance_group}) {
    CAPTURE(group);
    plan_options o{77, 2};
    o.balance_group = group;
    const epoch_plan before = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const epoch_schedule first = before.deal(4);
    REQUIRE(first.steps() > 12);
    const std::string saved = first.state_after(10).to_string();
    CHECK(saved == "vbucket-plan seed=77 epoch=2 consumed=40 balance=" + std::to_string(group));

    const epoch_plan after = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const epoch_schedule rest = after.deal(2, vbucket::plan_state::parse(saved));
    check_resumed_covers_once(ids, before, first, 10, rest);
  }
}

TEST_CASE("epoch_plan: the resume state records the balance group; another group is refused") {
  const bucket_config c = small_config(3, 2, 1);
  std::vector<bucket_id> ids(400);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % c.num_buckets());
  auto plan_with = [&](std::uint32_t group) {
    plan_options o{42, 0};
    o.balance_group = group;
    return vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
  };
  // The old CLI's --balance made G = the world size: 4 ranks, then 2 ranks with G = 2 would
  // deal another order from the same consumed count (samples lost and replayed).
  const vbucket::plan_state state = plan_with(4).deal(4).state_after(10);
  REQUIRE(state.balance_group == 4u);
  CHECK(state.advanced(1, 2).balance_group == 4u);
  for (std::uint32_t other : {0u, 2u, vbucket::default_balance_group}) {
    CAPTURE(other);
    CHECK_THROWS_WITH_AS((void)plan_with(other).deal(2, state),
                         doctest::Contains("balance group 4"), vbucket::error);
  }
  CHECK(plan_with(4).deal(2, state).consumed() == 40);
  // A plan without balance records 0, and a balanced plan refuses that state too.
  const vbucket::plan_state plain = plan_with(0).deal(3).state_after(1);
  CHECK(plain.balance_group == 0u);
  CHECK_THROWS_AS((void)plan_with(3).deal(3, plain), vbucket::error);
  // Not recorded (a state string from before the field, or built from three numbers): not
  // checked.
  const auto old = vbucket::plan_state::parse("vbucket-plan seed=42 epoch=0 consumed=12");
  CHECK(!old.balance_group);
  CHECK(plan_with(5).deal(2, old).consumed() == 12);
  CHECK(plan_with(0).deal(2, vbucket::plan_state{42, 0, 12}).consumed() == 12);
}

TEST_CASE("epoch_plan: downgrade moves videos among video buckets and images among image ones") {
  // Issue 14: {"256px": {"1": [1.0, 2], "33": [1.0, 4]}} with six 40-frame clips put two
  // videos into the image bucket (target thw [1, 256, 256]).
  const bucket_config c(std::vector<bucket_spec>{{"256px", 1, 1.0, std::nullopt, 2},
                                                 {"256px", 33, 1.0, std::nullopt, 4}},
                        vbucket::opensora_v2_tables{});
  vbucket::meta_table meta;
  for (int i = 0; i < 6; ++i) meta.push_back({40, 256, 256, 12.0});
  for (int i = 0; i < 3; ++i)
    meta.push_back({1, 256, 256, std::numeric_limits<double>::quiet_NaN()});
  const auto ids =
      vbucket::assign_all(c, meta, vbucket::opensora_v2_rule{}, vbucket::fast_source(1, 0));
  const bucket_id video = c.find("256px", 33, "1:1");
  const bucket_id image = c.find("256px", 1, "1:1");
  for (std::size_t i = 0; i < 6; ++i) REQUIRE(ids[i] == video);
  for (std::size_t i = 6; i < 9; ++i) REQUIRE(ids[i] == image);
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c,
                                                   {3, 0, incomplete_policy::downgrade});
  CHECK(plan.bucket(video).downgrade_to == vbucket::no_bucket);
  CHECK(plan.bucket(video).moved_out == 0);
  CHECK(plan.bucket(video).pads == 2);
  CHECK(plan.bucket(image).moved_in == 0);
  CHECK(plan.bucket(image).pads == 1);
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const vbucket::batch b = plan.global_batch(p);
    for (std::uint32_t i : b.indices) CHECK((b.frames == 1) == (meta[i].num_frames == 1));
  }
  check_plan(ids, c, plan, 2, false);
}
