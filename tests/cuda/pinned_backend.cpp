/// Tests of vbucket/cuda/pinned_backend.hpp: the staging ring over pinned memory and real copies to
/// the GPU: many producers, every batch read back from the device and compared; CUDA errors surface
/// as vbucket::error.
#include <doctest/doctest.h>

#include <cstddef>  // std::byte, std::size_t
#include <cstdint>  // std::uint8_t
#include <random>   // std::mt19937_64
#include <string>   // std::string
#include <thread>   // std::jthread
#include <vector>   // std::vector

#include "vbucket/cuda/pinned_backend.hpp"
#include "vbucket/load/staging.hpp"

namespace {

std::uint8_t pattern(std::size_t batch, std::size_t i) {
  return static_cast<std::uint8_t>(batch * 31 + i * 7 + (i >> 9));
}

}  // namespace

TEST_CASE("cuda staging: pinned ring, 4 producer threads, every batch arrives on the device") {
  vbucket::cuda::pinned_backend backend;
  constexpr std::size_t producers = 4, per_producer = 40, max_batch = 1 << 20;
  const vbucket::staging_options options{.slots = 3, .max_bytes = 6 << 20};
  std::vector<std::size_t> sizes(producers * per_producer);
  std::mt19937_64 rng(11);
  for (auto& n : sizes) n = 1 + rng() % max_batch;
  vbucket::cuda::device_buffer device(sizes.size() * max_batch);
  {
    vbucket::staging_ring<vbucket::cuda::pinned_backend> ring(backend, options);
    std::vector<std::jthread> threads;
    for (std::size_t p = 0; p < producers; ++p)
      threads.emplace_back([&, p] {
        for (std::size_t k = 0; k < per_producer; ++k) {
          const std::size_t b = p * per_producer + k;
          auto s = ring.acquire(sizes[b]);
          auto* out = reinterpret_cast<std::uint8_t*>(s.data().data());
          for (std::size_t i = 0; i < sizes[b]; ++i) out[i] = pattern(b, i);
          ring.submit(std::move(s), device.as<std::byte>() + b * max_batch, sizes[b]);
        }
      });
    threads.clear();  // joins
    ring.drain();
    const auto st = ring.stats();
    CHECK(st.completed == sizes.size());
    CHECK(st.peak_bytes <= options.max_bytes);
    CHECK(st.peak_in_flight <= options.slots);
  }
  std::vector<std::uint8_t> back(device.size());
  vbucket::cuda::check(cudaMemcpy(back.data(), device.get(), back.size(), cudaMemcpyDeviceToHost),
                       "cudaMemcpy");
  std::size_t wrong = 0;
  for (std::size_t b = 0; b < sizes.size(); ++b)
    for (std::size_t i = 0; i < sizes[b]; ++i) wrong += back[b * max_batch + i] != pattern(b, i);
  CHECK(wrong == 0);
}

TEST_CASE("cuda staging: reserve_for-sized pool without growth, and CUDA errors as messages") {
  vbucket::cuda::pinned_backend backend;
  vbucket::staging_ring<vbucket::cuda::pinned_backend> ring(backend, {.slots = 2, .grow = false});
  ring.reserve(3 << 20, 2);
  CHECK(ring.stats().buffers == 2);
  {
    auto a = ring.acquire(3 << 20);
    auto b = ring.acquire(1000);
    CHECK(a.data().size() >= (3u << 20));
  }
  CHECK(ring.stats().allocations == 2);
  // An absurd pinned allocation fails with CUDA's message, through the ring.
  vbucket::staging_ring<vbucket::cuda::pinned_backend> greedy(backend, {.slots = 1});
  std::string message;
  try {
    (void)greedy.acquire(std::size_t{1} << 50);
  } catch (const vbucket::error& e) {
    message = e.what();
  }
  CHECK(message.rfind("CUDA: cudaHostAlloc(", 0) == 0);
  CHECK(greedy.stats().bytes_allocated == 0);
}
