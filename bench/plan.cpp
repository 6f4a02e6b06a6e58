/// Benchmarks of the epoch planner over synthetic web-video samples, world size 64:
///  - `plan/epoch/<N>`: the whole epoch as a trainer computes it on every rank: assignment
///    (fast source, Open-Sora 2.0 rule, tests/data/config_opensora_v2.json) + grouping + the
///    plan (per-bucket shuffles, pads, global order) + dealing to 64 ranks. Counters:
///    `per_sample` (time per sample), `assign_ns` and `plan_ns` (per sample: assignment, and
///    grouping + plan + deal; wall), `assign_cpu_ns`, `plan_cpu_ns` and `cpu_ns` (the same in CPU
///    time of the process, all threads, user + sys), `extra_B_per_sample` (peak RSS during the
///    iterations above the RSS before them, per sample: the memory an epoch needs beyond the
///    metadata table) and `peak_rss_MB`; `bytes_per_second` counts a metadata row read and an
///    id written per sample, and `limit_ns` is the time per sample of a streaming pass that does
///    just that on the same table (`vbucket::bench::stream_rows`, one thread, timed in every
///    iteration outside the benchmark's time), `x_limit` = (assignment + plan) / that pass.
///  - `plan/scale/<N>` (N = 10^7, 10^8, 10^9): an epoch of N samples with no metadata table:
///    synthetic samples are generated and assigned in chunks of 2^22 rows of a compact
///    `meta_table` (streamed, as rows come from a reader), only their bucket ids are kept; then
///    grouping + plan + dealing to 1024 ranks. One iteration. Counters: `gen_s`, `assign_s`
///    (generating and assigning, both per epoch), `plan_s`, `deal_s`, `peak_rss_MB`,
///    `ids_B_per_sample` (what the streamed ids cost) and `extra_B_per_sample` (peak RSS above
///    the RSS before, per sample); `limit_ns` (the streaming pass over each chunk of rows, per
///    sample) and `x_limit` = (assign + plan + deal) / those passes. Per sample, wall and CPU
///    (the process's, all threads, user + sys): `assign_ns` / `assign_cpu_ns`, `plan_ns` /
///    `plan_cpu_ns` (`plan_sys_ns` of it in the kernel: first touch of fresh pages), `deal_ns` /
///    `deal_cpu_ns`, and `total_ns` / `total_cpu_ns` (assign + plan + deal). `growth` and
///    `growth_cpu`: total_ns and total_cpu_ns over those of the last `plan/scale/10000000` run
///    in the same process (so `--benchmark_filter='plan/scale/(10000000|1000000000)/'` prints
///    the growth from 10^7 to 10^9 measured side by side).
///  - `plan/packed/<N>`: the packed planner (`make_packed_plan`, grouping + packing + order +
///    deal to 64 ranks) against the fixed plan (`make_epoch_plan` + deal) on the same samples
///    and config (Open-Sora 2.0), both timed in every iteration, with the packed budget the
///    fixed config's largest batch cost (`largest_batch_cost`, the memory its batch sizes are
///    tuned to). Counters: `packed_ms` and `fixed_ms` (planning time per epoch: the plan and its
///    deal, without assignment or freeing), `time_ratio` (packed / fixed planning time),
///    `fill_packed` and `fill_fixed` (Σ cost of distinct samples / (steps · world · budget): pads
///    and alignment repeats are waste), `balance_packed` and `balance_fixed` (Σ max / Σ mean batch
///    cost per step), `worst_step_packed` and `worst_step_fixed` (the largest max / mean of one
///    step), and the same for the packed plan with step balance group 960 (`*_packed960`) and the
///    fixed plan with it (`*_fixed960`).
///  - `plan/balance/opensora_v12`: the step balance (Σ max / Σ mean cost per step) of random
///    batch order and of step-balanced order on Open-Sora v1.2's config, world 64.
///
///     ./vbucket_bench --benchmark_filter=plan/ --benchmark_repetitions=3

#include <benchmark/benchmark.h>

#include <algorithm>   // std::min
#include <chrono>      // std::chrono::steady_clock (stage times)
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t
#include <cstdio>      // std::FILE, std::fopen, std::fgets
#include <cstdlib>     // std::strtol
#include <cstring>     // std::strlen, std::strncmp
#include <ctime>       // clock_gettime (process CPU time)
#include <filesystem>  // std::filesystem::path (locating tests/data)
#include <map>         // std::map (tables per size)
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim (a clean RSS baseline)
#endif
#if defined(__unix__)
#include <sys/resource.h>  // getrusage (kernel time)
#endif
#include <memory>  // std::unique_ptr
#include <span>    // std::span
#include <string>  // std::string
#include <vector>  // std::vector

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"
#include "vbucket/vbucket.hpp"

namespace {

using vbucket::bench::data_path;
using vbucket::bench::proc_status_kb;
using vbucket::bench::reset_peak_rss;

constexpr std::uint64_t plan_seed = 1234;
constexpr std::uint32_t plan_world = 64;

/// The synthetic table of n samples (built once per size).
const vbucket::meta_table& plan_samples(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<vbucket::meta_table>> tables;
  auto& t = tables[n];
  if (!t) t = std::make_unique<vbucket::meta_table>(vbucket::bench::synthetic_table(n));
  return *t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The process's CPU time (all threads, user + sys), in seconds; 0 where unavailable.
double process_cpu_seconds() {
#if defined(CLOCK_PROCESS_CPUTIME_ID)
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0.0;
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
#else
  return 0.0;
#endif
}

/// The process's kernel time (all threads), in seconds; 0 where unavailable.
double process_sys_seconds() {
#if defined(__unix__)
  rusage r{};
  if (getrusage(RUSAGE_SELF, &r) != 0) return 0.0;
  return static_cast<double>(r.ru_stime.tv_sec) + 1e-6 * static_cast<double>(r.ru_stime.tv_usec);
#else
  return 0.0;
#endif
}

/// Per-sample wall and CPU totals of the last plan/scale/10^7 run (0: none yet).
double scale_base_ns = 0.0, scale_base_cpu_ns = 0.0;

void plan_epoch(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const vbucket::meta_table& table = plan_samples(n);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{};
#if defined(__GLIBC__)
  malloc_trim(0);  // return memory freed by earlier runs, so the baseline is the table alone
#endif
  const long rss_before = proc_status_kb("VmRSS");
  const bool peak_reset = reset_peak_rss();
  double assign_s = 0.0, plan_s = 0.0, limit_s = 0.0, assign_cpu = 0.0, plan_cpu = 0.0;
  std::uint64_t batches = 0, steps = 0;
  std::uint64_t epoch = 0;
  std::vector<vbucket::bucket_id> streamed(n);
  for (auto _ : state) {
    state.PauseTiming();  // the memory-bandwidth limit on the same table, outside the time
    const double l0 = vbucket::bench::wall_seconds();
    vbucket::bench::stream_rows(table, std::span<vbucket::bucket_id>(streamed));
    benchmark::DoNotOptimize(streamed.data());
    benchmark::ClobberMemory();
    limit_s += vbucket::bench::wall_seconds() - l0;
    state.ResumeTiming();
    // A new epoch every iteration, as in training: new draws, new shuffles.
    auto t0 = std::chrono::steady_clock::now();
    double c0 = process_cpu_seconds();
    const std::vector<vbucket::bucket_id> ids =
        vbucket::assign_all(config, table, rule, vbucket::fast_source(plan_seed, epoch));
    assign_s += seconds_since(t0);
    assign_cpu += process_cpu_seconds() - c0;
    t0 = std::chrono::steady_clock::now();
    c0 = process_cpu_seconds();
    vbucket::plan_options options;
    options.seed = plan_seed;
    options.epoch = epoch;
    // Grouping happens inside: a parallel counting sort straight into the plan's slots.
    const vbucket::epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, options);
    const vbucket::epoch_schedule schedule = plan.deal(plan_world);
    plan_s += seconds_since(t0);
    plan_cpu += process_cpu_seconds() - c0;
    batches = plan.num_batches();
    steps = schedule.steps();
    benchmark::DoNotOptimize(schedule.at(0, plan_world - 1).indices.data());
    ++epoch;
  }
  const long rss_peak = peak_reset ? proc_status_kb("VmHWM") : -1;
  const double samples = static_cast<double>(n);
  const double iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n));
  state.counters["per_sample"] = benchmark::Counter(
      samples, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["assign_ns"] = 1e9 * assign_s / iterations / samples;
  state.counters["plan_ns"] = 1e9 * plan_s / iterations / samples;
  state.counters["assign_cpu_ns"] = 1e9 * assign_cpu / iterations / samples;
  state.counters["plan_cpu_ns"] = 1e9 * plan_cpu / iterations / samples;
  state.counters["cpu_ns"] = 1e9 * (assign_cpu + plan_cpu) / iterations / samples;
  state.SetBytesProcessed(static_cast<std::int64_t>(
      iterations * samples * vbucket::bench::stream_bytes_per_row<vbucket::bucket_id>()));
  state.counters["limit_ns"] = 1e9 * limit_s / iterations / samples;
  state.counters["x_limit"] = (assign_s + plan_s) / limit_s;
  state.counters["batches"] = static_cast<double>(batches);
  state.counters["steps"] = static_cast<double>(steps);
  if (rss_before >= 0 && rss_peak >= 0) {
    state.counters["extra_B_per_sample"] =
        1024.0 * static_cast<double>(rss_peak - rss_before) / samples;
    state.counters["peak_rss_MB"] = static_cast<double>(rss_peak) / 1024.0;
  }
}

void plan_scale(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::uint32_t world = 1024;
  constexpr std::size_t chunk = std::size_t{1} << 22;
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  const vbucket::compiled_v2_rule rule(config, vbucket::opensora_v2_rule{});
  const vbucket::opensora_v2_rule plain{};
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  const long rss_before = proc_status_kb("VmRSS");
  const bool peak_reset = reset_peak_rss();
  double gen_s = 0.0, assign_s = 0.0, plan_s = 0.0, deal_s = 0.0, limit_s = 0.0;
  double assign_cpu = 0.0, plan_cpu = 0.0, plan_sys = 0.0, deal_cpu = 0.0;
  std::uint64_t batches = 0, steps = 0, grouped = 0;
  for (auto _ : state) {
    const vbucket::fast_source source(plan_seed, 0);
    std::vector<vbucket::compact_bucket_id> ids(n);  // 16-bit: the config has 57 buckets
    std::vector<vbucket::bucket_id> chunk_ids(chunk);
    vbucket::meta_table rows;
    rows.reserve(chunk);
    std::vector<vbucket::sample_meta> made(chunk);
    for (std::size_t first = 0; first < n; first += chunk) {
      const std::size_t count = std::min(chunk, n - first);
      auto t0 = std::chrono::steady_clock::now();
      // Generated in parallel, then appended to the compact table as a reader appends rows.
      vbucket::detail::parallel_chunks(count, 0, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) made[i] = vbucket::bench::synthetic_sample(first + i);
      });
      rows.clear();
      rows.append(std::span<const vbucket::sample_meta>(made.data(), count));
      gen_s += seconds_since(t0);
      // The memory-bandwidth limit on the same rows, outside the benchmark's time.
      state.PauseTiming();
      t0 = std::chrono::steady_clock::now();
      vbucket::bench::stream_rows(rows, std::span<vbucket::bucket_id>(chunk_ids.data(), count));
      benchmark::DoNotOptimize(chunk_ids.data());
      benchmark::ClobberMemory();
      limit_s += seconds_since(t0);
      state.ResumeTiming();
      t0 = std::chrono::steady_clock::now();
      const double c0 = process_cpu_seconds();
      const vbucket::shifted_source<vbucket::fast_source> at{source, first};
      vbucket::assign_into(std::span<vbucket::bucket_id>(chunk_ids.data(), count), config, rows,
                           rule, at);
      vbucket::compact_ids(std::span<const vbucket::bucket_id>(chunk_ids.data(), count),
                           std::span<vbucket::compact_bucket_id>(ids.data() + first, count),
                           config.num_buckets(), first);
      assign_s += seconds_since(t0);
      assign_cpu += process_cpu_seconds() - c0;
      // The streamed ids are the whole table's: spot-check rows against the plain rule.
      for (std::size_t i = 0; i < count; i += 65537)
        if (ids[first + i] != plain.assign(config, rows[i], first + i, source)) {
          state.SkipWithError("a streamed chunk assigned other buckets than the whole table");
          return;
        }
    }
    rows = vbucket::meta_table{};
    auto t0 = std::chrono::steady_clock::now();
    double c0 = process_cpu_seconds();
    const double s0 = process_sys_seconds();
    vbucket::plan_options options;
    options.seed = plan_seed;
    const vbucket::epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const vbucket::compact_bucket_id>(ids), config, options);
    plan_s += seconds_since(t0);
    plan_cpu += process_cpu_seconds() - c0;
    plan_sys += process_sys_seconds() - s0;
    t0 = std::chrono::steady_clock::now();
    c0 = process_cpu_seconds();
    const vbucket::epoch_schedule schedule = plan.deal(world);
    deal_s += seconds_since(t0);
    deal_cpu += process_cpu_seconds() - c0;
    batches = plan.num_batches();
    steps = schedule.steps();
    grouped = vbucket::compute_plan_stats(plan, config).total.grouped;
    benchmark::DoNotOptimize(schedule.at(0, world - 1).indices.data());
  }
  const long rss_peak = peak_reset ? proc_status_kb("VmHWM") : -1;
  const double samples = static_cast<double>(n);
  state.counters["gen_s"] = gen_s;
  state.counters["assign_s"] = assign_s;
  state.counters["plan_s"] = plan_s;
  state.counters["deal_s"] = deal_s;
  state.counters["limit_ns"] = 1e9 * limit_s / samples;
  state.counters["x_limit"] = (assign_s + plan_s + deal_s) / limit_s;
  const double ns = 1e9 / samples;
  state.counters["assign_ns"] = ns * assign_s;
  state.counters["plan_ns"] = ns * plan_s;
  state.counters["deal_ns"] = ns * deal_s;
  state.counters["assign_cpu_ns"] = ns * assign_cpu;
  state.counters["plan_cpu_ns"] = ns * plan_cpu;
  state.counters["plan_sys_ns"] = ns * plan_sys;
  state.counters["deal_cpu_ns"] = ns * deal_cpu;
  const double total_ns = ns * (assign_s + plan_s + deal_s);
  const double total_cpu_ns = ns * (assign_cpu + plan_cpu + deal_cpu);
  state.counters["total_ns"] = total_ns;
  state.counters["total_cpu_ns"] = total_cpu_ns;
  if (n == 10'000'000) {
    scale_base_ns = total_ns;
    scale_base_cpu_ns = total_cpu_ns;
  } else if (scale_base_ns > 0.0) {
    state.counters["growth"] = total_ns / scale_base_ns;
    state.counters["growth_cpu"] = total_cpu_ns / scale_base_cpu_ns;
  }
  state.counters["batches"] = static_cast<double>(batches);
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["grouped"] = static_cast<double>(grouped);
  state.counters["ids_B_per_sample"] = static_cast<double>(sizeof(vbucket::compact_bucket_id));
  if (rss_before >= 0 && rss_peak >= 0) {
    state.counters["extra_B_per_sample"] =
        1024.0 * static_cast<double>(rss_peak - rss_before) / samples;
    state.counters["peak_rss_MB"] = static_cast<double>(rss_peak) / 1024.0;
  }
}

/// The packed planner against the fixed plan on the same data, world 64.
void plan_packed(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const vbucket::meta_table& table = plan_samples(n);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  const double budget = vbucket::largest_batch_cost(config);
  double packed_s = 0.0, fixed_s = 0.0;
  std::uint64_t epoch = 0;
  std::vector<vbucket::bucket_id> ids;
  for (auto _ : state) {
    state.PauseTiming();
    ids = vbucket::assign_all(config, table, vbucket::opensora_v2_rule{},
                              vbucket::fast_source(plan_seed, epoch));
    state.ResumeTiming();
    auto t0 = std::chrono::steady_clock::now();
    vbucket::packed_options options;
    options.seed = plan_seed;
    options.epoch = epoch;
    options.token_budget = budget;
    const vbucket::packed_plan packed =
        vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config, options);
    const vbucket::packed_schedule schedule = packed.deal(plan_world);
    packed_s += seconds_since(t0);
    benchmark::DoNotOptimize(schedule.at(0, plan_world - 1).indices.data());
    state.PauseTiming();
    t0 = std::chrono::steady_clock::now();
    vbucket::plan_options fixed_options;
    fixed_options.seed = plan_seed;
    fixed_options.epoch = epoch;
    const vbucket::epoch_plan fixed =
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, fixed_options);
    const vbucket::epoch_schedule fixed_schedule = fixed.deal(plan_world);
    fixed_s += seconds_since(t0);
    benchmark::DoNotOptimize(fixed_schedule.at(0, plan_world - 1).indices.data());
    state.ResumeTiming();
    ++epoch;
  }
  state.counters["time_ratio"] = packed_s / fixed_s;
  state.counters["fixed_ms"] = 1e3 * fixed_s / static_cast<double>(state.iterations());
  state.counters["packed_ms"] = 1e3 * packed_s / static_cast<double>(state.iterations());
  // Quality figures of epoch 0's plans (not timed; the same whatever the iteration count).
  ids = vbucket::assign_all(config, table, vbucket::opensora_v2_rule{},
                            vbucket::fast_source(plan_seed, 0));
  vbucket::packed_options options;
  options.seed = plan_seed;
  options.epoch = 0;
  options.token_budget = budget;
  const vbucket::packed_schedule packed =
      vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config, options)
          .deal(plan_world);
  options.balance_group = vbucket::default_balance_group;
  const vbucket::packed_schedule packed960 =
      vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config, options)
          .deal(plan_world);
  vbucket::plan_options fixed_options;
  fixed_options.seed = plan_seed;
  fixed_options.epoch = 0;
  const vbucket::epoch_schedule fixed =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, fixed_options)
          .deal(plan_world);
  fixed_options.balance_group = vbucket::default_balance_group;
  const vbucket::epoch_schedule fixed960 =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, fixed_options)
          .deal(plan_world);
  const auto fixed960_balance = vbucket::step_balance(fixed960);
  state.counters["balance_fixed960"] = fixed960_balance.max_over_mean;
  state.counters["worst_step_fixed960"] = fixed960_balance.worst_step_ratio;
  const auto packed_balance = vbucket::step_balance(packed);
  const auto packed960_balance = vbucket::step_balance(packed960);
  const auto fixed_balance = vbucket::step_balance(fixed);
  state.counters["budget"] = budget;
  state.counters["fill_packed"] = vbucket::fill_ratio(packed);
  state.counters["fill_packed960"] = vbucket::fill_ratio(packed960);
  state.counters["fill_fixed"] = vbucket::fill_ratio(fixed, budget);
  state.counters["balance_packed"] = packed_balance.max_over_mean;
  state.counters["balance_packed960"] = packed960_balance.max_over_mean;
  state.counters["balance_fixed"] = fixed_balance.max_over_mean;
  state.counters["worst_step_packed"] = packed_balance.worst_step_ratio;
  state.counters["worst_step_packed960"] = packed960_balance.worst_step_ratio;
  state.counters["worst_step_fixed"] = fixed_balance.worst_step_ratio;
  state.counters["steps_packed"] = static_cast<double>(packed.steps());
  state.counters["steps_fixed"] = static_cast<double>(fixed.steps());
}

/// Step balance on Open-Sora v1.2's config: random order against step-balanced order.
void plan_balance_v12(benchmark::State& state) {
  const vbucket::meta_table& table = plan_samples(1'000'000);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v12.json"), vbucket::opensora_v12_tables{});
  const std::vector<vbucket::bucket_id> ids = vbucket::assign_all(
      config, table, vbucket::opensora_v12_rule{}, vbucket::fast_source(plan_seed, 0));
  const vbucket::bucket_groups groups = vbucket::group_by_bucket(ids, config.num_buckets());
  vbucket::step_balance_stats random_order, balanced;
  for (auto _ : state) {
    vbucket::plan_options options;
    options.seed = plan_seed;
    const vbucket::epoch_plan a = vbucket::make_epoch_plan(groups, config, options);
    options.balance_group = plan_world;
    const vbucket::epoch_plan b = vbucket::make_epoch_plan(groups, config, options);
    random_order = vbucket::step_balance(a.deal(plan_world));
    balanced = vbucket::step_balance(b.deal(plan_world));
  }
  state.counters["random_max_over_mean"] = random_order.max_over_mean;
  state.counters["balanced_max_over_mean"] = balanced.max_over_mean;
  state.counters["random_worst_step"] = random_order.worst_step_ratio;
  state.counters["balanced_worst_step"] = balanced.worst_step_ratio;
  state.counters["steps"] = static_cast<double>(random_order.steps);
}

[[maybe_unused]] const bool registered = [] {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("plan/epoch", plan_epoch)
      ->Arg(1'000'000)
      ->Arg(10'000'000)
      ->Unit(kMillisecond)
      ->UseRealTime();
  // 10^9 needs about 7 GB; run it by name (--benchmark_filter=plan/scale/1000000000).
  benchmark::RegisterBenchmark("plan/scale", plan_scale)
      ->Arg(10'000'000)
      ->Arg(100'000'000)
      ->Arg(1'000'000'000)
      ->Unit(kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  benchmark::RegisterBenchmark("plan/packed", plan_packed)
      ->Arg(1'000'000)
      ->Unit(kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("plan/balance/opensora_v12", plan_balance_v12)
      ->Unit(kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  return true;
}();

}  // namespace
