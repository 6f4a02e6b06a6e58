#pragma once
/// `compiled_v2_rule`: Open-Sora 2.0's rule (`opensora_v2_rule`) compiled into per-class
/// outcome tables, so that a sample costs one uniform draw, a few counts and one table look-up
/// instead of a walk with one unpredictable branch per draw.
///
/// It reproduces the rule's DISTRIBUTION of outcomes, not its draws: for every sample the
/// probability of each bucket (and of `no_bucket`) is the one `opensora_v2_rule` gives, but
/// which bucket a given (sample, seed) gets differs. To reproduce Open-Sora's assignment draw
/// for draw, use `opensora_v2_rule` with `numpy_source`.
///
/// Why it works: the sequential rule's outcome depends on the sample only through r0 (the
/// number of resolutions too large for it), the frames class of its effective length (which
/// frames keys of the config are ≤ t_eff; images, t_eff = 1, are a class of their own) and,
/// once (resolution, frames key) is chosen, its closest ratio. For every (r0, class) the exact
/// probability of each (resolution, frames key) outcome is a product of the p_t / p_res
/// factors the rule applies (p ≥ 1 short-circuits as probability 1; `random() ≤ p` and
/// `random() < p` both have probability p). Each row is stored as a flat alias table, so one
/// draw picks an outcome with no data-dependent branch; the closest ratio is found per ratio
/// group (resolutions whose tables have the same ratios) exactly as `aspect_table::closest`.
///
///     const vbucket::compiled_v2_rule rule(config, vbucket::opensora_v2_rule{16.0});
///     vbucket::assign_into(out, config, table, rule, vbucket::fast_source(seed, epoch));
///
/// Precondition of `assign`: `config` is the config the rule was built from.

#include <algorithm>  // std::sort, std::stable_sort, std::unique, std::max, std::copy_n
#include <cmath>      // std::ceil
#include <cstddef>    // std::size_t, std::ptrdiff_t
#include <cstdint>    // std::int32_t, std::int64_t, std::uint32_t, std::uint64_t
#include <limits>     // std::numeric_limits
#include <vector>     // std::vector

#include "bucket_config.hpp"
#include "meta.hpp"
#include "random.hpp"
#include "rules.hpp"

namespace vbucket {

class compiled_v2_rule {
 public:
  compiled_v2_rule() = default;

  /// Compiles `rule` for `config`. Throws when the rule is invalid (see
  /// `opensora_v2_rule::validate`).
  explicit compiled_v2_rule(const bucket_config& config, opensora_v2_rule rule = {}) : rule_(rule) {
    rule_.validate();
    const auto& res = config.resolutions();
    num_res_ = res.size();
    for (const resolution_entry& r : res) {
      min_pixels_.push_back(r.min_pixels);
      for (const frames_entry& f : r.frames) keys_.push_back(f.frames);
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    num_classes_ = keys_.size() + 2;  // video classes 0..U, then the image class

    // The outcome probabilities of every row, unpacked: one slot per (resolution, key).
    std::size_t slots = 0;
    std::vector<std::size_t> first_slot;
    for (const resolution_entry& r : res) {
      first_slot.push_back(slots);
      slots += r.frames.size();
    }
    const std::size_t rows = (num_res_ + 1) * num_classes_;
    std::vector<double> prob(rows * slots, 0.0), none(rows, 0.0);
    width_ = 1;
    for (std::size_t r0 = 0; r0 <= num_res_; ++r0) {
      for (std::size_t cls = 0; cls < num_classes_; ++cls) {
        const std::size_t row = r0 * num_classes_ + cls;
        double* const p = prob.data() + row * slots;
        double remaining = 1.0;  // probability that the walk reaches the next resolution
        for (std::size_t ri = r0; ri < num_res_; ++ri) {
          const resolution_entry& r = res[ri];
          double* const pr = p + first_slot[ri];
          if (cls == image_class()) {
            if (r.image_index < 0) continue;
            const auto k = static_cast<std::size_t>(r.image_index);
            const double a = clamp01(r.frames[k].p_resolution);
            pr[k] = remaining * a;
            remaining *= 1.0 - a;
            continue;
          }
          const std::size_t n = detail::video_keys(r);
          double reach = remaining;  // probability of reaching key k within this resolution
          double leave = 0.0;        // probability of leaving this resolution by a downgrade
          for (std::size_t k = detail::longer_keys(r.frames.data(), n, representative(cls)); k < n;
               ++k) {
            const frames_entry& f = r.frames[k];
            const double skip = f.pair ? clamp01(f.p_frames) : 0.0;
            const double stay = reach * (1.0 - skip);
            reach *= skip;
            const double a = clamp01(f.p_resolution);
            pr[k] = stay * a;
            leave += stay * (1.0 - a);
          }
          remaining = reach + leave;
        }
        none[row] = remaining;
        std::size_t used = remaining > 0.0 ? 1 : 0;
        for (std::size_t s = 0; s < slots; ++s) used += p[s] > 0.0 ? 1 : 0;
        width_ = std::max(width_, used);
      }
    }

    // Resolutions whose tables have the same ratios in the same order share a ratio group:
    // their closest ratio is the same.
    std::vector<std::int32_t> group_of(num_res_, 0);
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
      group_of[ri] = static_cast<std::int32_t>(g);
    }
    // Every group's ratios padded with +inf (never ≤ a ratio) to one width, so the count in
    // closest() has the same trip count whatever the outcome's group.
    for (const ratio_group& grp : groups_) ratio_width_ = std::max(ratio_width_, grp.n);
    ratio_width_ = (ratio_width_ + 3) / 4 * 4;
    std::vector<double> padded(groups_.size() * ratio_width_,
                               std::numeric_limits<double>::infinity());
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      std::copy_n(sorted_.begin() + static_cast<std::ptrdiff_t>(groups_[g].sorted), groups_[g].n,
                  padded.begin() + static_cast<std::ptrdiff_t>(g * ratio_width_));
      groups_[g].sorted = g * ratio_width_;
    }
    sorted_ = std::move(padded);

    // Each row as an alias table (Vose) of width_ columns: outcomes of positive probability,
    // no_bucket, and zero-probability padding. A draw u picks column i = floor(u · width_) and,
    // with f = u · width_ - i, takes the column's own outcome when f < threshold, else its alias.
    entries_.assign(rows * width_, alias_entry{2.0, {{no_bucket, 0}, {no_bucket, 0}}});
    std::vector<outcome> outs;
    std::vector<double> scaled;
    std::vector<std::size_t> small, large;
    for (std::size_t row = 0; row < rows; ++row) {
      outs.clear();
      scaled.clear();
      for (std::size_t ri = 0; ri < num_res_; ++ri) {
        for (std::size_t k = 0; k < res[ri].frames.size(); ++k) {
          const double q = prob[row * slots + first_slot[ri] + k];
          if (!(q > 0.0)) continue;
          outs.push_back(
              {res[ri].first_bucket + static_cast<bucket_id>(k * res[ri].info.table.size()),
               group_of[ri]});
          scaled.push_back(q);
        }
      }
      if (none[row] > 0.0) {
        outs.push_back({no_bucket, 0});
        scaled.push_back(none[row]);
      }
      while (outs.size() < width_) {
        outs.push_back({no_bucket, 0});
        scaled.push_back(0.0);
      }
      double total = 0.0;
      for (const double q : scaled) total += q;
      for (double& q : scaled) q *= static_cast<double>(width_) / total;
      small.clear();
      large.clear();
      for (std::size_t i = 0; i < width_; ++i) (scaled[i] < 1.0 ? small : large).push_back(i);
      alias_entry* const e = entries_.data() + row * width_;
      for (std::size_t i = 0; i < width_; ++i) e[i] = {2.0, {outs[i], outs[i]}};
      while (!small.empty() && !large.empty()) {
        const std::size_t lo = small.back(), hi = large.back();
        small.pop_back();
        e[lo] = {scaled[lo], {outs[lo], outs[hi]}};
        scaled[hi] -= 1.0 - scaled[lo];
        if (scaled[hi] < 1.0) {
          large.pop_back();
          small.push_back(hi);
        }
      }
      // What is left holds (up to rounding) exactly one column's worth: always its own.
    }
    // The counts in assign() go four at a time: pad with values that never count.
    while (min_pixels_.size() % 4 != 0)
      min_pixels_.push_back(-std::numeric_limits<double>::infinity());
    while (keys_.size() % 4 != 0) keys_.push_back(std::numeric_limits<std::int64_t>::max());
    // Exact probabilities, for inspection and tests.
    prob_ = std::move(prob);
    none_ = std::move(none);
    first_slot_ = std::move(first_slot);
    slots_ = slots;
  }

  [[nodiscard]] const opensora_v2_rule& rule() const noexcept { return rule_; }

  /// The probability that a sample with `r0` resolutions too large for it and effective length
  /// `t_eff` (after fps thinning; 1 is an image) lands in frames key `k` of resolution `res`
  /// (indices into `config.resolutions()`), whatever its ratio. Preconditions: r0 ≤ the number
  /// of resolutions, res and k in range.
  [[nodiscard]] double probability(std::size_t r0, std::int64_t t_eff, std::size_t res,
                                   std::size_t k) const noexcept {
    return prob_[row_of(r0, t_eff) * slots_ + first_slot_[res] + k];
  }
  /// The probability of `no_bucket` for (r0, t_eff), as above.
  [[nodiscard]] double no_bucket_probability(std::size_t r0, std::int64_t t_eff) const noexcept {
    return none_[row_of(r0, t_eff)];
  }
  /// As `probability`, read back from the alias table the assignment samples from; the
  /// outcome is named by the id of its ratio 0 (`config.id_of(res, k, 0)`).
  [[nodiscard]] double sampled_probability(std::size_t r0, std::int64_t t_eff,
                                           bucket_id first_bucket) const noexcept {
    return sampled(row_of(r0, t_eff), [&](const outcome& o) { return o.base == first_bucket; });
  }
  /// As `no_bucket_probability`, read back from the alias table.
  [[nodiscard]] double sampled_no_bucket_probability(std::size_t r0,
                                                     std::int64_t t_eff) const noexcept {
    return sampled(row_of(r0, t_eff), [](const outcome& o) { return o.base < 0; });
  }
  /// The number of distinct ratio lists (aspect tables' ratios in order) among the resolutions.
  [[nodiscard]] std::size_t ratio_groups() const noexcept { return groups_.size(); }

  /// The most outcomes of positive probability of any (r0, class), no_bucket included: the
  /// number of columns of each alias row.
  [[nodiscard]] std::size_t row_width() const noexcept { return width_; }

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
    const std::size_t row = r0 * num_classes_ + class_of(t_eff);
    const double u = source.stream(index, 0).random();
    const double x = u * static_cast<double>(width_);
    std::size_t i = static_cast<std::size_t>(x);
    i = i < width_ ? i : width_ - 1;  // u · width_ may round up to width_
    const alias_entry& e = entries_[row * width_ + i];
    // An indexed load rather than a select, which compilers may turn into a branch.
    const outcome o = e.pick[static_cast<std::size_t>(!(x - static_cast<double>(i) < e.threshold))];
    // no_bucket names group 0, so the ratio is looked up without a branch on the outcome.
    const bucket_id id = o.base + static_cast<bucket_id>(closest(
                                      c, static_cast<std::size_t>(o.group), m.height, m.width));
    return o.base < 0 ? no_bucket : id;
  }

 private:
  struct outcome {
    bucket_id base;      // id of (resolution, key, ratio 0), or no_bucket
    std::int32_t group;  // the resolution's ratio group (0 for no_bucket)
  };

  struct alias_entry {
    double threshold;  // take `own` when the column's fraction is below this
    outcome pick[2];   // the column's own outcome, then its alias
  };

  static double clamp01(double p) noexcept { return p >= 1.0 ? 1.0 : (p > 0.0 ? p : 0.0); }

  [[nodiscard]] std::size_t image_class() const noexcept { return num_classes_ - 1; }
  /// Video class c: exactly c keys are ≤ t_eff. Image class: t_eff == 1.
  [[nodiscard]] std::size_t class_of(std::int64_t t_eff) const noexcept {
    std::size_t c = 0;
    for (std::size_t i = 0; i < keys_.size(); i += 4)
      c += static_cast<std::size_t>(keys_[i] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 1] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 2] <= t_eff) +
           static_cast<std::size_t>(keys_[i + 3] <= t_eff);
    return t_eff == 1 ? image_class() : c;
  }
  /// A length of video class c (for counting the keys longer than it): 0 for class 0, else
  /// the c-th shortest key.
  [[nodiscard]] std::int64_t representative(std::size_t cls) const noexcept {
    return cls == 0 ? 0 : keys_[cls - 1];
  }
  /// One ratio group's data for aspect_table::closest's branch-free path: the same sentinels,
  /// first indices and two-candidate condition, built from the table's ratios.
  struct ratio_group {
    std::size_t resolution;  // a resolution of the group (for the table's own closest)
    std::size_t sorted;      // offset of its ascending ratios in sorted_
    std::size_t bounded;     // offset of -inf, ratios, +inf in bounded_ (and first_)
    std::size_t n;
    bool two_candidates;
  };

  void add_group(const aspect_table& t, std::size_t resolution) {
    const std::size_t n = t.size();
    std::vector<std::uint32_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return t[a].ratio < t[b].ratio; });
    std::vector<double> sorted;
    for (const std::uint32_t i : order) sorted.push_back(t[i].ratio);
    std::vector<double> bounded(n + 2, std::numeric_limits<double>::infinity());
    bounded[0] = -std::numeric_limits<double>::infinity();
    std::vector<std::uint32_t> first(n + 2, std::numeric_limits<std::uint32_t>::max());
    for (std::size_t p = 0; p < n; ++p) {
      bounded[p + 1] = sorted[p];
      first[p + 1] = order[p];
    }
    for (std::size_t p = 2; p <= n; ++p)
      if (bounded[p] == bounded[p - 1]) first[p] = std::min(first[p], first[p - 1]);
    for (std::size_t p = n - 1; p >= 1; --p)
      if (bounded[p] == bounded[p + 1]) first[p] = std::min(first[p], first[p + 1]);
    const double apart = std::max(0x1p-26, 0x1p-50 * sorted.back());
    bool two = true;
    for (std::size_t p = 1; p < n; ++p)
      if (sorted[p] != sorted[p - 1] && !(sorted[p] - sorted[p - 1] > apart)) two = false;
    groups_.push_back({resolution, sorted_.size(), bounded_.size(), n, two});
    sorted_.insert(sorted_.end(), sorted.begin(), sorted.end());
    bounded_.insert(bounded_.end(), bounded.begin(), bounded.end());
    first_.insert(first_.end(), first.begin(), first.end());
  }

 public:
  /// The index of the ratio closest to h/w in the tables of ratio group `g`: the same as
  /// `aspect_table::closest`, with the split found by counting all ratios ≤ h/w (independent
  /// compares, where a binary search is a chain of dependent loads). Precondition: h, w > 0.
  [[nodiscard]] std::size_t closest(const bucket_config& c, std::size_t g, std::int64_t h,
                                    std::int64_t w) const noexcept {
    const ratio_group& grp = groups_[g];
    const double a = static_cast<double>(h) / static_cast<double>(w);
    if (!grp.two_candidates || !(a < 0x1p25))
      return c.resolutions()[grp.resolution].info.table.closest(h, w);
    std::size_t split = 0;
    const double* const s = sorted_.data() + grp.sorted;
    for (std::size_t p = 0; p < ratio_width_; p += 4)
      split += static_cast<std::size_t>(s[p] <= a) + static_cast<std::size_t>(s[p + 1] <= a) +
               static_cast<std::size_t>(s[p + 2] <= a) + static_cast<std::size_t>(s[p + 3] <= a);
    const double* const b = bounded_.data() + grp.bounded;
    const std::uint32_t* const f = first_.data() + grp.bounded;
    const double below = a - b[split];  // +inf at the -inf sentinel
    const double above = b[split + 1] - a;
    const std::uint32_t lo = f[split], hi = f[split + 1];
    const bool take_lo = (below < above) | ((below == above) & (lo < hi));
    return hi + static_cast<std::uint32_t>(take_lo) * (lo - hi);
  }

 private:
  template <class Match>
  [[nodiscard]] double sampled(std::size_t row, Match match) const noexcept {
    double p = 0.0;
    for (std::size_t i = 0; i < width_; ++i) {
      const alias_entry& e = entries_[row * width_ + i];
      const double own = e.threshold >= 1.0 ? 1.0 : e.threshold;
      p += (match(e.pick[0]) ? own : 0.0) + (match(e.pick[1]) ? 1.0 - own : 0.0);
    }
    return p / static_cast<double>(width_);
  }
  [[nodiscard]] std::size_t row_of(std::size_t r0, std::int64_t t_eff) const noexcept {
    return r0 * num_classes_ + class_of(t_eff);
  }

  opensora_v2_rule rule_;
  std::size_t num_res_ = 0;
  std::size_t num_classes_ = 0;
  std::size_t width_ = 0;
  std::size_t slots_ = 0;
  std::vector<double> min_pixels_;       // per resolution, descending; -inf padding
  std::vector<std::int64_t> keys_;       // the config's distinct frames keys, ascending; padded
  std::vector<alias_entry> entries_;     // rows × width_ alias columns
  std::vector<ratio_group> groups_;      // distinct ratio lists
  std::size_t ratio_width_ = 0;          // the most ratios of any group
  std::vector<double> sorted_;           // per group: its ratios, ascending
  std::vector<double> bounded_;          // per group: -inf, its sorted ratios, +inf
  std::vector<std::uint32_t> first_;     // per bounded_ slot: first table index of its ratio
  std::vector<double> prob_;             // rows × slots_ exact probabilities
  std::vector<double> none_;             // rows: probability of no_bucket
  std::vector<std::size_t> first_slot_;  // per resolution: its first slot
};

static_assert(bucket_rule<compiled_v2_rule>);

}  // namespace vbucket
