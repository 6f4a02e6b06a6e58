// vbucket::run: the ledger format's writer and parsers (text, version 1; binary, version 2),
// compiled once (include/vbucket/run/ledger.hpp declares them).
#include "vbucket/run/ledger.hpp"

#include <algorithm>     // std::min, std::sort
#include <charconv>      // std::to_chars, std::from_chars
#include <cstdint>       // std::uint64_t
#include <cstdio>        // std::FILE, std::fopen, std::fwrite, std::fread
#include <cstring>       // std::memcpy
#include <filesystem>    // std::filesystem::file_size, resize_file, remove
#include <memory>        // std::unique_ptr
#include <optional>      // std::optional
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <type_traits>   // std::is_same_v
#include <vector>        // std::vector

#include "ledger_binary.hpp"  // ledger_layout, ledger_in, append_ledger_record_of
#include "vbucket/base/error.hpp"

namespace vbucket {

namespace detail {

inline void ledger_put(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
inline void ledger_put(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
inline void ledger_put_double(std::string& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form
  out.append(buf, r.ptr);
}
inline void ledger_put_hex(std::string& out, std::uint64_t v) {
  constexpr char digits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) out += digits[(v >> (4 * i)) & 0xf];
}
inline void ledger_field(std::string& out, std::string_view key, std::uint64_t v) {
  out += ' ';
  out += key;
  out += '=';
  ledger_put(out, v);
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
inline void ledger_put_ids(std::string& out, std::span<const std::uint64_t> ids) {
  out += " ids=";
  char buf[24];
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i != 0) out += ',';
    const auto r = std::to_chars(buf, buf + sizeof buf, ids[i]);
    out.append(buf, r.ptr);
  }
}

}  // namespace detail

void append_ledger_line(std::string& out, const ledger_epoch& e) {
  out += 'E';
  detail::ledger_field(out, "e", e.epoch);
  detail::ledger_field(out, "st", e.stage);
  detail::ledger_field(out, "n", e.samples);
  detail::ledger_field(out, "src", e.sources);
  if (e.seed) detail::ledger_field(out, "seed", *e.seed);
  if (e.fingerprint) {
    out += " fp=";
    detail::ledger_put_hex(out, *e.fingerprint);
  }
  if (e.pads) detail::ledger_field(out, "pads", *e.pads);
  out += '\n';
}

void append_ledger_line(std::string& out, const ledger_source& s) {
  out += 'S';
  detail::ledger_field(out, "e", s.epoch);
  detail::ledger_field(out, "src", s.id);
  out += " name=";
  detail::ledger_put_text(out, s.name);
  detail::ledger_field(out, "first", s.first);
  detail::ledger_field(out, "rows", s.rows);
  detail::ledger_field(out, "drawn", s.drawn);
  out += s.draw == ledger_draw::all ? " draw=all" : " draw=listed";
  if (s.weight) {
    out += " weight=";
    detail::ledger_put_double(out, *s.weight);
  }
  if (s.count) detail::ledger_field(out, "count", *s.count);
  if (s.digest) {
    out += " digest=";
    detail::ledger_put_hex(out, *s.digest);
  }
  out += '\n';
}

void append_ledger_line(std::string& out, const ledger_ids& c) {
  out += c.tag == 'X' ? 'X' : 'D';
  detail::ledger_field(out, "e", c.epoch);
  if (c.tag == 'X') {
    out += " why=";
    detail::ledger_put_text(out, c.why);
  } else {
    detail::ledger_field(out, "src", c.source);
  }
  detail::ledger_field(out, "at", c.at);
  detail::ledger_put_ids(out, c.ids);
  out += '\n';
}

void append_ledger_line(std::string& out, const ledger_batch& b) {
  out += 'B';
  detail::ledger_field(out, "e", b.epoch);
  detail::ledger_field(out, "s", b.step);
  detail::ledger_field(out, "st", b.stage);
  detail::ledger_field(out, "r", b.rank);
  detail::ledger_field(out, "w", b.world);
  if (b.position) detail::ledger_field(out, "p", *b.position);
  if (b.bucket) {
    out += " b=";
    detail::ledger_put(out, *b.bucket);
  }
  if (b.pads != 0) detail::ledger_field(out, "pad", b.pads);
  if (b.repeat) out += " rep=1";
  detail::ledger_put_ids(out, b.ids);
  if (!b.substitutions.empty()) {
    out += " sub=";
    for (std::size_t i = 0; i < b.substitutions.size(); ++i) {
      const ledger_substitution& s = b.substitutions[i];
      if (i != 0) out += ';';
      detail::ledger_put(out, std::uint64_t{s.slot});
      out += ':';
      detail::ledger_put(out, s.failed);
      out += '>';
      detail::ledger_put(out, s.replacement);
      out += ':';
      detail::ledger_put_text(out, s.why);
    }
  }
  out += '\n';
}

void append_ledger_record(std::string& out, const ledger_epoch& r) {
  append_ledger_record_of(out, r);
}
void append_ledger_record(std::string& out, const ledger_source& r) {
  append_ledger_record_of(out, r);
}
void append_ledger_record(std::string& out, const ledger_ids& r) {
  append_ledger_record_of(out, r);
}
void append_ledger_record(std::string& out, const ledger_batch& r) {
  append_ledger_record_of(out, r);
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
  double real(std::string_view key, std::string_view v) const {
    double out = 0;
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
      if (digits == 20) {  // near 2^64: exact, or too long
        const auto r = std::from_chars(start, p, x);
        if (r.ec == std::errc{}) {
          out.push_back(x);
          if (p == end) return;
          if (*p != ',')
            fail("field ids: unexpected character '" + std::string(1, *p) + "' after id " +
                 std::to_string(out.size()));
          ++p;
          continue;
        }
      }
      if (digits == 0 || digits > 19)
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

/// The bit of a required field, for "missing field" errors.
inline void ledger_require(const ledger_fields& f, unsigned seen, unsigned need,
                           std::initializer_list<std::string_view> names) {
  unsigned bit = 1;
  for (const std::string_view n : names) {
    if ((need & bit) != 0 && (seen & bit) == 0) f.fail("missing field " + std::string(n));
    bit <<= 1;
  }
}

}  // namespace detail

void parse_ledger_line(std::string_view text, ledger_where where, ledger_epoch& out) {
  detail::ledger_fields f(text, where);
  out = ledger_epoch{};
  unsigned seen = 0;
  std::string_view k, v;
  while (f.next(k, v)) {
    if (k == "e")
      out.epoch = f.number<std::uint64_t>(k, v), seen |= 1;
    else if (k == "st")
      out.stage = f.number<std::uint32_t>(k, v), seen |= 2;
    else if (k == "n")
      out.samples = f.number<std::uint64_t>(k, v), seen |= 4;
    else if (k == "src")
      out.sources = f.number<std::uint32_t>(k, v), seen |= 8;
    else if (k == "seed")
      out.seed = f.number<std::uint64_t>(k, v);
    else if (k == "fp")
      out.fingerprint = f.hex(k, v);
    else if (k == "pads")
      out.pads = f.number<std::uint64_t>(k, v);
  }
  detail::ledger_require(f, seen, 15, {"e", "st", "n", "src"});
}

void parse_ledger_line(std::string_view text, ledger_where where, ledger_source& out) {
  detail::ledger_fields f(text, where);
  out = ledger_source{};
  unsigned seen = 0;
  std::string_view k, v;
  while (f.next(k, v)) {
    if (k == "e")
      out.epoch = f.number<std::uint64_t>(k, v), seen |= 1;
    else if (k == "src")
      out.id = f.number<std::uint32_t>(k, v), seen |= 2;
    else if (k == "name")
      out.name = f.text(k, v), seen |= 4;
    else if (k == "first")
      out.first = f.number<std::uint64_t>(k, v), seen |= 8;
    else if (k == "rows")
      out.rows = f.number<std::uint64_t>(k, v), seen |= 16;
    else if (k == "drawn")
      out.drawn = f.number<std::uint64_t>(k, v), seen |= 32;
    else if (k == "draw") {
      if (v == "all")
        out.draw = ledger_draw::all;
      else if (v == "listed")
        out.draw = ledger_draw::listed;
      else
        f.fail("field draw=\"" + std::string(v) + "\" is not all or listed");
      seen |= 64;
    } else if (k == "weight")
      out.weight = f.real(k, v);
    else if (k == "count")
      out.count = f.number<std::uint64_t>(k, v);
    else if (k == "digest")
      out.digest = f.hex(k, v);
  }
  detail::ledger_require(f, seen, 127, {"e", "src", "name", "first", "rows", "drawn", "draw"});
}

void parse_ledger_line(std::string_view text, ledger_where where, ledger_ids& out) {
  detail::ledger_fields f(text, where);
  out.tag = text[0];
  out.epoch = out.at = 0;
  out.source = 0;
  out.why.clear();
  out.ids.clear();
  unsigned seen = 0;
  std::string_view k, v;
  while (f.next(k, v)) {
    if (k == "e")
      out.epoch = f.number<std::uint64_t>(k, v), seen |= 1;
    else if (k == "src")
      out.source = f.number<std::uint32_t>(k, v), seen |= 2;
    else if (k == "why")
      out.why = f.text(k, v), seen |= 2;
    else if (k == "at")
      out.at = f.number<std::uint64_t>(k, v), seen |= 4;
    else if (k == "ids")
      f.ids(v, out.ids), seen |= 8;
  }
  detail::ledger_require(f, seen, 15, {"e", out.tag == 'X' ? "why" : "src", "at", "ids"});
}

void parse_ledger_line(std::string_view text, ledger_where where, ledger_batch& out) {
  detail::ledger_fields f(text, where);
  out.epoch = out.step = 0;
  out.stage = out.rank = 0;
  out.world = 1;
  out.position.reset();
  out.bucket.reset();
  out.pads = 0;
  out.repeat = false;
  out.ids.clear();
  out.substitutions.clear();
  unsigned seen = 0;
  std::string_view k, v;
  while (f.next(k, v)) {
    if (k == "ids")
      f.ids(v, out.ids), seen |= 32;
    else if (k == "e")
      out.epoch = f.number<std::uint64_t>(k, v), seen |= 1;
    else if (k == "s")
      out.step = f.number<std::uint64_t>(k, v), seen |= 2;
    else if (k == "st")
      out.stage = f.number<std::uint32_t>(k, v), seen |= 4;
    else if (k == "r")
      out.rank = f.number<std::uint32_t>(k, v), seen |= 8;
    else if (k == "w")
      out.world = f.number<std::uint32_t>(k, v), seen |= 16;
    else if (k == "p")
      out.position = f.number<std::uint64_t>(k, v);
    else if (k == "b")
      out.bucket = f.number<std::int64_t>(k, v);
    else if (k == "pad")
      out.pads = f.number<std::uint32_t>(k, v);
    else if (k == "rep")
      out.repeat = f.number<std::uint32_t>(k, v) != 0;
    else if (k == "sub") {
      std::string_view rest = v;
      while (!rest.empty()) {
        std::size_t end = rest.find(';');
        if (end == std::string_view::npos) end = rest.size();
        const std::string_view one = rest.substr(0, end);
        rest.remove_prefix(end == rest.size() ? end : end + 1);
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
        out.substitutions.push_back(std::move(s));
      }
    }
  }
  detail::ledger_require(f, seen, 63, {"e", "s", "st", "r", "w", "ids"});
  detail::ledger_check_batch(out, where);
}

/// A record as read: a text line or a binary record (version 2).
template <class Record>
void parse_ledger_record_of(const ledger_line& line, ledger_where where, Record& out) {
  if (!line.binary) {
    parse_ledger_line(line.text, where, out);
    return;
  }
  detail::ledger_in in(line.text, where);
  in.fields(out);
  in.end();
  if constexpr (std::is_same_v<Record, ledger_ids>) out.tag = line.tag;
  if constexpr (std::is_same_v<Record, ledger_batch>) detail::ledger_check_batch(out, where);
}

void parse_ledger_record(const ledger_line& line, ledger_where where, ledger_epoch& out) {
  parse_ledger_record_of(line, where, out);
}
void parse_ledger_record(const ledger_line& line, ledger_where where, ledger_source& out) {
  parse_ledger_record_of(line, where, out);
}
void parse_ledger_record(const ledger_line& line, ledger_where where, ledger_ids& out) {
  parse_ledger_record_of(line, where, out);
}
void parse_ledger_record(const ledger_line& line, ledger_where where, ledger_batch& out) {
  parse_ledger_record_of(line, where, out);
}

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
