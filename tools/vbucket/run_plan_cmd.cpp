/// `vbucket plan --run RUN.json` for a run file with "sources" and "stages" (a `run_plan`: several
/// sources drawn by weight, a schedule of stages): writes the steps of one rank (or every rank)
/// as JSON lines, one object per step and rank:
/// {"step":k,"epoch":e,"stage":s,"rank":r,"bucket":[res,frames,ratio],"thw":[T,H,W],
///  "source":[...],"row":[...],"pads":p,"repeat":false}
/// ("source": the source's index in the run file, "row": its row), resumes from the run's state
/// line (--state), stops after --steps K and prints the state line, writes a ledger per rank
/// (--ledger DIR, read by `vbucket audit DIR`), and derives batch sizes from a memory model
/// (--memory-model, --memory-budget). `cmd_plan` hands over to `cmd_run_plan` when the run
/// file has "sources" or "stages" (`is_run_plan_invocation`).

#include <cstdint>      // std::uint64_t, std::uint32_t
#include <cstdio>       // std::fprintf
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "cli.hpp"
#include "plan_common.hpp"                  // json_string
#include "vbucket/detail/parse_number.hpp"  // split_text
#include "vbucket/json/bucket_config.hpp"   // read_file
#include "vbucket/json/run_plan.hpp"        // load_run_plan_file, is_run_plan_text
#include "vbucket/plan/run_memory.hpp"      // fit_to_memory
#include "vbucket/run/run_ledger.hpp"       // run_ledger
#include "vbucket/run/run_plan.hpp"

namespace vbucket::cli {
namespace {

const flag run_plan_flags[] = {
    {"run", "RUN.json", true,
     "a run file with \"sources\" and \"stages\" (and the run spec's seed, world, rank, ...)"},
    {"out", "BATCHES.jsonl", false,
     "output: one JSON object per step and rank (- : standard output, the default)"},
    {"rank", "R", false, "the rank whose steps are written, or all (default: the run file's)"},
    {"world", "W", false,
     "number of ranks (default: the run file's; with --state: from the resumed step on)"},
    {"state", "LINE|@FILE", false, "resume from a state line (\"vbucket-run v=1 ...\")"},
    {"steps", "K", false, "stop after K steps (and print the state line)"},
    {"epochs", "E", false, "plan until epoch E begins (default: the end of the current epoch)"},
    {"save-state", "FILE", false, "write the state line after the last step to FILE"},
    {"ledger", "DIR", false,
     "append each rank's delivered batches to DIR/rank-R.ledger (`vbucket audit DIR`)"},
    {"oom", "STEP,...", false,
     "at these run steps every rank reports an out-of-memory error (the step is planned again "
     "with halved batch sizes of the failing buckets)"},
    {"memory-model", "F,L,Q", false,
     "memory model of fit-bs (fixed, per token, per token²): batch sizes for --memory-budget"},
    {"memory-budget", "G", false, "memory budget per GPU, in the model's unit"},
    {"quiet", "", false, "do not print the summary"},
};

constexpr std::string_view run_plan_description =
    "Plans a training run of several sources and stages (a run file with \"sources\" and\n"
    "\"stages\"): writes each step's batch of one rank (or every rank) as a JSON line with\n"
    "the (source, row) of every sample; stops after --steps K or at the end of the epoch, and\n"
    "prints the run's state line, which --state resumes under any --world, batch sizes or\n"
    "stage: the samples of the epoch not yet delivered, each exactly once.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

double parse_double_flag(std::string_view name, const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw usage_error("--" + std::string(name) + ": expected a number, got \"" + text + "\"");
}

std::vector<std::uint64_t> parse_steps_list(const std::string& text) {
  std::vector<std::uint64_t> out;
  for (const std::string_view s : vbucket::detail::split_text(text, ','))
    out.push_back(parse_uint_flag("oom", s, 0, ~std::uint64_t{0}));
  return out;
}

std::string state_text(const std::string& v) {
  if (v.empty() || v[0] != '@') return v;
  std::string s = json::read_file(v.substr(1));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

void append_ids(std::string& line, std::string_view key, const std::vector<std::uint32_t>& v) {
  line += ",\"";
  line += key;
  line += "\":[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) line += ',';
    line += std::to_string(v[i]);
  }
  line += ']';
}

std::string batch_line(const run_batch& b, const bucket_config& cfg) {
  std::string line =
      "{\"step\":" + std::to_string(b.step) + ",\"epoch\":" + std::to_string(b.epoch) +
      ",\"stage\":" + std::to_string(b.stage) + ",\"rank\":" + std::to_string(b.rank);
  if (b.bucket >= 0 && static_cast<std::size_t>(b.bucket) < cfg.num_buckets()) {
    const auto& fr = cfg.frames_of(b.bucket);
    const auto& ratio = cfg.ratio_of(b.bucket);
    line += ",\"bucket\":[" + json_string(cfg.resolution_of(b.bucket).info.name) + "," +
            std::to_string(fr.frames) + "," + json_string(ratio.key) + "]";
  }
  line += ",\"thw\":[" + std::to_string(b.frames) + "," + std::to_string(b.height) + "," +
          std::to_string(b.width) + "]";
  append_ids(line, "source", b.sources);
  append_ids(line, "row", b.rows);
  line += ",\"pads\":" + std::to_string(b.pads) + ",\"repeat\":" + (b.repeat ? "true" : "false") +
          "}\n";
  return line;
}

}  // namespace

bool is_run_plan_invocation(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--run" && i + 1 < argc) path = argv[i + 1];
    if (a.substr(0, 6) == "--run=") path = std::string(a.substr(6));
  }
  if (path.empty()) return false;
  try {
    return json::is_run_plan_text(json::read_file(path), path);
  } catch (const std::exception&) {
    return false;  // the plain plan reports the file's error
  }
}

int cmd_run_plan(int argc, char** argv) {
  return run_main("plan", [&] {
    const args a = args::parse(argc, argv, run_plan_flags);
    if (a.help()) {
      std::fputs(usage_text("plan", run_plan_description, run_plan_flags).c_str(), stdout);
      return exit_ok;
    }
    json::run_plan_file f = json::load_run_plan_file(a.value("run"));
    if (a.has("memory-model") != a.has("memory-budget"))
      throw usage_error("--memory-model and --memory-budget go together");
    if (a.has("memory-model")) {
      const std::string& m = a.value("memory-model");
      memory_model model;
      double* parts[] = {&model.fixed, &model.linear, &model.quadratic};
      std::size_t pos = 0;
      for (std::size_t i = 0; i < 3; ++i) {
        const std::size_t e = i < 2 ? m.find(',', pos) : m.size();
        if (e == std::string::npos)
          throw usage_error("--memory-model: expected F,L,Q, got \"" + m + "\"");
        *parts[i] = parse_double_flag("memory-model", m.substr(pos, e - pos));
        pos = e + 1;
      }
      if (const std::string why = model.problem(); !why.empty())
        throw usage_error("--memory-model " + m + ": " + why);
      const double budget = parse_double_flag("memory-budget", a.value("memory-budget"));
      for (run_stage& st : f.stages) st.config = fit_to_memory(st.config, model, budget);
    }
    std::optional<std::uint32_t> world;
    if (a.has("world"))
      world =
          static_cast<std::uint32_t>(parse_uint_flag("world", a.value("world"), 1, max_run_world));
    if (world && !a.has("state")) f.options.world = *world;
    // The one rank written, or every rank (`--rank all`). A flag and a number rather than an
    // std::optional: GCC 12 at -O3 reports a false -Wmaybe-uninitialized on the optional.
    bool one_rank = true;
    std::uint32_t only_rank = f.spec.rank;
    if (a.has("rank")) {
      if (a.value("rank") == "all") {
        one_rank = false;
      } else {
        only_rank = static_cast<std::uint32_t>(
            parse_uint_flag("rank", a.value("rank"), 0, max_run_world - 1));
      }
    }
    const std::vector<run_stage> stages = f.stages;  // for naming buckets
    run_plan run(f.sources, f.stages, f.options);
    if (a.has("state")) {
      run.load(state_text(a.value("state")));
      if (world && *world != run.world()) run.set_world(*world);
    }
    if (one_rank && only_rank >= run.world())
      throw usage_error("--rank " + std::to_string(only_rank) + " is not below world " +
                        std::to_string(run.world()));
    const std::uint64_t end_epoch =
        a.has("epochs") ? parse_uint_flag("epochs", a.value("epochs"), 0, ~std::uint64_t{0})
                        : run.epoch() + 1;
    // The most steps to run (--steps), every step of the epochs when not given.
    const std::uint64_t max_steps =
        a.has("steps") ? parse_uint_flag("steps", a.value("steps"), 0, ~std::uint64_t{0})
                       : ~std::uint64_t{0};
    std::vector<std::uint64_t> oom;
    if (a.has("oom")) oom = parse_steps_list(a.value("oom"));

    output_file out(a.value_or("out", "-"));
    std::vector<std::unique_ptr<run_ledger>> ledgers;  // per rank, created on first use
    const std::string ledger_dir = a.value_or("ledger", "");
    auto ledger_of = [&](std::uint32_t r) -> run_ledger& {
      if (ledgers.size() <= r) ledgers.resize(r + 1);
      if (!ledgers[r]) ledgers[r] = std::make_unique<run_ledger>(ledger_dir, r);
      return *ledgers[r];
    };
    std::uint64_t steps = 0, batches = 0;
    try {  // a command that fails takes back the ledger records it wrote
      while (run.epoch() < end_epoch && steps < max_steps) {
        bool failed = false;
        for (const std::uint64_t s : oom) failed = failed || s == run.step();
        if (failed) {
          std::erase(oom, run.step());
          run.out_of_memory();
          continue;
        }
        const std::uint32_t lo = one_rank ? only_rank : 0,
                            hi = one_rank ? only_rank + 1 : run.world();
        const bucket_config& cfg = stages[run.stage()].config;
        std::string text;
        for (std::uint32_t r = lo; r < hi; ++r) {
          const run_batch b = run.batch(r);
          if (!ledger_dir.empty()) ledger_of(r).record(run, b);
          text += batch_line(b, cfg);
          ++batches;
        }
        out.write(text);
        run.advance();
        ++steps;
      }
    } catch (...) {
      for (const auto& l : ledgers)
        if (l) l->discard();
      throw;
    }
    out.commit();
    const std::string state = run.state();
    if (a.has("save-state")) {
      output_file s(a.value("save-state"));
      s.write(state + "\n");
      s.commit();
    }
    if (!a.has("quiet")) {
      std::FILE* to = a.value_or("out", "-") == "-" ? stderr : stdout;
      std::fprintf(to, "run: %llu steps, %llu batches written; epoch %llu step %llu world %u\n",
                   static_cast<unsigned long long>(steps), static_cast<unsigned long long>(batches),
                   static_cast<unsigned long long>(run.epoch()),
                   static_cast<unsigned long long>(run.step()), run.world());
      std::fprintf(to, "state %s\n", state.c_str());
    }
    return exit_ok;
  });
}

}  // namespace vbucket::cli
