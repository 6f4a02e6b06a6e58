// The training run as one plan (include/vbucket/run/run_plan.hpp, run_sources.hpp, run_memory.hpp):
// property tests over random scenarios (a fixed seed list) — weighted sources over several
// epochs, a stage change mid-epoch, world 8 -> 6 -> 7, an out-of-memory call at a random step,
// interruptions resumed from the state line in a fresh object — each checking that every
// epoch's drawn samples are delivered exactly once apart from counted pads and repeats.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vbucket/plan/run_memory.hpp"
#include "vbucket/run/run_plan.hpp"
#include "vbucket/run/run_sources.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/errors.hpp"
#include "vbucket_test/run_tables.hpp"  // lcg, run_table

namespace {

using vbucket::run_batch;
using vbucket::run_plan;
using vbucket_test::spec;

using vbucket_test::lcg;

std::shared_ptr<const vbucket::meta_table> table(std::size_t n, std::uint64_t seed) {
  return vbucket_test::run_table(n, seed, {.varied_sizes = true});
}

/// Stage configs: every probability 1, so every row is assigned.
vbucket::bucket_config config_256(std::int64_t bs_scale = 1) {
  return vbucket::bucket_config(
      std::vector{spec("256px", 1, 1.0, -1, 8 * bs_scale), spec("256px", 33, 1.0, -1, 4 * bs_scale),
                  spec("256px", 65, 1.0, -1, 3 * bs_scale),
                  spec("256px", 129, 1.0, -1, 2 * bs_scale)},
      vbucket::opensora_v2_tables{});
}
vbucket::bucket_config config_768() {
  return vbucket::bucket_config(
      std::vector{spec("256px", 1, 1.0, -1, 6), spec("256px", 33, 1.0, -1, 5),
                  spec("256px", 65, 1.0, -1, 2), spec("256px", 129, 1.0, -1, 2),
                  spec("768px", 1, 1.0, -1, 3), spec("768px", 33, 1.0, -1, 2),
                  spec("768px", 65, 1.0, -1, 1), spec("768px", 129, 1.0, -1, 1)},
      vbucket::opensora_v2_tables{});
}

std::vector<vbucket::run_source> sources(std::size_t k, std::uint64_t seed, std::size_t rows = 0) {
  std::vector<vbucket::run_source> out;
  const char* names[] = {"web", "curated", "images"};
  for (std::size_t s = 0; s < k; ++s) {
    vbucket::run_source src;
    src.name = names[s];
    src.table = table(rows ? rows : 300 + 200 * s, seed * 31 + s);
    out.push_back(std::move(src));
  }
  return out;
}

vbucket::draw_spec weights(std::vector<double> w, std::uint64_t n) {
  vbucket::draw_spec d;
  for (double x : w) d.draws.push_back({vbucket::draw_kind::weight, x});
  d.epoch_samples = n;
  return d;
}

/// A change a scenario makes before the step `step` is delivered.
struct event {
  std::uint64_t step = 0;
  enum kind_t { world, oom, save } kind = world;
  std::uint32_t value = 0;  // world: the new size; oom: the rank that failed
};

struct delivered {
  std::vector<run_batch> batches;
  std::vector<std::string> states;  // the state after each event of kind save
};

/// Runs `epochs` epochs of the run `make(world)` builds, applying `events`; with `interrupt`,
/// a save event replaces the run by a fresh one loaded from its state line.
template <class Make>
delivered simulate(const Make& make, std::uint64_t epochs, std::vector<event> events,
                   bool interrupt, std::uint32_t world0) {
  delivered out;
  std::unique_ptr<run_plan> run = make(world0);
  std::uint32_t world = world0;
  std::sort(events.begin(), events.end(),
            [](const event& a, const event& b) { return a.step < b.step; });
  std::size_t next = 0;
  while (run->epoch() < epochs) {
    while (next < events.size() && events[next].step <= run->step()) {
      const event e = events[next++];
      if (e.kind == event::world) {
        world = e.value;
        run->set_world(world);
      } else if (e.kind == event::oom) {
        const std::uint32_t r = e.value % world;
        try {
          run->out_of_memory(std::span<const std::uint32_t>(&r, 1));
        } catch (const vbucket::error&) {
          // batch size already 1: the scenario goes on (a trainer would stop)
        }
      } else {
        out.states.push_back(run->state());
        if (interrupt) {
          run = make(world);
          run->load(out.states.back());
        }
      }
    }
    for (std::uint32_t r = 0; r < world; ++r) out.batches.push_back(run->batch(r));
    run->advance();
  }
  return out;
}

/// Per epoch: every drawn position delivered exactly once as a real (not pad, not repeat)
/// entry; pads and repeats only of the epoch's drawn samples. Returns per-epoch per-source
/// real counts.
std::map<std::uint64_t, std::vector<std::uint64_t>> check_exactly_once(
    const std::vector<run_batch>& batches, const std::map<std::uint64_t, std::uint64_t>& drawn,
    std::size_t num_sources) {
  std::map<std::uint64_t, std::vector<std::uint32_t>> seen;
  std::map<std::uint64_t, std::vector<std::uint64_t>> per_source;
  for (const run_batch& b : batches) {
    auto& s = seen[b.epoch];
    auto& ps = per_source[b.epoch];
    ps.resize(num_sources);
    REQUIRE(drawn.count(b.epoch) == 1);
    s.resize(drawn.at(b.epoch));
    REQUIRE(b.pads <= b.size());
    for (std::size_t i = 0; i < b.size(); ++i) {
      INFO("epoch " << b.epoch << " step " << b.step << " segment " << b.segment << " stage "
                    << b.stage);
      REQUIRE(b.drawn[i] < s.size());
      if (b.repeat || i >= b.size() - b.pads) continue;
      ++s[b.drawn[i]];
      ++ps[b.sources[i]];
    }
  }
  for (const auto& [e, s] : seen) {
    std::uint64_t missing = 0, twice = 0;
    for (const std::uint32_t c : s) {
      missing += c == 0;
      twice += c > 1;
    }
    INFO("epoch " << e);
    CHECK(missing == 0);
    CHECK(twice == 0);
  }
  return per_source;
}

std::map<std::uint64_t, std::uint64_t> drawn_sizes(const std::vector<run_batch>& batches,
                                                   const std::vector<vbucket::run_source>& src,
                                                   const vbucket::draw_spec& spec,
                                                   std::uint64_t seed) {
  std::map<std::uint64_t, std::uint64_t> out;
  for (const run_batch& b : batches)
    if (!out.count(b.epoch)) out[b.epoch] = vbucket::draw_epoch(src, spec, seed, b.epoch).size();
  return out;
}

bool same_batch(const run_batch& a, const run_batch& b) {
  return a.epoch == b.epoch && a.step == b.step && a.rank == b.rank && a.stage == b.stage &&
         a.bucket == b.bucket && a.pads == b.pads && a.repeat == b.repeat && a.drawn == b.drawn &&
         a.sources == b.sources && a.rows == b.rows;
}

const std::uint64_t scenario_seeds[] = {1, 2, 3, 5, 8, 13};

}  // namespace

TEST_CASE("run_plan: draw counts — weights apportioned exactly, counts and repeats as given") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    const std::size_t k = 2 + g.below(3);
    std::vector<std::uint64_t> sizes(k);
    std::vector<std::string> names(k);
    vbucket::draw_spec d;
    double wsum = 0.0;
    std::uint64_t fixed = 0;
    for (std::size_t s = 0; s < k; ++s) {
      sizes[s] = 1 + g.below(5000);
      names[s] = "s" + std::to_string(s);
      const std::uint64_t kind = g.below(3);
      if (kind == 0 || s == 0) {
        d.draws.push_back(
            {vbucket::draw_kind::weight, 0.1 + static_cast<double>(g.below(90)) / 10});
        wsum += d.draws.back().value;
      } else if (kind == 1) {
        d.draws.push_back({vbucket::draw_kind::count, static_cast<double>(g.below(3000))});
        fixed += static_cast<std::uint64_t>(d.draws.back().value);
      } else {
        d.draws.push_back({vbucket::draw_kind::repeat, 0.5 * static_cast<double>(1 + g.below(4))});
        fixed += static_cast<std::uint64_t>(
            std::llround(d.draws.back().value * static_cast<double>(sizes[s])));
      }
    }
    d.epoch_samples = fixed + 10000 + g.below(100000);
    const auto m = vbucket::draw_counts(sizes, names, d);
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < k; ++s) {
      total += m[s];
      const auto& sd = d.draws[s];
      if (sd.kind == vbucket::draw_kind::weight) {
        const double want = sd.value / wsum * static_cast<double>(d.epoch_samples - fixed);
        CHECK(std::abs(static_cast<double>(m[s]) - want) < 1.0);
      } else if (sd.kind == vbucket::draw_kind::count) {
        CHECK(m[s] == static_cast<std::uint64_t>(sd.value));
      } else {
        CHECK(m[s] ==
              static_cast<std::uint64_t>(std::llround(sd.value * static_cast<double>(sizes[s]))));
      }
    }
    CHECK(total == d.epoch_samples);
    CHECK(vbucket::draw_spec::parse(d.to_string()) == d);
  }
}

TEST_CASE("run_plan: drawing without replacement takes every row q times and a subset once") {
  auto src = sources(2, 7, 1000);
  vbucket::draw_spec d;
  d.draws = {{vbucket::draw_kind::count, 2500}, {vbucket::draw_kind::count, 400}};
  const auto e0 = vbucket::draw_epoch(src, d, 9, 0);
  const auto e1 = vbucket::draw_epoch(src, d, 9, 1);
  std::vector<int> c0(1000), c1(1000);
  for (std::uint64_t p = 0; p < 2500; ++p) ++c0[e0.row(p)];
  for (int c : c0) CHECK((c == 2 || c == 3));
  CHECK(std::count(c0.begin(), c0.end(), 3) == 500);
  for (std::uint64_t p = 2500; p < 2900; ++p) ++c1[e0.row(p)];
  for (int c : c1) CHECK(c <= 1);
  CHECK(e0.listed != e1.listed);  // another epoch, another subset
  // With replacement: counts as asked, rows in range, and some row twice.
  d.replacement = true;
  const auto r = vbucket::draw_epoch(src, d, 9, 0);
  CHECK(r.size() == 2900);
  std::vector<int> cr(1000);
  for (std::uint64_t p = 2500; p < 2900; ++p) ++cr[r.row(p)];
  CHECK(*std::max_element(cr.begin(), cr.end()) >= 2);
}

TEST_CASE("run_plan: weighted sources over several epochs, exactly once, shares within 1 %") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    const std::size_t k = 2 + g.below(2);
    auto src = sources(k, seed);
    std::vector<double> w;
    for (std::size_t s = 0; s < k; ++s) w.push_back(1.0 + static_cast<double>(g.below(9)));
    const std::uint64_t n = 1500 + g.below(1000);
    vbucket::run_stage st{.name = "one", .config = config_256(), .draws = weights(w, n)};
    const auto world = static_cast<std::uint32_t>(1 + g.below(8));
    auto make = [&](std::uint32_t wd) {
      return std::make_unique<run_plan>(src, std::vector{st},
                                        vbucket::run_options{.seed = seed, .world = wd});
    };
    const auto d = simulate(make, 3, {}, false, world);
    const auto per = check_exactly_once(d.batches, drawn_sizes(d.batches, src, st.draws, seed), k);
    CHECK(per.size() == 3);
    double wsum = 0;
    for (double x : w) wsum += x;
    for (const auto& [e, counts] : per)
      for (std::size_t s = 0; s < k; ++s)
        CHECK(std::abs(static_cast<double>(counts[s]) / static_cast<double>(n) - w[s] / wsum) <=
              0.01);
  }
}

TEST_CASE("run_plan: one source, one stage, the first segment is the plain epoch plan") {
  auto src = sources(1, 4);
  vbucket::run_stage st{.name = "one", .config = config_256()};
  run_plan run(src, {st}, {.seed = 77, .world = 3});
  // Independently: the source's buckets with the run's assignment key, planned by the core.
  const std::uint64_t key = vbucket::detail::stream_key(77, vbucket::detail::run_domain_assign,
                                                        vbucket::detail::hash_bytes("web"));
  const auto ids = vbucket::assign_all(st.config, *src[0].table, vbucket::opensora_v2_rule{},
                                       vbucket::fast_source(key, 0));
  const auto plan = vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), st.config,
                                             {.seed = 77, .epoch = 0});
  const auto sched = plan.deal(3);
  REQUIRE(run.steps_left() == sched.steps());
  for (std::uint64_t k = 0; k < sched.steps(); ++k) {
    for (std::uint32_t r = 0; r < 3; ++r) {
      const auto want = sched.at(k, r);
      const auto got = run.batch(r);
      CHECK(got.rows == std::vector<std::uint32_t>(want.indices.begin(), want.indices.end()));
      CHECK(got.bucket == want.bucket);
    }
    run.advance();
  }
  CHECK(run.epoch() == 1);
}

TEST_CASE("run_plan: a stage change mid-epoch plans the rest under the new stage") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    auto src = sources(2, seed);
    const auto draws = weights({3, 1}, 1200);
    vbucket::run_stage s0{.name = "256", .config = config_256(), .draws = draws};
    // Stage 1: other buckets (768px), batch sizes and policy, from a random step of epoch 0.
    const std::uint64_t at = 5 + g.below(60);
    vbucket::run_stage s1{
        .name = "768",
        .from_step = at,
        .config = config_768(),
        .draws = draws,
        .batches = {.policy = g.below(2) ? vbucket::incomplete_policy::pad
                                         : vbucket::incomplete_policy::downgrade}};
    auto make = [&](std::uint32_t wd) {
      return std::make_unique<run_plan>(src, std::vector{s0, s1},
                                        vbucket::run_options{.seed = seed, .world = wd});
    };
    const auto d = simulate(make, 2, {}, false, 4);
    check_exactly_once(d.batches, drawn_sizes(d.batches, src, draws, seed), 2);
    const auto cfg1 = config_768();
    for (const run_batch& b : d.batches) {
      CHECK(b.stage == (b.step >= at ? 1u : 0u));
      if (b.step >= at && !b.repeat)  // the new stage's batch sizes
        CHECK(static_cast<std::int64_t>(b.size()) == cfg1.batch_size(b.bucket));
      if (b.epoch == 0 && b.step >= at) CHECK(b.segment == 1);
    }
  }
}

TEST_CASE("run_plan: after a stage change with new probabilities, each sample in its new bucket") {
  // Stage 1 brings other buckets (a new assignment) with the pad policy, so every sample of a
  // stage-1 batch is in the batch's bucket. The oracle: the whole source assigned under stage
  // 1's config with the run's draws (key from the seed and the source's name, the epoch). Early
  // changes re-assign every draw; late ones, after a quarter of the epoch is delivered, only
  // the draws not yet delivered (both must agree with the oracle). 1200 draws from tables of
  // 300 and 500 rows: whole passes and listed rows.
  const vbucket::opensora_v2_rule rule;
  for (const std::uint64_t seed : scenario_seeds) {
    for (const std::uint64_t at : {std::uint64_t{3}, std::uint64_t{30}, std::uint64_t{70}}) {
      CAPTURE(seed);
      CAPTURE(at);
      auto src = sources(2, seed);
      const auto draws = weights({3, 1}, 1200);
      vbucket::run_stage s0{.name = "256", .config = config_256(), .draws = draws};
      vbucket::run_stage s1{.name = "768",
                            .from_step = at,
                            .config = config_768(),
                            .draws = draws,
                            .batches = {.policy = vbucket::incomplete_policy::pad}};
      run_plan run(src, {s0, s1}, {.seed = seed, .world = 2});
      std::vector<std::vector<vbucket::bucket_id>> oracle;
      for (const vbucket::run_source& s : src) {
        const std::uint64_t key = vbucket::detail::stream_key(
            seed, vbucket::detail::run_domain_assign, vbucket::detail::hash_bytes(s.name));
        oracle.push_back(
            vbucket::assign_all(config_768(), *s.table, rule, vbucket::fast_source(key, 0)));
      }
      std::uint64_t before = 0, checked = 0;
      while (run.epoch() == 0) {
        for (std::uint32_t r = 0; r < 2; ++r) {
          const run_batch b = run.batch(r);
          if (b.stage == 0) {
            before += b.repeat ? 0 : b.size() - b.pads;
            continue;
          }
          for (std::size_t i = 0; i < b.size(); ++i) {
            REQUIRE(oracle[b.sources[i]][b.rows[i]] == b.bucket);
            ++checked;
          }
        }
        run.advance();
      }
      CHECK(checked > 0);
      if (at == 70) CHECK(before * 4 > 1200);  // the late change re-assigns only the rest
      if (at == 3) CHECK(before * 4 < 1200);
    }
  }
}

TEST_CASE("run_plan: a packed stage after a fixed one, mid-epoch") {
  auto src = sources(2, 3);
  vbucket::run_stage s0{.name = "fixed", .config = config_256()};
  vbucket::run_stage s1{
      .name = "packed",
      .from_step = 20,
      .config = config_256(),
      .batches = {.batching = vbucket::batching_mode::packed, .token_budget = 20000}};
  auto make = [&](std::uint32_t wd) {
    return std::make_unique<run_plan>(src, std::vector{s0, s1},
                                      vbucket::run_options{.seed = 5, .world = wd});
  };
  const std::vector<event> events{{30, event::save, 0}, {35, event::oom, 1}, {36, event::save, 0}};
  const auto d = simulate(make, 2, events, true, 2);
  check_exactly_once(d.batches, drawn_sizes(d.batches, src, {}, 5), 2);
  const auto ref = simulate(make, 2, events, false, 2);
  // Out of memory in packed batching halves the token budget for the rest of the run.
  REQUIRE(d.states.size() == 2);
  CHECK(vbucket_test::contains(d.states[1], "budget_cap=10000"));
  CHECK(vbucket_test::contains(d.states[1], ":packed=10000:"));
  REQUIRE(ref.batches.size() == d.batches.size());
  for (std::size_t i = 0; i < d.batches.size(); ++i)
    CHECK(same_batch(ref.batches[i], d.batches[i]));
}

TEST_CASE("run_plan: world 8 -> 6 -> 7 and an out-of-memory call, interrupted or not") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    auto src = sources(3, seed);
    const auto draws = weights({5, 3, 2}, 2000);
    vbucket::run_stage s0{.name = "a", .config = config_256(2), .draws = draws};
    vbucket::run_stage s1{.name = "b",
                          .from_step = 150 + g.below(100),
                          .config = config_768(),
                          .draws = weights({1, 1, 1}, 1800)};
    auto make = [&](std::uint32_t wd) {
      return std::make_unique<run_plan>(src, std::vector{s0, s1},
                                        vbucket::run_options{.seed = seed, .world = wd});
    };
    std::vector<event> events{
        {10 + g.below(40), event::world, 6},
        {60 + g.below(60), event::world, 7},
        {5 + g.below(200), event::oom, static_cast<std::uint32_t>(g.below(8))}};
    std::vector<event> with_saves = events;
    for (int i = 0; i < 5; ++i) with_saves.push_back({1 + g.below(350), event::save, 0});
    const auto plain = simulate(make, 3, events, false, 8);
    const auto saved = simulate(make, 3, with_saves, true, 8);
    const auto ref = simulate(make, 3, with_saves, false, 8);
    // Saving changes nothing; resuming from the state in a fresh object changes nothing.
    REQUIRE(plain.batches.size() == ref.batches.size());
    REQUIRE(saved.batches.size() == ref.batches.size());
    for (std::size_t i = 0; i < ref.batches.size(); ++i) {
      CHECK(same_batch(plain.batches[i], ref.batches[i]));
      CHECK(same_batch(saved.batches[i], ref.batches[i]));
    }
    CHECK(saved.states == ref.states);
    // Exactly once, per epoch (the epoch's draws follow the stage in force at its start).
    std::map<std::uint64_t, std::uint64_t> sizes;
    for (const run_batch& b : ref.batches)
      if (!sizes.count(b.epoch)) {
        const std::uint64_t first = b.step;
        sizes[b.epoch] =
            vbucket::draw_epoch(src, first >= s1.from_step ? s1.draws : s0.draws, seed, b.epoch)
                .size();
      }
    check_exactly_once(ref.batches, sizes, 3);
  }
}

TEST_CASE("run_plan: out of memory halves the failing batch's size for the rest of the run") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    auto src = sources(2, seed);
    vbucket::run_stage st{.name = "a", .config = config_256(2)};
    run_plan run(src, {st}, {.seed = seed, .world = 4});
    const std::uint64_t at = 3 + g.below(50);
    for (std::uint64_t s = 0; s < at; ++s) run.advance();
    const auto rank = static_cast<std::uint32_t>(g.below(4));
    const run_batch failed = run.batch(rank);
    REQUIRE(!failed.repeat);
    const auto before = static_cast<std::int64_t>(failed.size());
    run.out_of_memory(std::span<const std::uint32_t>(&rank, 1));
    CHECK(run.step() == at);  // the step is not delivered
    CHECK(run.closed_segments() == 1);
    const auto cfg = config_256(2);
    const auto key = cfg.key(failed.bucket);
    // Every later batch of that (resolution, frames) pair has half the size (rounded down).
    bool seen = false;
    while (run.epoch() < 2) {
      for (std::uint32_t r = 0; r < 4; ++r) {
        const run_batch b = run.batch(r);
        const auto k = cfg.key(b.bucket);
        if (k.resolution == key.resolution && k.frames_index == key.frames_index) {
          CHECK(static_cast<std::int64_t>(b.size()) == before / 2);
          seen = true;
        }
      }
      run.advance();
    }
    CHECK(seen);
    // Every rank's call is the same: two runs that make it agree on the state.
    run_plan a(src, {st}, {.seed = seed, .world = 4}), b(src, {st}, {.seed = seed, .world = 4});
    for (std::uint64_t s = 0; s < at; ++s) {
      a.advance();
      b.advance();
    }
    a.out_of_memory(std::span<const std::uint32_t>(&rank, 1));
    b.out_of_memory(std::span<const std::uint32_t>(&rank, 1));
    CHECK(a.state() == b.state());
  }
}

TEST_CASE("run_plan: a state loaded under other settings delivers the rest exactly once") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    auto src = sources(2, seed);
    const auto draws = weights({2, 1}, 1500);
    vbucket::run_stage st{.name = "a", .config = config_256(2), .draws = draws};
    run_plan first(src, {st}, {.seed = seed, .world = 8});
    std::vector<run_batch> got;
    const std::uint64_t stop = 1 + g.below(first.steps_left() - 1);  // inside epoch 0
    for (std::uint64_t s = 0; s < stop; ++s) {
      for (std::uint32_t r = 0; r < 8; ++r) got.push_back(first.batch(r));
      first.advance();
    }
    // Resumed with other batch sizes in place (the current stage edited), other weights and
    // another world: the rest of epoch 0 is its undelivered samples; weights apply from epoch 1.
    vbucket::run_stage edited{.name = "a", .config = config_256(1), .draws = weights({1, 3}, 900)};
    run_plan second(src, {edited}, {.seed = seed, .world = 5});
    second.load(first.state());
    CHECK(second.world() == 8);  // the state's world, until told otherwise
    second.set_world(5);
    CHECK(second.closed_segments() == 1);
    while (second.epoch() < 2) {
      for (std::uint32_t r = 0; r < 5; ++r) got.push_back(second.batch(r));
      second.advance();
    }
    std::map<std::uint64_t, std::uint64_t> sizes{
        {0, vbucket::draw_epoch(src, draws, seed, 0).size()},
        {1, vbucket::draw_epoch(src, edited.draws, seed, 1).size()}};
    check_exactly_once(got, sizes, 2);
  }
}

TEST_CASE("run_plan: a state is refused, naming what differs, only when the metadata does") {
  auto src = sources(2, 11);
  vbucket::run_stage st{.name = "a", .config = config_256()};
  run_plan run(src, {st}, {.seed = 3, .world = 2});
  for (int i = 0; i < 7; ++i) run.advance();
  run.cap_batch_size("256px", 33, 2);  // a second segment
  run.advance();
  const std::string saved = run.state();
  CHECK(vbucket_test::contains(saved, "caps=256px/33=2"));

  auto other = src;
  other[1].table = table(500, 999);  // same size, other rows
  run_plan changed(other, {st}, {.seed = 3, .world = 2});
  const std::string msg = vbucket_test::error_message([&] { changed.load(saved); });
  CHECK(vbucket_test::contains(msg, "source \"curated\"'s metadata differs"));

  run_plan seeded(src, {st}, {.seed = 4, .world = 2});
  CHECK(vbucket_test::contains(vbucket_test::error_message([&] { seeded.load(saved); }), "seed 3"));

  // Stage 0 planned a closed segment of this epoch; its probabilities changed: refused.
  vbucket::run_stage probs{
      .name = "a",
      .config = vbucket::bucket_config(
          std::vector{spec("256px", 1, 0.5, -1, 8), spec("256px", 33, 1.0, -1, 4),
                      spec("256px", 65, 1.0, -1, 3), spec("256px", 129, 1.0, -1, 2)},
          vbucket::opensora_v2_tables{})};
  run_plan reprob(src, {probs}, {.seed = 3, .world = 2});
  CHECK(
      vbucket_test::contains(vbucket_test::error_message([&] { reprob.load(saved); }),
                             "stage 0 (\"a\") whose buckets, probabilities or rules have changed"));

  run_plan fine(src, {st}, {.seed = 3, .world = 3});
  fine.load(saved);
  CHECK(fine.step() == 8);
  CHECK(fine.world() == 2);
  CHECK(fine.caps().size() == 1);
  CHECK(vbucket_test::contains(vbucket_test::error_message([&] { fine.load("vbucket-run v=2"); }),
                               "version 2"));
}

TEST_CASE("run_plan: batch sizes from the memory model are the largest that fit") {
  for (const std::uint64_t seed : scenario_seeds) {
    lcg g{seed};
    const vbucket::memory_model m{.fixed = 10.0 + static_cast<double>(g.below(20)),
                                  .linear = 1e-4 * static_cast<double>(1 + g.below(50)),
                                  .quadratic = 1e-9 * static_cast<double>(g.below(50))};
    const double budget = 40.0 + static_cast<double>(g.below(100));
    const auto cfg = config_768();
    std::vector<std::int64_t> sizes;
    try {
      sizes = vbucket::batch_sizes_for_memory(cfg, m, budget);
    } catch (const vbucket::error& e) {
      CHECK(vbucket_test::contains(e.what(), "at batch size 1"));
      continue;
    }
    std::size_t i = 0;
    for (std::size_t r = 0; r < cfg.resolutions().size(); ++r)
      for (std::size_t f = 0; f < cfg.resolutions()[r].frames.size(); ++f, ++i) {
        // Tokens of the pair's largest aspect entry, from the shape itself.
        const auto& res = cfg.resolutions()[r];
        const auto& big = res.info.table[res.info.table.largest()];
        const std::int64_t t =
            (1 + (res.frames[f].frames - 1) / 4) * (big.height * big.width / 256);
        const auto mem = [&](std::int64_t bs) {
          return m.fixed + static_cast<double>(bs) *
                               (m.linear * static_cast<double>(t) +
                                m.quadratic * static_cast<double>(t) * static_cast<double>(t));
        };
        CHECK(sizes[i] >= 1);
        CHECK(mem(sizes[i]) <= budget);
        CHECK(mem(sizes[i] + 1) > budget);
      }
    const auto fitted = vbucket::fit_to_memory(cfg, m, budget);
    CHECK(vbucket::pair_batch_sizes(fitted) == sizes);
    CHECK(fitted.num_buckets() == cfg.num_buckets());
  }
}

TEST_CASE("run_plan: a stage from an epoch on, and its draws from that epoch") {
  auto src = sources(2, 21);
  vbucket::run_stage s0{.name = "a", .config = config_256(), .draws = weights({1, 1}, 600)};
  vbucket::run_stage s1{
      .name = "b", .from_epoch = 1, .config = config_768(), .draws = weights({1, 3}, 800)};
  run_plan run(src, {s0, s1}, {.seed = 2, .world = 3});
  CHECK(run.stage() == 0);
  CHECK(run.drawn().size() == 600);
  std::vector<run_batch> got;
  while (run.epoch() < 2) {
    for (std::uint32_t r = 0; r < 3; ++r) got.push_back(run.batch(r));
    run.advance();
  }
  for (const run_batch& b : got) CHECK(b.stage == (b.epoch >= 1 ? 1u : 0u));
  check_exactly_once(got,
                     {{0, vbucket::draw_epoch(src, s0.draws, 2, 0).size()},
                      {1, vbucket::draw_epoch(src, s1.draws, 2, 1).size()}},
                     2);
  CHECK(vbucket::draw_epoch(src, s1.draws, 2, 1).count(1) == 600);
}

namespace {
/// `line` with field `key` set to `value` (added before check= when absent), its check made
/// again when `reseal` (a state a program wrote that way, not an edit of a saved line).
std::string with_field(std::string line, const std::string& key, const std::string& value,
                       bool reseal = true) {
  const std::size_t at = line.find(" " + key + "=");
  const std::size_t check = line.rfind(" check=");
  if (at == std::string::npos || key == "world2") {
    line.insert(check, " " + (key == "world2" ? std::string("world") : key) + "=" + value);
  } else {
    const std::size_t end = std::min(line.find(' ', at + 1), line.size());
    line.replace(at + key.size() + 2, end - at - key.size() - 2, value);
  }
  if (!reseal) return line;
  const std::size_t c = line.rfind(" check=");
  const std::string body = line.substr(0, c);
  return body + " check=" + vbucket::plan_state::hex(vbucket::detail::hash_bytes(body));
}
}  // namespace

TEST_CASE("run_plan: a refused state leaves the run as it was, whatever refused it") {
  auto src = sources(2, 21);
  vbucket::run_stage st{.name = "a", .config = config_256()};
  run_plan saver(src, {st}, {.seed = 5, .world = 2});
  for (int i = 0; i < 4; ++i) saver.advance();
  saver.cap_batch_size("256px", 33, 2);  // a closed segment
  saver.advance();
  const std::string saved = saver.state();

  run_plan run(src, {st}, {.seed = 5, .world = 3});
  for (int i = 0; i < 2; ++i) run.advance();
  const std::string before = run.state();
  const std::vector<run_batch> batches = run.step_batches();

  std::string cur = saved.substr(saved.find(" cur=") + 5);
  cur = cur.substr(0, cur.find(' '));
  const std::string seg =
      saved.substr(saved.find(" segs=") + 6, saved.find(" cur=") - saved.find(" segs=") - 6);
  const std::string huge_bs =  // stage 0's first pair (256px -> 129, 2) at 200000000
      cur.substr(0, cur.find(":fixed:") + 7) + "200000000" +
      cur.substr(cur.find('-', cur.find(":fixed:")));
  const std::string unbalanced = "0:pad:4294967295" + cur.substr(cur.find(":fixed"));
  const std::string v2 = "vbucket-run v=2" + saved.substr(std::string("vbucket-run v=1").size());
  const struct {
    std::string line, says;
  } refused[] = {
      {with_field(saved, "consumed", "999999"), "past the end of the epoch"},
      {with_field(saved, "world", "0"), "world: expected an integer from 1 to 16777216"},
      {with_field(saved, "world2", "2"), "duplicate field \"world\""},
      {with_field(saved, "colour", "blue"), "unknown field \"colour\""},
      {with_field(saved, "cur", unbalanced), "balance group: expected an integer from 0 to"},
      {with_field(saved, "cur", huge_bs), "batch size 200000000 of 256px -> 129 is above both"},
      {with_field(saved, "epoch", "5", false), "does not match its check"},
      {with_field(saved, "segs", seg + "|" + seg, false), "does not match its check"},
      {with_field(saved, "epoch", "18446744073709551616"), "epoch: expected an integer"},
      {with_field(saved, "seed", "6"), "seed 6"},
      {with_field(saved, "drawn", "1,2"), "the state recorded 1"},
      {with_field(saved, "epoch_step", "99"), "epoch_step=99 is after step="},
      {with_field(saved, "caps", "256px/33=0"), "cap \"256px/33=0\" is not RES/FRAMES=BS"},
      {with_field(saved, "caps", "256px/33=2,256px/33=3"), "a second cap of the same pair"},
      {with_field(saved, "budget_cap", "nan"), "budget_cap must be a finite number > 0"},
      {with_field(saved, "segs", seg.substr(0, seg.rfind('@')) + "@0"), "END is not an integer"},
      {saved + " ", "fields must be separated by one space"},
      {with_field(saved, "check", "0", false), "does not match its check"},
      {v2, "version 2"},
  };
  for (const auto& r : refused) {
    CAPTURE(r.line);
    const std::string msg = vbucket_test::error_message([&] { run.load(r.line); });
    CHECK(vbucket_test::contains(msg, "run state"));
    CHECK(vbucket_test::contains(msg, r.says));
    CHECK(run.state() == before);
    const std::vector<run_batch> now = run.step_batches();
    REQUIRE(now.size() == batches.size());
    for (std::size_t i = 0; i < now.size(); ++i) CHECK(same_batch(now[i], batches[i]));
  }
  // The untouched line and a program's resealed one still load.
  run.load(saved);
  CHECK(run.step() == 5);
  run_plan other(src, {st}, {.seed = 5, .world = 2});
  other.load(with_field(saved, "world", "7"));
  CHECK(other.step() == 5);
  other.advance();
}

TEST_CASE("run_plan: draws past an epoch's samples and stages out of order are refused") {
  const std::uint64_t rows[] = {100};
  const std::string names[] = {"web"};
  vbucket::draw_spec all = weights({1.0}, std::numeric_limits<std::uint64_t>::max());
  CHECK(vbucket_test::contains(
      vbucket_test::error_message([&] { (void)vbucket::draw_counts(rows, names, all); }),
      "epoch_samples 18446744073709551615 is above 4294967295"));
  all.epoch_samples = 4294967295;  // the most an epoch holds
  CHECK(vbucket::draw_counts(rows, names, all)[0] == 4294967295);
  const std::uint64_t many[] = {1000000};
  vbucket::draw_spec repeat;
  repeat.draws = {{vbucket::draw_kind::repeat, 1e15}};
  CHECK(vbucket_test::contains(
      vbucket_test::error_message([&] { (void)vbucket::draw_counts(many, names, repeat); }),
      "source \"web\": its draw takes 1e+21 samples, more than an epoch holds"));
  repeat.draws = {{vbucket::draw_kind::count, 1e300}};
  CHECK(vbucket_test::contains(
      vbucket_test::error_message([&] { (void)vbucket::draw_counts(many, names, repeat); }),
      "source \"web\": draw value 1e+300 must be a finite number from 0 to 1e+15"));

  auto src = sources(1, 4);
  const vbucket::run_stage a{.name = "a", .config = config_256()};
  const vbucket::run_stage c{.name = "c", .from_step = 60, .config = config_256()};
  const vbucket::run_stage b{.name = "b", .from_step = 30, .config = config_256()};
  const vbucket::run_stage both{
      .name = "both", .from_step = 30, .from_epoch = 2, .config = config_256()};
  CHECK(vbucket_test::contains(vbucket_test::error_message([&] {
                                 run_plan(src, {a, c, b});
                               }),
                               "run: stage 2 (\"b\") starts at step 30, before stage 1 (\"c\")"));
  CHECK(vbucket_test::contains(vbucket_test::error_message([&] {
                                 run_plan(src, {a, b, b});
                               }),
                               "run: stage 2 (\"b\") starts at step 30, as stage 1 (\"b\")"));
  CHECK(vbucket_test::contains(vbucket_test::error_message([&] {
                                 run_plan(src, {a, both});
                               }),
                               "run: stage 1 (\"both\") has both from_step 30 and from_epoch 2"));
  CHECK_NOTHROW(run_plan(src, {a, b, c}));
}
