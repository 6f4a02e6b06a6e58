#pragma once
/// `any_sampler`: a `batch_sampler` whose rule, source family and batching are chosen at run
/// time — what the CLI's flags and Python's keyword arguments describe. The choice is made
/// once, by `make_any_sampler`; the rest of a program talks to one abstract interface.
///
///     auto meta = std::make_shared<const vbucket::meta_table>(vbucket::read_meta_csv(path));
///     std::unique_ptr<vbucket::any_sampler> s = vbucket::make_any_sampler(
///         meta, config, vbucket::opensora_v2_rule{}, {.world = w, .rank = r},
///         vbucket::big_seed::parse("123456789012345678901234567890"));
///     s->set_epoch(3);
///     if (s->packed()) { for (const auto& b : s->packed_batches()) train(b); }
///     else { for (const auto& b : s->batches()) train(b); }
///
/// The members of the other batching (`batches()` of a packing sampler, `packing()` of a fixed
/// one) throw `vbucket::error` saying which to call: with the typed `batch_sampler` that mistake
/// does not compile, here the batching is a run-time value.
///
/// Not for use from several threads at once (the sampler fills caches in `const` calls).

#include <concepts>  // std::copy_constructible, std::same_as
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint32_t, std::uint64_t
#include <memory>    // std::shared_ptr, std::unique_ptr, std::make_unique
#include <optional>  // std::optional
#include <string>    // std::string
#include <utility>   // std::move, std::pair, std::forward, std::as_const
#include <vector>    // std::vector

#include "batch_sampler.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"  // big_seed
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/seeding.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_state.hpp"
#include "vbucket/plan/plan_stats.hpp"

namespace vbucket {

/// The interface of a `batch_sampler` of any samples, rule, source family and batching.
class any_sampler {
 public:
  any_sampler() = default;
  any_sampler(const any_sampler&) = delete;
  any_sampler& operator=(const any_sampler&) = delete;
  virtual ~any_sampler() = default;

  // --- epoch and progress (`batch_sampler`'s) ------------------------------------------------

  virtual void set_epoch(std::uint64_t e) = 0;
  [[nodiscard]] virtual std::uint64_t epoch() const = 0;
  virtual void advance(std::uint64_t steps) = 0;
  [[nodiscard]] virtual plan_state state() const = 0;
  [[nodiscard]] virtual plan_state state_after(std::uint64_t steps) const = 0;
  /// `batch_sampler::load_state(s)`, or with a fingerprint `load_state(s, fingerprint)`.
  virtual void load_state(const plan_state& s,
                          std::optional<std::uint64_t> fingerprint = std::nullopt) = 0;
  [[nodiscard]] virtual std::uint64_t num_global_batches() const = 0;
  [[nodiscard]] virtual std::uint64_t fingerprint() const = 0;

  // --- what it was made with -----------------------------------------------------------------

  [[nodiscard]] virtual const sampler_options& options() const noexcept = 0;
  [[nodiscard]] virtual const std::shared_ptr<const bucket_config>& shared_config()
      const noexcept = 0;
  /// The number of samples (streamed samples: of the last epoch planned, 0 before).
  [[nodiscard]] virtual std::size_t num_samples() const = 0;
  /// The bucket of every sample in this epoch (assigns again).
  [[nodiscard]] virtual std::vector<bucket_id> assign() const = 0;

  [[nodiscard]] const bucket_config& config() const noexcept { return *shared_config(); }
  [[nodiscard]] std::uint64_t seed() const noexcept { return options().seed; }
  [[nodiscard]] std::uint32_t world() const noexcept { return options().world; }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return options().world; }
  [[nodiscard]] std::uint32_t rank() const noexcept { return options().rank; }
  [[nodiscard]] batching_mode batching() const noexcept { return options().batching; }
  [[nodiscard]] bool packed() const noexcept { return batching() == batching_mode::packed; }

  // --- fixed batching (throw for a packing sampler) ------------------------------------------

  [[nodiscard]] virtual rank_steps batches() const = 0;
  [[nodiscard]] virtual const epoch_plan& plan() const = 0;
  [[nodiscard]] virtual const epoch_schedule& schedule() const = 0;
  [[nodiscard]] virtual plan_stats stats() const = 0;

  // --- packed batching (throw for a fixed sampler) -------------------------------------------

  [[nodiscard]] virtual packed_rank_steps packed_batches() const = 0;
  [[nodiscard]] virtual const packed_plan& packing() const = 0;
  [[nodiscard]] virtual const packed_schedule& packing_schedule() const = 0;
  [[nodiscard]] virtual vbucket::packed_stats packed_stats() const = 0;

  // --- either batching -----------------------------------------------------------------------

  /// The step balance of the epoch as dealt from the current state.
  [[nodiscard]] virtual step_balance_stats balance() const = 0;

  /// This rank's steps from the current state.
  [[nodiscard]] std::size_t size() const {
    return packed() ? packed_batches().size() : batches().size();
  }
  [[nodiscard]] bool empty() const { return size() == 0; }

  /// The epoch dealt to this world from global position `from`, whatever the state (fixed).
  [[nodiscard]] epoch_schedule schedule_from(std::uint64_t from) const {
    return plan().deal(world(), from, options().drop_last);
  }
  /// As `schedule_from`, packed.
  [[nodiscard]] packed_schedule packing_schedule_from(std::uint64_t from) const {
    return packing().deal(world(), from, options().drop_last);
  }
  [[nodiscard]] epoch_schedule epoch_schedule_from_start() const { return schedule_from(0); }
  [[nodiscard]] packed_schedule packed_schedule_from_start() const {
    return packing_schedule_from(0);
  }
  /// The steps every rank runs when the epoch is dealt to this world from global position
  /// `from`, either batching.
  [[nodiscard]] std::uint64_t steps_from(std::uint64_t from) const {
    return packed() ? packing_schedule_from(from).steps() : schedule_from(from).steps();
  }
  /// The end of the epoch under this world as dealt from global position `from`: from + its
  /// steps · world.
  [[nodiscard]] std::uint64_t dealt_end(std::uint64_t from) const {
    return from + steps_from(from) * world();
  }
  /// (steps, world) of the whole epoch from its start, either batching.
  [[nodiscard]] std::pair<std::uint64_t, std::uint32_t> epoch_shape() const {
    return {steps_from(0), world()};
  }
  /// The state after `steps` steps of this world from the start of the current epoch (the
  /// plan's fields of `state()`, its position replaced; not checked against the epoch's end).
  [[nodiscard]] plan_state epoch_state(std::uint64_t steps) const {
    plan_state start = state();
    start.consumed = 0;
    return start.advanced(steps, world());
  }
  /// Moves to global position `consumed` of the current epoch (a position of this world's
  /// deal), checked as `load_state` checks it.
  void move_to(std::uint64_t consumed) {
    plan_state s = state();
    s.consumed = consumed;
    s.world.reset();
    load_state(s);
  }
  /// Loads a state of any epoch: moves to its epoch first when it is not the current one.
  void load_state_of_epoch(const plan_state& s,
                           std::optional<std::uint64_t> fingerprint = std::nullopt) {
    if (epoch() != s.epoch) set_epoch(s.epoch);
    load_state(s, fingerprint);
  }
};

namespace detail {

/// The refusal of a member of the other batching.
[[noreturn]] inline void refuse_batching(const char* what, bool packs) {
  if (packs)
    throw error(std::string("sampler: ") + what + " is for fixed batching; this sampler packs " +
                "(use packed_batches(), packing() or packing_schedule())");
  throw error(std::string("sampler: ") + what +
              " is for packed batching; this sampler has fixed batches (use batches(), plan() "
              "or schedule())");
}

/// `any_sampler` over a `batch_sampler` that views shared samples.
template <class Samples, class Rule, class Sources, class Batching>
class any_sampler_impl final : public any_sampler {
  static constexpr bool packs = Batching::mode == batching_mode::packed;

 public:
  any_sampler_impl(std::shared_ptr<const Samples> samples,
                   std::shared_ptr<const bucket_config> config, Rule rule, sampler_options o,
                   Sources sources)
      : samples_(std::move(samples)),
        s_(*samples_, std::move(config), std::move(rule), o, std::move(sources)) {}

  void set_epoch(std::uint64_t e) override { s_.set_epoch(e); }
  [[nodiscard]] std::uint64_t epoch() const override { return s_.epoch(); }
  void advance(std::uint64_t steps) override { s_.advance(steps); }
  [[nodiscard]] plan_state state() const override { return s_.state(); }
  [[nodiscard]] plan_state state_after(std::uint64_t steps) const override {
    return s_.state_after(steps);
  }
  void load_state(const plan_state& st, std::optional<std::uint64_t> fp) override {
    if (fp) {
      s_.load_state(st, *fp);
    } else {
      s_.load_state(st);
    }
  }
  [[nodiscard]] std::uint64_t num_global_batches() const override {
    return s_.num_global_batches();
  }
  [[nodiscard]] std::uint64_t fingerprint() const override { return s_.fingerprint(); }

  [[nodiscard]] const sampler_options& options() const noexcept override { return s_.options(); }
  [[nodiscard]] const std::shared_ptr<const bucket_config>& shared_config()
      const noexcept override {
    return s_.shared_config();
  }
  [[nodiscard]] std::size_t num_samples() const override { return s_.num_samples(); }
  [[nodiscard]] std::vector<bucket_id> assign() const override { return s_.assign(); }

  [[nodiscard]] rank_steps batches() const override {
    if constexpr (packs) {
      refuse_batching("batches()", packs);
    } else {
      return s_.batches();
    }
  }
  [[nodiscard]] const epoch_plan& plan() const override {
    if constexpr (packs) {
      refuse_batching("plan()", packs);
    } else {
      return s_.plan();
    }
  }
  [[nodiscard]] const epoch_schedule& schedule() const override {
    if constexpr (packs) {
      refuse_batching("schedule()", packs);
    } else {
      return s_.schedule();
    }
  }
  [[nodiscard]] plan_stats stats() const override {
    if constexpr (packs) {
      refuse_batching("stats()", packs);
    } else {
      return s_.stats();
    }
  }

  [[nodiscard]] packed_rank_steps packed_batches() const override {
    if constexpr (packs) {
      return s_.batches();
    } else {
      refuse_batching("packed_batches()", packs);
    }
  }
  [[nodiscard]] const packed_plan& packing() const override {
    if constexpr (packs) {
      return s_.plan();
    } else {
      refuse_batching("packing()", packs);
    }
  }
  [[nodiscard]] const packed_schedule& packing_schedule() const override {
    if constexpr (packs) {
      return s_.schedule();
    } else {
      refuse_batching("packing_schedule()", packs);
    }
  }
  [[nodiscard]] vbucket::packed_stats packed_stats() const override {
    if constexpr (packs) {
      return s_.stats();
    } else {
      refuse_batching("packed_stats()", packs);
    }
  }

  [[nodiscard]] step_balance_stats balance() const override { return step_balance(s_.schedule()); }

 private:
  std::shared_ptr<const Samples> samples_;  // before s_, which views them (or copies a stream)
  batch_sampler<Samples, Rule, Sources, Batching> s_;
};

/// The `any_sampler_impl` of `options.batching`.
template <class Samples, class Rule, class Sources>
std::unique_ptr<any_sampler> make_batching(std::shared_ptr<const Samples> samples,
                                           std::shared_ptr<const bucket_config> config, Rule rule,
                                           const sampler_options& options, Sources sources) {
  if (options.batching == batching_mode::packed)
    return std::make_unique<any_sampler_impl<Samples, Rule, Sources, packed_batching>>(
        std::move(samples), std::move(config), std::move(rule), options, std::move(sources));
  return std::make_unique<any_sampler_impl<Samples, Rule, Sources, fixed_batching>>(
      std::move(samples), std::move(config), std::move(rule), options, std::move(sources));
}

}  // namespace detail

/// The big-seed dispatch, the one place a run seed of any size chooses the random sources:
/// checks `seed` against `options.rng` (`check_seed`), sets `options.seed` to `plan_seed(seed)`
/// (the plan's 64-bit seed) and calls `f(options, builtin_sources{})` when the seed fits in 64
/// bits, else `f(options, numpy_seed_family{seed})` (NumPy's draws; `options.rng` is set to
/// fast, which applies to built-in sources only). `f` returns one type from both calls.
template <class F>
decltype(auto) visit_seed_sources(sampler_options options, const big_seed& seed, F&& f) {
  check_seed(options.rng, seed);
  options.seed = plan_seed(seed);
  if (seed_u64(seed)) return std::forward<F>(f)(std::as_const(options), builtin_sources{});
  options.rng = rng_mode::fast;
  return std::forward<F>(f)(std::as_const(options), numpy_seed_family{seed});
}

/// A sampler of `samples` (shared: the sampler keeps them alive) with `config`, `rule` and
/// `options`, seeded by `seed` (a run seed of any size, as NumPy takes them; `options.seed` is
/// ignored: `visit_seed_sources` sets it and chooses the sources): a seed below 2^64 draws from
/// the built-in sources (`options.rng`), a larger one from `numpy_seed_family` (Open-Sora's
/// NumPy draws; `options.rng` must then be numpy). The batching is `options.batching`. Throws
/// `vbucket::error` for null samples or config, a seed the mode cannot use, or options the
/// sampler refuses.
template <sample_collection Samples, class Rule>
  requires std::copy_constructible<Rule> && bucket_rule<Rule, fast_source>
[[nodiscard]] std::unique_ptr<any_sampler> make_any_sampler(
    std::shared_ptr<const Samples> samples, std::shared_ptr<const bucket_config> config, Rule rule,
    const sampler_options& options, const big_seed& seed) {
  if (!samples) throw error("make_any_sampler: the shared samples are null");
  if (!config) throw error("make_any_sampler: the shared config is null");
  return visit_seed_sources(
      options, seed, [&](const sampler_options& o, auto sources) -> std::unique_ptr<any_sampler> {
        if constexpr (std::same_as<decltype(sources), numpy_seed_family> &&
                      !bucket_rule<Rule, numpy_source>) {
          throw error("make_any_sampler: seed " + seed.to_string() +
                      " does not fit in 64 bits, and this rule draws from fast_source only");
        } else {
          return detail::make_batching(std::move(samples), std::move(config), std::move(rule), o,
                                       std::move(sources));
        }
      });
}

/// As above with the 64-bit seed `options.seed`.
template <sample_collection Samples, class Rule>
  requires std::copy_constructible<Rule> && bucket_rule<Rule, fast_source>
[[nodiscard]] std::unique_ptr<any_sampler> make_any_sampler(
    std::shared_ptr<const Samples> samples, std::shared_ptr<const bucket_config> config, Rule rule,
    sampler_options options) {
  const big_seed seed(options.seed);
  return make_any_sampler(std::move(samples), std::move(config), std::move(rule), options, seed);
}

}  // namespace vbucket
