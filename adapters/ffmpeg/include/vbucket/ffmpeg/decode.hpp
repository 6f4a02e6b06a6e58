#pragma once
/// Decoding a clip into a caller's buffer: frames start, start + interval, ... (count N, by
/// presentation order, so variable-frame-rate files work), resized and center-cropped to H x W
/// with Open-Sora's geometry (scale so H x W is covered, keeping the aspect ratio, then crop
/// the middle), honouring the display rotation, as RGB24 bytes in THWC or CTHW order. The
/// aspect ratio is the display one: anamorphic video (a sample aspect ratio other than 1:1) is
/// stretched to its display shape in the same scaling pass, as players and ffmpeg show it.
///
/// How: frame indices are mapped to timestamps by demuxing (not decoding) the stream up to the
/// last wanted frame; in MP4/MOV, whose sample table lists every packet, demuxing starts at a
/// keyframe shortly before the first wanted frame instead of at the file's start (checked
/// against the packets read; any doubt falls back to the whole scan). Then the input seeks to
/// the keyframe before the first wanted frame, decodes up to the last wanted frame only
/// (non-reference frames that are not wanted are skipped, and the decoder is drained once the
/// last wanted frame's packet is in it: clip_request::skip_unwanted), and converts only the
/// wanted frames, straight to the target size (libswscale). Streams without timestamps (AVI, some
/// MPEG-PS/TS) number frames in the decoder's output order; a deep clip there starts at a keyframe
/// whose frame number the AVI index or a demux pass gives (decode_output_order_from_keyframe).
///
///     vbucket::ffmpeg::clip_request req{.start = 10, .frames = 16, .interval = 2,
///                                       .height = 192, .width = 336};
///     std::vector<std::uint8_t> buf(vbucket::ffmpeg::clip_bytes(req));
///     auto info = vbucket::ffmpeg::decode_clip("clip.mp4", req, buf);  // info.error() if bad

#include <algorithm>    // std::sort, std::lower_bound, std::unique, std::adjacent_find, std::max
#include <bit>          // std::endian
#include <cmath>        // std::nearbyint
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint8_t, std::uint64_t
#include <cstring>      // std::memcpy
#include <limits>       // std::numeric_limits
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_enum_v
#include <vector>       // std::vector

#include "vbucket/base/random_source.hpp"  // vbucket::detail::mix64, vbucket::detail::golden_gamma
#include "vbucket/base/tensor.hpp"         // vbucket::clip_layout
#include "vbucket/ffmpeg/frame_index.hpp"
#include "vbucket/ffmpeg/limits.hpp"
#include "vbucket/ffmpeg/result.hpp"
#include "vbucket/load/clip_decoder.hpp"  // vbucket::frame_choice, vbucket::clip_frame_index

namespace vbucket::ffmpeg {

/// Byte order of a decoded clip: THWC (frames, rows, columns, RGB) or CTHW (R plane of every
/// frame, then G, then B). The loader's `vbucket::clip_layout`, under the adapter's name.
using layout = vbucket::clip_layout;

/// The resampling filter: libswscale's, or `opensora`, Open-Sora's own: a video frame is
/// converted to RGB at its size, then resized as `torch.nn.functional.interpolate(mode=
/// "bilinear", align_corners=False)` without antialiasing (its video transform), each value
/// rounded to uint8; an image is resized by libswscale's bicubic (Open-Sora resizes images with
/// PIL's bicubic). A frame with a rotation or a non-square sample aspect ratio (Open-Sora reads
/// neither) takes libswscale's bilinear.
enum class resize_filter { bilinear, bicubic, area, nearest, opensora };

/// Open-Sora's resize-crop: scale the (display) frame to `scaled_height` x `scaled_width`, the
/// smallest size that covers the target keeping the aspect ratio (rounded half to even, as
/// Python's round), then take the target from row `top`, column `left`. The offset is Open-
/// Sora's too: its video transform floors (sw - tw) / 2, its image transform rounds it half to
/// even.
struct resize_crop {
  std::int64_t scaled_height = 0;
  std::int64_t scaled_width = 0;
  std::int64_t top = 0;
  std::int64_t left = 0;
};

/// Which of Open-Sora's two resize-crops: the video transform's (`video_transforms.
/// resize_crop_to_fill`: `int(round(sw - tw) / 2.0)`, the offset floored) or the image
/// transform's (`utils.resize_crop_to_fill`: `int(round((sw - tw) / 2.0))`, rounded).
enum class crop_offset { video_floor, image_round };

/// The geometry for a `height` x `width` source and a `target_height` x `target_width` target
/// (all ≥ 1), as Open-Sora's `resize_crop_to_fill` of a video (`crop_offset::video_floor`) or
/// an image (`image_round`).
inline resize_crop resize_crop_geometry(std::int64_t height, std::int64_t width,
                                        std::int64_t target_height, std::int64_t target_width,
                                        crop_offset offset = crop_offset::video_floor) noexcept {
  const auto half = [offset](std::int64_t excess) {
    return offset == crop_offset::video_floor
               ? excess / 2
               : static_cast<std::int64_t>(std::nearbyint(static_cast<double>(excess) / 2.0));
  };
  const double rh = static_cast<double>(target_height) / static_cast<double>(height);
  const double rw = static_cast<double>(target_width) / static_cast<double>(width);
  resize_crop g;
  if (rh > rw) {
    g.scaled_height = target_height;
    g.scaled_width = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(width) * rh));
    g.scaled_width = std::max(g.scaled_width, target_width);
    g.left = half(g.scaled_width - target_width);
  } else {
    g.scaled_height = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(height) * rw));
    g.scaled_height = std::max(g.scaled_height, target_height);
    g.scaled_width = target_width;
    g.top = half(g.scaled_height - target_height);
  }
  return g;
}

/// What to decode. `frames` frames from `start` at `interval` as `choice` picks them
/// (`vbucket::frame_choice`: `stride` = start, start + interval, ..., start + (frames - 1) ·
/// interval; `opensora` = Open-Sora's linspace over frames · interval frames), 0-based,
/// presentation order, each resized and cropped to height x width.
struct clip_request {
  std::int64_t start = 0;
  std::int64_t frames = 1;
  std::int64_t interval = 1;
  frame_choice choice = frame_choice::stride;
  std::int64_t height = 0;
  std::int64_t width = 0;
  ffmpeg::layout layout = layout::thwc;
  /// Decoder threads; 1 by default, since loaders decode many clips in parallel (0 = FFmpeg's
  /// choice).
  int threads = 1;
  /// A video that ends early: false = an error; true = the last decoded frame is repeated.
  bool pad = false;
  /// Decode only what the clip needs (streams with timestamps): from the keyframe on, a packet
  /// whose frame is not wanted is sent with AVDISCARD_NONREF (a frame no other frame refers to
  /// is then not decoded at all), and once every wanted frame's packet is in the decoder it is
  /// drained instead of fed more packets. The same bytes either way (tests/ffmpeg/decode_skip.cpp
  /// compares them across codecs and GOP structures); false decodes every frame from the
  /// keyframe until the last wanted one comes out (the tests' reference).
  bool skip_unwanted = true;
  /// MP4/MOV: map frame indices to timestamps from the container's sample table, demuxing
  /// from shortly before `start`; streams without timestamps: start decoding at a keyframe
  /// found in the AVI index or by a demux pass (false: always demux, and for those decode, from
  /// the file's start; same result, slower for clips far into long videos).
  bool use_index = true;
  /// The frame index from `vbucket scan --index` (frame_index.hpp; not owned, may be null): the
  /// file's entry, looked up by the path as given, lets Matroska/WebM, fragmented MP4,
  /// MPEG-TS/PS and AVI start at a keyframe without demuxing from the start (each landing
  /// checked; any doubt takes the path without it, so the bytes are the same). A stale entry
  /// (the file's size or mtime changed) is ignored and reported in `clip_info::index_stale`.
  /// Unused when `use_index` is false and for files in memory.
  const frame_index* index = nullptr;
  resize_filter filter = resize_filter::bilinear;
  ffmpeg::limits limits{};
};

/// The largest clip (frames) and step one request may ask for.
inline constexpr std::int64_t max_clip_frames = std::int64_t{1} << 16;
inline constexpr std::int64_t max_clip_index = std::int64_t{1} << 40;

/// Bytes of the buffer a request fills: frames · height · width · 3 (0 for an invalid request).
inline std::size_t clip_bytes(const clip_request& r) noexcept {
  if (r.frames < 1 || r.frames > max_clip_frames || r.height < 1 || r.width < 1 ||
      r.height > r.limits.max_side || r.width > r.limits.max_side)
    return 0;
  return static_cast<std::size_t>(r.frames) * static_cast<std::size_t>(r.height) *
         static_cast<std::size_t>(r.width) * 3u;
}

/// What `decode_clip` did.
struct clip_info {
  /// Frames the decoder decoded: those that came out of it, and those it still held back for
  /// reordering when the clip was complete (clip_request::skip_unwanted leaves none).
  std::int64_t frames_decoded = 0;
  std::int64_t frames_converted = 0;  ///< frames resized into the buffer
  std::int64_t frames_padded = 0;     ///< slots filled by repeating the last frame
  std::int64_t source_height = 0;     ///< display size of the (last converted) frame
  std::int64_t source_width = 0;
  int sar_num = 1;  ///< sample aspect ratio applied to the (last converted) frame
  int sar_den = 1;
  int rotation = 0;                ///< clockwise display rotation that was applied
  bool seeked = false;             ///< decoding started at a keyframe found by seeking
  bool presentation_index = true;  ///< false: the stream has no timestamps; output order used
  bool indexed = false;      ///< frame timestamps demuxed from a keyframe found in the sample table
  bool index_used = false;   ///< the frame index's entry for the file was used
  bool index_stale = false;  ///< the frame index had a stale entry for the file (ignored)
};

/// Open-Sora's `temporal_random_crop` start: uniform in [0, max(0, total - frames · interval -
/// 1)], from a counter-based generator keyed by `seed` (the same on every platform). Empty when
/// the video is too short for the frames `choice` takes from there (`frame_choice`: Open-Sora's
/// linspace reads frames · interval frames, the stride (frames - 1) · interval + 1).
inline std::optional<std::int64_t> temporal_random_crop(
    std::int64_t total_frames, std::int64_t frames, std::int64_t interval, std::uint64_t seed,
    frame_choice choice = frame_choice::stride) noexcept {
  if (frames < 1 || interval < 1 || total_frames < 1 || frames > max_clip_frames ||
      interval > max_clip_index)
    return std::nullopt;
  const std::int64_t span = clip_last_frame(choice, 0, frames, interval) + 1;
  if (total_frames < span) return std::nullopt;
  const std::int64_t last_start = std::max<std::int64_t>(0, total_frames - frames * interval - 1);
  const auto range = static_cast<std::uint64_t>(last_start) + 1;
  // Rejection sampling: uniform without modulo bias.
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t state = vbucket::detail::mix64(seed);
  for (;;) {
    state += vbucket::detail::golden_gamma;
    const std::uint64_t x = vbucket::detail::mix64(state);
    if (x < limit) return static_cast<std::int64_t>(x % range);
  }
}

/// Decodes the clip `req` asks for from the file at `path` into `out` (exactly
/// clip_bytes(req) bytes). Bad files and impossible requests come back as error values.
[[nodiscard]] result<clip_info> decode_clip(const std::string& path, const clip_request& req,
                                            std::span<std::uint8_t> out) noexcept;

/// The same for a file held in memory; `name` is used in messages only.
[[nodiscard]] result<clip_info> decode_clip_memory(std::span<const std::uint8_t> data,
                                                   const std::string& name, const clip_request& req,
                                                   std::span<std::uint8_t> out) noexcept;

/// The frame index entry of the video at `path` (frame_index.hpp): its packets demuxed once
/// (no decoding), with the file's size and mtime read before and checked after. A stream where
/// every packet has a pts records the keyframes that split it; else every packet (frames then
/// count in the decoder's output order). Images and unreadable files come back as errors.
[[nodiscard]] result<file_index> index_video(const std::string& path,
                                             const limits& lim = {}) noexcept;

/// `index_video` for every path with `threads` workers (0 = one per core); results[i] is
/// paths[i]'s.
[[nodiscard]] std::vector<result<file_index>> index_all(const std::vector<std::string>& paths,
                                                        unsigned threads, const limits& lim = {});

}  // namespace vbucket::ffmpeg
