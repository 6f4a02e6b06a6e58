#pragma once
/// The audit of a run's ledgers (`ledger.hpp`): reads the lines of every rank and proves, per
/// epoch, that each sample drawn for the epoch was delivered exactly once apart from counted
/// pads, repeats and drops, checks each source's share against its weight (or its count), and
/// names every deviation: the sample, how it deviates ("missing", "duplicated", "unexpected")
/// and the files, lines, ranks and steps where it appeared; each line that is truncated,
/// corrupt, out of order or contradicts its epoch's header; an epoch with no line in any file
/// between two others; a batch of one rank in another rank's file (rank-RRRRR.ledger).
///
///     const vbucket::audit_report r = vbucket::audit_ledgers(paths);
///     std::fputs(vbucket::format_audit_report(r).c_str(), stdout);
///     return r.clean() ? 0 : 1;
///
/// Method (streamed; one epoch in memory at a time). Each file holds its epochs in order, so
/// the files are merged epoch by epoch: for epoch e every file's lines of e are read (the file
/// with e's header first; if no file starts its block with the header, a pre-pass finds it).
/// - Epochs whose sources are all `draw=all` (each row once, the plain case): one bit per id
///   (n/8 bytes: 125 MB for 10^9 samples). A delivered or dropped id sets its bit; a bit already
///   set is a duplicate, an id in no source is unexpected; at the end the clear bits of the
///   sources are the missing samples.
/// - Epochs with listed draws (mixtures drawn with replacement): a signed 8-bit count per id
///   (+1 per draw, -1 per delivery or drop; a step past ±127 goes to a map instead, and a
///   count is its byte plus its map entry) and one bit per id
///   that says "drawn" (n · 9/8 bytes); at the end a count above 0 is missing, below 0
///   duplicated (drawn) or unexpected (not drawn).
/// Either pass 1 finds every deviating sample and counts them exactly; up to `max_named` of
/// them per epoch are then named by a second pass over that epoch's lines only (run only when
/// there are deviations), which collects where each appeared. A sort-free digest (a sum of
/// hashes) would prove equality of the multisets in O(1) memory but could not name a sample:
/// the bitmap costs one bit per sample and names them all.
/// Pads (the last `pad` ids of a batch), repeat batches and substitution replacements are
/// counted, not delivered; they must be ids of the epoch (below `n`).
/// Memory: the per-id table of the largest epoch (n/8 bytes drawn all, 9n/8 listed), a read
/// block per file (1 MiB, less with more than 64 files: 64 MiB in all), the named samples and
/// their places, and one entry per `D`/`X` chunk of an epoch (its ids / 4096).
/// Compiled in vbucket::run (src/run/audit.cpp); this header declares it.
/// Not covered: a run that rolls back to an earlier checkpoint delivers the rolled-back steps
/// twice, and the audit reports their samples as duplicated (with both places).

#include <cstdint>      // std::uint64_t, std::uint32_t
#include <map>          // std::map
#include <optional>     // std::optional
#include <set>          // std::set
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

namespace vbucket {

/// What the audit checks and how much it names.
struct audit_options {
  /// Deviating samples named per epoch (all are counted).
  std::size_t max_named = 100;
  /// Places listed per named sample.
  std::size_t max_places = 8;
  /// Largest |drawn share − weight share| of a weighted source.
  double share_tolerance = 0.01;
  /// Most bytes of an epoch's per-id tables (n/8 drawn all, 9n/8 listed): an epoch whose id
  /// space needs more is reported (a header deviation naming its file and line), not read.
  std::uint64_t max_table_bytes = std::uint64_t{16} << 30;
};

/// How a sample or a line deviates.
enum class audit_issue : std::uint8_t {
  missing,     ///< drawn, neither delivered nor counted as dropped (as often as drawn)
  duplicated,  ///< delivered (or dropped) more often than drawn
  unexpected,  ///< delivered, dropped or used as a pad but not drawn for the epoch
  truncated,   ///< a line cut short (no newline at the end of the file)
  corrupt,     ///< a line that does not parse
  order,       ///< a line of an epoch after a later epoch's lines in the same file
  header,      ///< the epoch's header and sources: missing, conflicting, or not met
  share,       ///< a source's share off its weight, or its count not met
  rank,        ///< a batch of one rank in another rank's file (rank-RRRRR.ledger)
};

/// "missing", "duplicated", ... "rank": the enumerator's name.
[[nodiscard]] constexpr std::string_view to_string(audit_issue i) noexcept {
  constexpr std::string_view names[] = {"missing",   "duplicated", "unexpected",
                                        "truncated", "corrupt",    "order",
                                        "header",    "share",      "rank"};
  const auto k = static_cast<std::size_t>(i);
  return k < std::size(names) ? names[k] : "?";
}

/// Where a sample appeared.
struct audit_place {
  std::string file;
  std::uint64_t line = 0;
  char tag = 'B';  ///< 'B' batch, 'X' dropped, 'D' drawn
  std::uint64_t step = 0;
  std::uint32_t rank = 0;
  std::string how;  ///< "delivered", "pad", "repeat", "replacement", "dropped (why)", "drawn"
};

/// One deviation. Sample issues have `sample`, `drawn` and `seen` (times delivered or counted
/// as dropped) and the places where it appeared; line and header issues a `detail` message
/// (which names the file and line).
struct audit_deviation {
  audit_issue issue = audit_issue::missing;
  std::uint64_t epoch = 0;
  std::optional<std::uint64_t> sample{};
  std::uint64_t drawn = 0;
  std::uint64_t seen = 0;
  std::vector<audit_place> places{};
  std::string detail{};
};

/// One source of an epoch, as audited.
struct audit_source {
  std::uint32_t id = 0;
  std::string name{};
  std::optional<double> weight{};
  std::optional<std::uint64_t> count{};
  std::uint64_t drawn = 0;
  std::uint64_t delivered = 0;
  std::uint64_t dropped = 0;
  double share = 0;         ///< drawn / drawn of the weighted sources
  double weight_share = 0;  ///< weight / Σ weights
  bool ok = true;
};

/// One epoch, as audited.
struct audit_epoch {
  std::uint64_t epoch = 0;
  bool header = false;        ///< an `E` line was found
  std::uint64_t samples = 0;  ///< the id space n
  std::set<std::uint32_t> stages{};
  std::set<std::uint32_t> worlds{};
  std::set<std::uint32_t> ranks{};
  std::uint64_t batches = 0;         ///< `B` lines (repeats included)
  std::uint64_t repeat_batches = 0;  ///< rank-alignment repeats
  std::uint64_t drawn = 0;
  std::uint64_t delivered = 0;  ///< real ids of batches
  std::uint64_t dropped = 0;    ///< ids of `X` lines
  std::uint64_t pads = 0;
  std::uint64_t repeat_samples = 0;  ///< ids of repeat batches
  std::uint64_t substitutions = 0;
  std::uint64_t missing = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t unexpected = 0;
  std::uint64_t line_issues = 0;  ///< truncated, corrupt, out-of-order and header lines
  std::map<std::string, std::uint64_t> dropped_by{};
  std::map<std::string, std::uint64_t> substituted_by{};
  std::vector<audit_source> sources{};
  std::uint64_t memory_bytes = 0;  ///< the per-id tables of the epoch
  /// Deviations counted but not named (past `max_named`): missing samples, extra deliveries.
  std::uint64_t unnamed = 0;
  bool share_ok = true;

  [[nodiscard]] bool clean() const noexcept {
    return header && missing == 0 && duplicated == 0 && unexpected == 0 && line_issues == 0 &&
           share_ok;
  }
};

/// What the audit found.
struct audit_report {
  std::vector<std::string> files{};
  std::vector<audit_epoch> epochs{};
  std::vector<audit_deviation> deviations{};
  std::uint64_t lines = 0;
  std::uint64_t ids = 0;  ///< sample ids read (every record kind)

  [[nodiscard]] bool clean() const noexcept {
    if (!deviations.empty()) return false;
    for (const audit_epoch& e : epochs)
      if (!e.clean()) return false;
    return true;
  }
};

/// Audits the ledger files `paths` (every rank's; any order). Throws `vbucket::error` when a
/// file cannot be opened or is not a ledger; everything in the files is reported.
[[nodiscard]] audit_report audit_ledgers(std::span<const std::string> paths,
                                         const audit_options& options = {});

/// One deviation as one line, e.g. "epoch 3: sample 17 (source \"web\" row 17): duplicated:
/// drawn 1, delivered or dropped 2: rank 1 step 5 (rank-00001.ledger:12), ...".
[[nodiscard]] std::string format_audit_deviation(const audit_deviation& d);

/// The report: a table per epoch (and per source), then every deviation, then a verdict line.
[[nodiscard]] std::string format_audit_report(const audit_report& r);

}  // namespace vbucket
