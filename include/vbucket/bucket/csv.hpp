#pragma once
/// Metadata CSV reader: a table with a header row naming at least `num_frames`, `height`,
/// `width` and `fps` (any order; other columns such as `path` are ignored), one sample per
/// row, row order = sample index. The dialect is pandas' and Python's `csv` default: RFC 4180
/// quoting (fields may hold commas, quotes and newlines), text after a closing quote kept as
/// part of the field (`"a, b" x` reads `a, b x`), a quote inside an unquoted field taken
/// literally, CRLF, LF or CR line ends, an optional UTF-8 BOM and an optional final newline.
/// Empty lines are skipped, as pandas' `read_csv` does, so sample indices match pandas'.
/// A NUL byte anywhere is an error (a text CSV has none; binary input fails on its first row).
/// Integer columns take decimal integers and, as pandas writes an integer column that once
/// held a NaN, decimal floats with an integral value (`51.0`, `51.`, `5.1e1`); `51.5` is an
/// error. fps empty, `nan` (any case) or 0 means unknown (NaN): tools write 0 for a rate they
/// could not read, and Open-Sora's rule treats 0 as it treats NaN (frame interval 1).
/// An optional `error` column (as `vbucket scan` writes: the message for a file it could not
/// read): a row whose `error` is not empty is kept as an unusable sample (0 frames, 0 × 0,
/// fps unknown) without reading its other fields, so row order stays sample order; the bucket
/// rules give it `invalid_sample` and plans count it as invalid.
/// Files are read in bounded chunks: memory is the table (16 bytes a row) and one buffer, not
/// the file's text.
/// Every problem throws `vbucket::error` with one line naming the file, the row (data rows
/// count from 1 after the header; the file line is given too) and the column.

#include <algorithm>     // std::count, std::min, std::max
#include <bit>           // std::countr_zero, std::endian
#include <cerrno>        // errno
#include <charconv>      // std::from_chars
#include <cmath>         // std::isnan, std::isinf
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t, std::uint64_t
#include <cstdio>        // std::fopen, std::fread, std::ferror, std::setvbuf
#include <cstring>       // std::strerror, std::memcpy, std::memmove, std::memchr
#include <limits>        // std::numeric_limits
#include <memory>        // std::unique_ptr, std::shared_ptr
#include <mutex>         // std::mutex (streamed_meta_csv's record)
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "meta.hpp"
#include "vbucket/base/error.hpp"

#if VBUCKET_HEADER_DEFINITIONS
#include <filesystem>  // std::filesystem::status, file_size, last_write_time
#endif

namespace vbucket {

/// A metadata table read from CSV, with the file line on which each row starts.
struct meta_csv {
  meta_table table;
  std::vector<std::uint64_t> lines;  ///< lines[i]: 1-based file line of sample i's row
};

namespace detail {

/// One CSV field. `text` is its characters as written in the file: inside the quotes when
/// `quoted`, and for a quoted field with text after its closing quote (`"a" b`), everything
/// from after the opening quote to the field's end. `escaped` says `value()` must decode it
/// (doubled quotes, or text after the closing quote).
struct csv_field {
  std::string_view text;
  bool quoted = false;
  bool escaped = false;

  [[nodiscard]] std::string value() const {
    if (!escaped) return std::string(text);
    std::string v;
    v.reserve(text.size());
    bool in_quotes = quoted;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (in_quotes && text[i] == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          v.push_back('"');  // a "" pair
          ++i;
        } else {
          in_quotes = false;  // the closing quote: the rest is taken as written
        }
        continue;
      }
      v.push_back(text[i]);
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
  return "\"" + escape_control(s.substr(0, max_shown)) + (s.size() > max_shown ? "...\"" : "\"");
}

/// A fast 64-bit hash of a byte stream fed in pieces of any sizes (the value depends on the
/// bytes only, not on how they were cut): four independent multiply-rotate lanes over 32-byte
/// blocks, in the manner of xxHash64 (whose constants it uses; not its exact value). Several
/// GB/s, so hashing a file while it is parsed costs little. Not cryptographic: it detects
/// accidental changes (an appended, truncated or edited metadata file), not forgeries.
class stream_hash64 {
 public:
  void update(const char* p, std::size_t n) noexcept {
    total_ += n;
    if (pending_ != 0) {
      const std::size_t take = std::min(n, block - pending_);
      std::memcpy(buffer_ + pending_, p, take);
      pending_ += take;
      p += take;
      n -= take;
      if (pending_ < block) return;
      consume(buffer_);
      pending_ = 0;
    }
    for (; n >= block; p += block, n -= block) consume(p);
    std::memcpy(buffer_, p, n);
    pending_ = n;
  }

  /// The hash of every byte fed so far.
  [[nodiscard]] std::uint64_t value() const noexcept {
    std::uint64_t h =
        total_ >= block ? rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18) : p5;
    if (total_ >= block)
      for (const std::uint64_t v : v_) h = (h ^ round(0, v)) * p1 + p4;
    h += total_;
    std::size_t i = 0;
    for (; i + 8 <= pending_; i += 8) h = rotl(h ^ round(0, word(buffer_ + i)), 27) * p1 + p4;
    for (; i < pending_; ++i) h = rotl(h ^ (static_cast<unsigned char>(buffer_[i]) * p5), 11) * p1;
    h ^= h >> 33;
    h *= p2;
    h ^= h >> 29;
    h *= p3;
    return h ^ (h >> 32);
  }

  /// Bytes fed so far.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return total_; }

 private:
  static constexpr std::size_t block = 32;
  static constexpr std::uint64_t p1 = 0x9E3779B185EBCA87ULL, p2 = 0xC2B2AE3D27D4EB4FULL,
                                 p3 = 0x165667B19E3779F9ULL, p4 = 0x85EBCA77C2B2AE63ULL,
                                 p5 = 0x27D4EB2F165667C5ULL;
  static constexpr std::uint64_t rotl(std::uint64_t x, int r) noexcept {
    return (x << r) | (x >> (64 - r));
  }
  static constexpr std::uint64_t round(std::uint64_t acc, std::uint64_t in) noexcept {
    return rotl(acc + in * p2, 31) * p1;
  }
  static std::uint64_t word(const char* p) noexcept {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  void consume(const char* p) noexcept {
    v_[0] = round(v_[0], word(p));
    v_[1] = round(v_[1], word(p + 8));
    v_[2] = round(v_[2], word(p + 16));
    v_[3] = round(v_[3], word(p + 24));
  }

  std::uint64_t v_[4] = {p1 + p2, p2, 0, 0 - p1};
  char buffer_[block] = {};
  std::size_t pending_ = 0;
  std::uint64_t total_ = 0;
};

/// Names a file for `csv_reader` to read in chunks of `chunk_bytes` (the buffer grows beyond
/// it only for a record longer than half of it).
struct csv_file {
  std::string path;
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

/// Splits CSV text into records of fields without copying: fields point into the text, or
/// into the reader's buffer when it reads a file (valid until the next `next()`). The first
/// record is the header (row 0); later records are data rows 1, 2, ... Empty lines are
/// skipped. Syntax errors, NUL bytes and `fail` throw `vbucket::error` naming the file, row,
/// line and, once `set_columns` has named them, the column.
/// What `std::filesystem` says of a path (no error when it cannot tell): a directory, a regular
/// file and its size and modification time (ticks of the file clock). Compiled once, so that
/// the header needs no <filesystem>.
struct file_status {
  bool directory = false;
  bool regular = false;
  bool size_known = false;
  std::uint64_t size = 0;
  bool mtime_known = false;
  std::int64_t mtime = 0;
};
VBUCKET_COMPILED_INLINE file_status probe_file(const std::string& path, bool want_mtime);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE file_status probe_file(const std::string& path, bool want_mtime) {
  file_status out;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec) return out;
  out.directory = std::filesystem::is_directory(status);
  out.regular = std::filesystem::is_regular_file(status);
  if (!out.regular) return out;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return out;
  out.size_known = true;
  out.size = static_cast<std::uint64_t>(bytes);
  if (!want_mtime) return out;
  const auto mtime = std::filesystem::last_write_time(path, ec);
  if (ec) return out;
  out.mtime_known = true;
  out.mtime = static_cast<std::int64_t>(mtime.time_since_epoch().count());
  return out;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

class csv_reader {
 public:
  /// Reads `text`, which must outlive the reader; `where` names it in messages.
  csv_reader(std::string_view text, std::string where) : where_(std::move(where)), eof_(true) {
    if (text.substr(0, 3) == bom) text.remove_prefix(3);
    pos_ = text.data();
    end_ = text.data() + text.size();
    nul_ = static_cast<const char*>(std::memchr(pos_, 0, text.size()));
    bom_done_ = true;
  }

  /// Reads a file in bounded chunks, so memory does not grow with its size.
  explicit csv_reader(const csv_file& file)
      : where_(file.path), chunk_(std::max<std::size_t>(file.chunk_bytes, 1)) {
    const file_status status = probe_file(file.path, false);
    if (status.directory) throw error(where_ + ": cannot read file (it is a directory)");
    errno = 0;
    std::FILE* f = std::fopen(file.path.c_str(), "rb");
    if (f == nullptr)
      throw error(where_ + ": cannot open file for reading (" +
                  (errno != 0 ? std::string(std::strerror(errno)) : std::string("unknown error")) +
                  ")");
    file_.reset(f);
    std::setvbuf(f, nullptr, _IONBF, 0);  // whole chunks straight into the buffer
    if (status.size_known) file_size_ = status.size;
  }

  csv_reader(const csv_reader&) = delete;
  csv_reader& operator=(const csv_reader&) = delete;

  /// Reads the next non-empty record into `fields`; false at the end of the text.
  bool next(std::vector<csv_field>& fields) {
    if (!bom_done_) skip_bom();
    for (;;) {
      if (pos_ == end_ && !refill()) return false;
      fields.clear();
      record_line_ = line_;
      current_row_ = header_done_ ? row_ + 1 : 0;
      const char* const after = parse_record(pos_, fields);
      if (after == nullptr) {  // the buffer ends inside the record: read more, parse it again
        line_ = record_line_;
        refill();
        continue;
      }
      if (nul_ != nullptr && nul_ < after) fail_nul(fields);
      pos_ = after;
      if (fields.size() == 1 && !fields[0].quoted && fields[0].text.empty()) continue;
      if (header_done_) ++row_;
      header_done_ = true;
      return true;
    }
  }

  /// About how many records are left after the last one read: the line ends in the buffered
  /// text scaled to the rest of the file (an estimate, for reserving; 0 when nothing is left).
  [[nodiscard]] std::size_t estimate_records() {
    if (pos_ == end_) refill();
    const auto buffered = static_cast<std::size_t>(end_ - pos_);
    const std::size_t sample = std::min<std::size_t>(buffered, std::size_t{1} << 20);
    if (sample == 0) return 0;
    const auto line_ends = static_cast<double>(std::count(pos_, pos_ + sample, '\n'));
    double rest = static_cast<double>(buffered);
    if (file_ && file_size_ > 0) {
      const std::uint64_t offset = bytes_read_ - buffered;
      if (file_size_ > offset) rest = static_cast<double>(file_size_ - offset);
    }
    // A record takes 4 bytes at least (3 commas and a line end), whatever the sample says.
    const double most = rest / 4.0 + 1.0;
    return static_cast<std::size_t>(std::min(most, line_ends * rest / static_cast<double>(sample)));
  }

  /// The bytes held for the text of a file being read (0 for a text in memory): one chunk,
  /// or up to four times the longest record when that is more.
  [[nodiscard]] std::size_t buffer_bytes() const noexcept { return capacity_; }

  /// Feeds every byte read from the file from now on to `hash` (which must outlive the
  /// reader); call before the first `next()` to hash the whole file.
  void hash_into(stream_hash64* hash) noexcept { hash_ = hash; }

  /// Whether the whole file has been read (the last `next()` returned false).
  [[nodiscard]] bool at_end() const noexcept { return eof_ && pos_ == end_; }

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
  static constexpr std::string_view bom = "\xEF\xBB\xBF";

  struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };

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

  // The end of an unquoted run starting at p: a quote there is literal, as in pandas.
  static const char* find_field_end(const char* p, const char* end) noexcept {
    const char* q = find_special(p, end);
    while (q != end && *q == '"') q = find_special(q + 1, end);
    return q;
  }

  // Parses the record starting at p into fields and returns the position after it, or
  // nullptr when the buffer ends inside it and more of the file is to come (the caller then
  // reads more and parses it again, so a record never has to fit a chunk).
  const char* parse_record(const char* p, std::vector<csv_field>& fields) {
    const char* const end = end_;
    for (;;) {
      if (p != end && *p == '"') {
        p = scan_quoted(p, end, fields);
        if (p == nullptr) return nullptr;
      } else {
        const char* q = find_field_end(p, end);
        fields.push_back({std::string_view(p, static_cast<std::size_t>(q - p)), false, false});
        p = q;
      }
      if (p == end) return eof_ ? p : nullptr;
      if (*p == ',') {
        ++p;
        continue;
      }
      if (*p == '\r') {
        if (p + 1 == end && !eof_) return nullptr;  // an LF may follow in the next chunk
        if (p + 1 != end && p[1] == '\n') ++p;
      }
      ++line_;
      return p + 1;
    }
  }

  // Scans the quoted field opening at p and appends it: the position after it, or nullptr
  // when the buffer ends inside it and more of the file is to come.
  const char* scan_quoted(const char* p, const char* end, std::vector<csv_field>& fields) {
    const std::uint64_t open_line = line_;
    const char* q = p + 1;
    bool escaped = false;
    for (;;) {
      q = find_special(q, end);
      if (q == end) {
        if (!eof_) return nullptr;
        fail(fields.size(), "unterminated quoted field (the quote opened on line " +
                                std::to_string(open_line) + " never closes)");
      }
      if (*q == ',') {
        ++q;
        continue;
      }
      if (q + 1 == end && !eof_) return nullptr;  // a quote or CR whose next byte is unread
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
    const char* const after = q + 1;  // after the closing quote
    if (after == end || *after == ',' || *after == '\n' || *after == '\r') {
      fields.push_back(
          {std::string_view(p + 1, static_cast<std::size_t>(q - (p + 1))), true, escaped});
      return after;
    }
    // Text after the closing quote belongs to the field, taken as written up to the next
    // comma or line end, as Python's csv and pandas read it: `"a, b" x` is `a, b x`.
    const char* const field_end = find_field_end(after, end);
    fields.push_back(
        {std::string_view(p + 1, static_cast<std::size_t>(field_end - (p + 1))), true, true});
    return field_end;
  }

  // Throws for the NUL byte at nul_, inside the record just parsed into fields.
  [[noreturn]] void fail_nul(const std::vector<csv_field>& fields) const {
    constexpr std::string_view what =
        "holds a NUL byte (a text CSV has none; is this a binary file?)";
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const char* const begin = fields[i].text.data();
      if (nul_ >= begin && nul_ < begin + fields[i].text.size()) fail(i, what);
    }
    fail(what);
  }

  // Reads more of the file after the unread bytes [pos_, end_) (the start of a record the
  // buffer cut), which move to the buffer's start; the buffer doubles when they fill more
  // than half of it. False when the file has nothing more.
  bool refill() {
    if (eof_) return false;
    const auto kept = static_cast<std::size_t>(end_ - pos_);
    const std::ptrdiff_t nul_offset = nul_ != nullptr ? nul_ - pos_ : -1;
    if (capacity_ == 0 || kept > capacity_ / 2) {
      const std::size_t capacity = std::max(chunk_, capacity_ * 2);
      std::unique_ptr<char[]> bigger(new char[capacity]);
      if (kept != 0) std::memcpy(bigger.get(), pos_, kept);
      buffer_ = std::move(bigger);
      capacity_ = capacity;
    } else if (kept != 0) {
      std::memmove(buffer_.get(), pos_, kept);
    }
    char* const data = buffer_.get();
    pos_ = data;
    nul_ = nul_offset >= 0 ? data + nul_offset : nullptr;
    const std::size_t want = capacity_ - kept;
    errno = 0;
    const std::size_t got = std::fread(data + kept, 1, want, file_.get());
    if (got < want) {
      if (std::ferror(file_.get()) != 0)
        throw error(where_ + ": cannot read file (" +
                    (errno != 0 ? std::string(std::strerror(errno)) : std::string("read error")) +
                    ")");
      eof_ = true;
    }
    if (hash_ != nullptr) hash_->update(data + kept, got);
    if (nul_ == nullptr) nul_ = static_cast<const char*>(std::memchr(data + kept, 0, got));
    end_ = data + kept + got;
    bytes_read_ += got;
    return got != 0;
  }

  // Drops a UTF-8 BOM at the start of a file.
  void skip_bom() {
    bom_done_ = true;
    while (static_cast<std::size_t>(end_ - pos_) < bom.size() && refill()) {
    }
    if (std::string_view(pos_, static_cast<std::size_t>(end_ - pos_)).substr(0, 3) == bom)
      pos_ += bom.size();
  }

  std::string where_;
  std::unique_ptr<std::FILE, file_closer> file_;  // null when reading a text in memory
  stream_hash64* hash_ = nullptr;                 // fed every byte read, when set
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t chunk_ = 0;
  std::uint64_t file_size_ = 0;   // 0 when unknown (not a regular file)
  std::uint64_t bytes_read_ = 0;  // from the file so far
  const char* pos_ = nullptr;     // the next record
  const char* end_ = nullptr;     // the end of the text, or of the buffered part of the file
  const char* nul_ = nullptr;     // the first NUL byte in [pos_, end_), if any
  bool eof_ = false;              // nothing after end_
  bool bom_done_ = false;
  std::uint64_t line_ = 1;
  std::uint64_t record_line_ = 1;
  std::uint64_t row_ = 0;          // data rows read so far
  std::uint64_t current_row_ = 0;  // row of the last record (0: header)
  bool header_done_ = false;
  std::vector<std::string> columns_;
};

/// How a number in an integer column reads.
enum class integral_kind { integer, not_integral, out_of_range, not_a_number };

/// A number of an integer column as `parse_integral` reads it.
struct integral_value {
  integral_kind kind = integral_kind::not_a_number;
  std::int64_t value = 0;
};

/// `s` read as an integer: decimal digits, or a decimal float literal with an integral value
/// (`[-]digits[.digits][(e|E)[+|-]digits]`, a digit before or after the point), exactly, with
/// no rounding through a double (`2147483648.0000001` is not integral). A magnitude above
/// `max` is `out_of_range`.

constexpr integral_value parse_integral(std::string_view s, std::int64_t max) noexcept {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  std::size_t begin = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  const std::string_view whole = s.substr(begin, i - begin);
  std::string_view fraction;
  if (i < s.size() && s[i] == '.') {
    begin = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    fraction = s.substr(begin, i - begin);
  }
  if (whole.empty() && fraction.empty()) return {};
  std::int64_t exponent = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    const bool exponent_negative = i < s.size() && s[i] == '-';
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    begin = i;
    for (; i < s.size() && is_digit(s[i]); ++i)
      if (exponent < 1'000'000'000) exponent = exponent * 10 + (s[i] - '0');  // saturates
    if (i == begin) return {};
    if (exponent_negative) exponent = -exponent;
  }
  if (i != s.size()) return {};
  // The digits whole ++ fraction, with the decimal point after the first `point` of them.
  const auto total = static_cast<std::int64_t>(whole.size() + fraction.size());
  const std::int64_t point = static_cast<std::int64_t>(whole.size()) + exponent;
  const auto digit = [&](std::int64_t k) -> std::int64_t {
    if (k >= total) return 0;
    const auto u = static_cast<std::size_t>(k);
    return (u < whole.size() ? whole[u] : fraction[u - whole.size()]) - '0';
  };
  for (std::int64_t k = std::max<std::int64_t>(point, 0); k < total; ++k)
    if (digit(k) != 0) return {integral_kind::not_integral, 0};
  std::int64_t v = 0;
  for (std::int64_t k = 0; k < point; ++k) {
    if (k >= total && v == 0) break;  // zeros only: the value stays 0
    const std::int64_t d = digit(k);
    if (v > (max - d) / 10) return {integral_kind::out_of_range, 0};
    v = v * 10 + d;
  }
  return {integral_kind::integer, negative ? -v : v};
}

/// The rare forms of a size (a float such as `51.0`, a field that needs decoding) and every
/// error, off the hot path.
inline std::int64_t csv_size_slow(const csv_reader& reader, std::size_t column, const csv_field& f,
                                  std::int64_t max) {
  const std::string decoded = f.escaped ? f.value() : std::string();
  const std::string_view s = trim_blanks(f.escaped ? std::string_view(decoded) : f.text);
  const auto range = [max] { return meta_size_expectation(max); };
  if (s.empty()) reader.fail(column, "is empty (expected " + range() + ")");
  const integral_value v = parse_integral(s, max);
  switch (v.kind) {
    case integral_kind::integer:
      if (v.value >= 1 && v.value <= max) return v.value;
      reader.fail(column, "must be " + range() + ", got " + std::string(s));
    case integral_kind::out_of_range:
      reader.fail(column, "must be " + range() + ", got " + quote_for_message(s));
    case integral_kind::not_integral:
    case integral_kind::not_a_number:
      break;
  }
  reader.fail(column, quote_for_message(s) + " is not an integer (expected " + range() + ")");
}

/// A size column's value: an integer in [1, max] (see `parse_integral` for the forms).
inline std::int64_t csv_size(const csv_reader& reader, std::size_t column, const csv_field& f,
                             std::int64_t max) {
  if (!f.escaped) {
    const std::string_view s = trim_blanks(f.text);
    std::int64_t v = 0;
    const char* const end = s.data() + s.size();
    const auto [p, ec] = std::from_chars(s.data(), end, v);
    if (ec == std::errc{} && p == end && v >= 1 && v <= max && !s.empty()) return v;
  }
  return csv_size_slow(reader, column, f, max);
}

/// An fps value (`s` trimmed): empty, NaN (any case) or 0 = unknown (NaN); otherwise a finite
/// positive number.
inline double csv_fps_text(const csv_reader& reader, std::size_t column, std::string_view s) {
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  double v = 0.0;
  const char* const end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v, std::chars_format::general);
  if (p != end || (ec != std::errc{} && ec != std::errc::result_out_of_range))
    reader.fail(column, quote_for_message(s) + " is not a number (expected " +
                            std::string(meta_fps_expectation) + ")");
  const std::optional<double> rate = meta_fps_value(v);
  if (ec != std::errc{} || !rate)  // out of range (v untouched) is an error too
    reader.fail(column,
                "must be " + std::string(meta_fps_expectation) + ", got " + quote_for_message(s));
  return *rate;
}

/// An fps field: see `csv_fps_text`.
inline double csv_fps(const csv_reader& reader, std::size_t column, const csv_field& f) {
  if (!f.escaped) return csv_fps_text(reader, column, trim_blanks(f.text));
  const std::string decoded = f.value();
  return csv_fps_text(reader, column, trim_blanks(decoded));
}

/// True when the field holds nothing but blanks.
inline bool csv_blank(const csv_field& f) {
  if (!f.escaped) return trim_blanks(f.text).empty();
  return trim_blanks(f.value()).empty();
}

/// The data rows of a metadata CSV, read in as many pieces as the caller wants: the constructor
/// reads and checks the header, `read` appends rows.
class meta_csv_rows {
 public:
  explicit meta_csv_rows(csv_reader& reader) : reader_(reader) {
    if (!reader.next(fields_))
      throw error(reader.where() +
                  ": empty file: expected a header row naming num_frames, height, width and fps");
    constexpr std::string_view required[] = {"num_frames", "height", "width", "fps"};
    std::vector<std::string> names;
    names.reserve(fields_.size());
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      names.push_back(std::string(trim_blanks(fields_[i].value())));
      if (names.back() == "error" && error_column_ == npos) error_column_ = i;
      for (std::size_t r = 0; r < 4; ++r) {
        if (names.back() != required[r]) continue;
        if (column_of_[r] != npos)
          reader.fail("duplicate column \"" + std::string(required[r]) + "\" (fields " +
                      std::to_string(column_of_[r] + 1) + " and " + std::to_string(i + 1) + ")");
        column_of_[r] = i;
      }
    }
    std::string missing;
    for (std::size_t r = 0; r < 4; ++r)
      if (column_of_[r] == npos)
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
    num_columns_ = names.size();
  }

  /// Appends up to `max_rows` rows to `table` (and each row's file line to `lines` when
  /// given); returns how many, 0 at the end of the file.
  std::size_t read(meta_table& table, std::size_t max_rows, std::vector<std::uint64_t>* lines) {
    std::size_t n = 0;
    while (n < max_rows && reader_.next(fields_)) {
      if (fields_.size() != num_columns_)
        reader_.fail(std::to_string(fields_.size()) + (fields_.size() == 1 ? " field" : " fields") +
                     ", but the header has " + std::to_string(num_columns_) + " columns");
      sample_meta m{0, 0, 0, std::numeric_limits<double>::quiet_NaN()};  // unusable: invalid
      if (error_column_ == npos || csv_blank(fields_[error_column_])) {
        m.num_frames = csv_size(reader_, column_of_[0], fields_[column_of_[0]], max_meta_frames);
        m.height = csv_size(reader_, column_of_[1], fields_[column_of_[1]], max_meta_side);
        m.width = csv_size(reader_, column_of_[2], fields_[column_of_[2]], max_meta_side);
        m.fps = csv_fps(reader_, column_of_[3], fields_[column_of_[3]]);
      }
      table.push_back(m);
      if (lines) lines->push_back(reader_.line());
      ++n;
    }
    return n;
  }

 private:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
  csv_reader& reader_;
  std::vector<csv_field> fields_;
  std::size_t column_of_[4] = {npos, npos, npos, npos};
  std::size_t error_column_ = npos;
  std::size_t num_columns_ = 0;
};

/// Reads the metadata table from `reader`, and each row's file line into `lines` when given.
VBUCKET_COMPILED_INLINE meta_table read_meta_csv(csv_reader& reader,
                                                 std::vector<std::uint64_t>* lines);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE meta_table read_meta_csv(csv_reader& reader,
                                                 std::vector<std::uint64_t>* lines) {
  meta_csv_rows rows(reader);
  meta_table table;
  // Room for a little more than the estimate: pages never written cost no memory.
  const std::size_t estimate = reader.estimate_records();
  const std::size_t room = estimate + estimate / 8 + 16;
  table.reserve(room);
  if (lines) lines->reserve(room);
  rows.read(table, std::numeric_limits<std::size_t>::max(), lines);
  return table;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// The whole content of a file; throws `vbucket::error` naming it when it cannot be read.
VBUCKET_COMPILED_INLINE std::string read_whole_file(const std::string& path);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE std::string read_whole_file(const std::string& path) {
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
  const file_status status = probe_file(path, false);
  if (status.directory) {
    std::fclose(f);
    throw error(path + ": cannot read file (it is a directory)");
  }
  if (status.size_known && status.size < (std::uint64_t{1} << 40))
    chunk = static_cast<std::size_t>(status.size) + 1;
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
#endif  // VBUCKET_HEADER_DEFINITIONS

}  // namespace detail

/// Parses metadata CSV text. `where` (usually the file name) starts every error message.
VBUCKET_COMPILED_INLINE meta_table parse_meta_csv(std::string_view text, const std::string& where);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE meta_table parse_meta_csv(std::string_view text, const std::string& where) {
  detail::csv_reader reader(text, where);
  return detail::read_meta_csv(reader, nullptr);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// As `parse_meta_csv`, also returning the file line on which each row starts.
VBUCKET_COMPILED_INLINE meta_csv parse_meta_csv_with_lines(std::string_view text,
                                                           const std::string& where);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE meta_csv parse_meta_csv_with_lines(std::string_view text,
                                                           const std::string& where) {
  detail::csv_reader reader(text, where);
  meta_csv out;
  out.table = detail::read_meta_csv(reader, &out.lines);
  return out;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// Reads and parses a metadata CSV file, streaming it: the file's text is never held whole.
VBUCKET_COMPILED_INLINE meta_table load_meta_csv(const std::string& path);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE meta_table load_meta_csv(const std::string& path) {
  detail::csv_reader reader(detail::csv_file{path});
  return detail::read_meta_csv(reader, nullptr);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// As `load_meta_csv`, also returning the file line on which each row starts.
VBUCKET_COMPILED_INLINE meta_csv load_meta_csv_with_lines(const std::string& path);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE meta_csv load_meta_csv_with_lines(const std::string& path) {
  detail::csv_reader reader(detail::csv_file{path});
  meta_csv out;
  out.table = detail::read_meta_csv(reader, &out.lines);
  return out;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

namespace detail {

/// What a file looked like: its size and modification time (regular files), and, once it has
/// been read whole, its byte count and `stream_hash64`.
struct file_identity {
  bool regular = false;
  std::uint64_t size = 0;
  std::int64_t mtime = 0;  // ticks of std::filesystem's file clock
  bool read = false;       // bytes and hash are known
  std::uint64_t bytes = 0;
  std::uint64_t hash = 0;
};

/// A regular file's size and modification time (nothing recorded for a pipe or a device).
VBUCKET_COMPILED_INLINE file_identity stat_identity(const std::string& path);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE file_identity stat_identity(const std::string& path) {
  file_identity id;
  const file_status status = probe_file(path, true);
  if (!status.regular || !status.size_known || !status.mtime_known) return id;
  id.regular = true;
  id.size = status.size;
  id.mtime = status.mtime;
  return id;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// What a `streamed_meta_csv` saw the first time, shared by its copies (a sampler keeps one),
/// compared with every later read.
class stream_record {
 public:
  /// Throws when `now` (the file before a read) has another size than the one first seen: the
  /// rows would differ, so there is no point reading them.
  void check_before(const std::string& path, const file_identity& now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!seen_ || !first_.regular || !now.regular || now.size == first_.size) return;
    fail(path, "its size is " + std::to_string(now.size) + " bytes, it was " +
                   std::to_string(first_.size) + " bytes when this source first opened it" +
                   (now.size > first_.size ? " (rows appended?)" : " (truncated?)"));
  }

  /// After a whole read: records `after` (the file's identity and the bytes read) the first time,
  /// and compares it with the first read later. `before` is the file's identity when the read
  /// started (a file that changes during a read is refused too).
  void check_after(const std::string& path, const file_identity& before, file_identity after) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (before.regular && after.regular &&
        (before.size != after.size || before.mtime != after.mtime || after.bytes != after.size))
      fail(path, "it changed while it was being read (size " + std::to_string(before.size) +
                     " -> " + std::to_string(after.size) + " bytes, " +
                     std::to_string(after.bytes) + " read)");
    if (!seen_ || !first_.read) {
      if (seen_ && first_.regular && after.regular &&
          (after.size != first_.size || after.mtime != first_.mtime))
        fail(path,
             "its size or modification time changed between the header check and the "
             "first read");
      first_ = after;
      seen_ = true;
      return;
    }
    std::string what;
    if (after.bytes != first_.bytes)
      what =
          "size " + std::to_string(first_.bytes) + " -> " + std::to_string(after.bytes) + " bytes";
    else if (after.hash != first_.hash)
      what = "same size, different content";
    if (!what.empty()) {
      if (first_.regular && after.regular && after.mtime != first_.mtime)
        what += ", modification time changed";
      fail(path, "its content changed since it was first read (" + what + ")");
    }
    first_.mtime = after.mtime;  // touched, same bytes: the same samples
  }

  /// Records the file's identity when only its header was checked (`streamed_meta_csv::check`).
  void record_header_check(const file_identity& now) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (seen_) return;
    first_ = now;
    seen_ = true;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw error(path + ": the metadata file changed since this streamed source first read it: " +
                what + ". Every epoch of a sampler must read the same samples; to train on a " +
                "grown or edited dataset, give it as an explicit new version (a new file, or a " +
                "new streamed source and sampler) taking effect at an epoch boundary");
  }

  std::mutex mutex_;
  bool seen_ = false;
  file_identity first_;
};

}  // namespace detail

/// A metadata CSV file read in chunks each time its samples are needed, so that the whole
/// table never exists: a `batch_sampler` over it streams the file when it plans an epoch and
/// keeps only the bucket ids (2 bytes a sample, `compact_bucket_id`, for configs of up to
/// 32767 buckets; else 4) instead of the table (16 bytes a sample). The
/// batches are those of a sampler over `load_meta_csv(path)`.
/// The file must not change while a sampler uses it, and this is checked: the first read
/// records the file's size, modification time and a 64-bit hash of its bytes (computed while it
/// is parsed, `detail::stream_hash64`), and a later read refuses a file of another size before
/// reading it, and one of other bytes once read, with a `vbucket::error` naming the file and
/// what changed. A dataset that grows is given as an explicit new version (a new source and
/// sampler) taking effect at an epoch boundary. Copies share the record (a sampler keeps a copy);
/// make a new `streamed_meta_csv` for another file or version.
///
///     vbucket::batch_sampler sampler(vbucket::streamed_meta_csv{"meta.csv"}, config, rule, o);
struct streamed_meta_csv {
  std::string path;
  /// Rows per chunk (at least 1).
  std::size_t chunk_rows = std::size_t{1} << 20;
  /// What the first read saw (shared by copies).
  std::shared_ptr<detail::stream_record> record = std::make_shared<detail::stream_record>();

  /// Opens the file and reads its header: throws what `load_meta_csv` throws for a file that
  /// cannot be read or a bad header, before any epoch needs the rows (their errors show then).
  /// Records the file's size and modification time, which the first whole read must find.
  void check() const {
    const detail::file_identity now = detail::stat_identity(path);
    detail::csv_reader reader(detail::csv_file{path});
    const detail::meta_csv_rows rows(reader);
    if (record) record->record_header_check(now);
  }

  /// Reads the file from its start and calls `f(chunk)` for each chunk of rows in order; the
  /// chunk's table is valid during the call only. Returns the number of rows. Throws what
  /// `load_meta_csv` throws, after the chunks before the error were handed over, and
  /// `vbucket::error` when the file is not the one the first read saw (see the struct).
  template <class F>
  std::uint64_t for_each_chunk(F&& f) const {
    const detail::file_identity before = detail::stat_identity(path);
    if (record) record->check_before(path, before);
    detail::stream_hash64 hash;
    detail::csv_reader reader(detail::csv_file{path});
    if (record) reader.hash_into(&hash);
    detail::meta_csv_rows rows(reader);
    const std::size_t per_chunk = std::max<std::size_t>(chunk_rows, 1);
    meta_table table;
    std::uint64_t first = 0;
    for (;;) {
      table.clear();
      const std::size_t n = rows.read(table, per_chunk, nullptr);
      if (n == 0) break;
      f(meta_chunk{table, first, static_cast<std::uint64_t>(reader.estimate_records())});
      first += n;
    }
    if (record) {
      detail::file_identity after = detail::stat_identity(path);
      after.read = true;
      after.bytes = hash.bytes();
      after.hash = hash.value();
      record->check_after(path, before, after);
    }
    return first;
  }
};

}  // namespace vbucket
