#pragma once
/// `opensora_lifecycle`: Open-Sora's sampler lifecycle (`set_epoch`, `set_step`, `reset`,
/// `state_dict(num_steps)`, `load_state_dict`, `__len__`) over vbucket's exact position, for the
/// drop-in `VariableVideoBatchSampler`.
///
/// Open-Sora's sampler keeps one number, `last_micro_batch_access_index` = steps · world:
/// `set_epoch(e)` sets the epoch only, `set_step(k)` sets k · world, `state_dict(n)` records
/// n · world, iteration starts at (index // world) steps and resets to 0 when the epoch ends.
/// Its `train.py` resumes with `load_state_dict(saved)`, then `set_step(start_step)` (the steps
/// the saved run had done), then `set_epoch(epoch)`, and numbers the batches from
/// `start_step`. Under another world size k · world is another position, so Open-Sora replays
/// or skips batches.
///
/// vbucket keeps a position in global batches (`plan_state::consumed`) and an *anchor*: step
/// number `anchor_step` of this epoch is global position `anchor_position`, and each later step
/// is `world` global batches on. A fresh epoch is anchored at (0, 0), so step k is k · world
/// exactly as in Open-Sora. Loading a state saved after k steps of world W' anchors at
/// (k, k · W'); `set_step(k)` with that same k — what `train.py` does next — keeps the loaded
/// position (and the anchor), so the resumed run continues at the exact global batch it
/// stopped at, under any world size, and `state_dict(n)` of the resumed run records
/// k · W' + (n − k) · world. Any other `set_step(k)` is Open-Sora's: step k of this world,
/// anchored at (0, 0).
///
/// Everything is checked: a step before the anchor, a position that does not fit 64 bits, or
/// one past the end of the epoch throws `vbucket::error` naming the step and the epoch's size.
/// Header-only and independent of the sampler type: it computes positions, the sampler moves.

#include <cstdint>   // std::uint32_t, std::uint64_t
#include <limits>    // std::numeric_limits
#include <optional>  // std::optional
#include <string>    // std::string, std::to_string

#include "vbucket/base/error.hpp"
#include "vbucket/plan/plan_state.hpp"

namespace vbucket {

/// The anchor and the pending load of one sampler; the position itself is the sampler's
/// (`batch_sampler::state().consumed`), which iteration advances.
class opensora_lifecycle {
 public:
  /// The lifecycle of a sampler of `world` ranks at the start of an epoch.
  explicit opensora_lifecycle(std::uint32_t world) : world_(world == 0 ? 1 : world) {}

  [[nodiscard]] std::uint32_t world() const noexcept { return world_; }
  [[nodiscard]] std::uint64_t anchor_step() const noexcept { return anchor_step_; }
  [[nodiscard]] std::uint64_t anchor_position() const noexcept { return anchor_position_; }

  /// The step number of global position `position` in this epoch's numbering (what
  /// `train.py`'s enumerate counts): the anchor step plus whole steps of this world since it.
  [[nodiscard]] std::uint64_t step_of(std::uint64_t position) const noexcept {
    return position < anchor_position_ ? 0 : anchor_step_ + (position - anchor_position_) / world_;
  }

  /// `reset()`, a new epoch, the end of an iteration: anchored at (0, 0).
  void reset() noexcept {
    anchor_step_ = anchor_position_ = 0;
    loaded_steps_.reset();
  }

  /// `load_state_dict`: anchors at the saved position and the steps it was saved after (its
  /// consumed count over the world it was saved under; this world when it records none).
  void load(const plan_state& s) noexcept {
    const std::uint64_t w = s.world.value_or(world_);
    anchor_position_ = s.consumed;
    anchor_step_ = s.consumed / w;
    loaded_steps_ = anchor_step_;
  }

  /// A copy's lifecycle (pickle, deepcopy): anchored at (step, position), nothing pending.
  void restore(std::uint64_t step, std::uint64_t position) noexcept {
    anchor_step_ = step;
    anchor_position_ = position;
    loaded_steps_.reset();
  }

  /// An iteration started: a later `set_step` is Open-Sora's plain one.
  void started() noexcept { loaded_steps_.reset(); }

  /// `set_step(k)`: the position to move to, or nullopt to keep the loaded one — right after
  /// `load` with k equal to the loaded state's steps (the exact resume). Otherwise step k of
  /// this world from the epoch's start, anchored at (0, 0); `epoch_end` is the epoch's end under
  /// this world from its start (its steps · world).
  [[nodiscard]] std::optional<std::uint64_t> set_step(std::uint64_t k, std::uint64_t epoch_end) {
    if (loaded_steps_ && *loaded_steps_ == k) {
      loaded_steps_.reset();
      return std::nullopt;
    }
    if (k > std::numeric_limits<std::uint64_t>::max() / world_)
      throw error("sampler: set_step(" + std::to_string(k) + "): " + std::to_string(k) +
                  " steps of world " + std::to_string(world_) +
                  " overflow a 64-bit count of global batches");
    check_end(k * world_, k, epoch_end, "set_step");
    loaded_steps_.reset();
    anchor_step_ = anchor_position_ = 0;
    return k * world_;
  }

  /// The global position after `num_steps` steps of this epoch in its numbering
  /// (`state_dict(num_steps)`); `epoch_end` is the end of the epoch as dealt from the anchor
  /// (anchor position + the steps dealt from it · world).
  [[nodiscard]] std::uint64_t position_after(std::uint64_t num_steps,
                                             std::uint64_t epoch_end) const {
    if (num_steps < anchor_step_)
      throw error("sampler: state_dict(" + std::to_string(num_steps) +
                  "): this epoch was resumed at step " + std::to_string(anchor_step_) +
                  " (global batch " + std::to_string(anchor_position_) +
                  "); earlier steps belong to the run before the resume and cannot be mapped");
    const std::uint64_t more = num_steps - anchor_step_;
    if (more > (std::numeric_limits<std::uint64_t>::max() - anchor_position_) / world_)
      throw error("sampler: state_dict(" + std::to_string(num_steps) +
                  "): " + std::to_string(num_steps) + " steps of world " + std::to_string(world_) +
                  " overflow a 64-bit count of global batches");
    const std::uint64_t p = anchor_position_ + more * world_;
    check_end(p, num_steps, epoch_end, "state_dict");
    return p;
  }

  /// The steps of this epoch in its numbering: the anchor step plus the steps dealt from the
  /// anchor's position (`steps_from_anchor`).
  [[nodiscard]] std::uint64_t epoch_steps(std::uint64_t steps_from_anchor) const noexcept {
    return anchor_step_ + steps_from_anchor;
  }

 private:
  void check_end(std::uint64_t p, std::uint64_t k, std::uint64_t epoch_end,
                 const char* what) const {
    if (p > epoch_end)
      throw error(std::string("sampler: ") + what + "(" + std::to_string(k) +
                  ") is past the end of the epoch: it has " + std::to_string(step_of(epoch_end)) +
                  " steps at world " + std::to_string(world_) + " (" + std::to_string(epoch_end) +
                  " global batch positions as dealt)");
  }

  std::uint32_t world_;
  std::uint64_t anchor_step_ = 0;
  std::uint64_t anchor_position_ = 0;
  std::optional<std::uint64_t> loaded_steps_;  // set by load until the next set_step or iteration
};

}  // namespace vbucket
