#pragma once
/// The loader's random streams, by name: a trainer or a test that recomputes what the loader
/// did (the frames of a clip, the replacement of a failed one) calls these.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t

#include "vbucket/base/random.hpp"  // fast_source, fast_stream

namespace vbucket {

/// The stream of sample `sample`'s temporal crop in epoch `epoch` of a run seeded `seed`. It
/// depends on the sample alone, not on the batch it lands in, so reruns and resumes agree.
[[nodiscard]] constexpr fast_stream crop_stream(std::uint64_t seed, std::uint64_t epoch,
                                                std::uint32_t sample) noexcept {
  return fast_source(seed, epoch).stream(sample, 0x63726f70ULL /* "crop" */);
}

/// The crop seed the loader puts in `clip_task::seed`: the first draw of `crop_stream`.
[[nodiscard]] constexpr std::uint64_t crop_seed(std::uint64_t seed, std::uint64_t epoch,
                                                std::uint32_t sample) noexcept {
  fast_stream s = crop_stream(seed, epoch, sample);
  return s.next_u64();
}

/// The stream that picks replacements for clip `clip` of the batch at global position
/// `position` when it fails to decode: draw a is attempt a's candidate, `slots[draw % n]`
/// over the bucket's n planned slots (a candidate equal to the failed sample is skipped).
[[nodiscard]] constexpr fast_stream substitution_stream(std::uint64_t seed, std::uint64_t epoch,
                                                        std::uint64_t position,
                                                        std::size_t clip) noexcept {
  return fast_source(seed, epoch).stream(position, 0x7375620000000000ULL /* "sub" */ + clip);
}

}  // namespace vbucket
