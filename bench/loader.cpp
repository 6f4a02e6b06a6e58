/// The loader end to end on 2 workers over an in-memory decoder, one epoch per iteration: what a
/// float32 CTHW batch normalised on the worker threads costs next to the uint8 THWC batch the
/// decoder writes, and what it cost when the trainer's thread converted each batch instead.
///
///   loader/epoch/u8/S             uint8 THWC, as decoded
///   loader/epoch/f32_cthw/S       float32 CTHW, normalised per clip on the workers
///   loader/epoch/bf16_cthw/S      bfloat16 CTHW, the same
///   loader/epoch/f32_cthw_on_trainer/S   uint8 from the loader, normalize_thwc_to_cthw on the
///                                 trainer's thread (what a trainer did before)
///   loader/epoch/packed_u8/S      the same samples as a packed schedule (`make_packed_plan`,
///                                 budget = 4 samples' cost: the same 12 batches of 4), one
///                                 flat slot a batch with per-clip offsets and cu_seqlens; its
///                                 ratio to u8 is the packed path's overhead
///   loader/epoch/packed_f32_cthw/S   the same, float32 CTHW (against f32_cthw)
///
/// The decoder stands in for FFmpeg's last stage, the YUV 4:2:0 → RGB conversion and an S×S
/// box downscale to the bucket's H×W (S = 2: a 512×512 source for a 256×256 bucket), with
/// the entropy decoding left out: a lower bound on a real decoder's work per pixel, so the
/// conversion's share here is an upper bound of its share with real files.
///
///   ./build-rel/bench/vbucket_bench --benchmark_filter=loader/ --benchmark_min_time=1
///       --benchmark_repetitions=15 --benchmark_enable_random_interleaving=true
///       --benchmark_report_aggregates_only=true   (one line)
#include <benchmark/benchmark.h>

#include <algorithm>  // std::clamp
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint8_t, std::uint32_t, std::int64_t
#include <optional>   // std::optional
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/load/loader.hpp"
#include "vbucket/load/normalize.hpp"
#include "vbucket/load/staging.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_layout.hpp"
#include "vbucket/plan/packed_plan.hpp"

namespace {

constexpr std::int64_t side = 256;      // the bucket's H and W
constexpr std::int64_t frames = 16;     // the bucket's T
constexpr std::int64_t batch_size = 4;  // per batch
constexpr std::uint32_t samples = 48;   // 12 batches an epoch
constexpr unsigned workers = 2;

/// YUV 4:2:0 frames in memory (a smooth gradient with noise, so nothing is constant), converted
/// to RGB (BT.601 limited range, fixed point, as swscale does) and box-downscaled by `scale`.
class synthetic_decoder {
 public:
  explicit synthetic_decoder(int scale)
      : scale_(scale), src_w_(side * scale + frames), src_h_(side * scale) {
    luma_.resize(static_cast<std::size_t>(src_w_ * src_h_));
    chroma_u_.resize(static_cast<std::size_t>((src_w_ / 2) * (src_h_ / 2)));
    chroma_v_.resize(chroma_u_.size());
    std::uint32_t x = 12345;
    const auto noise = [&] {
      x = x * 1664525u + 1013904223u;
      return static_cast<int>(x >> 28);
    };
    for (std::int64_t r = 0; r < src_h_; ++r)
      for (std::int64_t c = 0; c < src_w_; ++c)
        luma_[static_cast<std::size_t>(r * src_w_ + c)] =
            static_cast<std::uint8_t>(16 + (r + c) % 200 + noise());
    for (std::size_t i = 0; i < chroma_u_.size(); ++i) {
      chroma_u_[i] = static_cast<std::uint8_t>(100 + i % 56 + static_cast<std::size_t>(noise()));
      chroma_v_[i] = static_cast<std::uint8_t>(90 + i % 70 + static_cast<std::size_t>(noise()));
    }
  }

  std::optional<std::string> decode(const vbucket::clip_task& t,
                                    std::span<std::uint8_t> out) const {
    if (t.height > side || t.width > side || out.size() != t.bytes()) return "bad task";
    const auto plane = static_cast<std::size_t>(t.frames * t.height * t.width);
    const int s = scale_;
    const int area = s * s;
    for (std::int64_t f = 0; f < t.frames; ++f) {
      // Each frame reads a window shifted by the sample, the crop seed and the frame.
      const std::int64_t shift = static_cast<std::int64_t>((t.seed + t.sample) % 8) + f;
      for (std::int64_t r = 0; r < t.height; ++r) {
        const std::uint8_t* y0 = luma_.data() + (r * s) * src_w_ + shift;
        const std::uint8_t* u = chroma_u_.data() + ((r * s) / 2) * (src_w_ / 2) + shift / 2;
        const std::uint8_t* v = chroma_v_.data() + ((r * s) / 2) * (src_w_ / 2) + shift / 2;
        for (std::int64_t c = 0; c < t.width; ++c) {
          int sum = 0;
          for (int dy = 0; dy < s; ++dy)
            for (int dx = 0; dx < s; ++dx) sum += y0[dy * src_w_ + c * s + dx];
          const int yy = sum / area - 16;
          const int cu = u[(c * s) / 2] - 128;
          const int cv = v[(c * s) / 2] - 128;
          const int red = std::clamp((298 * yy + 409 * cv + 128) >> 8, 0, 255);
          const int green = std::clamp((298 * yy - 100 * cu - 208 * cv + 128) >> 8, 0, 255);
          const int blue = std::clamp((298 * yy + 516 * cu + 128) >> 8, 0, 255);
          const auto p = static_cast<std::size_t>((f * t.height + r) * t.width + c);
          if (t.layout == vbucket::clip_layout::thwc) {
            out[3 * p] = static_cast<std::uint8_t>(red);
            out[3 * p + 1] = static_cast<std::uint8_t>(green);
            out[3 * p + 2] = static_cast<std::uint8_t>(blue);
          } else {
            out[p] = static_cast<std::uint8_t>(red);
            out[plane + p] = static_cast<std::uint8_t>(green);
            out[2 * plane + p] = static_cast<std::uint8_t>(blue);
          }
        }
      }
    }
    return std::nullopt;
  }

 private:
  int scale_;
  std::int64_t src_w_, src_h_;
  std::vector<std::uint8_t> luma_, chroma_u_, chroma_v_;
};
static_assert(vbucket::clip_decoder<const synthetic_decoder>);

/// One bucket (256×256, 16 frames, batch 4).
vbucket::bucket_config make_config() {
  vbucket::user_tables tables;
  tables.add("256", side * side,
             vbucket::aspect_table({{"1:1", 1.0, static_cast<int>(side), static_cast<int>(side)}}));
  return vbucket::bucket_config(
      std::vector<vbucket::bucket_spec>{{"256", frames, 1.0, {}, batch_size}}, tables);
}

/// An epoch of `samples` samples in the bucket.
vbucket::epoch_plan make_plan() {
  const std::vector<vbucket::bucket_id> ids(samples, 0);
  return vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), make_config(),
                                  {.seed = 1, .epoch = 0});
}

/// The same samples packed to a budget of `batch_size` samples' cost (the same batches).
vbucket::packed_plan make_packed() {
  const vbucket::bucket_config config = make_config();
  const std::vector<vbucket::bucket_id> ids(samples, 0);
  const double one = vbucket::latent_tokens_cost{}(config, 0, 1);
  return vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config,
                                   {.seed = 1, .epoch = 0, .token_budget = one * batch_size});
}

enum class mode { u8, f32_cthw, bf16_cthw, f32_cthw_on_trainer };

/// One epoch per iteration over the packed plan, as `run_epochs` over the fixed one.
void run_packed_epochs(benchmark::State& state, vbucket::element_type element) {
  const synthetic_decoder decoder(static_cast<int>(state.range(0)));
  const auto plan = make_packed();
  const auto schedule = plan.deal(1);
  const vbucket::clip_layout layout = element == vbucket::element_type::u8
                                          ? vbucket::clip_layout::thwc
                                          : vbucket::clip_layout::cthw;
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  ring.reserve(vbucket::max_packed_batch_bytes(plan, vbucket::element_size(element)), 4);
  std::uint64_t clips = 0, batches = 0;
  const auto epoch = [&] {
    vbucket::loader loader(
        schedule, 0, decoder, ring,
        {.workers = workers, .prefetch = 2, .layout = layout, .element = element});
    for (auto& b : loader) {
      benchmark::DoNotOptimize(b.tensor.view.data);
      benchmark::DoNotOptimize(b.packed->cu_seqlens.data());
      clips += b.samples.size();
      ++batches;
    }
  };
  epoch();
  state.counters["batches"] = static_cast<double>(batches);  // per epoch: 12, as the fixed plan
  clips = 0;
  for (auto _ : state) epoch();
  state.counters["clips/s"] =
      benchmark::Counter(static_cast<double>(clips), benchmark::Counter::kIsRate);
}

void run_epochs(benchmark::State& state, mode m) {
  const synthetic_decoder decoder(static_cast<int>(state.range(0)));
  const auto plan = make_plan();
  const auto schedule = plan.deal(1);
  const vbucket::element_type element = m == mode::f32_cthw    ? vbucket::element_type::f32
                                        : m == mode::bf16_cthw ? vbucket::element_type::bf16
                                                               : vbucket::element_type::u8;
  const vbucket::clip_layout layout = element == vbucket::element_type::u8
                                          ? vbucket::clip_layout::thwc
                                          : vbucket::clip_layout::cthw;
  const vbucket::batch_shape shape{batch_size, frames, side, side};
  const std::size_t values = shape.elements();
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  ring.reserve(values * vbucket::element_size(element), 4);
  std::vector<float> on_trainer(m == mode::f32_cthw_on_trainer ? values : 0);
  std::uint64_t clips = 0;
  const auto epoch = [&] {
    vbucket::loader loader(
        schedule, 0, decoder, ring,
        {.workers = workers, .prefetch = 2, .layout = layout, .element = element});
    for (auto& b : loader) {
      if (m == mode::f32_cthw_on_trainer) {
        vbucket::normalize_thwc_to_cthw<float>(b.tensor.bytes(), on_trainer, shape);
        benchmark::DoNotOptimize(on_trainer.data());
      }
      benchmark::DoNotOptimize(b.tensor.view.data);
      clips += b.samples.size();
    }
  };
  epoch();  // untimed: the first touch of the slots' pages is not a steady-state cost
  clips = 0;
  for (auto _ : state) epoch();
  state.counters["clips/s"] =
      benchmark::Counter(static_cast<double>(clips), benchmark::Counter::kIsRate);
}

void BM_loader_u8(benchmark::State& s) { run_epochs(s, mode::u8); }
void BM_loader_f32_cthw(benchmark::State& s) { run_epochs(s, mode::f32_cthw); }
void BM_loader_bf16_cthw(benchmark::State& s) { run_epochs(s, mode::bf16_cthw); }
void BM_loader_f32_cthw_on_trainer(benchmark::State& s) {
  run_epochs(s, mode::f32_cthw_on_trainer);
}
void BM_loader_packed_u8(benchmark::State& s) { run_packed_epochs(s, vbucket::element_type::u8); }
void BM_loader_packed_f32_cthw(benchmark::State& s) {
  run_packed_epochs(s, vbucket::element_type::f32);
}

BENCHMARK(BM_loader_u8)
    ->Name("loader/epoch/u8")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_loader_f32_cthw)
    ->Name("loader/epoch/f32_cthw")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_loader_bf16_cthw)
    ->Name("loader/epoch/bf16_cthw")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_loader_f32_cthw_on_trainer)
    ->Name("loader/epoch/f32_cthw_on_trainer")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_loader_packed_u8)
    ->Name("loader/epoch/packed_u8")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_loader_packed_f32_cthw)
    ->Name("loader/epoch/packed_f32_cthw")
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
