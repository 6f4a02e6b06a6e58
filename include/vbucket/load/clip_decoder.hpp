#pragma once
/// What the loader asks of a decoder: one clip (`clip_task`) written into the memory it is
/// given, from several threads at once (`clip_decoder`); optionally the file each sample names
/// (`file_naming_decoder`), so that a failed file is not picked again as a replacement.

#include <concepts>     // std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint32_t, std::int64_t, std::uint64_t
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/base/error.hpp"   // error
#include "vbucket/base/tensor.hpp"  // clip_layout

namespace vbucket {

/// Which frames a clip of `frames` frames at `interval` from frame `start` takes.
/// `opensora`: Open-Sora's `temporal_random_crop`, `np.linspace(start, start + frames ·
/// interval - 1, frames, dtype=int)` — the span of frames · interval source frames, its first
/// and last frame included, spread evenly (computed as NumPy computes it, in double precision:
/// the step (stop - start) / (frames - 1), each index j · step + start truncated, the last one
/// `stop`); at interval 1 the same frames as `stride`. `stride`: every interval-th frame, start,
/// start + interval, ..., start + (frames - 1) · interval.
enum class frame_choice { opensora, stride };

/// Frame j (0-based, j < frames) of a clip (see `frame_choice`); start ≥ 0, frames ≥ 1,
/// interval ≥ 1, and the last frame below 2^53.
[[nodiscard]] inline std::int64_t clip_frame_index(frame_choice choice, std::int64_t start,
                                                   std::int64_t frames, std::int64_t interval,
                                                   std::int64_t j) noexcept {
  if (choice == frame_choice::stride) return start + j * interval;
  if (frames <= 1) return start;
  const std::int64_t stop = start + frames * interval - 1;
  if (j == frames - 1) return stop;  // NumPy sets the endpoint exactly
  const double step = static_cast<double>(stop - start) / static_cast<double>(frames - 1);
  // NumPy rounds the product, then the sum: no fused multiply-add (volatile keeps them apart)
  const volatile double scaled = static_cast<double>(j) * step;
  return static_cast<std::int64_t>(scaled + static_cast<double>(start));
}

/// The name of a frame choice ("opensora", "stride"), and back (nullopt for another name):
/// what the CLI's `--frame-choice` and Python's `frame_choice=` take.
[[nodiscard]] inline const char* frame_choice_name(frame_choice c) noexcept {
  return c == frame_choice::opensora ? "opensora" : "stride";
}
[[nodiscard]] inline std::optional<frame_choice> parse_frame_choice(std::string_view s) noexcept {
  if (s == "opensora") return frame_choice::opensora;
  if (s == "stride") return frame_choice::stride;
  return std::nullopt;
}

/// The last frame a clip reads: `clip_frame_index(choice, start, frames, interval, frames - 1)`.
[[nodiscard]] inline std::int64_t clip_last_frame(frame_choice choice, std::int64_t start,
                                                  std::int64_t frames,
                                                  std::int64_t interval) noexcept {
  return clip_frame_index(choice, start, frames, interval, frames - 1);
}

/// One clip to decode: sample `sample` (a row of the metadata table) at the bucket's target
/// shape, in `layout`, uint8 RGB; `seed` drives the temporal crop.
struct clip_task {
  std::uint32_t sample = 0;
  std::int64_t frames = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  clip_layout layout = clip_layout::thwc;
  std::uint64_t seed = 0;

  [[nodiscard]] std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(frames * height * width * 3);
  }
};

/// What a decoder throws when a clip's source cannot be reached now but may come back (a
/// connection refused or reset, a 5xx reply, a timeout, a connection lost mid-read): the loader
/// then waits for the source and tries the same sample again (a stall, counted, bounded by
/// `loader_options::outage_deadline_seconds`) instead of replacing it. Every other failure (a
/// 404, a malformed file, a decode error) is permanent: the clip is replaced.
class source_unavailable : public error {
 public:
  using error::error;
};

/// How long reading sources may take, written once: `ffmpeg::limits` (a clip's deadline, the
/// network's io timeout and retries), `loader_options::outage_deadline_seconds` and the run
/// spec's fields `timeout`, `io_timeout`, `retries` and `outage_deadline` start from these.
namespace defaults {
inline constexpr double timeout_seconds = 120.0;    ///< one clip's probe or decode, or listing
inline constexpr double io_timeout_seconds = 10.0;  ///< a stalled connect or read
inline constexpr int retries = 2;                   ///< further attempts at a URL
inline constexpr double outage_deadline_seconds = 600.0;  ///< the longest stall of a loader
/// The most seconds any of these bounds accepts (11.6 days: more is a mistake, not a bound).
inline constexpr double max_seconds = 1e6;
inline constexpr int max_retries = 100;  ///< the most retries accepted
}  // namespace defaults

/// `decode(task, out)` writes exactly `task.bytes()` bytes into `out` and returns nullopt, or
/// returns an error message (or throws; the loader treats both alike). Called concurrently.
template <class D>
concept clip_decoder = requires(D& d, const clip_task& t, std::span<std::uint8_t> out) {
  { d.decode(t, out) } -> std::convertible_to<std::optional<std::string>>;
};

/// A decoder that names each sample's file (`path(i)`, as `ffmpeg::file_decoder`): the loader
/// then never picks, as a replacement, a sample whose file already failed this epoch (two rows
/// may name one file).
template <class D>
concept file_naming_decoder = requires(const D& d, std::size_t i) {
  { d.path(i) } -> std::convertible_to<std::string>;
};

}  // namespace vbucket
