#pragma once
/// Video metadata: the `video_meta` concept a user's own sample type satisfies, and
/// `meta_table`, the struct-of-arrays form the hot loops work on.

#include <cmath>        // std::isfinite, std::isinf, std::isnan, std::trunc
#include <concepts>     // std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <limits>       // quiet_NaN
#include <optional>     // std::optional
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_floating_point_v, std::is_unsigned_v
#include <vector>       // std::vector

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

/// Struct of arrays: one contiguous column per field, row i = sample index i.
struct meta_table {
  std::vector<std::int64_t> num_frames;
  std::vector<std::int64_t> height;
  std::vector<std::int64_t> width;
  std::vector<double> fps;

  [[nodiscard]] std::size_t size() const noexcept { return num_frames.size(); }
  [[nodiscard]] bool empty() const noexcept { return num_frames.empty(); }

  void reserve(std::size_t n) {
    num_frames.reserve(n);
    height.reserve(n);
    width.reserve(n);
    fps.reserve(n);
  }
  void push_back(const sample_meta& m) {
    num_frames.push_back(m.num_frames);
    height.push_back(m.height);
    width.push_back(m.width);
    fps.push_back(m.fps);
  }
  [[nodiscard]] sample_meta operator[](std::size_t i) const noexcept {
    return {num_frames[i], height[i], width[i], fps[i]};
  }

  /// Builds a table from any range of `video_meta` values.
  template <class Range>
  static meta_table from(const Range& samples) {
    meta_table t;
    if constexpr (requires { samples.size(); }) t.reserve(static_cast<std::size_t>(samples.size()));
    for (const auto& s : samples) t.push_back(to_sample_meta(s));
    return t;
  }
};

static_assert(video_meta<sample_meta>);

}  // namespace vbucket
