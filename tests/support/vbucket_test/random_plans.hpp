#pragma once
/// Helpers shared by the planner's suites (epoch_plan, plan_stats, packed_plan, ...): a
/// deterministic generator, random configs, ids, sizes and worlds, and the checks of every
/// guarantee of a plan and of exact resume.

#include <doctest/doctest.h>

#include <algorithm>  // std::min, std::count
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t, std::uint64_t, std::int64_t
#include <iterator>   // std::size
#include <optional>   // std::nullopt
#include <set>        // std::set
#include <vector>     // std::vector

#include "vbucket/base/random.hpp"  // detail::mix64
#include "vbucket/plan/epoch_plan.hpp"

namespace vbucket_test {

// The vbucket names the helpers use, also for suites that `using namespace vbucket_test`.
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

/// A random Open-Sora 2.0 config: 1–3 resolutions, 1–5 frames keys each, a tenth disabled
/// (batch size null); batch sizes 1…max_batch, or with max_batch 0 a mix of tiny (1…4), small
/// (…32), any (…500) and large (400…500) ones.
inline bucket_config random_config(test_rng& g, std::uint64_t max_batch = 0) {
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
        const std::uint64_t kind = max_batch > 0 ? 4 : g.below(4);
        s.batch_size = static_cast<std::int64_t>(kind == 4   ? 1 + g.below(max_batch)
                                                 : kind == 0 ? 1 + g.below(4)
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
inline std::vector<bucket_id> random_ids(test_rng& g, const bucket_config& c, std::size_t n) {
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
inline bool compatible_downgrade(const bucket_config& c, bucket_id from, bucket_id to) {
  const auto& a = c.ratio_of(from);
  const auto& b = c.ratio_of(to);
  const auto& table = c.resolution_of(to).info.table;
  const std::int64_t pa = std::int64_t{a.height} * a.width, pb = std::int64_t{b.height} * b.width;
  const std::int64_t fa = c.frames_of(from).frames, fb = c.frames_of(to).frames;
  return c.enabled(to) && (fa == 1) == (fb == 1) && &table[table.closest_ratio(a.ratio)] == &b &&
         fb <= fa && pb <= pa && (fb < fa || pb < pa);
}

/// Whether `to` is reached from `from` through the plan's downgrade targets, each compatible.
inline bool reachable_by_downgrade(const bucket_config& c, const epoch_plan& plan, bucket_id from,
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
inline void check_plan(const std::vector<bucket_id>& ids, const bucket_config& c,
                       const epoch_plan& plan, std::uint32_t world, bool drop_last) {
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

/// Every sample of `ids` with a bucket appears in `batches`; the repeated slots are exactly
/// `pads` (the counted pads and alignment repeats): nothing lost, nothing replayed.
inline void check_covers_once(const std::vector<bucket_id>& ids,
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

/// `first`'s first `steps` steps (every rank of its world) and all of `rest` (dealt from the
/// state after them) cover every sample of `ids` once, apart from `plan`'s pads and `rest`'s
/// repeats: a resume under another world loses and replays nothing.
inline void check_resumed_covers_once(const std::vector<bucket_id>& ids, const epoch_plan& plan,
                                      const epoch_schedule& first, std::uint64_t steps,
                                      const epoch_schedule& rest) {
  std::vector<vbucket::batch> trained;
  for (std::uint64_t k = 0; k < steps; ++k)
    for (std::uint32_t r = 0; r < first.world_size(); ++r) trained.push_back(first.at(k, r));
  for (std::uint64_t k = 0; k < rest.steps(); ++k)
    for (std::uint32_t r = 0; r < rest.world_size(); ++r) trained.push_back(rest.at(k, r));
  std::uint64_t pads = rest.repeat_samples();
  for (const auto& pb : plan.buckets()) pads += pb.pads;
  check_covers_once(ids, trained, pads);
}

/// Checks exact resume: after `steps_done` steps of `world`, dealing the rest to `world2`
/// yields exactly the real batches not yet consumed, in global order.
inline void check_resume(const epoch_plan& plan, std::uint32_t world, std::uint64_t steps_done,
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

inline incomplete_policy random_policy(test_rng& g) {
  const std::uint64_t u = g.below(3);
  return u == 0   ? incomplete_policy::pad
         : u == 1 ? incomplete_policy::drop
                  : incomplete_policy::downgrade;
}

/// A dataset size in 0…10^5, log-uniform-ish so that small and empty cases are common.
inline std::size_t random_size(test_rng& g) {
  const std::uint64_t u = g.below(10);
  if (u == 0) return 0;
  if (u < 4) return static_cast<std::size_t>(g.below(20));
  if (u < 7) return static_cast<std::size_t>(g.below(2000));
  if (u < 9) return static_cast<std::size_t>(g.below(20000));
  return static_cast<std::size_t>(g.below(100001));
}

inline std::uint32_t random_world(test_rng& g) {
  return static_cast<std::uint32_t>(g.chance(0.3) ? 1 + g.below(8) : 1 + g.below(64));
}

/// A config with one resolution (256px), frames {1, 33, 65} and the given batch sizes.
inline bucket_config small_config(std::int64_t bs_image, std::int64_t bs33, std::int64_t bs65) {
  std::vector<bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, bs_image},
                                    {"256px", 33, 1.0, std::nullopt, bs33},
                                    {"256px", 65, 1.0, std::nullopt, bs65}};
  return bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace vbucket_test
