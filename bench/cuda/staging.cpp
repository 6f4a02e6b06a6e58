/// GPU benchmarks: host-to-device throughput of the staging ring against cudaMemcpyAsync's
/// peak from pinned memory measured in the same process, and the overlap of host production
/// (producer threads writing batches into slots) with the copies.
#include <benchmark/benchmark.h>

#include <chrono>   // std::chrono::steady_clock
#include <cstddef>  // std::byte, std::size_t
#include <cstdio>   // std::printf
#include <cstring>  // std::memset
#include <string>   // std::string
#include <thread>   // std::jthread
#include <vector>   // std::vector

#include "vbucket/cuda/pinned_backend.hpp"
#include "vbucket/load/staging.hpp"

namespace {

using vbucket::cuda::check;
using clock_type = std::chrono::steady_clock;
constexpr int copies_per_iteration = 16;

/// Seconds for `copies` cudaMemcpyAsync of `bytes` from one pinned buffer, back to back.
double raw_copy_seconds(std::size_t bytes, int copies) {
  vbucket::cuda::pinned_backend backend;
  std::byte* src = backend.allocate(bytes);
  std::memset(src, 1, bytes);
  vbucket::cuda::device_buffer dst(bytes);
  const auto t0 = clock_type::now();
  for (int i = 0; i < copies; ++i)
    check(cudaMemcpyAsync(dst.get(), src, bytes, cudaMemcpyHostToDevice, backend.stream()),
          "cudaMemcpyAsync");
  check(cudaStreamSynchronize(backend.stream()), "cudaStreamSynchronize");
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  backend.deallocate(src, bytes);
  return s;
}

/// Peak: cudaMemcpyAsync from pinned memory, `copies_per_iteration` copies per iteration.
void BM_memcpy_peak(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const double s = raw_copy_seconds(bytes, copies_per_iteration);
    state.SetIterationTime(s);
  }
  state.SetBytesProcessed(state.iterations() * copies_per_iteration *
                          static_cast<std::int64_t>(bytes));
}

/// The ring: acquire, submit, completion through events; the producer does not write (the
/// ring's own overhead against the raw copies). `of_peak` = ring bandwidth / raw bandwidth,
/// both measured in this function.
void BM_ring_h2d(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto slots = static_cast<std::size_t>(state.range(1));
  vbucket::cuda::pinned_backend backend;
  vbucket::cuda::device_buffer dst(bytes * slots);
  vbucket::staging_ring<vbucket::cuda::pinned_backend> ring(backend, {.slots = slots});
  ring.reserve(bytes, slots);
  double ring_seconds = 0, raw_seconds = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < copies_per_iteration; ++i) {
      auto s = ring.acquire(bytes);
      ring.submit(std::move(s), dst.as<std::byte>() + (static_cast<std::size_t>(i) % slots) * bytes,
                  bytes);
    }
    ring.drain();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(s);
    ring_seconds += s;
    raw_seconds += raw_copy_seconds(bytes, copies_per_iteration);
  }
  state.SetBytesProcessed(state.iterations() * copies_per_iteration *
                          static_cast<std::int64_t>(bytes));
  state.counters["of_peak"] = raw_seconds / ring_seconds;
}

/// Producers write each batch into its slot (a memset pass, standing in for decoding), then
/// submit. `overlap` = achieved rate / min(production rate, raw copy rate): 1.0 means the
/// slower of the two stages is never idle.
void BM_ring_overlap(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto producers = static_cast<std::size_t>(state.range(1));
  const auto slots = static_cast<std::size_t>(state.range(2));
  vbucket::cuda::pinned_backend backend;
  vbucket::cuda::device_buffer dst(bytes * slots);
  vbucket::staging_ring<vbucket::cuda::pinned_backend> ring(backend, {.slots = slots});
  ring.reserve(bytes, slots);
  const std::size_t batches = copies_per_iteration * producers;
  double total = 0, produce = 0, copy = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    {
      std::vector<std::jthread> threads;
      for (std::size_t p = 0; p < producers; ++p)
        threads.emplace_back([&, p] {
          for (int i = 0; i < copies_per_iteration; ++i) {
            auto s = ring.acquire(bytes);
            std::memset(s.data().data(), static_cast<int>(p + 1), bytes);
            ring.submit(std::move(s), dst.as<std::byte>() + (p % slots) * bytes, bytes);
          }
        });
    }
    ring.drain();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
    // Production alone (same threads, same pinned buffers, no copies).
    const auto t1 = clock_type::now();
    {
      std::vector<std::jthread> threads;
      for (std::size_t p = 0; p < producers; ++p)
        threads.emplace_back([&, p] {
          auto s2 = ring.acquire(bytes);
          for (int i = 0; i < copies_per_iteration; ++i)
            std::memset(s2.data().data(), static_cast<int>(p + 1), bytes);
        });
    }
    produce += std::chrono::duration<double>(clock_type::now() - t1).count();
    copy += raw_copy_seconds(bytes, static_cast<int>(batches));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(batches * bytes));
  const double slowest = produce > copy ? produce : copy;
  state.counters["overlap"] = slowest / total;
  state.counters["produce_s"] = produce / static_cast<double>(state.iterations());
  state.counters["copy_s"] = copy / static_cast<double>(state.iterations());
}

// 8 MiB ≈ a 360p 51-frame batch of 1 (102 frames × 360 × 640 × 3 bytes is 67 MiB).
BENCHMARK(BM_memcpy_peak)
    ->Arg(8 << 20)
    ->Arg(64 << 20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ring_h2d)
    ->Args({8 << 20, 2})
    ->Args({8 << 20, 4})
    ->Args({64 << 20, 4})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// Arguments: batch bytes, producer threads, ring slots. A slot is held from acquire (while the
// producer writes it) until its copy completes, so slots ≤ producers leaves the copy engine idle
// whenever every slot is being written.
BENCHMARK(BM_ring_overlap)
    ->Args({8 << 20, 2, 4})
    ->Args({8 << 20, 4, 4})
    ->Args({8 << 20, 4, 6})
    ->Args({8 << 20, 4, 8})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

void register_normalize_benchmarks();  // normalize.cu

int main(int argc, char** argv) {
  std::string why;
  if (!vbucket::cuda::device_available(&why)) {
    std::printf("vbucket_cuda_bench: no usable CUDA device (%s); nothing to measure\n",
                why.c_str());
    return 0;
  }
  register_normalize_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
