#pragma once
/// The run plan as the Python binding holds it (`_vbucket.RunPlan`): shared by
/// run_bindings.cpp (the plan and its loop) and media_bindings.cpp (a loader over the run).

#include <nanobind/nanobind.h>

#include <cstdint>       // std::uint32_t, std::uint64_t
#include <filesystem>    // std::filesystem::create_directories
#include <map>           // std::map
#include <memory>        // std::unique_ptr
#include <string>        // std::string
#include <system_error>  // std::error_code
#include <vector>        // std::vector

#include "vbucket/json/run_plan.hpp"   // load_run_plan_file
#include "vbucket/run/run_ledger.hpp"  // run_ledger
#include "vbucket/run/run_plan.hpp"
#include "vbucket/run/run_spec.hpp"

namespace vbucket_py {

struct py_run_plan {
  std::vector<vbucket::run_stage> stages;  // for naming buckets
  std::unique_ptr<vbucket::run_plan> run;
  std::uint64_t seed = 0;
  vbucket::run_spec spec;
  std::vector<std::string> csvs;  // per source: its metadata CSV (for a loader's fields)  // the
                                  // run file's run-spec fields (media, rule) for a loader
  std::string ledger_dir;
  std::map<std::uint32_t, std::unique_ptr<vbucket::run_ledger>> ledgers;

  explicit py_run_plan(const std::string& path) {
    vbucket::json::run_plan_file f = vbucket::json::load_run_plan_file(path);
    stages = f.stages;
    seed = f.options.seed;
    spec = f.spec;
    csvs = f.csvs;
    run = std::make_unique<vbucket::run_plan>(f.sources, f.stages, f.options);
  }

  /// What `vbucket plan --run --ledger DIR` writes for the current step: each rank's batch,
  /// and in rank 0's ledger the epoch's declaration and undelivered samples (`run_ledger`).
  void write_ledger(const std::string& dir, std::vector<std::uint32_t> ranks) {
    if (ranks.empty())
      for (std::uint32_t r = 0; r < run->world(); ++r) ranks.push_back(r);
    if (ledger_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw vbucket::error("ledger " + dir + ": " + ec.message());
      ledger_dir = dir;
    } else if (dir != ledger_dir) {
      throw vbucket::error("ledger " + dir + ": this run writes its ledger to " + ledger_dir);
    }
    for (const std::uint32_t r : ranks) {
      if (r >= run->world())
        throw vbucket::error("run: rank " + std::to_string(r) + " is not below world " +
                             std::to_string(run->world()));
      std::unique_ptr<vbucket::run_ledger>& l = ledgers[r];
      if (!l) l = std::make_unique<vbucket::run_ledger>(ledger_dir, r);
      l->record(*run, run->batch(r));
    }
  }
};

/// A run batch as Python sees it: the CLI's JSON line's fields (step, epoch, stage, rank,
/// bucket, thw, source, row, pads, repeat).
inline nanobind::list id_list(const std::vector<std::uint32_t>& v) {
  nanobind::list out;
  for (const std::uint32_t x : v) out.append(x);
  return out;
}

inline nanobind::dict batch_dict(const vbucket::run_batch& b, const vbucket::bucket_config& cfg) {
  nanobind::dict d;
  d["step"] = b.step;
  d["epoch"] = b.epoch;
  d["stage"] = b.stage;
  d["rank"] = b.rank;
  if (b.bucket >= 0 && static_cast<std::size_t>(b.bucket) < cfg.num_buckets()) {
    d["bucket"] = nanobind::make_tuple(cfg.resolution_of(b.bucket).info.name,
                                       cfg.frames_of(b.bucket).frames, cfg.ratio_of(b.bucket).key);
  } else {
    d["bucket"] = nanobind::none();
  }
  d["thw"] = nanobind::make_tuple(b.frames, b.height, b.width);
  d["source"] = id_list(b.sources);
  d["row"] = id_list(b.rows);
  d["pads"] = b.pads;
  d["repeat"] = b.repeat;
  return d;
}

}  // namespace vbucket_py
