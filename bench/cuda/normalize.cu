/// GPU benchmark of the fused normalisation + layout kernel: uint8 THWC in, float32 or
/// bfloat16 CTHW out, on a batch of eight 33×192×336 clips. Reports bytes moved (read +
/// written) per second, and `of_copy`: the time of a device-to-device cudaMemcpyAsync moving the
/// same bytes (read + written) over the kernel's time, measured in the same run (1.0 = the
/// kernel runs at copy bandwidth).
#include <benchmark/benchmark.h>

#include <cstdint>  // std::uint8_t

#include "vbucket/cuda/normalize.cuh"

namespace {

/// `offset` (elements) places the output at an address the fast path refuses, so that the
/// general path is measured on the same data.
template <class Out, std::size_t offset>
void BM_normalize(benchmark::State& state) {
  const vbucket::batch_shape shape{.batch = 8, .frames = 33, .height = 192, .width = 336};
  const std::size_t n = shape.elements();
  vbucket::cuda::device_buffer in(n), out((n + offset) * sizeof(Out));
  vbucket::cuda::check(cudaMemset(in.get(), 7, n), "cudaMemset");
  vbucket::cuda::stream s;
  cudaEvent_t start = nullptr, stop = nullptr;
  vbucket::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  vbucket::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  // The reference: a copy that reads and writes as many bytes as the kernel does.
  const std::size_t copy_bytes = n * (1 + sizeof(Out)) / 2;
  vbucket::cuda::device_buffer copy_from(copy_bytes), copy_to(copy_bytes);
  double kernel_s = 0, copy_s = 0;
  for (auto _ : state) {
    vbucket::cuda::check(cudaEventRecord(start, s.get()), "cudaEventRecord");
    vbucket::cuda::check(cudaMemcpyAsync(copy_to.get(), copy_from.get(), copy_bytes,
                                         cudaMemcpyDeviceToDevice, s.get()),
                         "cudaMemcpyAsync");
    vbucket::cuda::check(cudaEventRecord(stop, s.get()), "cudaEventRecord");
    vbucket::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float copy_ms = 0;
    vbucket::cuda::check(cudaEventElapsedTime(&copy_ms, start, stop), "cudaEventElapsedTime");
    copy_s += static_cast<double>(copy_ms) / 1e3;
    vbucket::cuda::check(cudaEventRecord(start, s.get()), "cudaEventRecord");
    vbucket::cuda::normalize_thwc_to_cthw<Out>(in.as<std::uint8_t>(), out.as<Out>() + offset, shape,
                                               {}, s.get());
    vbucket::cuda::check(cudaEventRecord(stop, s.get()), "cudaEventRecord");
    vbucket::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    vbucket::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
    kernel_s += static_cast<double>(ms) / 1e3;
  }
  state.counters["of_copy"] = copy_s / kernel_s;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * (1 + sizeof(Out))));
}

}  // namespace

void register_normalize_benchmarks() {
  benchmark::RegisterBenchmark("BM_normalize/float32", BM_normalize<float, 0>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_normalize/bfloat16", BM_normalize<__nv_bfloat16, 0>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_normalize/float32/general_path", BM_normalize<float, 1>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_normalize/bfloat16/general_path", BM_normalize<__nv_bfloat16, 1>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}
