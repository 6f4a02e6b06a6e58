#pragma once
/// `held_schedule`: the steps of one held trainer epoch (`opensora_held.hpp`) dealt to a world
/// from a global slot — what the drop-in sampler's iteration hands out (`opensora_sampler::
/// next_batch`) and what a loader made over it follows (`held_batching`), so both deal the same
/// batches, the same number of steps (`len()`), and positions of one numbering (the trainer
/// epoch's slots, what the held sampler's states record).
///
///     vbucket::opensora_sampler os(...);
///     os.hold_epochs();
///     os.begin_iteration();
///     vbucket::loader l(os.held_epoch_schedule(), os.sampler().rank(), decoder, ring);
///
/// Step k of rank r is global slot from + k·W + r of the trainer epoch. When the trainer epoch
/// is its own data epoch (no carried tail before it, the same batch count as the quota) its
/// slots are that plan dealt as every other surface deals it (`plan_schedule`: alignment
/// repeats of the closest cost); otherwise slot s is `opensora_held::slot` — a carried batch of
/// an earlier data epoch, a batch of this one, or a counted repeat. Every batch says which data
/// epoch's plan it comes from (`plan_at`): a loader decodes it with that epoch's crop and
/// replaces a failed clip from that plan's bucket, as a loader over that data epoch would.
/// A cheap, shared, immutable handle, like `plan_schedule`.

#include <concepts>  // std::convertible_to
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint32_t, std::uint64_t
#include <memory>    // std::shared_ptr, std::make_shared
#include <optional>  // std::optional
#include <string>    // std::to_string
#include <utility>   // std::move
#include <vector>    // std::vector

#include "opensora_held.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/plan/batch_plan.hpp"  // detail::recorded_sample_cost
#include "vbucket/plan/epoch_plan.hpp"  // epoch_plan, epoch_schedule, batch, fixed_batching
#include "vbucket/plan/plan_state.hpp"

namespace vbucket {

/// The steps of a held trainer epoch (see the top of this header).
class held_schedule {
 public:
  using plan_type = epoch_plan;
  using batch_type = batch;

  /// Trainer epoch `plans.back().epoch()` of `quota` global slots, which starts at `cursor`;
  /// `plans[i]` is data epoch cursor.epoch + i's plan, up to the trainer epoch's own. Dealt to
  /// `world` ranks from global slot `from`. Throws `vbucket::error` when `plans` does not run
  /// from the cursor's data epoch to the trainer epoch, or world is 0.
  held_schedule(std::uint64_t quota, held_cursor cursor, std::vector<epoch_plan> plans,
                std::uint32_t world, std::uint64_t from, bool drop_last) {
    if (plans.empty() || world == 0 || plans.back().epoch() != cursor.epoch + plans.size() - 1)
      throw error("held_schedule: the plans must run from the cursor's data epoch " +
                  std::to_string(cursor.epoch) + " to the trainer epoch, world ≥ 1");
    d_ = std::make_shared<data>(quota, cursor, std::move(plans), world, from, drop_last);
  }

  /// The trainer epoch's own data epoch plan (its seed and epoch name the states).
  [[nodiscard]] const epoch_plan& plan() const noexcept { return d_->plans.back(); }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return d_->world; }
  [[nodiscard]] bool drop_last() const noexcept { return d_->drop_last; }
  /// Global slots consumed before the first step of this schedule.
  [[nodiscard]] std::uint64_t consumed() const noexcept { return d_->from; }
  /// Global slots of the trainer epoch (data epoch 0's batch count).
  [[nodiscard]] std::uint64_t quota() const noexcept { return d_->quota; }
  /// Where the trainer epoch starts in the stream of data epochs.
  [[nodiscard]] held_cursor cursor() const noexcept { return d_->cursor; }
  /// Steps every rank runs (from `consumed()` to the held epoch's end).
  [[nodiscard]] std::uint64_t steps() const noexcept { return d_->steps; }

  /// The batch of `rank` at `step` (step < steps(), rank < world_size()): its step in this
  /// schedule, its global slot and whether it is a counted repeat.
  [[nodiscard]] batch at(std::uint64_t step, std::uint32_t rank) const {
    if (d_->direct) return d_->direct->at(step, rank);
    const std::uint64_t s = d_->from + step * d_->world + rank;
    const held_slot where = d_->held.slot(plan().epoch(), d_->cursor, s);
    batch b = d_->plans[index(where.epoch)].global_batch(where.position);
    b.step = step;
    b.position = s;
    b.repeat = where.repeat;
    return b;
  }
  /// The plan (data epoch) the batch of `rank` at `step` comes from.
  [[nodiscard]] const epoch_plan& plan_at(std::uint64_t step, std::uint32_t rank) const {
    if (d_->direct) return plan();
    const std::uint64_t s = d_->from + step * d_->world + rank;
    return d_->plans[index(d_->held.slot(plan().epoch(), d_->cursor, s).epoch)];
  }

  /// The resume state after `steps_done` steps of this schedule: a slot of the trainer epoch.
  [[nodiscard]] plan_state state_after(std::uint64_t steps_done) const noexcept {
    const epoch_plan& p = plan();
    plan_state s{p.seed(), p.epoch(), d_->from + steps_done * d_->world, p.options().balance_group,
                 p.recorded_budget()};
    s.sample_cost = detail::recorded_sample_cost(p);
    return s;
  }

 private:
  struct data {
    data(std::uint64_t quota_, held_cursor cursor_, std::vector<epoch_plan> plans_,
         std::uint32_t world_, std::uint64_t from_, bool drop_last_)
        : quota(quota_),
          cursor(cursor_),
          plans(std::move(plans_)),
          world(world_),
          from(from_),
          drop_last(drop_last_),
          held([this](std::uint64_t i) {
            return i >= cursor.epoch
                       ? plans[static_cast<std::size_t>(i - cursor.epoch)].num_batches()
                       : quota;
          }) {
      (void)held.quota();  // asked for once here: later calls only read
      steps = held.steps_from(from, world, drop_last);
      const epoch_plan& own = plans.back();
      if (cursor == held_cursor{own.epoch(), 0} && own.num_batches() == quota)
        direct = own.deal(world, from, drop_last);
    }
    data(const data&) = delete;  // `held` refers to this object's members
    data& operator=(const data&) = delete;
    std::uint64_t quota;
    held_cursor cursor;
    std::vector<epoch_plan> plans;
    std::uint32_t world;
    std::uint64_t from;
    bool drop_last;
    opensora_held held;  // over the plans' batch counts (quota for data epoch 0's, if not held)
    std::uint64_t steps = 0;
    std::optional<epoch_schedule> direct;  // the trainer epoch is its own data epoch
  };

  [[nodiscard]] std::size_t index(std::uint64_t data_epoch) const noexcept {
    return static_cast<std::size_t>(data_epoch - d_->cursor.epoch);
  }

  std::shared_ptr<const data> d_;
};

/// The loader's batching over a `held_schedule`: fixed batches, the schedule of a source's held
/// epochs (`source.held_epoch_schedule()`); `make_any_loader` chooses it for a source whose
/// `held()` is true.
struct held_batching : fixed_batching {
  using schedule_type = held_schedule;
  template <class Source>
  [[nodiscard]] static held_schedule schedule_of(const Source& source) {
    return source.held_epoch_schedule();
  }
};

/// A source whose epochs may be held (`opensora_sampler`, the Python loader's view of one):
/// when `held()`, a loader follows `held_epoch_schedule()` from `state()`.
template <class S>
concept held_schedule_source = requires(const S& s) {
  { s.held() } -> std::convertible_to<bool>;
  { s.held_epoch_schedule() } -> std::convertible_to<held_schedule>;
  { s.rank() } -> std::convertible_to<std::uint32_t>;
  { s.state() } -> std::convertible_to<plan_state>;
};

}  // namespace vbucket
