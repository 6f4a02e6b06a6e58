#pragma once
/// The batching mode as a type. A `batch_plan` is an epoch's global sequence of batches,
/// independent of the world size: what a batch is (`batch_type`), the cost of each, and how the
/// sequence is dealt to a world from a position and resumed. Its models are `epoch_plan` (fixed
/// batching: one bucket and its batch size per batch, `batch`) and `packed_plan` (packed
/// batching: mixed shapes up to a cost budget, `packed_batch`); `fixed_batching` and
/// `packed_batching` name them where a type chooses the mode (`batch_sampler`, `loader`).
///
/// A plan holds its batches as *refs* (a fixed plan's bucket and number within it, a packed
/// plan's batch id): `ref_at(p)` is the ref at global position p, `make_batch(ref)` the batch,
/// `cost_of(ref)` its cost and `size_of(ref)` its samples. Everything dealing needs is written
/// once here over those, for both plans:
///
/// - `plan_schedule<Plan>` (`epoch_schedule`, `packed_schedule`): the plan dealt to `world`
///   ranks from global position `consumed`. Step k of rank r is position consumed + k·W + r.
///   When the remaining count is not a multiple of W, the last step is completed with repeats
///   of real batches — those before the last step whose cost is closest to the mean cost of
///   the last step's real batches, earliest position first among equal distances, dealt in
///   position order; all real batches cyclically when there are too few — or with drop_last
///   the incomplete last step is dropped. Both are counted.
/// - `schedule_steps<Data>` (`rank_steps`, `packed_rank_steps`): one rank's steps as a
///   random-access view.
/// - Resume: a `plan_state` (seed, epoch, consumed, balance group, the packed budget, and the
///   hash of a fixed plan's per-sample costs) of any world size;
///   `plan_schedule::dealt_from(plan, world, state)` refuses one of another plan.

#include <algorithm>    // std::min, std::sort, std::push_heap, std::pop_heap
#include <cassert>      // assert
#include <cmath>        // std::abs
#include <compare>      // operator<=>
#include <concepts>     // std::same_as, std::convertible_to, std::copy_constructible
#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::uint32_t, std::uint64_t
#include <iterator>     // std::random_access_iterator_tag, std::input_iterator_tag
#include <memory>       // std::shared_ptr, std::make_shared
#include <optional>     // std::optional
#include <ranges>       // std::ranges::view_base
#include <span>         // std::span
#include <type_traits>  // std::remove_cvref_t
#include <utility>      // std::move, std::pair, std::declval
#include <vector>       // std::vector

#include "plan_options.hpp"  // plan_options, batching_mode
#include "plan_state.hpp"
#include "vbucket/base/error.hpp"

namespace vbucket {

/// A batch a plan deals: its step in the schedule, its global position and whether it is an
/// alignment repeat are set by the schedule.
template <class B>
concept dealt_batch = std::copy_constructible<B> && requires(B b) {
  b.step = std::uint64_t{};
  b.position = std::uint64_t{};
  b.repeat = bool{};
  { b.indices.size() } -> std::convertible_to<std::size_t>;
};

/// An epoch's global batch sequence, as `epoch_plan` and `packed_plan` are (see the top of this
/// header). Semantic requirements: a cheap, shared, immutable handle; `ref_at(p)` for
/// p < num_batches(); `cost_of` a finite number ≥ 0; `recorded_budget()` what a resume state
/// of this plan records besides seed, epoch and balance group (the packed budget, or nothing).
template <class P>
concept batch_plan = std::copy_constructible<P> && requires(const P& p, std::uint64_t i) {
  typename P::batch_type;
  requires dealt_batch<typename P::batch_type>;
  { P::batching } -> std::convertible_to<batching_mode>;
  { p.options() } -> std::convertible_to<const plan_options&>;
  { p.seed() } -> std::same_as<std::uint64_t>;
  { p.epoch() } -> std::same_as<std::uint64_t>;
  { p.num_batches() } -> std::same_as<std::uint64_t>;
  { p.ref_at(i) } -> std::same_as<std::uint64_t>;
  { p.make_batch(i) } -> std::same_as<typename P::batch_type>;
  { p.global_batch(i) } -> std::same_as<typename P::batch_type>;
  { p.cost_of(i) } -> std::convertible_to<double>;
  { p.size_of(i) } -> std::convertible_to<std::uint64_t>;
  { p.recorded_budget() } -> std::same_as<std::optional<double>>;
};

/// A batching mode as a type: `fixed_batching` (epoch_plan.hpp) or `packed_batching`
/// (packed_plan.hpp). It names its plan (`plan_type`, a `batch_plan` of the same mode) and makes
/// it from the bucket id of every sample: `B::make_plan(ids, config, options, cost)`.
template <class B>
concept batching_kind = requires {
  typename B::plan_type;
  { B::mode } -> std::convertible_to<batching_mode>;
}
&&batch_plan<typename B::plan_type> && (B::plan_type::batching == B::mode);

namespace detail {

/// How `num_batches` global batches are dealt to `world` ranks from a resume point: the
/// batches left from `begin` go round-robin, global position `begin + step · world + rank`; an
/// incomplete last step is dropped (`drop_last`) or completed by `repeats_needed` repeats.
struct deal_shape {
  std::uint32_t world = 1;
  bool drop_last = false;
  std::uint64_t consumed = 0;
  std::uint64_t begin = 0;  // min(consumed, num_batches)
  std::uint64_t steps = 0;
  std::uint64_t dropped = 0;
  std::uint64_t repeats_needed = 0;

  /// Throws `vbucket::error` when world is 0.
  static deal_shape of(std::uint64_t num_batches, std::uint32_t world, std::uint64_t consumed,
                       bool drop_last) {
    if (world == 0) throw error("world size must be at least 1");
    deal_shape d;
    d.world = world;
    d.drop_last = drop_last;
    d.consumed = consumed;
    d.begin = std::min(consumed, num_batches);
    const std::uint64_t rem = num_batches - d.begin;
    const std::uint64_t partial = rem % world;
    if (drop_last) {
      d.steps = rem / world;
      d.dropped = partial;
    } else {
      d.steps = rem / world + (partial != 0 ? 1 : 0);
      d.repeats_needed = partial != 0 ? world - partial : 0;
    }
    return d;
  }

  /// The global position (in the plan, repeats after its end) of a rank's batch at a step.
  [[nodiscard]] std::uint64_t plan_position(std::uint64_t step, std::uint32_t rank) const noexcept {
    assert(step < steps && rank < world);
    return begin + step * world + rank;
  }
  /// The position counted from the epoch's start, resume included.
  [[nodiscard]] std::uint64_t position(std::uint64_t step, std::uint32_t rank) const noexcept {
    return consumed + step * world + rank;
  }
};

/// A plan dealt to a world size from a resume point (shared by a schedule and its views).
template <class Plan>
struct schedule_data : deal_shape {
  Plan plan;
  std::vector<std::uint64_t> repeats;  // the refs that complete the last step, in deal order

  /// `p` dealt as `shape` says (`deal_shape::of(p.num_batches(), ...)`).
  schedule_data(Plan p, const deal_shape& shape) : deal_shape(shape), plan(std::move(p)) {
    if (repeats_needed != 0) choose_repeats(repeats_needed);
  }

  /// The ref of `rank`'s batch at `step`.
  [[nodiscard]] std::uint64_t ref_at(std::uint64_t step, std::uint32_t rank) const noexcept {
    const std::uint64_t p = plan_position(step, rank);
    const std::uint64_t n = plan.num_batches();
    return p < n ? plan.ref_at(p) : repeats[static_cast<std::size_t>(p - n)];
  }

  [[nodiscard]] auto at(std::uint64_t step, std::uint32_t rank) const noexcept {
    auto out = plan.make_batch(ref_at(step, rank));
    out.step = step;
    out.position = position(step, rank);
    out.repeat = plan_position(step, rank) >= plan.num_batches();
    return out;
  }

  /// Picks `count` repeats from the real batches of the whole epoch before the last step:
  /// the `count` smallest (|cost − mean cost of the last step's real batches|, position),
  /// dealt in position order; when there are fewer than `count` such batches, all real
  /// batches in order, cyclically. The choice depends on (plan, world, batches left in the
  /// last step) only, so resuming with the same world size repeats the same batches.
  void choose_repeats(std::uint64_t count);
};

// Out of the class, so that `extern template` keeps it in vbucket::compiled.
template <class Plan>
void schedule_data<Plan>::choose_repeats(std::uint64_t count) {
  std::uint64_t n = plan.num_batches();
  const std::uint64_t last_real = (n - begin) % world;
  repeats.reserve(static_cast<std::size_t>(count));
  if (n - last_real < count) {
    for (std::uint64_t e = 0; e < count; ++e) repeats.push_back(plan.ref_at(e % n));
    return;
  }
  n -= last_real;  // candidates: [0, n)
  double target = 0.0;
  for (std::uint64_t p = n; p < n + last_real; ++p) target += plan.cost_of(plan.ref_at(p));
  target /= static_cast<double>(last_real);
  // A max-heap of the `count` smallest (distance, position) pairs seen; positions grow, so a
  // later pair displaces the largest only when its distance is smaller.
  std::vector<std::pair<double, std::uint64_t>> best;
  best.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t p = 0; p < n; ++p) {
    const double d = std::abs(plan.cost_of(plan.ref_at(p)) - target);
    if (best.size() < count) {
      best.emplace_back(d, p);
      std::push_heap(best.begin(), best.end());
    } else if (d < best.front().first) {
      std::pop_heap(best.begin(), best.end());
      best.back() = {d, p};
      std::push_heap(best.begin(), best.end());
    }
  }
  std::sort(best.begin(), best.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  for (const auto& c : best) repeats.push_back(plan.ref_at(c.second));
}

/// The hash of the per-sample costs a plan's batch costs include (`epoch_plan::sample_cost_hash`),
/// which its resume state records; nullopt for a plan made without them or a plan type that
/// has none.
template <class Plan>
std::optional<std::uint64_t> recorded_sample_cost(const Plan& plan) noexcept {
  if constexpr (requires { plan.sample_cost_hash(); })
    return plan.sample_cost_hash();
  else
    return std::nullopt;
}

}  // namespace detail

/// The steps of one rank of a schedule, as a C++20 random-access view of the values
/// `Data::at(step, rank)` makes: `rank_steps` (`batch`) for epoch plans, `packed_rank_steps`
/// (`packed_batch`) for packed ones. A `view_base` rather than a `view_interface`, which clang
/// before 16 cannot instantiate with libstdc++ for a class being defined. It shares the
/// schedule's data, so it stays valid after the schedule it came from is gone:
/// `for (auto b : plan.deal(w).rank(r))` is safe.
template <class Data>
class schedule_steps : public std::ranges::view_base {
 public:
  using value_type = decltype(std::declval<const Data&>().at(std::uint64_t{}, std::uint32_t{}));

  class iterator {
   public:
    using iterator_concept = std::random_access_iterator_tag;
    using iterator_category = std::input_iterator_tag;  // yields values, not references
    using value_type = typename schedule_steps::value_type;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    iterator(std::shared_ptr<const Data> s, std::uint32_t rank, std::uint64_t step) noexcept
        : schedule_(std::move(s)), rank_(rank), step_(step) {}

    value_type operator*() const noexcept { return schedule_->at(step_, rank_); }
    value_type operator[](difference_type n) const noexcept { return *(*this + n); }

    iterator& operator++() noexcept {
      ++step_;
      return *this;
    }
    iterator operator++(int) noexcept {
      auto t = *this;
      ++step_;
      return t;
    }
    iterator& operator--() noexcept {
      --step_;
      return *this;
    }
    iterator operator--(int) noexcept {
      auto t = *this;
      --step_;
      return t;
    }
    iterator& operator+=(difference_type n) noexcept {
      step_ = static_cast<std::uint64_t>(static_cast<difference_type>(step_) + n);
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    friend iterator operator+(iterator i, difference_type n) noexcept { return i += n; }
    friend iterator operator+(difference_type n, iterator i) noexcept { return i += n; }
    friend iterator operator-(iterator i, difference_type n) noexcept { return i -= n; }
    friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return static_cast<difference_type>(a.step_) - static_cast<difference_type>(b.step_);
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.step_ == b.step_;
    }
    friend auto operator<=>(const iterator& a, const iterator& b) noexcept {
      return a.step_ <=> b.step_;
    }

   private:
    // Shared, so an iterator stays valid after the view (or sampler) it came from moves on.
    std::shared_ptr<const Data> schedule_;
    std::uint32_t rank_ = 0;
    std::uint64_t step_ = 0;
  };

  schedule_steps() = default;
  schedule_steps(std::shared_ptr<const Data> s, std::uint32_t rank, std::uint64_t first,
                 std::uint64_t last) noexcept
      : schedule_(std::move(s)), rank_(rank), first_(first), last_(last) {}

  [[nodiscard]] iterator begin() const noexcept { return {schedule_, rank_, first_}; }
  [[nodiscard]] iterator end() const noexcept { return {schedule_, rank_, last_}; }
  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(last_ - first_);
  }
  [[nodiscard]] bool empty() const noexcept { return first_ == last_; }
  [[nodiscard]] value_type operator[](std::size_t i) const noexcept {
    return begin()[static_cast<std::ptrdiff_t>(i)];
  }
  [[nodiscard]] value_type front() const noexcept { return *begin(); }
  [[nodiscard]] value_type back() const noexcept { return *(end() - 1); }

 private:
  std::shared_ptr<const Data> schedule_;
  std::uint32_t rank_ = 0;
  std::uint64_t first_ = 0;
  std::uint64_t last_ = 0;
};

/// One rank's steps of a `plan_schedule<Plan>`.
template <class Plan>
using plan_rank_steps = schedule_steps<detail::schedule_data<Plan>>;

/// A plan dealt to a world size from a resume point (see the top of this header). Every rank
/// builds the same schedule alone. A cheap, shared, immutable handle, like the plan.
/// `Plan` is a `batch_plan` (checked where the schedule is made: a plan's own `deal` names
/// its schedule while the plan is still incomplete).
template <class Plan>
class plan_schedule {
  using data = detail::schedule_data<Plan>;

 public:
  using plan_type = Plan;
  using batch_type = typename Plan::batch_type;

  /// Deals `plan` from global position `consumed` on to `world` ranks. Throws
  /// `vbucket::error` when world is 0.
  plan_schedule(Plan plan, std::uint32_t world, std::uint64_t consumed, bool drop_last) {
    static_assert(batch_plan<Plan>);
    const auto shape = detail::deal_shape::of(plan.num_batches(), world, consumed, drop_last);
    d_ = std::make_shared<const data>(std::move(plan), shape);
  }
  /// Deals `plan` from a saved state (of any world size); throws `vbucket::error` when its
  /// seed, epoch, (recorded) balance group or (recorded) budget is not the plan's.
  [[nodiscard]] static plan_schedule dealt_from(Plan plan, std::uint32_t world,
                                                const plan_state& state, bool drop_last) {
    state.check_for(plan.seed(), plan.epoch(), plan.options().balance_group, plan.recorded_budget(),
                    detail::recorded_sample_cost(plan));
    return plan_schedule(std::move(plan), world, state.consumed, drop_last);
  }

  [[nodiscard]] const Plan& plan() const noexcept { return d_->plan; }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return d_->world; }
  [[nodiscard]] bool drop_last() const noexcept { return d_->drop_last; }
  /// Global batches consumed before the first step of this schedule.
  [[nodiscard]] std::uint64_t consumed() const noexcept { return d_->consumed; }
  /// Steps every rank runs.
  [[nodiscard]] std::uint64_t steps() const noexcept { return d_->steps; }
  /// Repeats added to complete the last step (0 with drop_last).
  [[nodiscard]] std::uint64_t repeat_batches() const noexcept { return d_->repeats.size(); }
  /// Real batches left out of the incomplete last step with drop_last.
  [[nodiscard]] std::uint64_t dropped_batches() const noexcept { return d_->dropped; }
  /// What is repeated at the tail (the plan's refs), in the order it is dealt.
  [[nodiscard]] std::span<const std::uint64_t> repeats() const noexcept { return d_->repeats; }
  /// Samples of the repeats that complete the last step (a fixed plan counts them as pads).
  [[nodiscard]] std::uint64_t repeat_samples() const noexcept {
    std::uint64_t s = 0;
    for (const std::uint64_t ref : d_->repeats) s += plan().size_of(ref);
    return s;
  }
  /// Samples of the batches dropped with drop_last.
  [[nodiscard]] std::uint64_t dropped_samples() const noexcept {
    std::uint64_t s = 0;
    const std::uint64_t n = plan().num_batches();
    for (std::uint64_t p = n - d_->dropped; p < n; ++p) s += plan().size_of(plan().ref_at(p));
    return s;
  }

  /// The batch of `rank` at `step` (step < steps(), rank < world_size()).
  [[nodiscard]] batch_type at(std::uint64_t step, std::uint32_t rank) const noexcept {
    return d_->at(step, rank);
  }
  /// The plan's ref of that batch.
  [[nodiscard]] std::uint64_t ref_at(std::uint64_t step, std::uint32_t rank) const noexcept {
    return d_->ref_at(step, rank);
  }

  /// The steps of `rank` from `first_step` on, as a random-access view of batches; it shares
  /// the schedule's data, so it outlives the schedule.
  [[nodiscard]] plan_rank_steps<Plan> rank(std::uint32_t r,
                                           std::uint64_t first_step = 0) const noexcept {
    assert(r < d_->world);
    return {d_, r, std::min(first_step, d_->steps), d_->steps};
  }

  /// The resume state after `steps_done` steps of this schedule.
  [[nodiscard]] plan_state state_after(std::uint64_t steps_done) const noexcept {
    plan_state s{plan().seed(), plan().epoch(), d_->consumed + steps_done * d_->world,
                 plan().options().balance_group, plan().recorded_budget()};
    s.sample_cost = detail::recorded_sample_cost(plan());
    return s;
  }

 private:
  std::shared_ptr<const data> d_;
};

}  // namespace vbucket
