/// `vbucket layout`: the per-bucket parallel layout (vbucket/plan/parallel_layout.hpp) of a config,
/// from memory and time models given as flags or fitted to a profile CSV
/// (vbucket/eigen/layout_fit.hpp), printed as a table; with --meta, the epoch planned over
/// groups of ranks at --world (vbucket/plan/group_plan.hpp) and its predicted step time and idle
/// share. The layout flags are `vbucket::layout_fields` (Python's GroupPlan keywords).

#include <cstdint>      // std::uint64_t, std::uint32_t
#include <cstdio>       // std::fputs, std::printf
#include <deque>        // std::deque (the layout flags' text)
#include <memory>       // std::unique_ptr
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <fmt/core.h>  // fmt::format

#include "cli.hpp"
#include "plan_common.hpp"
#include "vbucket/bucket/batch_size.hpp"  // batch_buckets
#include "vbucket/bucket/seeding.hpp"     // plan_seed
#include "vbucket/eigen/layout_fit.hpp"
#include "vbucket/json/run_spec.hpp"  // load_config
#include "vbucket/plan/group_plan.hpp"
#include "vbucket/plan/parallel_layout.hpp"

namespace vbucket::cli {
namespace {

constexpr std::string_view layout_description =
    "Chooses every (resolution, frames) bucket's sequence-parallel size sp, group batch,\n"
    "micro-batch and accumulation from a memory model (the micro-batch fits --memory-limit at\n"
    "its sp) and a time model (compute split over sp ranks plus a communication term), given\n"
    "as --memory and --time or fitted to --profile (fit-bs's CSV, optional sp and micro_batch\n"
    "columns), and prints them. With --meta, plans the epoch over groups of ranks at --world\n"
    "(every step's groups tile the world, every sample once) and prints its steps, predicted\n"
    "time and idle share. The same layouts as Python's vbucket.GroupPlan with the same options.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

/// The flags: run spec fields, --profile, and one per layout field.
const flag_table& layout_flags() {
  static const flag_table table = [] {
    static std::deque<std::string> names;
    flag_table t;
    t.field("config", true).field("meta").field("world").field("seed").field("epoch");
    t.field("rule").field("rng").field("fps_max").field("frame_interval");
    t.own({"profile", "PROFILE.csv", false,
           "fit --memory and --time (and the communication terms when a step ran at sp > 1) to "
           "profiled steps"});
    for (const layout_field& f : layout_fields) {
      std::string& dashed = names.emplace_back(f.name);
      for (char& c : dashed) c = c == '_' ? '-' : c;
      t.own({dashed, f.value_name, false, f.help});
    }
    return t;
  }();
  return table;
}

/// The flag of layout field `name`.
std::string flag_of(std::string_view name) {
  std::string out = "--" + std::string(name);
  for (char& c : out) c = c == '_' ? '-' : c;
  return out;
}

int run_layout(const args& a) {
  const run_flags f = read_run_flags(a, layout_flags());
  const run_spec& spec = f.spec;
  layout_options o;
  for (const layout_field& lf : layout_fields) {
    const std::string flag = flag_of(lf.name).substr(2);
    if (!a.has(flag)) continue;
    try {
      set_layout_option(o, lf.name, a.value(flag));
    } catch (const vbucket::error& e) {
      throw usage_error("--" + flag + ": " + e.what());
    }
  }
  const std::shared_ptr<const bucket_config> config = json::load_config(spec);
  if (a.has("profile")) {
    for (const char* given : {"memory", "time", "comm-per-token", "comm-per-micro-step"})
      if (a.has(given))
        throw usage_error(std::string("--") + given +
                          " and --profile: give the models or fit them");
    const eigen::layout_fit fit = spec.visit_rule([&](const auto& tables, const auto&) {
      return eigen::read_layout_profile(a.value("profile"), *config, tables);
    });
    o.memory = fit.memory;
    o.time = fit.time;
    fmt::print("profile: {} ({} memory points, {} time points)\n", a.value("profile"),
               fit.memory_points, fit.time_points);
    fmt::print("memory:  {:.6g} + micro·({:.6g}·tokens + {:.6g}·tokens²) / sp\n", o.memory.fixed,
               o.memory.linear, o.memory.quadratic);
    fmt::print(
        "time:    {:.6g} + bs·(({:.6g}·tokens + {:.6g}·tokens²) / sp + {:.6g}·tokens·(sp−1)/sp) "
        "+ micro-steps·{:.6g}·(sp−1)\n",
        o.time.compute.fixed, o.time.compute.linear, o.time.compute.quadratic,
        o.time.comm_per_token, o.time.comm_per_micro_step);
  }
  const layout_table layouts = choose_layouts(*config, o);
  const std::vector<batch_bucket> buckets = batch_buckets(layouts.config());
  std::vector<std::vector<std::string>> rows = {
      {"bucket", "tokens", "sp", "batch", "micro", "accum", "seconds"}};
  for (std::size_t i = 0; i < layouts.pairs().size(); ++i) {
    const bucket_layout& l = layouts.pairs()[i];
    if (!l.enabled()) {
      rows.push_back({escape_control(buckets[i].name()), "-", "-", "disabled", "-", "-", "-"});
      continue;
    }
    rows.push_back({escape_control(buckets[i].name()), std::to_string(l.tokens),
                    std::to_string(l.sp), std::to_string(l.batch_size),
                    std::to_string(l.micro_batch), std::to_string(l.accumulation()),
                    fmt::format("{:.6g}", l.seconds)});
  }
  fmt::print("target:  {:.6g} s per step\n\n", layouts.target_seconds());
  std::fflush(stdout);
  print_table(rows, "lrrrrrr");
  if (spec.meta.empty()) return exit_ok;

  const std::unique_ptr<any_sampler> sampler = make_sampler(spec);
  const std::vector<bucket_id> ids = sampler->assign();
  plan_options po;
  po.seed = plan_seed(spec.seed);
  po.epoch = spec.epoch;
  const group_plan plan(make_epoch_plan(std::span<const bucket_id>(ids), layouts.config(), po),
                        layouts);
  const group_schedule s = plan.deal(spec.world);
  double total = 0.0, busy = 0.0;
  std::uint64_t groups = 0;
  for (std::uint64_t k = 0; k < s.steps(); ++k) {
    const double t = s.step_seconds(k);
    total += t;
    for (const step_group& g : s.groups(k)) {
      busy += s.group_seconds(g) * g.sp;
      ++groups;
    }
  }
  const double idle = total > 0.0 ? 1.0 - busy / (total * spec.world) : 0.0;
  std::string sps;
  for (const std::int64_t sp : plan.sp_sizes())
    sps += (sps.empty() ? "" : ",") + std::to_string(sp);
  fmt::print("\nplan:    {} batches, sp classes {}, world {}\n", plan.plan().num_batches(), sps,
             spec.world);
  fmt::print("steps:   {} ({} groups, {} repeat groups fill the last step)\n", s.steps(), groups,
             s.repeat_groups());
  fmt::print("epoch:   {:.6g} s predicted (Σ of each step's slowest group)\n", total);
  fmt::print("idle:    {:.2f} % of rank time (ranks waiting on their step's slowest group)\n",
             100.0 * idle);
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace

int cmd_layout(int argc, char** argv) {
  return run_main("layout", [&] {
    const args a = args::parse(argc, argv, layout_flags().flags());
    if (a.help()) {
      std::fputs(usage_text("layout", layout_description, layout_flags().flags()).c_str(), stdout);
      return exit_ok;
    }
    return run_layout(a);
  });
}

}  // namespace vbucket::cli
