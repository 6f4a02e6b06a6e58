/// Benchmarks of the bucketing hot paths over one million synthetic web-video samples:
/// assignment with both Open-Sora rules and both random sources (from a `meta_table`, and from
/// a trainer's own records with `assign_range`), and grouping by bucket.
///
///     ./vbucket_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
///
/// `items_per_second` is samples per second; `per_sample` is the time of one sample.

#include <benchmark/benchmark.h>

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem::path (locating tests/data)
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/assign.hpp"              // assign_into, assign_all
#include "vbucket/compiled_rule.hpp"       // compiled_v2_rule
#include "vbucket/group.hpp"               // group_by_bucket
#include "vbucket/json/bucket_config.hpp"  // load_bucket_config
#include "vbucket/random.hpp"              // fast_source, numpy_source
#include "vbucket/rules.hpp"               // opensora_v2_rule, opensora_v12_rule

namespace {

using vbucket::bench::data_path;

constexpr std::size_t num_samples = 1'000'000;
constexpr std::uint64_t bench_seed = 1234;  // Open-Sora's seed + epoch, as in the golden files

const vbucket::meta_table& samples() {
  static const vbucket::meta_table table = vbucket::bench::synthetic_table(num_samples);
  return table;
}

const vbucket::bucket_config& config_v2() {
  static const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  return config;
}

const vbucket::bucket_config& config_v12() {
  static const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v12.json"), vbucket::opensora_v12_tables{});
  return config;
}

void report(benchmark::State& state, std::size_t n) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n));
  state.counters["per_sample"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

template <class Rule, class Source>
void assign_bench(benchmark::State& state, const vbucket::bucket_config& config, const Rule& rule,
                  const Source& source, unsigned threads) {
  const vbucket::meta_table& table = samples();
  std::vector<vbucket::bucket_id> out(table.size());
  for (auto _ : state) {
    vbucket::assign_into(std::span<vbucket::bucket_id>(out), config, table, rule, source, threads);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, table.size());
}

void assign_v2_fast(benchmark::State& state, unsigned threads) {
  assign_bench(state, config_v2(), vbucket::opensora_v2_rule{}, vbucket::fast_source(bench_seed, 0),
               threads);
}

void assign_v2_fast_compiled(benchmark::State& state) {
  static const vbucket::compiled_v2_rule rule(config_v2(), vbucket::opensora_v2_rule{});
  assign_bench(state, config_v2(), rule, vbucket::fast_source(bench_seed, 0), 1);
}

void assign_v2_numpy(benchmark::State& state) {
  assign_bench(state, config_v2(), vbucket::opensora_v2_rule{},
               vbucket::numpy_source(bench_seed, config_v2().num_buckets()), 1);
}

void assign_v12_fast(benchmark::State& state) {
  assign_bench(state, config_v12(), vbucket::opensora_v12_rule{},
               vbucket::fast_source(bench_seed, 0), 1);
}

void assign_v12_numpy(benchmark::State& state) {
  assign_bench(state, config_v12(), vbucket::opensora_v12_rule{},
               vbucket::numpy_source(bench_seed, config_v12().num_buckets()), 1);
}

/// A trainer's own record type (read through vbucket::meta_traits' defaults).
struct record {
  long long num_frames, height, width;
  double fps;
};

const std::vector<record>& records() {
  static const std::vector<record> all = [] {
    const vbucket::meta_table& table = samples();
    std::vector<record> r;
    r.reserve(table.size());
    for (std::size_t i = 0; i < table.size(); ++i) {
      const vbucket::sample_meta m = table[i];
      r.push_back({m.num_frames, m.height, m.width, m.fps});
    }
    return r;
  }();
  return all;
}

template <class Rule, class Source>
void assign_records_bench(benchmark::State& state, const vbucket::bucket_config& config,
                          const Rule& rule, const Source& source) {
  const std::vector<record>& r = records();
  for (auto _ : state) {
    std::vector<vbucket::bucket_id> out = vbucket::assign_range(config, r, rule, source, 1);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, r.size());
}

void assign_v2_fast_records(benchmark::State& state) {
  assign_records_bench(state, config_v2(), vbucket::opensora_v2_rule{},
                       vbucket::fast_source(bench_seed, 0));
}

void assign_v12_fast_records(benchmark::State& state) {
  assign_records_bench(state, config_v12(), vbucket::opensora_v12_rule{},
                       vbucket::fast_source(bench_seed, 0));
}

void group_by_bucket(benchmark::State& state) {
  const vbucket::bucket_config& config = config_v2();
  const std::vector<vbucket::bucket_id> ids = vbucket::assign_all(
      config, samples(), vbucket::opensora_v2_rule{}, vbucket::fast_source(bench_seed, 0), 1);
  for (auto _ : state) {
    vbucket::bucket_groups groups = vbucket::group_by_bucket(ids, config.num_buckets());
    benchmark::DoNotOptimize(groups.indices.data());
    benchmark::ClobberMemory();
  }
  report(state, ids.size());
}

[[maybe_unused]] const bool registered = [] {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("assign/opensora_v2/fast", assign_v2_fast, 1u)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/fast_compiled", assign_v2_fast_compiled)
      ->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/numpy", assign_v2_numpy)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v12/fast", assign_v12_fast)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v12/numpy", assign_v12_numpy)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/fast_records", assign_v2_fast_records)
      ->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v12/fast_records", assign_v12_fast_records)
      ->Unit(kMillisecond);
  benchmark::RegisterBenchmark("group/by_bucket", group_by_bucket)->Unit(kMillisecond);
  // For information: the same work split over two threads (wall-clock time).
  benchmark::RegisterBenchmark("assign/opensora_v2/fast/threads:2", assign_v2_fast, 2u)
      ->Unit(kMillisecond)
      ->UseRealTime();
  return true;
}();

}  // namespace
