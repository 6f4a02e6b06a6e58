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
#include "meta.hpp"
#include "rules.hpp"
#include "vbucket/base/random.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/simd.hpp"  // VBUCKET_AVX2_DISPATCH, simd_path, detail::cpu_has_avx2

// The intrinsics only where the vector path is defined (header-only code, vbucket::compiled).
#if VBUCKET_AVX2_DISPATCH && VBUCKET_HEADER_DEFINITIONS
#include <immintrin.h>  // AVX2 intrinsics (used only in target("avx2") functions)
#endif

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
  ///
  /// With the fast draws (`fast_source`, also through `shifted_source`) on a CPU with AVX2, the
  /// rows go four at a time through a vector path (`path` = `simd_path::automatic`); both paths
  /// give the same ids, bit for bit (every value is the same IEEE operation on the same
  /// operands). `simd_path::scalar` forces the scalar path, `simd_path::avx2` the vector one
  /// where the CPU has it (for tests and benchmarks).
  template <random_source Source>
  void assign_rows(const bucket_config& c, const meta_table& table, std::size_t begin,
                   std::size_t end, std::span<bucket_id> out, const Source& source,
                   simd_path path = simd_path::automatic) const {
    assign_rows_of(c, table, nullptr, begin, end, out, source, path);
  }

  /// As `assign_rows`, for the rows listed in `rows`: out[i] = `assign(c, table[rows[i]],
  /// rows[i], source)` for i in [begin, end) (the run plan assigns only the draws it has not
  /// delivered when a stage brings new probabilities). Preconditions: end ≤ rows.size() ==
  /// out.size(); every row < table.size().
  template <random_source Source>
  void assign_rows(const bucket_config& c, const meta_table& table,
                   std::span<const std::uint32_t> rows, std::size_t begin, std::size_t end,
                   std::span<bucket_id> out, const Source& source,
                   simd_path path = simd_path::automatic) const {
    assign_rows_of(c, table, rows.data(), begin, end, out, source, path);
  }

  /// Whether `assign_rows` can take the vector path for this config (tabled, with at most
  /// `max_vector_groups` ratio groups); it does where the CPU has AVX2.
  [[nodiscard]] bool vectorised() const noexcept { return pick_cells_ > 0; }
  /// The most ratio groups the vector path looks ratios up in (their parameters are lanes of
  /// one register).
  static constexpr std::size_t max_vector_groups = 8;

 private:
  /// Both `assign_rows`: entry i is row i, or row at[i] when `at` is given.
  template <random_source Source>
  void assign_rows_of(const bucket_config& c, const meta_table& table, const std::uint32_t* at,
                      std::size_t begin, std::size_t end, std::span<bucket_id> out,
                      const Source& source, simd_path path) const {
    if (!tabled()) {
      for (std::size_t i = begin; i < end; ++i) {
        const std::size_t r = at != nullptr ? at[i] : i;
        out[i] = assign(c, table[r], static_cast<std::uint64_t>(r), source);
      }
      return;
    }
#if VBUCKET_AVX2_DISPATCH
    if constexpr (detail::fast_draws<Source>) {
      if (path != simd_path::scalar && vectorised() && detail::cpu_has_avx2() &&
          table.fps_values().size() <= std::size_t{1} << 31) {
        const std::size_t vector_end = begin + (end - begin) / 4 * 4;
        if constexpr (std::is_same_v<Source, fast_source>)
          assign_rows_avx2(c, table, begin, vector_end, out, source, 0, at);
        else
          assign_rows_avx2(c, table, begin, vector_end, out, source.inner, source.first, at);
        begin = vector_end;
      }
    }
#endif
    (void)path;
    assign_rows_scalar(c, table, begin, end, out, source, at);
  }

  /// `assign_rows` on the scalar path.
  template <random_source Source>
  void assign_rows_scalar(const bucket_config& c, const meta_table& table, std::size_t begin,
                          std::size_t end, std::span<bucket_id> out, const Source& source,
                          const std::uint32_t* at) const {
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
        const std::size_t i = at != nullptr ? at[b + j] : b + j;
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
        const std::size_t i = at != nullptr ? at[b + j] : b + j;
        const double u = source.stream(static_cast<std::uint64_t>(i), 0).random();
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
        const std::size_t i = at != nullptr ? at[b + slow[k]] : b + slow[k];
        out[b + slow[k]] = assign(c, table[i], static_cast<std::uint64_t>(i), source);
      }
    }
  }

#if VBUCKET_AVX2_DISPATCH
  /// Rows [begin, end) (a multiple of 4 apart) with the draws of `inner` (a `fast_source`) for
  /// samples first + i (entry i is row at[i] when `at` is given, its draw that of sample
  /// first + at[i]): assign_rows_scalar's stages, four rows at a time. A template only so
  /// that header-only code compiles it where it is used; defined below with the definitions
  /// (vbucket::compiled instantiates it for `fast_source`, its one argument).
  template <class Inner>
  [[gnu::target("avx2")]] void assign_rows_avx2(const bucket_config& c, const meta_table& table,
                                                std::size_t begin, std::size_t end,
                                                std::span<bucket_id> out, const Inner& inner,
                                                std::uint64_t first, const std::uint32_t* at) const;
#endif  // VBUCKET_AVX2_DISPATCH

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
  std::vector<double> keys_d_;      // the distinct keys as doubles (unpadded), for the vector path
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

  // The vector path's tables (built when the outcome tables are, with at most
  // max_vector_groups ratio groups; pick_cells_ = 0: none). A finer guide whose cells hold at
  // most pick_span_ cumulatives strictly inside, stored with the outcomes they separate, so a
  // pick is pick_span_ + 1 gathers; and each ratio group's cells likewise, their cell_span_
  // thresholds and the results between them.
  static constexpr std::size_t max_pick_bytes = std::size_t{128} << 10;
  std::size_t pick_cells_ = 0;                // cells per row (a power of two)
  std::size_t pick_span_ = 0;                 // thresholds per cell
  std::vector<double> pick_thresholds_;       // rows × pick_cells_ × pick_span_, +inf padded
  std::vector<outcome> pick_outcomes_;        // rows × pick_cells_ × (pick_span_ + 1)
  std::vector<double> ratio_thresholds_;      // the lookup groups' cells × cell_span_
  std::vector<std::uint32_t> ratio_results_;  // the lookup groups' cells × (cell_span_ + 1)
  /// Per ratio group (a lane each): its cell parameters, where its cells start in
  /// ratio_thresholds_ / cell_span_, and -1 when its ratios take the table's own closest.
  struct group_lanes {
    std::int32_t shift[8], lo_cell[8], last_cell[8], offset[8], table_only[8];
  } group_lanes_{};
  VBUCKET_COMPILED_INLINE void build_vector_tables();
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
  // As doubles, for counting keys ≤ an effective length below 2^32 (exact: a key from 2^53 on
  // rounds to a double ≥ 2^53, which is above every such length too).
  for (const std::int64_t k : keys_) keys_d_.push_back(static_cast<double>(k));
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
  build_vector_tables();

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

VBUCKET_COMPILED_INLINE void compiled_v2_rule::build_vector_tables() {
  if (!tabled() || groups_.size() > max_vector_groups) return;
  const std::size_t rows = (num_res_ + 1) * num_classes_;
  // The count of a row's cumulatives ≤ u is its outcome. For u in cell g, [g / C, (g + 1) / C):
  // those ≤ g / C count, those ≥ (g + 1) / C do not, the ones strictly between are compared.
  const auto layout = [&](std::size_t cells, bool fill) {
    std::size_t span = 0;
    const double scale = static_cast<double>(cells);
    for (std::size_t row = 0; row < rows; ++row) {
      const double* const cum = cumulative_.data() + row * width_;
      for (std::size_t g = 0; g < cells; ++g) {
        const double lo = static_cast<double>(g) / scale, hi = static_cast<double>(g + 1) / scale;
        std::size_t below = 0, inside = 0;
        for (std::size_t j = 0; j < width_; ++j) {
          below += static_cast<std::size_t>(cum[j] <= lo);
          inside += static_cast<std::size_t>(cum[j] > lo && cum[j] < hi);
        }
        span = std::max(span, inside);
        if (!fill) continue;
        for (std::size_t k = 0; k < pick_span_; ++k)
          pick_thresholds_.push_back(k < inside ? cum[below + k]
                                                : std::numeric_limits<double>::infinity());
        for (std::size_t k = 0; k <= pick_span_; ++k)
          pick_outcomes_.push_back(outcomes_[row * width_ + std::min(below + k, width_ - 1)]);
      }
    }
    return span;
  };
  std::size_t best_cells = 0, best_span = std::numeric_limits<std::size_t>::max();
  for (std::size_t cells = 16; cells <= 4096; cells *= 2) {
    const std::size_t span = layout(cells, false);
    if (best_cells > 0 &&
        rows * cells * (sizeof(double) * span + sizeof(outcome) * (span + 1)) > max_pick_bytes)
      break;
    if (span < best_span) {
      best_span = span;
      best_cells = cells;
    }
    if (span <= 1) break;
  }
  pick_cells_ = best_cells;
  pick_span_ = best_span;
  layout(pick_cells_, true);

  // The ratio groups' cells: thresholds from the cell's first count on, and the results.
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const ratio_group& grp = groups_[gi];
    group_lanes_.table_only[gi] = grp.lookup ? 0 : -1;
    if (!grp.lookup) continue;
    group_lanes_.shift[gi] = static_cast<std::int32_t>(grp.shift);
    group_lanes_.lo_cell[gi] = static_cast<std::int32_t>(grp.lo_cell);
    group_lanes_.last_cell[gi] = static_cast<std::int32_t>(grp.last_cell);
    group_lanes_.offset[gi] = static_cast<std::int32_t>(ratio_results_.size() / (cell_span_ + 1));
    for (std::int64_t cell = 0; cell <= grp.last_cell; ++cell) {
      const std::size_t pos = cell_base_[grp.cells + static_cast<std::size_t>(cell)];
      for (std::size_t k = 0; k < cell_span_; ++k)
        ratio_thresholds_.push_back(padded_thresholds_[grp.thresholds + pos + k]);
      for (std::size_t k = 0; k <= cell_span_; ++k)
        ratio_results_.push_back(results_[grp.results + std::min(pos + k, grp.count)]);
    }
  }
  if (ratio_results_.empty()) {  // every group takes the table's own: one cell read, unused
    ratio_thresholds_.assign(cell_span_, std::numeric_limits<double>::infinity());
    ratio_results_.assign(cell_span_ + 1, 0);
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

#if VBUCKET_HEADER_DEFINITIONS && VBUCKET_AVX2_DISPATCH
namespace detail::avx2 {
// Templates only so that header-only code compiles them where they are used (GCC analyses a
// non-template target("avx2") function with intrinsics in every translation unit).
// The vector path: four rows a lane each, as assign_rows_scalar's stages, with the same
// IEEE operations (divisions, compares, roundings) on the same values, so the same ids.
using v4d = __m256d;
using v4i = __m256i;
using v4i32 = __m128i;

/// a · c mod 2^64 for a constant c (c_lo, c_hi: its low and high 32 bits in each lane).
template <int = 0>
[[gnu::target("avx2")]] inline v4i mul64(v4i a, v4i c_lo, v4i c_hi) noexcept {
  const v4i lo = _mm256_mul_epu32(a, c_lo);
  const v4i cross =
      _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}
/// detail::mix64 in each lane.
template <int = 0>
[[gnu::target("avx2")]] inline v4i mix64(v4i z) noexcept {
  const v4i m1_lo = _mm256_set1_epi64x(0x1ce4e5b9LL), m1_hi = _mm256_set1_epi64x(0xbf58476dLL);
  const v4i m2_lo = _mm256_set1_epi64x(0x133111ebLL), m2_hi = _mm256_set1_epi64x(0x94d049bbLL);
  z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), m1_lo, m1_hi);
  z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), m2_lo, m2_hi);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}
/// detail::to_unit_double in each lane: the top 53 bits as a double (high 21 and low 32 bits
/// placed in the mantissas of 2^84 and 2^52, both subtracted: every step is exact), · 2^-53.
template <int = 0>
[[gnu::target("avx2")]] inline v4d to_unit(v4i x) noexcept {
  const v4i v = _mm256_srli_epi64(x, 11);
  const v4i lo = _mm256_blend_epi32(v, _mm256_set1_epi64x(0x4330000000000000LL), 0xaa);
  const v4i hi =
      _mm256_or_si256(_mm256_srli_epi64(v, 32), _mm256_set1_epi64x(0x4530000000000000LL));
  const v4d d_hi = _mm256_sub_pd(_mm256_castsi256_pd(hi), _mm256_set1_pd(0x1p84));
  const v4d d = _mm256_add_pd(d_hi, _mm256_sub_pd(_mm256_castsi256_pd(lo), _mm256_set1_pd(0x1p52)));
  return _mm256_mul_pd(d, _mm256_set1_pd(0x1.0p-53));
}
/// The low 32 bits of each 64-bit lane.
template <int = 0>
[[gnu::target("avx2")]] inline v4i32 narrow(v4i x) noexcept {
  return _mm256_castsi256_si128(
      _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}
// Gathers with an explicit zero source (GCC 12 warns that the plain forms' undefined source
// may be used uninitialised).
template <int = 0>
[[gnu::target("avx2")]] inline v4d gather(const double* p, v4i32 index) noexcept {
  const v4d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), p, index, all, 8);
}
template <int = 0>
[[gnu::target("avx2")]] inline v4i32 gather(const int* p, v4i32 index) noexcept {
  return _mm_mask_i32gather_epi32(_mm_setzero_si128(), p, index, _mm_set1_epi32(-1), 4);
}
template <int = 0>
[[gnu::target("avx2")]] inline v4i gather(const long long* p, v4i32 index) noexcept {
  const v4i all = _mm256_set1_epi64x(-1);
  return _mm256_mask_i32gather_epi64(_mm256_setzero_si256(), p, index, all, 8);
}
/// Four 32-bit values of a column at rows r[0..3].
template <int = 0>
[[gnu::target("avx2")]] inline v4i32 column_at(const std::uint32_t* column,
                                               const std::uint32_t* r) noexcept {
  return _mm_setr_epi32(static_cast<int>(column[r[0]]), static_cast<int>(column[r[1]]),
                        static_cast<int>(column[r[2]]), static_cast<int>(column[r[3]]));
}
/// Eight 32-bit lanes from memory.
template <int = 0>
[[gnu::target("avx2")]] inline v4i lanes(const std::int32_t* v) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const v4i*>(v));
}
/// 1.0 where the mask is set, else 0.0.
template <int = 0>
[[gnu::target("avx2")]] inline v4d ones_where(v4d mask) noexcept {
  return _mm256_and_pd(mask, _mm256_set1_pd(1.0));
}
}  // namespace detail::avx2

template <class Inner>
[[gnu::target("avx2")]] void compiled_v2_rule::assign_rows_avx2(
    const bucket_config& c, const meta_table& table, std::size_t begin, std::size_t end,
    std::span<bucket_id> out, const Inner& inner, std::uint64_t first,
    const std::uint32_t* row_at) const {
  using namespace detail::avx2;
  const std::uint64_t key = inner.key();
  const std::uint32_t* const frames = table.num_frames_data();
  const std::uint32_t* const height = table.height_data();
  const std::uint32_t* const width = table.width_data();
  const std::uint32_t* const fps_code = table.fps_code_data();
  const double* const fps = table.fps_values().data();
  const v4d fps_max = _mm256_set1_pd(rule_.fps_max);
  const v4d one = _mm256_set1_pd(1.0);
  const v4d image_class_d = _mm256_set1_pd(static_cast<double>(image_class()));
  const v4d num_classes_d = _mm256_set1_pd(static_cast<double>(num_classes_));
  const v4i32 one32 = _mm_set1_epi32(1), side = _mm_set1_epi32(static_cast<int>(detail::max_side));
  const v4i32 minus_one32 = _mm_set1_epi32(-1);
  const v4i32 sign32 = _mm_set1_epi32(std::numeric_limits<std::int32_t>::min());
  const v4i key_v = _mm256_set1_epi64x(static_cast<long long>(key));
  const v4i gamma = _mm256_set1_epi64x(static_cast<long long>(detail::golden_gamma));
  const v4i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  const v4d pick_cells_d = _mm256_set1_pd(static_cast<double>(pick_cells_));
  const v4i32 pick_last32 = _mm_set1_epi32(static_cast<int>(pick_cells_ - 1));
  const v4i32 pick_cells32 = _mm_set1_epi32(static_cast<int>(pick_cells_));
  const v4i32 pick_span32 = _mm_set1_epi32(static_cast<int>(pick_span_));
  const v4i32 ratio_span32 = _mm_set1_epi32(static_cast<int>(cell_span_));
  const v4i group_shift = lanes(group_lanes_.shift), group_lo = lanes(group_lanes_.lo_cell);
  const v4i group_last = lanes(group_lanes_.last_cell), group_offset = lanes(group_lanes_.offset);
  const v4i group_table_only = lanes(group_lanes_.table_only);
  const v4i32 no_bucket32 = _mm_set1_epi32(no_bucket);
  const v4i32 invalid32 = _mm_set1_epi32(invalid_sample);
  const v4d ratio_max = _mm256_set1_pd(0x1p25);
  const auto* const pick_outcomes = reinterpret_cast<const long long*>(pick_outcomes_.data());
  const auto* const ratio_results = reinterpret_cast<const int*>(ratio_results_.data());
  // Stages over blocks of rows, as assign_rows_scalar's: each a short loop whose iterations
  // the CPU overlaps (one loop of all three is a chain of divisions and gathers too long for
  // the out-of-order window).
  constexpr std::size_t block = 256;
  alignas(32) std::int32_t row_of[block], valid_of[block], base_of[block], group_of[block];
  alignas(32) double ratio_of[block];
  std::uint32_t odd[block];  // rows past the exact fast arithmetic, or a table's own closest
  for (std::size_t b = begin; b < end; b += block) {
    const std::size_t n = std::min(block, end - b);
    std::size_t num_slow = 0, num_odd = 0;
    std::uint32_t slow_at[block];
    // Stage 1: validity, effective length, class, resolutions too large, ratio.
    for (std::size_t j = 0; j < n; j += 4) {
      const std::size_t i = b + j;
      v4i32 f, h, w, code;
      if (row_at == nullptr) {
        f = _mm_loadu_si128(reinterpret_cast<const v4i32*>(frames + i));
        h = _mm_loadu_si128(reinterpret_cast<const v4i32*>(height + i));
        w = _mm_loadu_si128(reinterpret_cast<const v4i32*>(width + i));
        code = _mm_loadu_si128(reinterpret_cast<const v4i32*>(fps_code + i));
      } else {  // scalar loads: cheaper than gathers on some CPUs (AMD Zen 2)
        const std::uint32_t* const r = row_at + i;
        f = column_at(frames, r);
        h = column_at(height, r);
        w = column_at(width, r);
        code = column_at(fps_code, r);
      }
      // A side s is valid when s - 1 (as a signed 32-bit value) is in [0, max_side).
      const v4i32 h1 = _mm_sub_epi32(h, one32), w1 = _mm_sub_epi32(w, one32);
      const v4i32 valid32 = _mm_andnot_si128(
          _mm_cmpeq_epi32(f, _mm_setzero_si128()),
          _mm_and_si128(
              _mm_and_si128(_mm_cmpgt_epi32(h1, minus_one32), _mm_cmpgt_epi32(side, h1)),
              _mm_and_si128(_mm_cmpgt_epi32(w1, minus_one32), _mm_cmpgt_epi32(side, w1))));
      const v4d valid = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(valid32));
      const v4d hs = _mm256_cvtepi32_pd(_mm_blendv_epi8(one32, h, valid32));
      const v4d ws = _mm256_cvtepi32_pd(_mm_blendv_epi8(one32, w, valid32));
      // Frames are unsigned 32-bit: flip the sign bit, convert as signed, add 2^31 back.
      const v4d fs = _mm256_add_pd(
          _mm256_cvtepi32_pd(_mm_xor_si128(_mm_blendv_epi8(one32, f, valid32), sign32)),
          _mm256_set1_pd(0x1p31));
      const v4d rate = gather(fps, code);
      const v4d thin = _mm256_cmp_pd(rate, fps_max, _CMP_GE_OQ);  // false for NaN
      const v4d x_raw = _mm256_div_pd(rate, fps_max);
      const v4d not_thin = _mm256_xor_pd(thin, _mm256_castsi256_pd(_mm256_set1_epi64x(-1)));
      const v4d exact_v =
          _mm256_or_pd(not_thin, _mm256_cmp_pd(x_raw, _mm256_set1_pd(0x1p52), _CMP_LT_OQ));
      const v4d keep = _mm256_and_pd(thin, exact_v);
      const v4d x = _mm256_max_pd(_mm256_and_pd(x_raw, keep), one);
      const v4d fe = _mm256_blendv_pd(one, fs, exact_v);
      const v4d q = _mm256_round_pd(x, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
      const v4d t_eff =
          _mm256_round_pd(_mm256_div_pd(fe, q), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const v4d pixels = _mm256_mul_pd(hs, ws);
      v4d r0 = _mm256_setzero_pd();
      for (std::size_t k = 0; k < num_res_; ++k)
        r0 = _mm256_add_pd(
            r0, ones_where(_mm256_cmp_pd(pixels, _mm256_set1_pd(min_pixels_[k]), _CMP_LT_OQ)));
      v4d cls = _mm256_setzero_pd();
      for (const double k : keys_d_)
        cls = _mm256_add_pd(cls, ones_where(_mm256_cmp_pd(_mm256_set1_pd(k), t_eff, _CMP_LE_OQ)));
      cls = _mm256_blendv_pd(cls, image_class_d, _mm256_cmp_pd(t_eff, one, _CMP_EQ_OQ));
      const v4d row_d = _mm256_and_pd(valid, _mm256_add_pd(_mm256_mul_pd(r0, num_classes_d), cls));
      const v4d ratio = _mm256_div_pd(hs, ws);
      const int slow = _mm256_movemask_pd(_mm256_andnot_pd(exact_v, valid));
      _mm_store_si128(reinterpret_cast<v4i32*>(row_of + j), _mm256_cvttpd_epi32(row_d));
      _mm_store_si128(reinterpret_cast<v4i32*>(valid_of + j), valid32);
      _mm256_store_pd(ratio_of + j, ratio);
      for (int k = 0; k < 4; ++k) {
        slow_at[num_slow] = static_cast<std::uint32_t>(j) + static_cast<std::uint32_t>(k);
        num_slow += static_cast<std::size_t>((slow >> k) & 1);
      }
    }
    // Stage 2: the draw (fast_stream's first) and its pick.
    for (std::size_t j = 0; j < n; j += 4) {
      const std::size_t i = b + j;
      const v4i sample =
          row_at == nullptr
              ? _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(first + i)), lane)
              : _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(first)),
                                 _mm256_cvtepu32_epi64(
                                     _mm_loadu_si128(reinterpret_cast<const v4i32*>(row_at + i))));
      const v4d u = to_unit(mix64(_mm256_add_epi64(mix64(_mm256_xor_si256(key_v, sample)), gamma)));
      const v4i32 row = _mm_load_si128(reinterpret_cast<const v4i32*>(row_of + j));
      const v4i32 cell =
          _mm_min_epi32(_mm256_cvttpd_epi32(_mm256_mul_pd(u, pick_cells_d)), pick_last32);
      const v4i32 at = _mm_add_epi32(_mm_mullo_epi32(row, pick_cells32), cell);
      const v4i32 first_th = _mm_mullo_epi32(at, pick_span32);
      v4i count = _mm256_setzero_si256();
      for (std::size_t k = 0; k < pick_span_; ++k) {
        const v4d th = gather(pick_thresholds_.data() + k, first_th);
        count = _mm256_sub_epi64(count, _mm256_castpd_si256(_mm256_cmp_pd(th, u, _CMP_LE_OQ)));
      }
      const v4i picked =
          gather(pick_outcomes, _mm_add_epi32(_mm_add_epi32(first_th, at), narrow(count)));
      _mm_store_si128(reinterpret_cast<v4i32*>(base_of + j), narrow(picked));
      _mm_store_si128(reinterpret_cast<v4i32*>(group_of + j),
                      narrow(_mm256_srli_epi64(picked, 32)));
    }
    // Stage 3: the closest ratio in the outcome's group, its parameters by lane.
    for (std::size_t j = 0; j < n; j += 4) {
      const v4i32 base = _mm_load_si128(reinterpret_cast<const v4i32*>(base_of + j));
      const v4i32 group = _mm_load_si128(reinterpret_cast<const v4i32*>(group_of + j));
      const v4i32 valid32 = _mm_load_si128(reinterpret_cast<const v4i32*>(valid_of + j));
      const v4d ratio = _mm256_load_pd(ratio_of + j);
      const v4i32 shift = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(group_shift, _mm256_castsi128_si256(group)));
      const v4i32 lo_cell = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(group_lo, _mm256_castsi128_si256(group)));
      const v4i32 last_cell = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(group_last, _mm256_castsi128_si256(group)));
      const v4i32 cell_offset = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(group_offset, _mm256_castsi128_si256(group)));
      const v4i32 table_only = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(group_table_only, _mm256_castsi128_si256(group)));
      const v4i32 top =
          narrow(_mm256_srlv_epi64(_mm256_castpd_si256(ratio), _mm256_cvtepu32_epi64(shift)));
      const v4i32 rcell = _mm_add_epi32(
          _mm_min_epi32(_mm_max_epi32(_mm_sub_epi32(top, lo_cell), _mm_setzero_si128()), last_cell),
          cell_offset);
      const v4i32 first_rth = _mm_mullo_epi32(rcell, ratio_span32);
      v4i32 pos = _mm_setzero_si128();
      for (std::size_t k = 0; k < cell_span_; ++k) {
        const v4d th = gather(ratio_thresholds_.data() + k, first_rth);
        pos = _mm_sub_epi32(pos, narrow(_mm256_castpd_si256(_mm256_cmp_pd(th, ratio, _CMP_LE_OQ))));
      }
      const v4i32 closest =
          gather(ratio_results, _mm_add_epi32(_mm_add_epi32(first_rth, rcell), pos));
      const int fallback =
          _mm_movemask_ps(_mm_castsi128_ps(table_only)) |
          _mm256_movemask_pd(_mm256_or_pd(_mm256_cmp_pd(ratio, ratio_max, _CMP_NLT_UQ),
                                          _mm256_cmp_pd(ratio, _mm256_setzero_pd(), _CMP_NGT_UQ)));
      const v4i32 id = _mm_add_epi32(base, closest);
      const v4i32 bucket =
          _mm_blendv_epi8(id, no_bucket32, _mm_cmpgt_epi32(_mm_setzero_si128(), base));
      const v4i32 result = _mm_blendv_epi8(invalid32, bucket, valid32);
      _mm_storeu_si128(reinterpret_cast<v4i32*>(out.data() + b + j), result);
      // A bucketed row whose group takes the table's own closest (or of an odd ratio).
      const int odd_lanes = fallback & _mm_movemask_ps(_mm_castsi128_ps(_mm_andnot_si128(
                                           _mm_cmpgt_epi32(_mm_setzero_si128(), base), valid32)));
      for (int k = 0; k < 4; ++k) {
        odd[num_odd] = static_cast<std::uint32_t>(j) + static_cast<std::uint32_t>(k);
        num_odd += static_cast<std::size_t>((odd_lanes >> k) & 1);
      }
    }
    for (std::size_t k = 0; k < num_odd; ++k) {
      const std::size_t j = odd[k];
      out[b + j] = base_of[j] + static_cast<bucket_id>(closest_of(
                                    c, static_cast<std::size_t>(group_of[j]), ratio_of[j]));
    }
    for (std::size_t k = 0; k < num_slow; ++k) {
      const std::size_t e = b + slow_at[k];
      const std::size_t r = row_at != nullptr ? row_at[e] : e;
      out[e] = assign(c, table[r], first + r, inner);
    }
  }
}
#endif  // VBUCKET_HEADER_DEFINITIONS && VBUCKET_AVX2_DISPATCH

static_assert(bucket_rule<compiled_v2_rule>);

}  // namespace vbucket
