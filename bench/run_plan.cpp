/// Benchmarks of the training run as one plan (`vbucket::run_plan`,
/// include/vbucket/run/run_plan.hpp) over synthetic web-video samples (bench/synthetic.hpp),
/// Open-Sora 2.0's config (tests/data/config_opensora_v2.json) and rule, world size 64:
///  - `plan/run/<N>/<k>`: an epoch of N samples from k sources of N / k rows each, every row
///    once: `run_plan::start_epoch` (assignment of every source, the draws, the plan, the deal).
///    In the same iteration, the plan of one source of N (`plan/epoch`'s work: `assign_all` +
///    `make_epoch_plan` + `deal`) on a table of N rows. Counters: `run_ms`, `epoch_ms` and
///    `x_epoch` = run / epoch (issue 31: ≤ 1.1).
///  - `plan/run_weighted/<N>/<k>`: as above with weights k : k − 1 : … : 1 over N samples, so
///    some sources are drawn a subset and some more than once (selection sampling + gather).
///  - `plan/run_change/<N>/<new config>`: an epoch of N distinct rows from 2 sources, in the
///    middle of the epoch: `load_ms` (a fresh run loads the state line: draws, assignment, the
///    current plan), `stage_ms` (the step at which the next stage begins: the samples not yet
///    delivered planned again; new config = 0: other batch sizes and policy, 1: also other
///    probabilities, so every drawn sample is assigned again), `oom_ms` (then an out-of-memory
///    call on one rank: the same). `stage_cpu_ms`: the stage change's CPU time (all threads of
///    the process; issue 42: ≤ 2 s at 10^8 with a new config), of which `stage_sys_ms` in the
///    kernel, mostly on its `stage_faults` first touches of fresh pages. `x_epoch`: its CPU time /
///    the CPU time of the plan of one source of N rows in the same iteration (`epoch_cpu_ms`:
///    assign_all + make_epoch_plan + deal), a ratio that depends less on the machine's load.
///    One iteration each; 10^8 needs about 6 GB.
///
///     ./vbucket_bench --benchmark_filter='plan/(run|epoch)' --benchmark_repetitions=3

#include <benchmark/benchmark.h>

#include <chrono>   // std::chrono::steady_clock
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t
#include <ctime>    // std::clock (process CPU time)
#include <map>      // std::map
#include <memory>   // std::shared_ptr
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include <sys/resource.h>  // getrusage (page faults, system time)

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/run/run_plan.hpp"

namespace {

using vbucket::bench::data_path;

constexpr std::uint64_t run_seed = 1234;
constexpr std::uint32_t run_world = 64;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Synthetic tables by (rows, seed), built once.
std::shared_ptr<const vbucket::meta_table> run_table(std::size_t n, std::uint64_t seed) {
  static std::map<std::pair<std::size_t, std::uint64_t>, std::shared_ptr<const vbucket::meta_table>>
      tables;
  auto& t = tables[{n, seed}];
  if (!t) t = std::make_shared<const vbucket::meta_table>(vbucket::bench::synthetic_table(n, seed));
  return t;
}

vbucket::bucket_config v2_config() {
  return vbucket::json::load_bucket_config(data_path("config_opensora_v2.json"),
                                           vbucket::opensora_v2_tables{});
}

std::vector<vbucket::run_source> run_sources(std::size_t n, std::size_t k) {
  std::vector<vbucket::run_source> out;
  for (std::size_t s = 0; s < k; ++s) {
    vbucket::run_source src;
    src.name = "source" + std::to_string(s);
    src.table = run_table(n / k, 100 + s);
    out.push_back(std::move(src));
  }
  return out;
}

void run_vs_epoch(benchmark::State& state, bool weighted) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto k = static_cast<std::size_t>(state.range(1));
  const vbucket::bucket_config config = v2_config();
  vbucket::run_stage stage{.name = "one", .config = config};
  if (weighted) {
    for (std::size_t s = 0; s < k; ++s)
      stage.draws.draws.push_back({vbucket::draw_kind::weight, static_cast<double>(k - s)});
    stage.draws.epoch_samples = n;
  }
  vbucket::run_plan run(run_sources(n, k), {stage}, {.seed = run_seed, .world = run_world});
  const vbucket::meta_table& one = *run_table(n, 100);
  const vbucket::opensora_v2_rule rule{};
  double run_s = 0.0, epoch_s = 0.0;
  std::uint64_t epoch = 1;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    run.start_epoch(epoch);
    benchmark::DoNotOptimize(run.batch(run_world - 1).rows.data());
    run_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::vector<vbucket::bucket_id> ids =
        vbucket::assign_all(config, one, rule, vbucket::fast_source(run_seed, epoch));
    vbucket::plan_options options;
    options.seed = run_seed;
    options.epoch = epoch;
    const vbucket::epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, options);
    const vbucket::epoch_schedule schedule = plan.deal(run_world);
    benchmark::DoNotOptimize(schedule.at(0, run_world - 1).indices.data());
    epoch_s += seconds_since(t0);
    ++epoch;
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["run_ms"] = 1e3 * run_s / it;
  state.counters["epoch_ms"] = 1e3 * epoch_s / it;
  state.counters["x_epoch"] = run_s / epoch_s;
  state.counters["drawn"] = static_cast<double>(run.drawn().size());
}

void plan_run(benchmark::State& state) { run_vs_epoch(state, false); }
void plan_run_weighted(benchmark::State& state) { run_vs_epoch(state, true); }

double cpu_seconds_since(std::clock_t t0) {
  return static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
}

/// The process's minor page faults and system CPU seconds so far.
struct kernel_use {
  double faults = 0.0, sys_s = 0.0;
  static kernel_use now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return {static_cast<double>(u.ru_minflt), static_cast<double>(u.ru_stime.tv_sec) +
                                                  1e-6 * static_cast<double>(u.ru_stime.tv_usec)};
  }
};

/// The v2 config with every probability below 1 lowered by a tenth: other buckets for some
/// samples, so a stage with it assigns every drawn sample again.
vbucket::bucket_config other_probabilities(const vbucket::bucket_config& c) {
  std::vector<vbucket::bucket_spec> specs;
  for (const vbucket::resolution_entry& r : c.resolutions())
    for (const vbucket::frames_entry& f : r.frames) {
      vbucket::bucket_spec b;
      b.resolution = r.info.name;
      b.frames = f.frames;
      b.p_resolution = f.p_resolution < 1.0 ? f.p_resolution * 0.9 : f.p_resolution;
      if (f.pair) b.p_frames = f.p_frames;
      if (f.batch_size > 0) b.batch_size = f.batch_size;
      specs.push_back(b);
    }
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

void plan_run_change(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool new_config = state.range(1) != 0;
  const vbucket::bucket_config config = v2_config();
  const auto sources = run_sources(n, 2);
  vbucket::run_stage s0{.name = "first", .config = config};
  // Stage 1: every batch size halved (at least 1), leftovers downgraded; with a new config,
  // other probabilities too.
  const vbucket::bucket_config base = new_config ? other_probabilities(config) : config;
  std::vector<std::int64_t> sizes = vbucket::pair_batch_sizes(base);
  for (auto& b : sizes)
    if (b > 1) b /= 2;
  vbucket::run_stage s1{.name = "second",
                        .config = vbucket::with_batch_sizes(base, sizes),
                        .batches = {.policy = vbucket::incomplete_policy::downgrade}};
  vbucket::run_plan probe(sources, {s0}, {.seed = run_seed, .world = run_world});
  const std::uint64_t mid = probe.steps_left() / 2;
  s1.from_step = mid;
  std::string saved;
  {
    vbucket::run_plan run(sources, {s0, s1}, {.seed = run_seed, .world = run_world});
    for (std::uint64_t s = 0; s + 1 < mid; ++s) run.advance();
    saved = run.state();
  }
  double load_s = 0.0, stage_s = 0.0, stage_cpu = 0.0, oom_s = 0.0, epoch_s = 0.0, epoch_cpu = 0.0;
  double stage_faults = 0.0, stage_sys = 0.0;
  const vbucket::meta_table& one = *run_table(n, 100);
  for (auto _ : state) {
    state.PauseTiming();
    vbucket::run_plan run(sources, {s0, s1}, {.seed = run_seed, .world = run_world});
    state.ResumeTiming();
    auto t0 = std::chrono::steady_clock::now();
    run.load(saved);
    load_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    const kernel_use k0 = kernel_use::now();
    run.advance();  // stage 1 begins: the rest of the epoch planned again
    stage_cpu += cpu_seconds_since(c0);
    const kernel_use k1 = kernel_use::now();
    stage_faults += k1.faults - k0.faults;
    stage_sys += k1.sys_s - k0.sys_s;
    stage_s += seconds_since(t0);
    if (run.stage() != 1) state.SkipWithError("the stage did not change");
    std::uint32_t failing = 0;  // a rank whose batch can be halved
    while (failing + 1 < run_world && run.batch(failing).size() < 2) ++failing;
    t0 = std::chrono::steady_clock::now();
    run.out_of_memory(std::span<const std::uint32_t>(&failing, 1));
    oom_s += seconds_since(t0);
    benchmark::DoNotOptimize(run.batch(0).rows.data());
    // The reference: one source's epoch plan of N rows.
    t0 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();
    const std::vector<vbucket::bucket_id> ids = vbucket::assign_all(
        config, one, vbucket::opensora_v2_rule{}, vbucket::fast_source(run_seed, 0));
    vbucket::plan_options options;
    options.seed = run_seed;
    const vbucket::epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, options);
    benchmark::DoNotOptimize(plan.deal(run_world).at(0, run_world - 1).indices.data());
    epoch_cpu += cpu_seconds_since(c1);
    epoch_s += seconds_since(t0);
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["load_ms"] = 1e3 * load_s / it;
  state.counters["stage_ms"] = 1e3 * stage_s / it;
  state.counters["stage_cpu_ms"] = 1e3 * stage_cpu / it;
  state.counters["stage_sys_ms"] = 1e3 * stage_sys / it;  // of it, the kernel's (page faults)
  state.counters["stage_faults"] = stage_faults / it;
  state.counters["oom_ms"] = 1e3 * oom_s / it;
  state.counters["epoch_ms"] = 1e3 * epoch_s / it;
  state.counters["epoch_cpu_ms"] = 1e3 * epoch_cpu / it;
  state.counters["x_epoch"] = stage_cpu / epoch_cpu;
}

[[maybe_unused]] const bool registered = [] {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("plan/run", plan_run)
      ->Args({1'000'000, 1})
      ->Args({1'000'000, 3})
      ->Args({10'000'000, 3})
      ->Unit(kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("plan/run_weighted", plan_run_weighted)
      ->Args({1'000'000, 3})
      ->Args({10'000'000, 3})
      ->Unit(kMillisecond)
      ->UseRealTime();
  // 10^8 needs about 6 GB; run it by name (--benchmark_filter=plan/run_change/100000000).
  benchmark::RegisterBenchmark("plan/run_change", plan_run_change)
      ->Args({10'000'000, 0})
      ->Args({10'000'000, 1})
      ->Args({100'000'000, 0})
      ->Args({100'000'000, 1})
      ->Unit(kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  return true;
}();

}  // namespace
