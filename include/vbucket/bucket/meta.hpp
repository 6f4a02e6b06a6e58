#pragma once
/// Video metadata: the `video_meta` concept a user's own sample type satisfies, and
/// `meta_table`, the compact struct-of-arrays form the hot loops work on.

#include <algorithm>    // std::max
#include <bit>          // std::bit_cast
#include <cmath>        // std::isfinite, std::isinf, std::isnan, std::trunc
#include <concepts>     // std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <limits>       // quiet_NaN
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_floating_point_v, std::is_unsigned_v
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"

namespace vbucket {

/// How vbucket reads one sample's metadata. The primary template reads the members
/// `num_frames`, `height`, `width` and `fps`; specialise it for a type that names them
/// differently. fps may be NaN (unknown, e.g. an image).
///
///     struct clip { int frames, h, w; float rate; };
///     template <> struct vbucket::meta_traits<clip> { static int frames(const clip& c) { return
///     c.frames; } ... };
template <class T>
struct meta_traits {
  // Member templates, so that a type without these members makes `video_meta<T>` false
  // (substitution failure) instead of making meta_traits<T> itself ill-formed (a hard error).
  template <class U = T>
  static constexpr auto frames(const U& m) -> decltype(m.num_frames) {
    return m.num_frames;
  }
  template <class U = T>
  static constexpr auto height(const U& m) -> decltype(m.height) {
    return m.height;
  }
  template <class U = T>
  static constexpr auto width(const U& m) -> decltype(m.width) {
    return m.width;
  }
  template <class U = T>
  static constexpr auto fps(const U& m) -> decltype(m.fps) {
    return m.fps;
  }
};

/// A type whose frames, height and width read as integers and fps as a floating value
/// through `meta_traits<T>`. Semantic requirements: frames, height and width are the
/// decoded sizes (frames ≥ 1 for usable samples); fps is frames per second or NaN.
///
///     struct my_clip { std::int32_t num_frames, height, width; double fps; std::string path; };
///     static_assert(vbucket::video_meta<my_clip>);
template <class T>
concept video_meta = requires(const T& m) {
  { meta_traits<T>::frames(m) } -> std::convertible_to<std::int64_t>;
  { meta_traits<T>::height(m) } -> std::convertible_to<std::int64_t>;
  { meta_traits<T>::width(m) } -> std::convertible_to<std::int64_t>;
  { meta_traits<T>::fps(m) } -> std::convertible_to<double>;
};

/// One sample's metadata as vbucket's rules see it.
struct sample_meta {
  std::int64_t num_frames = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  double fps = std::numeric_limits<double>::quiet_NaN();
};

namespace detail {
/// A size as int64 without undefined behaviour whatever the user's type: floating values are
/// truncated, NaN becomes 0 (so the sample is invalid, not UB), and values beyond the int64
/// range (floating or unsigned) saturate.
template <class V>
constexpr std::int64_t to_size(const V& v) noexcept {
  using limits = std::numeric_limits<std::int64_t>;
  if constexpr (std::is_floating_point_v<V>) {
    if (!(v == v)) return 0;  // NaN (std::isnan is not constexpr before C++23)
    if (v >= static_cast<V>(9223372036854775808.0)) return limits::max();  // 2^63
    if (v < static_cast<V>(-9223372036854775808.0)) return limits::min();
    return static_cast<std::int64_t>(v);
  } else if constexpr (std::is_integral_v<V> && std::is_unsigned_v<V>) {
    return v > static_cast<std::uint64_t>(limits::max()) ? limits::max()
                                                         : static_cast<std::int64_t>(v);
  } else {
    return static_cast<std::int64_t>(v);
  }
}
}  // namespace detail

/// Reads any `video_meta` into the canonical form. Floating-point sizes are truncated, a NaN
/// size reads as 0 (an invalid sample) and an out-of-range one saturates.
template <video_meta T>
constexpr sample_meta to_sample_meta(const T& m) {
  return {detail::to_size(meta_traits<T>::frames(m)), detail::to_size(meta_traits<T>::height(m)),
          detail::to_size(meta_traits<T>::width(m)), static_cast<double>(meta_traits<T>::fps(m))};
}

// ---------------------------------------------------------------------------------------------
// The metadata contract for one value, for every reader (the CSV reader, the Python package's
// numeric columns): one rule, one wording.
// ---------------------------------------------------------------------------------------------

/// The largest `num_frames` a metadata row may hold.
inline constexpr std::int64_t max_meta_frames = std::int64_t{1} << 31;
/// The largest height or width a metadata row may hold (H·W stays exact in a double).
inline constexpr std::int64_t max_meta_side = std::int64_t{1} << 24;

/// What a size must be, for messages: "an integer from 1 to MAX".
inline std::string meta_size_expectation(std::int64_t max) {
  return "an integer from 1 to " + std::to_string(max);
}

/// A size given as a number (a float column, as pandas writes an integer column that held a
/// NaN): its value when it is a whole number in [1, max], else nullopt; `*whole` (when given)
/// tells a fraction, NaN or infinity (false) from a whole number out of range (true).
inline std::optional<std::int64_t> meta_size_value(double v, std::int64_t max,
                                                   bool* whole = nullptr) noexcept {
  const bool integral = std::isfinite(v) && v == std::trunc(v);
  if (whole) *whole = integral;
  if (!integral || !(v >= 1.0) || !(v <= static_cast<double>(max))) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

/// An fps as a reader hands it over: NaN or 0 = unknown (NaN; metadata tools write 0 for a rate
/// they could not read, and Open-Sora's rule gives it frame interval 1 as it gives NaN); a
/// finite positive rate as it is; nullopt for anything else (negative, infinite).
inline std::optional<double> meta_fps_value(double v) noexcept {
  if (std::isnan(v) || v == 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (!(v > 0.0) || std::isinf(v)) return std::nullopt;
  return v;
}

/// What an fps must be, for messages.
inline constexpr std::string_view meta_fps_expectation =
    "a finite positive frame rate (or empty, \"nan\" or 0 when unknown)";

/// The samples' metadata as a struct of arrays, 16 bytes a row (row i = sample index i): frames,
/// height and width as 32-bit columns, and the fps as a 32-bit code into the table's distinct
/// rates (`fps_values()`), so every rate is kept exactly as given, NaN included, however many
/// rows share it. Beyond the rows, each distinct rate costs 8 bytes and a slot of a hash index
/// (about 16 bytes), e.g. a few kilobytes for the rates of real video datasets.
///
/// A row holds sizes from 0 to 2^32 - 1. A negative size is stored as 0: both make the sample
/// unusable (the rules give `invalid_sample` to any size below 1; readers give 0 to a row they
/// cannot use). `push_back` throws `vbucket::error` naming the row for a size above 2^32 - 1,
/// which only a user's own records can hold (the CSV reader stops at `max_meta_frames` and
/// `max_meta_side`).
class meta_table {
 public:
  /// The largest num_frames, height or width a row holds.
  static constexpr std::int64_t max_size = 0xffffffff;
  /// The bytes a row takes in the columns.
  static constexpr std::size_t row_bytes = 4 * sizeof(std::uint32_t);

  [[nodiscard]] std::size_t size() const noexcept { return frames_.size(); }
  [[nodiscard]] bool empty() const noexcept { return frames_.empty(); }

  void reserve(std::size_t n) {
    frames_.reserve(n);
    height_.reserve(n);
    width_.reserve(n);
    fps_code_.reserve(n);
  }
  /// Removes every row; the distinct rates are kept (a reader filling the table again in
  /// chunks reuses their codes).
  void clear() noexcept {
    frames_.clear();
    height_.clear();
    width_.clear();
    fps_code_.clear();
  }

  /// Appends a row (a negative size as 0). Throws `vbucket::error` when a size is above
  /// `max_size`, and then appends nothing.
  void push_back(const sample_meta& m) { append(std::span<const sample_meta>(&m, 1)); }

  /// Appends rows in order, with one growth of each column. A negative size is stored as 0.
  /// Throws `vbucket::error` naming the first row with a size above `max_size`, and then
  /// appends nothing.
  VBUCKET_COMPILED_INLINE void append(std::span<const sample_meta> rows);

  /// Row i as the rules read it.
  [[nodiscard]] sample_meta operator[](std::size_t i) const noexcept {
    return {frames_[i], height_[i], width_[i], fps_values_[fps_code_[i]]};
  }
  /// Row i's fps (NaN when unknown).
  [[nodiscard]] double fps(std::size_t i) const noexcept { return fps_values_[fps_code_[i]]; }

  // The columns, for loops over many rows.
  [[nodiscard]] const std::uint32_t* num_frames_data() const noexcept { return frames_.data(); }
  [[nodiscard]] const std::uint32_t* height_data() const noexcept { return height_.data(); }
  [[nodiscard]] const std::uint32_t* width_data() const noexcept { return width_.data(); }
  /// Row i's fps is `fps_values()[fps_code_data()[i]]`.
  [[nodiscard]] const std::uint32_t* fps_code_data() const noexcept { return fps_code_.data(); }
  /// The distinct rates, in order of first appearance (NaN at most once).
  [[nodiscard]] const std::vector<double>& fps_values() const noexcept { return fps_values_; }

  /// Bytes held by the columns and the rates (capacity, not size).
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return (frames_.capacity() + height_.capacity() + width_.capacity() + fps_code_.capacity()) *
               sizeof(std::uint32_t) +
           fps_values_.capacity() * sizeof(double) + slots_.capacity() * sizeof(std::uint32_t);
  }

  /// Same rows: equal sizes, and fps values equal bit for bit (so a NaN equals a NaN).
  friend bool operator==(const meta_table& a, const meta_table& b) noexcept {
    if (a.frames_ != b.frames_ || a.height_ != b.height_ || a.width_ != b.width_) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (key_of(a.fps(i)) != key_of(b.fps(i))) return false;
    return true;
  }

  /// Builds a table from any range of `video_meta` values.
  template <class Range>
  static meta_table from(const Range& samples) {
    meta_table t;
    if constexpr (requires { samples.size(); }) t.reserve(static_cast<std::size_t>(samples.size()));
    for (const auto& s : samples) t.push_back(to_sample_meta(s));
    return t;
  }

 private:
  [[noreturn]] VBUCKET_COMPILED_INLINE static void throw_too_large(std::size_t row,
                                                                   const char* column,
                                                                   std::int64_t v);

  static std::uint64_t key_of(double v) noexcept {
    if (v != v) v = std::numeric_limits<double>::quiet_NaN();  // one code for every NaN
    return std::bit_cast<std::uint64_t>(v);
  }
  static std::size_t slot_of(std::uint64_t key, std::size_t mask) noexcept {
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ULL;
    return static_cast<std::size_t>(key >> 20) & mask;
  }

  /// The code of a rate: from the cache of recent rates when it is there, else a probe of the
  /// open-addressing index `slots_` (code + 1 per slot, 0 = empty, at most half
  /// full), adding the rate when it is new.
  std::uint32_t fps_code(double v) {
    const std::uint64_t key = key_of(v);
    // A direct-mapped cache of recent rates (real tables cycle through a few); an entry is
    // (code + 1), 0 when empty, and is checked against the rate it names.
    const recent_entry& hit = recent_[recent_slot(key)];
    if (hit.code != 0 && hit.key == key) [[likely]]
      return hit.code - 1;
    return fps_code_slow(key);
  }
  static std::size_t recent_slot(std::uint64_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> 60);  // 16 entries
  }
  std::uint32_t fps_code_slow(std::uint64_t key);  // noinline, and inline in header-only use
  std::uint32_t remember(std::uint64_t key, std::uint32_t code) noexcept {
    recent_entry& e = recent_[recent_slot(key)];
    e.key = key;
    e.code = code + 1;
    return code;
  }
  VBUCKET_COMPILED_INLINE void grow();

  std::vector<std::uint32_t> frames_;
  std::vector<std::uint32_t> height_;
  std::vector<std::uint32_t> width_;
  std::vector<std::uint32_t> fps_code_;
  std::vector<double> fps_values_;
  std::vector<std::uint32_t> slots_;
  struct recent_entry {
    std::uint64_t key = 0;
    std::uint32_t code = 0;  // code + 1; 0 = empty
  };
  static constexpr std::size_t recent_size = 16;
  recent_entry recent_[recent_size] = {};
};

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE void meta_table::append(std::span<const sample_meta> rows) {
  const std::size_t old = size();
  frames_.resize(old + rows.size());
  height_.resize(old + rows.size());
  width_.resize(old + rows.size());
  fps_code_.resize(old + rows.size());
  unsigned too_large = 0;  // no branch per row
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const sample_meta& m = rows[i];
    too_large |= static_cast<unsigned>(m.num_frames > max_size) |
                 static_cast<unsigned>(m.height > max_size) |
                 static_cast<unsigned>(m.width > max_size);
    frames_[old + i] = static_cast<std::uint32_t>(std::max<std::int64_t>(m.num_frames, 0));
    height_[old + i] = static_cast<std::uint32_t>(std::max<std::int64_t>(m.height, 0));
    width_[old + i] = static_cast<std::uint32_t>(std::max<std::int64_t>(m.width, 0));
    fps_code_[old + i] = fps_code(m.fps);
  }
  if (too_large == 0) return;
  // Take the rows back (their rates stay known) and name the first size too large.
  frames_.resize(old);
  height_.resize(old);
  width_.resize(old);
  fps_code_.resize(old);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const sample_meta& m = rows[i];
    if (m.num_frames > max_size) throw_too_large(old + i, "num_frames", m.num_frames);
    if (m.height > max_size) throw_too_large(old + i, "height", m.height);
    if (m.width > max_size) throw_too_large(old + i, "width", m.width);
  }
}

[[noreturn]] VBUCKET_COMPILED_INLINE void meta_table::throw_too_large(std::size_t row,
                                                                      const char* column,
                                                                      std::int64_t v) {
  throw error("meta_table: row " + std::to_string(row) + ": " + column + " " + std::to_string(v) +
              " is more than a table holds (" + std::to_string(max_size) + ")");
}

[[gnu::noinline]] VBUCKET_COMPILED_INLINE std::uint32_t meta_table::fps_code_slow(
    std::uint64_t key) {
  if (2 * (fps_values_.size() + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  std::size_t s = slot_of(key, mask);
  while (slots_[s] != 0) {
    const std::uint32_t code = slots_[s] - 1;
    if (key_of(fps_values_[code]) == key) return remember(key, code);
    s = (s + 1) & mask;
  }
  if (fps_values_.size() >= std::numeric_limits<std::uint32_t>::max() - 1)
    throw error("meta_table: more than 2^32 - 2 distinct fps values");
  const auto code = static_cast<std::uint32_t>(fps_values_.size());
  fps_values_.push_back(std::bit_cast<double>(key));
  slots_[s] = code + 1;
  return remember(key, code);
}

VBUCKET_COMPILED_INLINE void meta_table::grow() {
  std::vector<std::uint32_t> slots(slots_.empty() ? 64 : 2 * slots_.size(), 0);
  const std::size_t mask = slots.size() - 1;
  for (std::uint32_t code = 0; code < fps_values_.size(); ++code) {
    std::size_t s = slot_of(key_of(fps_values_[code]), mask);
    while (slots[s] != 0) s = (s + 1) & mask;
    slots[s] = code + 1;
  }
  slots_ = std::move(slots);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// One piece of samples read in order: rows[i] is sample index `first + i`.
struct meta_chunk {
  const meta_table& rows;
  std::uint64_t first = 0;
  /// About how many rows are still to come (an estimate, for reserving; 0 when unknown).
  std::uint64_t more = 0;
};

/// Samples too many to hold as one table, read in chunks each time they are needed (e.g.
/// `streamed_meta_csv`): `for_each_chunk(f)` calls `f(meta_chunk)` for consecutive chunks from
/// sample 0 on and returns the number of samples. Semantic requirement: every call reads the
/// same samples.
template <class S>
concept chunked_samples = requires(const S& s, void (*f)(const meta_chunk&)) {
  { s.for_each_chunk(f) } -> std::convertible_to<std::uint64_t>;
};

static_assert(video_meta<sample_meta>);

}  // namespace vbucket
