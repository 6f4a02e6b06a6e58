#pragma once
/// The ledger's record layouts (both formats) and the binary codec (version 2): the field
/// writer and reader; internal to vbucket::run (src/run/ledger.cpp, src/run/audit.cpp).

#include <bit>          // std::bit_cast
#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::make_tuple, std::apply
#include <type_traits>  // std::is_same_v
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/run/ledger.hpp"

namespace vbucket {

/// How a field appears in a text line (version 1), beyond its type's form.
enum class ledger_text : std::uint8_t {
  plain,    ///< ` key=value`, required (an optional: written and read when present)
  hex,      ///< as plain, the value in 16 hex digits
  nonzero,  ///< written only when not the type's default; not required
  d_only,   ///< only in `D` records (the binary form always has it)
  x_only,   ///< only in `X` records
};

/// One field of a record kind: its text key, its member, its text form.
template <class Member>
struct ledger_field {
  std::string_view key;
  Member member;
  ledger_text text = ledger_text::plain;
};
template <class Member>
ledger_field(std::string_view, Member) -> ledger_field<Member>;
template <class Member>
ledger_field(std::string_view, Member, ledger_text) -> ledger_field<Member>;

/// The one description of each record kind: its fields in the order both formats write them
/// (the text keys and forms for version 1, the binary coding by type for version 2).
template <class Record>
struct ledger_layout;
template <>
struct ledger_layout<ledger_epoch> {
  static constexpr char tag = 'E';
  static constexpr auto fields = std::make_tuple(
      ledger_field{"e", &ledger_epoch::epoch}, ledger_field{"st", &ledger_epoch::stage},
      ledger_field{"n", &ledger_epoch::samples}, ledger_field{"src", &ledger_epoch::sources},
      ledger_field{"seed", &ledger_epoch::seed},
      ledger_field{"fp", &ledger_epoch::fingerprint, ledger_text::hex},
      ledger_field{"pads", &ledger_epoch::pads});
};
template <>
struct ledger_layout<ledger_source> {
  static constexpr char tag = 'S';
  static constexpr auto fields = std::make_tuple(
      ledger_field{"e", &ledger_source::epoch}, ledger_field{"src", &ledger_source::id},
      ledger_field{"name", &ledger_source::name}, ledger_field{"first", &ledger_source::first},
      ledger_field{"rows", &ledger_source::rows}, ledger_field{"drawn", &ledger_source::drawn},
      ledger_field{"draw", &ledger_source::draw}, ledger_field{"weight", &ledger_source::weight},
      ledger_field{"count", &ledger_source::count},
      ledger_field{"digest", &ledger_source::digest, ledger_text::hex});
};
template <>
struct ledger_layout<ledger_ids> {
  static constexpr char tag = 'D';  // or 'X': the record's own `tag`
  static constexpr auto fields =
      std::make_tuple(ledger_field{"e", &ledger_ids::epoch},
                      ledger_field{"src", &ledger_ids::source, ledger_text::d_only},
                      ledger_field{"why", &ledger_ids::why, ledger_text::x_only},
                      ledger_field{"at", &ledger_ids::at}, ledger_field{"ids", &ledger_ids::ids});
};
template <>
struct ledger_layout<ledger_batch> {
  static constexpr char tag = 'B';
  static constexpr auto fields = std::make_tuple(
      ledger_field{"e", &ledger_batch::epoch}, ledger_field{"s", &ledger_batch::step},
      ledger_field{"st", &ledger_batch::stage}, ledger_field{"r", &ledger_batch::rank},
      ledger_field{"w", &ledger_batch::world}, ledger_field{"p", &ledger_batch::position},
      ledger_field{"b", &ledger_batch::bucket},
      ledger_field{"pad", &ledger_batch::pads, ledger_text::nonzero},
      ledger_field{"rep", &ledger_batch::repeat, ledger_text::nonzero},
      ledger_field{"ids", &ledger_batch::ids},
      ledger_field{"sub", &ledger_batch::substitutions, ledger_text::nonzero});
};
/// A substitution's text form is `slot:failed>replacement:why` (one `sub` field, `;` between).
template <>
struct ledger_layout<ledger_substitution> {
  static constexpr auto fields =
      std::make_tuple(ledger_field{"sub slot", &ledger_substitution::slot},
                      ledger_field{"sub failed", &ledger_substitution::failed},
                      ledger_field{"sub replacement", &ledger_substitution::replacement},
                      ledger_field{"sub why", &ledger_substitution::why});
};

namespace detail {

inline void ledger_put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
template <class Record>
void ledger_put_fields(std::string& out, const Record& r);
inline void ledger_put_value(std::string& out, std::uint64_t v) { ledger_put_varint(out, v); }
inline void ledger_put_value(std::string& out, std::uint32_t v) { ledger_put_varint(out, v); }
inline void ledger_put_value(std::string& out, std::int64_t v) {
  ledger_put_varint(out,
                    (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}
inline void ledger_put_value(std::string& out, bool v) { out += static_cast<char>(v ? 1 : 0); }
inline void ledger_put_value(std::string& out, ledger_draw v) {
  out += static_cast<char>(v == ledger_draw::all ? 0 : 1);
}
inline void ledger_put_value(std::string& out, double v) {
  const auto bits = std::bit_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
}
inline void ledger_put_value(std::string& out, const std::string& v) {
  ledger_put_varint(out, v.size());
  out += v;
}
/// An id list: its count, a byte saying how (0: each id; 1: ascending, each id as its step
/// from the one before, the first from 0), then the varints.
inline void ledger_put_value(std::string& out, const std::vector<std::uint64_t>& v) {
  ledger_put_varint(out, v.size());
  const bool ascending = std::is_sorted(v.begin(), v.end());
  out += static_cast<char>(ascending ? 1 : 0);
  std::uint64_t before = 0;
  for (const std::uint64_t x : v) {
    ledger_put_varint(out, ascending ? x - before : x);
    before = x;
  }
}
inline void ledger_put_value(std::string& out, const std::vector<ledger_substitution>& v) {
  ledger_put_varint(out, v.size());
  for (const ledger_substitution& x : v) ledger_put_fields(out, x);
}
template <class T>
void ledger_put_value(std::string& out, const std::optional<T>& v) {
  out += static_cast<char>(v ? 1 : 0);
  if (v) ledger_put_value(out, *v);
}
template <class Record>
void ledger_put_fields(std::string& out, const Record& r) {
  std::apply([&](const auto&... f) { (ledger_put_value(out, r.*(f.member)), ...); },
             ledger_layout<Record>::fields);
}

}  // namespace detail

/// The tag of a record: its layout's (a `ledger_ids` chunk: 'X' or 'D', as it says).
template <class Record>
constexpr char ledger_tag_of(const Record& r) noexcept {
  if constexpr (std::is_same_v<Record, ledger_ids>) return r.tag == 'X' ? 'X' : 'D';
  return ledger_layout<Record>::tag;
}

template <ledger_record Record>
void append_ledger_record(std::string& out, const Record& r) {
  std::string payload;
  detail::ledger_put_fields(payload, r);
  out += ledger_tag_of(r);
  detail::ledger_put_varint(out, payload.size());
  out += payload;
}

namespace detail {

/// Reads a binary record's payload field by field (`ledger_layout`); every count is checked
/// against the bytes left before anything is allocated. Errors name the place.
class ledger_in {
 public:
  ledger_in(std::string_view payload, ledger_where where) : rest_(payload), where_(where) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw error(where_.text() + ": " + what);
  }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (rest_.empty()) fail("record cut short (a number runs past its end)");
      const auto byte = static_cast<unsigned char>(rest_[0]);
      rest_.remove_prefix(1);
      if (shift == 63 && byte > 1) fail("a number past 64 bits");
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
      if (shift == 63) fail("a number past 64 bits");
    }
  }
  std::uint64_t count() {
    const std::uint64_t n = varint();
    if (n > rest_.size()) fail("a count of " + std::to_string(n) + " past the record's end");
    return n;
  }
  unsigned char byte() {
    if (rest_.empty()) fail("record cut short");
    const auto b = static_cast<unsigned char>(rest_[0]);
    rest_.remove_prefix(1);
    return b;
  }

  void get(std::uint64_t& v) { v = varint(); }
  void get(std::uint32_t& v) {
    const std::uint64_t x = varint();
    if (x > 0xffffffffu) fail("a 32-bit field holds " + std::to_string(x));
    v = static_cast<std::uint32_t>(x);
  }
  void get(std::int64_t& v) {
    const std::uint64_t z = varint();
    v = static_cast<std::int64_t>(z >> 1) ^ -static_cast<std::int64_t>(z & 1);
  }
  void get(bool& v) {
    const unsigned char b = byte();
    if (b > 1) fail("a flag byte holds " + std::to_string(b));
    v = b == 1;
  }
  void get(ledger_draw& v) {
    const unsigned char b = byte();
    if (b > 1) fail("a draw byte holds " + std::to_string(b) + " (0 all, 1 listed)");
    v = b == 0 ? ledger_draw::all : ledger_draw::listed;
  }
  void get(double& v) {
    if (rest_.size() < 8) fail("record cut short");
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i)
      bits |=
          static_cast<std::uint64_t>(static_cast<unsigned char>(rest_[static_cast<std::size_t>(i)]))
          << (8 * i);
    rest_.remove_prefix(8);
    v = std::bit_cast<double>(bits);
  }
  void get(std::string& v) {
    const auto n = static_cast<std::size_t>(count());
    v.assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
  }
  void get(std::vector<std::uint64_t>& v) {
    const auto n = static_cast<std::size_t>(count());
    const unsigned char how = byte();
    if (how > 1) fail("an id list's coding byte holds " + std::to_string(how));
    v.clear();
    v.reserve(n);
    std::uint64_t before = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t x = varint();
      if (how == 1 && x > ~before) fail("an ascending id list passes 2^64");
      v.push_back(how == 1 ? before += x : x);
    }
  }
  void get(std::vector<ledger_substitution>& v) {
    const auto n = static_cast<std::size_t>(count());
    v.clear();
    for (std::size_t i = 0; i < n; ++i) fields(v.emplace_back());
  }
  template <class T>
  void get(std::optional<T>& v) {
    if (!get_flag()) {
      v.reset();
      return;
    }
    T x{};
    get(x);
    v = std::move(x);
  }
  template <class Record>
  void fields(Record& r) {
    std::apply([&](const auto&... f) { (get(r.*(f.member)), ...); }, ledger_layout<Record>::fields);
  }
  void end() const {
    if (!rest_.empty()) fail(std::to_string(rest_.size()) + " bytes past the record's fields");
  }

 private:
  bool get_flag() {
    bool b = false;
    get(b);
    return b;
  }
  std::string_view rest_;
  ledger_where where_;
};

}  // namespace detail

}  // namespace vbucket
