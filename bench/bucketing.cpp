/// Benchmarks of the bucketing hot paths over one million synthetic web-video samples:
/// assignment with both Open-Sora rules and both random sources (from a `meta_table`, and from
/// a trainer's own records with `assign_range`), and grouping by bucket.
///
///     ./vbucket_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
///
/// `items_per_second` is samples per second; `per_sample` is the time of one sample;
/// `bytes_per_second` counts the bytes a sample's assignment must move at least (its 16-byte
/// metadata row read, its 4-byte id written; 32 + 4 for the records). The distance to the
/// memory-bandwidth limit is measured in the same run: every iteration also times (untimed by
/// the benchmark, on the same clock) a streaming pass that reads the same rows and writes an id
/// each (`vbucket::bench::stream_rows`): `limit_ns` is its time per sample, `x_limit` = the
/// benchmark's own time / the pass's (1 would be at the limit).
///
/// `assign/opensora_v2/fast_compiled/scalar_vs_avx2`: both paths of `compiled_v2_rule` forced
/// (`simd_path`) and timed in every iteration, on the same rows: `scalar_ns`, `avx2_ns` (per
/// sample) and `speedup` = scalar_ns / avx2_ns; `per_sample` is the two together.
/// `assign/numpy_seed/scalar_vs_avx2`: the same for the seeding of NumPy's streams
/// (`numpy_source::seed_streams`, SeedSequence + PCG64's seeding, a block of 256 at a time).

#include <benchmark/benchmark.h>

#include <algorithm>   // std::min
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem::path (locating tests/data)
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/base/random.hpp"           // fast_source, numpy_source
#include "vbucket/bucket/assign.hpp"         // assign_into, assign_all
#include "vbucket/bucket/compiled_rule.hpp"  // compiled_v2_rule
#include "vbucket/bucket/rules.hpp"          // opensora_v2_rule, opensora_v12_rule
#include "vbucket/json/bucket_config.hpp"    // load_bucket_config
#include "vbucket/plan/group.hpp"            // group_by_bucket

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

/// The time of `pass` in seconds on the benchmark's clock, outside its timing.
template <class Pass>
double untimed(benchmark::State& state, bool real_time, Pass&& pass) {
  state.PauseTiming();
  const double t0 = real_time ? vbucket::bench::wall_seconds() : vbucket::bench::thread_seconds();
  pass();
  const double t =
      (real_time ? vbucket::bench::wall_seconds() : vbucket::bench::thread_seconds()) - t0;
  state.ResumeTiming();
  return t;
}

/// The time of `work` in seconds on the benchmark's clock (it stays timed by the benchmark).
template <class Work>
double timed(bool real_time, Work&& work) {
  const double t0 = real_time ? vbucket::bench::wall_seconds() : vbucket::bench::thread_seconds();
  work();
  return (real_time ? vbucket::bench::wall_seconds() : vbucket::bench::thread_seconds()) - t0;
}

/// Items, bytes, time per sample, and the distance to the limit (`work_s`: the benchmark's own
/// work and `limit_s`: the streaming passes, both over all iterations on the benchmark's clock).
void report(benchmark::State& state, std::size_t n, double bytes_per_sample, double work_s,
            double limit_s) {
  const auto iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n));
  state.SetBytesProcessed(
      static_cast<std::int64_t>(iterations * static_cast<double>(n) * bytes_per_sample));
  state.counters["per_sample"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
  const double limit_ns = 1e9 * limit_s / iterations / static_cast<double>(n);
  state.counters["limit_ns"] = limit_ns;
  state.counters["x_limit"] = work_s / limit_s;
}

/// The streaming pass over the benchmark's table, timed on its clock.
double stream_limit(benchmark::State& state, bool real_time, std::span<vbucket::bucket_id> ids) {
  return untimed(state, real_time, [&] {
    vbucket::bench::stream_rows(samples(), ids);
    benchmark::DoNotOptimize(ids.data());
    benchmark::ClobberMemory();
  });
}

template <class Rule, class Source>
void assign_bench(benchmark::State& state, const vbucket::bucket_config& config, const Rule& rule,
                  const Source& source, unsigned threads) {
  const vbucket::meta_table& table = samples();
  std::vector<vbucket::bucket_id> out(table.size()), streamed(table.size());
  double work_s = 0.0, limit_s = 0.0;
  for (auto _ : state) {
    work_s += timed(threads != 1, [&] {
      vbucket::assign_into(std::span<vbucket::bucket_id>(out), config, table, rule, source,
                           threads);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    });
    limit_s += stream_limit(state, threads != 1, streamed);
  }
  report(state, table.size(), vbucket::bench::stream_bytes_per_row<vbucket::bucket_id>(), work_s,
         limit_s);
}

void assign_v2_fast(benchmark::State& state, unsigned threads) {
  assign_bench(state, config_v2(), vbucket::opensora_v2_rule{}, vbucket::fast_source(bench_seed, 0),
               threads);
}

void assign_v2_fast_compiled(benchmark::State& state) {
  static const vbucket::compiled_v2_rule rule(config_v2(), vbucket::opensora_v2_rule{});
  assign_bench(state, config_v2(), rule, vbucket::fast_source(bench_seed, 0), 1);
}

/// Times `fill(out, path)` on the scalar and the AVX2 path, each forced, interleaved in every
/// iteration, over `items` items: counters scalar_ns and avx2_ns (per item) and speedup.
template <class T, class Fill>
void time_simd_paths(benchmark::State& state, std::size_t items, std::vector<T>& scalar,
                     std::vector<T>& avx2, Fill fill) {
  const auto run = [&](std::vector<T>& out, vbucket::simd_path path) {
    const double t0 = vbucket::bench::thread_seconds();
    fill(out, path);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    return vbucket::bench::thread_seconds() - t0;
  };
  double scalar_s = 0.0, avx2_s = 0.0;
  for (auto _ : state) {
    scalar_s += run(scalar, vbucket::simd_path::scalar);
    avx2_s += run(avx2, vbucket::simd_path::avx2);
  }
  if (!vbucket::detail::cpu_has_avx2()) state.SetLabel("no AVX2: both runs are scalar");
  const double per = 1e9 / static_cast<double>(state.iterations()) / static_cast<double>(items);
  state.counters["scalar_ns"] = scalar_s * per;
  state.counters["avx2_ns"] = avx2_s * per;
  state.counters["speedup"] = scalar_s / avx2_s;
  state.SetItemsProcessed(2 * static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(items));
}

/// compiled_v2_rule's scalar and AVX2 paths.
void assign_v2_fast_compiled_paths(benchmark::State& state) {
  static const vbucket::compiled_v2_rule rule(config_v2(), vbucket::opensora_v2_rule{});
  const vbucket::meta_table& table = samples();
  const vbucket::fast_source source(bench_seed, 0);
  std::vector<vbucket::bucket_id> scalar(table.size()), avx2(table.size());
  time_simd_paths(state, table.size(), scalar, avx2, [&](auto& out, vbucket::simd_path path) {
    rule.assign_rows(config_v2(), table, 0, table.size(), std::span<vbucket::bucket_id>(out),
                     source, path);
  });
  if (scalar != avx2) state.SkipWithError("the scalar and AVX2 paths gave different ids");
}

void assign_v2_numpy(benchmark::State& state) {
  assign_bench(state, config_v2(), vbucket::opensora_v2_rule{},
               vbucket::numpy_source(bench_seed, config_v2().num_buckets()), 1);
}

/// numpy_source::seed_streams' scalar and AVX2 paths, over the benchmark's sample indices
/// (Open-Sora 2.0's stride).
void numpy_seed_paths(benchmark::State& state) {
  const vbucket::numpy_source source(bench_seed, config_v2().num_buckets());
  std::vector<vbucket::numpy_rng::pcg64_state> scalar(num_samples), avx2(num_samples);
  time_simd_paths(state, num_samples, scalar, avx2, [&](auto& out, vbucket::simd_path path) {
    constexpr std::size_t block = 256;  // as the assignment seeds them
    for (std::size_t b = 0; b < out.size(); b += block)
      source.seed_streams(b, 0,
                          std::span<vbucket::numpy_rng::pcg64_state>(out).subspan(
                              b, std::min(block, out.size() - b)),
                          path);
  });
  for (std::size_t i = 0; i < num_samples; ++i)
    if (scalar[i].state != avx2[i].state || scalar[i].increment != avx2[i].increment) {
      state.SkipWithError("the scalar and AVX2 seeding gave different states");
      return;
    }
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
  std::vector<vbucket::bucket_id> streamed(r.size());
  double work_s = 0.0, limit_s = 0.0;
  for (auto _ : state) {
    work_s += timed(false, [&] {
      std::vector<vbucket::bucket_id> out = vbucket::assign_range(config, r, rule, source, 1);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    });
    // The limit here: the records read (32 bytes each), an id written.
    limit_s += untimed(state, false, [&] {
      for (std::size_t i = 0; i < r.size(); ++i)
        streamed[i] = static_cast<vbucket::bucket_id>(r[i].num_frames ^ r[i].height ^ r[i].width ^
                                                      static_cast<long long>(r[i].fps));
      benchmark::DoNotOptimize(streamed.data());
      benchmark::ClobberMemory();
    });
  }
  report(state, r.size(), static_cast<double>(sizeof(record) + sizeof(vbucket::bucket_id)), work_s,
         limit_s);
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
  std::vector<vbucket::bucket_id> streamed(ids.size());
  double work_s = 0.0, limit_s = 0.0;
  for (auto _ : state) {
    work_s += timed(false, [&] {
      vbucket::bucket_groups groups = vbucket::group_by_bucket(ids, config.num_buckets());
      benchmark::DoNotOptimize(groups.indices.data());
      benchmark::ClobberMemory();
    });
    // The limit here: the ids read, an index written.
    limit_s += untimed(state, false, [&] {
      for (std::size_t i = 0; i < ids.size(); ++i)
        streamed[i] = ids[i] ^ static_cast<vbucket::bucket_id>(i);
      benchmark::DoNotOptimize(streamed.data());
      benchmark::ClobberMemory();
    });
  }
  report(state, ids.size(), 2.0 * sizeof(vbucket::bucket_id), work_s, limit_s);
}

[[maybe_unused]] const bool registered = [] {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("assign/opensora_v2/fast", assign_v2_fast, 1u)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/fast_compiled", assign_v2_fast_compiled)
      ->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/fast_compiled/scalar_vs_avx2",
                               assign_v2_fast_compiled_paths)
      ->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/opensora_v2/numpy", assign_v2_numpy)->Unit(kMillisecond);
  benchmark::RegisterBenchmark("assign/numpy_seed/scalar_vs_avx2", numpy_seed_paths)
      ->Unit(kMillisecond);
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
