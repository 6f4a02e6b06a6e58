#pragma once
/// `file_decoder`: a `vbucket::clip_decoder` over media files, for `vbucket::loader`. Sample i
/// is `paths[i]` with its probed frame count and fps; a task decodes the bucket's T frames with
/// the sample's frame interval, from a start drawn by `temporal_random_crop` with the task's
/// seed, resized and center-cropped to the bucket's H × W.
///
/// The frame interval follows the bucket rule: Open-Sora 2.0 thins to at most `fps_max` frames
/// per second (interval ceil(fps / fps_max) when fps ≥ fps_max, else 1); Open-Sora v1.2 uses a
/// fixed `frame_interval`. Use the same values as the rule that assigned the buckets.
///
///     auto decoder = vbucket::ffmpeg::file_decoder(paths, meta, {.fps_max = 16});
///     vbucket::loader l(plan.deal(world), rank, decoder, ring);

#include <cmath>     // std::ceil, std::isnan
#include <cstdint>   // std::int64_t, std::uint8_t
#include <limits>    // std::numeric_limits
#include <optional>  // std::optional
#include <span>      // std::span
#include <string>    // std::string
#include <utility>   // std::move
#include <vector>    // std::vector

#include "vbucket/error.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/loader.hpp"
#include "vbucket/meta.hpp"

namespace vbucket::ffmpeg {

class file_decoder {
 public:
  struct options {
    /// Open-Sora 2.0's fps thinning (used when `frame_interval` is 0).
    double fps_max = 16.0;
    /// A fixed interval (Open-Sora v1.2's `frame_interval`); 0 = from fps and `fps_max`.
    std::int64_t frame_interval = 0;
    int threads = 1;  ///< decoder threads per clip
    resize_filter filter = resize_filter::bilinear;
    ffmpeg::limits limits{};
  };

  /// `paths[i]` is sample i of `meta`. Throws `vbucket::error` when the sizes differ or an
  /// option is invalid.
  file_decoder(std::vector<std::string> paths, const meta_table& meta, options o)
      : paths_(std::move(paths)), frames_(meta.num_frames), fps_(meta.fps), options_(o) {
    if (paths_.size() != meta.size())
      throw error("file_decoder: " + std::to_string(paths_.size()) + " paths for " +
                  std::to_string(meta.size()) + " metadata rows");
    if (options_.frame_interval < 0)
      throw error("file_decoder: frame_interval must be ≥ 0, got " +
                  std::to_string(options_.frame_interval));
    if (options_.frame_interval == 0 &&
        !(options_.fps_max > 0.0 && options_.fps_max < std::numeric_limits<double>::infinity()))
      throw error("file_decoder: fps_max must be a positive number");
  }
  file_decoder(std::vector<std::string> paths, const meta_table& meta)
      : file_decoder(std::move(paths), meta, options{}) {}

  /// The frame interval of sample `i`.
  [[nodiscard]] std::int64_t interval(std::size_t i) const noexcept {
    if (options_.frame_interval > 0) return options_.frame_interval;
    const double fps = fps_[i];
    if (std::isnan(fps) || fps < options_.fps_max) return 1;
    return static_cast<std::int64_t>(std::ceil(fps / options_.fps_max));
  }

  [[nodiscard]] const std::string& path(std::size_t i) const noexcept { return paths_[i]; }
  [[nodiscard]] std::size_t size() const noexcept { return paths_.size(); }

  /// Decodes the task's clip into `out`; nullopt on success, else a one-line message naming the
  /// file. Thread-safe (nothing shared is written).
  std::optional<std::string> decode(const vbucket::clip_task& t,
                                    std::span<std::uint8_t> out) const {
    if (t.sample >= paths_.size())
      return "file_decoder: sample " + std::to_string(t.sample) + " has no path";
    const std::string& file = paths_[t.sample];
    const std::int64_t step = t.frames == 1 ? 1 : interval(t.sample);
    const auto start = temporal_random_crop(frames_[t.sample], t.frames, step, t.seed);
    if (!start)
      return file + ": " + std::to_string(frames_[t.sample]) + " frames are too few for " +
             std::to_string(t.frames) + " frames at interval " + std::to_string(step);
    clip_request req;
    req.start = *start;
    req.frames = t.frames;
    req.interval = step;
    req.height = t.height;
    req.width = t.width;
    req.layout = t.layout == vbucket::clip_layout::thwc ? layout::thwc : layout::cthw;
    req.threads = options_.threads;
    req.filter = options_.filter;
    req.limits = options_.limits;
    if (clip_bytes(req) != out.size())
      return file + ": the slot holds " + std::to_string(out.size()) + " bytes, the clip needs " +
             std::to_string(clip_bytes(req));
    auto r = decode_clip(file, req, out);
    if (!r) return r.error();
    return std::nullopt;
  }

 private:
  std::vector<std::string> paths_;
  std::vector<std::int64_t> frames_;
  std::vector<double> fps_;
  options options_;
};

static_assert(vbucket::clip_decoder<file_decoder>);

}  // namespace vbucket::ffmpeg
