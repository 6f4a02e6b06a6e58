#pragma once
/// Counter-based keyed randomness for the epoch planner: every draw is a pure function of a
/// 64-bit stream key and a counter (SplitMix64's mix64, as `fast_source`), so any rank or
/// thread computes any shuffle alone and gets the same answer.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <span>       // std::span
#include <utility>    // std::swap

#include "vbucket/base/random.hpp"  // detail::mix64, detail::golden_gamma
#include "vbucket/detail/u128.hpp"

namespace vbucket::detail {

/// Domains keep the planner's streams apart from each other and from `fast_source`'s.
inline constexpr std::uint64_t plan_domain_bucket = 0x243f6a8885a308d3ULL;
inline constexpr std::uint64_t plan_domain_insert = 0x13198a2e03707344ULL;
inline constexpr std::uint64_t plan_domain_order = 0xa4093822299f31d0ULL;
inline constexpr std::uint64_t plan_domain_chunks = 0x082efa98ec4e6c89ULL;

/// The planner's key for (seed, epoch): distinct epochs of one seed get distinct keys.
constexpr std::uint64_t plan_key(std::uint64_t seed, std::uint64_t epoch) noexcept {
  return mix64(mix64(seed ^ 0x452821e638d01377ULL) + epoch * golden_gamma);
}

/// The key of stream `id` of `domain` under `key` (mix64 is a bijection, so distinct ids of one
/// domain get distinct keys).
constexpr std::uint64_t stream_key(std::uint64_t key, std::uint64_t domain,
                                   std::uint64_t id) noexcept {
  return mix64(mix64(key ^ domain) + id * golden_gamma);
}

/// A uniform integer in [0, bound) from draw `d` of stream `k`: Lemire's multiply-shift without
/// rejection (the bias, at most bound / 2^64, is far below anything observable).
constexpr std::uint64_t keyed_below(std::uint64_t k, std::uint64_t d,
                                    std::uint64_t bound) noexcept {
  return static_cast<std::uint64_t>(
      (static_cast<u128>(mix64(k + (d + 1) * golden_gamma)) * bound) >> 64);
}

/// Fisher–Yates shuffle keyed by `k`: position i (counting down) swaps with keyed_below(k, i,
/// i + 1). The swap targets do not depend on the data, so each is computed and prefetched
/// `Ahead` swaps before it is used, one new target per swap (a steady stream of prefetches
/// rather than bursts); large arrays then cost a few nanoseconds per element instead of a cache
/// miss. Only the prefetching differs from the plain loop: the swaps, and so the permutation,
/// are the same.
template <std::size_t Ahead, class T>
void keyed_shuffle_ahead(std::span<T> a, std::uint64_t k) noexcept {
  static_assert(Ahead > 0 && (Ahead & (Ahead - 1)) == 0, "a power of two");
  const std::size_t n = a.size();
  if (n < 2) return;
  T* const p = a.data();
  const std::size_t steps = n - 1;  // step s swaps position n - 1 - s
  std::size_t target[Ahead];
  const std::size_t primed = std::min(Ahead, steps);
  for (std::size_t s = 0; s < primed; ++s) {
    const std::size_t pos = n - 1 - s;
    target[s] = static_cast<std::size_t>(keyed_below(k, pos, pos + 1));
    __builtin_prefetch(p + target[s], 1);
  }
  std::size_t s = 0;
  for (; s + Ahead < steps; ++s) {
    const std::size_t pos = n - 1 - s;
    const std::size_t t = target[s & (Ahead - 1)];
    const std::size_t later = pos - Ahead;  // step s + Ahead's position
    const auto u = static_cast<std::size_t>(keyed_below(k, later, later + 1));
    target[s & (Ahead - 1)] = u;
    __builtin_prefetch(p + u, 1);
    std::swap(p[pos], p[t]);
  }
  for (; s < steps; ++s) std::swap(p[n - 1 - s], p[target[s & (Ahead - 1)]]);
}

/// `keyed_shuffle_ahead` with the distance for the array's size: arrays past the caches look
/// 256 swaps ahead, whose prefetches cover a memory access (and its page walk); smaller ones 32.
template <class T>
void keyed_shuffle(std::span<T> a, std::uint64_t k) noexcept {
  constexpr std::size_t beyond_cache = std::size_t{4} << 20;  // bytes
  if (a.size() > beyond_cache / sizeof(T))
    keyed_shuffle_ahead<256>(a, k);
  else
    keyed_shuffle_ahead<32>(a, k);
}

}  // namespace vbucket::detail
