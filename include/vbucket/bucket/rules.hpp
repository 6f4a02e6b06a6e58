#pragma once
/// Bucket rules as policies: `opensora_v2_rule` and `opensora_v12_rule` reproduce Open-Sora's
/// `get_bucket_id` exactly (draw for draw, given `numpy_source`); a user rule plugs in by
/// satisfying `bucket_rule`. Both built-in rules report their walk to a trace
/// (`assign_traced`, `rule_event`): what `explain_assignment` (explain.hpp) shows for one sample.

#include <cmath>     // std::isnan, std::ceil
#include <concepts>  // std::same_as
#include <cstddef>   // std::size_t
#include <cstdint>   // std::int64_t, std::uint64_t
#include <limits>    // std::numeric_limits
#include <string>    // std::to_string
#include <vector>    // std::vector (rule_trace)

#include "bucket_config.hpp"
#include "meta.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/base/random.hpp"

namespace vbucket {

/// A bucket rule maps one sample (its metadata and index) to a bucket id of a config, or to
/// `no_bucket`/`invalid_sample`, drawing only from `source.stream(index, ·)`. Semantic
/// requirements: a pure function of (config, meta, index, source) — no hidden state — so
/// assignment is the same whatever the thread count; it must accept any metadata values
/// (NaN, negatives, huge) without undefined behaviour.
///
///     struct my_rule { template <class S> vbucket::bucket_id assign(const vbucket::bucket_config&,
///       const vbucket::sample_meta&, std::uint64_t index, const S& source) const; };
template <class R, class Source = fast_source>
concept bucket_rule = random_source<Source> &&
    requires(const R& r, const bucket_config& c, const sample_meta& m, std::uint64_t i,
             const Source& s) {
  { r.assign(c, m, i, s) } -> std::same_as<bucket_id>;
};

/// One decision of a built-in rule's walk over one sample (`assign_traced`): which resolution
/// and frames key were tried, the draw and the probability tested, and the outcome.
struct rule_event {
  enum class step : std::uint8_t {
    invalid,       ///< the metadata cannot be bucketed (no frame, or a side outside [1, 2^24])
    frames,        ///< the frames the rule works with: `value` (v2: after fps thinning by the
                   ///< interval `probability`; v1.2: the longest key allowed, T > key · interval)
    too_small,     ///< `resolution` skipped: H·W < 0.8 · its pixels
    no_image_key,  ///< an image, and `resolution` has no frames key 1
    too_long,      ///< key `frames_index` skipped: more frames than the clip has (or the key 1)
    fewer_frames,  ///< a pair's p_frames test: `passed` = moved on to fewer frames
    keep,          ///< the p_resolution test (p for an image): `passed` = bucket taken, else
                   ///< a downgrade (the walk leaves the resolution)
    fast_draw,     ///< fast draws: the one uniform `draw` that picks the outcome
    fast_outcome,  ///< fast draws: an outcome (`probability`, cumulative `value`); `passed`:
                   ///< draw < cumulative, the outcome taken
    chosen,        ///< the bucket `bucket`
    none,          ///< no bucket: the sample is not used this epoch
  };
  step what = step::none;
  std::int64_t resolution = -1;    ///< index into `bucket_config::resolutions()`
  std::int64_t frames_index = -1;  ///< index into that resolution's `frames`
  double draw = std::numeric_limits<double>::quiet_NaN();  ///< NaN: the test drew nothing
  double probability = std::numeric_limits<double>::quiet_NaN();
  double value = std::numeric_limits<double>::quiet_NaN();
  bool passed = false;
  bucket_id bucket = no_bucket;
};

/// A trace that records every event of a walk (`assign_traced`).
struct rule_trace {
  static constexpr bool enabled = true;
  std::vector<rule_event> events;
  void operator()(const rule_event& e) { events.push_back(e); }
};

namespace detail {
/// The trace of `assign`: records nothing, costs nothing.
struct no_trace {
  static constexpr bool enabled = false;
  void operator()(const rule_event&) const noexcept {}
};
/// Records `e` when the trace records (the argument is not even built otherwise).
template <class Trace, class Make>
inline void note(Trace& trace, Make&& make) {
  if constexpr (Trace::enabled) trace(make());
}
using ev = rule_event::step;
/// Samples with fewer than one frame or pixel row/column cannot be bucketed; sizes are
/// capped so that H·W is exact in a double, as Python's exact int/float comparison needs.
inline constexpr std::int64_t max_side = max_meta_side;
inline bool valid_meta(const sample_meta& m) noexcept {
  return m.num_frames >= 1 && m.height >= 1 && m.width >= 1 && m.height <= max_side &&
         m.width <= max_side;
}
/// A rule's walk begins here: false for metadata that cannot be bucketed, reported to `trace`
/// (its bucket is `invalid_sample`).
template <class Trace>
inline bool walk_valid(const sample_meta& m, Trace& trace) {
  if (valid_meta(m)) return true;
  note(trace, [] { return rule_event{.what = ev::invalid, .bucket = invalid_sample}; });
  return false;
}
/// The number of keys of `r` a video can take: all but the key 1, which is the last.
inline std::size_t video_keys(const resolution_entry& r) noexcept {
  return r.image_index >= 0 ? static_cast<std::size_t>(r.image_index) : r.frames.size();
}
/// The number of resolutions too large for the sample (H·W < 0.8 · pixels). Resolutions are
/// in descending order of pixels, so these are a prefix; counting them all has a fixed trip
/// count, and so no branch that depends on the sample's size.
inline std::size_t too_large(const bucket_config& c, const sample_meta& m) noexcept {
  const double pixels = static_cast<double>(m.height * m.width);
  std::size_t count = 0;
  for (const resolution_entry& r : c.resolutions())
    count += static_cast<std::size_t>(pixels < r.min_pixels);
  return count;
}
/// The number of keys among the first n longer than `frames` frames. Keys are in descending
/// order, so they are a prefix; counting them all (rather than stopping at the first shorter
/// one) has a fixed trip count and so no branch that depends on the clip's length.
inline std::size_t longer_keys(const frames_entry* keys, std::size_t n,
                               std::int64_t frames) noexcept {
  std::size_t count = 0;
  for (std::size_t k = 0; k < n; ++k) count += static_cast<std::size_t>(keys[k].frames > frames);
  return count;
}
/// A probability of the config clamped to [0, 1]: `random() < p` and `random() ≤ p` both hold
/// with probability p for p in [0, 1], always for p ≥ 1 and never for p ≤ 0.
inline double clamp_probability(double p) noexcept { return p >= 1.0 ? 1.0 : (p > 0.0 ? p : 0.0); }

/// Open-Sora 2.0's rule as a distribution: the outcomes of its walk, in the walk's order, for a
/// sample for which the first `r0` resolutions are too large, that is an image (`image`) or a
/// video whose keys longer than `t_eff` are skipped. For each outcome (resolution ri, frames key
/// k) of positive probability q it calls `visit(ri, k, q, cumulative)`, with `cumulative` the
/// sum of q over this and the earlier outcomes; it stops when visit returns true. Returns the
/// probability of no bucket. This one function defines the fast draws of the 2.0 rule: with
/// one uniform u, the outcome is the first whose cumulative exceeds u, and no bucket when none
/// does (`opensora_v2_rule` with `fast_source` walks it per sample; `compiled_v2_rule` stores
/// its cumulatives per class of samples), so both give the same bucket for every sample.
template <class Visit>
double v2_outcomes(const bucket_config& c, std::size_t r0, bool image, std::int64_t t_eff,
                   Visit&& visit) {
  const auto& res = c.resolutions();
  double remaining = 1.0;  // probability that the walk reaches the next resolution
  double cumulative = 0.0;
  for (std::size_t ri = r0; ri < res.size(); ++ri) {
    const resolution_entry& r = res[ri];
    if (image) {
      if (r.image_index < 0) continue;
      const auto k = static_cast<std::size_t>(r.image_index);
      const double a = clamp_probability(r.frames[k].p_resolution);
      const double q = remaining * a;
      remaining *= 1.0 - a;
      if (q > 0.0) {
        cumulative += q;
        if (visit(ri, k, q, cumulative)) return remaining;
      }
      continue;
    }
    const std::size_t n = video_keys(r);
    double reach = remaining;  // probability of reaching key k within this resolution
    double leave = 0.0;        // probability of leaving this resolution by a downgrade
    for (std::size_t k = longer_keys(r.frames.data(), n, t_eff); k < n; ++k) {
      const frames_entry& f = r.frames[k];
      const double skip = f.pair ? clamp_probability(f.p_frames) : 0.0;
      const double stay = reach * (1.0 - skip);
      reach *= skip;
      const double a = clamp_probability(f.p_resolution);
      const double q = stay * a;
      leave += stay * (1.0 - a);
      if (q > 0.0) {
        cumulative += q;
        if (visit(ri, k, q, cumulative)) return remaining;
      }
    }
    remaining = reach + leave;
  }
  return remaining;
}

/// The bucket of frames key k of resolution r for this sample's closest ratio.
inline bucket_id ratio_bucket(const resolution_entry& r, std::size_t k,
                              const sample_meta& m) noexcept {
  return r.first_bucket +
         static_cast<bucket_id>(k * r.info.table.size() + r.info.table.closest(m.height, m.width));
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Building blocks for a rule of your own (see examples/custom_rule).
// ---------------------------------------------------------------------------------------------

/// Whether a sample can be bucketed at all: at least one frame and sides in [1, 2^24] (so that
/// H·W is exact in a double). A rule returns `invalid_sample` for any other.
inline bool bucketable(const sample_meta& m) noexcept { return detail::valid_meta(m); }

/// The index (into `config.resolutions()`, largest first) of the first resolution the sample is
/// large enough for: Open-Sora skips a resolution when H·W < 0.8 · its pixels. Equals the
/// number of resolutions when it fits none.
inline std::size_t first_fitting_resolution(const bucket_config& config,
                                            const sample_meta& m) noexcept {
  return detail::too_large(config, m);
}

/// The bucket of frames entry `k` (into `config.resolutions()[r].frames`, longest first) of
/// resolution `r` at the sample's closest aspect ratio in that resolution's table (ties to the
/// earlier entry, as Open-Sora). Preconditions: r and k in range, m bucketable.
inline bucket_id bucket_for(const bucket_config& config, std::size_t r, std::size_t k,
                            const sample_meta& m) noexcept {
  return detail::ratio_bucket(config.resolutions()[r], k, m);
}

/// Open-Sora 2.0's frame interval: 1 when fps is unknown (NaN) or below fps_max, else
/// ceil(fps / fps_max); a clip of T frames then has T / interval usable frames. Saturates
/// rather than overflowing for absurd rates; fps_max must be positive.
inline std::int64_t frame_interval(double fps, double fps_max) noexcept {
  if (std::isnan(fps) || !(fps >= fps_max)) return 1;
  const double q = std::ceil(fps / fps_max);
  if (!(q >= 1.0)) return 1;
  if (!(q < static_cast<double>(std::numeric_limits<std::int64_t>::max())))
    return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(q);
}

/// Open-Sora 2.0's rule. Frames are first thinned to at most `fps_max` per second:
/// interval = 1 when fps is NaN or below fps_max, else ceil(fps / fps_max), T = T / interval.
/// One stream per sample (sub-stream 0), drawn in sequence. Per resolution (skipped when
/// H·W < 0.8 · pixels): an image takes the key 1 when it exists and `random() < p`; a video
/// walks the keys t ≠ 1 with T ≥ t from most frames to fewest. For a pair (p_res, p_t) it
/// moves on to fewer frames when `p_t ≥ 1 or random() ≤ p_t`; then it takes (res, t) when
/// `p_res ≥ 1 or random() ≤ p_res`, and otherwise leaves the resolution (downgrade).
/// A single probability p acts as p_res. Draw order matters for NumPy reproduction.
struct opensora_v2_rule {
  double fps_max = 16.0;

  /// Throws when fps_max is not a positive finite number.
  void validate() const {
    if (!(fps_max > 0.0) || !(fps_max < std::numeric_limits<double>::infinity()))
      throw error("fps_max must be a positive number, got " + std::to_string(fps_max));
  }

  /// The number of frames the rule works with after fps thinning.
  [[nodiscard]] std::int64_t effective_frames(std::int64_t frames, double fps) const noexcept {
    // An invalid fps_max (≤ 0, which validate() rejects) thins nothing: frame_interval is 1.
    // A saturated interval stands for one beyond 2^63, which leaves no frame.
    const std::int64_t interval = frame_interval(fps, fps_max);
    return interval == std::numeric_limits<std::int64_t>::max() ? 0 : frames / interval;
  }

  /// The bucket of one sample. With `fast_source` (or a `shifted_source` of it), one draw u picks
  /// the outcome by the inverse of the rule's outcome distribution (`detail::v2_outcomes`), exactly
  /// as `compiled_v2_rule` does; with any other source (`numpy_source`, a user's), the walk draws
  /// in sequence as Open-Sora's code does.
  template <random_source Source>
  [[nodiscard]] bucket_id assign(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                                 const Source& source) const noexcept {
    detail::no_trace trace;
    return assign_traced(c, m, index, source, trace);
  }

  /// `assign`, reporting each decision of the walk to `trace` (a `rule_trace`).
  template <random_source Source, class Trace>
  bucket_id assign_traced(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                          const Source& source, Trace& trace) const noexcept(!Trace::enabled) {
    using detail::ev;
    using detail::note;
    if (!detail::walk_valid(m, trace)) return invalid_sample;
    const std::int64_t t_eff = effective_frames(m.num_frames, m.fps);
    const std::size_t r0 = detail::too_large(c, m);
    note(trace, [&] {
      return rule_event{.what = ev::frames,
                        .probability = static_cast<double>(frame_interval(m.fps, fps_max)),
                        .value = static_cast<double>(t_eff)};
    });
    for (std::size_t ri = 0; ri < r0; ++ri)
      note(trace, [&] {
        return rule_event{.what = ev::too_small, .resolution = static_cast<std::int64_t>(ri)};
      });
    auto taken = [&](const resolution_entry& r, std::size_t k) {
      const bucket_id b = detail::ratio_bucket(r, k, m);
      note(trace, [&] {
        return rule_event{.what = ev::chosen,
                          .resolution = static_cast<std::int64_t>(&r - c.resolutions().data()),
                          .frames_index = static_cast<std::int64_t>(k),
                          .bucket = b};
      });
      return b;
    };
    auto none = [&] {
      note(trace, [] { return rule_event{.what = ev::none}; });
      return no_bucket;
    };
    if constexpr (detail::fast_draws<Source>) {
      const double u = source.stream(index, 0).random();
      note(trace, [&] { return rule_event{.what = ev::fast_draw, .draw = u}; });
      const resolution_entry* hit = nullptr;
      std::size_t hit_key = 0;
      detail::v2_outcomes(c, r0, t_eff == 1, t_eff,
                          [&](std::size_t ri, std::size_t k, double q, double cumulative) {
                            const bool in = u < cumulative;
                            note(trace, [&] {
                              return rule_event{.what = ev::fast_outcome,
                                                .resolution = static_cast<std::int64_t>(ri),
                                                .frames_index = static_cast<std::int64_t>(k),
                                                .probability = q,
                                                .value = cumulative,
                                                .passed = in};
                            });
                            if (!in) return false;
                            hit = &c.resolutions()[ri];
                            hit_key = k;
                            return true;
                          });
      return hit ? taken(*hit, hit_key) : none();
    }
    const resolution_entry* const first = c.resolutions().data();
    const resolution_entry* res = first + r0;
    const resolution_entry* const end = first + c.resolutions().size();
    auto rng = source.stream(index, 0);
    auto event = [&](const resolution_entry* r, std::size_t k, detail::ev what, double u, double p,
                     bool passed) {
      note(trace, [&] {
        return rule_event{.what = what,
                          .resolution = r - first,
                          .frames_index = static_cast<std::int64_t>(k),
                          .draw = u,
                          .probability = p,
                          .passed = passed};
      });
    };
    constexpr double no_draw = std::numeric_limits<double>::quiet_NaN();
    if (t_eff == 1) {
      for (; res != end; ++res) {
        if (res->image_index < 0) {
          event(res, 0, ev::no_image_key, no_draw, no_draw, false);
          continue;
        }
        const auto k = static_cast<std::size_t>(res->image_index);
        const double u = rng.random();
        const bool in = u < res->frames[k].p_resolution;
        event(res, k, ev::keep, u, res->frames[k].p_resolution, in);
        if (in) return taken(*res, k);
      }
      return none();
    }
    for (; res != end; ++res) {
      const frames_entry* const keys = res->frames.data();
      // Keys are in descending order: those longer than the clip are a prefix and draw
      // nothing, and the key 1 (never a video key) is the last.
      const std::size_t n = detail::video_keys(*res);
      const std::size_t longer = detail::longer_keys(keys, n, t_eff);
      for (std::size_t k = 0; k < longer; ++k) event(res, k, ev::too_long, no_draw, no_draw, false);
      for (std::size_t k = longer; k < n; ++k) {
        const frames_entry& f = keys[k];
        // A pair's p_t is Open-Sora 2.0's chance to drop to fewer frames.
        if (f.pair) {
          double u = no_draw;
          bool fewer = f.p_frames >= 1.0;
          if (!fewer) fewer = (u = rng.random()) <= f.p_frames;
          event(res, k, ev::fewer_frames, u, f.p_frames, fewer);
          if (fewer) continue;
        }
        double u = no_draw;
        bool in = f.p_resolution >= 1.0;
        if (!in) in = (u = rng.random()) <= f.p_resolution;
        event(res, k, ev::keep, u, f.p_resolution, in);
        if (in) return taken(*res, k);
        break;  // downgrade: leave this resolution
      }
    }
    return none();
  }
};

/// Open-Sora v1.2's rule. Every check of (resolution, frames key) draws from a fresh stream,
/// sub-stream = Open-Sora's bucket_id[res][t] (the (res, t) pairs numbered in search order).
struct opensora_v12_rule {
  std::int64_t frame_interval = 1;

  void validate() const {
    if (frame_interval < 1)
      throw error("frame_interval must be at least 1, got " + std::to_string(frame_interval));
  }

  template <random_source Source>
  [[nodiscard]] bucket_id assign(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                                 const Source& source) const noexcept {
    detail::no_trace trace;
    return assign_traced(c, m, index, source, trace);
  }

  /// `assign`, reporting each decision of the walk to `trace` (a `rule_trace`). With
  /// independent streams (`fast_source`) a check whose draws cannot change the answer draws
  /// nothing, as in `assign`: the trace shows it decided without a draw.
  template <random_source Source, class Trace>
  bucket_id assign_traced(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                          const Source& source, Trace& trace) const noexcept(!Trace::enabled) {
    using detail::ev;
    using detail::note;
    if (!detail::walk_valid(m, trace)) return invalid_sample;
    const std::int64_t t = m.num_frames;
    const std::int64_t interval = frame_interval < 1 ? 1 : frame_interval;
    // T > t · interval, without overflow: t ≤ (T − 1) / interval.
    const std::int64_t longest = (t - 1) / interval;
    const resolution_entry* const first = c.resolutions().data();
    const resolution_entry* res = first;
    const resolution_entry* const end = res + c.resolutions().size();
    note(trace, [&] {
      return rule_event{.what = ev::frames,
                        .probability = static_cast<double>(interval),
                        .value = static_cast<double>(t == 1 ? 1 : longest)};
    });
    const std::size_t r0 = detail::too_large(c, m);
    for (std::size_t ri = 0; ri < r0; ++ri)
      note(trace, [&] {
        return rule_event{.what = ev::too_small, .resolution = static_cast<std::int64_t>(ri)};
      });
    res += r0;
    constexpr double no_draw = std::numeric_limits<double>::quiet_NaN();
    auto event = [&](const resolution_entry* r, std::size_t k, detail::ev what, double u, double p,
                     bool passed) {
      note(trace, [&] {
        return rule_event{.what = what,
                          .resolution = r - first,
                          .frames_index = static_cast<std::int64_t>(k),
                          .draw = u,
                          .probability = p,
                          .passed = passed};
      });
    };
    auto taken = [&](const resolution_entry* r, std::size_t k) {
      const bucket_id b = detail::ratio_bucket(*r, k, m);
      note(trace, [&] {
        return rule_event{.what = ev::chosen,
                          .resolution = r - first,
                          .frames_index = static_cast<std::int64_t>(k),
                          .bucket = b};
      });
      return b;
    };
    auto none = [&] {
      note(trace, [] { return rule_event{.what = ev::none}; });
      return no_bucket;
    };
    if (t == 1) {  // an image never matches a video key (T > t · interval fails)
      for (; res != end; ++res) {
        if (res->image_index < 0) {
          event(res, 0, ev::no_image_key, no_draw, no_draw, false);
          continue;
        }
        const auto k = static_cast<std::size_t>(res->image_index);
        const double p = res->frames[k].p_resolution;
        if constexpr (detail::independent_streams<Source>) {
          // random() < p always holds for p = 1 and never for p = 0: no stream needed.
          if (p >= 1.0 || !(p > 0.0)) {
            event(res, k, ev::keep, no_draw, p, p >= 1.0);
            if (p >= 1.0) return taken(res, k);
            continue;
          }
        }
        auto rng = source.stream(index, static_cast<std::uint64_t>(res->first_pair) + k);
        const double u = rng.random();
        event(res, k, ev::keep, u, p, u < p);
        if (u < p) return taken(res, k);
      }
      return none();
    }
    for (; res != end; ++res) {
      const frames_entry* const keys = res->frames.data();
      const auto first_sub = static_cast<std::uint64_t>(res->first_pair);
      if constexpr (detail::independent_streams<Source>) {
        // Every check has a stream of its own, so a stream whose draws cannot change the
        // answer may be left out: the checks of keys longer than the clip and of the key 1
        // (they end in `continue` whatever they draw; a prefix and the last key, as keys are
        // in descending order), and the checks of keys whose test is decided without a draw
        // (random() > 1 and random() < 0 never hold, random() < 1 always does).
        const std::size_t n = detail::video_keys(*res);
        const std::size_t longer = detail::longer_keys(keys, n, longest);
        for (std::size_t k = 0; k < longer; ++k)
          event(res, k, ev::too_long, no_draw, no_draw, false);
        for (std::size_t k = longer; k < n; ++k) {
          const frames_entry& f = keys[k];
          const bool skip_drawn = f.pair && f.p_frames < 1.0;
          const bool accept_drawn = f.p_resolution > 0.0 && f.p_resolution < 1.0;
          if (!skip_drawn && !accept_drawn) {
            event(res, k, ev::keep, no_draw, f.p_resolution, f.p_resolution >= 1.0);
            if (f.p_resolution >= 1.0) return taken(res, k);
            break;
          }
          auto rng = source.stream(index, first_sub + k);
          if (f.pair) {  // a pair always draws first
            const double u = rng.random();
            event(res, k, ev::fewer_frames, u, f.p_frames, u > f.p_frames);
            if (u > f.p_frames) continue;
          }
          double u = no_draw;
          const bool in =
              f.p_resolution >= 1.0 || (accept_drawn && (u = rng.random()) < f.p_resolution);
          event(res, k, ev::keep, u, f.p_resolution, in);
          if (in) return taken(res, k);
          break;
        }
      } else {
        for (std::size_t k = 0; k < res->frames.size(); ++k) {
          const frames_entry& f = keys[k];
          auto rng = source.stream(index, first_sub + k);
          if (f.pair) {
            const double u = rng.random();
            event(res, k, ev::fewer_frames, u, f.p_frames, u > f.p_frames);
            if (u > f.p_frames) continue;
          }
          if (f.frames == 1 || f.frames > longest) {
            event(res, k, ev::too_long, no_draw, no_draw, false);
            continue;
          }
          double u = no_draw;
          const bool in = f.p_resolution >= 1.0 || (u = rng.random()) < f.p_resolution;
          event(res, k, ev::keep, u, f.p_resolution, in);
          if (in) return taken(res, k);
          break;
        }
      }
    }
    return none();
  }
};

static_assert(bucket_rule<opensora_v2_rule>);
static_assert(bucket_rule<opensora_v12_rule>);

}  // namespace vbucket
