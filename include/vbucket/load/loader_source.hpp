#pragma once
/// What a loader can follow besides a schedule and a rank: a source of one rank's fixed
/// batches (`schedule_source`), of packed ones (`packed_schedule_source`), or either
/// (`loader_source`) — a `batch_sampler`, or a trainer's own.

#include <cstdint>  // std::uint32_t

#include "vbucket/plan/epoch_plan.hpp"   // epoch_schedule
#include "vbucket/plan/packed_plan.hpp"  // packed_schedule
#include "vbucket/plan/plan_state.hpp"   // plan_state

namespace vbucket {

/// What a loader can follow besides an `epoch_schedule` and a rank: a source of one rank's
/// batches that exposes the schedule it deals from, its rank, and the resume state its next
/// batch starts from (a `batch_sampler`, or a trainer's own). The loader copies the schedule (a
/// shared handle), so the source may move on (`set_epoch`) while the loader runs.
///
///     vbucket::loader loader(sampler, decoder, ring, {.workers = 8});
///     for (auto& batch : loader) train_step(batch.tensor);
template <class S>
concept schedule_source = requires(const S& s) {
  { s.schedule() } -> std::convertible_to<epoch_schedule>;
  { s.rank() } -> std::convertible_to<std::uint32_t>;
  { s.state() } -> std::convertible_to<plan_state>;
};

/// A source of packed batches (a `batch_sampler` with `.batching = packed`): when `packed()`
/// is true, the loader follows `packing_schedule()` from `state()`.
template <class S>
concept packed_schedule_source = requires(const S& s) {
  { s.packed() } -> std::convertible_to<bool>;
  { s.packing_schedule() } -> std::convertible_to<packed_schedule>;
  { s.rank() } -> std::convertible_to<std::uint32_t>;
  { s.state() } -> std::convertible_to<plan_state>;
};

/// What the loader's source constructor takes: a fixed or a packed schedule source.
template <class S>
concept loader_source = schedule_source<S> || packed_schedule_source<S>;

}  // namespace vbucket
