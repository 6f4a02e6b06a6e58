// A run's ledger (include/vbucket/run/run_ledger.hpp) audited by `audit_ledgers` (audit.hpp):
// random scenarios of weighted sources, a stage change, world 8 -> 6 -> 7, an out-of-memory call
// and interruptions resumed from the state line in a fresh object audit clean; a lost batch line is
// named as missing samples; a stage that leaves the epoch's remaining samples no batch still closes
// the epoch. The audit tested by mutation: random runs audit clean and every single fault made to
// their ledgers is named (the score is printed; VBUCKET_MUTATION_RUNS=N for more).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "vbucket/run/audit.hpp"
#include "vbucket/run/run_ledger.hpp"
#include "vbucket/run/run_plan.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/run_tables.hpp"  // lcg, run_table
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket_test::spec;

using vbucket_test::lcg;

std::shared_ptr<const vbucket::meta_table> table(std::size_t n, std::uint64_t seed) {
  return vbucket_test::run_table(n, seed, {.invalid_one_in = 50});
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
  vbucket::run_stage s0{
      .name = "s1", .config = config(2, false), .draws = w0, .batches = {.policy = policy}};
  vbucket::run_stage s1{.name = "s2",
                        .from_step = 40 + g.below(40),
                        .config = config(1, true),
                        .draws = w1,
                        .batches = {.policy = vbucket::incomplete_policy::downgrade}};
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
  vbucket::run_stage s1{.name = "b",
                        .from_step = 7,
                        .config = cfg(16),
                        .batches = {.policy = vbucket::incomplete_policy::drop}};
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

// --- the audit tested by mutation ---------------------------------------------------------------
namespace {

/// A random run written through `run_ledger`, as trainers write it, and where its resumed
/// parts begin in every rank's file.
struct mutation_run {
  std::vector<std::string> files;    ///< rank-RRRRR.ledger of every rank that wrote
  std::vector<std::uint32_t> ranks;  ///< the rank of each file
  /// Per resume: the size of every rank's file when the resumed "process" started.
  std::vector<std::vector<std::uintmax_t>> resumes;
  std::string what;  ///< the scenario, for failure messages
};

/// Random sources (1-3), stages (1-3, fixed or packed batching, each with its draws), world
/// changes, out-of-memory steps and stops resumed from the state in a new object; 3 epochs.
/// Empty when the random scenario is not a valid run (a stage without batches).
std::optional<mutation_run> random_run(
    const vbucket_test::temp_dir& dir, std::uint64_t seed,
    vbucket::ledger_format format = vbucket::ledger_format::text) {
  lcg g{seed * 0x9e3779b97f4a7c15ULL + 1};
  const std::size_t k = 1 + g.below(3);
  std::vector<vbucket::run_source> src;
  std::vector<std::size_t> rows;
  for (std::size_t s = 0; s < k; ++s) {
    vbucket::run_source r;
    r.name = "src" + std::to_string(s);
    rows.push_back(40 + g.below(160));
    r.table = table(rows.back(), seed * 31 + s);
    src.push_back(std::move(r));
  }
  std::vector<vbucket::run_stage> stages;
  const std::size_t m = 1 + g.below(3);
  std::string what = "seed " + std::to_string(seed) + ": " + std::to_string(k) + " sources, stages";
  std::uint64_t from = 0;
  for (std::size_t i = 0; i < m; ++i) {
    vbucket::run_stage st;
    st.name = "st" + std::to_string(i);
    st.from_step = i == 0 ? 0 : (from += 5 + g.below(60));
    st.config = config(1 + static_cast<std::int64_t>(g.below(3)), g.below(2) == 0);
    const std::uint64_t p = g.below(3);
    st.batches.policy = p == 0   ? vbucket::incomplete_policy::pad
                        : p == 1 ? vbucket::incomplete_policy::drop
                                 : vbucket::incomplete_policy::downgrade;
    if (g.below(3) == 0) {
      st.batches.batching = vbucket::batching_mode::packed;
      st.batches.token_budget = 20000;
    }
    const std::uint64_t d = g.below(3);
    if (d != 0) {  // weights, counts and repeats (else every row once)
      std::uint64_t total = 0;
      for (std::size_t s = 0; s < k; ++s) {
        const std::uint64_t kind = g.below(3);
        if (kind == 0 || d == 1) {
          st.draws.draws.push_back(
              {vbucket::draw_kind::weight, 1.0 + static_cast<double>(g.below(5))});
        } else if (kind == 1) {
          st.draws.draws.push_back(
              {vbucket::draw_kind::count, static_cast<double>(10 + g.below(rows[s]))});
        } else {
          st.draws.draws.push_back(
              {vbucket::draw_kind::repeat, static_cast<double>(1 + g.below(2))});
        }
        total += rows[s];
      }
      st.draws.epoch_samples = total / 2 + g.below(total);
      st.draws.replacement = g.below(2) == 0;
    }
    what += " [" + st.name + "@" + std::to_string(st.from_step) +
            (st.batches.batching == vbucket::batching_mode::packed ? " packed" : " fixed") +
            " draws=" + std::to_string(d) + "]";
    stages.push_back(std::move(st));
  }
  std::uint32_t world = static_cast<std::uint32_t>(1 + g.below(4));
  const vbucket::run_options opts{.seed = seed, .world = world, .drop_last = g.below(4) == 0};
  what += " world " + std::to_string(world) + (opts.drop_last ? " drop_last" : "");
  mutation_run out;
  try {
    auto run = std::make_unique<vbucket::run_plan>(src, stages, opts);
    std::map<std::uint32_t, std::unique_ptr<vbucket::run_ledger>> ledgers;
    std::uint32_t max_world = world;
    const auto sizes = [&] {
      std::vector<std::uintmax_t> s;
      for (std::uint32_t r = 0; r < 8; ++r) {
        std::error_code ec;
        const std::uintmax_t n =
            std::filesystem::file_size(dir.path / vbucket::ledger_file_name(r), ec);
        s.push_back(ec ? 0 : n);
      }
      return s;
    };
    for (std::uint64_t guard = 0; run->epoch() < 3; ++guard) {
      if (guard > 5000) return std::nullopt;
      const std::uint64_t ev = g.below(40);
      if (ev == 0) {  // a stop: a new process resumes from the state
        const std::string state = run->state();
        run = std::make_unique<vbucket::run_plan>(src, stages, opts);
        run->load(state);
        if (run->world() != world) run->set_world(world);
        ledgers.clear();
        out.resumes.push_back(sizes());
        what += " stop@" + std::to_string(run->step());
      } else if (ev == 1) {
        world = static_cast<std::uint32_t>(1 + g.below(6));
        max_world = std::max(max_world, world);
        run->set_world(world);
        what += " w" + std::to_string(world) + "@" + std::to_string(run->step());
      } else if (ev == 2) {
        const auto r = static_cast<std::uint32_t>(g.below(world));
        try {
          run->out_of_memory(std::span<const std::uint32_t>(&r, 1));
          what += " oom@" + std::to_string(run->step());
        } catch (const vbucket::error&) {  // a batch size already 1
        }
        continue;  // the failed step is not delivered
      }
      for (std::uint32_t r = 0; r < world; ++r) {
        auto& l = ledgers[r];
        if (!l) l = std::make_unique<vbucket::run_ledger>(dir.path.string(), r, format);
        l->record(*run, run->batch(r));
      }
      run->advance();
    }
    for (std::uint32_t r = 0; r < max_world; ++r)  // the ranks that wrote
      if (std::filesystem::exists(dir.path / vbucket::ledger_file_name(r))) {
        out.files.push_back((dir.path / vbucket::ledger_file_name(r)).string());
        out.ranks.push_back(r);
      }
  } catch (const vbucket::error& e) {
    if (std::string(e.what()).find("has no batches") != std::string::npos) return std::nullopt;
    if (std::string(e.what()).find("draw") != std::string::npos) return std::nullopt;
    throw;
  }
  out.what = what;
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}
std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

/// A B line's record (its text is not a B line: empty).
std::optional<vbucket::ledger_batch> batch_of(const std::string& line) {
  if (line.empty() || line[0] != 'B') return std::nullopt;
  vbucket::ledger_batch b;
  vbucket::parse_ledger_line(line, "mutant", b);
  return b;
}
std::string line_of(const vbucket::ledger_batch& b) {
  std::string s;
  vbucket::append_ledger_line(s, b);
  s.pop_back();
  return s;
}

/// A single fault, and the deviation the audit must name for it.
struct mutant {
  std::string kind;
  vbucket::audit_issue issue;
  std::optional<std::uint64_t> sample{};
  std::optional<std::uint64_t> epoch{};
  /// Another deviation that names the fault as well (a part replayed across an epoch's end
  /// shows as lines of an epoch after the next one's).
  std::optional<vbucket::audit_issue> or_issue{};
};

/// The mutation property over `runs` random runs: every clean run audits clean; every single
/// fault of every kind gives a non-clean verdict naming it. Returns (killed, tried) per kind.
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> mutation_property(
    std::uint64_t runs, std::uint64_t first_seed) {
  using vbucket::audit_issue;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> score;
  const vbucket::audit_options wide{.max_named = 1u << 20};
  std::uint64_t made = 0;
  for (std::uint64_t seed = first_seed; made < runs && seed < first_seed + 20 * runs + 20; ++seed) {
    vbucket_test::temp_dir dir("mutation");
    const std::optional<mutation_run> run = random_run(dir, seed);
    if (!run) continue;
    ++made;
    INFO(run->what);
    const vbucket::audit_report clean = vbucket::audit_ledgers(run->files, wide);
    INFO(vbucket::format_audit_report(clean));
    REQUIRE(clean.clean());
    REQUIRE(clean.epochs.size() == 3);

    std::vector<std::string> text;
    std::vector<std::vector<std::string>> lines;
    for (const std::string& f : run->files) {
      text.push_back(slurp(f));
      lines.push_back(split_lines(text.back()));
    }
    // Every B line with a real (delivered) sample: (file, line).
    std::vector<std::pair<std::size_t, std::size_t>> real;
    std::map<std::uint64_t, std::vector<std::uint64_t>> delivered_ids;  // per epoch
    for (std::size_t f = 0; f < lines.size(); ++f)
      for (std::size_t l = 0; l < lines[f].size(); ++l)
        if (const auto b = batch_of(lines[f][l]); b && !b->repeat && b->ids.size() > b->pads) {
          real.emplace_back(f, l);
          for (std::size_t i = 0; i + b->pads < b->ids.size(); ++i)
            delivered_ids[b->epoch].push_back(b->ids[i]);
        }
    REQUIRE(!real.empty());
    lcg g{seed};
    const auto pick = [&] { return real[static_cast<std::size_t>(g.below(real.size()))]; };
    const auto write_all = [&](const std::vector<std::vector<std::string>>& ls) {
      for (std::size_t f = 0; f < ls.size(); ++f) spit(run->files[f], join_lines(ls[f]));
    };
    const auto restore = [&] {
      for (std::size_t f = 0; f < text.size(); ++f) spit(run->files[f], text[f]);
    };
    const auto id_space = [&](std::uint64_t e) {
      return clean.epochs[static_cast<std::size_t>(e - clean.epochs[0].epoch)].samples;
    };

    const auto judge = [&](const mutant& m) {
      const vbucket::audit_report r = vbucket::audit_ledgers(run->files, wide);
      bool named = false;
      for (const vbucket::audit_deviation& d : r.deviations)
        named = named ||
                (d.issue == m.issue && (!m.sample || d.sample == m.sample) &&
                 (!m.epoch || d.epoch == *m.epoch)) ||
                d.issue == m.or_issue;
      auto& [killed, tried] = score[m.kind];
      ++tried;
      if (!r.clean() && named) {
        ++killed;
      } else {
        MESSAGE("mutant survived: " << m.kind << " (" << run->what << ")\n"
                                    << vbucket::format_audit_report(r));
      }
      restore();
    };

    for (int round = 0; round < 2; ++round) {
      {  // delete a record
        auto ls = lines;
        const auto [f, l] = pick();
        const auto b = *batch_of(ls[f][l]);
        ls[f].erase(ls[f].begin() + static_cast<std::ptrdiff_t>(l));
        write_all(ls);
        judge({"delete a record", audit_issue::missing, b.ids[0], b.epoch});
      }
      {  // duplicate one
        auto ls = lines;
        const auto [f, l] = pick();
        const auto b = *batch_of(ls[f][l]);
        ls[f].insert(ls[f].begin() + static_cast<std::ptrdiff_t>(l), ls[f][l]);
        write_all(ls);
        judge({"duplicate a record", audit_issue::duplicated, b.ids[0], b.epoch});
      }
      {  // change an id to another drawn id
        auto ls = lines;
        const auto [f, l] = pick();
        auto b = *batch_of(ls[f][l]);
        const std::vector<std::uint64_t>& pool = delivered_ids[b.epoch];
        const std::uint64_t was = b.ids[0];
        std::uint64_t to = was;
        for (int t = 0; t < 50 && to == was; ++t)
          to = pool[static_cast<std::size_t>(g.below(pool.size()))];
        if (to != was) {
          b.ids[0] = to;
          for (auto& s : b.substitutions)
            if (s.slot == 0) s.failed = to;
          ls[f][l] = line_of(b);
          write_all(ls);
          judge({"change an id to another drawn id", audit_issue::missing, was, b.epoch});
        }
      }
      {  // change an id to an undrawn one
        auto ls = lines;
        const auto [f, l] = pick();
        auto b = *batch_of(ls[f][l]);
        b.ids[0] = id_space(b.epoch) + g.below(100);
        ls[f][l] = line_of(b);
        write_all(ls);
        judge({"change an id to an undrawn one", audit_issue::unexpected, b.ids[0], b.epoch});
      }
      {  // move a record to another epoch (into that epoch's lines of the same file)
        auto ls = lines;
        const auto [f, l] = pick();
        auto b = *batch_of(ls[f][l]);
        const std::uint64_t from = b.epoch;
        const std::uint64_t to = (from + 1 + g.below(2)) % 3;
        std::optional<std::size_t> last_of_to;
        for (std::size_t i = 0; i < ls[f].size(); ++i)
          if (const auto o = batch_of(ls[f][i]); o && o->epoch == to) last_of_to = i;
        if (last_of_to) {
          b.epoch = to;
          const std::string moved = line_of(b);
          ls[f].insert(ls[f].begin() + static_cast<std::ptrdiff_t>(*last_of_to + 1), moved);
          ls[f].erase(ls[f].begin() + static_cast<std::ptrdiff_t>(l + (*last_of_to < l ? 1 : 0)));
          write_all(ls);
          judge({"move a record to another epoch", audit_issue::missing, b.ids[0], from});
        }
      }
      {  // truncate a file mid-record
        auto ls = lines;
        const auto [f, l] = pick();
        ls[f].resize(l + 1);
        std::string t = join_lines(ls[f]);
        t.resize(t.size() - 1 -
                 g.below(ls[f][l].size() - 1));  // 1 to the line's length - 1 bytes of it left
        spit(run->files[f], t);
        judge({"truncate a file mid-record", audit_issue::truncated, std::nullopt, std::nullopt});
      }
      if (run->files.size() >= 2) {  // swap two ranks' files
        const std::size_t a = g.below(run->files.size());
        std::size_t b = g.below(run->files.size() - 1);
        if (b >= a) ++b;
        spit(run->files[a], text[b]);
        spit(run->files[b], text[a]);
        judge({"swap two ranks' files", audit_issue::rank, std::nullopt, std::nullopt});
      }
      if (!run->resumes.empty()) {  // replay a resumed part twice
        const std::size_t k = g.below(run->resumes.size());
        bool any = false;
        for (std::size_t f = 0; f < text.size(); ++f) {
          const std::uintmax_t begin =
              std::min<std::uintmax_t>(run->resumes[k][run->ranks[f]], text[f].size());
          const std::uintmax_t end =
              k + 1 < run->resumes.size()
                  ? std::min<std::uintmax_t>(run->resumes[k + 1][run->ranks[f]], text[f].size())
                  : text[f].size();
          const std::string part = text[f].substr(begin, end - begin);
          any = any || part.find("\nB ") != std::string::npos || part.rfind("B ", 0) == 0;
          spit(run->files[f], text[f].substr(0, end) + part + text[f].substr(end));
        }
        if (any) {
          judge({"replay a resumed part twice", audit_issue::duplicated, std::nullopt, std::nullopt,
                 audit_issue::order});
        } else {
          restore();
        }
      }
    }
    {  // drop the middle epoch from every rank
      auto ls = lines;
      for (auto& file : ls)
        std::erase_if(file, [](const std::string& l) {
          return l.size() > 4 && l[0] != '#' && l.find(" e=1 ") != std::string::npos;
        });
      write_all(ls);
      judge({"drop an epoch from every rank", audit_issue::header, std::nullopt, 1});
    }
  }
  CHECK(made == runs);
  return score;
}

}  // namespace

TEST_CASE("run_plan ledger: the audit tested by mutation (every single fault is named)") {
  // VBUCKET_MUTATION_RUNS=N runs N random runs (scripts/mutation.sh); a few by default.
  std::uint64_t runs = 6;
  if (const char* env = std::getenv("VBUCKET_MUTATION_RUNS"))
    runs = std::strtoull(env, nullptr, 10);
  const auto score = mutation_property(runs, 1);
  std::uint64_t killed = 0, tried = 0;
  std::string table;
  for (const auto& [kind, kt] : score) {
    killed += kt.first;
    tried += kt.second;
    table += "  " + kind + ": " + std::to_string(kt.first) + "/" + std::to_string(kt.second) + "\n";
  }
  MESSAGE("mutation score over "
          << runs << " runs: " << killed << "/" << tried << " ("
          << (tried ? 100.0 * static_cast<double>(killed) / static_cast<double>(tried) : 0.0)
          << " %)\n"
          << table);
  CHECK(score.size() == 9);  // every kind of fault was made
  CHECK(killed == tried);
}

TEST_CASE("run_plan ledger: a binary ledger (version 2) is the text one, in fewer bytes") {
  for (std::uint64_t seed = 1, made = 0; made < 3 && seed < 40; ++seed) {
    vbucket_test::temp_dir text_dir("ledger_v1"), binary_dir("ledger_v2");
    const auto text = random_run(text_dir, seed);
    if (!text) continue;
    ++made;
    const auto binary = random_run(binary_dir, seed, vbucket::ledger_format::binary);
    REQUIRE(binary);
    INFO(text->what);
    REQUIRE(text->files.size() == binary->files.size());
    std::uintmax_t text_bytes = 0, binary_bytes = 0;
    for (std::size_t f = 0; f < text->files.size(); ++f) {
      text_bytes += std::filesystem::file_size(text->files[f]);
      binary_bytes += std::filesystem::file_size(binary->files[f]);
      // Record for record the same, read as text.
      vbucket::ledger_reader a(text->files[f]), b(binary->files[f]);
      vbucket::ledger_line la, lb;
      while (a.next(la)) {
        REQUIRE(b.next(lb));
        CHECK(vbucket::ledger_text_of(lb, "b") == la.text);
      }
      CHECK(!b.next(lb));
    }
    CHECK(binary_bytes * 2 < text_bytes);
    const auto ra = vbucket::audit_ledgers(text->files);
    const auto rb = vbucket::audit_ledgers(binary->files);
    CHECK(rb.clean());
    CHECK(ra.ids == rb.ids);
    REQUIRE(ra.epochs.size() == rb.epochs.size());
    for (std::size_t e = 0; e < ra.epochs.size(); ++e) {
      CHECK(ra.epochs[e].delivered == rb.epochs[e].delivered);
      CHECK(ra.epochs[e].dropped == rb.epochs[e].dropped);
      CHECK(ra.epochs[e].pads == rb.epochs[e].pads);
    }
    // A lost batch record is named in binary as in text.
    std::string bytes;
    {
      std::ifstream in(binary->files[0], std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    vbucket::ledger_reader r(binary->files[0]);
    vbucket::ledger_line l;
    std::uint64_t from = r.tell(), to = 0;
    while (r.next(l)) {
      if (l.tag == 'B') {
        vbucket::ledger_batch b;
        vbucket::parse_ledger_record(l, "b", b);
        if (!b.repeat && b.ids.size() > b.pads) {
          to = r.tell();
          break;
        }
      }
      from = r.tell();
    }
    REQUIRE(to > from);
    spit(binary->files[0], bytes.substr(0, static_cast<std::size_t>(from)) +
                               bytes.substr(static_cast<std::size_t>(to)));
    const auto lost = vbucket::audit_ledgers(binary->files);
    CHECK(!lost.clean());
    std::uint64_t missing = 0;
    for (const auto& e : lost.epochs) missing += e.missing;
    CHECK(missing > 0);
  }
}
