// A run's ledger (include/vbucket/run_ledger.hpp) audited by `audit_ledgers` (audit.hpp): random
// scenarios of weighted sources, a stage change, world 8 -> 6 -> 7, an out-of-memory call and
// interruptions resumed from the state line in a fresh object audit clean; a lost batch line
// is named as missing samples.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "vbucket/audit.hpp"
#include "vbucket/run_ledger.hpp"
#include "vbucket/run_plan.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket_test::spec;

struct lcg {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

std::shared_ptr<const vbucket::meta_table> table(std::size_t n, std::uint64_t seed) {
  auto t = std::make_shared<vbucket::meta_table>();
  lcg g{seed};
  const std::int64_t frames[] = {1, 40, 70, 140};
  for (std::size_t i = 0; i < n; ++i) {
    vbucket::sample_meta m;
    const std::uint64_t k = g.below(20);
    m.num_frames = frames[k < 3 ? 0 : 1 + k % 3];
    const bool large = g.below(3) == 0;
    m.height = large ? 768 : 256;
    m.width = large ? 1024 : 320;
    if (g.below(50) == 0) m.height = 0;  // unusable metadata: counted as invalid, not delivered
    t->push_back(m);
  }
  return t;
}

vbucket::bucket_config config(std::int64_t scale, bool with_768) {
  std::vector<vbucket::bucket_spec> s{
      spec("256px", 1, 1.0, -1, 8 * scale), spec("256px", 33, 0.9, -1, 4 * scale),
      spec("256px", 65, 1.0, -1, 3 * scale), spec("256px", 129, 1.0, -1, 2 * scale)};
  if (with_768) {
    s.push_back(spec("768px", 1, 1.0, -1, 3));
    s.push_back(spec("768px", 65, 0.5, -1, 1));
  }
  return vbucket::bucket_config(s, vbucket::opensora_v2_tables{});
}

/// Runs the scenario writing every rank's ledger into `dir`; returns the paths.
std::vector<std::string> run_with_ledger(const vbucket_test::temp_dir& dir, std::uint64_t seed,
                                         bool lose_a_batch) {
  lcg g{seed};
  std::vector<vbucket::run_source> src;
  const char* names[] = {"web", "curated", "images"};
  for (int s = 0; s < 3; ++s) {
    vbucket::run_source r;
    r.name = names[s];
    r.table =
        table(200 + 150 * static_cast<std::size_t>(s), seed * 7 + static_cast<std::uint64_t>(s));
    src.push_back(std::move(r));
  }
  vbucket::draw_spec w0;
  w0.draws = {{vbucket::draw_kind::weight, 5},
              {vbucket::draw_kind::weight, 3},
              {vbucket::draw_kind::weight, 2}};
  w0.epoch_samples = 1200;
  vbucket::draw_spec w1;
  w1.draws = {{vbucket::draw_kind::weight, 1},
              {vbucket::draw_kind::count, 300},
              {vbucket::draw_kind::repeat, 1}};
  w1.epoch_samples = 1500;
  w1.replacement = g.below(2) == 0;
  const vbucket::incomplete_policy policy =
      g.below(2) ? vbucket::incomplete_policy::drop : vbucket::incomplete_policy::pad;
  vbucket::run_stage s0{.name = "s1", .config = config(2, false), .draws = w0, .policy = policy};
  vbucket::run_stage s1{.name = "s2",
                        .from_step = 40 + g.below(40),
                        .config = config(1, true),
                        .draws = w1,
                        .policy = vbucket::incomplete_policy::downgrade};
  const std::uint64_t run_seed = seed;
  auto make = [&](std::uint32_t world) {
    return std::make_unique<vbucket::run_plan>(
        src, std::vector{s0, s1}, vbucket::run_options{.seed = run_seed, .world = world});
  };
  std::map<std::uint32_t, std::unique_ptr<vbucket::run_ledger>> ledgers;  // of this "process"
  auto ledger = [&](std::uint32_t rank) -> vbucket::run_ledger& {
    auto& l = ledgers[rank];
    if (!l) l = std::make_unique<vbucket::run_ledger>(dir.path.string(), rank);
    return *l;
  };
  std::uint32_t world = 8;
  auto run = make(world);
  const std::uint64_t to_6 = 10 + g.below(30), to_7 = 50 + g.below(40), oom = 5 + g.below(120);
  std::vector<std::uint64_t> saves;
  for (int i = 0; i < 4; ++i) saves.push_back(1 + g.below(200));
  const std::uint64_t lost = 20 + g.below(40);
  while (run->epoch() < 3) {
    const std::uint64_t step = run->step();
    if (std::count(saves.begin(), saves.end(), step) > 0) {
      const std::string state = run->state();
      run = make(world);
      run->load(state);
      ledgers.clear();  // a resumed process opens its ledgers again
    }
    if (step == to_6 || step == to_7) {
      world = step == to_6 ? 6 : 7;
      run->set_world(world);
    }
    if (step == oom) {
      const std::uint32_t r = static_cast<std::uint32_t>(g.below(world));
      try {
        run->out_of_memory(std::span<const std::uint32_t>(&r, 1));
      } catch (const vbucket::error&) {
      }
    }
    for (std::uint32_t r = 0; r < world; ++r) {
      if (lose_a_batch && step == lost && r == 1) continue;
      ledger(r).record(*run, run->batch(r));
    }
    run->advance();
  }
  std::vector<std::string> paths;
  for (std::uint32_t r = 0; r < 8; ++r)  // world 8 at most
    paths.push_back((dir.path / vbucket::ledger_file_name(r)).string());
  return paths;
}

}  // namespace

TEST_CASE("run_plan ledger: random runs with changes and resumes audit clean") {
  for (const std::uint64_t seed : {1ULL, 2ULL, 3ULL, 4ULL, 5ULL, 6ULL}) {
    vbucket_test::temp_dir dir("run_ledger");
    const auto paths = run_with_ledger(dir, seed, false);
    const vbucket::audit_report r = vbucket::audit_ledgers(paths);
    INFO("seed " << seed << "\n" << vbucket::format_audit_report(r));
    CHECK(r.clean());
    CHECK(r.epochs.size() == 3);
    std::uint64_t delivered = 0;
    for (const auto& e : r.epochs) delivered += e.delivered;
    CHECK(delivered > 0);
  }
}

TEST_CASE("run_plan ledger: a lost batch line is named as missing samples") {
  vbucket_test::temp_dir dir("run_ledger_lost");
  const auto paths = run_with_ledger(dir, 9, true);
  const vbucket::audit_report r = vbucket::audit_ledgers(paths);
  CHECK_FALSE(r.clean());
  std::uint64_t missing = 0;
  for (const auto& e : r.epochs) missing += e.missing;
  CHECK(missing > 0);
}

TEST_CASE("run_plan ledger: a stage that leaves the epoch's remaining samples no batch closes it") {
  // Issue 41.3: 40 images in batches of 4 (10 steps); from step 7 a stage of batch size 16 that
  // drops incomplete batches: the 12 samples left get no batch, so the epoch ends at step 6;
  // its closing records still declare them, and the correct run audits clean.
  vbucket_test::temp_dir dir("run_ledger_stage_end");
  auto t = std::make_shared<vbucket::meta_table>();
  for (int i = 0; i < 40; ++i) {
    vbucket::sample_meta m;
    m.num_frames = 1;
    m.height = 256;
    m.width = 320;
    t->push_back(m);
  }
  const auto cfg = [](std::int64_t bs) {
    return vbucket::bucket_config({spec("256px", 1, 1.0, -1, bs)}, vbucket::opensora_v2_tables{});
  };
  vbucket::run_source src;
  src.name = "img";
  src.table = t;
  vbucket::run_stage s0{.name = "a", .config = cfg(4)};
  vbucket::run_stage s1{
      .name = "b", .from_step = 7, .config = cfg(16), .policy = vbucket::incomplete_policy::drop};
  vbucket::run_plan run({src}, {s0, s1}, vbucket::run_options{.seed = 5, .world = 1});
  const std::string path = (dir.path / vbucket::ledger_file_name(0)).string();
  vbucket::run_ledger ledger(dir.path.string(), 0);
  while (run.epoch() < 2) {
    ledger.record(run, run.batch(0));
    run.advance();
  }
  const vbucket::audit_report r = vbucket::audit_ledgers(std::vector<std::string>{path});
  INFO(vbucket::format_audit_report(r));
  CHECK(r.clean());
  REQUIRE(r.epochs.size() == 2);
  CHECK(r.epochs[0].delivered == 28);
  CHECK(r.epochs[0].dropped == 12);
}
