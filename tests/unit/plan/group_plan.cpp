/// Tests of vbucket/plan/group_plan.hpp, property tests over random configs, samples and worlds:
/// every step's groups tile the world (aligned blocks of their bucket's sp), every group's batch
/// fits the memory budget at its sp, every sample exactly once per epoch (counted here from the
/// ids, independently of the plan's own counts), the same schedule on every rank, and exact
/// resume under another world size, the ledger's records audited clean (and a left-out or
/// doubled group delivery found); errors for worlds and states that do not fit.

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t, std::uint64_t, std::int64_t
#include <map>      // std::map
#include <set>      // std::set
#include <vector>   // std::vector

#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group_plan.hpp"
#include "vbucket/plan/parallel_layout.hpp"
#include "vbucket/run/audit.hpp"
#include "vbucket/run/delivery_records.hpp"  // group_record
#include "vbucket/run/ledger.hpp"

#include "vbucket_test/errors.hpp"
#include "vbucket_test/layouts.hpp"
#include "vbucket_test/random_plans.hpp"
#include "vbucket_test/temp_files.hpp"

using namespace vbucket_test;
using vbucket::group_plan;
using vbucket::group_schedule;
using vbucket::group_state;
using vbucket::layout_options;

namespace {

/// A world every degree in use divides: a multiple of the largest.
std::uint32_t world_for(test_rng& g, const group_plan& p) {
  const std::int64_t most = p.sp_sizes().empty() ? 1 : p.sp_sizes().front();
  return static_cast<std::uint32_t>(most) *
         static_cast<std::uint32_t>(1 + g.below(g.chance(0.5) ? 4 : 24));
}

/// Checks one step: its groups tile [0, world) in aligned blocks of their bucket's sp; each
/// group's micro-batch fits the memory budget at its sp; every rank's view agrees.
void check_step(const group_schedule& s, std::uint64_t k, const layout_options& o,
                const group_plan& p) {
  std::uint32_t next = 0;
  for (const auto& g : s.groups(k)) {
    CHECK(g.first_rank == next);
    CHECK(g.first_rank % g.sp == 0);
    const vbucket::batch b = p.plan().make_batch(g.ref);
    const vbucket::bucket_layout& l = p.layouts().of(b.bucket);
    CHECK(static_cast<std::int64_t>(g.sp) == l.sp);
    CHECK(static_cast<std::int64_t>(b.indices.size()) == l.batch_size);
    const auto t = static_cast<double>(l.tokens);
    CHECK(o.memory.fixed + static_cast<double>(l.micro_batch) *
                               (o.memory.linear * t + o.memory.quadratic * t * t) /
                               static_cast<double>(l.sp) <=
          o.memory_limit);
    for (std::uint32_t r = g.first_rank; r < g.first_rank + g.sp; ++r) {
      const vbucket::rank_work w = s.work(k, r);
      CHECK(w.first_rank == g.first_rank);
      CHECK(w.sp_rank == r - g.first_rank);
      CHECK(w.batch.position == g.position);
      CHECK(w.repeat == g.repeat);
      std::size_t covered = 0;
      for (std::int64_t m = 0; m < w.layout.accumulation(); ++m) {
        const auto part = w.micro_step(m);
        CHECK(part.data() == b.indices.data() + covered);
        covered += part.size();
      }
      CHECK(covered == b.indices.size());
    }
    next += g.sp;
  }
  CHECK(next == s.world_size());
}

/// Counts, from the ids alone, how often each sample must appear: once for every sample in an
/// enabled bucket (pad policy: nothing dropped).
std::map<std::uint32_t, int> expected_samples(const std::vector<bucket_id>& ids,
                                              const bucket_config& c) {
  std::map<std::uint32_t, int> out;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= 0 && c.enabled(ids[i])) out[static_cast<std::uint32_t>(i)] = 1;
  return out;
}

}  // namespace

TEST_CASE("group_plan: groups tile the world, fit memory, and deal every sample once") {
  test_rng g{4545};
  for (int iteration = 0; iteration < 40; ++iteration) {
    const bucket_config c = random_config(g, 64);
    const std::vector<bucket_id> ids = random_ids(g, c, random_size(g) / 4);
    const layout_options o = test_layout_options();
    const vbucket::layout_table layouts = vbucket::choose_layouts(c, o);
    const plan_options po{.seed = g.next(), .epoch = g.below(5)};
    const group_plan p(
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(), po), layouts);
    const std::uint32_t world = world_for(g, p);
    const group_schedule s = p.deal(world);
    std::set<std::uint64_t> positions;
    std::map<std::uint32_t, int> seen;
    std::uint64_t repeats = 0;
    for (std::uint64_t k = 0; k < s.steps(); ++k) {
      check_step(s, k, o, p);
      for (const auto& grp : s.groups(k)) {
        if (grp.repeat) {
          ++repeats;
          continue;
        }
        CHECK(positions.insert(grp.position).second);
        for (const std::uint32_t i : p.plan().make_batch(grp.ref).indices) seen[i] = 1;
      }
    }
    CHECK(positions.size() == p.plan().num_batches());
    CHECK(seen == expected_samples(ids, c));
    CHECK(repeats == s.repeat_groups());
    // Repeats only where the queues ran dry: every step before the last has no repeat unless a
    // class could not fill the ranks left.
    CHECK(s.state_after(s.steps()).taken.size() == p.sp_sizes().size());
    for (std::size_t cl = 0; cl < p.sp_sizes().size(); ++cl)
      CHECK(s.state_after(s.steps()).taken[cl] == p.queue(cl).size());
  }
}

TEST_CASE("group_plan: every rank computes the same schedule") {
  test_rng g{99};
  for (int iteration = 0; iteration < 10; ++iteration) {
    const bucket_config c = random_config(g, 32);
    const std::vector<bucket_id> ids = random_ids(g, c, 3000);
    const vbucket::layout_table layouts = vbucket::choose_layouts(c, test_layout_options());
    const auto make = [&](unsigned threads) {
      return group_plan(vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(),
                                                 {.seed = 7, .epoch = 1, .threads = threads}),
                        layouts);
    };
    const group_plan a = make(1), b = make(3);
    const std::uint32_t world = world_for(g, a);
    const group_schedule sa = a.deal(world), sb = b.deal(world);
    REQUIRE(sa.steps() == sb.steps());
    for (std::uint64_t k = 0; k < sa.steps(); ++k) {
      const auto ga = sa.groups(k), gb = sb.groups(k);
      REQUIRE(ga.size() == gb.size());
      for (std::size_t i = 0; i < ga.size(); ++i) {
        CHECK(ga[i].first_rank == gb[i].first_rank);
        CHECK(ga[i].position == gb[i].position);
        const auto ia = a.plan().make_batch(ga[i].ref).indices;
        const auto ib = b.plan().make_batch(gb[i].ref).indices;
        CHECK(std::equal(ia.begin(), ia.end(), ib.begin(), ib.end()));
      }
    }
  }
}

TEST_CASE("group_plan: resume under another world size continues exactly") {
  test_rng g{2026};
  for (int iteration = 0; iteration < 40; ++iteration) {
    const bucket_config c = random_config(g, 64);
    const std::vector<bucket_id> ids = random_ids(g, c, 200 + random_size(g) / 8);
    const vbucket::layout_table layouts = vbucket::choose_layouts(c, test_layout_options());
    const group_plan p(vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(),
                                                {.seed = 3, .epoch = 2}),
                       layouts);
    const std::uint32_t w1 = world_for(g, p), w2 = world_for(g, p);
    const group_schedule first = p.deal(w1);
    const std::uint64_t k = first.steps() == 0 ? 0 : g.below(first.steps() + 1);
    const group_state state = first.state_after(k);
    const group_schedule rest = p.deal(w2, state);
    // The batches of the first k steps and of the resumed schedule: every real position once.
    std::multiset<std::uint64_t> positions;
    for (std::uint64_t s = 0; s < k; ++s)
      for (const auto& grp : first.groups(s))
        if (!grp.repeat) positions.insert(grp.position);
    for (std::uint64_t s = 0; s < rest.steps(); ++s) {
      check_step(rest, s, test_layout_options(), p);
      for (const auto& grp : rest.groups(s))
        if (!grp.repeat) positions.insert(grp.position);
    }
    CHECK(positions.size() == p.plan().num_batches());
    CHECK(std::set<std::uint64_t>(positions.begin(), positions.end()).size() == positions.size());
    // Resuming under the same world from the state is the first schedule's tail.
    const group_schedule same = p.deal(w1, state);
    REQUIRE(same.steps() == first.steps() - k);
    for (std::uint64_t s = 0; s < same.steps(); ++s) {
      const auto a = first.groups(s + k), b = same.groups(s);
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].position == b[i].position);
    }
    CHECK(rest.state_after(rest.steps()) == first.state_after(first.steps()));
  }
}

TEST_CASE("group_plan: worlds and states that do not fit are refused") {
  const bucket_config c = small_config(8, 4, 2);
  layout_options o = test_layout_options();
  // Frames 65, 33, 1; the config's batch sizes are 2, 4, 8: 65 frames runs 3 here.
  std::vector<vbucket::bucket_layout> pairs{
      {4, 3, 3, 0, 0.0}, {2, 4, 4, 0, 0.0}, {1, 8, 8, 0, 0.0}};
  const vbucket::layout_table layouts = vbucket::check_layouts(c, pairs, o);
  std::vector<bucket_id> ids;
  for (bucket_id b = 0; b < static_cast<bucket_id>(c.num_buckets()); ++b)
    for (int i = 0; i < 20; ++i) ids.push_back(b);
  const group_plan p(
      vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(), {.seed = 1}),
      layouts);
  REQUIRE(p.sp_sizes().size() == 3);
  CHECK(p.sp_sizes()[0] == 4);
  CHECK(contains(error_message([&] { (void)p.deal(6); }),
                 "sequence-parallel size 4 does not divide world size 6"));
  CHECK(contains(error_message([&] { (void)p.deal(0); }), "world size must be at least 1"));
  group_state s = p.deal(8).state_after(2);
  group_state other_seed = s;
  other_seed.seed = 2;
  CHECK(contains(error_message([&] { (void)p.deal(8, other_seed); }), "seed 2 epoch 0"));
  group_state other_classes = s;
  other_classes.sp = {8, 2, 1};
  CHECK(contains(error_message([&] { (void)p.deal(8, other_classes); }), "another layout"));
  group_state too_far = s;
  too_far.taken[1] = p.queue(1).size() + 1;
  CHECK(contains(error_message([&] { (void)p.deal(8, too_far); }), "batches of sp 2"));
  // A plan made with other batch sizes than the layout's.
  CHECK(contains(error_message([&] {
                   (void)group_plan(vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c),
                                    layouts);
                 }),
                 "in the layout"));
}

TEST_CASE("group_plan: balanced steps under a chosen layout") {
  // Every group runs the largest batch within the target time, so no group is slower than the
  // target and none is faster by more than one sample (unless its accumulation is capped).
  test_rng g{7};
  const bucket_config c = random_config(g, 16);
  const std::vector<bucket_id> ids = random_ids(g, c, 20000);
  const layout_options o = test_layout_options();
  const vbucket::layout_table layouts = vbucket::choose_layouts(c, o);
  const group_plan p(
      vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(), {.seed = 5}),
      layouts);
  const group_schedule s = p.deal(64);
  for (std::uint64_t k = 0; k < s.steps(); ++k) {
    CHECK(s.step_seconds(k) <= layouts.target_seconds() * (1.0 + 1e-9));
    for (const auto& grp : s.groups(k)) {
      const auto& l = p.layouts().of(p.plan().bucket_at(grp.position));
      const double one = o.time.predict(l.tokens, 1, l.sp, 1) - o.time.compute.fixed +
                         o.time.comm_per_micro_step * static_cast<double>(l.sp - 1);
      if (l.batch_size < l.micro_batch * o.max_accumulation)
        CHECK(s.group_seconds(grp) > layouts.target_seconds() - one - 1e-9);
    }
  }
}

TEST_CASE("group_plan: a state's text reads back, and bad text names the key") {
  const group_state s{12, 3, {4, 2, 1}, {10, 0, 7}};
  CHECK(vbucket::to_string(s) == "vbucket-groups seed=12 epoch=3 sp=4,2,1 taken=10,0,7");
  CHECK(vbucket::parse_group_state(vbucket::to_string(s)) == s);
  const group_state start{5, 0, {}, {}};
  CHECK(vbucket::parse_group_state(vbucket::to_string(start)) == start);
  CHECK(contains(error_message([] { (void)vbucket::parse_group_state("vbucket-plan seed=1"); }),
                 "does not start with vbucket-groups"));
  CHECK(contains(error_message([] {
                   (void)vbucket::parse_group_state("vbucket-groups seed=1 epoch=x sp=1 taken=0");
                 }),
                 "epoch=x is not an unsigned integer"));
  CHECK(contains(
      error_message([] { (void)vbucket::parse_group_state("vbucket-groups seed=1 epoch=0 sp=1"); }),
      "the key taken is missing"));
  CHECK(contains(error_message([] {
                   (void)vbucket::parse_group_state("vbucket-groups seed=1 epoch=0 sp=4,1 taken=2");
                 }),
                 "sp has 2 classes but taken 1"));
  CHECK(contains(error_message([] {
                   (void)vbucket::parse_group_state(
                       "vbucket-groups seed=1 epoch=0 sp=1 taken=2 world=4");
                 }),
                 "unknown key \"world\""));
}

namespace {

/// A trainer's ledger of one epoch of `p`: rank 0 declares the epoch, then `first` runs `k`
/// steps at its world and `rest` (a resume in a new "process", appending to the same files)
/// runs to the end; each group's first rank records its group's batch (`group_record`). The
/// record of every `skip`-th group is left out and of every `twice`-th written twice (0: none).
std::vector<std::string> write_group_ledgers(const vbucket_test::temp_dir& dir, const group_plan& p,
                                             std::span<const bucket_id> ids,
                                             const group_schedule& first, std::uint64_t k,
                                             const group_schedule& rest, std::uint64_t skip = 0,
                                             std::uint64_t twice = 0) {
  std::set<std::string> paths;
  std::map<std::uint32_t, vbucket::ledger_writer> files;
  const auto file = [&](std::uint32_t rank) -> vbucket::ledger_writer& {
    const std::string path = (dir.path / vbucket::ledger_file_name(rank)).string();
    paths.insert(path);
    return files.try_emplace(rank, path).first->second;
  };
  vbucket::write_epoch_block(file(0), vbucket::epoch_block_of(p.plan(), ids.size(), ids));
  std::uint64_t run_step = 0, records = 0;
  const auto run = [&](const group_schedule& s, std::uint64_t steps) {
    for (std::uint64_t step = 0; step < steps; ++step, ++run_step)
      for (std::uint32_t rank = 0; rank < s.world_size(); ++rank) {
        const vbucket::rank_work w = s.work(step, rank);
        const auto r = vbucket::group_record(w, p, {.step = run_step, .world = s.world_size()});
        CHECK(r.has_value() == (w.sp_rank == 0));
        if (!r) continue;
        CHECK(r->rank == w.first_rank);
        ++records;
        if (skip != 0 && records % skip == 0) continue;
        file(rank).write(*r);
        if (twice != 0 && records % twice == 0) file(rank).write(*r);
      }
  };
  run(first, k);
  files.clear();  // the first "process" ends; the resume appends
  vbucket::write_epoch_block(file(0), vbucket::epoch_block_of(p.plan(), ids.size(), ids));
  run(rest, rest.steps());
  return {paths.begin(), paths.end()};
}

}  // namespace

TEST_CASE("group_plan: its ledger audits clean across a resume under another world") {
  test_rng g{4501};
  for (int iteration = 0; iteration < 12; ++iteration) {
    const bucket_config c = random_config(g, 32);
    const std::vector<bucket_id> ids = random_ids(g, c, 200 + random_size(g) / 16);
    const vbucket::layout_table layouts = vbucket::choose_layouts(c, test_layout_options());
    const group_plan p(vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(),
                                                {.seed = g.next(), .epoch = g.below(4)}),
                       layouts);
    if (p.plan().num_batches() == 0) continue;
    const std::uint32_t w1 = world_for(g, p), w2 = world_for(g, p);
    const group_schedule first = p.deal(w1);
    const std::uint64_t k = g.below(first.steps() + 1);
    const group_schedule rest = p.deal(w2, first.state_after(k));
    const vbucket_test::temp_dir dir("group_ledger");
    const auto paths = write_group_ledgers(dir, p, ids, first, k, rest);
    const vbucket::audit_report r = vbucket::audit_ledgers(paths);
    INFO(vbucket::format_audit_report(r));
    CHECK(r.clean());
    REQUIRE(r.epochs.size() == 1);
    CHECK(r.epochs[0].repeat_batches ==
          rest.repeat_groups() + (k == first.steps() ? first.repeat_groups() : 0));
    CHECK(r.epochs[0].missing == 0);
    CHECK(r.epochs[0].duplicated == 0);
  }
}

TEST_CASE("group_plan: the audit finds a group's batch left out or delivered twice") {
  test_rng g{4502};
  const bucket_config c = random_config(g, 16);
  const std::vector<bucket_id> ids = random_ids(g, c, 3000);
  const vbucket::layout_table layouts = vbucket::choose_layouts(c, test_layout_options());
  const group_plan p(vbucket::make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(),
                                              {.seed = 9, .epoch = 1}),
                     layouts);
  REQUIRE(p.plan().num_batches() > 10);
  const std::uint32_t w1 = world_for(g, p), w2 = world_for(g, p);
  const group_schedule first = p.deal(w1);
  const std::uint64_t k = first.steps() / 2;
  const group_schedule rest = p.deal(w2, first.state_after(k));
  {
    const vbucket_test::temp_dir dir("group_ledger_missing");
    const vbucket::audit_report r =
        vbucket::audit_ledgers(write_group_ledgers(dir, p, ids, first, k, rest, 7));
    REQUIRE(r.epochs.size() == 1);
    CHECK(!r.clean());
    CHECK(r.epochs[0].missing > 0);
    CHECK(r.epochs[0].duplicated == 0);
    CHECK(contains(vbucket::format_audit_report(r), "missing"));
  }
  {
    const vbucket_test::temp_dir dir("group_ledger_twice");
    const vbucket::audit_report r =
        vbucket::audit_ledgers(write_group_ledgers(dir, p, ids, first, k, rest, 0, 5));
    REQUIRE(r.epochs.size() == 1);
    CHECK(!r.clean());
    CHECK(r.epochs[0].duplicated > 0);
    CHECK(r.epochs[0].missing == 0);
    CHECK(contains(vbucket::format_audit_report(r), "duplicated"));
  }
}
