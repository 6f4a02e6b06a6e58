// One rank's trainer loop over a run (include/vbucket/run/run_loop.hpp): random scenarios driven as
// a trainer writes them (`next()`, train, `state()` saved after each step, an out-of-memory step
// after its batch was handed out, kills at random points resumed under other worlds) hand out
// the batches of an uninterrupted run_plan driven step by step; the ledger the loops wrote audits
// clean, and a record lost before a kill is named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vbucket/run/audit.hpp"
#include "vbucket/run/run_loop.hpp"
#include "vbucket/run/run_plan.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/run_tables.hpp"  // lcg, run_table
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket::run_batch;
using vbucket::run_loop;
using vbucket::run_plan;
using vbucket_test::spec;

using vbucket_test::lcg;

std::shared_ptr<const vbucket::meta_table> table(std::size_t n, std::uint64_t seed) {
  return vbucket_test::run_table(n, seed, {});
}

vbucket::bucket_config config(std::int64_t scale, bool with_768) {
  std::vector<vbucket::bucket_spec> s{
      spec("256px", 1, 1.0, -1, 8 * scale), spec("256px", 33, 1.0, -1, 4 * scale),
      spec("256px", 65, 1.0, -1, 3 * scale), spec("256px", 129, 1.0, -1, 2 * scale)};
  if (with_768) {
    s.push_back(spec("768px", 1, 1.0, -1, 3));
    s.push_back(spec("768px", 65, 1.0, -1, 2));
  }
  return vbucket::bucket_config(s, vbucket::opensora_v2_tables{});
}

/// A scenario: the run, the out-of-memory steps and where the trainer is killed.
struct scenario {
  std::vector<vbucket::run_source> sources;
  std::vector<vbucket::run_stage> stages;
  std::uint64_t seed = 0;
  std::uint32_t world = 1;
  std::set<std::uint64_t> oom_steps;
  std::uint64_t epochs = 2;

  explicit scenario(std::uint64_t s) : seed(s) {
    lcg g{s};
    const std::size_t k = 2 + g.below(2);
    const char* names[] = {"web", "curated", "images"};
    for (std::size_t i = 0; i < k; ++i) {
      vbucket::run_source r;
      r.name = names[i];
      r.table = table(150 + 100 * i, s * 7 + i);
      sources.push_back(std::move(r));
    }
    vbucket::draw_spec d;
    for (std::size_t i = 0; i < k; ++i)
      d.draws.push_back({vbucket::draw_kind::weight, 1.0 + static_cast<double>(g.below(4))});
    d.epoch_samples = 500 + g.below(300);
    stages.push_back({.name = "a", .config = config(2, false), .draws = d});
    if (g.below(3) != 0)
      stages.push_back(
          {.name = "b", .from_step = 5 + g.below(40), .config = config(1, true), .draws = d});
    if (g.below(2) == 0)
      stages.push_back(
          {.name = "c",
           .from_step = stages.back().from_step + 10 + g.below(30),
           .config = config(1, true),
           .draws = d,
           .batches = {.batching = vbucket::batching_mode::packed, .token_budget = 60000}});
    world = 1 + static_cast<std::uint32_t>(g.below(5));
    for (int i = 0; i < 3; ++i) oom_steps.insert(1 + g.below(80));
  }
  [[nodiscard]] std::unique_ptr<run_plan> make(std::uint32_t w) const {
    return std::make_unique<run_plan>(sources, stages,
                                      vbucket::run_options{.seed = seed, .world = w});
  }
};

/// The rank that fails at step k (of a world of w).
std::uint32_t failing_rank(std::uint64_t k, std::uint32_t w) {
  return static_cast<std::uint32_t>(k % w);
}

/// What the trainer trained on, and the world in force from each step on.
struct trained {
  std::vector<run_batch> batches;
  std::map<std::uint64_t, std::uint32_t> worlds;  // step -> world from it on
};

/// One trainer process: a run and a loop per rank (ranks simulated in one process).
struct process {
  std::vector<std::unique_ptr<run_plan>> runs;
  std::vector<std::unique_ptr<run_loop>> loops;
  process(const scenario& sc, std::uint32_t world, const std::string& dir, const std::string& saved,
          std::optional<vbucket::ledger_format> format) {
    for (std::uint32_t r = 0; r < world; ++r) {
      runs.push_back(sc.make(world));
      loops.push_back(std::make_unique<run_loop>(*runs.back(), r, dir, format));
      if (!saved.empty()) loops.back()->load(saved, world);
    }
  }
};

std::string without_last_batch_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::size_t at = text.rfind("\nB ");
  REQUIRE(at != std::string::npos);
  const std::size_t end = text.find('\n', at + 1);
  return text.substr(0, at + 1) + text.substr(end + 1);
}

/// Drives the scenario as a trainer: kills (restarts from the saved state, under another world
/// at times) at random points, with a batch in hand or between steps; `lose` removes the last
/// batch record of a rank's ledger before the first kill between steps.
trained drive(const scenario& sc, std::uint64_t kill_seed, const std::string& dir, bool lose) {
  // A ledger to edit is text (the test removes a line); else the default (binary).
  const std::optional<vbucket::ledger_format> format =
      lose ? std::optional(vbucket::ledger_format::text) : std::nullopt;
  lcg g{kill_seed};
  trained out;
  std::uint32_t world = sc.world;
  auto p = std::make_unique<process>(sc, world, dir, "", format);
  std::string saved = p->loops[0]->state();
  std::uint64_t saved_step = 0;
  out.worlds[0] = world;
  std::set<std::uint64_t> oomed;
  bool lost = false;
  auto restart = [&] {
    std::erase_if(oomed, [&](std::uint64_t k) { return k >= saved_step; });
    if (g.below(3) == 0) world = 1 + static_cast<std::uint32_t>(g.below(5));
    p.reset();  // a kill -9: nothing of the process survives but its files
    p = std::make_unique<process>(sc, world, dir, saved, format);
    out.worlds[p->runs[0]->step()] = world;
  };
  for (int guard = 0; guard < 100000; ++guard) {
    if (p->runs[0]->epoch() >= sc.epochs) return out;  // (a restart after the last step)
    std::vector<run_batch> step;
    for (auto& l : p->loops)
      if (auto b = l->next()) step.push_back(std::move(*b));
    if (step.empty()) {
      if (p->runs[0]->epoch() >= sc.epochs) return out;
      continue;
    }
    REQUIRE(step.size() == world);
    const std::uint64_t k = step[0].step;
    if (sc.oom_steps.count(k) && !oomed.count(k)) {
      oomed.insert(k);
      const std::uint32_t r = failing_rank(k, world);
      bool refused = false;
      for (auto& l : p->loops) {
        try {
          l->out_of_memory(std::span<const std::uint32_t>(&r, 1));
        } catch (const vbucket::error&) {
          refused = true;  // batch size already 1: the step is trained as it is
        }
      }
      if (!refused) continue;
    }
    if (g.below(9) == 0) {  // killed with the batches in hand, before the step was trained
      restart();
      continue;
    }
    out.batches.insert(out.batches.end(), step.begin(), step.end());
    for (auto& l : p->loops) {
      const std::string s = l->state();
      CHECK(s == p->loops[0]->state());
    }
    saved = p->loops[0]->state();
    saved_step = p->runs[0]->step();
    if (g.below(9) == 0) {  // killed between steps
      const run_batch& last = step.back();
      if (lose && !lost && !dir.empty() && !last.repeat && last.size() > last.pads) {
        const std::string path =
            (std::filesystem::path(dir) / vbucket::ledger_file_name(last.rank)).string();
        const std::string text = without_last_batch_line(path);
        std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
        lost = true;
      }
      restart();
    }
  }
  FAIL("the scenario did not end");
  return out;
}

/// The same run driven step by step on one run_plan, without kills: the reference.
std::vector<run_batch> reference(const scenario& sc, const trained& t) {
  auto run = sc.make(sc.world);
  std::set<std::uint64_t> oomed;
  std::vector<run_batch> out;
  while (run->epoch() < sc.epochs) {
    const std::uint64_t k = run->step();
    if (auto w = t.worlds.find(k); w != t.worlds.end() && w->second != run->world())
      run->set_world(w->second);
    if (sc.oom_steps.count(k) && !oomed.count(k)) {
      oomed.insert(k);
      const std::uint32_t r = failing_rank(k, run->world());
      try {
        run->out_of_memory(std::span<const std::uint32_t>(&r, 1));
        continue;
      } catch (const vbucket::error&) {
      }
    }
    for (std::uint32_t r = 0; r < run->world(); ++r) out.push_back(run->batch(r));
    run->advance();
  }
  return out;
}

bool same_batch(const run_batch& a, const run_batch& b) {
  return a.epoch == b.epoch && a.step == b.step && a.rank == b.rank && a.world == b.world &&
         a.stage == b.stage && a.bucket == b.bucket && a.pads == b.pads && a.repeat == b.repeat &&
         a.drawn == b.drawn && a.sources == b.sources && a.rows == b.rows;
}

std::vector<std::string> ledger_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("run_loop: a state taken after batch k resumes at k + 1; out of memory replans step k") {
  for (const std::uint64_t seed : {1ULL, 2ULL, 3ULL, 4ULL, 5ULL, 6ULL, 7ULL, 8ULL}) {
    INFO("scenario " << seed);
    const scenario sc(seed);
    const trained got = drive(sc, seed * 101, "", false);
    const std::vector<run_batch> want = reference(sc, got);
    REQUIRE(got.batches.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("batch " << i << " step " << want[i].step << " rank " << want[i].rank);
      CHECK(same_batch(got.batches[i], want[i]));
    }
    // Each epoch's drawn samples trained exactly once (pads and alignment repeats counted).
    std::map<std::uint64_t, std::vector<int>> seen;
    for (const run_batch& b : got.batches) {
      auto& s = seen[b.epoch];
      s.resize(vbucket::draw_epoch(sc.sources, sc.stages[0].draws, sc.seed, b.epoch).size());
      if (b.repeat) continue;
      for (std::size_t i = 0; i + b.pads < b.size(); ++i) ++s.at(b.drawn[i]);
    }
    CHECK(seen.size() == sc.epochs);
    for (const auto& [e, s] : seen)
      for (std::size_t p = 0; p < s.size(); ++p) {
        INFO("epoch " << e << " draw " << p);
        CHECK(s[p] <= 1);  // no sample twice; unassigned draws aside, every one once
      }
  }
}

TEST_CASE("run_loop: the ledger it writes holds what was handed out; a lost record is named") {
  for (const std::uint64_t seed : {11ULL, 12ULL, 13ULL, 14ULL}) {
    INFO("scenario " << seed);
    const scenario sc(seed);
    {
      const vbucket_test::temp_dir dir("run_loop");
      const std::string d = (dir.path / "ledger").string();
      const trained got = drive(sc, seed * 7, d, false);
      CHECK(got.batches.size() == reference(sc, got).size());
      const vbucket::audit_report r = vbucket::audit_ledgers(ledger_files(d));
      INFO(vbucket::format_audit_report(r));
      CHECK(r.clean());
      CHECK(r.epochs.size() == sc.epochs);
    }
    {
      const vbucket_test::temp_dir dir("run_loop_lost");
      const std::string d = (dir.path / "ledger").string();
      (void)drive(sc, seed * 7, d, true);
      const vbucket::audit_report r = vbucket::audit_ledgers(ledger_files(d));
      CHECK(!r.clean());
      bool missing = false;
      for (const auto& dev : r.deviations)
        missing = missing || dev.issue == vbucket::audit_issue::missing;
      CHECK(missing);
    }
  }
}

TEST_CASE("run_loop: out of memory needs a batch in hand; the loop ends once per epoch") {
  const scenario sc(21);
  auto run = sc.make(2);
  run_loop loop(*run, 1);
  CHECK_THROWS_WITH_AS(loop.out_of_memory(), doctest::Contains("no batch is in hand"),
                       vbucket::error);
  REQUIRE(loop.next().has_value());
  (void)loop.state();  // counts the batch as trained
  CHECK_THROWS_WITH_AS(loop.out_of_memory(), doctest::Contains("no batch is in hand"),
                       vbucket::error);
  std::uint64_t n = 1;
  while (loop.next()) ++n;
  CHECK(run->epoch() == 1);
  run_plan plain(sc.sources, sc.stages, {.seed = sc.seed, .world = 2});
  std::uint64_t steps = 0;
  for (; plain.epoch() == 0; plain.advance()) ++steps;
  CHECK(n == steps);
  REQUIRE(loop.next().has_value());  // the next epoch's first batch
  CHECK(loop.next()->epoch == 1);
  CHECK_THROWS_WITH_AS(run_loop(*run, 2), doctest::Contains("rank 2 is not below world 2"),
                       vbucket::error);
}

TEST_CASE("run_plan: a state loads under the world it was saved under") {
  const scenario sc(31);
  auto one = sc.make(1);
  for (int i = 0; i < 5; ++i) one->advance();
  auto eight = sc.make(8);
  eight->load(one->state());
  CHECK(eight->world() == 1);
  CHECK(eight->step() == 5);
  for (int i = 0; i < 3; ++i) {
    CHECK(same_batch(eight->batch(0), one->batch(0)));
    one->advance();
    eight->advance();
  }
  // A loop loads under another world when asked.
  auto four = sc.make(4);
  run_loop loop(*four, 3);
  const std::string before = four->state();
  CHECK_THROWS_WITH_AS(loop.load(one->state()), doctest::Contains("rank 3 is not below world 1"),
                       vbucket::error);
  CHECK(four->state() == before);  // refused: as it was
  loop.load(one->state(), 4);
  CHECK(four->world() == 4);
}

TEST_CASE("run_loop: ranks that swap at a world change write each other's ledger files") {
  const scenario sc(41);
  const vbucket_test::temp_dir dir("run_loop_swap");
  const std::string d = (dir.path / "ledger").string();
  auto a = sc.make(2), b = sc.make(2);
  run_loop la(*a, 0, d), lb(*b, 1, d);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(la.next());
    REQUIRE(lb.next());
  }
  la.set_world(2, 1);  // the batches in hand count as trained; then rank 0 is rank 1's job
  lb.set_world(2, 0);
  CHECK(la.rank() == 1);
  CHECK(la.ledger_path() == (std::filesystem::path(d) / vbucket::ledger_file_name(1)).string());
  for (int n = 0; n < 2;) {  // to the end of epoch 1
    auto x = la.next();
    auto y = lb.next();
    REQUIRE(x.has_value() == y.has_value());
    if (!x) ++n;
  }
  const vbucket::audit_report r = vbucket::audit_ledgers(ledger_files(d));
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  CHECK(r.epochs.size() == 2);
  CHECK_THROWS_WITH_AS(la.set_world(1), doctest::Contains("rank 1 is not below world 1"),
                       vbucket::error);
}

TEST_CASE("run_loop: a load refused leaves the run and the ledger as they were") {
  const scenario sc(51);
  const vbucket_test::temp_dir dir("run_loop_refused");
  const std::string d = (dir.path / "ledger").string();
  auto run = sc.make(1);
  run_loop loop(*run, 0, d);
  for (int i = 0; i < 4; ++i) REQUIRE(loop.next());
  const std::string saved = loop.state();
  REQUIRE(loop.next());
  const std::string path = loop.ledger_path();
  std::ofstream(path, std::ios::trunc) << "#vbucket-ledger 1\nB e=0 s=x\n";  // corrupt
  const auto bytes = std::filesystem::file_size(path);
  auto other = sc.make(1);
  run_loop fresh(*other, 0, d);
  const std::string before = other->state();
  CHECK_THROWS_WITH_AS(fresh.load(saved), doctest::Contains("rank-00000.ledger:2"), vbucket::error);
  CHECK(other->state() == before);
  CHECK(std::filesystem::file_size(path) == bytes);
  // A state the run refuses (another seed): the ledger is not cut.
  const std::string ok = "#vbucket-ledger 1\nB e=0 s=9 st=0 r=0 w=1 ids=1\n";
  std::ofstream(path, std::ios::trunc) << ok;
  CHECK_THROWS_WITH_AS(fresh.load(saved.substr(0, saved.find(" seed=")) + " seed=99" +
                                  saved.substr(saved.find(' ', saved.find(" seed=") + 1))),
                       doctest::Contains("seed"), vbucket::error);
  CHECK(other->state() == before);
  CHECK(std::filesystem::file_size(path) == ok.size());
}
