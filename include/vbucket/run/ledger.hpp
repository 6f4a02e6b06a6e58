#pragma once
/// The ledger of a run: one record per delivered batch (and a few declaring what each epoch
/// drew and dropped), one file per rank, that `vbucket audit` (`audit.hpp`) reads to prove each
/// epoch's samples were delivered exactly once. Records are binary (version 2, what writers
/// write by default) or text lines (version 1, below); `vbucket audit --dump` prints either as
/// text. This header declares the format's records, writer, reader and parsers; they are
/// compiled in vbucket::run. Each record kind is described once (`ledger_layout` in
/// src/run/ledger_binary.hpp: its fields in order, their text keys and forms); one text writer
/// and reader (src/run/ledger.cpp) and one binary writer and reader follow that description.
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

#include <concepts>     // std::same_as
#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <cstdio>       // std::FILE, std::fopen, std::fclose, std::setvbuf
#include <functional>   // std::function (a line sink)
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

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
  bool operator==(const ledger_substitution&) const = default;
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

/// A record of the format: `ledger_epoch`, `ledger_source`, `ledger_ids` or `ledger_batch`
/// (the functions below are compiled for these four).
template <class R>
concept ledger_record = std::same_as<R, ledger_epoch> || std::same_as<R, ledger_source> ||
    std::same_as<R, ledger_ids> || std::same_as<R, ledger_batch>;

// --- formatting ---------------------------------------------------------------------------

/// Appends the line of a record (with its newline) to `out`.
template <ledger_record R>
void append_ledger_line(std::string& out, const R& r);

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

/// Appends the binary record of `r` (its tag, length and payload) to `out`.
template <ledger_record R>
void append_ledger_record(std::string& out, const R& r);

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
  template <ledger_record Record>
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
  void write_line(std::string_view line);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] ledger_format format() const noexcept { return format_; }

  /// Takes back every line this writer wrote (a command that failed): the file is cut back to
  /// the size it had when the writer opened it (removed if the writer created it).
  void discard();

 private:
  /// An existing file's size once a torn last record is cut off (0: empty or new). A kill -9
  /// during a write leaves a last record cut short; that record's batch was never handed out
  /// (records are written first), so it is dropped, not continued by the next record. Throws
  /// when the file is no ledger, or one of the other format. (Defined after the reader.)
  static std::uint64_t drop_torn_tail(const std::string& path, ledger_format format);
  /// The format of the ledger a file holds (its whole magic line), nullopt for an empty,
  /// missing or other file.
  static std::optional<ledger_format> existing_format(const std::string& path);
  [[nodiscard]] std::string magic() const {
    return std::string(format_ == ledger_format::binary ? ledger_magic_v2 : ledger_magic);
  }

  void write_chunks(ledger_ids& c, std::span<const std::uint64_t> ids);

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
  explicit ledger_reader(std::string path, std::size_t block = std::size_t{1} << 20);
  /// The file's format (its magic line's version).
  [[nodiscard]] ledger_format format() const noexcept {
    return binary_ ? ledger_format::binary : ledger_format::text;
  }

  /// The next line that is not a comment (the magic line is read by the constructor); false at
  /// the end of the file.
  bool next(ledger_line& line);

  /// The byte offset of the next line, and the line number before it (for `seek`).
  [[nodiscard]] std::uint64_t tell() const noexcept { return consumed_ + begin_; }
  [[nodiscard]] std::uint64_t line_number() const noexcept { return number_; }
  /// Continues reading at a byte offset from `tell()`, whose line number was `number`.
  void seek(std::uint64_t offset, std::uint64_t number);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  bool next_raw(ledger_line& line);
  /// A binary record: its tag, length and payload (a frame cut short at the end of the file is
  /// a truncated record; a length past `ledger_max_record` makes the rest of the file one
  /// corrupt record, tag '?').
  bool next_record(ledger_line& line);
  /// `line` is the `len` bytes at `buf_[at]`, tagged `tag` (`first_byte`: its first byte).
  static constexpr int first_byte = -1;
  void emit(ledger_line& line, int tag, std::size_t at, std::size_t len, bool truncated,
            bool binary) noexcept;
  /// At the end of the file: what is left is a truncated line or record, if anything.
  bool last(ledger_line& line, bool binary) noexcept;
  /// Moves the partial line to the front (growing the buffer for a long line) and reads more.
  void fill();

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

/// Parses a text line of a record: `E`, `S`, `D` or `X` (into a `ledger_ids`), `B`. `where`
/// ("file:line", or a file and a line number) prefixes errors (`vbucket::error`). `out`'s
/// vectors keep their capacity: no allocation per line once warm.
template <ledger_record R>
void parse_ledger_line(std::string_view text, ledger_where where, R& out);

/// Parses a record as read (`ledger_reader`): a text line (`parse_ledger_line`) or a binary
/// record (version 2). Errors (`vbucket::error`) name `where`.
template <ledger_record R>
void parse_ledger_record(const ledger_line& line, ledger_where where, R& out);

/// The text line of a record as read (text or binary), for people (`vbucket audit --dump`);
/// without its newline. Throws `vbucket::error` naming `where` when it does not parse.
[[nodiscard]] std::string ledger_text_of(const ledger_line& line, ledger_where where);

}  // namespace vbucket
