/// `vbucket stats`: plans one epoch and prints its statistics: per bucket, by (resolution,
/// frames), by aspect ratio, images and videos, rank alignment, step balance and the plan's
/// fingerprint.

#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::fputs, std::printf
#include <memory>       // std::unique_ptr
#include <string_view>  // std::string_view

#include "cli.hpp"
#include "plan_common.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/cache/cache_plan.hpp"
#include "vbucket/fmt/plan_table.hpp"
#include "vbucket/json/run_plan.hpp"  // load_run_plan_file (stats --run of a run plan)
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"

namespace vbucket::cli {
namespace {

/// stats' flags: its own, and the run spec's (plan_common.hpp).
const flag_table& stats_flags() {
  static const flag_table t = [] {
    flag_table f;
    f.field("config", true).field("meta", true).field("world").field("seed").field("epoch");
    f.field("drop_last").sampler_fields().other_fields({"rank"});
    f.run_file();
    return f;
  }();
  return t;
}

constexpr std::string_view stats_description =
    "Plans one epoch as `vbucket plan` does and prints its statistics: samples, batches, pads,\n"
    "drops (and downgrade moves) per bucket, by (resolution, frames) and by aspect ratio;\n"
    "image and video totals; the rank alignment for --world ranks; and the step balance\n"
    "(max/mean cost of the batches in one step; cost = latent tokens x batch size, where\n"
    "latent tokens = (1 + (T-1)/4) * (H/16) * (W/16)). Prints a warning on stderr when more\n"
    "than --pad-warn of the batch slots are pads, naming the buckets with the most and what\n"
    "--policy downgrade would leave. Ends with the plan's fingerprint, a 64-bit hash of the\n"
    "epoch's global batch sequence that `vbucket plan` prints too (the same on every rank).\n"
    "With --batching packed --token-budget B: samples, drops, batches and their sizes, the\n"
    "fill ratio (latent tokens of the real batches / (steps * W * B); alignment repeats are\n"
    "waste) and the per-step cost balance across ranks (max/mean).\n"
    "With --cache MANIFEST.csv: the exact total variation between the rule's and the delivered\n"
    "bucket distributions, and the share of the draws that fell back to another shape.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

void print_packed_stats(const packed_stats& s) {
  auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("batching:           packed, token budget %s latent tokens per batch\n",
              detail::format_cost(s.budget).c_str());
  std::printf(
      "samples:            %llu in batches; dropped: %llu in disabled buckets, %llu "
      "oversized; %llu without a bucket, %llu invalid\n",
      u(s.samples), u(s.dropped_disabled), u(s.dropped_oversized), u(s.unassigned), u(s.invalid));
  std::printf(
      "batches:            %llu (%llu of mixed shapes), %llu to %llu samples each (mean "
      "%.2f); the least full holds %.4f of the budget\n",
      u(s.batches), u(s.mixed_batches), u(s.min_entries), u(s.max_entries), s.mean_entries,
      s.min_batch_fill);
  std::printf(
      "rank alignment:     world %u: %llu steps; %llu repeated batches (%llu samples), %llu "
      "dropped batches (%llu samples)\n",
      s.alignment.world, u(s.alignment.steps), u(s.alignment.repeat_batches),
      u(s.alignment.repeat_samples), u(s.alignment.dropped_batches),
      u(s.alignment.dropped_samples));
  std::printf("fill ratio:         %.4f (latent tokens / (steps * world * budget))\n", s.fill);
  std::printf(
      "step balance:       max/mean cost per step %.4f over the epoch (sum max / sum mean), "
      "mean %.4f, worst step %.4f\n",
      s.balance.max_over_mean, s.balance.mean_step_ratio, s.balance.worst_step_ratio);
}

/// With --cache: the exact distance between the rule's and the delivered bucket distributions
/// (`delivery_of`, from the probabilities) and the share of the draws that fell back.
void print_cache_delivery(const run_spec& spec, const bucket_config& config) {
  if (spec.cache.empty()) return;
  const meta_table table = load_meta_csv(spec.meta);
  const auto cache = load_cache_manifest(spec.cache, config, table.size());
  const cache_delivery d = spec.visit_rule([&](const auto& /*tables*/, const auto& rule) {
    return delivery_of(cached_rule(rule, cache), config, table);
  });
  std::printf(
      "cache:              %s: %.6f total variation (bucket histogram, per sample), %.6f "
      "(mean per sample), %.6f of the bucketed draws fell back (nearest cached shape or none)\n",
      spec.cache.c_str(), d.tv_buckets, d.tv_sample, d.fallback_share);
}

const flag run_stats_flags[] = {
    {"run", "RUN.json", true,
     "a run file with \"sources\" and \"stages\" (and the run spec's seed, world, ...)"},
    {"world", "W", false, "number of ranks (default: the run file's)"},
    {"pad-warn", "F", false, "accepted for the plain form's sake; not used by a run plan"},
};

/// `stats --run RUN.json` of a run plan: epoch 0 as the run draws it (samples per source) and
/// the plan of its first segment (the stage in force at step 0), as the plain form prints a
/// plan.
int run_plan_stats(int argc, char** argv) {
  const args a = args::parse(argc, argv, run_stats_flags);
  if (a.help()) {
    std::fputs(usage_text("stats", stats_description, run_stats_flags).c_str(), stdout);
    return exit_ok;
  }
  json::run_plan_file f = json::load_run_plan_file(a.value("run"));
  if (a.has("world"))
    f.options.world =
        static_cast<std::uint32_t>(parse_uint_flag("world", a.value("world"), 1, max_run_world));
  const run_plan run(f.sources, f.stages, f.options);
  std::printf("run:                %s: epoch 0, stage %u \"%s\", %llu drawn samples (",
              a.value("run").c_str(), run.stage(), f.stages[run.stage()].name.c_str(),
              static_cast<unsigned long long>(run.drawn().size()));
  for (std::size_t s = 0; s < run.sources().size(); ++s)
    std::printf("%s%s %llu", s ? ", " : "", run.sources()[s].name.c_str(),
                static_cast<unsigned long long>(run.drawn_from(s)));
  std::printf("), world %u\n", run.world());
  if (const packed_plan* p = run.packed()) {
    print_packed_stats(compute_packed_stats(p->deal(run.world(), 0, f.options.drop_last)));
  } else {
    const epoch_schedule sched = run.fixed_plan()->deal(run.world(), 0, f.options.drop_last);
    const step_balance_stats balance = step_balance(sched);
    print_plan_table(stdout, compute_plan_stats(sched, f.stages[run.stage()].config), &balance);
  }
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace

// A run file with "sources" or "stages" is a run plan (tools/vbucket/run_plan_cmd.cpp).
bool is_run_plan_invocation(int argc, char** argv);

int cmd_stats(int argc, char** argv) {
  if (is_run_plan_invocation(argc, argv))
    return run_main("stats", [&] { return run_plan_stats(argc, argv); });
  return run_main("stats", [&] {
    const args a = args::parse(argc, argv, stats_flags().flags());
    if (a.help()) {
      std::fputs(usage_text("stats", stats_description, stats_flags().flags()).c_str(), stdout);
      return exit_ok;
    }
    run_flags f = read_run_flags(a, stats_flags());
    f.spec.rank = 0;
    const std::unique_ptr<any_sampler> owned = make_sampler(f.spec);
    any_sampler& sampler = *owned;
    {
      if (sampler.packed()) {
        print_packed_stats(compute_packed_stats(sampler.packing_schedule()));
        print_cache_delivery(f.spec, sampler.config());
        std::printf(
            "fingerprint:        %s (the epoch's global batch sequence: the same on every "
            "rank)\n",
            fingerprint_text(sampler.fingerprint()).c_str());
        std::fflush(stdout);
        return exit_ok;
      }
      const step_balance_stats balance = step_balance(sampler.schedule());
      print_plan_table(stdout, sampler.stats(), &balance);
      print_cache_delivery(f.spec, sampler.config());
      std::printf(
          "fingerprint:        %s (the epoch's global batch sequence: the same on every rank)\n",
          fingerprint_text(sampler.fingerprint()).c_str());
      std::fflush(stdout);
      warn_pads("stats", sampler.plan(), sampler.config(), f.pad_warn);
      return exit_ok;
    }
  });
}

}  // namespace vbucket::cli
