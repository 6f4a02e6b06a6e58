#pragma once
/// Metadata CSV reader: a table with a header row naming at least `num_frames`, `height`,
/// `width` and `fps` (any order; other columns such as `path` are ignored), one sample per
/// row, row order = sample index. RFC 4180 quoting (fields may hold commas, quotes and
/// newlines), CRLF or LF line ends, an optional UTF-8 BOM and an optional final newline.
/// Empty lines are skipped, as pandas' `read_csv` does, so sample indices match pandas'.
/// An optional `error` column (as `vbucket scan` writes: the message for a file it could not
/// read): a row whose `error` is not empty is kept as an unusable sample (0 frames, 0 × 0,
/// fps unknown) without reading its other fields, so row order stays sample order; the bucket
/// rules give it `invalid_sample` and plans count it as invalid.
/// Every problem throws `vbucket::error` with one line naming the file, the row (data rows
/// count from 1 after the header; the file line is given too) and the column.

#include <algorithm>     // std::count
#include <bit>           // std::countr_zero, std::endian
#include <cerrno>        // errno
#include <charconv>      // std::from_chars
#include <cmath>         // std::isnan, std::isinf
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t, std::uint64_t
#include <cstdio>        // std::fopen, std::fread, std::ferror
#include <cstring>       // std::strerror, std::memcpy
#include <filesystem>    // std::filesystem::status, file_size
#include <limits>        // std::numeric_limits
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "error.hpp"
#include "meta.hpp"
#include "rules.hpp"  // detail::max_side

namespace vbucket {

/// A metadata table read from CSV, with the file line on which each row starts.
struct meta_csv {
  meta_table table;
  std::vector<std::uint64_t> lines;  ///< lines[i]: 1-based file line of sample i's row
};

/// The largest `num_frames` a metadata row may hold.
inline constexpr std::int64_t max_meta_frames = std::int64_t{1} << 31;

namespace detail {

/// One CSV field. `text` is its characters as written in the file (inside the quotes when
/// `quoted`); `escaped` says it holds doubled quotes ("") that `value()` turns into one.
struct csv_field {
  std::string_view text;
  bool quoted = false;
  bool escaped = false;

  [[nodiscard]] std::string value() const {
    if (!escaped) return std::string(text);
    std::string v;
    v.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      v.push_back(text[i]);
      if (text[i] == '"') ++i;  // the second quote of a "" pair
    }
    return v;
  }
};

/// `s` without leading and trailing spaces and tabs.
constexpr std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// A value shown in a one-line message: in double quotes, control characters escaped,
/// long values cut.
inline std::string quote_for_message(std::string_view s) {
  constexpr std::size_t max_shown = 48;
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < max_shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > max_shown) out += "...";
  out += "\"";
  return out;
}

/// Splits CSV text into records of fields without copying: fields point into the text. The
/// first record is the header (row 0); later records are data rows 1, 2, ... Empty lines are
/// skipped. Syntax errors and `fail` throw `vbucket::error` naming the file, row, line and,
/// once `set_columns` has named them, the column.
class csv_reader {
 public:
  csv_reader(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);
    pos_ = text_.data();
  }

  /// Reads the next non-empty record into `fields`; false at the end of the text.
  bool next(std::vector<csv_field>& fields) {
    const char* const end = text_.data() + text_.size();
    for (;;) {
      if (pos_ == end) return false;
      fields.clear();
      record_line_ = line_;
      current_row_ = header_done_ ? row_ + 1 : 0;
      const char* p = pos_;
      for (;;) {
        if (p != end && *p == '"') {
          p = scan_quoted(p, end, fields);
        } else {
          const char* q = find_special(p, end);
          while (q != end && *q == '"') q = find_special(q + 1, end);  // a bare quote is literal
          fields.push_back({std::string_view(p, static_cast<std::size_t>(q - p)), false, false});
          p = q;
        }
        if (p == end) break;
        if (*p == ',') {
          ++p;
          continue;
        }
        if (*p == '\r' && p + 1 != end && p[1] == '\n') ++p;
        ++p;
        ++line_;
        break;
      }
      pos_ = p;
      if (fields.size() == 1 && !fields[0].quoted && fields[0].text.empty()) continue;
      if (header_done_) ++row_;
      header_done_ = true;
      return true;
    }
  }

  /// Names the columns, for messages about later rows.
  void set_columns(std::vector<std::string> names) { columns_ = std::move(names); }

  /// The 1-based file line on which the last record read starts.
  [[nodiscard]] std::uint64_t line() const noexcept { return record_line_; }
  /// The last record's data row: 0 for the header, then 1, 2, ...
  [[nodiscard]] std::uint64_t row() const noexcept { return current_row_; }
  [[nodiscard]] const std::string& where() const noexcept { return where_; }

  /// "FILE: row R (line L)", or "FILE: header (line L)", for the last record read.
  [[nodiscard]] std::string location() const {
    std::string s = where_ + ": ";
    if (current_row_ == 0) {
      s += "header";
    } else {
      s += "row " + std::to_string(current_row_);
    }
    return s + " (line " + std::to_string(record_line_) + ")";
  }
  /// `location()` plus the column of field `index`.
  [[nodiscard]] std::string location(std::size_t index) const {
    if (index < columns_.size())
      return location() + ", column " + quote_for_message(columns_[index]);
    return location() + ", field " + std::to_string(index + 1);
  }

  [[noreturn]] void fail(std::string_view what) const {
    throw error(location() + ": " + std::string(what));
  }
  [[noreturn]] void fail(std::size_t index, std::string_view what) const {
    throw error(location(index) + ": " + std::string(what));
  }

 private:
  // ',', '"', CR and LF: the only bytes that end a run of ordinary field characters.
  static constexpr bool is_special(char c) noexcept {
    return c == ',' || c == '"' || c == '\n' || c == '\r';
  }

  // The first special byte in [p, end), or end. Eight bytes at a time on little-endian
  // machines: a byte equal to c makes (x ^ c) zero, and the classic zero-byte test flags the
  // lowest such byte exactly (higher flags may be false, so only the lowest is used).
  static const char* find_special(const char* p, const char* end) noexcept {
    if constexpr (std::endian::native == std::endian::little) {
      constexpr std::uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
      auto zero_bytes = [](std::uint64_t x) { return (x - ones) & ~x & highs; };
      while (end - p >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        const std::uint64_t m = zero_bytes(w ^ (ones * ',')) | zero_bytes(w ^ (ones * '"')) |
                                zero_bytes(w ^ (ones * '\n')) | zero_bytes(w ^ (ones * '\r'));
        if (m != 0) return p + std::countr_zero(m) / 8;
        p += 8;
      }
    }
    while (p != end && !is_special(*p)) ++p;
    return p;
  }

  // Scans the quoted field opening at p, appends it and returns the position after it.
  const char* scan_quoted(const char* p, const char* end, std::vector<csv_field>& fields) {
    const std::uint64_t open_line = line_;
    const char* q = p + 1;
    bool escaped = false;
    for (;;) {
      q = find_special(q, end);
      if (q == end) {
        pos_ = end;
        fail(fields.size(), "unterminated quoted field (the quote opened on line " +
                                std::to_string(open_line) + " never closes)");
      }
      if (*q == ',') {
        ++q;
        continue;
      }
      if (*q == '"') {
        if (q + 1 != end && q[1] == '"') {
          escaped = true;
          q += 2;
          continue;
        }
        break;
      }
      if (*q == '\n' || q + 1 == end || q[1] != '\n') ++line_;  // LF, CRLF (at its LF) or CR
      ++q;
    }
    fields.push_back(
        {std::string_view(p + 1, static_cast<std::size_t>(q - (p + 1))), true, escaped});
    ++q;  // the closing quote
    if (q != end && *q != ',' && *q != '\n' && *q != '\r')
      fail(fields.size() - 1, "unexpected character " + quote_for_message(std::string_view(q, 1)) +
                                  " after a closing quote (a quote inside a quoted field is "
                                  "written as two quotes)");
    return q;
  }

  std::string_view text_;
  std::string where_;
  const char* pos_ = nullptr;
  std::uint64_t line_ = 1;
  std::uint64_t record_line_ = 1;
  std::uint64_t row_ = 0;          // data rows read so far
  std::uint64_t current_row_ = 0;  // row of the last record (0: header)
  bool header_done_ = false;
  std::vector<std::string> columns_;
};

/// A size column's value: an integer in [1, max], written in decimal digits.
inline std::int64_t csv_size(const csv_reader& reader, std::size_t column, const csv_field& f,
                             std::int64_t max) {
  const std::string_view s = trim_blanks(f.text);
  std::int64_t v = 0;
  const char* const end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec == std::errc{} && p == end && !f.escaped && v >= 1 && v <= max && !s.empty()) return v;
  // The error path: messages are built only here, so the hot path allocates nothing.
  const std::string range = "an integer from 1 to " + std::to_string(max);
  if (s.empty()) reader.fail(column, "is empty (expected " + range + ")");
  if (ec == std::errc::result_out_of_range && p == end)
    reader.fail(column, "must be " + range + ", got " + quote_for_message(s));
  if (ec != std::errc{} || p != end || f.escaped)
    reader.fail(column, quote_for_message(f.escaped ? f.value() : std::string(s)) +
                            " is not an integer (expected " + range + ")");
  reader.fail(column, "must be " + range + ", got " + std::string(s));
}

/// An fps value: empty or NaN (any case) = unknown (NaN); otherwise a finite positive number.
inline double csv_fps(const csv_reader& reader, std::size_t column, const csv_field& f) {
  const std::string_view s = trim_blanks(f.text);
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  constexpr std::string_view expected =
      "expected a positive frame rate, or empty or \"nan\" when unknown";
  double v = 0.0;
  const char* const end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v, std::chars_format::general);
  if (p != end || f.escaped || (ec != std::errc{} && ec != std::errc::result_out_of_range))
    reader.fail(column, quote_for_message(f.escaped ? f.value() : std::string(s)) +
                            " is not a number (" + std::string(expected) + ")");
  if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
  if (ec != std::errc{} || !(v > 0.0) || std::isinf(v))
    reader.fail(column,
                "must be a finite positive frame rate (or empty or \"nan\" when unknown), got " +
                    quote_for_message(s));
  return v;
}

inline meta_table parse_meta_csv_into(std::string_view text, const std::string& where,
                                      std::vector<std::uint64_t>* lines) {
  csv_reader reader(text, where);
  std::vector<csv_field> fields;
  if (!reader.next(fields))
    throw error(where +
                ": empty file: expected a header row naming num_frames, height, width and fps");

  constexpr std::string_view required[] = {"num_frames", "height", "width", "fps"};
  constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
  std::size_t column_of[4] = {npos, npos, npos, npos};
  std::size_t error_column = npos;
  std::vector<std::string> names;
  names.reserve(fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    names.push_back(std::string(trim_blanks(fields[i].value())));
    if (names.back() == "error" && error_column == npos) error_column = i;
    for (std::size_t r = 0; r < 4; ++r) {
      if (names.back() != required[r]) continue;
      if (column_of[r] != npos)
        reader.fail("duplicate column \"" + std::string(required[r]) + "\" (fields " +
                    std::to_string(column_of[r] + 1) + " and " + std::to_string(i + 1) + ")");
      column_of[r] = i;
    }
  }
  std::string missing;
  for (std::size_t r = 0; r < 4; ++r)
    if (column_of[r] == npos)
      missing += (missing.empty() ? "\"" : ", \"") + std::string(required[r]) + "\"";
  if (!missing.empty()) {
    std::string found;
    for (const auto& n : names) found += (found.empty() ? "" : ",") + n;
    reader.fail("missing required column" +
                std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                " (the header is " + quote_for_message(found) +
                "; needed: num_frames,height,width,fps in any order)");
  }
  reader.set_columns(names);
  const std::size_t num_columns = names.size();

  meta_table table;
  const auto estimate = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  table.reserve(estimate);
  if (lines) lines->reserve(estimate);
  while (reader.next(fields)) {
    if (fields.size() != num_columns)
      reader.fail(std::to_string(fields.size()) + (fields.size() == 1 ? " field" : " fields") +
                  ", but the header has " + std::to_string(num_columns) + " columns");
    sample_meta m;
    if (error_column != npos && !trim_blanks(fields[error_column].value()).empty()) {
      m = {0, 0, 0, std::numeric_limits<double>::quiet_NaN()};  // unusable: counted invalid
      table.push_back(m);
      if (lines) lines->push_back(reader.line());
      continue;
    }
    m.num_frames = csv_size(reader, column_of[0], fields[column_of[0]], max_meta_frames);
    m.height = csv_size(reader, column_of[1], fields[column_of[1]], max_side);
    m.width = csv_size(reader, column_of[2], fields[column_of[2]], max_side);
    m.fps = csv_fps(reader, column_of[3], fields[column_of[3]]);
    table.push_back(m);
    if (lines) lines->push_back(reader.line());
  }
  return table;
}

/// The whole content of a file; throws `vbucket::error` naming it when it cannot be read.
inline std::string read_whole_file(const std::string& path) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    throw error(path + ": cannot open file for reading (" +
                (errno != 0 ? std::string(std::strerror(errno)) : std::string("unknown error")) +
                ")");
  std::string text;
  std::size_t size = 0;
  // One read of the whole file when its size is known (a regular file); pipes and other
  // unseekable inputs are read in growing chunks.
  std::size_t chunk = std::size_t{1} << 16;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(status)) {
    std::fclose(f);
    throw error(path + ": cannot read file (it is a directory)");
  }
  if (!ec && std::filesystem::is_regular_file(status)) {
    const auto bytes = std::filesystem::file_size(path, ec);
    if (!ec && bytes < (std::uintmax_t{1} << 40)) chunk = static_cast<std::size_t>(bytes) + 1;
  }
  for (;;) {
    text.resize(size + chunk);
    const std::size_t got = std::fread(text.data() + size, 1, chunk, f);
    size += got;
    if (got < chunk) break;
    if (chunk < (std::size_t{1} << 26)) chunk *= 2;
  }
  const int err = std::ferror(f) != 0 ? errno : 0;
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed)
    throw error(path + ": cannot read file (" +
                (err != 0 ? std::string(std::strerror(err)) : std::string("read error")) + ")");
  text.resize(size);
  return text;
}

}  // namespace detail

/// Parses metadata CSV text. `where` (usually the file name) starts every error message.
inline meta_table parse_meta_csv(std::string_view text, const std::string& where) {
  return detail::parse_meta_csv_into(text, where, nullptr);
}

/// As `parse_meta_csv`, also returning the file line on which each row starts.
inline meta_csv parse_meta_csv_with_lines(std::string_view text, const std::string& where) {
  meta_csv out;
  out.table = detail::parse_meta_csv_into(text, where, &out.lines);
  return out;
}

/// Reads and parses a metadata CSV file.
inline meta_table load_meta_csv(const std::string& path) {
  return parse_meta_csv(detail::read_whole_file(path), path);
}

/// As `load_meta_csv`, also returning the file line on which each row starts.
inline meta_csv load_meta_csv_with_lines(const std::string& path) {
  return parse_meta_csv_with_lines(detail::read_whole_file(path), path);
}

}  // namespace vbucket
