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

#include <algorithm>    // std::min
#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <variant>      // std::variant
#include <vector>       // std::vector

#include "run_sources.hpp"
#include "run_spec.hpp"  // stage_batching
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_options.hpp"
#include "vbucket/plan/run_memory.hpp"

namespace vbucket {

/// One stage of a run: from a step (or the first step of an epoch) on.
struct run_stage {
  std::string name{};
  std::uint64_t from_step = 0;
  std::optional<std::uint64_t> from_epoch{};  ///< set: starts at this epoch's first step instead
  bucket_config config{};                     ///< buckets and batch sizes
  draw_spec draws{};                          ///< weights, counts or repeats of the sources
  stage_batching batches{};                   ///< how its batches are formed
};

/// Throws `vbucket::error` ("WHERE: stage 2 (\"B\") ...") unless the stages are listed in the
/// order they start: stage 0 at step 0, each later stage after the last earlier one of its kind
/// (from a step or from an epoch; stage 0 is both), and none with both `from_step` and
/// `from_epoch`. A stage out of order, or from the step of another, would never be in force.
void check_stage_order(std::span<const run_stage> stages, const std::string& where);

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
  stage_batching batches;  ///< the stage's (a packed budget lowered by `out_of_memory`)
  std::vector<std::int64_t> batch_sizes;  ///< per pair (`pair_batch_sizes` order)
  std::uint64_t assign_hash = 0;          ///< buckets, probabilities, rules
  friend bool operator==(const segment_settings&, const segment_settings&) = default;

  /// "STAGE:POLICY:BALANCE:fixed|packed=B:BS-BS-...:HASH".
  [[nodiscard]] std::string to_string() const;
  /// Parses `to_string()`'s form; every number in range (the balance group through the run
  /// spec's field table, batch sizes to `bucket_config::max_batch`, a packed budget finite and
  /// > 0). Throws `vbucket::error` naming the text and the part that is wrong.
  static segment_settings parse(std::string_view text);
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
  run_plan(std::vector<run_source> sources, std::vector<run_stage> stages,
           run_options options = {});

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
  /// invalid_sample: unusable metadata), for a draw not delivered before the segment (a
  /// stage change with new probabilities past a quarter of the epoch assigns only those).
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
  [[nodiscard]] bool ends_epoch() const;

  // --- batches ----------------------------------------------------------------------------
  /// The current step's batch of `rank` (< world()).
  [[nodiscard]] run_batch batch(std::uint32_t rank) const;
  /// The current step's batches of every rank.
  [[nodiscard]] std::vector<run_batch> step_batches() const {
    std::vector<run_batch> out;
    for (std::uint32_t r = 0; r < pos_.world; ++r) out.push_back(batch(r));
    return out;
  }

  // --- changes ----------------------------------------------------------------------------
  /// The current step was trained on: move to the next (and the next epoch after the last).
  void advance();
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
  void out_of_memory(std::span<const std::uint32_t> ranks = {}, double factor = 0.5);
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
  [[nodiscard]] std::string state() const;

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
  void load(std::string_view text);

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
  [[nodiscard]] loaded_state parse_state(std::string_view text) const;

  /// Moves the run to a state `parse_state` read: the epoch's draws, each closed segment's
  /// delivered samples, the current plan.
  void apply_state(loaded_state&& st);

  static void check_name(const char* what, std::string_view name);
  static void check_layout(const bucket_config& own, const bucket_config& stage,
                           const std::string& source, const std::string& where);
  static std::size_t pair_index(const bucket_config& cfg, bucket_key key) {
    std::size_t i = 0;
    for (std::int32_t r = 0; r < key.resolution; ++r)
      i += cfg.resolutions()[static_cast<std::size_t>(r)].frames.size();
    return i + static_cast<std::size_t>(key.frames_index);
  }
  static std::uint64_t config_assign_hash(const bucket_config& c, std::uint64_t h);
  [[nodiscard]] std::uint64_t assign_hash(std::uint32_t stage) const;

  /// The stage in force at the current epoch and step.
  [[nodiscard]] std::uint32_t stage_at() const noexcept { return stage_at(pos_.step); }
  [[nodiscard]] std::uint32_t stage_at(std::uint64_t step) const noexcept;
  /// The settings in force: the stage's, with the caps.
  [[nodiscard]] segment_settings settings_at() const;
  /// Checks a segment of a state line against the stage that planned it: its assignment (the
  /// hash), its pairs, and batch sizes a plan of the epoch's `samples` can have had (each no
  /// larger than the stage's now or the epoch's samples: a larger one only pads), before
  /// anything is planned with them.
  void check_recorded(const segment_settings& s, std::size_t index, std::uint64_t epoch,
                      std::uint64_t step, std::uint64_t samples) const;

  void cap_batch_size(std::string_view resolution, std::int64_t frames, std::int64_t bs,
                      bool follow);

  // --- the epoch and its segments ----------------------------------------------------------
  void begin_epoch(std::uint64_t e);
  /// Starts a new segment when the settings in force differ from the current segment's.
  void follow_settings();
  /// Every drawn sample's bucket under the current segment's assignment (cached).
  void ensure_ids();
  /// The buckets of source s's remaining draws (`ensure_ids` past a closed segment).
  void assign_remaining(std::size_t s, const bucket_config& cfg, std::uint64_t key);
  void make_plan();
  void deal();
  [[nodiscard]] std::uint64_t step_in_deal() const noexcept {
    return (pos_.consumed - pos_.dealt_at) / pos_.world;
  }
  [[nodiscard]] std::uint64_t steps_total() const noexcept {
    return std::visit([](const auto& s) { return s.steps(); }, pos_.sched);
  }
  /// Ends the current segment at `pos_.consumed`: the samples not in the real slots of its first
  /// `pos_.consumed` global batches remain for the next.
  void close_segment();
  /// The samples of the current plan (as drawn positions, ascending) whose bit is clear.
  [[nodiscard]] std::vector<std::uint32_t> not_in(const std::vector<std::uint64_t>& done) const;
  /// Calls fn(i) for each i < n whose bit in `done` is clear, ascending.
  template <class Fn>
  static void each_clear(const std::vector<std::uint64_t>& done, std::size_t n, Fn&& fn);
  /// A bit per sample of the current plan: set when it is in a real (not pad) slot of one of
  /// the plan's first `end` global batches. Fixed plans in two passes, so that no pass reads
  /// the slot array at random: the delivered batches as a bit per (bucket, batch number), then
  /// every bucket's region in order, marking the real slots of its delivered batches. (The
  /// marks, 1/8 byte a sample, are the one random access.)
  [[nodiscard]] std::vector<std::uint64_t> delivered_in_plan(std::uint64_t end) const;

  std::vector<run_source> sources_;
  std::vector<run_stage> stages_;
  run_options opts_;
  std::vector<std::uint64_t> fingerprints_;
  std::uint64_t deals_ = 0;  // schedules dealt (`deals()`)
  position pos_;             // what `load` changes
  /// Kept from segment to segment so that its pages are mapped once, and not copied with the
  /// run: the remaining samples' buckets in 16 bits (`make_plan`).
  struct scratch {
    std::vector<compact_bucket_id> ids;
    scratch() = default;
    scratch(const scratch&) noexcept {}
    scratch& operator=(const scratch&) noexcept { return *this; }
    scratch(scratch&&) noexcept = default;
    scratch& operator=(scratch&&) noexcept = default;
    ~scratch() = default;
  } scratch_;
};

}  // namespace vbucket
