// vbucket::run: the ledger format's writer and parsers (text, version 1; binary, version 2),
// compiled once (include/vbucket/run/ledger.hpp declares them).
#include "vbucket/run/ledger.hpp"

#include <algorithm>     // std::min, std::sort
#include <charconv>      // std::to_chars, std::from_chars
#include <cstdint>       // std::uint64_t
#include <cstdio>        // std::FILE, std::fopen, std::fwrite, std::fread, std::fseek
#include <cstring>       // std::memcpy, std::memcmp, std::memchr, std::memmove
#include <filesystem>    // std::filesystem::file_size, resize_file, remove
#include <memory>        // std::unique_ptr
#include <optional>      // std::optional
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <tuple>         // std::get, std::tuple_size_v
#include <type_traits>   // std::is_same_v, std::integral_constant
#include <utility>       // std::index_sequence
#include <vector>        // std::vector

#include "ledger_binary.hpp"  // ledger_layout, ledger_in, ledger_tag_of, append_ledger_record
#include "vbucket/base/error.hpp"

namespace vbucket {

namespace detail {

template <class T>
inline constexpr bool ledger_is_optional = false;
template <class T>
inline constexpr bool ledger_is_optional<std::optional<T>> = true;

/// Whether a field of form `t` is in a text line of `tag`.
constexpr bool ledger_in_text(ledger_text t, char tag) noexcept {
  return t == ledger_text::d_only ? tag == 'D' : t == ledger_text::x_only ? tag == 'X' : true;
}

template <class T>
void ledger_put_number(std::string& out, T v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // a double: its shortest exact form
  out.append(buf, r.ptr);
}
/// Free text, percent-encoded so it holds no separator of the format.
inline void ledger_put_text(std::string& out, std::string_view s) {
  constexpr char digits[] = "0123456789ABCDEF";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '%' || c == ',' || c == ';' || c == ':' || c == '=' ||
        c == '>') {
      out += '%';
      out += digits[u >> 4];
      out += digits[u & 0xf];
    } else {
      out += c;
    }
  }
}

/// A value's text form (after `key=`).
template <class T>
void ledger_put_text_value(std::string& out, const T& v, ledger_text form) {
  if constexpr (std::is_same_v<T, std::string>) {
    ledger_put_text(out, v);
  } else if constexpr (std::is_same_v<T, ledger_draw>) {
    out += v == ledger_draw::all ? "all" : "listed";
  } else if constexpr (std::is_same_v<T, bool>) {
    out += v ? '1' : '0';
  } else if constexpr (std::is_same_v<T, std::vector<std::uint64_t>>) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i != 0) out += ',';
      ledger_put_number(out, v[i]);
    }
  } else if constexpr (std::is_same_v<T, std::vector<ledger_substitution>>) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i != 0) out += ';';
      ledger_put_number(out, v[i].slot);
      out += ':';
      ledger_put_number(out, v[i].failed);
      out += '>';
      ledger_put_number(out, v[i].replacement);
      out += ':';
      ledger_put_text(out, v[i].why);
    }
  } else if (std::is_same_v<T, std::uint64_t> && form == ledger_text::hex) {
    constexpr char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; --i) out += digits[(static_cast<std::uint64_t>(v) >> (4 * i)) & 0xf];
  } else {
    ledger_put_number(out, v);
  }
}

/// A record's text line (with its newline), field by field as its layout says.
template <class Record>
void ledger_put_line(std::string& out, const Record& r) {
  const char tag = ledger_tag_of(r);
  out += tag;
  const auto put = [&](const auto& f) {
    const auto& v = r.*(f.member);
    using T = std::remove_cvref_t<decltype(v)>;
    if (!ledger_in_text(f.text, tag)) return;
    if constexpr (ledger_is_optional<T>) {
      if (!v) return;
    } else if (f.text == ledger_text::nonzero && v == T{}) {
      return;
    }
    out += ' ';
    out += f.key;
    out += '=';
    if constexpr (ledger_is_optional<T>)
      ledger_put_text_value(out, *v, f.text);
    else
      ledger_put_text_value(out, v, f.text);
  };
  std::apply([&](const auto&... f) { (put(f), ...); }, ledger_layout<Record>::fields);
  out += '\n';
}

}  // namespace detail

template <ledger_record R>
void append_ledger_line(std::string& out, const R& r) {
  detail::ledger_put_line(out, r);
}

void ledger_writer::write_line(std::string_view line) {
  if (sink_) {
    sink_(line);
    return;
  }
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size())
    throw error("ledger: cannot write to \"" + path_ + "\"");
}

void ledger_writer::discard() {
  if (sink_ || !file_) return;
  file_.reset();
  std::error_code ec;
  if (start_ == 0) {
    std::filesystem::remove(path_, ec);
  } else {
    std::filesystem::resize_file(path_, start_, ec);
  }
  if (ec)
    throw error("ledger: cannot take back the lines written to \"" + path_ + "\": " + ec.message());
}

std::optional<ledger_format> ledger_writer::existing_format(const std::string& path) {
  std::unique_ptr<std::FILE, closer> f(std::fopen(path.c_str(), "rb"));
  if (!f) return std::nullopt;
  std::string head(ledger_magic.size() + 1, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  if (head == std::string(ledger_magic) + "\n") return ledger_format::text;
  if (head == std::string(ledger_magic_v2) + "\n") return ledger_format::binary;
  return std::nullopt;
}

void ledger_writer::write_chunks(ledger_ids& c, std::span<const std::uint64_t> ids) {
  const std::uint64_t first = c.at;
  for (std::size_t i = 0; i < ids.size(); i += ledger_chunk_ids) {
    const std::size_t n = std::min(ledger_chunk_ids, ids.size() - i);
    c.ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(i),
                 ids.begin() + static_cast<std::ptrdiff_t>(i + n));
    std::sort(c.ids.begin(), c.ids.end());  // a multiset: sorted, it codes in fewer bytes
    c.at = c.tag == 'D' ? first + i : first + i / ledger_chunk_ids;
    write(c);
  }
}

std::uint64_t ledger_writer::drop_torn_tail(const std::string& path, ledger_format format) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return 0;
  const std::string want =
      std::string(format == ledger_format::binary ? ledger_magic_v2 : ledger_magic) + "\n";
  std::string head(want.size(), '\0');
  {
    std::unique_ptr<std::FILE, closer> f(std::fopen(path.c_str(), "rb"));
    if (!f) throw error("ledger: cannot open \"" + path + "\" for appending");
    head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  }
  const auto refuse = [&](const std::string& why) {
    throw error("ledger: \"" + path + "\" " + why + ": not appending to it");
  };
  if (head.size() < want.size()) {  // a magic line cut short: start again
    if (want.substr(0, head.size()) != head &&
        std::string(ledger_magic).substr(0, head.size()) != head)
      refuse("is not a vbucket ledger (it does not start with \"" +
             want.substr(0, want.size() - 1) + "\")");
    std::filesystem::resize_file(path, 0, ec);
    if (ec) throw error("ledger: cannot repair \"" + path + "\": " + ec.message());
    return 0;
  }
  if (head != want) {
    if (head.substr(0, 16) == "#vbucket-ledger ")
      refuse("is a ledger of another version (\"" + head.substr(0, head.size() - 1) +
             "\"; this writer writes \"" + want.substr(0, want.size() - 1) + "\")");
    refuse("is not a vbucket ledger (it does not start with \"" + want.substr(0, want.size() - 1) +
           "\")");
  }
  // The end of the last whole record.
  ledger_reader r(path);
  ledger_line l;
  std::uint64_t end = r.tell();
  while (r.next(l)) {
    if (l.truncated) break;
    end = r.tell();
  }
  if (end == size) return size;
  std::filesystem::resize_file(path, end, ec);
  if (ec)
    throw error("ledger: cannot cut the torn last record of \"" + path + "\": " + ec.message());
  return end;
}

namespace detail {

/// The number of leading ASCII digits of 8 bytes read little-endian (byte 0 first), 0 to 8.
inline std::uint64_t ledger_leading_digits(std::uint64_t chunk) noexcept {
  const std::uint64_t t = chunk ^ 0x3030303030303030ULL;  // a digit byte becomes 0..9
  // Bit 7 of a byte is set when the byte is not 0..9 (a carry only reaches later bytes).
  const std::uint64_t not_digit = ((t + 0x7676767676767676ULL) | t) & 0x8080808080808080ULL;
  return not_digit == 0 ? 8 : static_cast<std::uint64_t>(std::countr_zero(not_digit)) / 8;
}

/// The value of the first `n` (1 to 8) ASCII digits of 8 bytes read little-endian: shifted so
/// they end at byte 7 (zero bytes before them read as leading zeros), then combined in pairs,
/// quads and eights by three multiplications.
inline std::uint64_t ledger_digits_value(std::uint64_t chunk, std::uint64_t n) noexcept {
  std::uint64_t v = (chunk << (8 * (8 - n))) & 0x0f0f0f0f0f0f0f0fULL;
  v = (v * 2561) >> 8;  // 10 · high + low, per pair of bytes
  v = ((v & 0x00ff00ff00ff00ffULL) * 6553601) >> 16;
  return ((v & 0x0000ffff0000ffffULL) * 42949672960001ULL) >> 32;
}

/// Walks the `key=value` fields of a line after its tag; `where` names the line in errors.
class ledger_fields {
 public:
  ledger_fields(std::string_view text, ledger_where where) : rest_(text), where_(where) {
    if (rest_.size() < 2 || rest_[1] != ' ') fail("expected a tag and fields");
    rest_.remove_prefix(2);
  }
  bool next(std::string_view& key, std::string_view& value) {
    if (rest_.empty()) return false;
    std::size_t end = rest_.find(' ');
    if (end == std::string_view::npos) end = rest_.size();
    const std::string_view field = rest_.substr(0, end);
    rest_.remove_prefix(end == rest_.size() ? end : end + 1);
    const std::size_t eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0)
      fail("field \"" + std::string(field.substr(0, 40)) + "\" is not key=value");
    key = field.substr(0, eq);
    value = field.substr(eq + 1);
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw error(where_.text() + ": " + what);
  }
  template <class T>
  T number(std::string_view key, std::string_view v) const {
    T out{};
    const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
    if (r.ec != std::errc{} || r.ptr != v.data() + v.size() || v.empty())
      fail("field " + std::string(key) + "=\"" + std::string(v.substr(0, 40)) +
           "\" is not a valid number");
    return out;
  }
  std::uint64_t hex(std::string_view key, std::string_view v) const {
    std::uint64_t out = 0;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), out, 16);
    if (r.ec != std::errc{} || r.ptr != v.data() + v.size() || v.empty() || v.size() > 16)
      fail("field " + std::string(key) + "=\"" + std::string(v.substr(0, 40)) +
           "\" is not 1 to 16 hex digits");
    return out;
  }
  std::string text(std::string_view key, std::string_view v) const {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] != '%') {
        out += v[i];
        continue;
      }
      unsigned value = 0;
      if (i + 2 >= v.size()) fail("field " + std::string(key) + ": a % escape is cut short");
      const auto r = std::from_chars(v.data() + i + 1, v.data() + i + 3, value, 16);
      if (r.ec != std::errc{} || r.ptr != v.data() + i + 3)
        fail("field " + std::string(key) + ": bad % escape");
      out += static_cast<char>(value);
      i += 2;
    }
    return out;
  }
  /// Comma-separated decimal ids into `out` (cleared first).
  void ids(std::string_view v, std::vector<std::uint64_t>& out) const {
    out.clear();
    if (v.empty()) return;
    const char* p = v.data();
    const char* const end = p + v.size();
    for (;;) {
      std::uint64_t x = 0;
      const char* const start = p;
      if (std::endian::native == std::endian::little && end - p >= 8) {
        // Up to 8 digits at once (no chain of a multiply-add per digit).
        std::uint64_t chunk = 0;
        std::memcpy(&chunk, p, 8);
        const std::uint64_t digits8 = ledger_leading_digits(chunk);
        if (digits8 != 0) {
          x = ledger_digits_value(chunk, digits8);
          p += digits8;
        }
      }
      while (p != end && static_cast<unsigned>(*p - '0') < 10u) {
        x = x * 10 + static_cast<unsigned>(*p - '0');
        ++p;
      }
      const auto digits = p - start;
      // 20 digits are near 2^64: exact, or too long.
      if (digits == 0 || digits > 20 ||
          (digits == 20 && std::from_chars(start, p, x).ec != std::errc{}))
        fail("field ids: id " + std::to_string(out.size() + 1) + " is " +
             (digits == 0 ? "not a number" : "too long") + " (near \"" +
             std::string(start,
                         static_cast<std::size_t>(std::min<std::ptrdiff_t>(end - start, 20))) +
             "\")");
      out.push_back(x);
      if (p == end) return;
      if (*p != ',')
        fail("field ids: unexpected character '" + std::string(1, *p) + "' after id " +
             std::to_string(out.size()));
      ++p;
    }
  }

 private:
  std::string_view rest_;
  ledger_where where_;
};

/// What a batch record must hold whatever its format: pads within its ids, each substitution's
/// slot holding the sample it replaced.
inline void ledger_check_batch(const ledger_batch& b, const ledger_where& where) {
  if (b.pads > b.ids.size())
    throw error(where.text() + ": field pad=" + std::to_string(b.pads) +
                " is more than the batch's " + std::to_string(b.ids.size()) + " ids");
  for (const ledger_substitution& s : b.substitutions)
    if (s.slot >= b.ids.size() || b.ids[s.slot] != s.failed)
      throw error(where.text() + ": field sub: slot " + std::to_string(s.slot) +
                  " does not hold sample " + std::to_string(s.failed));
}

/// Reads a value's text form (`ledger_put_text_value`) into `out`.
template <class T>
void ledger_get_text_value(const ledger_fields& f, std::string_view k, std::string_view v,
                           ledger_text form, T& out) {
  if constexpr (ledger_is_optional<T>) {
    typename T::value_type x{};
    ledger_get_text_value(f, k, v, form, x);
    out = std::move(x);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = f.text(k, v);
  } else if constexpr (std::is_same_v<T, ledger_draw>) {
    if (v == "all")
      out = ledger_draw::all;
    else if (v == "listed")
      out = ledger_draw::listed;
    else
      f.fail("field " + std::string(k) + "=\"" + std::string(v) + "\" is not all or listed");
  } else if constexpr (std::is_same_v<T, bool>) {
    out = f.number<std::uint32_t>(k, v) != 0;
  } else if constexpr (std::is_same_v<T, std::vector<std::uint64_t>>) {
    f.ids(v, out);
  } else if constexpr (std::is_same_v<T, std::vector<ledger_substitution>>) {
    out.clear();
    while (!v.empty()) {
      std::size_t end = v.find(';');
      if (end == std::string_view::npos) end = v.size();
      const std::string_view one = v.substr(0, end);
      v.remove_prefix(end == v.size() ? end : end + 1);
      const std::size_t c1 = one.find(':'), gt = one.find('>'),
                        c2 = gt == std::string_view::npos ? gt : one.find(':', gt);
      if (c1 == std::string_view::npos || gt == std::string_view::npos || gt < c1 ||
          c2 == std::string_view::npos)
        f.fail("field sub: \"" + std::string(one.substr(0, 40)) +
               "\" is not slot:failed>replacement:why");
      ledger_substitution s;
      s.slot = f.number<std::uint32_t>("sub slot", one.substr(0, c1));
      s.failed = f.number<std::uint64_t>("sub failed", one.substr(c1 + 1, gt - c1 - 1));
      s.replacement = f.number<std::uint64_t>("sub replacement", one.substr(gt + 1, c2 - gt - 1));
      s.why = f.text("sub why", one.substr(c2 + 1));
      out.push_back(std::move(s));
    }
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    out = form == ledger_text::hex ? f.hex(k, v) : f.number<T>(k, v);
  } else {
    out = f.number<T>(k, v);
  }
}

/// Parses a text line into `out`, field by field as its layout says: every field is reset
/// first (vectors keep their capacity), keys it does not know are skipped, and the first
/// required field missing is named.
template <class Record>
void ledger_get_line(std::string_view text, ledger_where where, Record& out) {
  ledger_fields f(text, where);
  const char tag = text[0];
  static const Record defaults{};
  constexpr auto fields = ledger_layout<Record>::fields;
  const auto reset = [&](const auto& fd) {
    auto& v = out.*(fd.member);
    if constexpr (requires { v.clear(); })
      v.clear();
    else
      v = defaults.*(fd.member);
  };
  std::apply([&](const auto&... fd) { (reset(fd), ...); }, fields);
  std::uint32_t seen = 0;
  std::string_view k, v;
  // Field I's key as a constant, so that each comparison compiles to a few instructions.
  const auto match = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    constexpr auto fd = std::get<I>(ledger_layout<Record>::fields);
    constexpr std::size_t n = fd.key.size();
    if (k.size() != n || std::memcmp(k.data(), fd.key.data(), n) != 0 ||
        !ledger_in_text(fd.text, tag))
      return false;
    ledger_get_text_value(f, k, v, fd.text, out.*(fd.member));
    seen |= std::uint32_t{1} << I;
    return true;
  };
  const auto match_any = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return (match(std::integral_constant<std::size_t, I>{}) || ...);
  };
  while (f.next(k, v)) match_any(std::make_index_sequence<std::tuple_size_v<decltype(fields)>>{});
  std::uint32_t bit = 1;
  const auto require = [&](const auto& fd) {
    using T = std::remove_cvref_t<decltype(out.*(fd.member))>;
    if (!ledger_is_optional<T> && fd.text != ledger_text::nonzero && ledger_in_text(fd.text, tag) &&
        (seen & bit) == 0)
      f.fail("missing field " + std::string(fd.key));
    bit <<= 1;
  };
  std::apply([&](const auto&... fd) { (require(fd), ...); }, fields);
  if constexpr (std::is_same_v<Record, ledger_ids>) out.tag = tag;
  if constexpr (std::is_same_v<Record, ledger_batch>) ledger_check_batch(out, where);
}

}  // namespace detail

// --- the reader ---------------------------------------------------------------------------

ledger_reader::ledger_reader(std::string path, std::size_t block)
    : path_(std::move(path)), block_(block < 64 ? 64 : block) {
  file_.reset(std::fopen(path_.c_str(), "rb"));
  if (!file_) throw error("ledger: cannot open \"" + path_ + "\"");
  std::setvbuf(file_.get(), nullptr, _IONBF, 0);  // fread straight into buf_: no second copy
  buf_.resize(block_);
  ledger_line first;
  if (!next_raw(first)) return;  // an empty file: no lines
  if (first.text.substr(0, 16) != "#vbucket-ledger ")
    throw error(path_ + ":1: not a vbucket ledger (the first line must be \"" +
                std::string(ledger_magic) + "\")");
  if (first.text == ledger_magic_v2) {
    binary_ = true;
  } else if (first.text != ledger_magic) {
    throw error(path_ + ":1: ledger version \"" + std::string(first.text.substr(16)) +
                "\" is not supported (this build reads versions 1 and 2)");
  }
}

bool ledger_reader::next(ledger_line& line) {
  if (binary_) return next_record(line);
  for (;;) {
    if (!next_raw(line)) return false;
    if (line.tag != '#') return true;
  }
}

void ledger_reader::seek(std::uint64_t offset, std::uint64_t number) {
  if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0)
    throw error("ledger: cannot seek in \"" + path_ + "\"");
  consumed_ = offset;
  begin_ = end_ = 0;
  eof_ = false;
  dead_ = false;
  number_ = number;
}

bool ledger_reader::next_raw(ledger_line& line) {
  for (;;) {
    const char* nl =
        begin_ < end_
            ? static_cast<const char*>(std::memchr(buf_.data() + begin_, '\n', end_ - begin_))
            : nullptr;
    if (nl != nullptr) {
      const auto len = static_cast<std::size_t>(nl - (buf_.data() + begin_));
      emit(line, first_byte, begin_, len, false, false);
      begin_ += len + 1;
      return true;
    }
    if (eof_) return last(line, false);
    fill();
  }
}

bool ledger_reader::next_record(ledger_line& line) {
  for (;;) {
    if (dead_) return false;
    const std::size_t avail = end_ - begin_;
    if (avail >= 2) {
      const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + begin_);
      std::uint64_t n = 0;
      std::size_t h = 1;
      bool complete = false;
      for (unsigned shift = 0; h < avail && h <= 10; shift += 7) {
        const unsigned char byte = p[h++];
        n |= shift < 64 ? static_cast<std::uint64_t>(byte & 0x7f) << shift : 0;
        if ((byte & 0x80) == 0) {
          complete = true;
          break;
        }
      }
      if ((complete && n > ledger_max_record) || (!complete && h > 10)) {
        emit(line, '?', begin_, 0, false, true);
        dead_ = true;
        return true;
      }
      if (complete && avail - h >= n) {
        emit(line, p[0], begin_ + h, static_cast<std::size_t>(n), false, true);
        begin_ += h + static_cast<std::size_t>(n);
        return true;
      }
    }
    if (eof_) return last(line, true);
    fill();
  }
}

void ledger_reader::emit(ledger_line& line, int tag, std::size_t at, std::size_t len,
                         bool truncated, bool binary) noexcept {
  line.text = std::string_view(buf_.data() + at, len);
  line.tag = tag != first_byte ? static_cast<char>(tag) : len != 0 ? line.text[0] : '\0';
  line.number = ++number_;
  line.truncated = truncated;
  line.binary = binary;
}

bool ledger_reader::last(ledger_line& line, bool binary) noexcept {
  if (begin_ == end_) return false;
  emit(line, first_byte, begin_, end_ - begin_, true, binary);
  begin_ = end_;
  return true;
}

void ledger_reader::fill() {
  if (begin_ != 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    consumed_ += begin_;
    end_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() - end_ < block_ / 2) buf_.resize(buf_.size() * 2);
  const std::size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_.get());
  if (got == 0) {
    if (std::ferror(file_.get())) throw error("ledger: cannot read \"" + path_ + "\"");
    eof_ = true;
  }
  end_ += got;
}

// --- parsing ------------------------------------------------------------------------------

template <ledger_record R>
void parse_ledger_line(std::string_view text, ledger_where where, R& out) {
  detail::ledger_get_line(text, where, out);
}

template <ledger_record R>
void parse_ledger_record(const ledger_line& line, ledger_where where, R& out) {
  if (!line.binary) {
    parse_ledger_line(line.text, where, out);
    return;
  }
  detail::ledger_in in(line.text, where);
  in.fields(out);
  in.end();
  if constexpr (std::is_same_v<R, ledger_ids>) out.tag = line.tag;
  if constexpr (std::is_same_v<R, ledger_batch>) detail::ledger_check_batch(out, where);
}

// The format's functions, compiled for its four records.
#define VBUCKET_LEDGER_RECORD(R)                                       \
  template void append_ledger_line(std::string&, const R&);            \
  template void append_ledger_record(std::string&, const R&);          \
  template void parse_ledger_line(std::string_view, ledger_where, R&); \
  template void parse_ledger_record(const ledger_line&, ledger_where, R&);
VBUCKET_LEDGER_RECORD(ledger_epoch)
VBUCKET_LEDGER_RECORD(ledger_source)
VBUCKET_LEDGER_RECORD(ledger_ids)
VBUCKET_LEDGER_RECORD(ledger_batch)
#undef VBUCKET_LEDGER_RECORD

std::string ledger_text_of(const ledger_line& line, ledger_where where) {
  if (!line.binary) return std::string(line.text);
  std::string out;
  const auto as = [&](auto record) {
    parse_ledger_record(line, where, record);
    append_ledger_line(out, record);
  };
  switch (line.tag) {
    case 'E':
      as(ledger_epoch{});
      break;
    case 'S':
      as(ledger_source{});
      break;
    case 'D':
    case 'X':
      as(ledger_ids{});
      break;
    case 'B':
      as(ledger_batch{});
      break;
    default:
      throw error(where.text() + ": unknown record tag byte " +
                  std::to_string(static_cast<unsigned char>(line.tag)));
  }
  out.pop_back();
  return out;
}

}  // namespace vbucket
