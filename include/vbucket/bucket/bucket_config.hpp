#pragma once
/// The bucket config: resolution -> frames -> (keep probability, or a pair (p_resolution,
/// p_frames)) + per-GPU batch size, as Open-Sora's Python dict. Validated on construction;
/// buckets get dense ids in Open-Sora's search order.

#include <algorithm>    // std::stable_sort
#include <charconv>     // std::to_chars (probabilities in messages)
#include <cmath>        // std::isnan
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int32_t, std::int64_t
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "aspect.hpp"
#include "vbucket/base/error.hpp"

namespace vbucket {

/// A bucket id: dense in [0, num_buckets()), or one of the negative codes below.
using bucket_id = std::int32_t;
/// The rule chose no bucket: the sample is not used this epoch.
inline constexpr bucket_id no_bucket = -1;
/// The sample's metadata cannot be bucketed (frames, height or width below 1).
inline constexpr bucket_id invalid_sample = -2;
/// A bucket id in 16 bits, for configs of at most `max_compact_buckets` buckets (their ids,
/// no_bucket and invalid_sample all fit): half the memory of `bucket_id` where the ids of a
/// whole epoch are held (`compact_ids`, the planners' overloads that take them).
using compact_bucket_id = std::int16_t;
/// The most buckets a config may have for its ids to be `compact_bucket_id`s.
inline constexpr std::size_t max_compact_buckets = 32767;

/// One config entry as written by a user: `{"360p": {"102": [[0.15, 0.33], 4]}}` is
/// {"360p", 102, 0.15, 0.33, 4}. No `p_frames` means a single probability; no batch
/// size (JSON null) means disabled, which requires p_resolution == 0.
struct bucket_spec {
  std::string resolution;
  std::int64_t frames = 0;
  double p_resolution = 0.0;
  std::optional<double> p_frames;
  std::optional<std::int64_t> batch_size;
};

/// One frames key of a resolution, in a validated config.
struct frames_entry {
  std::int64_t frames = 0;
  double p_resolution = 0.0;
  double p_frames = 1.0;  // meaningful only when `pair`
  bool pair = false;
  std::int64_t batch_size = 0;  // 0: disabled
};

/// One resolution of a validated config, with its frames keys from most to fewest.
struct resolution_entry {
  resolution_info info;
  double min_pixels = 0.0;           // 0.8 * pixels: smaller samples skip this resolution
  std::vector<frames_entry> frames;  // descending
  bucket_id first_bucket = 0;        // id of (this, frames[0], ratio 0)
  std::int32_t first_pair = 0;       // Open-Sora v1.2's bucket_id[res][frames[0]]
  std::int32_t image_index = -1;     // index into `frames` of the key 1, or -1
};

/// A bucket's identity and target shape.
struct bucket_key {
  std::int32_t resolution = 0;  // index into bucket_config::resolutions()
  std::int32_t frames_index = 0;
  std::int32_t ratio_index = 0;
};

/// The validated config. Resolutions are ordered from most pixels to fewest (ties keep the
/// order of first appearance), frames keys from most to fewest. Bucket ids enumerate
/// (resolution, frames, ratio) in that order; `num_buckets()` is Open-Sora's `num_bucket`.
class bucket_config {
 public:
  bucket_config() = default;

  /// Validates `specs` and resolves every resolution through `tables`. Throws
  /// `vbucket::error` naming the resolution and frames key on any problem.
  template <resolution_source Tables>
  bucket_config(std::span<const bucket_spec> specs, const Tables& tables) {
    if (specs.empty()) throw error("bucket config has no buckets");
    for (const auto& s : specs) {
      const std::string where =
          "bucket \"" + s.resolution + "\" -> \"" + std::to_string(s.frames) + "\"";
      if (s.resolution.empty()) throw error("bucket config: empty resolution name");
      if (s.frames < 1 || s.frames > max_frames)
        throw error(where + ": frames must be an integer in [1, " + std::to_string(max_frames) +
                    "]");
      check_probability(where, "probability", s.p_resolution);
      if (s.p_frames) check_probability(where, "frames probability", *s.p_frames);
      if (s.batch_size) {
        if (*s.batch_size < 1 || *s.batch_size > max_batch)
          throw error(where + ": batch size must be a positive integer (at most " +
                      std::to_string(max_batch) + "), got " + std::to_string(*s.batch_size));
      } else if (s.p_resolution != 0.0) {
        throw error(where +
                    ": batch size is null but the probability is not 0 "
                    "(a disabled bucket needs probability 0)");
      }
      auto it =
          std::find_if(resolutions_.begin(), resolutions_.end(),
                       [&](const resolution_entry& r) { return r.info.name == s.resolution; });
      if (it == resolutions_.end()) {
        resolutions_.push_back({tables.resolve(s.resolution), 0.0, {}, 0, 0, -1});
        it = resolutions_.end() - 1;
        if (it->info.pixels <= 0) throw error("resolution \"" + s.resolution + "\": no pixels");
      }
      for (const auto& f : it->frames)
        if (f.frames == s.frames) throw error(where + ": duplicate frames key");
      it->frames.push_back({s.frames, s.p_resolution, s.p_frames.value_or(1.0),
                            s.p_frames.has_value(), s.batch_size.value_or(0)});
    }
    std::stable_sort(resolutions_.begin(), resolutions_.end(),
                     [](const resolution_entry& a, const resolution_entry& b) {
                       return a.info.pixels > b.info.pixels;
                     });
    std::int64_t next_bucket = 0;
    std::int32_t next_pair = 0;
    for (auto& r : resolutions_) {
      std::stable_sort(
          r.frames.begin(), r.frames.end(),
          [](const frames_entry& a, const frames_entry& b) { return a.frames > b.frames; });
      r.min_pixels = static_cast<double>(r.info.pixels) * 0.8;
      r.first_bucket = static_cast<bucket_id>(next_bucket);
      r.first_pair = next_pair;
      for (std::size_t k = 0; k < r.frames.size(); ++k)
        if (r.frames[k].frames == 1) r.image_index = static_cast<std::int32_t>(k);
      next_pair += static_cast<std::int32_t>(r.frames.size());
      next_bucket += static_cast<std::int64_t>(r.frames.size() * r.info.table.size());
      if (next_bucket > std::numeric_limits<bucket_id>::max())
        throw error("bucket config: too many buckets");
    }
    num_buckets_ = static_cast<std::size_t>(next_bucket);
    keys_.reserve(num_buckets_);
    for (std::size_t r = 0; r < resolutions_.size(); ++r)
      for (std::size_t k = 0; k < resolutions_[r].frames.size(); ++k)
        for (std::size_t a = 0; a < resolutions_[r].info.table.size(); ++a)
          keys_.push_back({static_cast<std::int32_t>(r), static_cast<std::int32_t>(k),
                           static_cast<std::int32_t>(a)});
  }

  template <resolution_source Tables>
  bucket_config(const std::vector<bucket_spec>& specs, const Tables& tables)
      : bucket_config(std::span<const bucket_spec>(specs), tables) {}

  /// The largest frames key and batch size accepted (guards against absurd values).
  static constexpr std::int64_t max_frames = std::int64_t{1} << 31;
  static constexpr std::int64_t max_batch = std::int64_t{1} << 31;

  [[nodiscard]] const std::vector<resolution_entry>& resolutions() const noexcept {
    return resolutions_;
  }
  /// Open-Sora's `num_bucket`: Σ over resolutions of (#frames keys × #ratios).
  [[nodiscard]] std::size_t num_buckets() const noexcept { return num_buckets_; }

  [[nodiscard]] bucket_key key(bucket_id id) const noexcept {
    return keys_[static_cast<std::size_t>(id)];
  }
  [[nodiscard]] const resolution_entry& resolution_of(bucket_id id) const noexcept {
    return resolutions_[static_cast<std::size_t>(key(id).resolution)];
  }
  [[nodiscard]] const frames_entry& frames_of(bucket_id id) const noexcept {
    const auto k = key(id);
    return resolutions_[static_cast<std::size_t>(k.resolution)]
        .frames[static_cast<std::size_t>(k.frames_index)];
  }
  [[nodiscard]] const aspect_entry& ratio_of(bucket_id id) const noexcept {
    const auto k = key(id);
    return resolutions_[static_cast<std::size_t>(k.resolution)]
        .info.table[static_cast<std::size_t>(k.ratio_index)];
  }
  /// Per-GPU batch size; 0 for a disabled bucket.
  [[nodiscard]] std::int64_t batch_size(bucket_id id) const noexcept {
    return frames_of(id).batch_size;
  }
  [[nodiscard]] bool enabled(bucket_id id) const noexcept { return batch_size(id) > 0; }

  /// The id of (resolution index, frames index, ratio index).
  [[nodiscard]] bucket_id id_of(std::size_t res, std::size_t frames_index,
                                std::size_t ratio) const noexcept {
    const auto& r = resolutions_[res];
    return r.first_bucket + static_cast<bucket_id>(frames_index * r.info.table.size() + ratio);
  }

  /// Finds a bucket by its names; returns no_bucket when there is none.
  [[nodiscard]] bucket_id find(std::string_view resolution, std::int64_t frames,
                               std::string_view ratio) const noexcept {
    for (std::size_t r = 0; r < resolutions_.size(); ++r) {
      if (resolutions_[r].info.name != resolution) continue;
      for (std::size_t k = 0; k < resolutions_[r].frames.size(); ++k) {
        if (resolutions_[r].frames[k].frames != frames) continue;
        const std::size_t a = resolutions_[r].info.table.find(ratio);
        if (a == resolutions_[r].info.table.size()) return no_bucket;
        return id_of(r, k, a);
      }
    }
    return no_bucket;
  }

 private:
  static void check_probability(const std::string& where, const char* what, double p) {
    if (std::isnan(p) || p < 0.0 || p > 1.0) {
      // Shortest round-trip form: std::to_string's "%f" shows 1.0000001 as "1.000000" and
      // -1e-9 as "-0.000000", which read as if they were in range.
      char buf[32];
      const auto res = std::to_chars(buf, buf + sizeof buf, p);
      throw error(where + ": " + what + " " +
                  (std::isnan(p) ? std::string("NaN") : std::string(buf, res.ptr)) +
                  " is outside [0, 1]");
    }
  }

  std::vector<resolution_entry> resolutions_;
  std::vector<bucket_key> keys_;
  std::size_t num_buckets_ = 0;
};

}  // namespace vbucket
