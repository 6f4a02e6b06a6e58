#pragma once
/// Probing a media file: frames, display height and width, average frame rate, duration, codec,
/// sample aspect ratio and display rotation. The frame count comes from the container when it
/// records one it can be trusted for; otherwise the stream is decoded and its frames counted
/// (`info.counted_by` says which). In MP4/MOV the count is the sample table's after the edit
/// list (the samples it discards are not frames), of the samples whose data are in the file;
/// a file cut short is counted up to its end and a file whose media data look overwritten with
/// zeros is counted by decoding, both with a `warning`; a file whose table points past its end
/// only is an error. Images (PNG, JPEG, ...) probe as one frame with an unknown (NaN) rate.
///
///     auto info = vbucket::ffmpeg::probe("clip.mp4");
///     if (info) std::printf("%lld frames\n", (long long)info->num_frames);

#include <cmath>        // std::isfinite, std::isnan
#include <cstdint>      // std::int64_t, std::uint8_t
#include <exception>    // std::exception
#include <limits>       // quiet_NaN
#include <new>          // std::bad_alloc
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/ffmpeg/limits.hpp"
#include "vbucket/ffmpeg/result.hpp"

namespace vbucket::ffmpeg {

/// Where a probe's frame count comes from.
enum class frame_count_method {
  container,  ///< the container's header (e.g. MP4's sample table)
  decoded,    ///< every frame decoded and counted (the container records no count)
  image,      ///< a still image: one frame
};

inline constexpr std::string_view to_string(frame_count_method m) noexcept {
  switch (m) {
    case frame_count_method::container:
      return "container";
    case frame_count_method::decoded:
      return "decoded";
    case frame_count_method::image:
      return "image";
  }
  return "?";
}

/// What `probe` finds. `height` and `width` are the display sizes, which is what bucketing
/// needs: the stored width scaled by the sample aspect ratio (the height kept, as players show
/// it), then swapped for a rotation by 90 or 270. A `video_meta` (members num_frames, height,
/// width, fps).
struct video_info {
  std::int64_t num_frames = 0;
  std::int64_t height = 0;  ///< display height (after the sample aspect ratio and rotation)
  std::int64_t width = 0;   ///< display width (after the sample aspect ratio and rotation)
  double fps = std::numeric_limits<double>::quiet_NaN();       ///< average rate; NaN for images
  double duration = std::numeric_limits<double>::quiet_NaN();  ///< seconds; NaN if unknown
  std::string codec;              ///< FFmpeg's codec name: "h264", "vp9", "png", ...
  int rotation = 0;               ///< clockwise display rotation: 0, 90, 180 or 270
  std::int64_t coded_height = 0;  ///< stored height (as decoded, before SAR and rotation)
  std::int64_t coded_width = 0;   ///< stored width
  int sar_num = 1;                ///< sample aspect ratio, reduced (1:1: square pixels, or unknown)
  int sar_den = 1;
  frame_count_method counted_by = frame_count_method::container;
  /// Empty, or why the file is usable only in part or was counted another way (cut short,
  /// damaged, an implausible aspect ratio ignored): one line, naming no file.
  std::string warning;
};

struct probe_options {
  /// Count frames by decoding even when the container records a count.
  bool always_decode_count = false;
  /// Decoder threads for a decode count (0 = FFmpeg's choice).
  int threads = 1;
  ffmpeg::limits limits{};
};

/// Probes the file at `path`. Errors (missing, unreadable, not a video, corrupt, absurd sizes)
/// come back as an error value whose message names the file.
[[nodiscard]] result<video_info> probe(const std::string& path,
                                       const probe_options& opt = {}) noexcept;

/// Probes a file held in memory; `name` is used in messages only.
[[nodiscard]] result<video_info> probe_memory(std::span<const std::uint8_t> data,
                                              const std::string& name,
                                              const probe_options& opt = {}) noexcept;

}  // namespace vbucket::ffmpeg
