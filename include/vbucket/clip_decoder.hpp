#pragma once
/// What the loader asks of a decoder: one clip (`clip_task`) written into the memory it is
/// given, from several threads at once (`clip_decoder`); optionally the file each sample names
/// (`file_naming_decoder`), so that a failed file is not picked again as a replacement.

#include <concepts>  // std::convertible_to
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint8_t, std::uint32_t, std::int64_t, std::uint64_t
#include <optional>  // std::optional
#include <span>      // std::span
#include <string>    // std::string

#include "error.hpp"   // error
#include "tensor.hpp"  // clip_layout

namespace vbucket {

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
