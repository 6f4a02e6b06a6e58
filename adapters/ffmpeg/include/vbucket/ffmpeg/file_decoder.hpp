#pragma once
/// `file_decoder`: a `vbucket::clip_decoder` over media files, for `vbucket::loader`. Sample i
/// is a file with its probed frame count and fps; a task decodes the bucket's T frames with
/// the sample's frame interval, from a start drawn by `temporal_random_crop` with the task's
/// seed (the frames Open-Sora's linspace picks, or every interval-th: `options::choice`),
/// resized and center-cropped to the bucket's H × W.
///
/// The samples are the trainer's own records (any random-access range of a `media_record`:
/// `video_meta` with a path, read as `meta_traits<T>::path(r)` where the trainer's traits
/// specialisation has one, else the member `r.path`), or a `meta_table` with the paths as a
/// vector or as a callable `sample index -> path`.
///
/// The frame interval follows the bucket rule: Open-Sora 2.0 thins to at most `fps_max` frames
/// per second (interval ceil(fps / fps_max) when fps ≥ fps_max, else 1); Open-Sora v1.2 uses a
/// fixed `frame_interval`. Use the same values as the rule that assigned the buckets.
///
///     struct clip { std::int64_t num_frames, height, width; double fps; std::string path; };
///     std::vector<clip> records = ...;
///     const vbucket::ffmpeg::file_decoder decoder(records, {.fps_max = 16});
///     vbucket::loader loader(sampler, decoder, ring);

#include <atomic>       // std::atomic
#include <concepts>     // std::convertible_to, std::invocable
#include <cstdint>      // std::int64_t, std::uint8_t
#include <functional>   // std::function
#include <limits>       // std::numeric_limits
#include <memory>       // std::make_shared, std::shared_ptr
#include <optional>     // std::optional
#include <ranges>       // std::ranges::random_access_range
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::invoke_result_t
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/meta.hpp"
#include "vbucket/bucket/rules.hpp"  // frame_interval
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/load/loader.hpp"

namespace vbucket::ffmpeg {

namespace detail {
template <class T>
concept traits_path = requires(const T& r) {
  vbucket::meta_traits<T>::path(r);
};

/// A record's file: `meta_traits<T>::path(r)` when the traits have one, else `r.path`.
template <class T>
  requires traits_path<T>
decltype(auto) record_path(const T& r) { return vbucket::meta_traits<T>::path(r); }
template <class T>
  requires(!traits_path<T> && requires(const T& r) { r.path; })
const auto& record_path(const T& r) { return r.path; }
}  // namespace detail

/// A sample type `file_decoder` reads directly: `video_meta` plus a path (see `record_path`).
///
///     struct clip { std::int64_t num_frames, height, width; double fps; std::string path; };
///     static_assert(vbucket::ffmpeg::media_record<clip>);
template <class T>
concept media_record = vbucket::video_meta<T> && requires(const T& r) {
  { detail::record_path(r) } -> std::convertible_to<std::string_view>;
};

/// A `file_decoder`'s options (`file_decoder::options`). At namespace scope: a nested struct
/// with default member initializers cannot be a defaulted argument inside its class (clang).
struct file_decoder_options {
  /// Open-Sora 2.0's fps thinning (used when `frame_interval` is 0).
  double fps_max = 16.0;
  /// A fixed interval (Open-Sora v1.2's `frame_interval`); 0 = from fps and `fps_max`.
  std::int64_t frame_interval = 0;
  /// Which frames of the crop a clip takes (`vbucket::frame_choice`): Open-Sora's linspace by
  /// default, as Open-Sora's dataset reads them.
  frame_choice choice = frame_choice::opensora;
  int threads = 1;  ///< decoder threads per clip
  resize_filter filter = resize_filter::bilinear;
  ffmpeg::limits limits{};
  /// The frame index from `vbucket scan --index` (`frame_index::load`), shared by the
  /// decoder's copies; a stale entry is ignored and counted (`stale_index_entries`).
  std::shared_ptr<const frame_index> index{};
};

class file_decoder {
 public:
  using options = file_decoder_options;

  /// `paths[i]` is sample i of `meta`. Throws `vbucket::error` when the sizes differ or an
  /// option is invalid.
  file_decoder(std::vector<std::string> paths, const meta_table& meta, options o) : options_(o) {
    read_meta(meta);
    if (paths.size() != meta.size())
      throw error("file_decoder: " + std::to_string(paths.size()) + " paths for " +
                  std::to_string(meta.size()) + " metadata rows");
    path_of_ = [p = std::make_shared<const std::vector<std::string>>(std::move(paths))](
                   std::size_t i) { return (*p)[i]; };
    validate();
  }
  file_decoder(std::vector<std::string> paths, const meta_table& meta)
      : file_decoder(std::move(paths), meta, options{}) {}

  /// Sample i of `meta` is the file `path_of(i)` (called from the loader's workers at once).
  template <class PathOf>
    requires std::invocable<const PathOf&, std::size_t> &&
        std::convertible_to<std::invoke_result_t<const PathOf&, std::size_t>, std::string_view>
        file_decoder(PathOf path_of, const meta_table& meta, options o = {}) : options_(o) {
      read_meta(meta);
      path_of_ = [f = std::move(path_of)](std::size_t i) {
        return std::string(std::string_view(f(i)));
      };
      validate();
    }

    /// Over the trainer's own records: sample i is `records[i]`, its frames and fps read through
    /// `meta_traits`, its file through `record_path`. The records are referenced, not copied,
    /// and must outlive the decoder (as the samples outlive a sampler).
    template <std::ranges::random_access_range Records>
      requires std::ranges::sized_range<Records> &&
          media_record<std::ranges::range_value_t<Records>>
    explicit file_decoder(const Records& records, options o = {}) : options_(o) {
      frames_.reserve(std::ranges::size(records));
      fps_.reserve(std::ranges::size(records));
      for (const auto& r : records) {
        const vbucket::sample_meta m = vbucket::to_sample_meta(r);
        frames_.push_back(m.num_frames);
        fps_.push_back(m.fps);
      }
      path_of_ = [&records](std::size_t i) {
        return std::string(std::string_view(
            detail::record_path(std::ranges::begin(records)[static_cast<std::ptrdiff_t>(i)])));
      };
      validate();
    }
    /// A temporary range of records would dangle.
    template <std::ranges::random_access_range Records>
      requires std::ranges::sized_range<Records> &&
          media_record<std::ranges::range_value_t<Records>>
    explicit file_decoder(const Records&& records, options o = {}) = delete;

    /// The frame interval of sample `i`.
    [[nodiscard]] std::int64_t interval(std::size_t i) const noexcept {
      if (options_.frame_interval > 0) return options_.frame_interval;
      return vbucket::frame_interval(fps_[i], options_.fps_max);  // the rule's, saturating
    }

    /// The file of sample `i` (i < size()).
    [[nodiscard]] std::string path(std::size_t i) const { return path_of_(i); }
    [[nodiscard]] std::size_t size() const noexcept { return frames_.size(); }

    /// Decodes the task's clip into `out`; nullopt on success, else a one-line message naming the
    /// file. Thread-safe (nothing shared is written).
    std::optional<std::string> decode(const vbucket::clip_task& t,
                                      std::span<std::uint8_t> out) const {
      if (t.sample >= size())
        return "file_decoder: sample " + std::to_string(t.sample) + " has no path";
      const std::string file = path_of_(t.sample);
      const std::int64_t step = t.frames == 1 ? 1 : interval(t.sample);
      const auto start =
          temporal_random_crop(frames_[t.sample], t.frames, step, t.seed, options_.choice);
      if (!start)
        return file + ": " + std::to_string(frames_[t.sample]) + " frames are too few for " +
               std::to_string(t.frames) + " frames at interval " + std::to_string(step);
      clip_request req;
      req.start = *start;
      req.frames = t.frames;
      req.interval = step;
      req.choice = options_.choice;
      req.height = t.height;
      req.width = t.width;
      req.layout = t.layout;
      req.threads = options_.threads;
      req.filter = options_.filter;
      req.limits = options_.limits;
      req.index = options_.index.get();
      if (clip_bytes(req) != out.size())
        return file + ": the slot holds " + std::to_string(out.size()) + " bytes, the clip needs " +
               std::to_string(clip_bytes(req));
      auto r = decode_clip(file, req, out);
      // The network's failure may pass: the loader waits and tries the same clip again.
      if (!r && r.transient()) throw vbucket::source_unavailable(r.error());
      if (!r) return r.error();
      if (r->index_stale) stale_->fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }

    /// Clips decoded without the frame index because the file's entry was stale (its size or
    /// mtime changed since the scan), over this decoder and its copies.
    [[nodiscard]] std::int64_t stale_index_entries() const noexcept {
      return stale_->load(std::memory_order_relaxed);
    }

   private:
    void validate() const {
      if (options_.frame_interval < 0)
        throw error("file_decoder: frame_interval must be ≥ 0, got " +
                    std::to_string(options_.frame_interval));
      if (options_.frame_interval == 0 &&
          !(options_.fps_max > 0.0 && options_.fps_max < std::numeric_limits<double>::infinity()))
        throw error("file_decoder: fps_max must be a positive number");
    }

    std::function<std::string(std::size_t)> path_of_;
    /// Frames and fps of every row of `meta`.
    void read_meta(const meta_table& meta) {
      frames_.resize(meta.size());
      fps_.resize(meta.size());
      for (std::size_t i = 0; i < meta.size(); ++i) {
        const vbucket::sample_meta m = meta[i];
        frames_[i] = m.num_frames;
        fps_[i] = m.fps;
      }
    }

    std::vector<std::int64_t> frames_;
    std::vector<double> fps_;
    options options_;
    std::shared_ptr<std::atomic<std::int64_t>> stale_ =
        std::make_shared<std::atomic<std::int64_t>>(0);
};

static_assert(vbucket::clip_decoder<file_decoder>);

}  // namespace vbucket::ffmpeg
