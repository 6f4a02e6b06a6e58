/// GPU benchmark of the fused normalisation + layout kernel: uint8 THWC in, float32 or
/// bfloat16 CTHW out, on a batch of eight 33×192×336 clips. Reports bytes moved (read +
/// written) per second, to set against the device's memory bandwidth.
#include <benchmark/benchmark.h>

#include <cstdint>  // std::uint8_t

#include "vbucket/cuda/normalize.cuh"

namespace {

template <class Out>
void BM_normalize(benchmark::State& state) {
  const vbucket::batch_shape shape{.batch = 8, .frames = 33, .height = 192, .width = 336};
  const std::size_t n = shape.elements();
  vbucket::cuda::device_buffer in(n), out(n * sizeof(Out));
  vbucket::cuda::check(cudaMemset(in.get(), 7, n), "cudaMemset");
  vbucket::cuda::stream s;
  cudaEvent_t start = nullptr, stop = nullptr;
  vbucket::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  vbucket::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  for (auto _ : state) {
    vbucket::cuda::check(cudaEventRecord(start, s.get()), "cudaEventRecord");
    vbucket::cuda::normalize_thwc_to_cthw<Out>(in.as<std::uint8_t>(), out.as<Out>(), shape, {},
                                               s.get());
    vbucket::cuda::check(cudaEventRecord(stop, s.get()), "cudaEventRecord");
    vbucket::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    vbucket::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * (1 + sizeof(Out))));
}

}  // namespace

void register_normalize_benchmarks() {
  benchmark::RegisterBenchmark("BM_normalize/float32", BM_normalize<float>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_normalize/bfloat16", BM_normalize<__nv_bfloat16>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}
