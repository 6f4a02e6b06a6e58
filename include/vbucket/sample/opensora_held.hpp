#pragma once
/// `opensora_held`: every epoch of the drop-in sampler held to the length it reported first,
/// so that Open-Sora's `train.py`, which takes `num_steps_per_epoch = len(dataloader)` once
/// before its epoch loop, neither runs out of batches nor leaves any untrained.
///
/// An epoch's real batch count changes from epoch to epoch (the random downgrade moves samples
/// between buckets). The drop-in sampler therefore separates the *trainer's* epoch e from the
/// *data* epochs (the plans): all data epochs' global batch sequences, one after the other, form
/// one stream, and trainer epoch e takes `quota` global slots of it — the global batch count
/// of data epoch 0, which is what `len()` first reported (in steps: quota / world, rounded up,
/// or down with drop_last), whatever the world size. Trainer epoch e starts at its *cursor*
/// (a data epoch and a global position in it) and never reads past the end of data epoch e:
///
/// - a long data epoch: its slots beyond the quota are the next trainer epoch's first slots
///   (carried, trained, never lost); the cursor of epoch e + 1 is where epoch e stopped;
/// - a short one: once data epoch e is exhausted, the trainer epoch is filled with counted
///   repeats of data epoch e's batches from its start, and epoch e + 1 starts at data epoch
///   e + 1's first batch.
///
/// So every drawn batch is trained exactly once, in order, except the untrained tail when the
/// run stops (`cursor` of the epoch after the last). The cursors are a pure function of the
/// data epochs' batch counts and the quota (not of the world size): every rank and every
/// resumed process computes the same. Slots from the quota on (a world size the quota does not
/// divide) are alignment repeats of the trainer epoch's own slots, counted likewise.
/// Header-only arithmetic; `opensora_sampler` plans the data epochs and deals the slots.

#include <cstdint>     // std::uint32_t, std::uint64_t
#include <functional>  // std::function
#include <optional>    // std::optional
#include <string>      // std::string, std::to_string
#include <utility>     // std::move

#include "vbucket/base/error.hpp"

namespace vbucket {

/// Where a trainer epoch starts in the stream of data epochs: global position `position` of data
/// epoch `epoch`.
struct held_cursor {
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;
  friend bool operator==(const held_cursor&, const held_cursor&) = default;
};

/// What slot s of a trainer epoch holds: global position `position` of data epoch `epoch`;
/// `repeat` when it is a counted repeat (the data epoch was exhausted, or an alignment slot).
struct held_slot {
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;
  bool repeat = false;
};

/// The held-epoch arithmetic over the data epochs' global batch counts (`batches(e)`).
class opensora_held {
 public:
  /// `batches(e)`: data epoch e's global batch count; the quota, the global slots of every
  /// trainer epoch, is data epoch 0's (asked for when first needed).
  explicit opensora_held(std::function<std::uint64_t(std::uint64_t)> batches)
      : batches_(std::move(batches)) {}

  [[nodiscard]] std::uint64_t quota() const {
    if (!quota_) quota_ = batches_(0);
    return *quota_;
  }

  /// The cursor of trainer epoch e + 1 after trainer epoch e started at `c`: `quota` slots on,
  /// but never past the end of data epoch e.
  [[nodiscard]] held_cursor next(std::uint64_t e, held_cursor c) const {
    std::uint64_t i = c.epoch, g = c.position + quota();
    while (i < e && g >= batches_(i)) g -= batches_(i++);
    if (i == e && g >= batches_(e)) return {e + 1, 0};
    return {i, g};
  }

  /// The cursor of trainer epoch e, walked from the known cursor `from` of trainer epoch
  /// `from_epoch` ≤ e (epoch 0's is (0, 0)).
  [[nodiscard]] held_cursor cursor(std::uint64_t e, std::uint64_t from_epoch,
                                   held_cursor from) const {
    for (std::uint64_t k = from_epoch; k < e; ++k) from = next(k, from);
    return from;
  }

  /// Slot s of trainer epoch e that starts at `c`.
  [[nodiscard]] held_slot slot(std::uint64_t e, held_cursor c, std::uint64_t s) const {
    bool repeat = false;
    if (s >= quota()) {  // alignment: the epoch's own slots again
      if (quota() == 0) throw error(empty(e));
      s %= quota();
      repeat = true;
    }
    std::uint64_t i = c.epoch, g = c.position + s;
    while (i < e && g >= batches_(i)) g -= batches_(i++);
    if (g >= batches_(i)) {  // i == e: data epoch e is exhausted; its batches from its start
      const std::uint64_t n = batches_(e);
      if (n == 0) throw error(empty(e));
      return {e, (g - n) % n, true};
    }
    return {i, g, repeat};
  }

  /// Steps every rank runs from global slot `from` of a trainer epoch under `world` ranks.
  [[nodiscard]] std::uint64_t steps_from(std::uint64_t from, std::uint32_t world,
                                         bool drop_last) const {
    if (from >= quota()) return 0;
    const std::uint64_t left = quota() - from;
    return drop_last ? left / world : (left + world - 1) / world;
  }

 private:
  static std::string empty(std::uint64_t e) {
    return "sampler: epoch " + std::to_string(e) +
           " has no batch to fill the held epoch with (no sample got a bucket)";
  }

  std::function<std::uint64_t(std::uint64_t)> batches_;
  mutable std::optional<std::uint64_t> quota_;
};

}  // namespace vbucket
