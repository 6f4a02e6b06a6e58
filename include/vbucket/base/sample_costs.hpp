#pragma once
/// Per-sample costs from a text file (`run_spec::sample_costs`, `vbucket plan --sample-costs`,
/// Python's `sample_costs=`): one number per line, line i the cost of metadata row i (sample
/// index i), each a finite number ≥ 0 in the unit of the batch cost, e.g. a sample's expected
/// decode seconds (`ffmpeg::sample_decode_costs`). A first line that starts with a letter and
/// is not a number is a header (a CSV column name such as `cost`) and is skipped; spaces around
/// a number and a "\r" before the newline are allowed.
///
///     cost
///     0.012
///     0.250
///
///     const std::vector<double> costs = vbucket::read_sample_costs("costs.csv");

#include <cctype>        // std::isalpha
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <exception>     // std::exception (a failed read)
#include <filesystem>    // std::filesystem::is_directory
#include <fstream>       // std::ifstream
#include <iterator>      // std::istreambuf_iterator
#include <string>        // std::string, std::getline, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

#include "error.hpp"

namespace vbucket {

namespace detail {

/// `text` without leading and trailing spaces, tabs and a carriage return.
[[nodiscard]] inline std::string_view trim_cost_text(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

/// The whole of `text` as a double (also "nan" and "inf", which the caller refuses), or false.
[[nodiscard]] inline bool parse_cost_text(std::string_view text, double& out) noexcept {
  if (text.empty()) return false;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && p == end;
}

}  // namespace detail

/// The per-sample costs of the lines of `text` (see the file's comment); messages name `name`
/// (a file name) and the line (counted from 1). Throws `vbucket::error` on a line that is not
/// one number (an empty line too), a cost that is NaN, infinite or negative, and on no costs.
[[nodiscard]] inline std::vector<double> parse_sample_costs(std::string_view text,
                                                            std::string_view name) {
  std::vector<double> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    const std::string_view line = detail::trim_cost_text(raw);
    const std::string where = std::string(name) + ":" + std::to_string(line_no) + ": ";
    double v = 0.0;
    if (!detail::parse_cost_text(line, v)) {
      if (line_no == 1 && !line.empty() && std::isalpha(static_cast<unsigned char>(line[0])))
        continue;  // a header
      throw error(where + "expected one per-sample cost (a number >= 0), got \"" +
                  std::string(line) + "\"" +
                  (line.find(',') != std::string_view::npos ? " (one column only)" : ""));
    }
    if (!std::isfinite(v) || v < 0.0)
      throw error(where + "a per-sample cost must be a finite number >= 0, got \"" +
                  std::string(line) + "\"");
    out.push_back(v == 0.0 ? 0.0 : v);  // -0 as 0
  }
  if (out.empty())
    throw error(std::string(name) +
                ": holds no per-sample costs (expected one number per metadata row)");
  return out;
}

/// The per-sample costs in the file `path` (see the file's comment). Throws `vbucket::error`
/// naming the file when it cannot be read, and its line as `parse_sample_costs` does.
[[nodiscard]] inline std::vector<double> read_sample_costs(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error(path + ": is a directory, not a per-sample costs file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open the per-sample costs file");
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {  // libstdc++'s filebuf throws on a failed read(2)
    throw error(path + ": cannot read the per-sample costs file (" + e.what() + ")");
  }
  if (in.bad()) throw error(path + ": cannot read the per-sample costs file");
  return parse_sample_costs(text, path);
}

}  // namespace vbucket
