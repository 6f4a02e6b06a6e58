/// Staging ring on the CPU (host backend): the ring's cost per batch (acquire + submit +
/// completion) against a plain memcpy of the same bytes, in the same process. The GPU figures
/// are in bench/cuda/ (vbucket_cuda_bench).
#include <benchmark/benchmark.h>

#include <cstddef>  // std::byte, std::size_t
#include <cstring>  // std::memcpy, std::memset
#include <vector>   // std::vector

#include "vbucket/load/staging.hpp"

namespace {

/// Reference: memcpy of `bytes` from one host buffer into another.
void BM_staging_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  vbucket::host_backend backend;  // the ring's source alignment
  std::byte* src = backend.allocate(bytes);
  std::memset(src, 1, bytes);
  std::vector<std::byte> dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src, bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  backend.deallocate(src, bytes);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

/// The same bytes through the ring (synchronous host copies, completion thread, 4 slots).
void BM_staging_ring(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  ring.reserve(bytes, 4);
  std::vector<std::byte> dst(bytes);
  for (auto _ : state) {
    auto s = ring.acquire(bytes);
    ring.submit(std::move(s), dst.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  ring.drain();
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

BENCHMARK(BM_staging_memcpy)->Arg(4 << 10)->Arg(8 << 20);
BENCHMARK(BM_staging_ring)->Arg(4 << 10)->Arg(8 << 20);

}  // namespace
