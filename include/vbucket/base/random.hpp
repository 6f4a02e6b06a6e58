#pragma once
/// Random sources for bucket rules. A source hands out, for sample i and sub-stream s, a
/// generator of uniform doubles in [0, 1). Two are provided:
///  - `fast_source` (`random_source.hpp`, with the concept): counter-based, keyed by (seed,
///    epoch, sample, sub-stream, draw), so any thread or rank computes any sample's draws
///    alone, and epochs never share streams.
///  - `numpy_source` (`numpy_random.hpp`): Open-Sora's draws bit for bit
///    (`numpy.random.default_rng(s_i + s)` with s_i = seed + i · num_bucket).

#include <optional>     // std::optional
#include <string_view>  // std::string_view

#include "numpy_random.hpp"   // numpy_source, numpy_rng, big_seed
#include "random_source.hpp"  // random_source, fast_source, shifted_source

namespace vbucket {

/// Which draws assign samples to buckets: `fast` (counter-based, any sample alone) or `numpy`
/// (Open-Sora's, bit for bit).
enum class rng_mode { fast, numpy };

/// "fast" or "numpy".
[[nodiscard]] constexpr std::string_view to_string(rng_mode mode) noexcept {
  return mode == rng_mode::fast ? "fast" : "numpy";
}

/// The mode named "fast" or "numpy"; nullopt for any other text.
[[nodiscard]] constexpr std::optional<rng_mode> parse_rng_mode(std::string_view name) noexcept {
  if (name == "fast") return rng_mode::fast;
  if (name == "numpy") return rng_mode::numpy;
  return std::nullopt;
}

}  // namespace vbucket
