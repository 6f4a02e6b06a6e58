#pragma once
/// A run's ledger (ledger.hpp's format, audited by audit.hpp): sample ids are global, source s's
/// rows being ids [first_s, first_s + rows_s) with first_s = the rows of the sources before it.
///  - `write_run_epoch`: the current epoch's `E` line and each source's `S` line (draw=all for a
///    source drawn every row once, else listed with its drawn multiset as `D` lines). Every
///    rank writes them at the start of each epoch and again after a resume (the audit reads
///    repeated header lines once).
///  - `run_record`: the `B` line of a delivered `run_batch`.
///  - `write_run_undelivered`: the `X` lines of the draws the epoch does not deliver (why:
///    unassigned, invalid, dropped), at the epoch's last step (`run.steps_left() == 1`), once
///    (rank 0).
///
///     vbucket::ledger_writer out(dir + "/" + vbucket::ledger_file_name(rank));
///     vbucket::write_run_epoch(out, run);
///     out.write(vbucket::run_record(run.batch(rank), run));

#include <cstdint>  // std::uint32_t, std::uint64_t
#include <span>     // std::span
#include <vector>   // std::vector

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

/// Writes the current epoch's `E`, `S` and `D` lines.
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

}  // namespace vbucket
