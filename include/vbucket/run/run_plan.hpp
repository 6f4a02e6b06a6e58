#pragma once
/// The training run as one plan (`run_plan`): several sources drawn by weight, a schedule of
/// stages, and changes mid-run — world size, batch sizes, a stage's config, weights, an
/// out-of-memory step — that keep every drawn sample of an epoch delivered exactly once.
///
/// An epoch is the drawn list of (source, row) (`draw_epoch`, run_sources.hpp), drawn under the
/// draw spec of the stage in force at the epoch's first step (a stage that starts mid-epoch
/// changes the draws from the next epoch on). Its batches come from the planning core
/// (`make_epoch_plan` / `make_packed_plan` over the drawn samples' buckets): a batch holds
/// samples of one bucket, of any sources.
///
/// Segments. An epoch is a chain of segments. A segment has settings (`segment_settings`: its
/// stage, policy, step balance, batching and budget, every (resolution, frames) pair's batch
/// size, and a hash of what assigns samples to buckets) and plans the samples the segments
/// before it did not deliver. When the settings in force change at a step boundary (a stage
/// starts, an out-of-memory call lowers a batch size, a state is loaded under other settings),
/// the segment ends: the samples delivered are the real (not pad) slots of its plan's first
/// `consumed` global batches, and the next segment plans the rest (`make_epoch_plan` over the
/// remaining subset). A world-size change is no segment: the plan is dealt again from the
/// same position (`epoch_plan::deal`), which is exact by itself.
///
/// The state line ("vbucket-run v=1 ..."; `state()` / `load()`) holds the run's position, each
/// source's name, rows and table fingerprint, the current epoch's draw spec, the batch-size
/// caps, and each segment of the current epoch as its settings in full but the bucket config,
/// which comes from the stage schedule supplied again (checked against the recorded hash), and
/// where it ended. So a run resumes from the line alone plus its sources and stages; loaded
/// under other settings (world, batch sizes, another current stage, other weights) it goes on
/// with exactly the current epoch's samples not yet delivered; it refuses, naming what
/// differs, only another seed, other sources' metadata, or a stage that already planned a
/// segment of this epoch whose buckets, probabilities or rules changed (add a new stage instead).
///
///     vbucket::run_plan run(sources, stages, {.seed = 42, .world = 8});
///     run.load(saved);                          // optional
///     while (run.epoch() < epochs) {
///       train(run.batch(rank));                 // a run_batch: (source, row) of every sample
///       if (oom_agreed) { run.out_of_memory(); continue; }  // every rank, same step
///       run.advance();
///       save(run.state());
///     }

#include <algorithm>     // std::min, std::max
#include <array>         // std::array (the state's fields)
#include <bit>           // std::bit_cast, std::popcount, std::countr_zero
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstdint>       // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>        // std::numeric_limits
#include <memory>        // std::make_unique_for_overwrite
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <variant>       // std::variant
#include <vector>        // std::vector

#include "run_sources.hpp"
#include "run_spec.hpp"  // run_spec::check_value (the field table's ranges), max_run_world
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_options.hpp"
#include "vbucket/plan/plan_state.hpp"  // plan_state::hex, parse_hex, budget_text
#include "vbucket/plan/run_memory.hpp"

namespace vbucket {

/// One stage of a run: from a step (or the first step of an epoch) on.
struct run_stage {
  std::string name{};
  std::uint64_t from_step = 0;
  std::optional<std::uint64_t> from_epoch{};  ///< set: starts at this epoch's first step instead
  bucket_config config{};                     ///< buckets and batch sizes
  draw_spec draws{};                          ///< weights, counts or repeats of the sources
  incomplete_policy policy = defaults::policy;
  std::uint32_t balance_group = 0;
  batching_mode batching = batching_mode::fixed;
  double token_budget = 0.0;  ///< packed batching's budget
};

/// Throws `vbucket::error` ("WHERE: stage 2 (\"B\") ...") unless the stages are listed in the
/// order they start: stage 0 at step 0, each later stage after the last earlier one of its kind
/// (from a step or from an epoch; stage 0 is both), and none with both `from_step` and
/// `from_epoch`. A stage out of order, or from the step of another, would never be in force.
inline void check_stage_order(std::span<const run_stage> stages, const std::string& where) {
  std::uint64_t last_step = 0, last_epoch = 0;
  std::size_t step_stage = 0, epoch_stage = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const run_stage& st = stages[i];
    const auto name = [&](std::size_t j) {
      return "stage " + std::to_string(j) + " (\"" + stages[j].name + "\")";
    };
    if (i == 0) {
      if (st.from_step != 0 || st.from_epoch.value_or(0) != 0)
        throw error(where + ": " + name(0) + " must start at step 0");
      continue;
    }
    if (st.from_epoch && st.from_step != 0)
      throw error(where + ": " + name(i) + " has both from_step " + std::to_string(st.from_step) +
                  " and from_epoch " + std::to_string(*st.from_epoch) + " (give one)");
    const bool by_epoch = st.from_epoch.has_value();
    const std::uint64_t at = by_epoch ? *st.from_epoch : st.from_step;
    const std::uint64_t last = by_epoch ? last_epoch : last_step;
    const std::size_t before = by_epoch ? epoch_stage : step_stage;
    const std::string unit = by_epoch ? "epoch " : "step ";
    if (at <= last)
      throw error(where + ": " + name(i) + " starts at " + unit + std::to_string(at) + ", " +
                  (at == last ? "as " : "before ") + name(before) + " (at " + unit +
                  std::to_string(last) +
                  "): stages are listed in the order they start, each after the one before");
    (by_epoch ? last_epoch : last_step) = at;
    (by_epoch ? epoch_stage : step_stage) = i;
  }
}

/// Run-wide options.
struct run_options {
  std::uint64_t seed = defaults::seed;
  std::uint32_t world = defaults::world;
  bool drop_last = false;
  unsigned threads = 0;
};

/// One delivered batch: what the ledger records.
struct run_batch {
  std::uint64_t step = 0;  ///< the run's step
  std::uint64_t epoch = 0;
  std::uint32_t stage = 0;
  std::uint32_t segment = 0;  ///< segment of the epoch
  std::uint32_t rank = 0;
  std::uint32_t world = 1;
  std::uint64_t position = 0;    ///< global position in the segment's plan
  bucket_id bucket = no_bucket;  ///< fixed batching: its bucket; packed: the first entry's
  std::int64_t frames = 0, height = 0, width = 0;
  std::vector<std::uint32_t> sources;  ///< per entry
  std::vector<std::uint32_t> rows;     ///< per entry: row of its source's table
  std::vector<std::uint32_t> drawn;    ///< per entry: position in the epoch's drawn list
  std::vector<bucket_id> buckets;      ///< per entry (packed: may differ)
  std::uint32_t pads = 0;              ///< the last `pads` entries repeat samples of the bucket
  bool repeat = false;                 ///< a rank-alignment repeat: every entry is a repeat
  [[nodiscard]] std::size_t size() const noexcept { return rows.size(); }
};

/// What plans a segment, besides the samples (see the header comment).
struct segment_settings {
  std::uint32_t stage = 0;
  incomplete_policy policy = defaults::policy;
  std::uint32_t balance_group = 0;
  batching_mode batching = batching_mode::fixed;
  double token_budget = 0.0;
  std::vector<std::int64_t> batch_sizes;  ///< per pair (`pair_batch_sizes` order)
  std::uint64_t assign_hash = 0;          ///< buckets, probabilities, rules
  friend bool operator==(const segment_settings&, const segment_settings&) = default;

  /// "STAGE:POLICY:BALANCE:fixed|packed=B:BS-BS-...:HASH".
  [[nodiscard]] std::string to_string() const {
    std::string s = std::to_string(stage) + ':' + std::string(policy_name(policy)) + ':' +
                    std::to_string(balance_group) + ':';
    s += batching == batching_mode::packed ? "packed=" + plan_state::budget_text(token_budget)
                                           : std::string("fixed");
    s += ':';
    for (std::size_t i = 0; i < batch_sizes.size(); ++i)
      s += (i ? "-" : "") + std::to_string(batch_sizes[i]);
    return s + ':' + plan_state::hex(assign_hash);
  }
  /// Parses `to_string()`'s form; every number in range (the balance group through the run
  /// spec's field table, batch sizes to `bucket_config::max_batch`, a packed budget finite and
  /// > 0). Throws `vbucket::error` naming the text and the part that is wrong.
  static segment_settings parse(std::string_view text) {
    auto fail = [&](const std::string& why) -> segment_settings {
      throw error("run state: segment \"" + std::string(text) + "\": " + why);
    };
    std::vector<std::string_view> f;
    for (std::size_t pos = 0;;) {
      const std::size_t e = text.find(':', pos);
      f.push_back(text.substr(pos, e == std::string_view::npos ? e : e - pos));
      if (e == std::string_view::npos) break;
      pos = e + 1;
    }
    if (f.size() != 6) return fail("expected STAGE:POLICY:BALANCE:fixed|packed=B:BS-...:HASH");
    segment_settings s;
    const auto stage = detail::parse_uint_in(f[0], 0, std::numeric_limits<std::uint32_t>::max());
    if (!stage) return fail("stage \"" + std::string(f[0]) + "\" is not an integer below 2^32");
    s.stage = static_cast<std::uint32_t>(*stage);
    if (const std::string why = run_spec::check_value("policy", f[1]); !why.empty())
      return fail("policy: " + why);
    s.policy = *parse_policy(f[1]);
    if (const std::string why = run_spec::check_value("balance_group", f[2]); !why.empty())
      return fail("balance group: " + why);
    s.balance_group = static_cast<std::uint32_t>(*detail::parse_uint_in(f[2], 0, max_run_world));
    if (f[3] == "fixed") {
      s.batching = batching_mode::fixed;
    } else if (f[3].substr(0, 7) == "packed=") {
      s.batching = batching_mode::packed;
      const auto b = detail::parse_positive(f[3].substr(7));
      if (!b)
        return fail("token budget \"" + std::string(f[3].substr(7)) + "\" is not a number > 0");
      s.token_budget = *b;
    } else {
      return fail("batching \"" + std::string(f[3]) + "\" is not fixed or packed=B");
    }
    for (std::size_t pos = 0; pos <= f[4].size() && !f[4].empty();) {
      const std::size_t e = std::min(f[4].find('-', pos), f[4].size());
      const std::string_view v = f[4].substr(pos, e - pos);
      const auto bs = detail::parse_uint_in(v, 0, bucket_config::max_batch);
      if (!bs)
        return fail("batch size \"" + std::string(v) + "\" is not an integer from 0 to " +
                    std::to_string(bucket_config::max_batch));
      s.batch_sizes.push_back(static_cast<std::int64_t>(*bs));
      pos = e + 1;
    }
    s.assign_hash = plan_state::parse_hex(f[5], "run state: segment hash");
    return s;
  }
};

/// A batch-size cap of a (resolution, frames) pair, for the rest of the run (out of memory).
struct batch_size_cap {
  std::string resolution;
  std::int64_t frames = 0;
  std::int64_t batch_size = 0;
  friend bool operator==(const batch_size_cap&, const batch_size_cap&) = default;
};

/// A training run as one plan; see the header comment. Every rank builds the same run and makes
/// the same calls at the same steps (`advance`, `set_world`, `out_of_memory`).
class run_plan {
 public:
  /// Throws `vbucket::error` naming the source or stage that is not valid.
  run_plan(std::vector<run_source> sources, std::vector<run_stage> stages, run_options options = {})
      : sources_(std::move(sources)), stages_(std::move(stages)), opts_(options) {
    if (sources_.empty()) throw error("run: no sources");
    if (stages_.empty()) throw error("run: no stages");
    if (opts_.world == 0) throw error("run: world size must be at least 1");
    pos_.world = opts_.world;
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      const run_source& src = sources_[s];
      check_name("source", src.name);
      if (!src.table) throw error("run: source \"" + src.name + "\" has no table");
      if (!src.assign) throw error("run: source \"" + src.name + "\" has no rule");
      for (std::size_t t = 0; t < s; ++t)
        if (sources_[t].name == src.name)
          throw error("run: two sources named \"" + src.name + "\"");
      fingerprints_.push_back(table_fingerprint(*src.table, opts_.threads));
    }
    check_stage_order(stages_, "run");
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      const run_stage& st = stages_[i];
      const std::string where = "run: stage " + std::to_string(i) + " (\"" + st.name + "\")";
      if (st.config.num_buckets() == 0) throw error(where + " has no bucket config");
      if (st.batching == batching_mode::packed && !(st.token_budget > 0.0))
        throw error(where + ": packed batching needs a token budget > 0");
      if (!st.draws.draws.empty() && st.draws.draws.size() != sources_.size())
        throw error(where + ": " + std::to_string(st.draws.draws.size()) + " draws for " +
                    std::to_string(sources_.size()) + " sources");
      for (const run_source& src : sources_)
        if (src.config) check_layout(*src.config, st.config, src.name, where);
    }
    begin_epoch(0);
  }

  // --- position ---------------------------------------------------------------------------
  [[nodiscard]] std::uint64_t epoch() const noexcept { return pos_.epoch; }
  /// The run's step: steps delivered since the run began (all epochs).
  [[nodiscard]] std::uint64_t step() const noexcept { return pos_.step; }
  /// The stage of the current segment.
  [[nodiscard]] std::uint32_t stage() const noexcept { return pos_.cur.stage; }
  [[nodiscard]] std::uint32_t world() const noexcept { return pos_.world; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return opts_.seed; }
  /// Segments of the current epoch before the current one.
  [[nodiscard]] std::size_t closed_segments() const noexcept { return pos_.closed.size(); }
  [[nodiscard]] const segment_settings& settings() const noexcept { return pos_.cur; }
  [[nodiscard]] const drawn_epoch& drawn() const noexcept { return pos_.drawn; }
  [[nodiscard]] std::span<const run_source> sources() const noexcept { return sources_; }
  [[nodiscard]] std::span<const run_stage> stages() const noexcept { return stages_; }
  [[nodiscard]] std::span<const std::uint64_t> fingerprints() const noexcept {
    return fingerprints_;
  }
  [[nodiscard]] std::span<const batch_size_cap> caps() const noexcept { return pos_.caps; }
  /// The schedule the current step's batches come from (the current segment's plan dealt to
  /// the current world), and the current step's place in it: what a loader over the run
  /// follows (`run_loader`). It changes when `deals()` does.
  [[nodiscard]] const std::variant<epoch_schedule, packed_schedule>& schedule() const noexcept {
    return pos_.sched;
  }
  [[nodiscard]] std::uint64_t step_in_schedule() const noexcept { return step_in_deal(); }
  /// A count of the schedules the run has dealt (a new segment, world, epoch or state each
  /// deal again): a loader that follows `schedule()` follows it while this count stays.
  [[nodiscard]] std::uint64_t deals() const noexcept { return deals_; }
  /// The samples of the current segment's plan (its sample indices are below).
  [[nodiscard]] std::size_t segment_size() const noexcept {
    return pos_.all ? pos_.drawn.size() : pos_.remaining.size();
  }
  /// The drawn position (in `drawn()`) of sample `i` of the current segment's plan.
  [[nodiscard]] std::uint32_t segment_draw(std::uint32_t i) const noexcept {
    return pos_.all ? i : pos_.remaining[i];
  }
  /// Steps left in the current epoch under the current world and settings (the current one
  /// included).
  [[nodiscard]] std::uint64_t steps_left() const noexcept { return steps_total() - step_in_deal(); }
  /// Samples the current epoch drew from source s.
  [[nodiscard]] std::uint64_t drawn_from(std::size_t s) const noexcept {
    return pos_.drawn.count(s);
  }
  /// The current segment's plan (fixed batching).
  [[nodiscard]] const epoch_plan* fixed_plan() const noexcept {
    return std::get_if<epoch_plan>(&pos_.plan);
  }
  [[nodiscard]] const packed_plan* packed() const noexcept {
    return std::get_if<packed_plan>(&pos_.plan);
  }

  /// The stage in force at the current epoch's first step (whose draws the epoch drew).
  [[nodiscard]] std::uint32_t epoch_stage() const noexcept {
    return pos_.closed.empty() ? pos_.cur.stage : pos_.closed.front().settings.stage;
  }
  /// The current epoch's draw spec.
  [[nodiscard]] const draw_spec& epoch_draws() const noexcept { return pos_.draw; }
  /// The bucket of draw p under the current segment's assignment (no_bucket: unassigned,
  /// invalid_sample: unusable metadata).
  [[nodiscard]] bucket_id drawn_bucket(std::uint64_t p) const noexcept {
    return pos_.ids[static_cast<std::size_t>(p)];
  }
  /// The draws of the current epoch not delivered once the current step is, as far as the
  /// current segment goes: unassigned or invalid samples, samples dropped by the policy, a
  /// disabled bucket, packing (oversized) or drop_last, and the samples of its batches after
  /// the current step. Final at the epoch's last step (`ends_epoch()`).
  [[nodiscard]] std::vector<std::uint32_t> undelivered() const {
    const std::uint64_t dropped =
        std::visit([](const auto& s) { return s.dropped_batches(); }, pos_.sched);
    const std::uint64_t planned =
        std::visit([&](const auto& p) { return p.num_batches() - dropped; }, pos_.plan);
    return not_in(delivered_in_plan(std::min(planned, pos_.consumed + pos_.world)));
  }
  /// Whether `advance()` from the current step begins the next epoch: the current step is the
  /// last of the epoch's plan, or the next step starts a stage that leaves the epoch's remaining
  /// samples no batch. (At a stage change the next segment is planned on a copy to know.)
  [[nodiscard]] bool ends_epoch() const {
    if (steps_left() <= 1) return true;
    if (stage_at(pos_.step + 1) == pos_.cur.stage) return false;  // the same settings go on
    run_plan next(*this);
    next.pos_.consumed += next.pos_.world;
    ++next.pos_.step;
    next.close_segment();
    next.pos_.cur = next.settings_at();
    next.make_plan();
    next.deal();
    return next.steps_total() == 0;
  }

  // --- batches ----------------------------------------------------------------------------
  /// The current step's batch of `rank` (< world()).
  [[nodiscard]] run_batch batch(std::uint32_t rank) const {
    if (rank >= pos_.world)
      throw error("run: rank " + std::to_string(rank) + " is outside world " +
                  std::to_string(pos_.world));
    run_batch out;
    out.step = pos_.step;
    out.epoch = pos_.epoch;
    out.stage = pos_.cur.stage;
    out.segment = static_cast<std::uint32_t>(pos_.closed.size());
    out.rank = rank;
    out.world = pos_.world;
    const std::uint64_t k = step_in_deal();
    std::span<const std::uint32_t> idx;
    if (const auto* s = std::get_if<epoch_schedule>(&pos_.sched)) {
      const vbucket::batch b = s->at(k, rank);
      const plan_bucket& pb = std::get<epoch_plan>(pos_.plan).bucket(b.bucket);
      out.position = b.position;
      out.bucket = b.bucket;
      out.frames = b.frames;
      out.height = b.height;
      out.width = b.width;
      out.repeat = b.repeat;
      idx = b.indices;
      const std::uint64_t off =
          static_cast<std::uint64_t>(b.indices.data() -
                                     std::get<epoch_plan>(pos_.plan).slots().data()) -
          pb.slot_begin;
      const std::uint64_t end = off + b.indices.size();
      if (end > pb.samples) out.pads = static_cast<std::uint32_t>(end - std::max(off, pb.samples));
      out.buckets.assign(idx.size(), b.bucket);
    } else {
      const packed_batch b = std::get<packed_schedule>(pos_.sched).at(k, rank);
      out.position = b.position;
      out.repeat = b.repeat;
      idx = b.indices;
      out.buckets.assign(b.buckets.begin(), b.buckets.end());
      if (!out.buckets.empty()) {
        out.bucket = out.buckets[0];
        const sample_shape sh = b.shape(0);
        out.frames = sh.frames;
        out.height = sh.height;
        out.width = sh.width;
      }
    }
    out.sources.reserve(idx.size());
    out.rows.reserve(idx.size());
    out.drawn.reserve(idx.size());
    for (const std::uint32_t i : idx) {
      const std::uint32_t p = pos_.all ? i : pos_.remaining[i];
      const std::uint32_t s = pos_.drawn.source_of(p);
      out.drawn.push_back(p);
      out.sources.push_back(s);
      out.rows.push_back(pos_.drawn.row(p));
    }
    return out;
  }
  /// The current step's batches of every rank.
  [[nodiscard]] std::vector<run_batch> step_batches() const {
    std::vector<run_batch> out;
    for (std::uint32_t r = 0; r < pos_.world; ++r) out.push_back(batch(r));
    return out;
  }

  // --- changes ----------------------------------------------------------------------------
  /// The current step was trained on: move to the next (and the next epoch after the last).
  void advance() {
    pos_.consumed += pos_.world;
    ++pos_.step;
    if (step_in_deal() >= steps_total()) {
      begin_epoch(pos_.epoch + 1);
    } else {
      follow_settings();
    }
  }
  /// Begins epoch `e` at the current step (what was left of the current epoch is not
  /// delivered), e.g. to start a run at a given epoch.
  void start_epoch(std::uint64_t e) { begin_epoch(e); }
  /// From the current step on, `world` ranks (every rank calls it at the same step).
  void set_world(std::uint32_t world) {
    if (world == 0) throw error("run: world size must be at least 1");
    pos_.world = world;
    deal();
  }
  /// Every rank calls it, at the same step, after the trainer agreed that the current step ran
  /// out of memory on `ranks` (empty: all). The step is not delivered: the batch size of each
  /// of those ranks' (resolution, frames) pairs is multiplied by `factor` (rounded down, at
  /// least 1) for the rest of the run — packed batching: the token budget — and the samples of
  /// the epoch not yet delivered, those of the failed step included, are planned again. Throws
  /// `vbucket::error` when a batch size is already 1 or factor is not in (0, 1).
  void out_of_memory(std::span<const std::uint32_t> ranks = {}, double factor = 0.5) {
    if (!(factor > 0.0 && factor < 1.0))
      throw error("run: out-of-memory factor must be in (0, 1), got " + detail::exact_text(factor));
    std::vector<std::uint32_t> all;
    if (ranks.empty()) {
      for (std::uint32_t r = 0; r < pos_.world; ++r) all.push_back(r);
      ranks = all;
    }
    if (pos_.cur.batching == batching_mode::packed) {
      pos_.budget_cap = pos_.cur.token_budget * factor;
    } else {
      const bucket_config& cfg = stages_[pos_.cur.stage].config;
      for (const std::uint32_t r : ranks) {
        const run_batch b = batch(r);
        const auto key = cfg.key(b.bucket);
        const resolution_entry& res = cfg.resolutions()[static_cast<std::size_t>(key.resolution)];
        const std::int64_t frames = res.frames[static_cast<std::size_t>(key.frames_index)].frames;
        const std::int64_t now = pos_.cur.batch_sizes[pair_index(cfg, key)];
        if (now <= 1)
          throw error("run: out of memory at step " + std::to_string(pos_.step) + " in bucket " +
                      res.info.name + " -> " + std::to_string(frames) +
                      " whose batch size is already 1");
        const auto lower =
            std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(now) * factor));
        cap_batch_size(res.info.name, frames, std::min(lower, now - 1), false);
      }
    }
    follow_settings();
  }
  /// Caps the batch size of the pair (resolution, frames) at `batch_size` for the rest of the
  /// run (every stage that has the pair), from the current step on.
  void cap_batch_size(std::string_view resolution, std::int64_t frames, std::int64_t batch_size) {
    cap_batch_size(resolution, frames, batch_size, true);
  }

  // --- state ------------------------------------------------------------------------------
  /// The run's state line (see the header comment):
  /// "vbucket-run v=1 seed=S epoch=E step=K epoch_step=K0 world=W consumed=C
  ///  sources=NAME:ROWS:FP,... draw=SPEC drawn=C0,C1 caps=RES/FRAMES=BS,...|- budget_cap=B|-
  ///  segs=SETTINGS@END|...|- cur=SETTINGS check=HASH" (check: a hash of the line before it).
  [[nodiscard]] std::string state() const {
    std::string s = "vbucket-run v=1 seed=" + std::to_string(opts_.seed) +
                    " epoch=" + std::to_string(pos_.epoch) + " step=" + std::to_string(pos_.step) +
                    " epoch_step=" + std::to_string(pos_.epoch_step) +
                    " world=" + std::to_string(pos_.world) +
                    " consumed=" + std::to_string(pos_.consumed) + " sources=";
    for (std::size_t i = 0; i < sources_.size(); ++i)
      s += (i ? "," : "") + sources_[i].name + ':' + std::to_string(sources_[i].table->size()) +
           ':' + plan_state::hex(fingerprints_[i]);
    s += " draw=" + pos_.draw.to_string() + " drawn=";
    for (std::size_t i = 0; i < sources_.size(); ++i)
      s += (i ? "," : "") + std::to_string(pos_.drawn.count(i));
    s += " caps=";
    for (std::size_t i = 0; i < pos_.caps.size(); ++i)
      s += (i ? "," : "") + pos_.caps[i].resolution + '/' + std::to_string(pos_.caps[i].frames) +
           '=' + std::to_string(pos_.caps[i].batch_size);
    if (pos_.caps.empty()) s += '-';
    s += " budget_cap=" +
         (pos_.budget_cap ? plan_state::budget_text(*pos_.budget_cap) : std::string("-"));
    s += " segs=";
    for (std::size_t i = 0; i < pos_.closed.size(); ++i)
      s += (i ? "|" : "") + pos_.closed[i].settings.to_string() + '@' +
           std::to_string(pos_.closed[i].end);
    if (pos_.closed.empty()) s += '-';
    s += " cur=" + pos_.cur.to_string();
    return s + " check=" + plan_state::hex(detail::hash_bytes(s));
  }

  /// Continues from a state line saved by a run of the same sources (and seed) under any
  /// world size, batch sizes, current stage or weights. The world is the one the state was
  /// saved under (`world=`), whatever this run was made with: call `set_world` after `load` to
  /// go on under another. Throws `vbucket::error` naming what differs when it cannot: another
  /// seed, a source's metadata, or a stage whose buckets, probabilities or rule changed after
  /// it planned a segment of the saved epoch. The line is read as strictly as a plan state:
  /// every field known and given once, each in range (the run spec's fields through its field
  /// table), and the line as its `check` says it was written. A refused line leaves the run as
  /// it was (the strong guarantee): the line is read and checked first, and the position it
  /// gives is computed in place of the run's own, which is put back when that fails.
  void load(std::string_view text) {
    loaded_state st = parse_state(text);
    position saved = std::move(pos_);
    try {
      apply_state(std::move(st));
    } catch (...) {
      pos_ = std::move(saved);
      ++deals_;  // the schedule is the saved one again, but a loader may have followed another
      throw;
    }
  }

 private:
  struct closed_segment {
    segment_settings settings;
    std::uint64_t end = 0;
  };
  /// A state line, read and checked (`parse_state`), not yet applied.
  struct loaded_state {
    std::uint64_t epoch = 0, step = 0, epoch_step = 0, consumed = 0;
    std::uint32_t world = 1;
    std::vector<batch_size_cap> caps;
    std::optional<double> budget_cap;
    draw_spec draw;
    std::vector<std::uint64_t> drawn;
    std::vector<closed_segment> segs;
    segment_settings cur;
  };
  /// The position in the run: all that `load` changes (and puts back when it fails).
  struct position {
    std::uint32_t world = 1;
    std::uint64_t epoch = 0, step = 0, epoch_step = 0;
    std::vector<batch_size_cap> caps;
    std::optional<double> budget_cap;
    draw_spec draw;
    drawn_epoch drawn;
    std::vector<bucket_id> ids;
    std::optional<std::uint64_t> ids_hash;
    std::vector<closed_segment> closed;
    segment_settings cur;
    std::vector<std::uint32_t> remaining;  // drawn positions left, when !all
    bool all = true;
    std::variant<epoch_plan, packed_plan> plan;
    std::variant<epoch_schedule, packed_schedule> sched = epoch_schedule(epoch_plan(), 1, 0, false);
    std::uint64_t consumed = 0;
    std::uint64_t dealt_at = 0;
  };
  /// Reads and checks a state line against this run (see `load`); changes nothing.
  [[nodiscard]] loaded_state parse_state(std::string_view text) const {
    const auto fail = [](const std::string& why) { throw error("run state: " + why); };
    constexpr std::string_view head = "vbucket-run ";
    if (text.substr(0, head.size()) != head)
      fail("expected a line starting with \"vbucket-run v=1\"");
    constexpr std::array<std::string_view, 15> names = {
        "v",    "seed",  "epoch", "step",       "epoch_step", "world", "consumed", "sources",
        "draw", "drawn", "caps",  "budget_cap", "segs",       "cur",   "check"};
    std::array<std::optional<std::string_view>, names.size()> value{};
    std::size_t check_at = text.size();  // where " check=" begins
    for (std::size_t pos = head.size(); pos <= text.size();) {
      const std::size_t e = std::min(text.find(' ', pos), text.size());
      const std::string_view f = text.substr(pos, e - pos);
      if (f.empty()) fail("fields must be separated by one space");
      const std::size_t eq = f.find('=');
      if (eq == std::string_view::npos) fail("field \"" + std::string(f) + "\" has no '='");
      const std::string_view key = f.substr(0, eq);
      std::size_t k = 0;
      while (k < names.size() && names[k] != key) ++k;
      if (k == names.size()) fail("unknown field \"" + std::string(key) + "\"");
      if (value[k]) fail("duplicate field \"" + std::string(key) + "\"");
      value[k] = f.substr(eq + 1);
      if (key == "check") check_at = pos - 1;
      pos = e + 1;
    }
    const auto get = [&](std::string_view key) -> std::string_view {
      std::size_t k = 0;
      while (names[k] != key) ++k;
      if (!value[k]) fail("missing field \"" + std::string(key) + "\"");
      return *value[k];
    };
    // The run spec's fields, through its field table; the others are counts.
    const auto field = [&](std::string_view key) {
      const std::string_view v = get(key);
      if (const std::string why = run_spec::check_value(key, v); !why.empty())
        fail(std::string(key) + ": " + why);
      return v;
    };
    const auto count = [&](std::string_view key) {
      const std::string_view v = get(key);
      const auto n = detail::parse_uint_in(v, 0, std::numeric_limits<std::uint64_t>::max());
      if (!n)
        fail(std::string(key) + " must be a non-negative integer below 2^64, got \"" +
             std::string(v) + "\"");
      return *n;
    };
    if (get("v") != "1")
      fail("version " + std::string(get("v")) + " is not 1 (this library reads version 1)");
    loaded_state st;
    const std::string_view seed = field("seed");
    st.epoch = *detail::parse_uint_in(field("epoch"), 0, std::numeric_limits<std::uint64_t>::max());
    st.world = static_cast<std::uint32_t>(*detail::parse_uint_in(field("world"), 1, max_run_world));
    st.step = count("step");
    st.epoch_step = count("epoch_step");
    st.consumed = count("consumed");
    if (st.epoch_step > st.step)
      fail("epoch_step=" + std::to_string(st.epoch_step) + " is after step=" +
           std::to_string(st.step) + " (the epoch cannot begin after the run's step)");
    for (const std::string_view c : split(get("caps") == "-" ? "" : get("caps"), ',')) {
      if (c.empty()) break;
      const std::size_t slash = c.rfind('/'), eq = c.rfind('=');
      if (slash == std::string_view::npos || eq == std::string_view::npos || eq < slash)
        fail("cap \"" + std::string(c) + "\" is not RES/FRAMES=BS");
      batch_size_cap cap;
      cap.resolution = std::string(c.substr(0, slash));
      const auto fr = detail::parse_uint_in(c.substr(slash + 1, eq - slash - 1), 1, 1ULL << 31);
      const auto bs = detail::parse_uint_in(c.substr(eq + 1), 1, bucket_config::max_batch);
      if (cap.resolution.empty() || !fr || !bs)
        fail("cap \"" + std::string(c) +
             "\" is not RES/FRAMES=BS (frames and a batch size from 1 to " +
             std::to_string(bucket_config::max_batch) + ")");
      cap.frames = static_cast<std::int64_t>(*fr);
      cap.batch_size = static_cast<std::int64_t>(*bs);
      for (const batch_size_cap& other : st.caps)
        if (other.resolution == cap.resolution && other.frames == cap.frames)
          fail("cap \"" + std::string(c) + "\": a second cap of the same pair");
      st.caps.push_back(std::move(cap));
    }
    if (get("budget_cap") != "-") {
      const auto b = detail::parse_positive(get("budget_cap"));
      if (!b)
        fail("budget_cap must be a finite number > 0 or -, got \"" +
             std::string(get("budget_cap")) + "\"");
      st.budget_cap = *b;
    }
    try {
      st.draw = draw_spec::parse(get("draw"));
    } catch (const error& e) {
      fail(e.what());
    }
    const std::vector<std::string_view> drawn = split(get("drawn"), ',');
    if (drawn.size() != sources_.size())
      fail("drawn=" + std::string(get("drawn")) + " has " + std::to_string(drawn.size()) +
           " counts for " + std::to_string(sources_.size()) + " sources");
    for (const std::string_view d : drawn) {
      const auto n = detail::parse_uint_in(d, 0, std::numeric_limits<std::uint32_t>::max());
      if (!n) fail("drawn count \"" + std::string(d) + "\" is not an integer below 2^32");
      st.drawn.push_back(*n);
    }
    if (get("segs") != "-")
      for (const std::string_view sg : split(get("segs"), '|')) {
        const std::size_t at = sg.rfind('@');
        if (at == std::string_view::npos) fail("segment \"" + std::string(sg) + "\" has no @END");
        const auto end =
            detail::parse_uint_in(sg.substr(at + 1), 1, std::numeric_limits<std::uint64_t>::max());
        if (!end)
          fail("segment \"" + std::string(sg) +
               "\": END is not an integer ≥ 1 (a closed segment delivered a batch)");
        st.segs.push_back({segment_settings::parse(sg.substr(0, at)), *end});
      }
    st.cur = segment_settings::parse(get("cur"));
    // Another run's seed is named first (an edited one as well), then the line as written: an
    // edited field (an epoch, a count) is not another valid state.
    if (seed != std::to_string(opts_.seed))
      fail("saved with seed " + std::string(seed) + " but this run's seed is " +
           std::to_string(opts_.seed) + ": the draws and plans differ");
    const std::string_view check = get("check");
    if (check_at + 7 + check.size() != text.size()) fail("check must be the last field");
    if (plan_state::parse_hex(check, "run state: check") !=
        detail::hash_bytes(text.substr(0, check_at)))
      fail("the line does not match its check=" + std::string(check) +
           " (edited or damaged: a state line is saved and loaded whole)");

    // Against this run: the sources, the stages that planned the segments.
    const auto srcs = split(get("sources"), ',');
    if (srcs.size() != sources_.size())
      fail("saved with " + std::to_string(srcs.size()) + " sources but this run has " +
           std::to_string(sources_.size()));
    for (std::size_t i = 0; i < srcs.size(); ++i) {
      const auto parts = split(srcs[i], ':');
      if (parts.size() != 3) fail("source \"" + std::string(srcs[i]) + "\" is not NAME:ROWS:FP");
      if (parts[0] != sources_[i].name)
        fail("source " + std::to_string(i) + " was \"" + std::string(parts[0]) +
             "\" but this run's is \"" + sources_[i].name + "\"");
      const std::string rows = std::to_string(sources_[i].table->size());
      const std::uint64_t fp = plan_state::parse_hex(parts[2], "run state: source fingerprint");
      if (parts[1] != rows || fp != fingerprints_[i])
        fail("source \"" + sources_[i].name +
             "\"'s metadata differs from the state's: " + std::string(parts[1]) +
             " rows, fingerprint " + std::string(parts[2]) + " when saved; now " + rows +
             " rows, fingerprint " + plan_state::hex(fingerprints_[i]));
    }
    // The draws the recorded spec gives (counts only: nothing is drawn yet) are the state's.
    std::vector<std::uint64_t> sizes;
    std::vector<std::string> source_names;
    for (const run_source& src : sources_) {
      sizes.push_back(src.table->size());
      source_names.push_back(src.name);
    }
    std::vector<std::uint64_t> counts;
    try {
      counts = draw_counts(sizes, source_names, st.draw);
    } catch (const error& e) {
      fail("draw=" + std::string(get("draw")) + ": " + e.what());
    }
    std::uint64_t samples = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] != st.drawn[i])
        fail("the draw spec gives source \"" + sources_[i].name + "\" " +
             std::to_string(counts[i]) + " samples, the state recorded " +
             std::to_string(st.drawn[i]));
      samples += counts[i];
    }
    if (samples > max_epoch_samples)
      fail("drawn=" + std::string(get("drawn")) + " is more than an epoch holds (4294967295)");
    for (std::size_t i = 0; i <= st.segs.size(); ++i)
      check_recorded(i < st.segs.size() ? st.segs[i].settings : st.cur, i, st.epoch, st.step,
                     samples);
    return st;
  }

  /// Moves the run to a state `parse_state` read: the epoch's draws, each closed segment's
  /// delivered samples, the current plan.
  void apply_state(loaded_state&& st) {
    pos_.epoch = st.epoch;
    pos_.step = st.step;
    pos_.epoch_step = st.epoch_step;
    pos_.world = st.world;
    pos_.caps = std::move(st.caps);
    pos_.budget_cap = st.budget_cap;
    pos_.draw = std::move(st.draw);
    pos_.drawn = draw_epoch(sources_, pos_.draw, opts_.seed, pos_.epoch);
    for (std::size_t i = 0; i < sources_.size(); ++i)
      if (st.drawn[i] != pos_.drawn.count(i))
        throw error("run state: the draw spec gives source \"" + sources_[i].name + "\" " +
                    std::to_string(pos_.drawn.count(i)) + " samples, the state recorded " +
                    std::to_string(st.drawn[i]));
    pos_.ids_hash.reset();
    pos_.closed.clear();
    pos_.remaining.clear();
    pos_.all = true;
    for (const closed_segment& c : st.segs) {
      pos_.cur = c.settings;
      make_plan();
      pos_.consumed = c.end;
      close_segment();
    }
    pos_.cur = std::move(st.cur);
    make_plan();
    pos_.consumed = st.consumed;
    deal();
    if (step_in_deal() >= steps_total())
      throw error("run state: consumed=" + std::to_string(st.consumed) +
                  " is past the end of the epoch's plan");
    follow_settings();
  }

  static std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    for (std::size_t pos = 0;;) {
      const std::size_t e = s.find(sep, pos);
      out.push_back(s.substr(pos, e == std::string_view::npos ? e : e - pos));
      if (e == std::string_view::npos) return out;
      pos = e + 1;
    }
  }
  static void check_name(const char* what, std::string_view name) {
    if (name.empty()) throw error(std::string("run: a ") + what + " needs a name");
    for (const char c : name)
      if (c <= ' ' || c == ',' || c == ':' || c == '=' || c == '/' || c == '|' || c == '@' ||
          c == 0x7f)
        throw error(std::string("run: ") + what + " name \"" + std::string(name) +
                    "\" may not hold spaces, control characters or any of , : = / | @");
  }
  static void check_layout(const bucket_config& own, const bucket_config& stage,
                           const std::string& source, const std::string& where) {
    bool same = own.num_buckets() == stage.num_buckets();
    for (std::size_t b = 0; same && b < own.num_buckets(); ++b) {
      const auto id = static_cast<bucket_id>(b);
      same = own.frames_of(id).frames == stage.frames_of(id).frames &&
             own.ratio_of(id).height == stage.ratio_of(id).height &&
             own.ratio_of(id).width == stage.ratio_of(id).width;
    }
    if (!same)
      throw error(where + ": source \"" + source +
                  "\"'s own config has other buckets than the stage's config (it may differ in "
                  "probabilities and batch sizes only)");
  }
  static std::size_t pair_index(const bucket_config& cfg, bucket_key key) {
    std::size_t i = 0;
    for (std::int32_t r = 0; r < key.resolution; ++r)
      i += cfg.resolutions()[static_cast<std::size_t>(r)].frames.size();
    return i + static_cast<std::size_t>(key.frames_index);
  }
  static std::uint64_t config_assign_hash(const bucket_config& c, std::uint64_t h) {
    for (const resolution_entry& r : c.resolutions()) {
      h = detail::hash_bytes(r.info.name, h);
      h = detail::hash_word(h, static_cast<std::uint64_t>(r.info.pixels));
      h = detail::hash_word(h, r.info.table.size());
      for (const frames_entry& f : r.frames) {
        h = detail::hash_word(h, static_cast<std::uint64_t>(f.frames));
        h = detail::hash_word(h, std::bit_cast<std::uint64_t>(f.p_resolution));
        h = detail::hash_word(h, f.pair ? std::bit_cast<std::uint64_t>(f.p_frames) : 1);
        h = detail::hash_word(h, f.batch_size > 0 ? 1 : 0);
      }
    }
    return h;
  }
  [[nodiscard]] std::uint64_t assign_hash(std::uint32_t stage) const {
    std::uint64_t h = config_assign_hash(stages_[stage].config, 0x61737367ULL);
    for (const run_source& s : sources_) {
      h = s.config ? config_assign_hash(*s.config, h) : detail::hash_word(h, 0);
      h = detail::hash_bytes(s.rule_name, h);
    }
    return h;
  }

  /// The stage in force at the current epoch and step.
  [[nodiscard]] std::uint32_t stage_at() const noexcept { return stage_at(pos_.step); }
  [[nodiscard]] std::uint32_t stage_at(std::uint64_t step) const noexcept {
    std::uint32_t best = 0;
    for (std::uint32_t i = 0; i < stages_.size(); ++i) {
      const run_stage& s = stages_[i];
      if (s.from_epoch ? pos_.epoch >= *s.from_epoch : step >= s.from_step) best = i;
    }
    return best;
  }
  /// The settings in force: the stage's, with the caps.
  [[nodiscard]] segment_settings settings_at() const {
    segment_settings s;
    s.stage = stage_at();
    const run_stage& st = stages_[s.stage];
    s.policy = st.policy;
    s.balance_group = st.balance_group;
    s.batching = st.batching;
    s.token_budget = st.token_budget;
    if (st.batching == batching_mode::packed && pos_.budget_cap)
      s.token_budget = std::min(s.token_budget, *pos_.budget_cap);
    s.batch_sizes = pair_batch_sizes(st.config);
    std::size_t i = 0;
    for (const resolution_entry& r : st.config.resolutions())
      for (const frames_entry& f : r.frames) {
        for (const batch_size_cap& c : pos_.caps)
          if (c.resolution == r.info.name && c.frames == f.frames && s.batch_sizes[i] > 0)
            s.batch_sizes[i] = std::min(s.batch_sizes[i], c.batch_size);
        ++i;
      }
    s.assign_hash = assign_hash(s.stage);
    return s;
  }
  /// Checks a segment of a state line against the stage that planned it: its assignment (the
  /// hash), its pairs, and batch sizes a plan of the epoch's `samples` can have had (each no
  /// larger than the stage's now or the epoch's samples: a larger one only pads), before
  /// anything is planned with them.
  void check_recorded(const segment_settings& s, std::size_t index, std::uint64_t epoch,
                      std::uint64_t step, std::uint64_t samples) const {
    const std::string which =
        "segment " + std::to_string(index) + " of epoch " + std::to_string(epoch);
    if (s.stage >= stages_.size())
      throw error("run state: " + which + " was planned under stage " + std::to_string(s.stage) +
                  " but the run has " + std::to_string(stages_.size()) + " stages");
    const run_stage& st = stages_[s.stage];
    if (s.assign_hash != assign_hash(s.stage) ||
        s.batch_sizes.size() != pair_batch_sizes(st.config).size())
      throw error("run state: " + which + " was planned under stage " + std::to_string(s.stage) +
                  " (\"" + st.name + "\") whose buckets, probabilities or rules have changed " +
                  "since (settings hash " + plan_state::hex(s.assign_hash) + ", now " +
                  plan_state::hex(assign_hash(s.stage)) +
                  "): the samples it delivered cannot be recomputed; keep that stage as it was "
                  "and add a new stage from step " +
                  std::to_string(step) + " on");
    const std::vector<std::int64_t> now = pair_batch_sizes(st.config);
    for (std::size_t i = 0; i < now.size(); ++i)
      if ((now[i] == 0) != (s.batch_sizes[i] == 0))
        throw error("run state: " + which + ": batch size " + std::to_string(s.batch_sizes[i]) +
                    " of " + pair_name(st.config, i) + ", which stage " + std::to_string(s.stage) +
                    " (\"" + st.name + "\") has " + (now[i] == 0 ? "disabled" : "enabled"));
      else if (s.batch_sizes[i] > now[i] && static_cast<std::uint64_t>(s.batch_sizes[i]) > samples)
        throw error("run state: " + which + ": batch size " + std::to_string(s.batch_sizes[i]) +
                    " of " + pair_name(st.config, i) + " is above both stage " +
                    std::to_string(s.stage) + " (\"" + st.name + "\")'s " + std::to_string(now[i]) +
                    " and the epoch's " + std::to_string(samples) +
                    " drawn samples: not a batch size a plan of this epoch had");
  }

  void cap_batch_size(std::string_view resolution, std::int64_t frames, std::int64_t bs,
                      bool follow) {
    check_name("resolution", resolution);
    if (bs < 1) throw error("run: a batch size cap must be ≥ 1, got " + std::to_string(bs));
    bool found = false;
    for (batch_size_cap& c : pos_.caps)
      if (c.resolution == resolution && c.frames == frames) {
        c.batch_size = bs;
        found = true;
      }
    if (!found) pos_.caps.push_back({std::string(resolution), frames, bs});
    if (follow) follow_settings();
  }

  // --- the epoch and its segments ----------------------------------------------------------
  void begin_epoch(std::uint64_t e) {
    pos_.epoch = e;
    pos_.epoch_step = pos_.step;
    pos_.closed.clear();
    pos_.remaining.clear();
    pos_.all = true;
    pos_.consumed = 0;
    pos_.cur = settings_at();
    pos_.draw = stages_[pos_.cur.stage].draws;
    pos_.drawn = draw_epoch(sources_, pos_.draw, opts_.seed, pos_.epoch);
    pos_.ids_hash.reset();
    make_plan();
    deal();
    if (steps_total() == 0)
      throw error("run: epoch " + std::to_string(e) + " has no batches (stage \"" +
                  stages_[pos_.cur.stage].name + "\")");
  }
  /// Starts a new segment when the settings in force differ from the current segment's.
  void follow_settings() {
    segment_settings want = settings_at();
    if (want == pos_.cur) return;
    close_segment();
    pos_.cur = std::move(want);
    make_plan();
    deal();
    if (steps_total() == 0) begin_epoch(pos_.epoch + 1);  // nothing left to plan
  }
  /// Every drawn sample's bucket under the current segment's assignment (cached).
  void ensure_ids() {
    if (pos_.ids_hash && *pos_.ids_hash == pos_.cur.assign_hash) return;
    const bucket_config& stage_cfg = stages_[pos_.cur.stage].config;
    pos_.ids.resize(pos_.drawn.size());
    std::vector<bucket_id> tmp;
    for (std::size_t s = 0; s < sources_.size(); ++s) {
      const run_source& src = sources_[s];
      if (pos_.drawn.count(s) == 0) continue;
      const bucket_config& cfg = src.config ? *src.config : stage_cfg;
      const std::uint64_t key =
          detail::stream_key(opts_.seed, detail::run_domain_assign, detail::hash_bytes(src.name));
      const auto first = static_cast<std::size_t>(pos_.drawn.offsets[s]);
      const std::size_t n = src.table->size();
      const std::span<const bucket_id> by_row = [&]() -> std::span<const bucket_id> {
        if (pos_.drawn.passes[s] > 0) {  // the first pass is the rows in order: assigned in place
          const std::span<bucket_id> at = std::span<bucket_id>(pos_.ids).subspan(first, n);
          src.assign(at, cfg, *src.table, key, pos_.epoch, opts_.threads);
          return at;
        }
        tmp.resize(n);
        src.assign(std::span<bucket_id>(tmp), cfg, *src.table, key, pos_.epoch, opts_.threads);
        return tmp;
      }();
      for (std::uint64_t c = 1; c < pos_.drawn.passes[s]; ++c)
        std::copy(by_row.begin(), by_row.end(),
                  pos_.ids.begin() + static_cast<std::ptrdiff_t>(first + c * n));
      const std::vector<std::uint32_t>& listed = pos_.drawn.listed[s];
      bucket_id* rest = pos_.ids.data() + first + pos_.drawn.passes[s] * n;
      for (std::size_t i = 0; i < listed.size(); ++i) rest[i] = by_row[listed[i]];
    }
    pos_.ids_hash = pos_.cur.assign_hash;
  }
  void make_plan() {
    ensure_ids();
    const run_stage& st = stages_[pos_.cur.stage];
    const bool same_sizes = pos_.cur.batch_sizes == pair_batch_sizes(st.config);
    const std::optional<bucket_config> resized =
        same_sizes
            ? std::nullopt
            : std::optional<bucket_config>(with_batch_sizes(st.config, pos_.cur.batch_sizes));
    const bucket_config& cfg = resized ? *resized : st.config;
    // The first segment plans as a plain epoch plan of (seed, epoch) would; later ones get
    // their own shuffles.
    const std::uint64_t seed =
        pos_.closed.empty()
            ? opts_.seed
            : detail::stream_key(opts_.seed, detail::run_domain_segment, pos_.closed.size());
    const auto plan_over = [&](auto ids) {
      if (pos_.cur.batching == batching_mode::fixed) {
        plan_options o;
        o.seed = seed;
        o.epoch = pos_.epoch;
        o.policy = pos_.cur.policy;
        o.balance_group = pos_.cur.balance_group;
        o.threads = opts_.threads;
        pos_.plan = make_epoch_plan(ids, cfg, o);
      } else {
        packed_options o;
        o.seed = seed;
        o.epoch = pos_.epoch;
        o.token_budget = pos_.cur.token_budget;
        o.balance_group = pos_.cur.balance_group;
        o.threads = opts_.threads;
        o.drop_oversized = true;
        pos_.plan = make_packed_plan(ids, cfg, o);
      }
    };
    if (pos_.all) {
      plan_over(std::span<const bucket_id>(pos_.ids));
    } else if (cfg.num_buckets() <= max_compact_buckets) {
      // The remaining samples' buckets in 16 bits (the planners give the same plan).
      const std::size_t m = pos_.remaining.size();
      const auto sub = std::make_unique_for_overwrite<compact_bucket_id[]>(m);
      for (std::size_t i = 0; i < m; ++i)
        sub[i] = static_cast<compact_bucket_id>(pos_.ids[pos_.remaining[i]]);
      plan_over(std::span<const compact_bucket_id>(sub.get(), m));
    } else {
      std::vector<bucket_id> sub(pos_.remaining.size());
      for (std::size_t i = 0; i < sub.size(); ++i) sub[i] = pos_.ids[pos_.remaining[i]];
      plan_over(std::span<const bucket_id>(sub));
    }
    pos_.consumed = 0;
  }
  void deal() {
    ++deals_;
    if (const auto* p = std::get_if<epoch_plan>(&pos_.plan))
      pos_.sched = p->deal(pos_.world, pos_.consumed, opts_.drop_last);
    else
      pos_.sched =
          std::get<packed_plan>(pos_.plan).deal(pos_.world, pos_.consumed, opts_.drop_last);
    pos_.dealt_at = pos_.consumed;
  }
  [[nodiscard]] std::uint64_t step_in_deal() const noexcept {
    return (pos_.consumed - pos_.dealt_at) / pos_.world;
  }
  [[nodiscard]] std::uint64_t steps_total() const noexcept {
    return std::visit([](const auto& s) { return s.steps(); }, pos_.sched);
  }
  /// Ends the current segment at `pos_.consumed`: the samples not in the real slots of its first
  /// `pos_.consumed` global batches remain for the next.
  void close_segment() {
    if (pos_.consumed == 0) return;  // nothing delivered: the next segment replaces it
    const std::vector<std::uint64_t> done = delivered_in_plan(pos_.consumed);
    pos_.remaining = not_in(done);
    pos_.all = false;
    pos_.closed.push_back({pos_.cur, pos_.consumed});
    pos_.consumed = 0;
  }
  /// The samples of the current plan (as drawn positions, ascending) whose bit is clear.
  [[nodiscard]] std::vector<std::uint32_t> not_in(const std::vector<std::uint64_t>& done) const {
    const std::size_t n = pos_.all ? pos_.drawn.size() : pos_.remaining.size();
    std::size_t left = n;
    for (const std::uint64_t w : done) left -= static_cast<std::size_t>(std::popcount(w));
    std::vector<std::uint32_t> out;
    out.reserve(left);  // filled without zeroing first
    for (std::size_t w = 0; w < done.size(); ++w) {
      std::uint64_t clear = ~done[w];
      if (w + 1 == done.size() && n % 64 != 0) clear &= (std::uint64_t{1} << (n % 64)) - 1;
      while (clear != 0) {
        const std::size_t i = w * 64 + static_cast<std::size_t>(std::countr_zero(clear));
        out.push_back(pos_.all ? static_cast<std::uint32_t>(i) : pos_.remaining[i]);
        clear &= clear - 1;
      }
    }
    return out;
  }
  /// A bit per sample of the current plan: set when it is in a real (not pad) slot of one of
  /// the plan's first `end` global batches. Fixed plans in two passes, so that no pass reads
  /// the slot array at random: the delivered batches as a bit per (bucket, batch number), then
  /// every bucket's region in order, marking the real slots of its delivered batches. (The
  /// marks, 1/8 byte a sample, are the one random access.)
  [[nodiscard]] std::vector<std::uint64_t> delivered_in_plan(std::uint64_t end) const {
    const std::size_t n = pos_.all ? pos_.drawn.size() : pos_.remaining.size();
    std::vector<std::uint64_t> done((n + 63) / 64, 0);
    const auto mark = [&](std::uint32_t i) { done[i >> 6] |= std::uint64_t{1} << (i & 63); };
    if (const auto* p = std::get_if<epoch_plan>(&pos_.plan)) {
      end = std::min(end, p->num_batches());
      const std::span<const plan_bucket> buckets = p->buckets();
      std::vector<std::uint64_t> first(buckets.size() + 1, 0);  // batch bits per bucket
      for (std::size_t b = 0; b < buckets.size(); ++b) first[b + 1] = first[b] + buckets[b].batches;
      std::vector<std::uint64_t> sent((first.back() + 63) / 64, 0);
      const std::uint32_t* base = p->slots().data();
      for (std::uint64_t g = 0; g < end; ++g) {
        const vbucket::batch b = p->global_batch(g);  // its slots are not read here
        const plan_bucket& pb = buckets[static_cast<std::size_t>(b.bucket)];
        const std::uint64_t j =
            first[static_cast<std::size_t>(b.bucket)] +
            (static_cast<std::uint64_t>(b.indices.data() - base) - pb.slot_begin) / pb.batch_size;
        sent[j >> 6] |= std::uint64_t{1} << (j & 63);
      }
      const auto each_real = [&](auto&& fn) {
        for (std::size_t b = 0; b < buckets.size(); ++b) {
          const plan_bucket& pb = buckets[b];
          for (std::uint64_t j = 0; j < pb.batches; ++j) {
            const std::uint64_t bit = first[b] + j;
            if (!((sent[bit >> 6] >> (bit & 63)) & 1)) continue;
            const std::uint64_t from = j * pb.batch_size;
            const std::uint64_t to = std::min(from + pb.batch_size, pb.samples);
            for (std::uint64_t t = from; t < to; ++t) fn(base[pb.slot_begin + t]);
          }
        }
      };
      // A bitmap past the caches is marked through partitions of 2^21 samples (256 KiB of
      // bits each): the marks first go, in order, to their partition's list, then each list
      // sets bits in a slice that stays in the cache.
      constexpr unsigned part_bits = 21;
      if (n <= (std::size_t{1} << (part_bits + 1))) {
        each_real(mark);
      } else {
        std::vector<std::vector<std::uint32_t>> parts((n >> part_bits) + 1);
        each_real([&](std::uint32_t i) { parts[i >> part_bits].push_back(i); });
        for (std::vector<std::uint32_t>& part : parts) {
          for (const std::uint32_t i : part) mark(i);
          std::vector<std::uint32_t>().swap(part);
        }
      }
    } else {
      const packed_plan& pp = std::get<packed_plan>(pos_.plan);
      end = std::min(end, pp.num_batches());
      for (std::uint64_t g = 0; g < end; ++g)
        for (const std::uint32_t i : pp.global_batch(g).indices) mark(i);
    }
    return done;
  }

  std::vector<run_source> sources_;
  std::vector<run_stage> stages_;
  run_options opts_;
  std::vector<std::uint64_t> fingerprints_;
  std::uint64_t deals_ = 0;  // schedules dealt (`deals()`)
  position pos_;             // what `load` changes
};

}  // namespace vbucket
