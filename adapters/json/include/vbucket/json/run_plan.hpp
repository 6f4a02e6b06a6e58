#pragma once
/// Reads a multi-source, multi-stage run file into a `vbucket::run_plan`'s sources, stages and
/// options (`load_run_plan_file`). The run spec's fields (seed, world, rank, threads, drop_last,
/// rule, fps_max, ...) are read by the run-spec reader (run_spec.hpp), the rest here:
///
///     {"seed": 42, "world": 8, "rank": 0,
///      "sources": [{"name": "web", "csv": "web.csv", "weight": 0.7},
///                  {"name": "curated", "csv": "curated.csv", "count": 5000,
///                   "config": "curated_probs.json", "rule": "opensora-v2"}],
///      "stages": [{"name": "256px", "config": "stage1.json"},
///                 {"name": "768px", "from_step": 1200, "config": {"768px": {"1": [0.5, 13]}},
///                  "draws": {"web": {"weight": 0.5}, "curated": {"repeat": 2}},
///                  "policy": "pad", "balance": true, "batching": "fixed"}],
///      "epoch_samples": 0, "replacement": false}
///
/// A source draws by `weight`, `count` or `repeat` (at most one; none: repeat 1); a stage's
/// `draws` (an object keyed by source name, each {"weight"|"count"|"repeat": x} or a bare
/// number, a weight) replaces them from that stage on, `epoch_samples` and `replacement` may be
/// set per stage too. Configs are inline JSON objects or paths; paths are relative to the run
/// file. Every error names the file and the key ("run.json: stages[1].from_step: ...").
///
/// Compiled in vbucket::run (adapters/json/src/run_plan.cpp): link it with vbucket::json.

#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/run/run_plan.hpp"
#include "vbucket/run/run_spec.hpp"

namespace vbucket::json {

/// What a run file describes: the run spec's fields and the run plan's sources and stages.
struct run_plan_file {
  run_spec spec;                    ///< seed, world, rank, threads, rule, ...
  std::vector<run_source> sources;  ///< tables loaded
  std::vector<run_stage> stages;
  run_options options;            ///< from spec
  std::vector<std::string> csvs;  ///< per source: its metadata CSV (relative to the run file)
};

/// True when the JSON text of a run file has "sources" or "stages" (a run plan, not one
/// sampler's run spec).
[[nodiscard]] bool is_run_plan_text(std::string_view text, const std::string& where);

/// Reads a run plan file (see the file's comment): the run spec's fields through the run-spec
/// reader, sources (their CSV tables loaded), stages and the draw options.
[[nodiscard]] run_plan_file load_run_plan_file(const std::string& path);

}  // namespace vbucket::json
