/// Tests of vbucket/epoch_plan.hpp and vbucket/plan_stats.hpp: the planner's guarantees as
/// property tests over random configs, dataset sizes, world sizes and batch sizes; exact
/// resume with the same and another world size; step balance; statistics; Open-Sora's
/// "idx-T-H-W" strings; empty and tiny cases.

#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal, std::count
#include <cstdint>    // std::uint32_t, std::uint64_t
#include <limits>     // quiet_NaN
#include <map>        // std::map
#include <ranges>     // std::views
#include <set>        // std::set
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/assign.hpp"
#include "vbucket/epoch_plan.hpp"
#include "vbucket/group.hpp"
#include "vbucket/plan_stats.hpp"
#include "vbucket/rules.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#define VBUCKET_PLAN_TEST_JSON 1
#endif

namespace {

using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::bucket_spec;
using vbucket::epoch_plan;
using vbucket::epoch_schedule;
using vbucket::incomplete_policy;
using vbucket::plan_options;

/// A small deterministic generator for the tests (SplitMix64).
struct test_rng {
  std::uint64_t state;
  std::uint64_t next() { return vbucket::detail::mix64(state += vbucket::detail::golden_gamma); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
};

/// A random Open-Sora 2.0 config: 1–3 resolutions, 1–5 frames keys each, batch sizes 1…500
/// (sometimes small, sometimes null = disabled).
bucket_config random_config(test_rng& g) {
  static const char* const names[] = {"144px", "256px", "360p", "480p", "512px", "720p", "768px"};
  static const std::int64_t frames[] = {1, 5, 17, 33, 49, 65, 97, 129};
  std::vector<bucket_spec> specs;
  const std::uint64_t nres = 1 + g.below(3);
  std::set<std::uint64_t> used;
  while (used.size() < nres) used.insert(g.below(std::size(names)));
  for (std::uint64_t r : used) {
    std::set<std::uint64_t> keys;
    const std::uint64_t nk = 1 + g.below(5);
    while (keys.size() < nk) keys.insert(g.below(std::size(frames)));
    for (std::uint64_t k : keys) {
      bucket_spec s;
      s.resolution = names[r];
      s.frames = frames[k];
      if (g.chance(0.1)) {
        s.p_resolution = 0.0;  // disabled
      } else {
        s.p_resolution = 0.5;
        const std::uint64_t kind = g.below(4);
        s.batch_size = static_cast<std::int64_t>(kind == 0   ? 1 + g.below(4)
                                                 : kind == 1 ? 1 + g.below(32)
                                                 : kind == 2 ? 1 + g.below(500)
                                                             : 400 + g.below(101));
      }
      specs.push_back(s);
    }
  }
  return bucket_config(specs, vbucket::opensora_v2_tables{});
}

/// Random bucket ids for n samples: a few popular buckets, a long tail, one-sample buckets,
/// some samples without a bucket or invalid; sometimes samples in disabled buckets.
std::vector<bucket_id> random_ids(test_rng& g, const bucket_config& c, std::size_t n) {
  const std::size_t nb = c.num_buckets();
  std::vector<bucket_id> active;
  const std::uint64_t nactive = 1 + g.below(std::min<std::uint64_t>(nb, 40));
  for (std::uint64_t a = 0; a < nactive; ++a) {
    const auto b = static_cast<bucket_id>(g.below(nb));
    if (c.enabled(b) || g.chance(0.2)) active.push_back(b);
  }
  if (active.empty()) active.push_back(static_cast<bucket_id>(g.below(nb)));
  std::vector<bucket_id> ids(n);
  for (auto& id : ids) {
    const std::uint64_t u = g.below(100);
    if (u < 5) {
      id = vbucket::no_bucket;
    } else if (u < 6) {
      id = vbucket::invalid_sample;
    } else if (u < 50) {
      id = active[0];
    } else {
      id = active[g.below(active.size())];
    }
  }
  // A few one-sample buckets.
  for (int k = 0; k < 3 && n > 0; ++k) ids[g.below(n)] = static_cast<bucket_id>(g.below(nb));
  return ids;
}

/// A downgrade target: enabled, of the same kind (image: frames 1, or video), the closest
/// ratio of its resolution's table to the source's ratio, at most as many frames and pixels,
/// fewer of one.
bool compatible_downgrade(const bucket_config& c, bucket_id from, bucket_id to) {
  const auto& a = c.ratio_of(from);
  const auto& b = c.ratio_of(to);
  const auto& table = c.resolution_of(to).info.table;
  const std::int64_t pa = std::int64_t{a.height} * a.width, pb = std::int64_t{b.height} * b.width;
  const std::int64_t fa = c.frames_of(from).frames, fb = c.frames_of(to).frames;
  return c.enabled(to) && (fa == 1) == (fb == 1) && &table[table.closest_ratio(a.ratio)] == &b &&
         fb <= fa && pb <= pa && (fb < fa || pb < pa);
}

/// Whether `to` is reached from `from` through the plan's downgrade targets, each compatible.
bool reachable_by_downgrade(const bucket_config& c, const epoch_plan& plan, bucket_id from,
                            bucket_id to) {
  std::size_t hops = 0;
  for (bucket_id b = from; b != vbucket::no_bucket; b = plan.bucket(b).downgrade_to) {
    if (b == to) return true;
    const bucket_id next = plan.bucket(b).downgrade_to;
    if (next != vbucket::no_bucket && !compatible_downgrade(c, b, next)) return false;
    if (++hops > c.num_buckets()) return false;  // a cycle
  }
  return false;
}

/// Checks every guarantee of item 3 for one plan dealt to `world` ranks from position 0.
void check_plan(const std::vector<bucket_id>& ids, const bucket_config& c, const epoch_plan& plan,
                std::uint32_t world, bool drop_last) {
  const incomplete_policy policy = plan.options().policy;
  const epoch_schedule s = plan.deal(world, 0, drop_last);
  const std::uint64_t n = plan.num_batches();
  std::vector<std::uint32_t> seen(ids.size(), 0);
  std::vector<std::uint32_t> position_seen(n, 0);
  std::uint64_t slots = 0;
  // Every rank: same number of steps; each batch full, of its bucket's shape.
  for (std::uint32_t r = 0; r < world; ++r) {
    const auto steps = s.rank(r);
    REQUIRE(steps.size() == s.steps());
    std::uint64_t k = 0;
    for (const vbucket::batch& b : steps) {
      REQUIRE(b.step == k);
      REQUIRE(b.position == k * world + r);
      ++k;
      REQUIRE(b.bucket >= 0);
      REQUIRE(c.enabled(b.bucket));
      REQUIRE(b.indices.size() == static_cast<std::size_t>(c.batch_size(b.bucket)));
      REQUIRE(b.frames == c.frames_of(b.bucket).frames);
      REQUIRE(b.height == c.ratio_of(b.bucket).height);
      REQUIRE(b.width == c.ratio_of(b.bucket).width);
      if (!b.repeat) {
        REQUIRE(b.position < n);
        ++position_seen[b.position];
        // The global sequence does not depend on the world size.
        REQUIRE(plan.global_batch(b.position).indices.data() == b.indices.data());
      } else {
        REQUIRE(b.position >= n);
      }
      for (std::uint32_t i : b.indices) {
        REQUIRE(i < ids.size());
        const bucket_id own = ids[i];
        REQUIRE(own >= 0);
        if (own != b.bucket) {
          REQUIRE(policy == incomplete_policy::downgrade);
          REQUIRE(reachable_by_downgrade(c, plan, own, b.bucket));
        }
        ++seen[i];
      }
      slots += b.indices.size();
    }
  }
  // Real batches: each dealt once, except the drop_last tail.
  const std::uint64_t dealt_real = n - s.dropped_batches();
  for (std::uint64_t p = 0; p < n; ++p) REQUIRE(position_seen[p] == (p < dealt_real ? 1u : 0u));
  if (drop_last) {
    REQUIRE(s.repeat_batches() == 0);
    REQUIRE(s.dropped_batches() == n % world);
  } else {
    REQUIRE(s.dropped_batches() == 0);
    REQUIRE((n + s.repeat_batches()) % world == 0);
    REQUIRE(s.repeat_batches() < world);
  }
  REQUIRE(s.steps() * world == dealt_real + s.repeat_batches());

  // Counts per bucket.
  std::uint64_t assigned = 0, pads = 0, dropped = 0, samples = 0, moved_in = 0, moved_out = 0;
  for (std::size_t b = 0; b < c.num_buckets(); ++b) {
    const auto& pb = plan.bucket(static_cast<bucket_id>(b));
    REQUIRE(pb.grouped == static_cast<std::uint64_t>(
                              std::count(ids.begin(), ids.end(), static_cast<bucket_id>(b))));
    REQUIRE(pb.grouped + pb.moved_in == pb.samples + pb.dropped + pb.moved_out);
    REQUIRE((pb.batch_size == 0 ? pb.batches == 0
                                : pb.batches * pb.batch_size == pb.samples + pb.pads));
    if (pb.batch_size > 0) REQUIRE(pb.pads < pb.batch_size);
    if (pb.batch_size > 0 && pb.pads > 0) REQUIRE(pb.pads <= pb.batch_size - 1);
    if (policy == incomplete_policy::drop) REQUIRE(pb.pads == 0);
    if (policy != incomplete_policy::downgrade) REQUIRE(pb.moved_in + pb.moved_out == 0);
    if (policy != incomplete_policy::drop && pb.batch_size > 0) REQUIRE(pb.dropped == 0);
    assigned += pb.grouped;
    pads += pb.pads;
    dropped += pb.dropped;
    samples += pb.samples;
    moved_in += pb.moved_in;
    moved_out += pb.moved_out;
  }
  REQUIRE(moved_in == moved_out);
  REQUIRE(assigned == ids.size() - plan.unassigned() - plan.invalid());
  REQUIRE(samples + dropped == assigned);

  // Every sample: with pad, every assigned sample (outside disabled buckets) appears and the
  // repeats are exactly the counted pads; with drop, no sample appears twice.
  std::uint64_t distinct = 0, repeats = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) REQUIRE(seen[i] == 0);
    if (seen[i] > 0) {
      ++distinct;
      repeats += seen[i] - 1;
    }
  }
  REQUIRE(slots == samples + pads + s.repeat_samples() - s.dropped_samples());
  if (!drop_last) {
    REQUIRE(distinct == samples);
    REQUIRE(repeats == pads + s.repeat_samples());
    if (policy != incomplete_policy::drop) {
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (ids[i] >= 0 && plan.bucket(ids[i]).batch_size > 0) REQUIRE(seen[i] >= 1);
    }
  }
  if (drop_last && policy == incomplete_policy::drop) {
    for (std::uint32_t v : seen) REQUIRE(v <= 1);
    REQUIRE(distinct == samples - s.dropped_samples());
  }
}

/// Checks exact resume: after `steps_done` steps of `world`, dealing the rest to `world2`
/// yields exactly the real batches not yet consumed, in global order.
void check_resume(const epoch_plan& plan, std::uint32_t world, std::uint64_t steps_done,
                  std::uint32_t world2, bool drop_last) {
  const epoch_schedule first = plan.deal(world, 0, drop_last);
  const vbucket::plan_state state = first.state_after(steps_done);
  REQUIRE(state.consumed == steps_done * world);
  REQUIRE(vbucket::plan_state::parse(state.to_string()) == state);
  const epoch_schedule rest = plan.deal(world2, state, drop_last);
  const std::uint64_t n = plan.num_batches();
  std::vector<std::uint32_t> position_seen(n, 0);
  for (std::uint64_t k = 0; k < steps_done; ++k)
    for (std::uint32_t r = 0; r < world; ++r) {
      const auto b = first.at(k, r);
      if (!b.repeat) ++position_seen[b.position];
    }
  for (std::uint64_t k = 0; k < rest.steps(); ++k)
    for (std::uint32_t r = 0; r < world2; ++r) {
      const auto b = rest.at(k, r);
      REQUIRE(b.position == state.consumed + k * world2 + r);
      if (!b.repeat) {
        ++position_seen[b.position];
        REQUIRE(b.indices.data() == plan.global_batch(b.position).indices.data());
      }
    }
  // No replay, no skip (with drop_last, only the incomplete last step of `rest` is left out).
  const std::uint64_t begin = std::min(state.consumed, n);
  const std::uint64_t tail = drop_last ? (n - begin) % world2 : 0;
  for (std::uint64_t p = 0; p < n; ++p) {
    const bool consumed_before = p < state.consumed;
    const bool left_out = !consumed_before && p >= n - tail;
    REQUIRE(position_seen[p] == (left_out ? 0u : 1u));
  }
  // Same world size: exactly the rest of the original schedule, repeats included.
  if (world2 == world) {
    REQUIRE(rest.steps() == first.steps() - std::min(steps_done, first.steps()));
    for (std::uint64_t k = 0; k < rest.steps(); ++k)
      for (std::uint32_t r = 0; r < world; ++r) {
        const auto a = first.at(steps_done + k, r);
        const auto b = rest.at(k, r);
        REQUIRE(a.bucket == b.bucket);
        REQUIRE(a.indices.data() == b.indices.data());
        REQUIRE(a.repeat == b.repeat);
        REQUIRE(a.position == b.position);
      }
  }
}

incomplete_policy random_policy(test_rng& g) {
  const std::uint64_t u = g.below(3);
  return u == 0   ? incomplete_policy::pad
         : u == 1 ? incomplete_policy::drop
                  : incomplete_policy::downgrade;
}

/// A dataset size in 0…10^5, log-uniform-ish so that small and empty cases are common.
std::size_t random_size(test_rng& g) {
  const std::uint64_t u = g.below(10);
  if (u == 0) return 0;
  if (u < 4) return static_cast<std::size_t>(g.below(20));
  if (u < 7) return static_cast<std::size_t>(g.below(2000));
  if (u < 9) return static_cast<std::size_t>(g.below(20000));
  return static_cast<std::size_t>(g.below(100001));
}

std::uint32_t random_world(test_rng& g) {
  return static_cast<std::uint32_t>(g.chance(0.3) ? 1 + g.below(8) : 1 + g.below(64));
}

/// A config with one resolution (256px), frames {1, 33, 65} and the given batch sizes.
bucket_config small_config(std::int64_t bs_image, std::int64_t bs33, std::int64_t bs65) {
  std::vector<bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, bs_image},
                                    {"256px", 33, 1.0, std::nullopt, bs33},
                                    {"256px", 65, 1.0, std::nullopt, bs65}};
  return bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace

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

TEST_CASE("epoch_plan: resume state as text") {
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

TEST_CASE("epoch_plan: Open-Sora idx-T-H-W strings") {
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

TEST_CASE("epoch_plan: policy names") {
  for (auto p : {incomplete_policy::pad, incomplete_policy::drop, incomplete_policy::downgrade})
    CHECK(vbucket::parse_policy(vbucket::policy_name(p)) == p);
  CHECK_FALSE(vbucket::parse_policy("pads").has_value());
}

TEST_CASE("plan_stats: totals agree with the plan, by bucket, shape, ratio and kind") {
  test_rng g{31};
  for (int iteration = 0; iteration < 10; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, static_cast<std::size_t>(g.below(20000)));
    plan_options o;
    o.policy = random_policy(g);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const std::uint32_t world = random_world(g);
    const epoch_schedule s = plan.deal(world, 0, iteration % 2 == 0);
    const vbucket::plan_stats st = vbucket::compute_plan_stats(s, c);
    vbucket::plan_counts sum_buckets, sum_shapes, sum_ratios;
    for (const auto& b : st.buckets) {
      sum_buckets.buckets += b.counts.buckets;
      sum_buckets.grouped += b.counts.grouped;
      sum_buckets.samples += b.counts.samples;
      sum_buckets.batches += b.counts.batches;
      sum_buckets.pads += b.counts.pads;
      sum_buckets.dropped += b.counts.dropped;
      CHECK(b.counts.batches == plan.bucket(b.bucket).batches);
      CHECK(b.frames == c.frames_of(b.bucket).frames);
      CHECK(b.ratio == c.ratio_of(b.bucket).key);
    }
    for (const auto& x : st.by_shape) {
      sum_shapes.samples += x.counts.samples;
      sum_shapes.batches += x.counts.batches;
      sum_shapes.pads += x.counts.pads;
    }
    for (const auto& x : st.by_ratio) {
      sum_ratios.samples += x.counts.samples;
      sum_ratios.batches += x.counts.batches;
      sum_ratios.pads += x.counts.pads;
    }
    for (std::size_t i = 1; i < st.by_ratio.size(); ++i)
      CHECK(st.by_ratio[i - 1].value <= st.by_ratio[i].value);
    CHECK(sum_buckets.samples == st.total.samples);
    CHECK(sum_buckets.batches == st.total.batches);
    CHECK(sum_buckets.pads == st.total.pads);
    CHECK(sum_buckets.dropped == st.total.dropped);
    CHECK(sum_buckets.grouped == st.total.grouped);
    CHECK(sum_buckets.buckets == st.total.buckets);
    CHECK(sum_shapes.samples == st.total.samples);
    CHECK(sum_shapes.batches == st.total.batches);
    CHECK(sum_ratios.pads == st.total.pads);
    CHECK(sum_ratios.batches == st.total.batches);
    CHECK(st.images.samples + st.videos.samples == st.total.samples);
    CHECK(st.images.batches + st.videos.batches == st.total.batches);
    CHECK(st.total.batches == plan.num_batches());
    CHECK(st.total.grouped + st.unassigned + st.invalid == ids.size());
    CHECK(st.alignment.world == world);
    CHECK(st.alignment.steps == s.steps());
    CHECK(st.alignment.repeat_batches == s.repeat_batches());
    CHECK(st.alignment.dropped_batches == s.dropped_batches());
    CHECK(st.alignment.steps * world ==
          st.total.batches + st.alignment.repeat_batches - st.alignment.dropped_batches);
  }
}

TEST_CASE("plan_stats: step balance orders batches of similar cost into each step") {
  // Open-Sora v1.2's config, metadata shaped like a web-video crawl, the v1.2 rule.
  std::vector<bucket_spec> specs;
  const bucket_config c =
#ifdef VBUCKET_PLAN_TEST_JSON
      vbucket::json::load_bucket_config(
          std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v12.json",
          vbucket::opensora_v12_tables{});
#else
      bucket_config(std::vector<bucket_spec>{{"144p", 1, 1.0, std::nullopt, 475},
                                             {"144p", 51, 1.0, std::nullopt, 51},
                                             {"360p", 1, 1.0, std::nullopt, 141},
                                             {"360p", 102, 0.5, std::nullopt, 4},
                                             {"720p", 51, 0.2, std::nullopt, 2}},
                    vbucket::opensora_v12_tables{});
#endif
  test_rng g{8};
  vbucket::meta_table meta;
  static const std::int64_t sizes[][2] = {{1080, 1920}, {720, 1280},  {480, 854}, {360, 640},
                                          {1920, 1080}, {1080, 1080}, {240, 426}};
  for (int i = 0; i < 30000; ++i) {
    const auto& hw = sizes[g.below(std::size(sizes))];
    const bool image = g.chance(0.15);
    meta.push_back({image ? 1 : static_cast<std::int64_t>(50 + g.below(500)), hw[0], hw[1],
                    image ? std::numeric_limits<double>::quiet_NaN() : 30.0});
  }
  const auto ids =
      vbucket::assign_all(c, meta, vbucket::opensora_v12_rule{}, vbucket::fast_source(1, 0));
  for (std::uint32_t world : {8u, 64u}) {
    CAPTURE(world);
    plan_options random_order{42, 0};
    plan_options balanced{42, 0};
    balanced.balance_group = world;
    const epoch_plan a = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, random_order);
    const epoch_plan b = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, balanced);
    const auto ra = vbucket::step_balance(a.deal(world));
    const auto rb = vbucket::step_balance(b.deal(world));
    MESSAGE("world " << world << ": max/mean per step, random order " << ra.max_over_mean
                     << ", balanced " << rb.max_over_mean);
    CHECK(ra.max_over_mean > 1.1);
    CHECK(rb.max_over_mean < 1.02);
    CHECK(rb.max_over_mean < ra.max_over_mean);
    // Balance does not change what is delivered: the same batches, another order.
    CHECK(a.num_batches() == b.num_batches());
    check_plan(ids, c, b, world, false);
    // Resuming a balanced plan with another world size stays exact.
    check_resume(b, world, b.deal(world).steps() / 3, world / 2, false);
  }
  // The CLI's --balance group does not follow the world size: worlds that divide it get steps
  // as balanced as with G = W; one that does not (7) mixes chunks in a few steps only.
  plan_options fixed{42, 0};
  fixed.balance_group = vbucket::default_balance_group;
  const epoch_plan d = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, fixed);
  for (std::uint32_t world : {7u, 8u, 24u, 64u}) {
    CAPTURE(world);
    const auto rd = vbucket::step_balance(d.deal(world));
    MESSAGE("world " << world << ": max/mean per step with G = " << fixed.balance_group << ": "
                     << rd.max_over_mean);
    CHECK(rd.max_over_mean < (vbucket::default_balance_group % world == 0 ? 1.02 : 1.05));
    check_plan(ids, c, d, world, false);
  }
  // A user cost: frames only. Costs are per bucket and must be finite and ≥ 0.
  auto frames_cost = [](const bucket_config& cfg, bucket_id id, std::int64_t bs) {
    return static_cast<double>(cfg.frames_of(id).frames * bs);
  };
  const epoch_plan f =
      vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {1, 0}, frames_cost);
  for (const auto& pb : f.buckets())
    if (pb.batches > 0)
      CHECK(pb.cost == static_cast<double>(pb.frames) * static_cast<double>(pb.batch_size));
  auto negative = [](const bucket_config&, bucket_id, std::int64_t) { return -1.0; };
  CHECK_THROWS_AS((void)vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {}, negative),
                  vbucket::error);
}

TEST_CASE("epoch_plan: latent tokens") {
  CHECK(vbucket::latent_tokens(1, 256, 256) == 256.0);
  CHECK(vbucket::latent_tokens(5, 256, 256) == 512.0);
  CHECK(vbucket::latent_tokens(129, 720, 1280) == 33.0 * 45.0 * 80.0);
  CHECK(vbucket::latent_tokens(4, 16, 16) == 1.0);
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

namespace {

/// Every sample of `ids` with a bucket appears in `batches`; the repeated slots are exactly
/// `pads` (the counted pads and alignment repeats): nothing lost, nothing replayed.
void check_covers_once(const std::vector<bucket_id>& ids,
                       const std::vector<vbucket::batch>& batches, std::uint64_t pads) {
  std::vector<std::uint32_t> seen(ids.size(), 0);
  for (const vbucket::batch& b : batches)
    for (std::uint32_t i : b.indices) ++seen[i];
  std::uint64_t repeats = 0, missing = 0, stray = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) {
      stray += seen[i];
    } else if (seen[i] == 0) {
      ++missing;
    } else {
      repeats += seen[i] - 1;
    }
  }
  CHECK(stray == 0);
  CHECK(missing == 0);
  CHECK(repeats == pads);
}

}  // namespace

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
    std::vector<vbucket::batch> trained;
    for (std::uint64_t k = 0; k < 10; ++k)
      for (std::uint32_t r = 0; r < 4; ++r) trained.push_back(first.at(k, r));
    for (std::uint64_t k = 0; k < rest.steps(); ++k)
      for (std::uint32_t r = 0; r < 2; ++r) trained.push_back(rest.at(k, r));
    std::uint64_t pads = rest.repeat_samples();
    for (const auto& pb : before.buckets()) pads += pb.pads;
    check_covers_once(ids, trained, pads);
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

TEST_CASE("epoch_plan: resume state text with a balance group") {
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

TEST_CASE("plan_stats: pad report: share of pads, worst buckets, what downgrade would leave") {
  const bucket_config c = small_config(10, 4, 4);
  const bucket_id img = c.find("256px", 1, "1:1");
  const bucket_id v33 = c.find("256px", 33, "1:1");
  const bucket_id v65 = c.find("256px", 65, "1:1");
  const bucket_id v65b = c.find("256px", 65, "16:9");
  auto report = [&](const std::vector<bucket_id>& ids, incomplete_policy policy) {
    const epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {1, 0, policy});
    return vbucket::compute_pad_report(plan, c);
  };
  SUBCASE("one image in a bucket of 10, two full video batches: downgrade cannot help") {
    std::vector<bucket_id> ids(8, v33);
    ids.push_back(img);
    const vbucket::pad_report r = report(ids, incomplete_policy::pad);
    CHECK(r.pads == 9);
    CHECK(r.slots == 18);  // 1 + 9 pads, 8
    CHECK(r.fraction() == doctest::Approx(0.5));
    CHECK(r.exceeds(0.25));
    CHECK(!r.exceeds(0.5));
    CHECK(!r.exceeds(1.0));
    REQUIRE(r.worst.size() == 1);
    CHECK(r.worst[0].bucket == img);
    CHECK(r.worst[0].resolution == "256px");
    CHECK(r.worst[0].frames == 1);
    CHECK(r.worst[0].ratio == "1:1");
    CHECK(r.worst[0].pads == 9);
    CHECK(r.worst[0].slots == 10);
    CHECK(r.downgrade_pads == 9);  // no smaller image bucket; videos never take images
    CHECK(!r.downgrade_helps());
  }
  SUBCASE("leftovers of 65 frames fill the 33-frame batch under downgrade") {
    std::vector<bucket_id> ids(5, v65);  // 5 = 4 + 1: 3 pads; downgrade: 1 -> 33
    ids.insert(ids.end(), 3, v33);       // 3: 1 pad; downgrade: 3 + 1 = 4
    ids.insert(ids.end(), 3, v65b);      // 3: 1 pad; downgrade: 33 16:9, 1 pad
    const vbucket::pad_report r = report(ids, incomplete_policy::pad);
    CHECK(r.pads == 5);
    CHECK(r.slots == 16);
    REQUIRE(r.worst.size() == 3);
    CHECK(r.worst[0].bucket == v65);
    // Equal pads: the bucket where they are the larger share first (4 slots each here), then
    // by id.
    CHECK(r.worst[1].pads == 1);
    CHECK(r.worst[2].pads == 1);
    CHECK(r.downgrade_pads == 1);
    CHECK(r.downgrade_slots == 12);
    CHECK(r.downgrade_fraction() == doctest::Approx(1.0 / 12.0));
    CHECK(r.downgrade_helps());
    // Already downgrading: the same pads, nothing to suggest.
    const vbucket::pad_report d = report(ids, incomplete_policy::downgrade);
    CHECK(d.pads == 1);
    CHECK(d.downgrade_pads == 1);
    CHECK(!d.downgrade_helps());
    // Drop: no pads at all.
    const vbucket::pad_report x = report(ids, incomplete_policy::drop);
    CHECK(x.pads == 0);
    CHECK(x.fraction() == 0.0);
    CHECK(!x.exceeds(0.0));
  }
  SUBCASE("empty plan") {
    const vbucket::pad_report r = report({}, incomplete_policy::pad);
    CHECK(r.slots == 0);
    CHECK(r.fraction() == 0.0);
    CHECK(!r.exceeds(0.0));
    CHECK(r.worst.empty());
  }
}

TEST_CASE("plan_stats: pad report's downgrade figures match a downgrade plan") {
  test_rng g{2718};
  for (int iteration = 0; iteration < 30; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, random_size(g));
    plan_options o{g.next(), 0};
    const epoch_plan padded = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    o.policy = incomplete_policy::downgrade;
    const epoch_plan down = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const vbucket::pad_report r = vbucket::compute_pad_report(padded, c, 5);
    std::uint64_t pads = 0, slots = 0, down_pads = 0, down_slots = 0, with_pads = 0;
    for (const auto& pb : padded.buckets()) {
      pads += pb.pads;
      slots += pb.samples + pb.pads;
      with_pads += pb.pads > 0 ? 1 : 0;
    }
    for (const auto& pb : down.buckets()) {
      down_pads += pb.pads;
      down_slots += pb.samples + pb.pads;
    }
    CAPTURE(iteration);
    CHECK(r.pads == pads);
    CHECK(r.slots == slots);
    CHECK(r.downgrade_pads == down_pads);
    CHECK(r.downgrade_slots == down_slots);
    CHECK(r.worst.size() == std::min<std::uint64_t>(5, with_pads));
    for (std::size_t i = 1; i < r.worst.size(); ++i) CHECK(r.worst[i - 1].pads >= r.worst[i].pads);
    for (const auto& w : r.worst) CHECK(w.pads == padded.bucket(w.bucket).pads);
  }
}
