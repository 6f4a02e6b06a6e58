#pragma once
/// Normalisation of a uint8 RGB batch, fused with the layout change from what decoders write
/// (B×T×H×W×C, "THWC") to what video models read (B×C×T×H×W, "CTHW"):
/// y = (x / 255 − mean[c]) / std[c], as float32 or bfloat16. One CPU normaliser,
/// `clip_normalizer` (a table of the 256 values per channel), used by the loader's workers and
/// by `normalize_thwc_to_cthw`; `normalize_value` is its arithmetic, element by element, and
/// `vbucket/cuda/normalize.cuh` runs the same arithmetic on the GPU, after a copy of the uint8
/// batch (a quarter of the bytes of float32).

#include <array>        // std::array
#include <bit>          // std::bit_cast, std::endian
#include <cmath>        // std::isfinite
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint16_t, std::uint32_t
#include <cstring>      // std::memcpy
#include <limits>       // std::numeric_limits
#include <span>         // std::span
#include <string>       // std::to_string
#include <type_traits>  // std::is_same_v

#include "vbucket/base/error.hpp"
#include "vbucket/base/tensor.hpp"  // tensor_view, element_type, clip_layout
#include "vbucket/detail/compiled.hpp"

namespace vbucket {

/// Per-channel mean and standard deviation on the [0, 1] scale. The default maps [0, 255] to
/// [−1, 1], as Open-Sora's video transforms do.
struct normalization {
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};

  /// Throws `vbucket::error` on a non-finite mean or a std that is not finite and positive.
  void validate() const {
    for (std::size_t c = 0; c < 3; ++c) {
      if (!std::isfinite(mean[c]))
        throw error("normalization: mean[" + std::to_string(c) + "] is not finite");
      if (!(std::isfinite(std[c]) && std[c] > 0.0f))
        throw error("normalization: std[" + std::to_string(c) + "] must be finite and > 0");
    }
  }
};

/// The shape of a uint8 RGB batch: batch × frames × height × width × 3.
struct batch_shape {
  std::size_t batch = 1;
  std::size_t frames = 0;
  std::size_t height = 0;
  std::size_t width = 0;

  static constexpr std::size_t channels = 3;
  /// Pixels of one clip (frames × height × width).
  [[nodiscard]] constexpr std::size_t clip_pixels() const noexcept {
    return frames * height * width;
  }
  /// Values of the whole batch (batch × frames × height × width × 3). Throws on overflow.
  [[nodiscard]] std::size_t elements() const {
    std::size_t n = channels;
    for (const std::size_t x : {batch, frames, height, width}) {
      if (x != 0 && n > std::numeric_limits<std::size_t>::max() / x)
        throw error("batch shape " + std::to_string(batch) + "x" + std::to_string(frames) + "x" +
                    std::to_string(height) + "x" + std::to_string(width) + "x3 overflows size_t");
      n *= x;
    }
    return n;
  }
};

/// bfloat16 as its bits: float32 rounded to nearest, ties to even (as `__float2bfloat16_rn`);
/// NaN stays NaN.
constexpr std::uint16_t to_bfloat16_bits(float x) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

constexpr float from_bfloat16_bits(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// The normalised value of one uint8 sample, exactly as the GPU kernel computes it.
constexpr float normalize_value(std::uint8_t x, float mean, float std) noexcept {
  return (static_cast<float>(x) / 255.0f - mean) / std;
}

/// The built-in conversion of a decoded uint8 THWC clip to float32 or bfloat16, THWC or CTHW,
/// normalised exactly as `normalize_value` (the CPU reference): y = (x / 255 − mean[c]) / std[c].
/// A per-channel table of the 256 possible values makes it a load per element, so it costs
/// little next to the decode.
class clip_normalizer {
 public:
  /// Throws `vbucket::error` when `norm` is invalid.
  VBUCKET_COMPILED_INLINE explicit clip_normalizer(const normalization& norm = {});

  /// Writes `thwc` (frames × height × width × 3 uint8) into `out`, one clip in `out.type` and
  /// `out.layout` (f32 or bf16; u8 is copied or transposed). `out` holds exactly the clip's
  /// elements.
  VBUCKET_COMPILED_INLINE void operator()(std::span<const std::uint8_t> thwc,
                                          const tensor_view& out) const noexcept;

 private:
  template <class Out>
  static void write(std::span<const std::uint8_t> in, Out* __restrict out, clip_layout layout,
                    const std::array<std::array<Out, 256>, 3>& table) noexcept {
    const std::size_t pixels = in.size() / 3;
    const std::uint8_t* __restrict src = in.data();
    const Out* __restrict t0 = table[0].data();
    const Out* __restrict t1 = table[1].data();
    const Out* __restrict t2 = table[2].data();
    Out* __restrict r = out;
    Out* __restrict g = out + pixels;
    Out* __restrict b = out + 2 * pixels;
    const bool thwc = layout == clip_layout::thwc;
    constexpr bool little = std::endian::native == std::endian::little;
    // CTHW: four pixels a step, their 12 bytes read as two words and four values of a plane
    // stored at once (a byte and a value at a time, the loads and stores bound the loop; this is
    // about 1.7× faster). THWC writes in the order it reads, which the simple loop does well.
    const std::size_t head = little && !thwc ? pixels - pixels % 4 : 0;
    for (std::size_t p = 0; p < head; p += 4) {
      std::uint64_t lo = 0;
      std::uint32_t hi = 0;
      std::memcpy(&lo, src + 3 * p, 8);
      std::memcpy(&hi, src + 3 * p + 8, 4);
      const auto at = [](const Out* t, std::uint64_t word, int shift) {
        return t[(word >> shift) & 0xffu];
      };
      const Out red[4] = {at(t0, lo, 0), at(t0, lo, 24), at(t0, lo, 48), at(t0, hi, 8)};
      const Out green[4] = {at(t1, lo, 8), at(t1, lo, 32), at(t1, lo, 56), at(t1, hi, 16)};
      const Out blue[4] = {at(t2, lo, 16), at(t2, lo, 40), at(t2, hi, 0), at(t2, hi, 24)};
      std::memcpy(r + p, red, sizeof red);
      std::memcpy(g + p, green, sizeof green);
      std::memcpy(b + p, blue, sizeof blue);
    }
    const std::size_t rest = pixels - head;
    for (std::size_t k = 0; k < rest; ++k) {
      const std::size_t p = head + k;
      const std::uint8_t* x = src + 3 * p;
      if (thwc) {
        out[3 * p] = t0[x[0]];
        out[3 * p + 1] = t1[x[1]];
        out[3 * p + 2] = t2[x[2]];
      } else {
        r[p] = t0[x[0]];
        g[p] = t1[x[1]];
        b[p] = t2[x[2]];
      }
    }
  }

  std::array<std::array<float, 256>, 3> f32_{};
  std::array<std::array<std::uint16_t, 256>, 3> bf16_{};
  std::array<std::array<std::uint8_t, 256>, 3> u8_{};
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE clip_normalizer::clip_normalizer(const normalization& norm) {
  norm.validate();
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t x = 0; x < 256; ++x) {
      f32_[c][x] = normalize_value(static_cast<std::uint8_t>(x), norm.mean[c], norm.std[c]);
      bf16_[c][x] = to_bfloat16_bits(f32_[c][x]);
      u8_[c][x] = static_cast<std::uint8_t>(x);
    }
}

VBUCKET_COMPILED_INLINE void clip_normalizer::operator()(std::span<const std::uint8_t> thwc,
                                                         const tensor_view& out) const noexcept {
  switch (out.type) {
    case element_type::f32:
      write(thwc, static_cast<float*>(out.data), out.layout, f32_);
      break;
    case element_type::bf16:
      write(thwc, static_cast<std::uint16_t*>(out.data), out.layout, bf16_);
      break;
    case element_type::u8:
      write(thwc, static_cast<std::uint8_t*>(out.data), out.layout, u8_);
      break;
  }
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// THWC uint8 → CTHW float (`Out` = float) or bfloat16 bits (`Out` = std::uint16_t), clip by
/// clip with `clip_normalizer`. Throws `vbucket::error` when a span does not hold exactly the
/// shape's elements or `norm` is invalid.
template <class Out>
  requires(std::is_same_v<Out, float> || std::is_same_v<Out, std::uint16_t>)
void normalize_thwc_to_cthw(std::span<const std::uint8_t> src, std::span<Out> dst,
                            const batch_shape& shape, const normalization& norm = {}) {
  const clip_normalizer convert(norm);
  const std::size_t n = shape.elements();
  if (src.size() != n || dst.size() != n)
    throw error("normalize: the shape needs " + std::to_string(n) + " values, got a source of " +
                std::to_string(src.size()) + " and a destination of " + std::to_string(dst.size()));
  const std::size_t clip = shape.clip_pixels() * 3;
  tensor_view out;
  out.type = std::is_same_v<Out, float> ? element_type::f32 : element_type::bf16;
  out.layout = clip_layout::cthw;
  out.shape = {1, 3, static_cast<std::int64_t>(shape.frames),
               static_cast<std::int64_t>(shape.height), static_cast<std::int64_t>(shape.width)};
  for (std::size_t b = 0; b < shape.batch; ++b) {
    out.data = dst.data() + b * clip;
    convert(src.subspan(b * clip, clip), out);
  }
}

}  // namespace vbucket
