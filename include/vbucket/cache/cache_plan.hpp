#pragma once
/// Latent caches that survive random bucketing (issue 32): what to precompute, and a rule that
/// plans over what was precomputed.
///
///  - The cache key (`cache_key`): an entry is (sample, T, H, W, start frame, frame interval,
///    encoder id). The start frame comes from `cache_start_frame`, keyed by (seed, sample)
///    only, never by the epoch, so one entry serves every epoch and every run of the same seed.
///  - Exact distributions (`bucket_distribution`): a sample's probability of each bucket and of
///    no bucket, computed from the rule's structure (`rule_distribution<Rule>`, defined for
///    `opensora_v2_rule`, `opensora_v12_rule` and `cached_rule<R>`), not by sampling.
///  - Coverage selection (`plan_cache`): the fewest (sample, shape) entries whose probability
///    mass reaches a coverage target, or the most mass per byte within a byte budget; costs in
///    files, bytes and encoder-seconds (`cache_cost_model`).
///  - Planning over the cache (`cached_rule<Rule>`): a `bucket_rule` that draws as `Rule` and,
///    where the drawn shape is not cached for the sample, delivers the sample's nearest cached
///    shape (`cache_distance`) or no bucket. Being a rule, every sampler, resume and world-size
///    guarantee holds unchanged. `total_variation` gives the distance between the rule's and
///    the delivered distribution, exactly.
///
///     const auto dist = vbucket::bucket_distribution(rule, config, table[i]);
///     const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, options);
///     const vbucket::cached_rule cached(rule, plan.cache_set_of());
///
/// Standard library only.

#include <algorithm>     // std::sort, std::stable_sort, std::min
#include <charconv>      // std::from_chars (manifest fields)
#include <cmath>         // std::log, std::abs
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t, std::uint64_t, std::uint32_t
#include <fstream>       // std::ifstream (load_cache_manifest)
#include <limits>        // std::numeric_limits
#include <map>           // std::map (classes of samples)
#include <memory>        // std::shared_ptr, std::make_shared
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/base/random.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/meta.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/detail/parse_number.hpp"  // shortest_text
#include "vbucket/plan/plan_options.hpp"    // token_formula

namespace vbucket {

// ---------------------------------------------------------------------------------------------
// Shapes, keys and the deterministic window
// ---------------------------------------------------------------------------------------------

/// A bucket's target shape: T frames of H × W pixels.
struct cache_shape {
  std::int64_t frames = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  friend constexpr bool operator==(const cache_shape&, const cache_shape&) = default;
  friend constexpr auto operator<=>(const cache_shape&, const cache_shape&) = default;
};

/// The shape of bucket `b` of `config` (its frames key and its aspect entry's H × W).
inline cache_shape shape_of(const bucket_config& config, bucket_id b) noexcept {
  const aspect_entry& r = config.ratio_of(b);
  return {config.frames_of(b).frames, r.height, r.width};
}

/// The first frame of the cached clip of `sample` at `frames` frames, `interval` apart, from a
/// video of `total_frames` frames: uniform over Open-Sora's range [0, max(0, total − frames ·
/// interval − 1)] (as `ffmpeg::temporal_random_crop`), from one 64-bit word keyed by (seed,
/// sample) alone. Not by the epoch: the window of an entry is the same in every epoch and every
/// run of the seed, so a cached latent is reusable. One word for all of a sample's shapes: the
/// start sits at the same fraction of each shape's range, so the windows of a sample's shapes
/// overlap as much as their ranges allow. Empty when the video is too short ((frames − 1) ·
/// interval + 1 > total) or an argument is below 1.
inline std::optional<std::int64_t> cache_start_frame(std::uint64_t seed, std::uint64_t sample,
                                                     std::int64_t total_frames, std::int64_t frames,
                                                     std::int64_t interval) noexcept {
  if (total_frames < 1 || frames < 1 || interval < 1) return std::nullopt;
  if (frames - 1 > (total_frames - 1) / interval) return std::nullopt;  // span > total
  // Open-Sora's last start, total − frames · interval − 1 (at least 0), without overflow.
  const std::int64_t rest = total_frames - 1 - (frames - 1) * interval;  // ≥ 0
  const std::int64_t last = rest > interval ? rest - interval : 0;
  const std::uint64_t word = detail::mix64(
      detail::mix64(detail::mix64(seed ^ 0x63616368655f7769ULL /* "cache_wi" */) ^ sample) +
      detail::golden_gamma);
  const auto range = static_cast<u128>(static_cast<std::uint64_t>(last) + 1);
  return static_cast<std::int64_t>((static_cast<u128>(word) * range) >> 64);
}

/// A cache entry's identity: the clip (sample, start, interval) at the bucket's shape, encoded by
/// `encoder`. Two entries with equal keys hold the same latent.
struct cache_key {
  std::uint64_t sample = 0;
  cache_shape shape;
  std::int64_t start = 0;
  std::int64_t interval = 1;
  std::string encoder;

  /// The entry's file name under the cache directory:
  /// `<encoder>/<sample>_<T>x<H>x<W>_s<start>_i<interval>.npy` (a `/`-free encoder id).
  [[nodiscard]] std::string file_name() const {
    return encoder + "/" + std::to_string(sample) + "_" + std::to_string(shape.frames) + "x" +
           std::to_string(shape.height) + "x" + std::to_string(shape.width) + "_s" +
           std::to_string(start) + "_i" + std::to_string(interval) + ".npy";
  }
  friend bool operator==(const cache_key&, const cache_key&) = default;
};

// ---------------------------------------------------------------------------------------------
// Exact distributions
// ---------------------------------------------------------------------------------------------

/// One outcome of a sample's bucket distribution.
struct bucket_probability {
  bucket_id bucket = no_bucket;
  double probability = 0.0;
};

/// A sample's exact distribution: each bucket of positive probability (in the rule's walk order)
/// and the probability of no bucket. An invalid sample (`bucketable` false) has no outcome,
/// `invalid` true and `none` 0.
struct sample_distribution {
  std::vector<bucket_probability> outcomes;
  double none = 0.0;
  bool invalid = false;
};

/// The customisation point of `bucket_distribution`: a specialisation for a rule R provides
///
///     template <class Visit> static double outcomes(const R&, const bucket_config&,
///                                                   const sample_meta&, Visit&& visit);
///     static std::int64_t interval(const R&, const sample_meta&);
///
/// `outcomes` calls `visit(bucket, q)` for every bucket the rule gives the (bucketable) sample
/// with probability q > 0 and returns the probability of no bucket; the q and that probability
/// sum to 1. `interval` is the frame interval of the sample's clips (1 for a rule without one).
/// A user rule gets exact cache planning by specialising it (see docs/latent_cache.md).
template <class Rule>
struct rule_distribution;

/// A rule whose exact distribution is known (`rule_distribution<Rule>` is specialised).
template <class Rule>
concept distribution_rule = requires(const Rule& r, const bucket_config& c, const sample_meta& m) {
  {
    rule_distribution<Rule>::outcomes(r, c, m, [](bucket_id, double) {})
    } -> std::same_as<double>;
  { rule_distribution<Rule>::interval(r, m) } -> std::same_as<std::int64_t>;
};

/// Open-Sora 2.0: the outcomes of `detail::v2_outcomes`, the one definition of the rule's
/// distribution that its fast draws invert (so the empirical frequencies of `assign` under
/// `fast_source` converge to these; `numpy_source` walks the same tests in sequence: `u ≤ p`
/// instead of `u < p`, a difference of probability 2^-53 per test).
template <>
struct rule_distribution<opensora_v2_rule> {
  template <class Visit>
  static double outcomes(const opensora_v2_rule& rule, const bucket_config& c, const sample_meta& m,
                         Visit&& visit) {
    const std::int64_t t_eff = rule.effective_frames(m.num_frames, m.fps);
    const std::size_t r0 = first_fitting_resolution(c, m);
    return detail::v2_outcomes(c, r0, t_eff == 1, t_eff,
                               [&](std::size_t ri, std::size_t k, double q, double) {
                                 visit(bucket_for(c, ri, k, m), q);
                                 return false;
                               });
  }
  static std::int64_t interval(const opensora_v2_rule& rule, const sample_meta& m) noexcept {
    return frame_interval(m.fps, rule.fps_max);
  }
};

/// Open-Sora v1.2: per resolution (from the first the sample fits), keys from most frames to
/// fewest. A pair moves on to fewer frames with probability 1 − p_frames (`u > p_frames`); a
/// key longer than the clip (T ≤ key · interval) or the key 1 is passed over; else the key is
/// taken with probability p (`u < p`) and otherwise the walk leaves the resolution. An image
/// takes each resolution's key 1 with probability p.
template <>
struct rule_distribution<opensora_v12_rule> {
  template <class Visit>
  static double outcomes(const opensora_v12_rule& rule, const bucket_config& c,
                         const sample_meta& m, Visit&& visit) {
    const std::int64_t interval = rule.frame_interval < 1 ? 1 : rule.frame_interval;
    const std::int64_t longest = (m.num_frames - 1) / interval;
    const auto& res = c.resolutions();
    double remaining = 1.0;
    for (std::size_t ri = first_fitting_resolution(c, m); ri < res.size(); ++ri) {
      const resolution_entry& r = res[ri];
      if (m.num_frames == 1) {
        if (r.image_index < 0) continue;
        const auto k = static_cast<std::size_t>(r.image_index);
        const double a = detail::clamp_probability(r.frames[k].p_resolution);
        if (remaining * a > 0.0) visit(bucket_for(c, ri, k, m), remaining * a);
        remaining *= 1.0 - a;
        continue;
      }
      double reach = remaining;  // reaching key k
      double leave = 0.0;        // leaving the resolution by a refusal
      for (std::size_t k = 0; k < r.frames.size(); ++k) {
        const frames_entry& f = r.frames[k];
        if (f.frames == 1 || f.frames > longest) continue;  // passed over whatever is drawn
        const double skip = f.pair ? 1.0 - detail::clamp_probability(f.p_frames) : 0.0;
        const double stay = reach * (1.0 - skip);
        reach *= skip;
        const double a = detail::clamp_probability(f.p_resolution);
        if (stay * a > 0.0) visit(bucket_for(c, ri, k, m), stay * a);
        leave += stay * (1.0 - a);
      }
      remaining = reach + leave;
    }
    return remaining;
  }
  static std::int64_t interval(const opensora_v12_rule& rule, const sample_meta&) noexcept {
    return rule.frame_interval < 1 ? 1 : rule.frame_interval;
  }
};

/// The exact distribution of `rule` for one sample (see `rule_distribution`).
template <distribution_rule Rule>
sample_distribution bucket_distribution(const Rule& rule, const bucket_config& config,
                                        const sample_meta& m, std::uint64_t index = 0) {
  sample_distribution d;
  if (!bucketable(m)) {
    d.invalid = true;
    return d;
  }
  auto visit = [&](bucket_id b, double q) { d.outcomes.push_back({b, q}); };
  if constexpr (requires { rule_distribution<Rule>::outcomes(rule, config, m, index, visit); }) {
    d.none = rule_distribution<Rule>::outcomes(rule, config, m, index, visit);
  } else {
    d.none = rule_distribution<Rule>::outcomes(rule, config, m, visit);
  }
  return d;
}

/// Total variation ½ Σ |p − q| between two distributions over buckets and no bucket.
inline double total_variation(const sample_distribution& p, const sample_distribution& q) {
  std::vector<bucket_probability> all = p.outcomes;
  for (const auto& o : q.outcomes) all.push_back({o.bucket, -o.probability});
  std::sort(all.begin(), all.end(), [](const bucket_probability& a, const bucket_probability& b) {
    return a.bucket < b.bucket;
  });
  double sum = std::abs(p.none - q.none);
  for (std::size_t i = 0; i < all.size();) {
    double diff = 0.0;
    std::size_t j = i;
    for (; j < all.size() && all[j].bucket == all[i].bucket; ++j) diff += all[j].probability;
    sum += std::abs(diff);
    i = j;
  }
  return 0.5 * sum;
}

// ---------------------------------------------------------------------------------------------
// The cache set and the cached rule
// ---------------------------------------------------------------------------------------------

/// What a cached rule does with a drawn shape that is not cached for the sample.
enum class cache_fallback {
  nearest,  ///< deliver the sample's nearest cached shape (`cache_distance`); none if none
  drop,     ///< deliver no bucket (the sample sits the epoch out)
};

/// The distance from a drawn shape `d` to a cached shape `c` of the same sample, lexicographic
/// (smaller is nearer): tier 0, the same H × W with fewer frames (nearest frame count first);
/// tier 1, fewer pixels and no more frames (most pixels first, then most frames); tier 2,
/// anything else (more frames or more pixels: the smallest |ln(T·H·W ratio)| first). Ties go to
/// the smaller bucket id. So a clip is shortened before it is shrunk, and is made longer or
/// larger only when the sample has nothing shorter or smaller cached.
struct cache_distance {
  int tier = 0;
  double primary = 0.0;
  double secondary = 0.0;
  friend constexpr auto operator<=>(const cache_distance&, const cache_distance&) = default;

  static cache_distance between(const cache_shape& d, const cache_shape& c) noexcept {
    const double pd = static_cast<double>(d.height) * static_cast<double>(d.width);
    const double pc = static_cast<double>(c.height) * static_cast<double>(c.width);
    if (c.height == d.height && c.width == d.width && c.frames < d.frames)
      return {0, static_cast<double>(d.frames - c.frames), 0.0};
    if (pc < pd && c.frames <= d.frames)
      return {1, pd - pc, static_cast<double>(d.frames - c.frames)};
    const double vd = pd * static_cast<double>(d.frames);
    const double vc = pc * static_cast<double>(c.frames);
    return {2, std::abs(std::log(vc / vd)), 0.0};
  }
};

/// The cached buckets of every sample (compressed rows: sample i's are
/// `ids[offsets[i], offsets[i + 1])`, sorted), and what a drawn bucket resolves to.
class cache_set {
 public:
  cache_set() = default;
  /// From (sample, bucket) pairs, any order (duplicates kept once); `samples` rows.
  cache_set(std::size_t samples, std::vector<std::pair<std::uint64_t, bucket_id>> entries)
      : offsets_(samples + 1, 0) {
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    for (const auto& [s, b] : entries) {
      if (s >= samples)
        throw error("cache_set: entry of sample " + std::to_string(s) + " beyond the " +
                    std::to_string(samples) + " samples");
      if (b < 0) throw error("cache_set: sample " + std::to_string(s) + " has a bucket id below 0");
      ++offsets_[static_cast<std::size_t>(s) + 1];
      ids_.push_back(b);
    }
    for (std::size_t i = 0; i < samples; ++i) offsets_[i + 1] += offsets_[i];
  }

  [[nodiscard]] std::size_t samples() const noexcept {
    return offsets_.empty() ? 0 : offsets_.size() - 1;
  }
  [[nodiscard]] std::size_t entries() const noexcept { return ids_.size(); }
  /// The cached buckets of `sample` (empty beyond the set's samples).
  [[nodiscard]] std::span<const bucket_id> of(std::uint64_t sample) const noexcept {
    if (sample >= samples()) return {};
    const auto i = static_cast<std::size_t>(sample);
    return std::span<const bucket_id>(ids_).subspan(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }

  /// What `drawn` (a bucket of `config`, or a negative code) of `sample` delivers: itself when a
  /// cached bucket of the sample has its shape; else, with `nearest`, the nearest cached bucket
  /// (`cache_distance`), no_bucket when the sample has none; with `drop`, no_bucket. Negative
  /// codes pass through.
  [[nodiscard]] bucket_id resolve(const bucket_config& config, std::uint64_t sample,
                                  bucket_id drawn, cache_fallback fallback) const noexcept {
    if (drawn < 0) return drawn;
    const std::span<const bucket_id> cached = of(sample);
    const cache_shape d = shape_of(config, drawn);
    for (const bucket_id c : cached)
      if (c == drawn || shape_of(config, c) == d) return drawn;
    if (fallback == cache_fallback::drop || cached.empty()) return no_bucket;
    bucket_id best = cached.front();
    cache_distance best_d = cache_distance::between(d, shape_of(config, best));
    for (const bucket_id c : cached.subspan(1)) {
      const cache_distance cd = cache_distance::between(d, shape_of(config, c));
      if (cd < best_d) {
        best = c;
        best_d = cd;
      }
    }
    return best;
  }

 private:
  std::vector<std::size_t> offsets_;
  std::vector<bucket_id> ids_;
};

namespace detail {
template <class S>
inline constexpr bool is_shifted_source = false;
template <class Inner>
inline constexpr bool is_shifted_source<shifted_source<Inner>> = true;
}  // namespace detail

/// A `bucket_rule` over a cache: draws as `Rule` does (the same draws, so the same bucket where
/// it is cached) and resolves the drawn bucket through the cache set (`cache_set::resolve`): it
/// never delivers a bucket whose shape is not cached for the sample. The sample index is the
/// row of the whole table (a `shifted_source`'s chunk offset is added back). Precondition: the
/// cache set was made for the same config and table.
template <class Rule>
class cached_rule {
 public:
  cached_rule(Rule rule, std::shared_ptr<const cache_set> cache,
              cache_fallback fallback = cache_fallback::nearest)
      : rule_(std::move(rule)), cache_(std::move(cache)), fallback_(fallback) {
    if (!cache_) throw error("cached_rule: no cache set");
  }

  void validate() const {
    if constexpr (requires { rule_.validate(); }) rule_.validate();
  }

  template <random_source Source>
  [[nodiscard]] bucket_id assign(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                                 const Source& source) const {
    const bucket_id drawn = rule_.assign(c, m, index, source);
    std::uint64_t row = index;
    if constexpr (detail::is_shifted_source<Source>) row += source.first;
    return cache_->resolve(c, row, drawn, fallback_);
  }

  [[nodiscard]] const Rule& rule() const noexcept { return rule_; }
  [[nodiscard]] const cache_set& cache() const noexcept { return *cache_; }
  [[nodiscard]] cache_fallback fallback() const noexcept { return fallback_; }

 private:
  Rule rule_;
  std::shared_ptr<const cache_set> cache_;
  cache_fallback fallback_;
};

static_assert(bucket_rule<cached_rule<opensora_v2_rule>>);

/// The delivered distribution of a cached rule: each of the inner rule's outcomes moved to
/// where `cache_set::resolve` sends it (its index is the table row).
template <distribution_rule Rule>
struct rule_distribution<cached_rule<Rule>> {
  template <class Visit>
  static double outcomes(const cached_rule<Rule>& rule, const bucket_config& c,
                         const sample_meta& m, std::uint64_t index, Visit&& visit) {
    std::vector<bucket_probability> moved;
    double dropped = 0.0;
    const double none =
        rule_distribution<Rule>::outcomes(rule.rule(), c, m, [&](bucket_id b, double q) {
          const bucket_id to = rule.cache().resolve(c, index, b, rule.fallback());
          if (to < 0) {
            dropped += q;
            return;
          }
          for (auto& o : moved)
            if (o.bucket == to) {
              o.probability += q;
              return;
            }
          moved.push_back({to, q});
        });
    for (const auto& o : moved) visit(o.bucket, o.probability);
    return none + dropped;
  }
  template <class Visit>
  static double outcomes(const cached_rule<Rule>& rule, const bucket_config& c,
                         const sample_meta& m, Visit&& visit) {
    return outcomes(rule, c, m, 0, visit);
  }
  static std::int64_t interval(const cached_rule<Rule>& rule, const sample_meta& m) noexcept {
    return rule_distribution<Rule>::interval(rule.rule(), m);
  }
};

/// The cache set of a manifest CSV (`vbucket cache-plan --out`): its columns sample, T, H, W
/// and bucket (any order; others ignored; fields may be quoted). Each row's bucket must be a
/// bucket of `config` of the row's shape (T, H, W), else the manifest was planned for another
/// config: `vbucket::error` names the file, the row and the column. With `rows` (the
/// metadata's rows), each sample must be one of them, else the manifest was planned for other
/// metadata (named the same way), and the set has `rows` rows; without, the rows of the largest
/// sample + 1 (samples beyond it have nothing cached). A manifest of no entries is an error.
inline std::shared_ptr<const cache_set> load_cache_manifest(
    const std::string& path, const bucket_config& config,
    std::optional<std::uint64_t> rows_of_meta = std::nullopt) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open the cache manifest");
  auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted) {
        if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
          out.back().push_back('"');
          ++i;
        } else if (c == '"') {
          quoted = false;
        } else {
          out.back().push_back(c);
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        out.emplace_back();
      } else if (c != '\r') {
        out.back().push_back(c);
      }
    }
    return out;
  };
  std::string line;
  if (!std::getline(in, line)) throw error(path + ": the cache manifest is empty (no header)");
  const std::vector<std::string> header = split(line);
  constexpr std::string_view names[] = {"sample", "T", "H", "W", "bucket"};
  std::size_t col[5] = {};
  for (std::size_t k = 0; k < 5; ++k) {
    std::size_t j = 0;
    while (j < header.size() && header[j] != names[k]) ++j;
    if (j == header.size())
      throw error(path + ": the cache manifest has no column \"" + std::string(names[k]) + "\"");
    col[k] = j;
  }
  std::vector<std::pair<std::uint64_t, bucket_id>> pairs;
  std::uint64_t rows = 0;
  for (std::uint64_t row = 2; std::getline(in, line); ++row) {
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> f = split(line);
    std::int64_t v[5] = {};
    for (std::size_t k = 0; k < 5; ++k) {
      const std::string& t = col[k] < f.size() ? f[col[k]] : std::string();
      const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v[k]);
      if (t.empty() || ec != std::errc{} || p != t.data() + t.size() || v[k] < 0)
        throw error(path + ": row " + std::to_string(row) + ", column \"" + std::string(names[k]) +
                    "\": expected a non-negative integer, got \"" + t + "\"");
    }
    const bucket_id b = static_cast<bucket_id>(v[4]);
    if (static_cast<std::size_t>(v[4]) >= config.num_buckets() ||
        !(shape_of(config, b) == cache_shape{v[1], v[2], v[3]}))
      throw error(path + ": row " + std::to_string(row) + ": bucket " + std::to_string(v[4]) +
                  " is not a " + std::to_string(v[1]) + "x" + std::to_string(v[2]) + "x" +
                  std::to_string(v[3]) +
                  " bucket of this config (the manifest was planned for another config)");
    const auto sample = static_cast<std::uint64_t>(v[0]);
    if (rows_of_meta && sample >= *rows_of_meta)
      throw error(path + ": row " + std::to_string(row) + ", column \"sample\": sample " +
                  std::to_string(sample) + " is not a row of the metadata (" +
                  std::to_string(*rows_of_meta) +
                  " rows): the manifest was planned for other metadata");
    rows = std::max(rows, sample + 1);
    pairs.emplace_back(sample, b);
  }
  if (pairs.empty())
    throw error(path +
                ": the cache manifest has a header but no entries (nothing is cached; plan "
                "without the cache, or plan the cache again)");
  if (rows_of_meta) rows = *rows_of_meta;
  return std::make_shared<const cache_set>(static_cast<std::size_t>(rows), std::move(pairs));
}

/// How far a cache moves a rule's draws, exactly (from the distributions, not sampled).
struct cache_delivery {
  std::uint64_t bucketable = 0;  ///< samples with a distribution
  double bucketed_mass = 0.0;    ///< Σ P(some bucket) under the rule: draws per epoch
  /// TV between the rule's and the delivered bucket histogram of an epoch (no bucket
  /// included), per bucketable sample: ½ Σ_b |Σ_i p_i(b) − Σ_i q_i(b)| / bucketable.
  double tv_buckets = 0.0;
  /// Mean over bucketable samples of total_variation(rule's, delivered) of the sample.
  double tv_sample = 0.0;
  /// The share of the bucketed draws whose shape was not cached (moved or dropped).
  double fallback_share = 0.0;
};

/// The `cache_delivery` of `cached` over `table` (a random-access range of `sample_meta`, row i
/// the sample of index i): each sample's `bucket_distribution` under `cached.rule()` and under
/// `cached`, compared with `total_variation`.
template <distribution_rule Rule, class Table>
cache_delivery delivery_of(const cached_rule<Rule>& cached, const bucket_config& config,
                           const Table& table) {
  cache_delivery d;
  std::vector<double> rule_hist(config.num_buckets(), 0.0), got_hist(config.num_buckets(), 0.0);
  double rule_none = 0.0, got_none = 0.0, moved = 0.0;
  const auto n = static_cast<std::size_t>(table.size());
  for (std::size_t i = 0; i < n; ++i) {
    const sample_meta m = table[i];
    const sample_distribution p = bucket_distribution(cached.rule(), config, m, i);
    if (p.invalid) continue;
    const sample_distribution q = bucket_distribution(cached, config, m, i);
    ++d.bucketable;
    d.bucketed_mass += 1.0 - p.none;
    d.tv_sample += total_variation(p, q);
    rule_none += p.none;
    got_none += q.none;
    for (const auto& o : p.outcomes) {
      rule_hist[static_cast<std::size_t>(o.bucket)] += o.probability;
      if (cached.cache().resolve(config, i, o.bucket, cached.fallback()) != o.bucket)
        moved += o.probability;
    }
    for (const auto& o : q.outcomes) got_hist[static_cast<std::size_t>(o.bucket)] += o.probability;
  }
  const double b = d.bucketable > 0 ? static_cast<double>(d.bucketable) : 1.0;
  double tv = std::abs(rule_none - got_none);
  for (std::size_t k = 0; k < rule_hist.size(); ++k) tv += std::abs(rule_hist[k] - got_hist[k]);
  d.tv_buckets = 0.5 * tv / b;
  d.tv_sample /= b;
  d.fallback_share = d.bucketed_mass > 0.0 ? moved / d.bucketed_mass : 0.0;
  return d;
}

// ---------------------------------------------------------------------------------------------
// Coverage selection
// ---------------------------------------------------------------------------------------------

/// The latent a VAE makes of a (T, H, W) clip and what encoding it costs. Latent shape:
/// channels × (1 + (T − 1) / compression_t) × ⌈H / compression_h⌉ × ⌈W / compression_w⌉ (the
/// compression factors of `formula`; its patch sizes are not used), `bytes_per_element` each.
/// Encoder seconds of one entry: `seconds_per_entry + seconds_per_token` × latent positions
/// (T' · H' · W'), a linear model to fit to a timed encoder (both 0: no seconds are reported).
struct cache_cost_model {
  token_formula formula{};
  std::int64_t channels = 16;
  std::int64_t bytes_per_element = 2;
  double seconds_per_entry = 0.0;
  double seconds_per_token = 0.0;

  void validate() const {
    formula.validate();
    if (channels < 1 || channels > 65536)
      throw error("cache cost model: channels must be an integer from 1 to 65536, got " +
                  std::to_string(channels));
    if (bytes_per_element < 1 || bytes_per_element > 64)
      throw error("cache cost model: bytes per element must be from 1 to 64, got " +
                  std::to_string(bytes_per_element));
    if (!(seconds_per_entry >= 0.0) || !(seconds_per_token >= 0.0) ||
        !(seconds_per_entry < std::numeric_limits<double>::infinity()) ||
        !(seconds_per_token < std::numeric_limits<double>::infinity()))
      throw error("cache cost model: the seconds coefficients must be finite and ≥ 0");
  }
  /// Latent positions T' · H' · W' of a shape.
  [[nodiscard]] std::uint64_t latent_positions(const cache_shape& s) const noexcept {
    const std::int64_t t = 1 + (s.frames - 1) / formula.compression_t;
    const std::int64_t h = (s.height + formula.compression_h - 1) / formula.compression_h;
    const std::int64_t w = (s.width + formula.compression_w - 1) / formula.compression_w;
    return static_cast<std::uint64_t>(t * h * w);
  }
  [[nodiscard]] std::uint64_t bytes(const cache_shape& s) const noexcept {
    return latent_positions(s) * static_cast<std::uint64_t>(channels * bytes_per_element);
  }
  [[nodiscard]] double seconds(const cache_shape& s) const noexcept {
    return seconds_per_entry + seconds_per_token * static_cast<double>(latent_positions(s));
  }
};

/// How `plan_cache` selects entries.
enum class cache_selection {
  /// The fewest entries reaching `coverage` (or, with `budget_bytes`, the most probability per
  /// byte that fits): each sample keeps its most probable shapes.
  coverage,
  /// One shape per sample, drawn so that the samples of one class (the same outcomes and
  /// probabilities) keep the rule's bucket histogram: within a class of n samples, in an order
  /// keyed by (seed, sample), member r takes the shape at (r + U) / n of the class's
  /// distribution (U uniform per class, keyed by the seed: systematic sampling). Each sample's
  /// shape has the rule's probability, the class's counts are within 1 of n · p, so the bucket
  /// histogram's TV is small; each sample is then always delivered at its one shape (the
  /// per-sample TV is 1 − p of that shape).
  stratified,
};

/// What `plan_cache` selects by.
struct cache_plan_options {
  cache_selection selection = cache_selection::coverage;
  /// The fraction of the bucketed draws (those that get a bucket) to serve from the cache.
  double coverage = 0.99;
  /// With a value: select the most probability per byte that fits this many bytes (and stop
  /// at `coverage` if reached first).
  std::optional<std::uint64_t> budget_bytes;
  /// Epochs the cache serves: scales the expected draws reported (the selection is the same).
  std::uint64_t epochs = 1;
  /// The window seed (`cache_start_frame`).
  std::uint64_t seed = 0;
  std::string encoder = "latent";
  cache_cost_model cost{};
  cache_fallback fallback = cache_fallback::nearest;

  void validate() const {
    if (!(coverage > 0.0 && coverage <= 1.0))  // 0 would select nothing: no cache
      throw error("cache plan: coverage must be in (0, 1], got " + detail::shortest_text(coverage));
    if (epochs < 1) throw error("cache plan: epochs must be at least 1");
    if (encoder.empty() || encoder.find('/') != std::string::npos ||
        encoder.find('\\') != std::string::npos || encoder == "." || encoder == "..")
      throw error("cache plan: the encoder id \"" + encoder +
                  "\" must be a non-empty name without '/'");
    cost.validate();
  }
};

/// One entry of a plan: a (sample, bucket) with its key, bytes, seconds and probability (per
/// epoch: the chance that the rule draws this shape for this sample).
struct cache_entry {
  cache_key key;
  bucket_id bucket = no_bucket;
  std::uint64_t bytes = 0;
  double seconds = 0.0;
  double probability = 0.0;
};

/// Totals of one selection of entries.
struct cache_summary {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  double seconds = 0.0;
  std::uint64_t samples_with_entries = 0;
  double shapes_per_sample = 0.0;  ///< files / bucketable samples
  double coverage = 0.0;           ///< cached mass / bucketed mass
  double expected_draws = 0.0;     ///< cached draws over the epochs
  double tv_sample = 0.0;   ///< mean over bucketable samples of TV(rule, delivered) per sample
  double tv_buckets = 0.0;  ///< TV of the epoch's bucket histogram (no bucket included)
};

/// A cache plan: the entries (by sample, then bucket) and its totals, with the two trivial
/// baselines (the most probable shape of each sample; every shape of positive probability).
struct cache_plan {
  std::vector<cache_entry> entries;
  std::uint64_t samples = 0;      ///< rows of the table
  std::uint64_t bucketable = 0;   ///< rows with a distribution
  double bucketed_mass = 0.0;     ///< Σ over samples of P(some bucket): draws per epoch
  double possible_entries = 0.0;  ///< every (sample, shape) of positive probability
  cache_summary chosen;
  cache_summary one_per_sample;
  cache_summary every_shape;

  /// The entries as a cache set for `cached_rule`.
  [[nodiscard]] std::shared_ptr<const cache_set> cache_set_of() const {
    std::vector<std::pair<std::uint64_t, bucket_id>> pairs;
    pairs.reserve(entries.size());
    for (const auto& e : entries) pairs.emplace_back(e.key.sample, e.bucket);
    return std::make_shared<const cache_set>(static_cast<std::size_t>(samples), std::move(pairs));
  }
};

namespace detail {
/// A candidate entry: sample, bucket, shape, probability, bytes.
struct cache_candidate {
  std::uint64_t sample;
  bucket_id bucket;
  cache_shape shape;
  double probability;
  std::uint64_t bytes;
};

/// A sample's distribution merged by shape (two buckets of one shape are one cache entry: the
/// first bucket in walk order names it).
inline void merge_by_shape(const bucket_config& c, sample_distribution& d) {
  std::vector<bucket_probability> merged;
  std::vector<cache_shape> shapes;
  for (const auto& o : d.outcomes) {
    const cache_shape s = shape_of(c, o.bucket);
    std::size_t j = 0;
    while (j < shapes.size() && !(shapes[j] == s)) ++j;
    if (j == shapes.size()) {
      shapes.push_back(s);
      merged.push_back(o);
    } else {
      merged[j].probability += o.probability;
    }
  }
  d.outcomes = std::move(merged);
}
}  // namespace detail

/// Selection order of the coverage target: probability descending, then fewer bytes, sample,
/// bucket. Taking the shortest prefix of this order that reaches a mass is the fewest entries
/// reaching it (any k entries hold at most the k largest probabilities).
inline bool coverage_order(const detail::cache_candidate& a, const detail::cache_candidate& b) {
  if (a.probability != b.probability) return a.probability > b.probability;
  if (a.bytes != b.bytes) return a.bytes < b.bytes;
  if (a.sample != b.sample) return a.sample < b.sample;
  return a.bucket < b.bucket;
}

/// Plans the cache of `table` under `rule`: every sample's exact distribution, the selection
/// (`cache_plan_options`), keys and costs, and the totals with their baselines. `Table` is a
/// random-access range of `sample_meta` (`meta_table`, a vector).
template <distribution_rule Rule, class Table>
cache_plan plan_cache(const bucket_config& config, const Table& table, const Rule& rule,
                      const cache_plan_options& options) {
  options.validate();
  if constexpr (requires { rule.validate(); }) rule.validate();
  cache_plan plan;
  const std::size_t n = static_cast<std::size_t>(table.size());
  plan.samples = n;
  std::vector<sample_distribution> dists(n);
  std::vector<detail::cache_candidate> all;
  std::vector<std::size_t> first_candidate(n, 0);  // sample i's candidates start here in `all`
  for (std::size_t i = 0; i < n; ++i) {
    const sample_meta m = table[i];
    dists[i] = bucket_distribution(rule, config, m, i);
    first_candidate[i] = all.size();
    if (dists[i].invalid) continue;
    detail::merge_by_shape(config, dists[i]);
    ++plan.bucketable;
    plan.bucketed_mass += 1.0 - dists[i].none;
    for (const auto& o : dists[i].outcomes) {
      const cache_shape s = shape_of(config, o.bucket);
      all.push_back({i, o.bucket, s, o.probability, options.cost.bytes(s)});
    }
  }
  plan.possible_entries = static_cast<double>(all.size());
  const double mass = plan.bucketed_mass;
  const double target = options.coverage * mass * (1.0 - 1e-12);
  std::vector<char> chosen(all.size(), 0);
  {
    std::vector<std::size_t> order(all.size());
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
    if (options.selection == cache_selection::stratified) {
      auto key_of = [&](std::size_t i) {
        std::vector<std::pair<bucket_id, double>> k;
        for (const auto& o : dists[i].outcomes) k.emplace_back(o.bucket, o.probability);
        return k;
      };
      std::map<std::vector<std::pair<bucket_id, double>>, std::vector<std::uint64_t>> classes;
      for (std::size_t i = 0; i < n; ++i)
        if (!dists[i].invalid && !dists[i].outcomes.empty()) classes[key_of(i)].push_back(i);
      const std::uint64_t key = detail::mix64(options.seed ^ 0x7374726174696679ULL);
      for (auto& [outcomes, members] : classes) {
        auto rank = [&](std::uint64_t i) { return detail::mix64(key ^ detail::mix64(i + 1)); };
        std::sort(members.begin(), members.end(),
                  [&](std::uint64_t a, std::uint64_t b) { return rank(a) < rank(b); });
        double total = 0.0;
        for (const auto& o : outcomes) total += o.second;
        const double u0 = detail::to_unit_double(detail::mix64(key + rank(members.front())));
        const auto count = static_cast<double>(members.size());
        for (std::size_t r = 0; r < members.size(); ++r) {
          const double u = (static_cast<double>(r) + u0) / count * total;
          std::size_t k = 0;
          double cumulative = outcomes[0].second;
          while (k + 1 < outcomes.size() && !(u < cumulative)) cumulative += outcomes[++k].second;
          chosen[first_candidate[static_cast<std::size_t>(members[r])] + k] = 1;
        }
      }
    } else if (options.budget_bytes) {
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const double da = all[a].probability / static_cast<double>(all[a].bytes);
        const double db = all[b].probability / static_cast<double>(all[b].bytes);
        if (da != db) return da > db;
        return coverage_order(all[a], all[b]);
      });
      std::uint64_t left = *options.budget_bytes;
      double acc = 0.0;
      for (const std::size_t j : order) {
        if (acc >= target && options.coverage < 1.0) break;
        if (all[j].bytes > left) continue;
        left -= all[j].bytes;
        acc += all[j].probability;
        chosen[j] = 1;
      }
    } else {
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return coverage_order(all[a], all[b]); });
      double acc = 0.0;
      for (const std::size_t j : order) {
        if (acc >= target) break;
        acc += all[j].probability;
        chosen[j] = 1;
      }
    }
  }
  // The three selections' totals.
  auto summarise = [&](auto&& is_chosen) {
    cache_summary s;
    std::vector<std::pair<std::uint64_t, bucket_id>> pairs;
    double covered = 0.0;
    for (std::size_t j = 0; j < all.size(); ++j) {
      if (!is_chosen(j)) continue;
      ++s.files;
      s.bytes += all[j].bytes;
      s.seconds += options.cost.seconds(all[j].shape);
      covered += all[j].probability;
      pairs.emplace_back(all[j].sample, all[j].bucket);
    }
    const cache_set set(n, std::move(pairs));
    std::vector<double> rule_hist(config.num_buckets(), 0.0), got_hist(config.num_buckets(), 0.0);
    double rule_none = 0.0, got_none = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      if (dists[i].invalid) continue;
      if (!set.of(i).empty()) ++s.samples_with_entries;
      double moved = 0.0;  // the sample's mass not delivered as drawn
      rule_none += dists[i].none;
      got_none += dists[i].none;
      for (const auto& o : dists[i].outcomes) {
        rule_hist[static_cast<std::size_t>(o.bucket)] += o.probability;
        const bucket_id to = set.resolve(config, i, o.bucket, options.fallback);
        if (to != o.bucket) moved += o.probability;
        if (to < 0) {
          got_none += o.probability;
        } else {
          got_hist[static_cast<std::size_t>(to)] += o.probability;
        }
      }
      s.tv_sample += moved;
    }
    const double b = plan.bucketable > 0 ? static_cast<double>(plan.bucketable) : 1.0;
    s.tv_sample /= b;
    double tv = std::abs(rule_none - got_none);
    for (std::size_t k = 0; k < rule_hist.size(); ++k) tv += std::abs(rule_hist[k] - got_hist[k]);
    s.tv_buckets = 0.5 * tv / b;
    s.shapes_per_sample = static_cast<double>(s.files) / b;
    s.coverage = mass > 0.0 ? covered / mass : 1.0;
    s.expected_draws = covered * static_cast<double>(options.epochs);
    return s;
  };
  plan.chosen = summarise([&](std::size_t j) { return chosen[j] != 0; });
  plan.every_shape = summarise([](std::size_t) { return true; });
  {
    std::vector<char> top(all.size(), 0);
    for (std::size_t j = 0; j < all.size();) {  // candidates are grouped by sample
      std::size_t best = j, k = j;
      for (; k < all.size() && all[k].sample == all[j].sample; ++k)
        if (coverage_order(all[k], all[best])) best = k;
      top[best] = 1;
      j = k;
    }
    plan.one_per_sample = summarise([&](std::size_t j) { return top[j] != 0; });
  }
  for (std::size_t j = 0; j < all.size(); ++j) {
    if (!chosen[j]) continue;
    const detail::cache_candidate& c = all[j];
    const sample_meta m = table[static_cast<std::size_t>(c.sample)];
    const std::int64_t interval =
        c.shape.frames == 1 ? 1 : rule_distribution<Rule>::interval(rule, m);
    const auto start =
        cache_start_frame(options.seed, c.sample, m.num_frames, c.shape.frames, interval);
    cache_entry e;
    e.key = {c.sample, c.shape, start.value_or(0), interval, options.encoder};
    e.bucket = c.bucket;
    e.bytes = c.bytes;
    e.seconds = options.cost.seconds(c.shape);
    e.probability = c.probability;
    plan.entries.push_back(std::move(e));
  }
  return plan;
}

}  // namespace vbucket
