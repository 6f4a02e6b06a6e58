#pragma once
/// Records of what a sampler or a loader delivers, for the ledger (`ledger.hpp`): a fixed or
/// packed batch of an epoch plan as a `B` record (`record_of`), a group plan's batch
/// (`group_record`), a loader's substitutions on it, and what an epoch declares (`E`, `S`, `D`
/// and `X` records: `epoch_block_of`, `write_epoch_block`). The ledger's format knows no
/// planner; this header joins the two.
///
///     vbucket::ledger_writer w(vbucket::ledger_file_name(rank));
///     vbucket::write_epoch_block(w, vbucket::epoch_block_of(plan, table.size(),
///     sampler.assign())); w.write(vbucket::record_of(b, plan, {.step = step, .rank = rank, .world
///     = world}));

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t, std::uint32_t
#include <functional>  // std::less
#include <optional>    // std::optional
#include <span>        // std::span
#include <string>      // std::string
#include <utility>     // std::pair, std::move
#include <vector>      // std::vector

#include "ledger.hpp"
#include "vbucket/bucket/batch.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group_plan.hpp"  // group_record
#include "vbucket/plan/packed_plan.hpp"

namespace vbucket {

/// Where a batch was delivered: what a `batch` does not know itself.
struct ledger_context {
  std::uint64_t step = 0;  ///< the run's step (the trainer's global step)
  std::uint32_t stage = 0;
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::uint64_t id_offset = 0;  ///< added to every sample index (the source's `first`)
};

/// The record of a fixed batch of `plan` (pads: the tail of its bucket's last batch; a
/// rank-alignment repeat: all pads). The batch comes from `plan` or a schedule of it (or a
/// loader's `loaded_batch::info`); one whose indices are not the plan's has no pads counted.
[[nodiscard]] inline ledger_batch record_of(const batch& b, const epoch_plan& plan,
                                            const ledger_context& c) {
  ledger_batch r;
  r.epoch = plan.epoch();
  r.step = c.step;
  r.stage = c.stage;
  r.rank = c.rank;
  r.world = c.world;
  r.position = b.position;
  r.bucket = static_cast<std::int64_t>(b.bucket);
  r.repeat = b.repeat;
  r.ids.reserve(b.indices.size());
  for (const std::uint32_t i : b.indices) r.ids.push_back(c.id_offset + i);
  // Pads: the batch is a span of the plan's slots; the last batch of its bucket ends with them.
  if (b.bucket < 0 || static_cast<std::size_t>(b.bucket) >= plan.num_buckets()) return r;
  const plan_bucket& pb = plan.bucket(b.bucket);
  const std::span<const std::uint32_t> slots = plan.slots();
  const std::less<const std::uint32_t*> before;
  if (pb.batch_size != 0 && pb.pads != 0 && !b.indices.empty() &&
      !before(b.indices.data(), slots.data()) &&
      before(b.indices.data(), slots.data() + slots.size())) {
    const auto slot = static_cast<std::uint64_t>(b.indices.data() - slots.data());
    const std::uint64_t local = (slot - pb.slot_begin) / pb.batch_size;
    if (local + 1 == pb.batches) r.pads = static_cast<std::uint32_t>(pb.pads);
  }
  return r;
}

/// The record of a packed batch of epoch `epoch` (packed plans have no pads).
[[nodiscard]] inline ledger_batch record_of(const packed_batch& b, std::uint64_t epoch,
                                            const ledger_context& c) {
  ledger_batch r;
  r.epoch = epoch;
  r.step = c.step;
  r.stage = c.stage;
  r.rank = c.rank;
  r.world = c.world;
  r.position = b.position;
  r.repeat = b.repeat;
  r.ids.reserve(b.indices.size());
  for (const std::uint32_t i : b.indices) r.ids.push_back(c.id_offset + i);
  return r;
}

/// Adds a loader's substitutions to a record: any range of objects with `clip` (slot in the
/// batch), `failed`, `replacement` and `error` (the loader's `substitution`).
template <class Substitutions>
void add_substitutions(ledger_batch& r, const Substitutions& subs, std::uint64_t id_offset = 0) {
  for (const auto& s : subs)
    r.substitutions.push_back({static_cast<std::uint32_t>(s.clip), id_offset + s.failed,
                               id_offset + s.replacement, std::string(s.error)});
}

/// What an epoch declares: the `E` and `S` records, the drawn ids of its listed sources (`D`)
/// and the samples the plan drops, by reason (`X`).
struct ledger_epoch_block {
  ledger_epoch epoch;
  std::vector<ledger_source> sources{};
  std::vector<std::vector<std::uint64_t>> drawn{};  ///< per source: its `D` ids (listed only)
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> dropped{};  ///< (why, ids)
};

/// One source's draws for an epoch of several sources (`epoch_block_of_sources`).
struct ledger_source_draws {
  std::string name;
  std::uint64_t rows = 0;
  bool whole = false;  ///< every row drawn once (declared `draw=all`, no list)
  /// Otherwise: the rows drawn, with multiplicity, in any order (row numbers of the source).
  std::vector<std::uint64_t> drawn{};
  std::optional<double> weight{};
  std::optional<std::uint64_t> count{};
};

/// The first global id of each source: sources are laid out one after the other in the given
/// order (source s's row r is id first[s] + r); the last entry is the id space n.
[[nodiscard]] inline std::vector<std::uint64_t> ledger_first_ids(
    std::span<const ledger_source_draws> sources) {
  std::vector<std::uint64_t> first(sources.size() + 1, 0);
  for (std::size_t s = 0; s < sources.size(); ++s) first[s + 1] = first[s] + sources[s].rows;
  return first;
}

/// The declaration of an epoch drawn from several sources (`ledger_first_ids` lays out the
/// ids); add the drops (`dropped`) before writing it. Throws `vbucket::error` naming the source
/// when a drawn row is not below its rows.
[[nodiscard]] inline ledger_epoch_block epoch_block_of_sources(
    std::uint64_t epoch, std::uint32_t stage, std::span<const ledger_source_draws> sources,
    std::optional<std::uint64_t> seed = std::nullopt) {
  const std::vector<std::uint64_t> first = ledger_first_ids(sources);
  ledger_epoch_block out;
  out.epoch.epoch = epoch;
  out.epoch.stage = stage;
  out.epoch.samples = first.back();
  out.epoch.sources = static_cast<std::uint32_t>(sources.size());
  out.epoch.seed = seed;
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const ledger_source_draws& d = sources[s];
    ledger_source src;
    src.epoch = epoch;
    src.id = static_cast<std::uint32_t>(s);
    src.name = d.name;
    src.first = first[s];
    src.rows = d.rows;
    src.weight = d.weight;
    src.count = d.count;
    std::vector<std::uint64_t> ids;
    if (d.whole) {
      src.draw = ledger_draw::all;
      src.drawn = d.rows;
    } else {
      src.draw = ledger_draw::listed;
      src.drawn = d.drawn.size();
      ids.reserve(d.drawn.size());
      for (const std::uint64_t row : d.drawn) {
        if (row >= d.rows)
          throw error("ledger: source \"" + d.name + "\" draws row " + std::to_string(row) +
                      " of " + std::to_string(d.rows));
        ids.push_back(first[s] + row);
      }
      src.digest = ledger_digest(ids);
    }
    out.sources.push_back(std::move(src));
    out.drawn.push_back(std::move(ids));
  }
  return out;
}

/// The declaration of a plain epoch of one source: every row 0..num_samples-1 drawn once
/// (`draw=all`); the rows in none of the plan's batches dropped, by reason: "unassigned" (no
/// bucket, or invalid metadata), "disabled" (a bucket without a batch size) or "policy" (the
/// drop policy's leftovers), told apart by `assigned` (the epoch's bucket ids, e.g.
/// `sampler.assign()`); without it every such row is "dropped". O(num_samples) bits.
[[nodiscard]] inline ledger_epoch_block epoch_block_of(
    const epoch_plan& plan, std::uint64_t num_samples, std::span<const bucket_id> assigned = {},
    std::string name = "data", std::uint32_t stage = 0, std::uint64_t id_offset = 0) {
  ledger_epoch_block out;
  out.epoch.epoch = plan.epoch();
  out.epoch.stage = stage;
  out.epoch.samples = id_offset + num_samples;
  out.epoch.sources = 1;
  out.epoch.seed = plan.seed();
  std::uint64_t pads = 0;
  for (const plan_bucket& pb : plan.buckets()) pads += pb.pads;
  out.epoch.pads = pads;
  ledger_source s;
  s.epoch = plan.epoch();
  s.id = 0;
  s.name = std::move(name);
  s.first = id_offset;
  s.rows = num_samples;
  s.drawn = num_samples;
  s.weight = 1.0;
  out.sources.push_back(std::move(s));
  out.drawn.emplace_back();

  std::vector<bool> in_plan(static_cast<std::size_t>(num_samples), false);
  for (const plan_bucket& pb : plan.buckets()) {
    const auto region = plan.slots().subspan(static_cast<std::size_t>(pb.slot_begin),
                                             static_cast<std::size_t>(pb.samples));
    for (const std::uint32_t i : region)
      if (i < num_samples) in_plan[i] = true;
  }
  std::vector<std::uint64_t> unassigned, disabled, policy, dropped;
  for (std::uint64_t i = 0; i < num_samples; ++i) {
    if (in_plan[static_cast<std::size_t>(i)]) continue;
    if (assigned.empty() || i >= assigned.size()) {
      dropped.push_back(id_offset + i);
      continue;
    }
    const bucket_id b = assigned[static_cast<std::size_t>(i)];
    if (b < 0 || static_cast<std::size_t>(b) >= plan.num_buckets()) {
      unassigned.push_back(id_offset + i);
    } else if (plan.bucket(b).batch_size == 0) {
      disabled.push_back(id_offset + i);
    } else {
      policy.push_back(id_offset + i);
    }
  }
  if (!unassigned.empty()) out.dropped.emplace_back("unassigned", std::move(unassigned));
  if (!disabled.empty()) out.dropped.emplace_back("disabled", std::move(disabled));
  if (!policy.empty()) out.dropped.emplace_back("policy", std::move(policy));
  if (!dropped.empty()) out.dropped.emplace_back("dropped", std::move(dropped));
  return out;
}

/// Writes an epoch's declaration (`E`, `S`, `D` and `X` lines). Write it once per epoch, from
/// one rank (rank 0) before its first batch of the epoch; written again (on a resume), the
/// audit reads it once.
inline void write_epoch_block(ledger_writer& w, const ledger_epoch_block& b) {
  w.write(b.epoch);
  for (const ledger_source& s : b.sources) w.write(s);
  for (std::size_t s = 0; s < b.sources.size() && s < b.drawn.size(); ++s)
    if (b.sources[s].draw == ledger_draw::listed)
      w.write_drawn(b.epoch.epoch, b.sources[s].id, b.drawn[s]);
  for (const auto& [why, ids] : b.dropped) w.write_dropped(b.epoch.epoch, why, ids);
}

/// The samples a `drop_last` deal leaves out of its incomplete last step (not pads), to write
/// as `X ... why=drop_last` lines when the epoch's last step is delivered (from rank 0, with
/// `first_at` = the position of the first dropped batch).
[[nodiscard]] inline std::vector<std::uint64_t> drop_last_samples(const epoch_schedule& s,
                                                                  std::uint64_t id_offset = 0) {
  std::vector<std::uint64_t> out;
  const epoch_plan& plan = s.plan();
  const std::uint64_t n = plan.num_batches();
  for (std::uint64_t p = n - s.dropped_batches(); p < n; ++p) {
    const batch b = plan.global_batch(p);
    ledger_context c;
    c.id_offset = id_offset;
    const ledger_batch r = record_of(b, plan, c);
    for (std::size_t i = 0; i + r.pads < r.ids.size(); ++i) out.push_back(r.ids[i]);
  }
  return out;
}

/// The ledger record (`ledger.hpp`'s `B`) of what `w` delivers, for `vbucket audit`. A group's
/// batch is one delivery made by its sp ranks together (each holds every sample of it and a
/// 1/sp share of the tokens), so only the group's first rank (sp_rank 0) records it; the other
/// ranks get nullopt. The record: `r` the group's first rank (it writes the record into its own
/// file), `w` = `c.world`, `s` = `c.step` (the trainer's global step), `p` the batch's position
/// in the epoch plan, `b` its bucket, `pad` the tail of its bucket's last batch, `rep=1` a
/// repeat filling the last step (counted, not delivered). A rank's group and shard follow from
/// (plan, world, step): `work(k, rank)`. `c.rank` is not read.
[[nodiscard]] inline std::optional<ledger_batch> group_record(const rank_work& w,
                                                              const group_plan& p,
                                                              ledger_context c) {
  if (w.sp_rank != 0) return std::nullopt;
  c.rank = w.first_rank;
  return record_of(w.batch, p.plan(), c);
}

}  // namespace vbucket
