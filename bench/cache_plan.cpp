/// The latent-cache planner (issue 32) on Open-Sora 2.0's config (tests/data) over N synthetic
/// web-video samples (bench/synthetic.hpp, seed 0), fps_max 16:
///  - `cache_plan/coverage/<permille>/<N>`: `plan_cache` at coverage permille/1000. Counters:
///    `shapes_per_sample`, `coverage`, `tv_sample` (mean per-sample TV between the rule's and
///    the delivered distribution, nearest fallback), `tv_buckets` (TV of the bucket histogram),
///    `GiB` (latents at 16 channels × 2 bytes, compression 4 × 8 × 8), and the two baselines:
///    `top1_*` (each sample's most probable shape) and `all_*` (every possible shape).
///    Permille 0: `cache_selection::stratified` (one shape per sample, the histogram kept).
///
///     ./vbucket_bench --benchmark_filter=cache_plan/

#include <benchmark/benchmark.h>

#include <cstdint>  // std::int64_t

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/cache/cache_plan.hpp"
#include "vbucket/json/bucket_config.hpp"

namespace {

void cache_plan_coverage(benchmark::State& state) {
  const auto permille = state.range(0);
  const auto n = static_cast<std::size_t>(state.range(1));
  const vbucket::meta_table table = vbucket::bench::synthetic_table(n);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      vbucket::bench::data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  vbucket::cache_plan_options o;
  if (permille == 0) {
    o.selection = vbucket::cache_selection::stratified;
  } else {
    o.coverage = static_cast<double>(permille) / 1000.0;
  }
  vbucket::cache_plan plan;
  for (auto _ : state) {
    plan = vbucket::plan_cache(config, table, vbucket::opensora_v2_rule{16.0}, o);
    benchmark::DoNotOptimize(plan.entries.data());
  }
  auto put = [&](const char* prefix, const vbucket::cache_summary& s) {
    const std::string p(prefix);
    state.counters[p + "shapes_per_sample"] = s.shapes_per_sample;
    state.counters[p + "coverage"] = s.coverage;
    state.counters[p + "tv_sample"] = s.tv_sample;
    state.counters[p + "tv_buckets"] = s.tv_buckets;
    state.counters[p + "GiB"] = static_cast<double>(s.bytes) / (1024.0 * 1024.0 * 1024.0);
  };
  put("", plan.chosen);
  put("top1_", plan.one_per_sample);
  put("all_", plan.every_shape);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n));
}

BENCHMARK(cache_plan_coverage)
    ->Name("cache_plan/coverage")
    ->Args({990, 100000})
    ->Args({750, 100000})
    ->Args({0, 100000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
