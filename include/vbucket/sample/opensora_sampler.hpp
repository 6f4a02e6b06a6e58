#pragma once
/// `opensora_sampler`: Open-Sora's sampler lifecycle (`VariableVideoBatchSampler`'s
/// `set_epoch`, `set_step`, `reset`, `state_dict(num_steps)`, `load_state_dict`, `__len__`)
/// sequenced over an `any_sampler` and its `opensora_lifecycle` (see opensora_lifecycle.hpp for
/// the numbering): what the drop-in Python sampler calls, in the library so that every surface
/// resumes the same way.
///
///     vbucket::opensora_sampler os(vbucket::make_any_sampler(meta, config, rule, options, seed));
///     os.load(saved_state);   // load_state_dict
///     os.set_step(start);     // train.py: the steps the saved run had done
///     os.set_epoch(epoch);
///     os.started();           // an iteration begins: batches from os.sampler()
///     ...                     // os.sampler().advance(1) per batch; os.finish() at its end
///     os.state_after(num_steps);  // state_dict(num_steps)
///
/// A fixed-batching sampler holds every epoch to the length it reported first
/// (`opensora_held.hpp`): `epoch_steps()`, the iteration (`next_batch`), `set_step`,
/// `state_after` and the loads count slots of the trainer's epoch, whose batches come from the
/// stream of data epochs (carried tails, counted repeats); the wrapped sampler stays on data
/// epoch e (its plan, fingerprint and statistics), and at the data position of the trainer's
/// when that lies in data epoch e (`sync`). A loader follows the held epoch, not the wrapped
/// sampler: `held_epoch_schedule()` (`held_schedule.hpp`), which `next_batch` deals from too,
/// so the loader's batches, steps and states are the iteration's; `make_any_loader(os, ...)`
/// after `begin_iteration()` makes it. A packing sampler runs each epoch's real length.
///
/// Not for use from several threads at once.

#include <algorithm>  // std::min
#include <cstdint>    // std::uint64_t
#include <map>        // std::map
#include <memory>     // std::unique_ptr
#include <optional>   // std::optional
#include <utility>    // std::move
#include <vector>     // std::vector

#include "any_sampler.hpp"
#include "held_schedule.hpp"
#include "opensora_held.hpp"
#include "opensora_lifecycle.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/plan/plan_state.hpp"

namespace vbucket {

/// What a copy of an `opensora_sampler` needs besides the arguments it was made with
/// (pickle, deepcopy): its state, whether its iteration ended, and its lifecycle's anchor.
struct opensora_snapshot {
  plan_state state;
  bool finished = false;
  std::uint64_t anchor_step = 0;
  std::uint64_t anchor_position = 0;
};

/// An `any_sampler` with Open-Sora's lifecycle: the anchor of the epoch's step numbering and
/// whether an iteration ran to its end.
class opensora_sampler {
 public:
  /// Throws `vbucket::error` when `s` is null.
  explicit opensora_sampler(std::unique_ptr<any_sampler> s)
      : s_(check(std::move(s))), lifecycle_(s_->world()) {}

  /// Holds every epoch to data epoch 0's length from now on (`opensora_held.hpp`; the drop-in
  /// Python sampler's default), from the start of the current epoch: call it before the first
  /// batch. A packing sampler runs each epoch's real length: nothing changes.
  void hold_epochs() {
    if (held_ || s_->packed()) return;
    pos_ = 0;  // nothing planned here: a streamed CSV is read when an epoch is first planned
    held_.emplace([this](std::uint64_t i) { return batches_of(i); });  // plans when needed
  }

  /// Whether epochs are held to the first reported length.
  [[nodiscard]] bool held() const noexcept { return held_.has_value(); }
  /// Global slots of every trainer epoch (data epoch 0's global batches); 0 when not held.
  [[nodiscard]] std::uint64_t quota() const noexcept { return held_ ? held_->quota() : 0; }

  opensora_sampler(opensora_sampler&&) = delete;  // the held arithmetic refers to this object
  opensora_sampler& operator=(opensora_sampler&&) = delete;

  // A loader's source (`loader_source`, `held_schedule_source`): `make_any_loader(os, ...)`
  // after `begin_iteration()` follows the held epoch when `held()`, else the wrapped sampler.
  [[nodiscard]] std::uint32_t rank() const noexcept { return s_->rank(); }
  [[nodiscard]] bool packed() const noexcept { return s_->packed(); }
  [[nodiscard]] const epoch_schedule& schedule() const { return s_->schedule(); }
  [[nodiscard]] const packed_schedule& packing_schedule() const { return s_->packing_schedule(); }
  [[nodiscard]] any_sampler& sampler() noexcept { return *s_; }
  [[nodiscard]] const any_sampler& sampler() const noexcept { return *s_; }
  [[nodiscard]] const opensora_lifecycle& lifecycle() const noexcept { return lifecycle_; }

  /// An iteration ran to its end: the next one replays the epoch from its start, as iterating
  /// a torch sampler twice without set_epoch does. Cleared by `set_epoch`, `set_step`,
  /// `reset` and the loads.
  [[nodiscard]] bool finished() const noexcept { return finished_; }
  void finish() noexcept { finished_ = true; }
  /// An iteration started: a later `set_step` is Open-Sora's plain one.
  void started() noexcept { lifecycle_.started(); }
  /// Where an iteration begins — a torch iteration over the sampler, or a loader made over it:
  /// after one that ran to its end, the epoch's start (Open-Sora's reset()); else the sampler's
  /// position. Every surface that starts handing out batches calls this first.
  void begin_iteration() {
    if (finished_) reset();
    sync();
  }

  /// Open-Sora's set_epoch: sets the epoch only. The position carries over to the new epoch
  /// unless the current one is finished (iterated to its end, or its position at its end), as
  /// Open-Sora's index is reset when an epoch ends. The same epoch, not finished: nothing.
  void set_epoch(std::uint64_t e) {
    if (held_) {
      if (s_->epoch() != e || finished_) {
        const bool done = finished_ || pos_ >= held_end(0);
        s_->set_epoch(e);
        if (done) {
          pos_ = 0;
          pos_world_.reset();
          lifecycle_.reset();
        }
        sync();
      }
      finished_ = false;
      return;
    }
    any_sampler& b = *s_;
    if (b.epoch() != e || finished_) {
      const std::uint64_t p = b.state().consumed;
      const bool done = finished_ || p >= b.dealt_end(0);
      b.set_epoch(e);
      if (done) {
        lifecycle_.reset();
      } else if (p > 0) {
        b.move_to(p);
      }
    }
    finished_ = false;
  }

  /// Open-Sora's set_step(k) (see `opensora_lifecycle::set_step`).
  void set_step(std::uint64_t k) {
    if (held_) {
      if (const auto p = lifecycle_.set_step(k, held_end(0))) {
        pos_ = *p;
        pos_world_.reset();
      }
      sync();
    } else if (const auto p = lifecycle_.set_step(k, s_->dealt_end(0))) {
      s_->move_to(*p);
    }
    finished_ = false;
  }

  /// Open-Sora's reset(): the start of the current epoch.
  void reset() {
    pos_ = 0;
    pos_world_.reset();
    s_->set_epoch(s_->epoch());
    lifecycle_.reset();
    finished_ = false;
  }

  /// Loads a state of any rank and world size (moving to its epoch), checked against the
  /// fingerprint it records or `fingerprint`; the step numbering is not touched.
  void load_state(const plan_state& s, std::optional<std::uint64_t> fingerprint = std::nullopt) {
    if (held_) {
      // The plan's fields are checked by the sampler at the epoch's start; the position is a
      // slot of the held epoch, bounded by its end under the world it was saved under.
      plan_state start = s;
      start.consumed = 0;
      start.world.reset();
      s_->load_state_of_epoch(start, fingerprint);
      // A position is at most the quota plus the alignment of a last step (any world's).
      const std::uint64_t reach = held_->quota() + std::max(s.world.value_or(1), s_->world()) - 1;
      if (s.consumed > reach)
        throw error("sampler: state at global slot " + std::to_string(s.consumed) +
                    " is past the end of epoch " + std::to_string(s.epoch) + " (held to " +
                    std::to_string(held_->quota()) +
                    " global batches, epoch 0's, plus the alignment of its last step)");
      pos_ = s.consumed;
      pos_world_ = s.world;
      sync();
    } else {
      s_->load_state_of_epoch(s, fingerprint);
    }
    finished_ = false;
  }

  /// Open-Sora's load_state_dict for a vbucket state: `load_state`, and the step numbering
  /// anchored there.
  void load(const plan_state& s, std::optional<std::uint64_t> fingerprint = std::nullopt) {
    load_state(s, fingerprint);
    lifecycle_.load(s);
  }

  /// Open-Sora's state_dict(num_steps): the state after `num_steps` steps of this epoch in its
  /// step numbering (anchored where a resume started), recording this world.
  [[nodiscard]] plan_state state_after(std::uint64_t num_steps) const {
    const std::uint64_t from = lifecycle_.anchor_position();
    plan_state st = s_->state();
    st.consumed =
        lifecycle_.position_after(num_steps, held_ ? held_end(from) : s_->dealt_end(from));
    st.world = s_->world();
    return st;
  }

  /// The state now (after the batches handed out), recording this world — or, held, the
  /// world a loaded position was reached under when it lies past this world's end of the epoch
  /// (an alignment slot of a larger world), so that the state loads again.
  [[nodiscard]] plan_state state() const {
    plan_state st = s_->state();
    if (held_) {
      st.consumed = pos_;
      st.world = plan_state::position_world(pos_, held_->quota(), s_->world(),
                                            pos_world_.value_or(s_->world()));
    }
    return st;
  }

  /// The global slot (held) or position the next batch is dealt from.
  [[nodiscard]] std::uint64_t consumed() const { return held_ ? pos_ : s_->state().consumed; }

  /// Steps this rank has left from the position (what the next iteration yields).
  [[nodiscard]] std::uint64_t steps_left() const {
    if (!held_) return finished_ ? s_->dealt_end(0) / s_->world() : s_->size();
    return held_->steps_from(finished_ ? 0 : pos_, s_->world(), s_->options().drop_last);
  }

  /// Held epochs: this rank's next batch, advancing one step; nullopt at the epoch's end. The
  /// batch's indices view a plan this sampler keeps until the next call.
  [[nodiscard]] std::optional<batch> next_batch() {
    const std::uint32_t w = s_->world();
    if (!sched_ || sched_->plan().epoch() != s_->epoch() || pos_ < sched_->consumed() ||
        (pos_ - sched_->consumed()) % w != 0)
      sched_ = held_epoch_schedule();
    const std::uint64_t k = (pos_ - sched_->consumed()) / w;
    if (k >= sched_->steps()) return std::nullopt;
    batch b = sched_->at(k, s_->rank());
    b.step = lifecycle_.step_of(pos_);
    pos_ += w;
    pos_world_.reset();
    return b;
  }

  /// Held epochs: the steps of the trainer epoch from the current slot, as `next_batch` deals
  /// them; a loader made over this sampler follows it (`held_batching`). Plans the data epochs
  /// the epoch draws from (the wrapped sampler is left where it was).
  [[nodiscard]] held_schedule held_epoch_schedule() const {
    const std::uint64_t e = s_->epoch();
    const held_cursor c = cursor(e);
    std::vector<epoch_plan> plans;
    for (std::uint64_t i = c.epoch; i <= e; ++i) plans.push_back(plan_of(i));
    return {held_->quota(), c, std::move(plans), s_->world(), pos_, s_->options().drop_last};
  }

  /// Held epochs: what trainer epoch e is made of (its cursor, the next one's, its repeats).
  struct held_epoch_report {
    held_cursor from;
    held_cursor to;
    std::uint64_t repeats = 0;  ///< slots of the quota that repeat data epoch e's batches
  };
  [[nodiscard]] held_epoch_report held_report(std::uint64_t e) const {
    const held_cursor c = cursor(e);
    held_epoch_report r{c, held_->next(e, c), 0};
    std::uint64_t left = held_->quota();
    for (std::uint64_t i = c.epoch, g = c.position; i <= e; ++i, g = 0) {
      const std::uint64_t here = batches_of(i) - std::min(g, batches_of(i));
      left -= std::min(left, here);
    }
    r.repeats = left;
    return r;
  }

  /// Moves the wrapped sampler to the trainer's position when it lies in data epoch e with no
  /// carry before it (a loader made over this sampler starts there); else leaves it.
  void sync() {
    if (!held_) return;
    const std::uint64_t e = s_->epoch();
    const held_cursor c = cursor(e);
    if (c.epoch == e && c.position == 0) {
      const std::uint64_t p = std::min(pos_, s_->dealt_end(0));
      if (s_->state().consumed != p) {
        plan_state st = s_->state();
        st.consumed = p;
        st.world.reset();
        s_->load_state(st);
      }
    }
  }

  /// Open-Sora's __len__: the steps of the epoch in its step numbering — the whole epoch after
  /// an iteration ended, else the anchor step + the steps dealt from the anchor.
  [[nodiscard]] std::uint64_t epoch_steps() const {
    const std::uint64_t w = s_->world();
    if (held_) (void)s_->num_global_batches();  // plans (and checks) the current epoch
    if (finished_) return (held_ ? held_end(0) : s_->dealt_end(0)) / w;
    const std::uint64_t from = lifecycle_.anchor_position();
    return lifecycle_.epoch_steps(((held_ ? held_end(from) : s_->dealt_end(from)) - from) / w);
  }

  [[nodiscard]] opensora_snapshot snapshot() const {
    return {state(), finished_, lifecycle_.anchor_step(), lifecycle_.anchor_position()};
  }
  /// Restores `snapshot()` in a sampler made with the same arguments.
  void restore(const opensora_snapshot& snap) {
    load_state(snap.state);
    lifecycle_.restore(snap.anchor_step, snap.anchor_position);
    finished_ = snap.finished;
  }

 private:
  static std::unique_ptr<any_sampler> check(std::unique_ptr<any_sampler> s) {
    if (!s) throw error("opensora_sampler: the sampler is null");
    return s;
  }

  /// The end of the held epoch under this world as dealt from slot `from`.
  [[nodiscard]] std::uint64_t held_end(std::uint64_t from) const {
    return from + held_->steps_from(from, s_->world(), s_->options().drop_last) * s_->world();
  }

  /// Data epoch i's plan; the wrapped sampler is left at its epoch and position.
  [[nodiscard]] epoch_plan plan_of(std::uint64_t i) const {
    if (s_->epoch() == i) return s_->plan();
    const plan_state at = s_->state();
    s_->set_epoch(i);
    epoch_plan p = s_->plan();
    s_->set_epoch(at.epoch);
    if (s_->state().consumed != at.consumed) s_->load_state(at);
    return p;
  }

  /// Data epoch i's global batch count (planned once; the wrapped sampler is left at its epoch).
  [[nodiscard]] std::uint64_t batches_of(std::uint64_t i) const {
    if (const auto it = batches_.find(i); it != batches_.end()) return it->second;
    std::uint64_t n = 0;
    if (s_->epoch() == i) {
      n = s_->num_global_batches();
    } else {
      const std::uint64_t e = s_->epoch();
      s_->set_epoch(i);
      n = s_->num_global_batches();
      s_->set_epoch(e);
    }
    batches_.emplace(i, n);
    return n;
  }

  /// The cursor of trainer epoch e (walked from the nearest known one before it).
  [[nodiscard]] held_cursor cursor(std::uint64_t e) const {
    auto it = cursors_.upper_bound(e);
    --it;  // cursors_ holds epoch 0
    if (it->first == e) return it->second;
    const held_cursor c = held_->cursor(e, it->first, it->second);
    cursors_.emplace(e, c);
    return c;
  }

  std::unique_ptr<any_sampler> s_;
  opensora_lifecycle lifecycle_;
  bool finished_ = false;
  std::optional<opensora_held> held_;
  std::uint64_t pos_ = 0;  // held: the global slot of the trainer epoch dealt next
  // Caches of planning results (pure functions of the plan): filled in const members.
  mutable std::map<std::uint64_t, std::uint64_t> batches_;
  mutable std::map<std::uint64_t, held_cursor> cursors_{{0, held_cursor{}}};
  // held: the world a loaded position was reached under (until the position moves)
  std::optional<std::uint32_t> pos_world_;
  std::optional<held_schedule> sched_;  // held: what next_batch deals from
};

}  // namespace vbucket
