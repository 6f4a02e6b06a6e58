#pragma once
/// The ledger of a run: one text line per delivered batch (and a few declaring what each epoch
/// drew and dropped), one file per rank, that `vbucket audit` (`audit.hpp`) reads to prove each
/// epoch's samples were delivered exactly once.
///
/// Format, version 1 (text; one record per line; a line is a tag, then `key=value` fields
/// separated by single spaces; keys in any order; unknown keys are ignored so a later v1
/// writer may add fields). The first line of every file is the magic line `#vbucket-ledger 1`;
/// other lines starting with `#` are comments.
///
///     #vbucket-ledger 1
///     E e=3 st=0 n=1500 src=2 seed=42 fp=00a1b2c3d4e5f607
///     S e=3 src=0 name=web first=0 rows=1000 drawn=1000 draw=all weight=0.7
///     S e=3 src=1 name=img first=1000 rows=500 drawn=430 draw=listed weight=0.3 digest=...
///     D e=3 src=1 at=0 ids=1000,1007,1007,1450
///     X e=3 why=unassigned at=0 ids=17,230
///     B e=3 s=812 st=0 r=2 w=8 p=45 b=11 pad=1 ids=5,99,1007,5 sub=2:1007>1009:decode%20failed
///     B e=3 s=813 st=0 r=2 w=8 p=53 b=4 rep=1 ids=7,8
///
/// Sample ids are *global*: a source's rows are ids [first, first + rows) (one source: the row
/// numbers of the metadata table). Records:
/// - `E` epoch header: epoch `e`, stage `st`, the id space `n` (ids are below it), the number of
///   sources `src`; optional `seed`, `fp` (the plan's fingerprint, 16 hex digits), `pads`.
/// - `S` one source of an epoch: `src` its number, `name`, `first`, `rows`, `drawn` (samples
///   drawn for the epoch, with multiplicity), `draw=all` (every row once: `drawn` = `rows`, no
///   `D` lines) or `draw=listed` (the drawn multiset is given by `D` lines; `digest` =
///   `ledger_digest` of it), and optional `weight` (share of the epoch) or `count` (exact).
/// - `D` drawn samples of a listed source: `src`, `at` (index of the first id in the source's
///   drawn list), `ids`.
/// - `X` drawn samples not delivered, counted: `why` (unassigned, invalid, disabled, policy,
///   drop_last, ...), `at` (a chunk number, unique per (epoch, why)), `ids`.
/// - `B` a delivered batch: epoch `e`, run step `s` (the trainer's global step), stage `st`,
///   rank `r`, world `w`; optional global position `p` in the epoch's plan, bucket `b`; `pad=K`:
///   the last K ids are pads (repeats that fill the bucket's last batch); `rep=1`: the whole
///   batch is a rank-alignment repeat; `ids` as planned; `sub=slot:failed>replacement:why;...`:
///   the loader replaced the planned sample `failed` at `slot` by `replacement` (the planned
///   sample counts as delivered; the replacement is counted as a substitution).
/// Free text (`name`, `why`) is percent-encoded (`%20` for a space; `%`, `,`, `;`, `:`, `=`,
/// `>` and control bytes likewise). The `D` and `X` lines of an epoch may be written again (on a
/// resume): a repeated (epoch, kind, source or why, `at`) chunk with the same ids is read once.
///
/// Version 2 (`ledger_format::binary`, magic line `#vbucket-ledger 2`) holds the same records
/// as framed binary records (see "the binary format" below); `ledger_reader` reads both.
///
/// Each line is written with one write of the whole line (an unbuffered stream opened for
/// append: one write(2) under POSIX's O_APPEND), so a crash leaves whole lines and at most one
/// truncated last line, which the audit names.
///
///     vbucket::ledger_writer out("ledger/" + vbucket::ledger_file_name(rank));
///     out.write(vbucket::record_of(b, sampler.plan(), {.step = step, .rank = rank, .world = w}));
///
/// (`record_of` and the epoch's declaration from a plan: `delivery_records.hpp`; this format knows
/// no planner.)

#include <algorithm>     // std::min, std::sort, std::is_sorted
#include <bit>           // std::countr_zero, std::endian, std::bit_cast
#include <charconv>      // std::to_chars, std::from_chars
#include <cstdint>       // std::uint32_t, std::uint64_t, std::int64_t
#include <cstdio>        // std::FILE, std::fopen, std::fwrite, std::fread, std::setvbuf
#include <cstring>       // std::memchr, std::memmove
#include <filesystem>    // std::filesystem::file_size, resize_file (a torn line, discard)
#include <functional>    // std::function (a line sink), std::less
#include <memory>        // std::unique_ptr
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <tuple>         // std::make_tuple, std::apply (record layouts)
#include <type_traits>   // std::is_same_v
#include <utility>       // std::move
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"

namespace vbucket {

/// The ledger format version this header writes and reads.
inline constexpr int ledger_version = 1;
/// The first line of every ledger file (without its newline).
inline constexpr std::string_view ledger_magic = "#vbucket-ledger 1";
/// The first line of a version-2 (binary) ledger file.
inline constexpr std::string_view ledger_magic_v2 = "#vbucket-ledger 2";
/// Ids per `D` or `X` line.
inline constexpr std::size_t ledger_chunk_ids = 4096;
/// Largest binary record (its payload), in bytes: a longer length field is corruption.
inline constexpr std::uint64_t ledger_max_record = std::uint64_t{1} << 28;

/// How a writer writes records; the reader reads either, by the file's magic line.
enum class ledger_format : std::uint8_t {
  text,    ///< version 1: one text line per record (above)
  binary,  ///< version 2: after the magic line, framed binary records (see `ledger_layout`)
};

/// How a source's samples were drawn for an epoch.
enum class ledger_draw : std::uint8_t {
  all,     ///< every row once (no `D` lines)
  listed,  ///< the multiset given by `D` lines
};

/// `E`: what an epoch is.
struct ledger_epoch {
  std::uint64_t epoch = 0;
  std::uint32_t stage = 0;
  std::uint64_t samples = 0;  ///< the id space: every id of the epoch is below it
  std::uint32_t sources = 1;  ///< the number of `S` lines of the epoch
  std::optional<std::uint64_t> seed{};
  std::optional<std::uint64_t> fingerprint{};
  std::optional<std::uint64_t> pads{};  ///< pad slots of the plan, if known
};

/// `S`: one source of an epoch.
struct ledger_source {
  std::uint64_t epoch = 0;
  std::uint32_t id = 0;
  std::string name{};
  std::uint64_t first = 0;  ///< its rows are ids [first, first + rows)
  std::uint64_t rows = 0;
  std::uint64_t drawn = 0;  ///< with multiplicity
  ledger_draw draw = ledger_draw::all;
  std::optional<double> weight{};
  std::optional<std::uint64_t> count{};
  std::optional<std::uint64_t> digest{};  ///< `ledger_digest` of the listed multiset
};

/// `D` (drawn, of a listed source) or `X` (dropped, with a reason) chunk of ids.
struct ledger_ids {
  char tag = 'D';  ///< 'D' or 'X'
  std::uint64_t epoch = 0;
  std::uint32_t source = 0;  ///< `D`
  std::string why{};         ///< `X`
  std::uint64_t at = 0;
  std::vector<std::uint64_t> ids{};
};

/// A planned sample the loader replaced, and why.
struct ledger_substitution {
  std::uint32_t slot = 0;
  std::uint64_t failed = 0;
  std::uint64_t replacement = 0;
  std::string why{};
};

/// `B`: one delivered batch.
struct ledger_batch {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;  ///< the run's step (the trainer's global step)
  std::uint32_t stage = 0;
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::optional<std::uint64_t> position{};  ///< global position in the epoch's plan
  std::optional<std::int64_t> bucket{};
  std::uint32_t pads = 0;  ///< the last `pads` ids are pads
  bool repeat = false;     ///< a rank-alignment repeat: every id is a pad
  std::vector<std::uint64_t> ids{};
  std::vector<ledger_substitution> substitutions{};
};

/// An order-independent hash of a multiset of ids: Σ h(id) mod 2^64 with a SplitMix64
/// finaliser h, so chunks add up in any order.
[[nodiscard]] constexpr std::uint64_t ledger_id_hash(std::uint64_t id) noexcept {
  std::uint64_t z = id + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
[[nodiscard]] constexpr std::uint64_t ledger_digest(std::span<const std::uint64_t> ids) noexcept {
  std::uint64_t d = 0;
  for (const std::uint64_t i : ids) d += ledger_id_hash(i);
  return d;
}

/// "rank-00003.ledger": the file of one rank in a ledger directory.
[[nodiscard]] inline std::string ledger_file_name(std::uint32_t rank) {
  std::string digits = std::to_string(rank);
  if (digits.size() < 5) digits.insert(0, 5 - digits.size(), '0');
  return "rank-" + digits + ".ledger";
}

// --- formatting ---------------------------------------------------------------------------

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

/// Appends the line of a record (with its newline) to `out`.
inline void append_ledger_line(std::string& out, const ledger_epoch& e) {
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
inline void append_ledger_line(std::string& out, const ledger_source& s) {
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
inline void append_ledger_line(std::string& out, const ledger_ids& c) {
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
inline void append_ledger_line(std::string& out, const ledger_batch& b) {
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

// --- the binary format (version 2) ----------------------------------------------------------
//
// After the magic line `#vbucket-ledger 2`, each record is its tag (one byte: E, S, D, X, B),
// the length of its payload (a LEB128 varint), then the payload: the record's fields in the
// order of its `ledger_layout`, each coded by its type alone — unsigned integers as LEB128
// varints, signed ones zigzagged, a double as 8 bytes little-endian, a bool or enum as a byte,
// text and id lists as a varint count then the bytes or varints, an optional as a presence
// byte then the value, substitutions as a count then each one's layout. One description per
// record kind, one writer and one reader for all kinds. Streamable: a torn last record is a
// frame cut short. Every record starts with its epoch (the audit's merge reads only that).

/// The fields of a record kind, in the order the binary format writes them.
template <class Record>
struct ledger_layout;
template <>
struct ledger_layout<ledger_epoch> {
  static constexpr char tag = 'E';
  static constexpr auto fields = std::make_tuple(
      &ledger_epoch::epoch, &ledger_epoch::stage, &ledger_epoch::samples, &ledger_epoch::sources,
      &ledger_epoch::seed, &ledger_epoch::fingerprint, &ledger_epoch::pads);
};
template <>
struct ledger_layout<ledger_source> {
  static constexpr char tag = 'S';
  static constexpr auto fields = std::make_tuple(
      &ledger_source::epoch, &ledger_source::id, &ledger_source::name, &ledger_source::first,
      &ledger_source::rows, &ledger_source::drawn, &ledger_source::draw, &ledger_source::weight,
      &ledger_source::count, &ledger_source::digest);
};
template <>
struct ledger_layout<ledger_ids> {
  static constexpr char tag = 'D';  // or 'X': the record's own `tag`
  static constexpr auto fields = std::make_tuple(
      &ledger_ids::epoch, &ledger_ids::source, &ledger_ids::why, &ledger_ids::at, &ledger_ids::ids);
};
template <>
struct ledger_layout<ledger_batch> {
  static constexpr char tag = 'B';
  static constexpr auto fields = std::make_tuple(
      &ledger_batch::epoch, &ledger_batch::step, &ledger_batch::stage, &ledger_batch::rank,
      &ledger_batch::world, &ledger_batch::position, &ledger_batch::bucket, &ledger_batch::pads,
      &ledger_batch::repeat, &ledger_batch::ids, &ledger_batch::substitutions);
};
template <>
struct ledger_layout<ledger_substitution> {
  static constexpr auto fields =
      std::make_tuple(&ledger_substitution::slot, &ledger_substitution::failed,
                      &ledger_substitution::replacement, &ledger_substitution::why);
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
  std::apply([&](auto... member) { (ledger_put_value(out, r.*member), ...); },
             ledger_layout<Record>::fields);
}

}  // namespace detail

/// Appends the binary record of `r` (its tag, length and payload) to `out`.
template <class Record>
void append_ledger_record(std::string& out, const Record& r) {
  char tag = ledger_layout<Record>::tag;
  if constexpr (std::is_same_v<Record, ledger_ids>) tag = r.tag == 'X' ? 'X' : 'D';
  std::string payload;
  detail::ledger_put_fields(payload, r);
  out += tag;
  detail::ledger_put_varint(out, payload.size());
  out += payload;
}

// --- writing ------------------------------------------------------------------------------

/// Where whole lines go (each with its newline): a file, or a user's callback.
using ledger_sink = std::function<void(std::string_view line)>;

/// Writes ledger lines, each with one write. To a file: opened for append (created if need be,
/// the magic line written when it is empty), unbuffered, so one `fwrite` of a whole line is one
/// write(2) under POSIX (O_APPEND: lines of concurrent writers never interleave). To a sink:
/// the sink gets the magic line first, then each line. Throws `vbucket::error` naming the file
/// when it cannot be opened or written.
///
/// The format: binary (version 2, the default: about half the bytes of text, and the
/// epoch's draws once per run) unless given; a file that already holds a ledger keeps its
/// format when none is given (a run resumed by an older writer goes on in text), and refuses a
/// writer of the other format. `vbucket audit --dump FILE` prints either as text.
class ledger_writer {
 public:
  explicit ledger_writer(std::string path, std::optional<ledger_format> format = std::nullopt)
      : path_(std::move(path)),
        format_(format ? *format : existing_format(path_).value_or(ledger_format::binary)) {
    start_ = drop_torn_tail(path_, format_);
    file_.reset(std::fopen(path_.c_str(), "ab"));
    if (!file_) throw error("ledger: cannot open \"" + path_ + "\" for appending");
    std::setvbuf(file_.get(), nullptr, _IONBF, 0);
    if (start_ == 0) write_line(magic() + "\n");
  }
  explicit ledger_writer(ledger_sink sink, ledger_format format = ledger_format::binary)
      : format_(format), sink_(std::move(sink)) {
    if (!sink_) throw error("ledger: the sink is empty");
    write_line(magic() + "\n");
  }

  /// Writes one record (one line).
  template <class Record>
    requires requires(std::string& s, const Record& r) { append_ledger_line(s, r); }
  void write(const Record& r) {
    line_.clear();
    if (format_ == ledger_format::binary) {
      append_ledger_record(line_, r);
    } else {
      append_ledger_line(line_, r);
    }
    write_line(line_);
  }

  /// `D` lines: the drawn multiset of a listed source, in chunks of `ledger_chunk_ids`.
  void write_drawn(std::uint64_t epoch, std::uint32_t source, std::span<const std::uint64_t> ids) {
    ledger_ids c{.tag = 'D', .epoch = epoch, .source = source};
    write_chunks(c, ids);
  }
  /// `X` lines: drawn samples not delivered, with the reason; `first_at` numbers the chunks
  /// (unique per epoch and reason: e.g. the position of a dropped batch).
  void write_dropped(std::uint64_t epoch, std::string_view why, std::span<const std::uint64_t> ids,
                     std::uint64_t first_at = 0) {
    ledger_ids c{.tag = 'X', .epoch = epoch, .why = std::string(why), .at = first_at};
    write_chunks(c, ids);
  }

  /// Writes `line` (a text line with its newline, or a binary record) as it is, with one write.
  void write_line(std::string_view line) {
    if (sink_) {
      sink_(line);
      return;
    }
    if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size())
      throw error("ledger: cannot write to \"" + path_ + "\"");
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] ledger_format format() const noexcept { return format_; }

  /// Takes back every line this writer wrote (a command that failed): the file is cut back to
  /// the size it had when the writer opened it (removed if the writer created it).
  void discard() {
    if (sink_ || !file_) return;
    file_.reset();
    std::error_code ec;
    if (start_ == 0) {
      std::filesystem::remove(path_, ec);
    } else {
      std::filesystem::resize_file(path_, start_, ec);
    }
    if (ec)
      throw error("ledger: cannot take back the lines written to \"" + path_ +
                  "\": " + ec.message());
  }

 private:
  /// An existing file's size once a torn last record is cut off (0: empty or new). A kill -9
  /// during a write leaves a last record cut short; that record's batch was never handed out
  /// (records are written first), so it is dropped, not continued by the next record. Throws
  /// when the file is no ledger, or one of the other format. (Defined after the reader.)
  static std::uint64_t drop_torn_tail(const std::string& path, ledger_format format);
  /// The format of the ledger a file holds (its whole magic line), nullopt for an empty,
  /// missing or other file.
  static std::optional<ledger_format> existing_format(const std::string& path) {
    std::unique_ptr<std::FILE, closer> f(std::fopen(path.c_str(), "rb"));
    if (!f) return std::nullopt;
    std::string head(ledger_magic.size() + 1, '\0');
    head.resize(std::fread(head.data(), 1, head.size(), f.get()));
    if (head == std::string(ledger_magic) + "\n") return ledger_format::text;
    if (head == std::string(ledger_magic_v2) + "\n") return ledger_format::binary;
    return std::nullopt;
  }
  [[nodiscard]] std::string magic() const {
    return std::string(format_ == ledger_format::binary ? ledger_magic_v2 : ledger_magic);
  }

  void write_chunks(ledger_ids& c, std::span<const std::uint64_t> ids) {
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

  struct closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::string path_;
  ledger_format format_ = ledger_format::text;
  std::unique_ptr<std::FILE, closer> file_;
  std::uint64_t start_ = 0;  // the file's size when opened (after a torn line was cut)
  ledger_sink sink_;
  std::string line_;
};

// --- reading ------------------------------------------------------------------------------

/// One line of a ledger file, as read: its tag (the first character), its text without the
/// newline, its 1-based number, and whether it ended without a newline (a truncated last line).
struct ledger_line {
  char tag = 0;
  std::string_view text;  ///< a binary record: its payload
  std::uint64_t number = 0;
  bool truncated = false;
  bool binary = false;  ///< a version-2 record (`text` is its payload)
};

/// Reads a ledger file line by line in large blocks (bounded memory: the block and the longest
/// line). Checks the magic line. `next` returns false at the end. Throws `vbucket::error`
/// naming the file when it cannot be read or is not a ledger (another magic or version).
class ledger_reader {
 public:
  explicit ledger_reader(std::string path, std::size_t block = std::size_t{1} << 20)
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
  /// The file's format (its magic line's version).
  [[nodiscard]] ledger_format format() const noexcept {
    return binary_ ? ledger_format::binary : ledger_format::text;
  }

  /// The next line that is not a comment (the magic line is read by the constructor); false at
  /// the end of the file.
  bool next(ledger_line& line) {
    if (binary_) return next_record(line);
    for (;;) {
      if (!next_raw(line)) return false;
      if (line.tag != '#') return true;
    }
  }

  /// The byte offset of the next line, and the line number before it (for `seek`).
  [[nodiscard]] std::uint64_t tell() const noexcept { return consumed_ + begin_; }
  [[nodiscard]] std::uint64_t line_number() const noexcept { return number_; }
  /// Continues reading at a byte offset from `tell()`, whose line number was `number`.
  void seek(std::uint64_t offset, std::uint64_t number) {
    if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0)
      throw error("ledger: cannot seek in \"" + path_ + "\"");
    consumed_ = offset;
    begin_ = end_ = 0;
    eof_ = false;
    dead_ = false;
    number_ = number;
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  bool next_raw(ledger_line& line) {
    for (;;) {
      const char* nl =
          begin_ < end_
              ? static_cast<const char*>(std::memchr(buf_.data() + begin_, '\n', end_ - begin_))
              : nullptr;
      if (nl != nullptr) {
        const auto len = static_cast<std::size_t>(nl - (buf_.data() + begin_));
        emit(line, len, false);
        begin_ += len + 1;
        return true;
      }
      if (eof_) {
        if (begin_ == end_) return false;
        emit(line, end_ - begin_, true);
        begin_ = end_;
        return true;
      }
      fill();
    }
  }

  /// A binary record: its tag, length and payload (a frame cut short at the end of the file is
  /// a truncated record; a length past `ledger_max_record` makes the rest of the file one
  /// corrupt record, tag '?').
  bool next_record(ledger_line& line) {
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
          line.text = std::string_view(buf_.data() + begin_, 0);
          line.tag = '?';
          line.number = ++number_;
          line.truncated = false;
          line.binary = true;
          dead_ = true;
          return true;
        }
        if (complete && avail - h >= n) {
          line.tag = static_cast<char>(p[0]);
          line.text = std::string_view(buf_.data() + begin_ + h, static_cast<std::size_t>(n));
          line.number = ++number_;
          line.truncated = false;
          line.binary = true;
          begin_ += h + static_cast<std::size_t>(n);
          return true;
        }
      }
      if (eof_) {
        if (begin_ == end_) return false;
        emit(line, end_ - begin_, true);
        line.binary = true;
        begin_ = end_;
        return true;
      }
      fill();
    }
  }

  void emit(ledger_line& line, std::size_t len, bool truncated) {
    line.text = std::string_view(buf_.data() + begin_, len);
    line.tag = len != 0 ? line.text[0] : '\0';
    line.number = ++number_;
    line.truncated = truncated;
    line.binary = false;
  }

  /// Moves the partial line to the front (growing the buffer for a long line) and reads more.
  void fill() {
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

  struct closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  std::string path_;
  std::size_t block_;
  std::unique_ptr<std::FILE, closer> file_;
  std::vector<char> buf_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::uint64_t consumed_ = 0;  // file bytes before buf_[0]
  std::uint64_t number_ = 0;
  bool eof_ = false;
  bool binary_ = false;
  bool dead_ = false;  // a corrupt length: nothing after it can be read
};

inline std::uint64_t ledger_writer::drop_torn_tail(const std::string& path, ledger_format format) {
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

// --- parsing ------------------------------------------------------------------------------

/// Where a line is, for error messages: a file (or any label) and a 1-based line number (0:
/// none). The text "file:line" is made only when an error is reported.
struct ledger_where {
  std::string_view file;
  std::uint64_t line = 0;

  ledger_where(const char* f) : file(f) {}  // NOLINT: implicit, as a label
  ledger_where(std::string_view f, std::uint64_t l = 0) : file(f), line(l) {}    // NOLINT
  ledger_where(const std::string& f, std::uint64_t l = 0) : file(f), line(l) {}  // NOLINT
  [[nodiscard]] std::string text() const {
    return line == 0 ? std::string(file) : std::string(file) + ":" + std::to_string(line);
  }
};

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

/// Parses an `E` line. `where` ("file:line", or a file and a line number) prefixes errors
/// (`vbucket::error`).
inline void parse_ledger_line(std::string_view text, ledger_where where, ledger_epoch& out) {
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

/// Parses an `S` line.
inline void parse_ledger_line(std::string_view text, ledger_where where, ledger_source& out) {
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

/// Parses a `D` or `X` line (`out.ids` keeps its capacity).
inline void parse_ledger_line(std::string_view text, ledger_where where, ledger_ids& out) {
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

/// Parses a `B` line (`out`'s vectors keep their capacity: no allocation per line once warm).
inline void parse_ledger_line(std::string_view text, ledger_where where, ledger_batch& out) {
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
    std::apply([&](auto... member) { (get(r.*member), ...); }, ledger_layout<Record>::fields);
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

/// Parses a record as read (`ledger_reader`): a text line (`parse_ledger_line`) or a binary
/// record (version 2). Errors (`vbucket::error`) name `where`.
template <class Record>
void parse_ledger_record(const ledger_line& line, ledger_where where, Record& out) {
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

/// The text line of a record as read (text or binary), for people (`vbucket audit --dump`);
/// without its newline. Throws `vbucket::error` naming `where` when it does not parse.
[[nodiscard]] inline std::string ledger_text_of(const ledger_line& line, ledger_where where) {
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
