/// Tests of vbucket/detail/keyed_shuffle.hpp: the prefetching shuffle is the plain keyed
/// Fisher–Yates (the plans depend on its exact permutation), for small arrays and for arrays
/// large enough to take the longer prefetch blocks.
#include "vbucket/detail/keyed_shuffle.hpp"

#include "vbucket/detail/huge_pages.hpp"

#include <doctest/doctest.h>

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t
#include <numeric>  // std::iota
#include <span>     // std::span
#include <utility>  // std::swap
#include <vector>   // std::vector

namespace {

/// Fisher–Yates as the header documents it, one swap at a time, no prefetching.
template <class T>
void reference_shuffle(std::vector<T>& a, std::uint64_t k) {
  for (std::size_t i = a.size(); i > 1; --i)
    std::swap(a[i - 1], a[static_cast<std::size_t>(vbucket::detail::keyed_below(k, i - 1, i))]);
}

template <class T>
void check_same(std::size_t n, std::uint64_t k) {
  std::vector<T> a(n), b(n);
  std::iota(a.begin(), a.end(), T{0});
  std::iota(b.begin(), b.end(), T{0});
  vbucket::detail::keyed_shuffle(std::span<T>(a), k);
  reference_shuffle(b, k);
  CAPTURE(n);
  CHECK(a == b);
}

}  // namespace

TEST_CASE("keyed_shuffle: the plain keyed Fisher-Yates, small and large arrays") {
  for (const std::size_t n : {0u, 1u, 2u, 31u, 32u, 33u, 257u, 1000u}) {
    check_same<std::uint32_t>(n, 7);
    check_same<std::uint64_t>(n, 8);
  }
  // Past 4 MiB: prefetches 256 swaps ahead (the ring's fill, steady state and drain).
  check_same<std::uint32_t>((std::size_t{1} << 20) + 77, 12345);
  check_same<std::uint64_t>((std::size_t{1} << 19) + 3, 54321);
  // Past 16 MiB (20 MiB of rows).
  check_same<std::uint32_t>((std::size_t{5} << 20) + 11, 999);
}

TEST_CASE("keyed_shuffle_ahead: the same permutation at every lookahead, around its ring") {
  // The lookahead ring primes min(Ahead, n - 1) targets, refills one a swap, then drains:
  // sizes on each side of Ahead and of Ahead + 1 (the first refilled swap) for each distance.
  const auto same = [](auto shuffle, std::size_t n, std::uint64_t k) {
    std::vector<std::uint64_t> a(n), b(n);
    std::iota(a.begin(), a.end(), std::uint64_t{0});
    std::iota(b.begin(), b.end(), std::uint64_t{0});
    shuffle(std::span<std::uint64_t>(a), k);
    reference_shuffle(b, k);
    CAPTURE(n);
    CHECK(a == b);
  };
  for (std::size_t n = 0; n < 300; ++n) {
    same(vbucket::detail::keyed_shuffle_ahead<1, std::uint64_t>, n, n + 1);
    same(vbucket::detail::keyed_shuffle_ahead<2, std::uint64_t>, n, n + 2);
    same(vbucket::detail::keyed_shuffle_ahead<32, std::uint64_t>, n, n + 3);
    same(vbucket::detail::keyed_shuffle_ahead<256, std::uint64_t>, n, n + 4);
  }
  same(vbucket::detail::keyed_shuffle_ahead<256, std::uint64_t>, 100000, 5);
}

TEST_CASE("advise_huge_pages: contents unchanged, any alignment, small and null ranges ignored") {
  std::vector<std::uint32_t> a((std::size_t{9} << 20) + 5);  // 36 MiB and a bit
  std::iota(a.begin(), a.end(), std::uint32_t{3});
  const std::vector<std::uint32_t> before = a;
  vbucket::detail::advise_huge_pages(a.data() + 1, (a.size() - 1) * sizeof(std::uint32_t));
  vbucket::detail::advise_huge_pages(a.data(), 4096);
  vbucket::detail::advise_huge_pages(nullptr, std::size_t{1} << 30);
  CHECK(a == before);
  a[a.size() / 2 + 1] = 7;  // still writable
  CHECK(a[a.size() / 2 + 1] == 7);
}
