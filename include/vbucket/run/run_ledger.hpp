#pragma once
/// A run's ledger (ledger.hpp's format, audited by audit.hpp): sample ids are global, source s's
/// rows being ids [first_s, first_s + rows_s) with first_s = the rows of the sources before it.
/// What writes it is one call per batch handed out, before it is handed out:
///
///     vbucket::run_ledger ledger(dir, rank);   // appends to dir/rank-RRRRR.ledger
///     for (;;) { const auto b = run.batch(rank); ledger.record(run, b); train(b); run.advance(); }
///
/// `record` writes, into rank 0's file, the epoch's declaration (`E`, `S`, and the drawn
/// multiset of a listed source as `D` lines) before its first batch of the epoch (again after
/// a resume: the audit reads repeated declarations once), and at the epoch's last step
/// (`run_plan::ends_epoch`) the draws the epoch does not deliver (`X`: unassigned, invalid,
/// dropped); into every rank's file, the batch (`B`). The declaration is written once per run,
/// not once per rank. The pieces (`write_run_epoch`, `run_record`, `write_run_undelivered`)
/// remain for writers of their own.

#include <cstdint>       // std::uint32_t, std::uint64_t
#include <filesystem>    // std::filesystem::create_directories
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <system_error>  // std::error_code
#include <utility>       // std::move
#include <vector>        // std::vector

#include "ledger.hpp"
#include "run_plan.hpp"

namespace vbucket {

/// The first global id of every source (k + 1 entries; the last is the id space).
[[nodiscard]] inline std::vector<std::uint64_t> run_id_bases(const run_plan& run) {
  std::vector<std::uint64_t> out{0};
  for (const run_source& s : run.sources()) out.push_back(out.back() + s.table->size());
  return out;
}

/// The global id of draw p of the current epoch.
[[nodiscard]] inline std::uint64_t run_sample_id(const run_plan& run,
                                                 std::span<const std::uint64_t> bases,
                                                 std::uint64_t p) {
  return bases[run.drawn().source_of(p)] + run.drawn().row(p);
}

/// Writes the current epoch's `E`, `S` and `D` lines (its declaration).
inline void write_run_epoch(ledger_writer& out, const run_plan& run, std::uint64_t seed) {
  const std::vector<std::uint64_t> bases = run_id_bases(run);
  const drawn_epoch& d = run.drawn();
  const std::size_t k = run.sources().size();
  ledger_epoch e;
  e.epoch = run.epoch();
  e.stage = run.epoch_stage();
  e.samples = bases.back();
  e.sources = static_cast<std::uint32_t>(k);
  e.seed = seed;
  out.write(e);
  const draw_spec& spec = run.epoch_draws();
  std::vector<std::vector<std::uint64_t>> listed(k);  // every S line comes before any D line
  for (std::size_t s = 0; s < k; ++s) {
    ledger_source r;
    r.epoch = run.epoch();
    r.id = static_cast<std::uint32_t>(s);
    r.name = run.sources()[s].name;
    r.first = bases[s];
    r.rows = bases[s + 1] - bases[s];
    r.drawn = d.count(s);
    if (!spec.draws.empty() && spec.draws[s].kind == draw_kind::weight)
      r.weight = spec.draws[s].value;
    if (!spec.draws.empty() && spec.draws[s].kind == draw_kind::count) r.count = d.count(s);
    std::vector<std::uint64_t>& ids = listed[s];
    if (d.full(s)) {
      r.draw = ledger_draw::all;
    } else {
      r.draw = ledger_draw::listed;
      ids.reserve(static_cast<std::size_t>(d.count(s)));
      for (std::uint64_t p = d.offsets[s]; p < d.offsets[s + 1]; ++p)
        ids.push_back(bases[s] + d.row(p));
      r.digest = ledger_digest(ids);
    }
    out.write(r);
  }
  for (std::size_t s = 0; s < k; ++s)
    if (!listed[s].empty()) out.write_drawn(run.epoch(), static_cast<std::uint32_t>(s), listed[s]);
}

/// The `B` record of a delivered batch (`bases`: `run_id_bases(run)`).
[[nodiscard]] inline ledger_batch run_record(const run_batch& b,
                                             std::span<const std::uint64_t> bases) {
  ledger_batch r;
  r.epoch = b.epoch;
  r.step = b.step;
  r.stage = b.stage;
  r.rank = b.rank;
  r.world = b.world;
  r.bucket = b.bucket;
  r.pads = b.pads;
  r.repeat = b.repeat;
  r.ids.reserve(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) r.ids.push_back(bases[b.sources[i]] + b.rows[i]);
  return r;
}

/// Writes the `X` lines of the current epoch's draws that it does not deliver.
inline void write_run_undelivered(ledger_writer& out, const run_plan& run) {
  const std::vector<std::uint64_t> bases = run_id_bases(run);
  std::vector<std::uint64_t> unassigned, invalid, dropped;
  for (const std::uint32_t p : run.undelivered()) {
    const bucket_id b = run.drawn_bucket(p);
    (b == no_bucket        ? unassigned
     : b == invalid_sample ? invalid
                           : dropped)
        .push_back(run_sample_id(run, bases, p));
  }
  if (!unassigned.empty()) out.write_dropped(run.epoch(), "unassigned", unassigned);
  if (!invalid.empty()) out.write_dropped(run.epoch(), "invalid", invalid);
  if (!dropped.empty()) out.write_dropped(run.epoch(), "dropped", dropped);
}

/// One rank's ledger of a run: `record` every batch handed out, before it is handed out.
class run_ledger {
 public:
  /// Appends to `dir`/rank-RRRRR.ledger (`dir` is created if need be). Throws
  /// `vbucket::error` naming the directory or file when it cannot be made or opened.
  /// `format`: text (version 1) or binary (version 2, about half the bytes); by default binary,
  /// or the format of the ledger the file already holds (`ledger_writer`).
  run_ledger(const std::string& dir, std::uint32_t rank,
             std::optional<ledger_format> format = std::nullopt)
      : out_(open(dir, rank, format)), rank_(rank), bases_{} {}
  /// Writes to `out`, the file (or sink) of rank `rank`.
  run_ledger(ledger_writer out, std::uint32_t rank) : out_(std::move(out)), rank_(rank) {}

  /// The records of `b`, this rank's batch of the run's current step (see the header), with
  /// the substitutions a loader made in it (global ids).
  void record(const run_plan& run, const run_batch& b,
              std::span<const ledger_substitution> substitutions = {}) {
    if (b.rank != rank_)
      throw error("ledger \"" + out_.path() + "\": a batch of rank " + std::to_string(b.rank) +
                  " in rank " + std::to_string(rank_) + "'s ledger");
    if (headed_ != run.epoch()) {
      if (rank_ == 0) write_run_epoch(out_, run, run.seed());
      headed_ = run.epoch();
      bases_ = run_id_bases(run);
    }
    ledger_batch r = run_record(b, bases_);
    r.substitutions.assign(substitutions.begin(), substitutions.end());
    out_.write(r);
    if (rank_ == 0 && run.ends_epoch()) write_run_undelivered(out_, run);
  }

  /// Takes back every record written by this object (a command that failed).
  void discard() { out_.discard(); }
  [[nodiscard]] ledger_writer& writer() noexcept { return out_; }
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }

 private:
  static ledger_writer open(const std::string& dir, std::uint32_t rank,
                            std::optional<ledger_format> format) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("ledger: cannot make the directory \"" + dir + "\": " + ec.message());
    return ledger_writer((std::filesystem::path(dir) / ledger_file_name(rank)).string(), format);
  }

  ledger_writer out_;
  std::uint32_t rank_;
  std::optional<std::uint64_t> headed_{};
  std::vector<std::uint64_t> bases_{};
};

}  // namespace vbucket
