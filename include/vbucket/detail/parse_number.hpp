#pragma once
/// The number readers of every text surface (run spec fields, CLI flags): an unsigned decimal in
/// a range, a finite positive number, and the shortest text that reads back as a double; and the
/// parts of a list between separators (`split_text`).

#include <charconv>      // std::from_chars, std::to_chars
#include <cmath>         // std::isfinite
#include <cstdint>       // std::uint64_t
#include <optional>      // std::optional
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

namespace vbucket::detail {

/// `text` as plain decimal digits with a value in [min, max], or nullopt.
[[nodiscard]] inline std::optional<std::uint64_t> parse_uint_in(std::string_view text,
                                                                std::uint64_t min,
                                                                std::uint64_t max) {
  std::uint64_t v = 0;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || v < min || v > max) return std::nullopt;
  return v;
}

/// `text` as a finite number > 0, or nullopt.
[[nodiscard]] inline std::optional<double> parse_positive(std::string_view text) {
  double v = 0.0;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || !(v > 0.0) || !std::isfinite(v))
    return std::nullopt;
  return v;
}

/// The shortest text that reads back as `v`.
[[nodiscard]] inline std::string shortest_text(double v) {
  char digits[32];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  (void)ec;  // 32 characters hold any double
  return std::string(digits, end);
}

/// The parts of `text` between separators `sep`, empty ones included ("a,,b": "a", "", "b";
/// an empty text: one empty part).
[[nodiscard]] inline std::vector<std::string_view> split_text(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0;;) {
    const std::size_t e = text.find(sep, pos);
    out.push_back(text.substr(pos, e == std::string_view::npos ? e : e - pos));
    if (e == std::string_view::npos) return out;
    pos = e + 1;
  }
}

}  // namespace vbucket::detail
