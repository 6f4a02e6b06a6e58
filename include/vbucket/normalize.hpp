#pragma once
/// Normalisation of a uint8 RGB batch, fused with the layout change from what decoders write
/// (B×T×H×W×C, "THWC") to what video models read (B×C×T×H×W, "CTHW"):
/// y = (x / 255 − mean[c]) / std[c], as float32 or bfloat16. This is the CPU reference (and
/// the CPU path); `vbucket/cuda/normalize.cuh` runs the same arithmetic on the GPU, after a
/// copy of the uint8 batch (a quarter of the bytes of float32).

#include <array>        // std::array
#include <bit>          // std::bit_cast
#include <cmath>        // std::isfinite
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint16_t, std::uint32_t
#include <limits>       // std::numeric_limits
#include <span>         // std::span
#include <string>       // std::to_string
#include <type_traits>  // std::is_same_v

#include "error.hpp"

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

/// THWC uint8 → CTHW float (`Out` = float) or bfloat16 bits (`Out` = std::uint16_t). Throws
/// `vbucket::error` when a span does not hold exactly the shape's elements or `norm` is
/// invalid.
template <class Out>
  requires(std::is_same_v<Out, float> || std::is_same_v<Out, std::uint16_t>)
void normalize_thwc_to_cthw(std::span<const std::uint8_t> src, std::span<Out> dst,
                            const batch_shape& shape, const normalization& norm = {}) {
  norm.validate();
  const std::size_t n = shape.elements();
  if (src.size() != n || dst.size() != n)
    throw error("normalize: the shape needs " + std::to_string(n) + " values, got a source of " +
                std::to_string(src.size()) + " and a destination of " + std::to_string(dst.size()));
  const std::size_t plane = shape.clip_pixels();
  for (std::size_t b = 0; b < shape.batch; ++b) {
    const std::uint8_t* in = src.data() + b * plane * 3;
    Out* out = dst.data() + b * plane * 3;
    for (std::size_t c = 0; c < 3; ++c) {
      for (std::size_t p = 0; p < plane; ++p) {
        const float y = normalize_value(in[p * 3 + c], norm.mean[c], norm.std[c]);
        if constexpr (std::is_same_v<Out, float>)
          out[c * plane + p] = y;
        else
          out[c * plane + p] = to_bfloat16_bits(y);
      }
    }
  }
}

}  // namespace vbucket
