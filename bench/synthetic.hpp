#pragma once
/// Deterministic synthetic metadata that looks like a web-video crawl, for benchmarks and
/// tests: mostly 1080p/720p/480p/360p landscape, some vertical, some square, some 4K, a few odd
/// sizes; about 15 % images (one frame, NaN fps); fps from {23.976, 24, 25, 29.97, 30, 50, 60};
/// durations of 2 to 60 s, skewed towards short clips.
///
/// Sample i is a pure function of (seed, i) computed with integer and IEEE double arithmetic
/// only (no <random> distributions, no libm), so every platform, thread count and table size
/// gives the same samples: `synthetic_table(n, s)` is a prefix of `synthetic_table(n + k, s)`.
///
///     const vbucket::meta_table table = vbucket::bench::synthetic_table(1'000'000);

#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t, std::uint32_t
#include <limits>   // quiet_NaN

#include "vbucket/bucket/meta.hpp"

namespace vbucket::bench {

namespace detail {

/// SplitMix64 keyed by (seed, sample): draw d of sample i is mix(key(seed, i) + (d + 1) · γ).
class synthetic_stream {
 public:
  constexpr synthetic_stream(std::uint64_t seed, std::uint64_t sample) noexcept
      : state_(mix(mix(seed ^ 0x243f6a8885a308d3ULL) ^ sample)) {}

  constexpr std::uint64_t next() noexcept {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix(state_);
  }
  /// Uniform in [0, 1).
  constexpr double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [0, n) (n ≤ 2^32; the bias of 64-bit-by-32-bit reduction is negligible here).
  constexpr std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32);
  }

 private:
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_;
};

/// A frame size and its weight in per-mille.
struct weighted_size {
  std::int64_t width;
  std::int64_t height;
  std::uint32_t weight;
};

/// Video frame sizes; the weights leave 75 ‰ for odd sizes drawn by `odd_size`.
inline constexpr std::array<weighted_size, 17> video_sizes = {{
    {1920, 1080, 250},  // 1080p
    {1280, 720, 200},   // 720p
    {854, 480, 60},     // 480p 16:9
    {640, 480, 30},     // 480p 4:3
    {640, 360, 90},     // 360p
    {426, 240, 20},     // 240p
    {3840, 2160, 40},   // 4K UHD
    {2560, 1440, 20},   // 1440p
    {1920, 800, 20},    // cinema 2.39:1
    {1440, 1080, 20},   // 4:3 HD
    {1080, 1920, 70},   // vertical 1080p
    {720, 1280, 50},    // vertical 720p
    {480, 854, 10},     // vertical 480p
    {2160, 3840, 10},   // vertical 4K
    {1080, 1080, 15},   // square
    {720, 720, 10},     // square
    {4096, 2160, 10},   // DCI 4K
}};
inline constexpr std::uint32_t odd_weight = 75;

/// Photo sizes for images that are not video frames.
inline constexpr std::array<weighted_size, 7> photo_sizes = {{
    {4032, 3024, 250},
    {3024, 4032, 200},
    {1024, 1024, 200},
    {2048, 1536, 100},
    {800, 600, 100},
    {512, 512, 100},
    {1200, 1800, 50},
}};

inline constexpr std::array<double, 7> frame_rates = {23.976, 24.0, 25.0, 29.97, 30.0, 50.0, 60.0};
inline constexpr std::array<std::uint32_t, 7> frame_rate_weights = {100, 100, 150, 300,
                                                                    200, 50,  100};

template <std::size_t N>
constexpr std::uint32_t total_weight(const std::array<weighted_size, N>& sizes) noexcept {
  std::uint32_t sum = 0;
  for (const auto& s : sizes) sum += s.weight;
  return sum;
}
static_assert(total_weight(video_sizes) + odd_weight == 1000);
static_assert(total_weight(photo_sizes) == 1000);

template <std::size_t N>
constexpr const weighted_size& pick(const std::array<weighted_size, N>& sizes,
                                    std::uint32_t ticket) noexcept {
  for (const auto& s : sizes) {
    if (ticket < s.weight) return s;
    ticket -= s.weight;
  }
  return sizes[N - 1];
}

/// An odd size: width in [96, 4096), aspect H/W in [0.3, 3), both rounded down to even.
constexpr void odd_size(synthetic_stream& g, std::int64_t& width, std::int64_t& height) noexcept {
  width = (96 + static_cast<std::int64_t>(g.below(4000))) & ~std::int64_t{1};
  const double aspect = 0.3 + 2.7 * g.unit();
  height = static_cast<std::int64_t>(static_cast<double>(width) * aspect) & ~std::int64_t{1};
  if (height < 2) height = 2;
}

}  // namespace detail

/// Share of images (one frame, NaN fps), in per-mille.
inline constexpr std::uint32_t synthetic_image_permille = 150;

/// Sample `index` of the synthetic set `seed`.
constexpr sample_meta synthetic_sample(std::uint64_t index, std::uint64_t seed = 0) noexcept {
  detail::synthetic_stream g(seed, index);
  sample_meta m;
  if (g.below(1000) < synthetic_image_permille) {
    // Images: 60 % video-sized (frames grabbed from video), 40 % photo-sized.
    const std::uint32_t ticket = g.below(1000);
    const detail::weighted_size& s = ticket < 600
                                         ? detail::pick(detail::video_sizes, g.below(925))
                                         : detail::pick(detail::photo_sizes, g.below(1000));
    m.num_frames = 1;
    m.width = s.width;
    m.height = s.height;
    m.fps = std::numeric_limits<double>::quiet_NaN();
    return m;
  }
  const std::uint32_t ticket = g.below(1000);
  if (ticket < 1000 - detail::odd_weight) {
    const detail::weighted_size& s = detail::pick(detail::video_sizes, ticket);
    m.width = s.width;
    m.height = s.height;
  } else {
    detail::odd_size(g, m.width, m.height);
  }
  std::uint32_t fps_ticket = g.below(1000);
  std::size_t f = 0;
  while (f + 1 < detail::frame_rates.size() && fps_ticket >= detail::frame_rate_weights[f]) {
    fps_ticket -= detail::frame_rate_weights[f];
    ++f;
  }
  m.fps = detail::frame_rates[f];
  // Durations of 2 to 60 s, quadratic towards short clips (median ≈ 16.5 s).
  const double u = g.unit();
  const double seconds = 2.0 + 58.0 * u * u;
  m.num_frames = static_cast<std::int64_t>(seconds * m.fps + 0.5);
  return m;
}

/// The first `n` samples of the synthetic set `seed`, as a struct-of-arrays table.
inline meta_table synthetic_table(std::size_t n, std::uint64_t seed = 0) {
  meta_table t;
  t.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.push_back(synthetic_sample(i, seed));
  return t;
}

}  // namespace vbucket::bench
