/// The parallel layout's figure: a simulator that replays an epoch's steps under a time model
/// and reports the predicted step time and GPU idle share of (a) one sequence-parallel size for
/// every bucket, Open-Sora 2.0's way (the config's batch sizes; stage 1 runs sp 1, stage 2
/// `sp_size=4`), and (b) vbucket's per-bucket layout (`choose_layouts` + `group_plan`), on
/// Open-Sora 2.0's stage-1 and stage-2 bucket configs (tests/data/config_opensora_v2_stage{1,2}
/// .json, from configs/diffusion/train/stage{1,2}.py) over synthetic web-video metadata
/// (bench/synthetic.hpp, 200 000 samples), worlds 8, 64 and 512; and what the layout costs to
/// plan against today's epoch plan in the same binary.
///
/// Where the model's numbers come from (a user fits their own with `profile_time_model`, the
/// PROFILE.csv that `vbucket fit-bs` reads, tokens,batch_size,oom,peak_memory_gib,step_seconds):
///  - compute (sp = 1): t1 fitted by least squares to the step times Open-Sora 2.0 publishes
///    beside its stage-1 256px buckets (configs/diffusion/train/stage1.py: 1 frame × 45:
///    6.22 s, 33 × 12: 7.02 s, 65 × 6: 6.79 s, 97 × 4: 6.84 s, 129 × 3: 7.48 s; 256 tokens a
///    latent frame), with the fixed part t0 = 0.35 s, the median of what stage2.py's breakdowns
///    leave after encode_video + encode_text + forward + backward (0.26, 0.45, 0.22, 1.54 s),
///    and the attention term t2 = 7e-9 s per token², derived: 16 · hidden FLOPs per token pair
///    per block (QKᵀ and AV, forward, backward, checkpoint recompute) · 57 blocks at 400 TFLOP/s
///    (an H200 at 40 % of its bf16 peak). (The five times cannot give t0 or t2 themselves: they
///    were tuned to be equal and span 256 to 8448 tokens; fitting all three gives t0 = 5.9 s,
///    fitting t1 and t2 a negative t2.)
///  - memory: the configs' own batch sizes, which Open-Sora tunes to fill memory (stage2.py
///    publishes peaks of 125 to 135 GB beside them, at sp_size=4; stage 1 runs sp 1): a pair's
///    micro-batch at sp is at most ⌊batch size · sp / the stage's sp⌋
///    (`layout_options::config_fills_memory_at_sp`; activations per rank grow as batch / sp).
///    (A token-based model fitted to those four peaks is no use: each batch size was tuned to
///    fill memory, so the peaks are nearly equal and do not identify the per-token terms.)
///  - communication: not published; derived for ring attention on the model of
///    configs/diffusion/train/image.py (hidden 3072, 19 + 38 blocks) over NVLink 4 (450 GB/s a
///    direction, at 70 %): K and V of every token cross (sp − 1)/sp of the ring per block, four
///    times with gradient checkpointing (forward, recompute, and dK, dV back): 4 · 2 · 3072 ·
///    2 bytes · 57 = 2.8 MB a token, so κ = 8.9 µs per token unhidden by compute; λ = 57 blocks ·
///    4 passes · 15 µs = 3.4 ms per micro-step per ring hop.
///
/// Counters of `layout/sim/<stage>/<world>`: `step_s_a`, `step_s_b` (mean predicted step time),
/// `idle_a`, `idle_b` (1 − busy GPU-seconds / (world · wall)), `samples_s_a`, `samples_s_b`
/// (distinct samples per second), `speedup` (b over a, samples per second), `target_s` (b's
/// target step time), `sp1`, `sp2`, `sp4`, `sp8` (b's share of batches at each sp),
/// `bound_speedup` (the most any layout could give over a under this model: every GPU busy and
/// every sample at its cheapest feasible sp, no fixed step time, no micro-step latency).
/// `layout/plan_cost/<N>`: `epoch_ns` (per sample: assignment + make_epoch_plan + deal to 64,
/// today's plan), `layout_ns` (assignment + choose_layouts + make_epoch_plan + group_plan +
/// deal to 64) and `ratio` (layout / epoch), both timed in every iteration, each first every
/// other iteration.
///
///     ./vbucket_bench --benchmark_filter='layout/'

#include <benchmark/benchmark.h>

#if defined(VBUCKET_BENCH_HAS_EIGEN) && VBUCKET_BENCH_HAS_EIGEN

#include <algorithm>  // std::min
#include <chrono>     // std::chrono::steady_clock
#include <cstdint>    // std::uint64_t, std::int64_t
#include <limits>     // std::numeric_limits
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "bench_support.hpp"
#include "synthetic.hpp"
#include "vbucket/eigen/layout_fit.hpp"  // detail::scaled_least_squares
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group_plan.hpp"
#include "vbucket/plan/parallel_layout.hpp"
#include "vbucket/vbucket.hpp"

namespace {

using vbucket::bench::data_path;

/// The model's options from the published figures (see the top of this file); the memory
/// bound is the config's own batch sizes, which fill memory at `filled_at_sp`.
vbucket::layout_options published_options(std::int64_t filled_at_sp) {
  // Stage 1's (frames, batch size, seconds) at 256px, the fixed part of a step and the
  // attention term (see the top of this file); t1 is fitted.
  const double points[5][3] = {
      {1, 45, 6.22}, {33, 12, 7.02}, {65, 6, 6.79}, {97, 4, 6.84}, {129, 3, 7.48}};
  constexpr double fixed = 0.35, quadratic = 7e-9;
  Eigen::MatrixXd x(5, 1);
  Eigen::VectorXd y(5);
  for (Eigen::Index i = 0; i < 5; ++i) {
    const auto* p = points[i];
    const auto t =
        static_cast<double>(vbucket::token_count(static_cast<std::int64_t>(p[0]), 256, 256));
    x(i, 0) = p[1] * t;
    y(i) = p[2] - fixed - p[1] * quadratic * t * t;
  }
  const Eigen::VectorXd c = vbucket::eigen::detail::scaled_least_squares(x, y, "stage-1 times");
  vbucket::layout_options o;
  o.time.compute = {fixed, c(0), quadratic};
  o.config_fills_memory_at_sp = filled_at_sp;
  o.time.comm_per_token = 8.9e-6;
  o.time.comm_per_micro_step = 3.4e-3;
  o.sp_sizes = {1, 2, 4, 8};
  o.remainder = vbucket::sequence_remainder::pad;
  o.max_accumulation = 16;
  return o;
}

const vbucket::meta_table& samples() {
  static const vbucket::meta_table t = vbucket::bench::synthetic_table(200'000);
  return t;
}

struct replay {
  double wall = 0.0;  // Σ step time
  double busy = 0.0;  // Σ sp · group time
  std::uint64_t steps = 0;
  std::uint64_t samples = 0;
  std::vector<std::uint64_t> per_sp = std::vector<std::uint64_t>(9, 0);
};

/// Replays an epoch of `layouts` at `world`: every step's groups, the step as long as its
/// slowest.
replay simulate(const std::vector<vbucket::bucket_id>& ids, const vbucket::layout_table& layouts,
                std::uint32_t world) {
  const vbucket::group_plan plan(
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), layouts.config(),
                               {.seed = 42, .epoch = 0}),
      layouts);
  const vbucket::group_schedule s = plan.deal(world);
  replay r;
  r.steps = s.steps();
  for (std::uint64_t k = 0; k < s.steps(); ++k) {
    r.wall += s.step_seconds(k);
    for (const vbucket::step_group& g : s.groups(k)) {
      r.busy += static_cast<double>(g.sp) * s.group_seconds(g);
      if (g.repeat) continue;
      ++r.per_sp[g.sp];
    }
  }
  for (const vbucket::plan_bucket& b : plan.plan().buckets()) r.samples += b.samples;
  return r;
}

void layout_sim(benchmark::State& state) {
  const bool stage2 = state.range(0) == 2;
  const auto world = static_cast<std::uint32_t>(state.range(1));
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path(stage2 ? "config_opensora_v2_stage2.json" : "config_opensora_v2_stage1.json"),
      vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{24.0};  // image.py: fps_max=24
  const std::vector<vbucket::bucket_id> ids =
      vbucket::assign_all(config, samples(), rule, vbucket::fast_source(42, 0));
  const vbucket::layout_options o = published_options(stage2 ? 4 : 1);
  replay a, b;
  double target = 0.0;
  for (auto _ : state) {
    a = simulate(ids, vbucket::uniform_layouts(config, stage2 ? 4 : 1, o), world);
    const vbucket::layout_table chosen = vbucket::choose_layouts(config, o);
    target = chosen.target_seconds();
    b = simulate(ids, chosen, world);
  }
  const double w = static_cast<double>(world);
  // The bound no layout passes under this model: every GPU busy, every sample at the sp that
  // costs it the fewest GPU-seconds among those whose micro-batch of one fits (compute plus
  // its communication; no fixed step time, no micro-step latency, no pads).
  double ideal_gpu_s = 0.0;
  {
    const vbucket::epoch_plan plan = vbucket::make_epoch_plan(
        std::span<const vbucket::bucket_id>(ids), config, {.seed = 42, .epoch = 0});
    const auto& res = config.resolutions();
    std::size_t pair = 0;
    std::vector<double> cheapest;
    for (std::size_t r = 0; r < res.size(); ++r)
      for (std::size_t k = 0; k < res[r].frames.size(); ++k, ++pair) {
        double best = std::numeric_limits<double>::infinity();
        for (const std::int64_t sp : o.sp_sizes) {
          const auto tokens = vbucket::detail::pair_tokens(config, r, k, sp, o, nullptr);
          if (!tokens ||
              vbucket::detail::largest_micro_batch(
                  o, *tokens, sp, vbucket::detail::config_cap(config, r, k, sp, o, 1)) < 1)
            continue;
          best = std::min(best, static_cast<double>(sp) *
                                    (o.time.predict(*tokens, 1, sp, 0) - o.time.compute.fixed));
        }
        cheapest.push_back(best);
      }
    for (std::size_t bk = 0; bk < plan.num_buckets(); ++bk) {
      const vbucket::plan_bucket& pb = plan.bucket(static_cast<vbucket::bucket_id>(bk));
      if (pb.samples == 0) continue;
      const vbucket::bucket_key key = config.key(static_cast<vbucket::bucket_id>(bk));
      std::size_t first = 0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(key.resolution); ++r)
        first += res[r].frames.size();
      ideal_gpu_s += static_cast<double>(pb.samples) *
                     cheapest[first + static_cast<std::size_t>(key.frames_index)];
    }
  }
  state.counters["bound_speedup"] = (static_cast<double>(a.samples) * w / ideal_gpu_s) /
                                    (static_cast<double>(a.samples) / a.wall);
  state.counters["step_s_a"] = a.wall / static_cast<double>(a.steps);
  state.counters["step_s_b"] = b.wall / static_cast<double>(b.steps);
  state.counters["idle_a"] = 1.0 - a.busy / (w * a.wall);
  state.counters["idle_b"] = 1.0 - b.busy / (w * b.wall);
  state.counters["samples_s_a"] = static_cast<double>(a.samples) / a.wall;
  state.counters["samples_s_b"] = static_cast<double>(b.samples) / b.wall;
  state.counters["speedup"] =
      (static_cast<double>(b.samples) / b.wall) / (static_cast<double>(a.samples) / a.wall);
  state.counters["target_s"] = target;
  double total = 0.0;
  for (const auto n : b.per_sp) total += static_cast<double>(n);
  for (const int sp : {1, 2, 4, 8})
    state.counters["sp" + std::to_string(sp)] =
        static_cast<double>(b.per_sp[static_cast<std::size_t>(sp)]) / total;
}

void layout_plan_cost(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  static const vbucket::meta_table table = vbucket::bench::synthetic_table(n);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2_stage2.json"), vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{24.0};
  const vbucket::layout_options o = published_options(4);
  constexpr std::uint32_t world = 64;
  double epoch_s = 0.0, layout_s = 0.0;
  std::uint64_t epoch = 0;
  const auto since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto today = [&] {
    const auto ids = vbucket::assign_all(config, table, rule, vbucket::fast_source(1, epoch));
    const vbucket::epoch_plan plan = vbucket::make_epoch_plan(
        std::span<const vbucket::bucket_id>(ids), config, {.seed = 1, .epoch = epoch});
    const vbucket::epoch_schedule s = plan.deal(world);
    benchmark::DoNotOptimize(s.at(0, world - 1).indices.data());
  };
  const auto layout = [&] {
    const auto ids = vbucket::assign_all(config, table, rule, vbucket::fast_source(1, epoch));
    const vbucket::layout_table layouts = vbucket::choose_layouts(config, o);
    const vbucket::group_plan plan(
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), layouts.config(),
                                 {.seed = 1, .epoch = epoch}),
        layouts);
    const vbucket::group_schedule s = plan.deal(world);
    benchmark::DoNotOptimize(s.work(0, world - 1).batch.indices.data());
  };
  for (auto _ : state) {
    // Each goes first every other iteration, so neither inherits the other's warm pages.
    for (int k = 0; k < 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      if ((k == 0) == (epoch % 2 == 0)) {
        today();
        epoch_s += since(t0);
      } else {
        layout();
        layout_s += since(t0);
      }
    }
    ++epoch;
  }
  const double per = 1e9 / static_cast<double>(state.iterations()) / static_cast<double>(n);
  state.counters["epoch_ns"] = epoch_s * per;
  state.counters["layout_ns"] = layout_s * per;
  state.counters["ratio"] = layout_s / epoch_s;
}

}  // namespace

BENCHMARK(layout_sim)
    ->Name("layout/sim")
    ->ArgsProduct({{1, 2}, {8, 64, 512}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(layout_plan_cost)
    ->Name("layout/plan_cost")
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

#endif  // VBUCKET_BENCH_HAS_EIGEN
