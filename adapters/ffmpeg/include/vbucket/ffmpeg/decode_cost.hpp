#pragma once
/// The decode cost of a sample, from the frame index, for step balancing: a clip is decoded
/// from the keyframe before its first frame to its last one, so its cost is about (frames from
/// that keyframe) × (coded pixels) × (the codec's seconds per pixel-frame). A long GOP costs a
/// clip far more than a short one, and the same bucket holds both; the planner's default batch
/// cost (latent tokens of the bucket shape) sees neither.
///
/// - `key_frames` / `frames_from_keyframe`: the frame numbers of a file's keyframes (from its
///   `file_index` entry) and what one clip decodes;
/// - `expected_frames_from_keyframe`: the mean over Open-Sora's random starts
///   (`temporal_random_crop`), exact, in O(keyframes);
/// - `decode_cost_model` + `fit_decode_cost`: seconds per megapixel-frame per codec, fitted by
///   least squares from measured decodes (`clip_info::frames_decoded` and the time taken);
/// - `sample_decode_costs`: every sample's expected decode seconds (× a weight), from the scan's
///   frame index and the fitted model: the per-sample costs `make_epoch_plan(ids, config,
///   options, cost, sample_cost)` takes, so that step balance sorts the batches themselves by
///   bucket cost + Σ their samples' decode costs (what evens out a step's loaders: a bucket
///   mean cannot, since one bucket holds GOP-30 and GOP-250 files alike);
/// - `decode_aware_cost`: a `vbucket::batch_cost` for `make_epoch_plan` / the sampler's step
///   balance: the default latent-token cost plus the mean decode cost of the samples the
///   assignment put in each bucket, weighted (per bucket only; a sampler takes per-sample
///   costs as `sampler_options::sample_costs`, the CLI as `--sample-costs FILE`).
///
///     // one decode_sample per row of META.csv: its path, codec, coded pixels, frames, interval
///     const std::vector<double> seconds =
///         vbucket::ffmpeg::sample_decode_costs(config, ids, samples, index, model);
///     // decode-bound: balance by decode seconds alone (or latent tokens + w · seconds)
///     auto plan = vbucket::make_epoch_plan(ids, config, {.balance_group = 960},
///                                          vbucket::ffmpeg::no_batch_cost{}, seconds);

#include <algorithm>    // std::max, std::min, std::upper_bound
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"            // vbucket::error
#include "vbucket/bucket/bucket_config.hpp"  // bucket_config, bucket_id
#include "vbucket/ffmpeg/frame_index.hpp"
#include "vbucket/plan/plan_options.hpp"  // latent_tokens_cost, batch_cost

namespace vbucket::ffmpeg {

/// Presentation numbers of the frames decoding can start at in `fi`, ascending: its keyframes
/// (an output-order entry: its key packets, numbered in decode order, which output order
/// follows within a reorder margin). Always starts with 0 (a file is decoded from its start).
inline std::vector<std::int64_t> key_frames(const file_index& fi) {
  std::vector<std::int64_t> keys{0};
  if (fi.output_order) {
    for (std::size_t i = 0; i < fi.packets.size(); ++i)
      if (fi.packets[i].key && i > 0) keys.push_back(static_cast<std::int64_t>(i));
  } else {
    for (const index_key& k : fi.keys)
      if (k.frame > keys.back()) keys.push_back(k.frame);
  }
  return keys;
}

/// Frames decoded for frames start, start + interval, ... (`frames` of them) when decoding
/// starts at the last keyframe at or before `start` and stops at the clip's last frame (every
/// frame in between: an upper bound of what `clip_request::skip_unwanted` decodes).
/// `keys`: ascending, keys[0] = 0.
inline std::int64_t frames_from_keyframe(std::span<const std::int64_t> keys, std::int64_t start,
                                         std::int64_t frames, std::int64_t interval) noexcept {
  const auto after = std::upper_bound(keys.begin(), keys.end(), start);
  const std::int64_t key = after == keys.begin() ? 0 : *(after - 1);
  return start + (frames - 1) * interval - key + 1;
}

/// The mean of `frames_from_keyframe` over the starts `temporal_random_crop` draws for a video
/// of `total` frames (uniform on 0 … max(0, total − frames · interval − 1)); 0 when the video
/// is too short for the clip. Exact: the sum runs over the stretches between keyframes.
inline double expected_frames_from_keyframe(std::span<const std::int64_t> keys, std::int64_t total,
                                            std::int64_t frames, std::int64_t interval) noexcept {
  if (frames < 1 || interval < 1 || total < (frames - 1) * interval + 1) return 0.0;
  const std::int64_t last = std::max<std::int64_t>(0, total - frames * interval - 1);
  const double count = static_cast<double>(last + 1);
  // Σ_s (s + span − key(s)) with span = (frames − 1) · interval + 1.
  const double span = static_cast<double>((frames - 1) * interval + 1);
  double sum = count * span + static_cast<double>(last) * count / 2.0;
  for (std::size_t i = 0; i < keys.size() && keys[i] <= last; ++i) {
    const std::int64_t to = i + 1 < keys.size() ? std::min(keys[i + 1] - 1, last) : last;
    sum -= static_cast<double>(keys[i]) * static_cast<double>(to - keys[i] + 1);
  }
  return sum / count;
}

/// Seconds a decoder spends per megapixel-frame (coded pixels × frames decoded), per codec
/// (FFmpeg's name, as `probe` reports it: "h264", "hevc", "vp9", "av1", ...).
struct decode_cost_model {
  struct codec_rate {
    std::string codec;
    double seconds_per_megapixel_frame = 0.0;
  };
  std::vector<codec_rate> rates;
  /// For codecs not in `rates`.
  double fallback = 0.0;

  [[nodiscard]] double rate(std::string_view codec) const noexcept {
    for (const codec_rate& r : rates)
      if (r.codec == codec) return r.seconds_per_megapixel_frame;
    return fallback;
  }
  /// A clip's expected decode seconds: `frames_decoded` frames of `pixels` coded pixels.
  [[nodiscard]] double seconds(std::string_view codec, std::int64_t pixels,
                               double frames_decoded) const noexcept {
    return rate(codec) * static_cast<double>(pixels) * 1e-6 * frames_decoded;
  }
};

/// One measured decode: the codec, the coded pixels of a frame, `clip_info::frames_decoded`
/// and the time it took (CPU seconds of the decode).
struct decode_measurement {
  std::string codec;
  std::int64_t pixels = 0;
  std::int64_t frames_decoded = 0;
  double seconds = 0.0;
};

/// Fits `decode_cost_model` to measurements: per codec, seconds = rate × megapixel-frames by
/// least squares through the origin (rate = Σ x·y / Σ x²); `fallback` is the fit over all of
/// them. Throws `vbucket::error` without a measurement of positive work.
inline decode_cost_model fit_decode_cost(std::span<const decode_measurement> measured) {
  decode_cost_model m;
  std::vector<double> xy, xx;
  double all_xy = 0.0, all_xx = 0.0;
  for (const decode_measurement& d : measured) {
    const double x = static_cast<double>(d.pixels) * 1e-6 * static_cast<double>(d.frames_decoded);
    if (!(x > 0.0)) continue;
    std::size_t c = 0;
    while (c < m.rates.size() && m.rates[c].codec != d.codec) ++c;
    if (c == m.rates.size()) {
      m.rates.push_back({d.codec, 0.0});
      xy.push_back(0.0);
      xx.push_back(0.0);
    }
    xy[c] += x * d.seconds;
    xx[c] += x * x;
    all_xy += x * d.seconds;
    all_xx += x * x;
  }
  if (m.rates.empty()) throw error("fit_decode_cost: no measurement with frames and pixels");
  for (std::size_t c = 0; c < m.rates.size(); ++c)
    m.rates[c].seconds_per_megapixel_frame = xy[c] / xx[c];
  m.fallback = all_xy / all_xx;
  return m;
}

/// A batch cost for step balancing that includes decoding: latent tokens of the bucket shape ×
/// batch size (the default, `latent_tokens_cost`) plus `tokens_per_second` × the mean decode
/// seconds of the samples `ids` assigned to the bucket × batch size. The means are taken once,
/// here, from the assignment the plan is made from, so the cost stays a pure function of
/// (config, bucket, batch size), as `batch_cost` requires. A bucket without samples costs its
/// tokens.
class decode_aware_cost {
 public:
  /// `ids[i]`: sample i's bucket (as `assign_all` gives; other codes are skipped);
  /// `seconds[i]`: its decode cost. `tokens_per_second`: how many latent tokens of training
  /// one second of decoding weighs (≥ 0; 0 gives the default cost).
  decode_aware_cost(const bucket_config& config, std::span<const bucket_id> ids,
                    std::span<const double> seconds, double tokens_per_second,
                    token_formula formula = {})
      : tokens_{formula}, weight_(tokens_per_second), mean_(config.num_buckets(), 0.0) {
    if (ids.size() != seconds.size())
      throw error("decode_aware_cost: " + std::to_string(ids.size()) + " bucket ids but " +
                  std::to_string(seconds.size()) + " decode costs");
    if (!(tokens_per_second >= 0.0))
      throw error("decode_aware_cost: tokens_per_second must be a number ≥ 0");
    std::vector<std::int64_t> count(mean_.size(), 0);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const bucket_id b = ids[i];
      if (b < 0 || static_cast<std::size_t>(b) >= mean_.size()) continue;
      if (!(seconds[i] >= 0.0))
        throw error("decode_aware_cost: sample " + std::to_string(i) +
                    " has a decode cost that is not a number ≥ 0");
      mean_[static_cast<std::size_t>(b)] += seconds[i];
      ++count[static_cast<std::size_t>(b)];
    }
    for (std::size_t b = 0; b < mean_.size(); ++b)
      if (count[b] > 0) mean_[b] /= static_cast<double>(count[b]);
  }

  double operator()(const bucket_config& config, bucket_id b,
                    std::int64_t batch_size) const noexcept {
    const double decode = b >= 0 && static_cast<std::size_t>(b) < mean_.size()
                              ? mean_[static_cast<std::size_t>(b)]
                              : 0.0;
    return tokens_(config, b, batch_size) + weight_ * decode * static_cast<double>(batch_size);
  }

  /// The mean decode seconds of bucket b's samples.
  [[nodiscard]] double mean_seconds(bucket_id b) const noexcept {
    return b >= 0 && static_cast<std::size_t>(b) < mean_.size() ? mean_[static_cast<std::size_t>(b)]
                                                                : 0.0;
  }

 private:
  latent_tokens_cost tokens_;
  double weight_ = 0.0;
  std::vector<double> mean_;
};

static_assert(vbucket::batch_cost<decode_aware_cost>);

/// A batch cost of 0, for a plan balanced by its per-sample costs alone (a decode-bound run:
/// `make_epoch_plan(ids, config, options, no_batch_cost{}, sample_decode_costs(...))`).
struct no_batch_cost {
  double operator()(const bucket_config&, bucket_id, std::int64_t) const noexcept { return 0.0; }
};
static_assert(vbucket::batch_cost<no_batch_cost>);

/// What one sample's expected decode cost needs: its file (`path`, as the frame index records
/// it: META.csv's), its codec (FFmpeg's name; "" or one the model lacks: the model's fallback),
/// the coded pixels of a frame, the video's frames and the frame interval the rule samples it
/// at (Open-Sora 2.0: `vbucket::frame_interval(fps, fps_max)`).
struct decode_sample {
  std::string_view path;
  std::string_view codec;
  std::int64_t pixels = 0;
  std::int64_t frames = 0;
  std::int64_t interval = 1;
};

/// Every sample's expected decode seconds × `weight`, for `make_epoch_plan(..., sample_cost)`:
/// sample i, in bucket ids[i] of T = `config.frames_of(ids[i]).frames` frames, costs
/// `model.seconds(codec, pixels, expected_frames_from_keyframe(keys, frames, T, interval))`,
/// with `keys` its file's keyframes (`key_frames` of its entry in `index`; a file without one is
/// taken to have a keyframe every `assumed_gop` frames). A sample without a bucket costs 0,
/// and so does a video too short for its bucket's clip. `weight` converts seconds into the
/// batch cost's unit (1 with `no_batch_cost`; latent tokens per second of decoding with
/// `latent_tokens_cost`). A sample moved to another bucket (downgrade) keeps its own bucket's
/// cost. Throws `vbucket::error` when the sizes differ, `weight` is not a finite number ≥ 0 or
/// `assumed_gop` < 1.
inline std::vector<double> sample_decode_costs(const bucket_config& config,
                                               std::span<const bucket_id> ids,
                                               std::span<const decode_sample> samples,
                                               const frame_index& index,
                                               const decode_cost_model& model, double weight = 1.0,
                                               std::int64_t assumed_gop = 250) {
  if (ids.size() != samples.size())
    throw error("sample_decode_costs: " + std::to_string(ids.size()) + " bucket ids but " +
                std::to_string(samples.size()) + " samples");
  if (!(weight >= 0.0) || !(weight < std::numeric_limits<double>::infinity()))
    throw error("sample_decode_costs: the weight must be a finite number >= 0");
  if (assumed_gop < 1) throw error("sample_decode_costs: assumed_gop must be at least 1");
  std::vector<double> out(ids.size(), 0.0);
  std::vector<std::int64_t> keys;
  const file_index* keys_of = nullptr;  // the entry `keys` are of (nullptr: assumed)
  std::optional<std::string_view> last_path;
  const file_index* last_entry = nullptr;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bucket_id b = ids[i];
    if (b < 0 || static_cast<std::size_t>(b) >= config.num_buckets()) continue;
    const decode_sample& s = samples[i];
    // Consecutive clips of one file look it up once.
    const file_index* entry = s.path == last_path ? last_entry : index.find(s.path);
    last_path = s.path;
    last_entry = entry;
    if (entry == nullptr) {
      keys.clear();
      for (std::int64_t k = 0; k < s.frames; k += assumed_gop) keys.push_back(k);
      if (keys.empty()) keys.push_back(0);
      keys_of = nullptr;
    } else if (entry != keys_of) {
      keys = key_frames(*entry);
      keys_of = entry;
    }
    const double frames = expected_frames_from_keyframe(keys, s.frames, config.frames_of(b).frames,
                                                        s.interval < 1 ? 1 : s.interval);
    out[i] = weight * model.seconds(s.codec, s.pixels, frames);
  }
  return out;
}

}  // namespace vbucket::ffmpeg
