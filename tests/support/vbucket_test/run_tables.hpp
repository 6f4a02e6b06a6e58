#pragma once
/// The run-plan tests' metadata: a small deterministic generator (independent of the library's
/// hashing) and tables of rows the tests' configs can bucket.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t, std::int64_t
#include <memory>   // std::shared_ptr, std::make_shared

#include "vbucket/bucket/meta.hpp"  // meta_table, sample_meta

namespace vbucket_test {

/// A 64-bit linear congruential generator (Knuth's MMIX constants); `below(n)` in [0, n).
struct lcg {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

/// What a run table varies beyond the frames and the 256px/768px split.
struct run_table_options {
  bool varied_sizes = false;         ///< 256px rows of 256-288 x 256-352 (else 256 x 320)
  std::uint64_t invalid_one_in = 0;  ///< one row in this many has height 0 (0: none)
};

/// n rows: 15 % images, videos of 40, 70 or 140 frames, a third 768 x 1024, the rest 256px-sized.
inline std::shared_ptr<const vbucket::meta_table> run_table(std::size_t n, std::uint64_t seed,
                                                            run_table_options o = {}) {
  auto t = std::make_shared<vbucket::meta_table>();
  lcg g{seed};
  const std::int64_t frames[] = {1, 40, 70, 140};
  for (std::size_t i = 0; i < n; ++i) {
    vbucket::sample_meta m;
    const std::uint64_t k = g.below(20);
    m.num_frames = frames[k < 3 ? 0 : 1 + k % 3];
    const bool large = g.below(3) == 0;
    if (large) {
      m.height = 768;
      m.width = 1024;
    } else if (o.varied_sizes) {
      m.height = 256 + static_cast<std::int64_t>(g.below(3)) * 16;
      m.width = 256 + static_cast<std::int64_t>(g.below(4)) * 32;
    } else {
      m.height = 256;
      m.width = 320;
    }
    // Unusable metadata: counted as invalid, not delivered.
    if (o.invalid_one_in != 0 && g.below(o.invalid_one_in) == 0) m.height = 0;
    t->push_back(m);
  }
  return t;
}

}  // namespace vbucket_test
