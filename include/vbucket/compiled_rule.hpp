#pragma once
/// `compiled_v2_rule`: Open-Sora 2.0's rule (`opensora_v2_rule`) compiled into per-class
/// tables of cumulative outcome probabilities, so that a sample costs one uniform draw, a few
/// counts and one table look-up instead of a walk with one unpredictable branch per draw.
///
/// The fast draws of the 2.0 rule have one definition (`detail::v2_outcomes` in rules.hpp): one
/// uniform u per sample (`source.stream(index, 0).random()`), and the outcome is the first of
/// the rule's outcomes, in the order of its walk, whose cumulative probability exceeds u (no
/// bucket when none does). `opensora_v2_rule` with `fast_source` computes it by walking per
/// sample; this class by a table, so the two give the same bucket for every sample and seed.
/// The probability of each bucket (and of `no_bucket`) is the one of Open-Sora's sequential
/// draws; which bucket a given (sample, seed) gets differs from them. To reproduce Open-Sora's
/// assignment draw for draw, use `opensora_v2_rule` with `numpy_source`.
///
/// Why it works: the rule's outcome depends on the sample only through r0 (the number of
/// resolutions too large for it), the frames class of its effective length (which frames keys
/// of the config are ≤ t_eff; images, t_eff = 1, are a class of their own) and, once
/// (resolution, frames key) is chosen, its closest ratio. Each (r0, class) row stores its
/// outcomes' cumulative probabilities; the pick counts those ≤ u with no data-dependent branch,
/// and the closest ratio is found per ratio group (resolutions whose tables have the same
/// ratios) exactly as `aspect_table::closest`.
///
/// Size: the tables hold (resolutions + 1) × (distinct frames keys + 2) rows. A config so large
/// that they would pass `max_table_bytes` (or take long to fill) is not tabled: each sample then
/// walks the rule's distribution as `opensora_v2_rule` does, with the same result.
///
///     const vbucket::compiled_v2_rule rule(config, vbucket::opensora_v2_rule{16.0});
///     vbucket::assign_into(out, config, table, rule, vbucket::fast_source(seed, epoch));
///
/// Precondition of `assign`: `config` is the config the rule was built from.

#include <algorithm>  // std::sort, std::unique, std::max, std::upper_bound
#include <bit>        // std::bit_cast
#include <cassert>    // assert
#include <cmath>      // std::ceil
#include <cstddef>    // std::size_t, std::ptrdiff_t
#include <cstdint>    // std::int32_t, std::int64_t, std::uint32_t, std::uint64_t
#include <limits>     // std::numeric_limits
#include <memory>     // std::shared_ptr
#include <span>       // std::span
#include <vector>     // std::vector

#include "bucket_config.hpp"
#include "detail/compiled.hpp"
#include "meta.hpp"
#include "random.hpp"
#include "rules.hpp"

namespace vbucket {

class compiled_v2_rule {
 public:
  /// The most memory the outcome tables may take; beyond it samples walk the distribution.
  static constexpr std::size_t max_table_bytes = std::size_t{4} << 20;
  /// The most (row, outcome) steps that filling the tables may take.
  static constexpr std::size_t max_table_work = std::size_t{1} << 22;

  compiled_v2_rule() = default;

  /// Compiles `rule` for `config`. Throws when the rule is invalid (see
  /// `opensora_v2_rule::validate`).
  VBUCKET_COMPILED_INLINE explicit compiled_v2_rule(const bucket_config& config,
                                                    opensora_v2_rule rule = {});

  [[nodiscard]] const opensora_v2_rule& rule() const noexcept { return rule_; }

  /// The probability that a sample with `r0` resolutions too large for it and effective length
  /// `t_eff` (after fps thinning; 1 is an image) lands in frames key `k` of resolution `res`
  /// (indices into `config.resolutions()`), whatever its ratio. Preconditions: r0 ≤ the number
  /// of resolutions, res and k in range.
  [[nodiscard]] double probability(std::size_t r0, std::int64_t t_eff, std::size_t res,
                                   std::size_t k) const {
    double p = 0.0;
    walk(r0, t_eff, [&](std::size_t ri, std::size_t key, double q, double) {
      if (ri == res && key == k) p = q;
      return false;
    });
    return p;
  }
  /// The probability of `no_bucket` for (r0, t_eff), as above.
  [[nodiscard]] double no_bucket_probability(std::size_t r0, std::int64_t t_eff) const {
    return walk(r0, t_eff, [](std::size_t, std::size_t, double, double) { return false; });
  }
  /// As `probability`, as the assignment samples it (the step of the cumulative probabilities
  /// it compares draws with); the outcome is named by the id of its ratio 0
  /// (`config.id_of(res, k, 0)`).
  [[nodiscard]] double sampled_probability(std::size_t r0, std::int64_t t_eff,
                                           bucket_id first_bucket) const {
    double p = 0.0, before = 0.0;
    sampled(r0, t_eff, [&](bucket_id base, double cumulative) {
      if (base == first_bucket) p += cumulative - before;
      before = cumulative;
    });
    return p;
  }
  /// As `no_bucket_probability`, as the assignment samples it: 1 − the last cumulative.
  [[nodiscard]] double sampled_no_bucket_probability(std::size_t r0, std::int64_t t_eff) const {
    double last = 0.0;
    sampled(r0, t_eff, [&](bucket_id, double cumulative) { last = cumulative; });
    return 1.0 - last;
  }
  /// The number of distinct ratio lists (aspect tables' ratios in order) among the resolutions.
  [[nodiscard]] std::size_t ratio_groups() const noexcept { return groups_.size(); }

  /// Whether the outcome tables were built (false: the config is too large for them and every
  /// sample walks the distribution; the buckets are the same).
  [[nodiscard]] bool tabled() const noexcept { return width_ > 0; }
  /// Columns of each row of the outcome table (the most outcomes of positive probability of
  /// any (r0, class), one for no_bucket, and padding); 0 when not tabled.
  [[nodiscard]] std::size_t row_width() const noexcept { return width_; }
  /// Bytes held by the outcome tables.
  [[nodiscard]] std::size_t table_bytes() const noexcept {
    return cumulative_.size() * sizeof(double) + outcomes_.size() * sizeof(outcome) +
           guide_.size() * sizeof(std::uint32_t);
  }

  /// `opensora_v2_rule::effective_frames`, exactly, by a double division where that is exact
  /// (frames and divisor below 2^52, where floor(fl(F / Q)) = F / Q: (F / Q + 1) · Q < 2^53),
  /// which is much cheaper than a 64-bit integer division; else the rule's own.
  [[nodiscard]] std::int64_t effective_frames(std::int64_t frames, double fps) const noexcept {
    const bool thin = fps >= rule_.fps_max;  // false for NaN
    const double q = thin ? std::ceil(fps / rule_.fps_max) : 1.0;
    if (!(q >= 1.0 && q < 0x1p52) || frames >= (std::int64_t{1} << 52) || frames < 0)
      return rule_.effective_frames(frames, fps);
    return static_cast<std::int64_t>(static_cast<double>(frames) / q);
  }

  /// The bucket of one sample: one draw from `source.stream(index, 0)`.
  template <random_source Source>
  [[nodiscard]] bucket_id assign(const bucket_config& c, const sample_meta& m, std::uint64_t index,
                                 const Source& source) const noexcept {
    if (!detail::valid_meta(m)) return invalid_sample;
    const std::int64_t t_eff = effective_frames(m.num_frames, m.fps);
    const double pixels = static_cast<double>(m.height * m.width);
    std::size_t r0 = 0;
    for (std::size_t i = 0; i < min_pixels_.size(); i += 4)
      r0 += static_cast<std::size_t>(pixels < min_pixels_[i]) +
            static_cast<std::size_t>(pixels < min_pixels_[i + 1]) +
            static_cast<std::size_t>(pixels < min_pixels_[i + 2]) +
            static_cast<std::size_t>(pixels < min_pixels_[i + 3]);
    const double u = source.stream(index, 0).random();
    if (!tabled()) return walk_assign(c, m, r0, t_eff, u);
    const outcome o = pick(r0 * num_classes_ + class_of(t_eff), u);
    // no_bucket names group 0, so the ratio is looked up without a branch on the outcome.
    const bucket_id id = o.base + static_cast<bucket_id>(closest(
                                      c, static_cast<std::size_t>(o.group), m.height, m.width));
    return o.base < 0 ? no_bucket : id;
  }

  /// The buckets of rows [begin, end) of `table` into out[begin, end): exactly
  /// `assign(c, table[i], i, source)` for every row, computed in stages over blocks of rows
  /// (sizes and classes, then the draws and picks, then the ratios), so that each stage is a
  /// short loop whose iterations the CPU overlaps. `assign_into` uses it. Preconditions:
  /// begin ≤ end ≤ table.size() == out.size(); `c` is the config the rule was built from.
  template <random_source Source>
  void assign_rows(const bucket_config& c, const meta_table& table, std::size_t begin,
                   std::size_t end, std::span<bucket_id> out, const Source& source) const {
    if (!tabled()) {
      for (std::size_t i = begin; i < end; ++i)
        out[i] = assign(c, table[i], static_cast<std::uint64_t>(i), source);
      return;
    }
    constexpr std::size_t block = 256;
    std::uint32_t row[block];
    double ratio[block];
    outcome picked[block];
    std::size_t slow[block];
    const std::uint32_t* const frames = table.num_frames_data();
    const std::uint32_t* const height = table.height_data();
    const std::uint32_t* const width = table.width_data();
    const std::uint32_t* const fps_code = table.fps_code_data();
    const double* const fps = table.fps_values().data();
    const double fps_max = rule_.fps_max;
    for (std::size_t b = begin; b < end; b += block) {
      const std::size_t n = std::min(block, end - b);
      std::size_t num_slow = 0;
      // Stage 1: validity, effective length, resolutions too large, class -> table row, and
      // the ratio h/w. Invalid rows compute on stand-in sizes 1 and are marked by row = max.
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t i = b + j;
        const std::int64_t f = frames[i], h = height[i], wd = width[i];  // 0 to 2^32 - 1
        const bool valid = (f >= 1) & (static_cast<std::uint64_t>(h - 1) < detail::max_side) &
                           (static_cast<std::uint64_t>(wd - 1) < detail::max_side);
        const std::int64_t hs = valid ? h : 1, ws = valid ? wd : 1, fs = valid ? f : 1;
        const double rate = fps[fps_code[i]];
        const bool thin = rate >= fps_max;  // false for NaN
        const double x_raw = rate / fps_max;
        const bool exact = (!thin | (x_raw < 0x1p52)) & (fs < (std::int64_t{1} << 52));
        // x = thin and exact ? x_raw : 1, by masking its bits (compilers turn a select of
        // doubles into a branch, and `thin` is as unpredictable as images are in the data).
        const std::uint64_t keep = std::uint64_t{0} - static_cast<std::uint64_t>(thin & exact);
        const double x = std::max(from_bits(bits_of(x_raw) & keep), 1.0);
        const std::int64_t fe = exact ? fs : 1;
        double q = static_cast<double>(static_cast<std::int64_t>(x));
        q += static_cast<double>(q < x);  // ceil(x), exactly, for 1 ≤ x < 2^52
        const auto t_eff = static_cast<std::int64_t>(static_cast<double>(fe) / q);
        const double pixels = static_cast<double>(hs * ws);
        std::size_t r0 = 0;
        for (std::size_t k = 0; k < min_pixels_.size(); k += 4)
          r0 += static_cast<std::size_t>(pixels < min_pixels_[k]) +
                static_cast<std::size_t>(pixels < min_pixels_[k + 1]) +
                static_cast<std::size_t>(pixels < min_pixels_[k + 2]) +
                static_cast<std::size_t>(pixels < min_pixels_[k + 3]);
        const std::size_t r = r0 * num_classes_ + class_of(t_eff);
        row[j] = valid ? static_cast<std::uint32_t>(r) : invalid_row;
        ratio[j] = static_cast<double>(hs) / static_cast<double>(ws);
        slow[num_slow] = j;
        num_slow += static_cast<std::size_t>(valid & !exact);
      }
      // Stage 2: one draw per row and its pick.
      for (std::size_t j = 0; j < n; ++j) {
        const double u = source.stream(static_cast<std::uint64_t>(b + j), 0).random();
        picked[j] = pick(row[j] == invalid_row ? 0 : row[j], u);
      }
      // Stage 3: the closest ratio in the outcome's group.
      for (std::size_t j = 0; j < n; ++j) {
        const outcome o = picked[j];
        const bucket_id id = o.base + static_cast<bucket_id>(closest_of(
                                          c, static_cast<std::size_t>(o.group), ratio[j]));
        const bucket_id bucket = o.base < 0 ? no_bucket : id;
        out[b + j] = row[j] == invalid_row ? invalid_sample : bucket;
      }
      // Rows whose sizes or rates are beyond the exact fast arithmetic (never in real data).
      for (std::size_t k = 0; k < num_slow; ++k) {
        const std::size_t i = b + slow[k];
        out[i] = assign(c, table[i], static_cast<std::uint64_t>(i), source);
      }
    }
  }

 private:
  struct outcome {
    bucket_id base;      // id of (resolution, key, ratio 0), or no_bucket
    std::int32_t group;  // the resolution's ratio group (0 for no_bucket)
  };

  /// Marks an invalid sample in assign_rows' stage 1.
  static constexpr std::uint32_t invalid_row = std::numeric_limits<std::uint32_t>::max();

  /// Fills the outcome table, row (r0, class) by row, from the rule's distribution; leaves it
  /// empty (width_ = 0) when it would pass the size or work bounds. A row holds its outcomes'
  /// cumulatives, then +inf (no_bucket) padding. With a guide (Chen and Asau's look-up) of
  /// `cells_` per row, entry g = the cumulatives ≤ g / cells_, a draw u in cell g needs only
  /// the `span_` compares after it: every cumulative up to g / cells_ is ≤ u, and at most span_
  /// lie strictly inside the cell.
  VBUCKET_COMPILED_INLINE void build_tables(const bucket_config& config, std::size_t slots);

  /// The outcome of row `row` for the draw u: the first whose cumulative exceeds u, found by
  /// counting those ≤ u (the row ends in +inf with no_bucket), from the guide's start.
  [[nodiscard]] outcome pick(std::size_t row, double u) const noexcept {
    std::size_t j = 0;
    if (cells_ > 0) {
      // u · cells_ is exact (a power of two) and below cells_ for u < 1.
      const auto g = static_cast<std::size_t>(u * static_cast<double>(cells_));
      j = guide_[row * cells_ + (g < cells_ ? g : cells_ - 1)];
    }
    const double* const cum = cumulative_.data() + row * width_ + j;
    for (std::size_t k = 0; k < span_; k += 4)
      j += static_cast<std::size_t>(cum[k] <= u) + static_cast<std::size_t>(cum[k + 1] <= u) +
           static_cast<std::size_t>(cum[k + 2] <= u) + static_cast<std::size_t>(cum[k + 3] <= u);
    return outcomes_[row * width_ + j];
  }

  /// `detail::v2_outcomes` for a sample of (r0, t_eff).
  template <class Visit>
  double walk(std::size_t r0, std::int64_t t_eff, Visit&& visit) const {
    return detail::v2_outcomes(*config_, r0, t_eff == 1, t_eff, visit);
  }
  /// `detail::v2_outcomes` for the samples of table row `row`.
  template <class Visit>
  double walk_row(std::size_t row, Visit&& visit) const {
    const std::size_t r0 = row / num_classes_, cls = row % num_classes_;
    const bool image = cls == image_class();  // the image class has no representative length
    return detail::v2_outcomes(*config_, r0, image, image ? 1 : representative(cls), visit);
  }
  /// The assignment without tables: the first outcome whose cumulative exceeds u.
  [[nodiscard]] bucket_id walk_assign(const bucket_config& c, const sample_meta& m, std::size_t r0,
                                      std::int64_t t_eff, double u) const noexcept {
    bucket_id out = no_bucket;
    const auto& res = c.resolutions();
    detail::v2_outcomes(c, r0, t_eff == 1, t_eff,
                        [&](std::size_t ri, std::size_t k, double, double cumulative) {
                          if (!(u < cumulative)) return false;
                          out = detail::ratio_bucket(res[ri], k, m);
                          return true;
                        });
    return out;
  }
  /// Calls fn(base, cumulative) for every outcome the assignment compares draws with.
  template <class Fn>
  void sampled(std::size_t r0, std::int64_t t_eff, Fn fn) const {
    if (!tabled()) {
      const auto& res = config_->resolutions();
      walk(r0, t_eff, [&](std::size_t ri, std::size_t k, double, double cumulative) {
        fn(res[ri].first_bucket + static_cast<bucket_id>(k * res[ri].info.table.size()),
           cumulative);
        return false;
      });
      return;
    }
    const std::size_t row = r0 * num_classes_ + class_of(t_eff);
    for (std::size_t j = 0; j < width_; ++j) {
      const double cum = cumulative_[row * width_ + j];
      if (cum == std::numeric_limits<double>::infinity()) break;
      fn(outcomes_[row * width_ + j].base, cum);
    }
  }

  [[nodiscard]] std::size_t image_class() const noexcept { return num_classes_ - 1; }
  /// Video class c: exactly c keys are ≤ t_eff. Image class: t_eff == 1.
  [[nodiscard]] std::size_t class_of(std::int64_t t_eff) const noexcept {
    if (!class_lut_.empty()) {
      const std::int64_t last = static_cast<std::int64_t>(class_lut_.size()) - 1;
      const std::int64_t k = t_eff < 0 ? 0 : (t_eff > last ? last : t_eff);
      const std::size_t c = class_lut_[static_cast<std::size_t>(k)];
      return t_eff == 1 ? image_class() : c;
    }
    std::size_t c = 0;
    for (std::size_t i = 0; i < keys_.size(); i += 4)
      c += static_cast<std::size_t>(keys_[i] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 1] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 2] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 3] <= t_eff);
    return t_eff == 1 ? image_class() : c;
  }
  /// A length of video class c (for counting the keys longer than it): 0 for class 0, else
  /// the c-th shortest key. Precondition: c is a video class (c < image_class()).
  [[nodiscard]] std::int64_t representative(std::size_t cls) const noexcept {
    assert(cls < image_class());
    return cls == 0 ? 0 : keys_[cls - 1];
  }
  /// One ratio group's closest-ratio look-up. Between two adjacent distinct ratios u[p] <
  /// u[p+1], `aspect_table::closest` (two-candidate rule: the nearer, ties to the earlier table
  /// entry, distances in floating point) picks u[p] for a prefix of [u[p], u[p+1]) and u[p+1]
  /// after it, since a - u[p] only grows and u[p+1] - a only shrinks with a. So the answer for
  /// ratio a is result[number of thresholds ≤ a], with thresholds found exactly once, here, by
  /// bisecting the doubles between u[p] and u[p+1]. The count is a table look-up on the top bits
  /// of a (positive doubles order as their bit patterns) and at most `span` compares.
  struct ratio_group {
    std::size_t resolution;  // a resolution of the group (for the table's own closest)
    bool lookup;             // false: use the table's own closest (close or odd ratios)
    std::size_t thresholds;  // offset of its thresholds in thresholds_ (padded_thresholds_)
    std::size_t count;       // the number of thresholds
    std::size_t results;     // offset of its count -> table index map in results_
    std::size_t cells;       // offset of its cells in cell_base_
    std::int64_t last_cell;  // its number of cells - 1
    std::int64_t lo_cell;    // the top bits of the ratio that make cell 0
    unsigned shift;          // a ratio's cell is (bits >> shift) - lo_cell
    std::size_t span;        // the most thresholds in one cell above its first value
  };

  static std::uint64_t bits_of(double x) noexcept { return std::bit_cast<std::uint64_t>(x); }
  static double from_bits(std::uint64_t b) noexcept { return std::bit_cast<double>(b); }

  VBUCKET_COMPILED_INLINE void add_group(const aspect_table& t, std::size_t resolution);

 public:
  /// The index of the ratio closest to h/w in the tables of ratio group `g`: the same as
  /// `aspect_table::closest`, with the split found by counting all ratios ≤ h/w (independent
  /// compares, where a binary search is a chain of dependent loads). Precondition: h, w > 0.
  [[nodiscard]] std::size_t closest(const bucket_config& c, std::size_t g, std::int64_t h,
                                    std::int64_t w) const noexcept {
    return closest_of(c, g, static_cast<double>(h) / static_cast<double>(w));
  }
  /// As `closest`, for the ratio a = h/w already divided out.
  [[nodiscard]] std::size_t closest_of(const bucket_config& c, std::size_t g,
                                       double a) const noexcept {
    const ratio_group& grp = groups_[g];
    if (!grp.lookup || !(a < 0x1p25) || !(a > 0.0))
      return c.resolutions()[grp.resolution].info.table.closest_ratio(a);
    std::int64_t cell = static_cast<std::int64_t>(bits_of(a) >> grp.shift) - grp.lo_cell;
    cell = cell < 0 ? 0 : cell;
    cell = cell > grp.last_cell ? grp.last_cell : cell;
    std::size_t pos = cell_base_[grp.cells + static_cast<std::size_t>(cell)];
    const double* const t = padded_thresholds_.data() + grp.thresholds + pos;
    for (std::size_t k = 0; k < cell_span_; ++k) pos += static_cast<std::size_t>(t[k] <= a);
    return results_[grp.results + pos];
  }

 private:
  opensora_v2_rule rule_;
  std::shared_ptr<const bucket_config> config_;  // the config it was built from
  std::size_t num_res_ = 0;
  std::size_t num_classes_ = 0;
  std::size_t width_ = 0;           // columns per table row; 0: not tabled
  std::size_t cells_ = 0;           // guide cells per row (a power of two); 0: no guide
  std::size_t span_ = 0;            // compares per pick after the guide's start
  std::vector<double> min_pixels_;  // per resolution, descending; -inf padding
  std::vector<std::int64_t> keys_;  // the config's distinct frames keys, ascending; padded
  static constexpr std::int64_t max_lut_key = 1 << 15;  // counts fit uint16
  std::vector<std::uint16_t> class_lut_;   // length t -> keys ≤ t, when the keys are short
  std::vector<double> cumulative_;         // rows × width_ cumulative probabilities, +inf padded
  std::vector<outcome> outcomes_;          // rows × width_ outcomes, no_bucket padded
  std::vector<std::uint32_t> guide_;       // rows × cells_: cumulatives ≤ the cell's start
  std::vector<std::int32_t> group_of_;     // per resolution: its ratio group
  std::vector<ratio_group> groups_;        // distinct ratio lists
  std::size_t cell_span_ = 0;              // the most compares after a cell look-up
  std::vector<double> thresholds_;         // per group: its thresholds (while building)
  std::vector<double> padded_thresholds_;  // per group: thresholds, then cell_span_ × +inf
  std::vector<std::uint32_t> results_;     // per group: threshold count -> table index
  std::vector<std::uint32_t> cell_base_;   // per group and cell: thresholds ≤ its first value
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE compiled_v2_rule::compiled_v2_rule(const bucket_config& config,
                                                           opensora_v2_rule rule)
    : rule_(rule), config_(std::make_shared<const bucket_config>(config)) {
  rule_.validate();
  const auto& res = config.resolutions();
  num_res_ = res.size();
  std::size_t slots = 0;
  for (const resolution_entry& r : res) {
    min_pixels_.push_back(r.min_pixels);
    for (const frames_entry& f : r.frames) keys_.push_back(f.frames);
    slots += r.frames.size();
  }
  std::sort(keys_.begin(), keys_.end());
  keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
  num_classes_ = keys_.size() + 2;  // video classes 0..U, then the image class

  // Resolutions whose tables have the same ratios in the same order share a ratio group:
  // their closest ratio is the same.
  group_of_.assign(num_res_, 0);
  for (std::size_t ri = 0; ri < num_res_; ++ri) {
    const aspect_table& t = res[ri].info.table;
    std::size_t g = 0;
    for (; g < groups_.size(); ++g) {
      const aspect_table& u = res[groups_[g].resolution].info.table;
      bool same = u.size() == t.size();
      for (std::size_t a = 0; same && a < t.size(); ++a) same = u[a].ratio == t[a].ratio;
      if (same) break;
    }
    if (g == groups_.size()) add_group(t, ri);
    group_of_[ri] = static_cast<std::int32_t>(g);
  }
  // Every group's thresholds padded with +inf (never ≤ a ratio) so that the count in
  // closest_of() has the same trip count whatever the outcome's group.
  for (const ratio_group& grp : groups_) cell_span_ = std::max(cell_span_, grp.span);
  for (ratio_group& grp : groups_) {
    std::vector<double> padded(
        thresholds_.begin() + static_cast<std::ptrdiff_t>(grp.thresholds),
        thresholds_.begin() + static_cast<std::ptrdiff_t>(grp.thresholds + grp.count));
    padded.resize(grp.count + cell_span_, std::numeric_limits<double>::infinity());
    grp.thresholds = padded_thresholds_.size();
    padded_thresholds_.insert(padded_thresholds_.end(), padded.begin(), padded.end());
  }
  thresholds_.clear();

  build_tables(config, slots);

  // The counts in assign() go four at a time: pad with values that never count.
  while (min_pixels_.size() % 4 != 0)
    min_pixels_.push_back(-std::numeric_limits<double>::infinity());
  // Class by table look-up when the keys are short (they are frame counts): entry t is the
  // number of keys ≤ t, and every length from the longest key on has the last entry's class.
  const std::int64_t longest = keys_.empty() ? 0 : keys_.back();
  if (longest <= max_lut_key) {
    class_lut_.assign(static_cast<std::size_t>(longest) + 1, 0);
    for (std::size_t t = 0; t < class_lut_.size(); ++t)
      class_lut_[t] = static_cast<std::uint16_t>(
          std::upper_bound(keys_.begin(), keys_.end(), static_cast<std::int64_t>(t)) -
          keys_.begin());
  }
  while (keys_.size() % 4 != 0) keys_.push_back(std::numeric_limits<std::int64_t>::max());
}

VBUCKET_COMPILED_INLINE void compiled_v2_rule::build_tables(const bucket_config& config,
                                                            std::size_t slots) {
  const std::size_t rows = (num_res_ + 1) * num_classes_;
  if (rows > max_table_work / (slots + 1)) return;
  std::size_t most = 0;
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t used = 0;
    walk_row(row, [&](std::size_t, std::size_t, double, double) {
      ++used;
      return false;
    });
    most = std::max(most, used);
  }
  const std::size_t used = most + 1;  // + no_bucket
  std::size_t cells = 4;
  while (cells < 2 * used) cells *= 2;
  const std::size_t entry = sizeof(double) + sizeof(outcome);
  if (rows > max_table_bytes / (2 * used * entry + cells * sizeof(std::uint32_t))) return;
  // The cumulatives, row by row at stride `used`.
  std::vector<double> cum(rows * used, std::numeric_limits<double>::infinity());
  std::vector<outcome> outs(rows * used, outcome{no_bucket, 0});
  const auto& res = config.resolutions();
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t j = row * used;
    walk_row(row, [&](std::size_t ri, std::size_t k, double, double cumulative) {
      cum[j] = cumulative;
      outs[j] = {res[ri].first_bucket + static_cast<bucket_id>(k * res[ri].info.table.size()),
                 group_of_[ri]};
      ++j;
      return false;
    });
  }
  // The guide, and the most cumulatives strictly inside one cell.
  guide_.assign(rows * cells, 0);
  std::size_t span = 0;
  const double scale = static_cast<double>(cells);
  for (std::size_t row = 0; row < rows; ++row) {
    const double* const c = cum.data() + row * used;
    std::size_t at_or_below = 0, below_next = 0;
    for (std::size_t g = 0; g < cells; ++g) {
      const double lo = static_cast<double>(g) / scale, hi = static_cast<double>(g + 1) / scale;
      while (at_or_below < used && c[at_or_below] <= lo) ++at_or_below;
      while (below_next < used && c[below_next] < hi) ++below_next;
      guide_[row * cells + g] = static_cast<std::uint32_t>(at_or_below);
      span = std::max(span, below_next - at_or_below);
    }
  }
  if ((span + 3) / 4 * 4 >= used) {  // no gain over counting the whole row
    guide_.clear();
    cells_ = 0;
    width_ = (used + 3) / 4 * 4;
    span_ = width_;
  } else {
    cells_ = cells;
    span_ = (span + 3) / 4 * 4;  // compared four at a time
    width_ = used + span_;       // a guide entry ≤ used − 1, then span_ entries
  }
  cumulative_.assign(rows * width_, std::numeric_limits<double>::infinity());
  outcomes_.assign(rows * width_, outcome{no_bucket, 0});
  for (std::size_t row = 0; row < rows; ++row) {
    std::copy_n(cum.begin() + static_cast<std::ptrdiff_t>(row * used), used,
                cumulative_.begin() + static_cast<std::ptrdiff_t>(row * width_));
    std::copy_n(outs.begin() + static_cast<std::ptrdiff_t>(row * used), used,
                outcomes_.begin() + static_cast<std::ptrdiff_t>(row * width_));
  }
}

VBUCKET_COMPILED_INLINE void compiled_v2_rule::add_group(const aspect_table& t,
                                                         std::size_t resolution) {
  const std::size_t n = t.size();
  ratio_group grp{};
  grp.resolution = resolution;
  // Distinct ratios, ascending, each with the first table index that has it.
  std::vector<double> u;
  std::vector<std::uint32_t> first;
  bool usable = n > 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = t[i].ratio;
    if (!(r > 0.0 && r < 0x1p60)) usable = false;
    u.push_back(r);
  }
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  for (const double r : u) {
    std::uint32_t f = std::numeric_limits<std::uint32_t>::max();
    for (std::size_t i = 0; i < n; ++i)
      if (t[i].ratio == r) f = std::min(f, static_cast<std::uint32_t>(i));
    first.push_back(f);
  }
  // The table's two-candidate condition (else only its own closest is exact).
  if (usable) {
    const double apart = std::max(0x1p-26, 0x1p-50 * u.back());
    for (std::size_t p = 1; p < u.size(); ++p)
      if (!(u[p] - u[p - 1] > apart)) usable = false;
  }
  grp.lookup = usable;
  if (!usable) {
    grp.span = 0;
    groups_.push_back(grp);
    return;
  }
  std::vector<double> th;
  for (std::size_t p = 0; p + 1 < u.size(); ++p) {
    const auto takes_lower = [&](double a) {
      const double below = a - u[p], above = u[p + 1] - a;
      return below < above || (below == above && first[p] < first[p + 1]);
    };
    std::uint64_t lo = bits_of(u[p]), hi = bits_of(u[p + 1]);  // lower: yes at lo, no at hi
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      (takes_lower(from_bits(mid)) ? lo : hi) = mid;
    }
    th.push_back(from_bits(hi));
  }
  // Cells: the fewest top bits that leave at most one threshold inside a cell, within a
  // table of 8192 cells; else the fewest compares that fit.
  const auto layout = [&](unsigned shift, std::size_t& span, std::int64_t& lo_cell,
                          std::int64_t& last) {
    span = 0;
    if (th.empty()) {
      lo_cell = 0;
      last = 0;
      return;
    }
    lo_cell = static_cast<std::int64_t>(bits_of(th.front()) >> shift) - 1;
    last = static_cast<std::int64_t>(bits_of(th.back()) >> shift) - lo_cell;
    for (std::size_t k = 0; k < th.size();) {
      const std::uint64_t cell = bits_of(th[k]) >> shift;
      const double cell_min = from_bits(cell << shift);
      std::size_t inside = 0;
      for (; k < th.size() && (bits_of(th[k]) >> shift) == cell; ++k)
        inside += static_cast<std::size_t>(th[k] > cell_min);
      span = std::max(span, inside);
    }
  };
  unsigned best_shift = 52;
  std::size_t best_span = std::numeric_limits<std::size_t>::max();
  for (unsigned m = 0; m <= 16; ++m) {
    std::size_t span = 0;
    std::int64_t lo_cell = 0, last = 0;
    layout(52 - m, span, lo_cell, last);
    if (last >= 8192) break;
    if (span < best_span) {
      best_span = span;
      best_shift = 52 - m;
    }
    if (span <= 1) break;
  }
  grp.shift = best_shift;
  layout(grp.shift, grp.span, grp.lo_cell, grp.last_cell);
  grp.thresholds = thresholds_.size();
  grp.count = th.size();
  thresholds_.insert(thresholds_.end(), th.begin(), th.end());
  grp.results = results_.size();
  results_.insert(results_.end(), first.begin(), first.end());
  grp.cells = cell_base_.size();
  cell_base_.push_back(0);  // cell 0 lies below every threshold
  for (std::int64_t c = 1; c <= grp.last_cell; ++c) {
    const double cell_min = from_bits(static_cast<std::uint64_t>(grp.lo_cell + c) << grp.shift);
    cell_base_.push_back(
        static_cast<std::uint32_t>(std::upper_bound(th.begin(), th.end(), cell_min) - th.begin()));
  }
  groups_.push_back(grp);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(bucket_rule<compiled_v2_rule>);

}  // namespace vbucket
