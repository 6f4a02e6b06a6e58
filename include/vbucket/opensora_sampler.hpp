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
/// Not for use from several threads at once.

#include <cstdint>   // std::uint64_t
#include <memory>    // std::unique_ptr
#include <optional>  // std::optional
#include <utility>   // std::move

#include "any_sampler.hpp"
#include "error.hpp"
#include "opensora_lifecycle.hpp"
#include "plan_state.hpp"

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
  }

  /// Open-Sora's set_epoch: sets the epoch only. The position carries over to the new epoch
  /// unless the current one is finished (iterated to its end, or its position at its end), as
  /// Open-Sora's index is reset when an epoch ends. The same epoch, not finished: nothing.
  void set_epoch(std::uint64_t e) {
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
    if (const auto p = lifecycle_.set_step(k, s_->dealt_end(0))) s_->move_to(*p);
    finished_ = false;
  }

  /// Open-Sora's reset(): the start of the current epoch.
  void reset() {
    s_->set_epoch(s_->epoch());
    lifecycle_.reset();
    finished_ = false;
  }

  /// Loads a state of any rank and world size (moving to its epoch), checked against the
  /// fingerprint it records or `fingerprint`; the step numbering is not touched.
  void load_state(const plan_state& s, std::optional<std::uint64_t> fingerprint = std::nullopt) {
    s_->load_state_of_epoch(s, fingerprint);
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
    st.consumed = lifecycle_.position_after(num_steps, s_->dealt_end(from));
    st.world = s_->world();
    return st;
  }

  /// Open-Sora's __len__: the steps of the epoch in its step numbering — the whole epoch after
  /// an iteration ended, else the anchor step + the steps dealt from the anchor.
  [[nodiscard]] std::uint64_t epoch_steps() const {
    if (finished_) return s_->dealt_end(0) / s_->world();
    const std::uint64_t from = lifecycle_.anchor_position();
    return lifecycle_.epoch_steps((s_->dealt_end(from) - from) / s_->world());
  }

  [[nodiscard]] opensora_snapshot snapshot() const {
    return {s_->state(), finished_, lifecycle_.anchor_step(), lifecycle_.anchor_position()};
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

  std::unique_ptr<any_sampler> s_;
  opensora_lifecycle lifecycle_;
  bool finished_ = false;
};

}  // namespace vbucket
