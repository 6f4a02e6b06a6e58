#pragma once
/// Resolutions and aspect tables: resolution names to pixel counts, per-resolution tables
/// of aspect ratio -> (H, W), and closest-ratio matching with Open-Sora's tie rule.
/// Both Open-Sora generations are provided (`opensora_v2_tables`, `opensora_v12_tables`),
/// and `user_tables` holds a user's own.

#include <algorithm>     // std::sort, std::max_element
#include <charconv>      // std::from_chars
#include <cmath>         // std::sqrt, std::fmod, std::floor
#include <concepts>      // std::same_as
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t
#include <limits>        // std::numeric_limits
#include <map>           // std::map (user_tables)
#include <numeric>       // std::iota
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/opensora_v12_tables.hpp"

namespace vbucket {

/// One row of an aspect table: its key as written by the user or Open-Sora ("16:9", "0.56"),
/// the ratio H/W it stands for, and the target size.
struct aspect_entry {
  std::string key;
  double ratio = 0.0;
  int height = 0;
  int width = 0;
};

/// An ordered aspect table. Order matters: closest-ratio ties go to the earlier entry.
class aspect_table {
 public:
  aspect_table() = default;
  /// Entries in table order; throws `vbucket::error` on an empty table, a non-positive size
  /// or a non-finite/non-positive ratio.
  VBUCKET_COMPILED_INLINE explicit aspect_table(std::vector<aspect_entry> entries,
                                                std::string_view what = "aspect table");

  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  [[nodiscard]] const aspect_entry& operator[](std::size_t i) const noexcept { return entries_[i]; }
  [[nodiscard]] const std::vector<aspect_entry>& entries() const noexcept { return entries_; }

  /// Index of the entry minimising |h/w - ratio|, the first in table order on a tie:
  /// exactly Open-Sora's `min(ratios, key=lambda r: abs(h / w - get_ratio(r)))`.
  /// Precondition: h > 0 and w > 0. O(log n).
  [[nodiscard]] std::size_t closest(std::int64_t h, std::int64_t w) const noexcept {
    const double a = static_cast<double>(h) / static_cast<double>(w);
    if (!two_candidates_ || !(a < 0x1p25)) return closest_ratio(a);
    // Branch-free upper bound: `split` = the number of ratios <= a.
    const double* const s = bounded_.data() + 1;
    std::size_t pos = 0;
    for (std::size_t len = entries_.size(); len > 1;) {
      const std::size_t half = len / 2;
      pos += static_cast<std::size_t>(s[pos + half - 1] <= a) * half;
      len -= half;
    }
    const std::size_t split = pos + static_cast<std::size_t>(s[pos] <= a);
    // bounded_[split] is s[split - 1], without forming s - 1 when split is 0 (UB).
    const double below = a - bounded_[split];      // +inf at the -inf sentinel
    const double above = bounded_[split + 1] - a;  // +inf at the +inf sentinel
    const std::uint32_t lo = first_[split], hi = first_[split + 1];
    const bool take_lo = (below < above) | ((below == above) & (lo < hi));
    return hi + static_cast<std::uint32_t>(take_lo) * (lo - hi);
  }

  /// As `closest`, for a ratio already divided out.
  [[nodiscard]] std::size_t closest_ratio(double a) const noexcept {
    const std::size_t n = sorted_.size();
    // First sorted position with ratio > a; candidates are the runs on either side whose
    // rounded distance equals the nearest one's (rounding is monotone, so only runs of
    // equal distance next to the split can tie).
    const std::size_t split = static_cast<std::size_t>(
        std::upper_bound(sorted_.begin(), sorted_.end(), a) - sorted_.begin());
    double best = std::numeric_limits<double>::infinity();
    std::uint32_t best_index = std::numeric_limits<std::uint32_t>::max();
    auto consider = [&](std::size_t pos) {
      const double d = std::abs(a - sorted_[pos]);
      const std::uint32_t idx = order_[pos];
      if (d < best || (d == best && idx < best_index)) {
        best = d;
        best_index = idx;
      }
      return d;
    };
    if (split > 0) {
      const double d0 = consider(split - 1);
      for (std::size_t p = split - 1; p-- > 0;)
        if (std::abs(a - sorted_[p]) == d0)
          consider(p);
        else
          break;
    }
    if (split < n) {
      const double d0 = consider(split);
      for (std::size_t p = split + 1; p < n; ++p)
        if (std::abs(a - sorted_[p]) == d0)
          consider(p);
        else
          break;
    }
    if (best_index == std::numeric_limits<std::uint32_t>::max()) return linear_closest(a);
    return best_index;
  }

  /// The reference implementation of `closest_ratio` (a plain scan in table order).
  [[nodiscard]] std::size_t linear_closest(double a) const noexcept {
    std::size_t best = 0;
    double best_d = std::abs(a - entries_[0].ratio);
    for (std::size_t i = 1; i < entries_.size(); ++i) {
      const double d = std::abs(a - entries_[i].ratio);
      if (d < best_d) {
        best_d = d;
        best = i;
      }
    }
    return best;
  }

  /// Index of the entry with the most pixels (the first on a tie), as Open-Sora's `_max`.
  [[nodiscard]] std::size_t largest() const noexcept {
    std::size_t best = 0;
    for (std::size_t i = 1; i < entries_.size(); ++i)
      if (pixels(i) > pixels(best)) best = i;
    return best;
  }

  /// Index of the entry whose key is `key`, or size() when there is none.
  [[nodiscard]] std::size_t find(std::string_view key) const noexcept {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].key == key) return i;
    return entries_.size();
  }

 private:
  [[nodiscard]] std::int64_t pixels(std::size_t i) const noexcept {
    return std::int64_t{entries_[i].height} * entries_[i].width;
  }

  std::vector<aspect_entry> entries_;
  std::vector<std::uint32_t> order_;  // table indices sorted by ratio (stable)
  std::vector<double> sorted_;        // ratios in that order
  std::vector<double> bounded_;       // -inf, sorted_, +inf
  std::vector<std::uint32_t> first_;  // per bounded_ slot: first table index of equal ratio
  bool two_candidates_ = false;       // closest() may look at the two ratios around h/w only
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE aspect_table::aspect_table(std::vector<aspect_entry> entries,
                                                   std::string_view what)
    : entries_(std::move(entries)) {
  if (entries_.empty()) throw error(std::string(what) + ": the table has no entries");
  for (const auto& e : entries_) {
    if (e.height <= 0 || e.width <= 0)
      throw error(std::string(what) + ": entry \"" + e.key + "\" has a non-positive size");
    if (!(e.ratio > 0.0) || !(e.ratio < std::numeric_limits<double>::infinity()))
      throw error(std::string(what) + ": entry \"" + e.key + "\" has an invalid ratio");
  }
  order_.resize(entries_.size());
  std::iota(order_.begin(), order_.end(), std::uint32_t{0});
  std::stable_sort(order_.begin(), order_.end(), [this](std::uint32_t a, std::uint32_t b) {
    return entries_[a].ratio < entries_[b].ratio;
  });
  sorted_.reserve(order_.size());
  for (auto i : order_) sorted_.push_back(entries_[i].ratio);
  // Branch-free search data: the sorted ratios between -inf and +inf sentinels, and for
  // each the first table index among the entries of equal ratio.
  const std::size_t n = entries_.size();
  bounded_.assign(n + 2, std::numeric_limits<double>::infinity());
  bounded_[0] = -std::numeric_limits<double>::infinity();
  first_.assign(n + 2, std::numeric_limits<std::uint32_t>::max());
  for (std::size_t p = 0; p < n; ++p) {
    bounded_[p + 1] = sorted_[p];
    first_[p + 1] = order_[p];
  }
  for (std::size_t p = 2; p <= n; ++p)
    if (bounded_[p] == bounded_[p - 1]) first_[p] = std::min(first_[p], first_[p - 1]);
  for (std::size_t p = n - 1; p >= 1; --p)
    if (bounded_[p] == bounded_[p + 1]) first_[p] = std::min(first_[p], first_[p + 1]);
  // With a ratio h/w < 2^25, two distinct ratios further apart than this cannot round to
  // equal distances from it, so the nearest is one of the two around it.
  const double largest = sorted_.back();
  const double apart = std::max(0x1p-26, 0x1p-50 * largest);
  two_candidates_ = true;
  for (std::size_t p = 1; p < n; ++p)
    if (sorted_[p] != sorted_[p - 1] && !(sorted_[p] - sorted_[p - 1] > apart))
      two_candidates_ = false;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// A resolution as a bucket config uses it: its name, the pixel count below which
/// (times 0.8) a sample is too small for it, and its aspect table.
struct resolution_info {
  std::string name;
  std::int64_t pixels = 0;
  aspect_table table;
};

/// A source of resolutions by name. Semantic requirement: `resolve` returns the same
/// answer for the same name, and throws `vbucket::error` naming the resolution when it
/// does not know it.
///
///     struct my_tables { vbucket::resolution_info resolve(std::string_view name) const; };
///     static_assert(vbucket::resolution_source<my_tables>);
template <class T>
concept resolution_source = requires(const T& t, std::string_view name) {
  { t.resolve(name) } -> std::same_as<resolution_info>;
};

namespace detail {

/// Python's float `x // y` for finite x >= 0, y > 0 (the exact floor of the quotient).
inline double py_floordiv(double x, double y) noexcept {
  const double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

/// Parses a non-negative decimal (digits with an optional fraction) as Python's float().
inline bool parse_decimal(std::string_view s, double& out) noexcept {
  if (s.empty() || s.front() == '+' || s.front() == '-') return false;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out, std::chars_format::fixed);
  return ec == std::errc{} && p == end && std::isfinite(out);
}

inline bool parse_positive_int(std::string_view s, std::int64_t& out) noexcept {
  if (s.empty() || s.size() > 9) return false;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc{} && p == end && out > 0;
}

/// The W:H key's ratio H/W as Open-Sora 2.0's get_ratio computes it.
inline bool parse_wh_ratio(std::string_view key, double& ratio) noexcept {
  const auto colon = key.find(':');
  if (colon == std::string_view::npos) return false;
  double w = 0, h = 0;
  if (!parse_decimal(key.substr(0, colon), w) || !parse_decimal(key.substr(colon + 1), h))
    return false;
  if (!(w > 0) || !(h > 0)) return false;
  ratio = h / w;
  return true;
}

inline std::string swap_wh(std::string_view key) {
  const auto colon = key.find(':');
  return std::string(key.substr(colon + 1)) + ":" + std::string(key.substr(0, colon));
}

/// Splits "name_setting" at the first '_' (Open-Sora 2.0 allows one setting).
inline void split_setting(std::string_view full, std::string_view& name,
                          std::string_view& setting) noexcept {
  const auto us = full.find('_');
  name = full.substr(0, us);
  setting = us == std::string_view::npos ? std::string_view{} : full.substr(us + 1);
}

/// Applies a `max` or `arW:H` / `arKEY` setting to a table.
VBUCKET_COMPILED_INLINE aspect_table apply_setting(const aspect_table& table, std::string_view full,
                                                   std::string_view setting);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE aspect_table apply_setting(const aspect_table& table, std::string_view full,
                                                   std::string_view setting) {
  if (setting.empty()) {
    // "256px_" has an empty setting, which Open-Sora rejects (assert setting == "max" or ...).
    if (full.find('_') != std::string_view::npos)
      throw error("resolution \"" + std::string(full) +
                  "\": empty setting after '_' (expected \"max\" or \"arW:H\")");
    return table;
  }
  std::size_t pick = table.size();
  if (setting == "max") {
    pick = table.largest();
  } else if (setting.substr(0, 2) == "ar") {
    pick = table.find(setting.substr(2));
    if (pick == table.size())
      throw error("resolution \"" + std::string(full) + "\": aspect ratio \"" +
                  std::string(setting.substr(2)) + "\" is not in its table");
  } else {
    throw error("resolution \"" + std::string(full) + "\": unknown setting \"" +
                std::string(setting) + "\" (expected \"max\" or \"arW:H\")");
  }
  return aspect_table({table[pick]}, full);
}
#endif

}  // namespace detail

/// The pixel count of an Open-Sora 2.0 resolution name: "Npx" is N·N, "Np" is
/// int(N·N / 9 · 16) (a 16:9 frame N pixels high); a "_setting" suffix is ignored.
/// Throws `vbucket::error` for anything else.
VBUCKET_COMPILED_INLINE std::int64_t opensora_v2_pixels(std::string_view full);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE std::int64_t opensora_v2_pixels(std::string_view full) {
  std::string_view name, setting;
  detail::split_setting(full, name, setting);
  std::int64_t n = 0;
  if (name.size() > 2 && name.substr(name.size() - 2) == "px" &&
      detail::parse_positive_int(name.substr(0, name.size() - 2), n))
    return n * n;
  if (name.size() > 1 && name.back() == 'p' &&
      detail::parse_positive_int(name.substr(0, name.size() - 1), n))
    return static_cast<std::int64_t>(static_cast<double>(n * n) / 9.0 * 16.0);
  throw error("unknown resolution \"" + std::string(full) +
              "\" (Open-Sora 2.0 names look like \"256px\", \"720p\", \"768px_max\" or "
              "\"720p_ar16:9\")");
}
#endif

/// Open-Sora 2.0's aspect tables, computed from the resolution name by its formula with
/// spatial compression `spatial_compression` (the VAE's downsampling, 16 by default).
struct opensora_v2_tables {
  int spatial_compression = 16;

  /// The ratio keys the 2.0 formula starts from, as W:H.
  static constexpr std::string_view base_ratios[] = {"2.39:1", "2:1", "16:9", "1.85:1", "9:16",
                                                     "5:8",    "3:2", "4:3",  "1:1"};

  /// The training table for `pixels` total pixels (before any `_max`/`_ar` setting).
  [[nodiscard]] VBUCKET_COMPILED_INLINE aspect_table
  table_for_pixels(std::int64_t pixels, std::string_view what = "resolution") const;

  [[nodiscard]] VBUCKET_COMPILED_INLINE resolution_info resolve(std::string_view full) const;
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE aspect_table
opensora_v2_tables::table_for_pixels(std::int64_t pixels, std::string_view what) const {
  if (spatial_compression <= 0)
    throw error("spatial compression must be positive, got " + std::to_string(spatial_compression));
  const double d = spatial_compression;
  const std::int64_t di = spatial_compression;
  std::vector<aspect_entry> main, vertical;
  for (std::string_view key : base_ratios) {
    double ratio = 0;
    detail::parse_wh_ratio(key, ratio);
    const auto colon = key.find(':');
    double wr = 0, hr = 0;
    detail::parse_decimal(key.substr(0, colon), wr);
    detail::parse_decimal(key.substr(colon + 1), hr);
    const double px = static_cast<double>(pixels);
    std::int64_t width =
        static_cast<std::int64_t>(detail::py_floordiv(std::sqrt(px * wr / hr), d)) * di;
    if (width <= 0)
      throw error(std::string(what) + ": " + std::to_string(pixels) +
                  " pixels is too small for spatial compression " +
                  std::to_string(spatial_compression));
    std::int64_t height =
        static_cast<std::int64_t>(detail::py_floordiv(px / static_cast<double>(width), d)) * di;
    auto off = [&](std::int64_t h, std::int64_t w) {
      const std::int64_t v = h * w - pixels;
      return v < 0 ? -v : v;
    };
    std::int64_t diff = off(height, width);
    const std::int64_t h0 = height, w0 = width;
    const std::int64_t cand[4][2] = {{h0 - di, w0}, {h0 + di, w0}, {h0, w0 - di}, {h0, w0 + di}};
    for (const auto& c : cand) {
      if (off(c[0], c[1]) < diff) {
        height = c[0];
        width = c[1];
        diff = off(c[0], c[1]);
      }
    }
    if (height <= 0 || height > std::numeric_limits<int>::max() ||
        width > std::numeric_limits<int>::max())
      throw error(std::string(what) + ": " + std::to_string(pixels) +
                  " pixels gives an unusable size for ratio " + std::string(key));
    const int h = static_cast<int>(height), w = static_cast<int>(width);
    bool duplicate = false;
    for (const auto& e : main) duplicate = duplicate || (e.height == h && e.width == w);
    if (duplicate) continue;
    main.push_back({std::string(key), ratio, h, w});
    const std::string vkey = detail::swap_wh(key);
    double vratio = 0;
    detail::parse_wh_ratio(vkey, vratio);
    vertical.push_back({vkey, vratio, w, h});
  }
  // dict.update: an existing key keeps its place and takes the new value.
  for (auto& v : vertical) {
    auto it = std::find_if(main.begin(), main.end(),
                           [&](const aspect_entry& e) { return e.key == v.key; });
    if (it != main.end()) {
      it->height = v.height;
      it->width = v.width;
    } else {
      main.push_back(std::move(v));
    }
  }
  return aspect_table(std::move(main), what);
}

VBUCKET_COMPILED_INLINE resolution_info opensora_v2_tables::resolve(std::string_view full) const {
  std::string_view name, setting;
  detail::split_setting(full, name, setting);
  const std::int64_t px = opensora_v2_pixels(full);
  return {std::string(full), px,
          detail::apply_setting(table_for_pixels(px, "resolution \"" + std::string(full) + "\""),
                                full, setting)};
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// Open-Sora v1.2's fixed tables ("144p", "256", "240p", "360p", "512", "480p", "720p",
/// "1024", "1080p", "2k", "2048", "2880", "4k"); keys are H/W written as decimals.
struct opensora_v12_tables {
  [[nodiscard]] VBUCKET_COMPILED_INLINE resolution_info resolve(std::string_view name) const;
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE resolution_info opensora_v12_tables::resolve(std::string_view name) const {
  for (const auto& t : detail::v12_tables) {
    if (t.name != name) continue;
    std::vector<aspect_entry> entries;
    entries.reserve(t.entries.size());
    for (const auto& e : t.entries) {
      double ratio = 0;
      detail::parse_decimal(e.key, ratio);
      entries.push_back({std::string(e.key), ratio, e.h, e.w});
    }
    return {std::string(name), t.pixels, aspect_table(std::move(entries), name)};
  }
  std::string known;
  for (const auto& t : detail::v12_tables)
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw error("unknown resolution \"" + std::string(name) + "\" (Open-Sora v1.2 knows " + known +
              ")");
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// A user's own resolutions: name -> (pixels, table).
class user_tables {
 public:
  /// Adds or replaces a resolution. Throws on a non-positive pixel count.
  VBUCKET_COMPILED_INLINE user_tables& add(std::string name, std::int64_t pixels,
                                           aspect_table table);
  [[nodiscard]] VBUCKET_COMPILED_INLINE resolution_info resolve(std::string_view name) const;

 private:
  std::map<std::string, resolution_info> tables_;
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE user_tables& user_tables::add(std::string name, std::int64_t pixels,
                                                      aspect_table table) {
  if (pixels <= 0) throw error("resolution \"" + name + "\": pixel count must be positive");
  std::string key = name;
  tables_[key] = resolution_info{std::move(name), pixels, std::move(table)};
  return *this;
}

VBUCKET_COMPILED_INLINE resolution_info user_tables::resolve(std::string_view name) const {
  auto it = tables_.find(std::string(name));
  if (it == tables_.end()) throw error("unknown resolution \"" + std::string(name) + "\"");
  return it->second;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(resolution_source<opensora_v2_tables>);
static_assert(resolution_source<opensora_v12_tables>);
static_assert(resolution_source<user_tables>);

}  // namespace vbucket
