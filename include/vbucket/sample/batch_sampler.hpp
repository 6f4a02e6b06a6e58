#pragma once
/// `batch_sampler`: the one object a trainer iterates. Samples + config + rule + options →
/// `set_epoch(e)`, this rank's batches as a range, `state()` / `load_state()` for checkpoints
/// (also under another world size), and `fingerprint()` for cross-rank agreement checks.
///
///     std::vector<my_clip> clips = read_my_metadata();  // any video_meta type, or a meta_table
///     vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{.fps_max = 16},
///                                    {.seed = 42, .world = world, .rank = rank});
///     for (std::uint64_t epoch = 0; epoch < epochs; ++epoch) {
///       sampler.set_epoch(epoch);
///       for (const vbucket::batch& b : sampler) { train(b); sampler.advance(1); }
///     }
///
/// It is the hand-wired path, once per epoch and lazily (at the first `begin()`, `size()`,
/// `plan()`, … after `set_epoch`): `assign_all` (or `assign_range` for a user's range) with the
/// source of (seed, epoch), `make_epoch_plan` with the same seed and epoch, then
/// `plan.deal(world, consumed, drop_last).rank(rank)`. Seed and epoch are given once, so the
/// draws and the shuffles cannot disagree.
///
/// The batching mode is a type, the last template argument (`batch_plan.hpp`): `fixed_batching`
/// (the default, `epoch_plan`) or `packed_batching` (`make_packed_plan`: mixed shapes up to
/// `.token_budget`). A packing sampler's range-for yields `packed_batch`es; state, resume and
/// fingerprint work the same way; members of the other batching do not compile.
///
///     vbucket::batch_sampler packing(clips, config, rule, {.seed = 42, .token_budget = 65536},
///                                    vbucket::packed_batching{});
///     for (const vbucket::packed_batch& b : packing) train(b);
///
/// To choose the batching at run time (a flag, a string), use `make_any_sampler`.

#include <algorithm>    // std::max
#include <cmath>        // std::isfinite (the token budget)
#include <concepts>     // std::same_as, std::copy_constructible, std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::uint32_t
#include <limits>       // std::numeric_limits
#include <memory>       // std::shared_ptr, std::make_shared
#include <optional>     // std::optional
#include <ranges>       // std::ranges::random_access_range, std::ranges::begin
#include <span>         // std::span
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <type_traits>  // std::conditional_t, std::remove_cvref_t
#include <utility>      // std::move, std::forward, std::declval
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"
#include "vbucket/base/random.hpp"
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/meta.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/bucket/seeding.hpp"
#include "vbucket/plan/batch_plan.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"

namespace vbucket {

/// What a sampler depends on besides the samples, the config and the rule. An aggregate whose
/// first members are seed, world and rank, so `{.seed = 42, .world = 8, .rank = r}` reads as a
/// call; the rest default to the CLI's defaults.
struct sampler_options {
  std::uint64_t seed = defaults::seed;    ///< the run's seed; with the epoch it keys every draw
  std::uint32_t world = defaults::world;  ///< data-parallel ranks that share the epoch
  std::uint32_t rank = 0;                 ///< this rank, below `world`
  rng_mode rng = defaults::rng;  ///< Open-Sora's NumPy draws (seed + epoch), or fast_source
  incomplete_policy policy = defaults::policy;
  /// Drop the incomplete last step instead of completing it with repeats of whole batches.
  bool drop_last = false;
  /// Step balance (`plan_options::balance_group`): 0 off, else chunks of G cost-sorted batches,
  /// e.g. `default_balance_group` (960, for worlds that divide it). The global order depends on
  /// it, not on the world size: keep it when resuming under another world size.
  std::uint32_t balance_group = 0;
  /// Threads for assignment and planning (0: one per core); the batches do not depend on it.
  unsigned threads = 0;
  /// How batches are formed: `fixed` (one bucket and its batch size per batch, `policy`
  /// applies) or `packed` (mixed shapes up to `token_budget`). A `batch_sampler` takes it from
  /// its type (a packing sampler sets it; a fixed one refuses `packed`); `make_any_sampler`
  /// chooses the sampler type by it.
  batching_mode batching = batching_mode::fixed;
  /// Packed: the most cost (latent tokens) one rank's step may hold, a finite number > 0.
  double token_budget = 0.0;
  /// Packed: drop (and count) samples costing more than the budget instead of an error.
  bool drop_oversized = false;
  /// The latent token formula of a batch's cost: the packed budget's unit and the step
  /// balance's cost (default: Open-Sora 2.0's, compression 4 × 8 × 8 and patches 1 × 2 × 2).
  token_formula tokens{};
  /// Fixed batching: a cost per sample (element i: sample index i's, a finite number ≥ 0, in
  /// the unit of the batch cost, e.g. its expected decode seconds from
  /// `ffmpeg::sample_decode_costs`), added to each batch's cost for step balance and the
  /// batch order (`make_epoch_plan(..., cost, sample_cost)`); empty: none. One per sample of
  /// every epoch planned. A sampler copies them when it is made (its `options()` view its
  /// copy); the resume state records their hash (`plan_state::sample_cost`), so resuming under
  /// other costs is refused. Packed batching takes none.
  std::span<const double> sample_costs{};
  /// What messages call the per-sample costs (their file's name); empty: "sample_costs".
  /// Copied with them.
  std::string_view sample_costs_name{};
};

/// Samples a sampler can plan: a `meta_table`, `chunked_samples` read again for each epoch
/// (`streamed_meta_csv`), or a random-access, sized range of a `video_meta` type (element i is
/// sample index i). Semantic requirement: its size and elements do not change while a sampler
/// views it.
///
///     std::vector<my_clip> clips;  // with vbucket::meta_traits<my_clip> if names differ
///     static_assert(vbucket::sample_collection<std::vector<my_clip>>);
template <class S>
concept sample_collection = std::same_as<std::remove_cv_t<S>, meta_table> || chunked_samples<S> ||
    (std::ranges::random_access_range<const S>&& std::ranges::sized_range<const S>&&
         video_meta<std::remove_cvref_t<std::ranges::range_reference_t<const S>>>);

/// A family of random sources, one per (seed, epoch): `f(seed, epoch, num_buckets)` returns a
/// `random_source`. Semantic requirement: a pure function of its arguments (every rank calls
/// it alone and must get the same draws).
///
///     auto halves = [](std::uint64_t s, std::uint64_t e, std::size_t) {
///       return vbucket::fast_source(s / 2, e); };
template <class F>
concept source_family = std::copy_constructible<F> &&
    requires(const F& f, std::uint64_t seed, std::uint64_t epoch, std::size_t num_buckets) {
  { f(seed, epoch, num_buckets) } -> random_source;
};

/// The default family of a sampler: `fast_source` or `numpy_source`, chosen at run time by
/// `sampler_options::rng`.
struct builtin_sources {};

/// The source a family makes.
template <source_family F>
using family_source_t = std::remove_cvref_t<decltype(std::declval<const F&>()(
    std::uint64_t{}, std::uint64_t{}, std::size_t{}))>;

/// A rule a sampler with source family `Sources` can use: with the built-in sources, a
/// `bucket_rule` over `fast_source` (and over `numpy_source` for `rng_mode::numpy`, checked when
/// the sampler is made); with a user family, a `bucket_rule` over the family's source.
template <class Rule, class Sources>
concept sampler_rule = std::copy_constructible<Rule> &&
    ((std::same_as<Sources, builtin_sources> && bucket_rule<Rule, fast_source>) ||
     (source_family<Sources> && bucket_rule<Rule, family_source_t<Sources>>));

namespace detail {

/// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3), fed 32-bit words as
/// their four little-endian bytes, so the value is the same on every platform.
class fnv1a64 {
 public:
  constexpr void word(std::uint32_t w) noexcept {
    for (int byte = 0; byte < 4; ++byte) {
      h_ = (h_ ^ ((w >> (8 * byte)) & 0xffu)) * 0x100000001b3ULL;
    }
  }
  constexpr void bytes(std::string_view s) noexcept {
    for (const char c : s) h_ = (h_ ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

/// A range's iterators with member begin() and end(), as `assign_range` reads them (not
/// `std::ranges::subrange`, which clang before 16 cannot instantiate with libstdc++).
template <class It>
struct iterator_pair {
  It first;
  It last;
  [[nodiscard]] It begin() const { return first; }
  [[nodiscard]] It end() const { return last; }
};

/// A forwarding reference's type names T (any value category and constness).
template <class S, class T>
concept forwarded = std::same_as<std::remove_cvref_t<S>, T>;

/// Config arguments a sampler takes: a config (copied) or a shared one.
template <class C>
concept sampler_config_arg = std::convertible_to<C, const bucket_config&> ||
    std::convertible_to<C, std::shared_ptr<const bucket_config>>;

/// A sampler's copy of its per-sample costs and their name (`sampler_options::sample_costs`),
/// shared by its copies; its options view them.
struct kept_sample_costs {
  std::vector<double> costs;
  std::string name;
};

template <class C>
std::shared_ptr<const bucket_config> share_config(C&& c) {
  if constexpr (std::convertible_to<C, std::shared_ptr<const bucket_config>>) {
    std::shared_ptr<const bucket_config> p = std::forward<C>(c);
    if (!p) throw error("batch_sampler: the shared config is null");
    return p;
  } else {
    return std::make_shared<const bucket_config>(static_cast<const bucket_config&>(c));
  }
}

}  // namespace detail

/// The fingerprint of one batch: FNV-1a 64 over its 32-bit little-endian words, its bucket id,
/// its number of indices, then its indices.
inline std::uint64_t batch_fingerprint(const batch& b) noexcept {
  detail::fnv1a64 h;
  h.word(static_cast<std::uint32_t>(b.bucket));
  h.word(static_cast<std::uint32_t>(b.indices.size()));
  for (const std::uint32_t i : b.indices) h.word(i);
  return h.value();
}

/// The fingerprint of one packed batch: FNV-1a 64 over its number of entries, then each entry's
/// bucket id and index (32-bit little-endian words).
inline std::uint64_t batch_fingerprint(const packed_batch& b) noexcept {
  detail::fnv1a64 h;
  h.word(static_cast<std::uint32_t>(b.indices.size()));
  for (std::size_t i = 0; i < b.indices.size(); ++i) {
    h.word(static_cast<std::uint32_t>(b.buckets[i]));
    h.word(b.indices[i]);
  }
  return h.value();
}

/// The fingerprint of an epoch plan's global batch sequence (see `batch_sampler::fingerprint`):
/// FNV-1a 64 over the `batch_fingerprint` of every global batch in order, each as two 32-bit
/// little-endian words (low, high). It depends on neither the world size nor the rank, nor on
/// `threads` (0: one per core), which only hash the batches in parallel.
VBUCKET_COMPILED_INLINE std::uint64_t plan_fingerprint(const epoch_plan& plan,
                                                       unsigned threads = 0);
/// The fingerprint of a packed plan's global batch sequence, as `plan_fingerprint` of a fixed
/// plan (over `batch_fingerprint` of every packed batch).
VBUCKET_COMPILED_INLINE std::uint64_t plan_fingerprint(const packed_plan& plan,
                                                       unsigned threads = 0);

#if VBUCKET_HEADER_DEFINITIONS
namespace detail {
/// `plan_fingerprint` of either plan.
template <class Plan>
std::uint64_t sequence_fingerprint(const Plan& plan, unsigned threads) {
  std::vector<std::uint64_t> batches(static_cast<std::size_t>(plan.num_batches()));
  parallel_chunks(batches.size(), threads, [&](std::size_t first, std::size_t last) {
    for (std::size_t p = first; p < last; ++p) batches[p] = batch_fingerprint(plan.global_batch(p));
  });
  fnv1a64 h;
  for (const std::uint64_t b : batches) {
    h.word(static_cast<std::uint32_t>(b));
    h.word(static_cast<std::uint32_t>(b >> 32));
  }
  return h.value();
}
}  // namespace detail

VBUCKET_COMPILED_INLINE std::uint64_t plan_fingerprint(const epoch_plan& plan, unsigned threads) {
  return detail::sequence_fingerprint(plan, threads);
}
VBUCKET_COMPILED_INLINE std::uint64_t plan_fingerprint(const packed_plan& plan, unsigned threads) {
  return detail::sequence_fingerprint(plan, threads);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// The batches of one rank of a data-parallel job, epoch by epoch, over the user's own samples.
///
/// - `Samples`: a `sample_collection` (a `meta_table` or a random-access range of a
///   `video_meta` type). The sampler keeps a *view*: a pointer to it, or a copy when it is a
///   `std::ranges::view` (a span). The samples must outlive the sampler and stay unchanged;
///   passing a temporary container is a compile error.
/// - `Rule`: `opensora_v2_rule`, `opensora_v12_rule` or a user `bucket_rule`; copied.
/// - `Sources`: `builtin_sources` (fast or numpy by `sampler_options::rng`) or a user
///   `source_family` called with (seed, epoch, num_buckets).
///
/// The config is owned (copied, or shared when given as `std::shared_ptr<const bucket_config>`).
///
/// An epoch's plan is made at the first call that needs it after `set_epoch` (the assignment
/// and the planning are parallel over `options.threads`); the rank's schedule is dealt from
/// the state at the first call that needs it after `advance` or `load_state`. Those calls
/// (`begin`, `size`, `plan`, `schedule`, `fingerprint`, `stats`, `batches`) are `const` but
/// fill caches, so a sampler is not to be used from several threads at once. Iterators share
/// what they read: a range-for loop stays valid while its body calls `advance` or `load_state`.
///
/// Resume: `state()` is (seed, epoch, global batches consumed, balance group). After k steps,
/// the trainer calls `advance(k)`: consumed grows by k · world (every rank ran k steps).
/// `load_state(s)` under any world size yields exactly the global batches not yet consumed
/// (see `epoch_plan::deal`).
template <sample_collection Samples, class Rule = opensora_v2_rule, class Sources = builtin_sources,
          batching_kind Batching = fixed_batching>
  requires sampler_rule<Rule, Sources>
class batch_sampler {
  static constexpr bool chunked = chunked_samples<Samples>;
  static constexpr bool stores_copy = std::ranges::view<Samples> || chunked;
  static constexpr bool packs = Batching::mode == batching_mode::packed;
  using stored_samples = std::conditional_t<stores_copy, Samples, const Samples*>;

 public:
  using samples_type = Samples;
  using rule_type = Rule;
  using sources_type = Sources;
  using batching_type = Batching;
  /// The epoch's plan: `epoch_plan` or `packed_plan`.
  using plan_type = typename Batching::plan_type;
  /// The plan dealt to this world: `epoch_schedule` or `packed_schedule`.
  using schedule_type = plan_schedule<plan_type>;
  /// What a range-for yields: `batch` or `packed_batch`.
  using batch_type = typename plan_type::batch_type;
  /// This rank's batches (`batches()`): a random-access view of `batch_type` values that
  /// shares the schedule (`rank_steps` or `packed_rank_steps`).
  using steps_type = plan_rank_steps<plan_type>;
  /// A random-access iterator over this rank's batches; it shares the schedule it reads, so it
  /// stays valid when the sampler moves on (`advance`, `set_epoch`).
  using iterator = typename steps_type::iterator;
  /// This rank's packed batches (a packing sampler's `steps_type`).
  using packed_steps = packed_rank_steps;

  /// Views `samples` (see the class comment), owns a copy of `config` (or shares it), and
  /// checks the options: world ≥ 1, rank < world, a rule that can draw from the chosen source,
  /// and the rule's own `validate()` when it has one. Throws `vbucket::error`.
  template <detail::forwarded<Samples> S, detail::sampler_config_arg C>
  batch_sampler(S&& samples, C&& config, Rule rule, sampler_options options = {},
                Sources sources = {})
      : samples_(keep(std::forward<S>(samples))),
        config_(detail::share_config(std::forward<C>(config))),
        rule_(std::move(rule)),
        options_(typed(options)),
        sources_(std::move(sources)) {
    static_assert(std::is_lvalue_reference_v<S> || stores_copy,
                  "batch_sampler keeps a view of the samples: pass a named container that "
                  "outlives the sampler (or a std::span of it), not a temporary");
    check_options();
    keep_sample_costs();
  }

  /// As above with a default-constructed rule.
  template <detail::forwarded<Samples> S, detail::sampler_config_arg C>
  batch_sampler(S&& samples, C&& config, sampler_options options = {})
      : batch_sampler(std::forward<S>(samples), std::forward<C>(config), Rule{}, options) {}

  /// As above, with the batching as the last argument (`vbucket::packed_batching{}`), for
  /// class template argument deduction.
  template <detail::forwarded<Samples> S, detail::sampler_config_arg C>
  batch_sampler(S&& samples, C&& config, Rule rule, sampler_options options, Batching)
      : batch_sampler(std::forward<S>(samples), std::forward<C>(config), std::move(rule), options,
                      Sources{}) {}
  template <detail::forwarded<Samples> S, detail::sampler_config_arg C>
  batch_sampler(S&& samples, C&& config, Rule rule, sampler_options options, Sources sources,
                Batching)
      : batch_sampler(std::forward<S>(samples), std::forward<C>(config), std::move(rule), options,
                      std::move(sources)) {}

  // --- epoch and progress ------------------------------------------------------------------

  /// Starts epoch `e` from its beginning (consumed = 0); its plan is made when first needed.
  void set_epoch(std::uint64_t e) {
    epoch_ = e;
    consumed_ = 0;
    plan_.reset();
    schedule_.reset();
    fingerprint_.reset();
  }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }

  /// Records that this rank (and so every rank) ran `steps` more steps: consumed grows by
  /// steps · world. Iterators already taken stay valid; the next `begin()` starts after them.
  void advance(std::uint64_t steps = 1) {
    const std::uint64_t w = options_.world;
    if (steps > (std::numeric_limits<std::uint64_t>::max() - consumed_) / w)
      throw error("batch_sampler: advance(" + std::to_string(steps) + ") overflows the " +
                  "consumed batch count " + std::to_string(consumed_));
    consumed_ += steps * w;
  }

  /// The resume state now: (seed, epoch, global batches consumed, balance group, this world
  /// size, the plan's fingerprint, the hash of its per-sample costs if any). Save
  /// `state().to_string()` in a checkpoint: `load_state` refuses it for any other plan (the
  /// fingerprint is recorded). Makes the epoch's plan if it is not made yet (for the fingerprint).
  [[nodiscard]] plan_state state() const {
    plan_state s{options_.seed, epoch_, consumed_, options_.balance_group, recorded_budget()};
    s.world =
        plan_state::position_world(consumed_, num_global_batches(), options_.world, resumed_world_);
    s.fingerprint = fingerprint();
    s.sample_cost = recorded_sample_cost();
    return s;
  }
  /// The resume state after `steps` more steps of this rank. Throws `vbucket::error` when the
  /// position would overflow 64 bits or pass the end of the epoch (naming its size).
  [[nodiscard]] plan_state state_after(std::uint64_t steps) const {
    plan_state s = state().advanced(steps, options_.world);
    check_position(s);
    return s;
  }

  /// Resumes from a saved state (of any world size): the next `begin()` yields the global
  /// batches not yet consumed, dealt to this world. Throws `vbucket::error` when the state is
  /// not of this plan: another seed, another epoch (call `set_epoch` first), another recorded
  /// balance group, token budget or per-sample costs (or costs recorded and none given, or the
  /// reverse), another recorded fingerprint (the samples, config, rule, rng or policy changed
  /// since it was saved), or a position past the end of the epoch. Makes the epoch's plan if
  /// it is not made yet.
  void load_state(const plan_state& s) {
    check_state(s);
    s.check_for(options_.seed, epoch_, options_.balance_group, recorded_budget(),
                recorded_sample_cost());
    if (s.fingerprint) check_fingerprint(s, *s.fingerprint);
    check_position(s);
    // The plan's own check covers every recorded plan parameter of the state.
    schedule_ = schedule_type::dealt_from(ensure_plan(), options_.world, s, options_.drop_last);
    consumed_ = dealt_from_ = s.consumed;
    resumed_world_ = s.world.value_or(options_.world);
  }
  /// As `load_state(s)`, and also refuses a state saved with another plan of the same seed and
  /// epoch (other samples, config, rule, rng or policy): `fingerprint` is the `fingerprint()`
  /// saved with the state (for states from before `plan_state::fingerprint` existed).
  void load_state(const plan_state& s, std::uint64_t fingerprint) {
    check_state(s);
    s.check_for(options_.seed, epoch_, options_.balance_group, recorded_budget(),
                recorded_sample_cost());
    check_fingerprint(s, fingerprint);
    load_state(s);
  }

  /// The number of global batches of the epoch's plan (before dealing: no alignment repeats).
  [[nodiscard]] std::uint64_t num_global_batches() const { return ensure_plan().num_batches(); }

  // --- this rank's batches -----------------------------------------------------------------

  /// This rank's batches from the current state: a fixed sampler's `batch`es (the bucket, target
  /// T/H/W and the sample indices, element numbers of the samples), a packing sampler's
  /// `packed_batch`es.
  [[nodiscard]] iterator begin() const { return batches().begin(); }
  [[nodiscard]] iterator end() const { return batches().end(); }
  /// This rank's steps from the current state: the number of batches `begin()..end()` yields.
  [[nodiscard]] std::size_t size() const { return batches().size(); }
  [[nodiscard]] bool empty() const { return size() == 0; }
  /// This rank's batches from the current state as a view that shares the schedule.
  [[nodiscard]] steps_type batches() const { return ensure_schedule().rank(options_.rank); }

  // --- the epoch as a whole ------------------------------------------------------------------

  /// The epoch's plan (the global batch sequence, independent of the world size).
  [[nodiscard]] const plan_type& plan() const { return ensure_plan(); }
  /// The plan dealt to this world from the current state (every rank's steps).
  [[nodiscard]] const schedule_type& schedule() const { return ensure_schedule(); }
  /// Statistics of the epoch as dealt from the current state: `plan_stats`, or a packing
  /// sampler's `packed_stats`.
  [[nodiscard]] auto stats() const {
    if constexpr (packs) {
      return compute_packed_stats(schedule());
    } else {
      return compute_plan_stats(schedule(), *config_);
    }
  }

  /// A 64-bit hash of the epoch's global batch sequence (`plan_fingerprint`): equal on every
  /// rank and world size for the same samples, config, rule, rng, seed, epoch, policy (or
  /// budget), balance group and per-sample costs (costs that change no batch change no
  /// fingerprint; the state records their hash as well). Compare it across ranks (an all-gather) to
  /// check they agree.
  [[nodiscard]] std::uint64_t fingerprint() const {
    if (!fingerprint_) fingerprint_ = plan_fingerprint(ensure_plan(), options_.threads);
    return *fingerprint_;
  }

  // --- packed batching: the names of the generic members ---------------------------------------

  /// Whether this sampler packs (its type's batching).
  [[nodiscard]] static constexpr bool packed() noexcept { return packs; }
  /// This rank's packed batches from the current state (`batches()`).
  template <class B = Batching>
    requires std::same_as<B, packed_batching>
  [[nodiscard]] packed_steps packed_batches() const { return batches(); }
  /// The epoch's packed plan (`plan()`).
  template <class B = Batching>
    requires std::same_as<B, packed_batching>
  [[nodiscard]] const packed_plan& packing() const { return plan(); }
  /// The packed plan dealt to this world from the current state (`schedule()`).
  template <class B = Batching>
    requires std::same_as<B, packed_batching>
  [[nodiscard]] const packed_schedule& packing_schedule() const { return schedule(); }

  // --- what it was made with -----------------------------------------------------------------

  [[nodiscard]] const Samples& samples() const noexcept {
    if constexpr (stores_copy) {
      return samples_;
    } else {
      return *samples_;
    }
  }
  /// The number of samples (`chunked_samples`: of the last epoch planned, 0 before).
  [[nodiscard]] std::size_t num_samples() const noexcept {
    if constexpr (chunked) {
      return read_samples_;
    } else if constexpr (std::same_as<std::remove_cv_t<Samples>, meta_table>) {
      return samples().size();
    } else {
      return static_cast<std::size_t>(std::ranges::size(samples()));
    }
  }
  [[nodiscard]] const bucket_config& config() const noexcept { return *config_; }
  [[nodiscard]] const std::shared_ptr<const bucket_config>& shared_config() const noexcept {
    return config_;
  }
  [[nodiscard]] const Rule& rule() const noexcept { return rule_; }
  [[nodiscard]] const Sources& sources() const noexcept { return sources_; }
  [[nodiscard]] const sampler_options& options() const noexcept { return options_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return options_.seed; }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return options_.world; }
  [[nodiscard]] std::uint32_t rank() const noexcept { return options_.rank; }

  /// The bucket of every sample in this epoch, as the plan was made from (assigns again).
  [[nodiscard]] std::vector<bucket_id> assign() const {
    return with_source([&](const auto& source) { return assign_with(source); });
  }

 private:
  template <class S>
  static stored_samples keep(S&& s) {
    if constexpr (stores_copy) {
      return std::forward<S>(s);
    } else {
      return &s;
    }
  }

  void check_fingerprint(const plan_state& s, std::uint64_t fingerprint) const {
    const std::uint64_t mine = this->fingerprint();
    if (mine != fingerprint)
      throw error("batch_sampler: cannot load state \"" + s.to_string() +
                  "\": it was saved with plan fingerprint " + plan_state::hex(fingerprint) +
                  ", this sampler's plan of epoch " + std::to_string(epoch_) + " (" +
                  std::string(batching_name(Batching::mode)) + " batching) is " +
                  plan_state::hex(mine) +
                  " (the samples, config, rule, rng, policy, balance group or batching differ: "
                  "resuming would replay some samples and skip others)");
  }

  /// A position is at most the end of the epoch's last step under the world it was saved under:
  /// its N global batches, plus fewer than a world of alignment repeats in that step (wherever
  /// a resume under another world size put the step boundaries).
  void check_position(const plan_state& s) const {
    const std::uint64_t n = num_global_batches();
    const std::uint64_t w = s.world.value_or(options_.world);
    const std::uint64_t end = n + (w - 1);
    if (s.consumed > end)
      throw error("batch_sampler: position " + std::to_string(s.consumed) +
                  " (consumed global batches) of state \"" + s.to_string() +
                  "\" is past the end of epoch " + std::to_string(epoch_) + ", which has " +
                  std::to_string(n) + " global batches (" + std::to_string((n + w - 1) / w) +
                  " steps at world " + std::to_string(w) + " from its start)");
  }

  void check_state(const plan_state& s) const {
    if (s.seed != options_.seed)
      throw error("batch_sampler: cannot load state \"" + s.to_string() + "\": it is of seed " +
                  std::to_string(s.seed) + ", this sampler's seed is " +
                  std::to_string(options_.seed));
    if (s.epoch != epoch_)
      throw error("batch_sampler: cannot load state \"" + s.to_string() + "\": it is of epoch " +
                  std::to_string(s.epoch) + ", the sampler is at epoch " + std::to_string(epoch_) +
                  " (call set_epoch(" + std::to_string(s.epoch) + ") first)");
  }

  /// The options with the batching of this sampler's type: a packing sampler sets it; a fixed
  /// one refuses `packed`, which needs the packing type.
  static sampler_options typed(sampler_options o) {
    if constexpr (packs) {
      o.batching = batching_mode::packed;
    } else if (o.batching == batching_mode::packed) {
      throw error(
          "batch_sampler: batching = packed needs a packing sampler: pass "
          "vbucket::packed_batching{} as the last argument (batch_sampler<..., "
          "packed_batching>), or choose at run time with make_any_sampler");
    }
    return o;
  }

  /// What the resume state records besides seed, epoch and balance group: a packing sampler's
  /// budget.
  [[nodiscard]] std::optional<double> recorded_budget() const noexcept {
    if constexpr (packs) {
      return options_.token_budget;
    } else {
      return std::nullopt;
    }
  }

  /// The hash of the per-sample costs a state of this sampler records, or nothing without them.
  [[nodiscard]] std::optional<std::uint64_t> recorded_sample_cost() const noexcept {
    return sample_cost_hash_;
  }

  /// What messages call the per-sample costs.
  [[nodiscard]] std::string costs_name() const {
    return options_.sample_costs_name.empty() ? std::string("sample_costs")
                                              : std::string(options_.sample_costs_name);
  }

  /// Per-sample costs: none with packed batching, each a finite number ≥ 0; copied (the
  /// options view the copy) and hashed.
  void keep_sample_costs() {
    if (options_.sample_costs.empty()) return;
    if (packed())
      throw error("batch_sampler: per-sample costs (" + costs_name() +
                  ") apply to fixed batching only; packed plans take no per-sample costs");
    const std::span<const double> c = options_.sample_costs;
    for (std::size_t i = 0; i < c.size(); ++i)
      if (!(c[i] >= 0.0 && std::isfinite(c[i])))
        throw error("batch_sampler: " + costs_name() + ": the cost of sample " + std::to_string(i) +
                    " is " + detail::format_cost(c[i]) + ", not a finite number >= 0");
    auto kept = std::make_shared<detail::kept_sample_costs>();
    kept->costs.assign(c.begin(), c.end());
    kept->name = options_.sample_costs_name;
    costs_ = std::move(kept);
    options_.sample_costs = costs_->costs;
    options_.sample_costs_name = costs_->name;
    sample_cost_hash_ = sample_costs_hash(costs_->costs);
  }

  void check_options() const {
    if (options_.world == 0) throw error("batch_sampler: world size must be at least 1");
    if (options_.rank >= options_.world)
      throw error("batch_sampler: rank " + std::to_string(options_.rank) +
                  " is not below the world size " + std::to_string(options_.world));
    // rng chooses among the built-in sources (numpy by default); a user family draws its own.
    if (options_.rng == rng_mode::numpy) {
      if constexpr (std::same_as<Sources, builtin_sources> && !bucket_rule<Rule, numpy_source>) {
        throw error(
            "batch_sampler: rng numpy (the default) needs a rule that draws from "
            "numpy_source; this rule draws from fast_source only: set rng = rng_mode::fast");
      }
    }
    if (!packed() && (options_.token_budget != 0.0 || options_.drop_oversized))
      throw error(
          "batch_sampler: token_budget and drop_oversized apply to packed batching "
          "(batching = packed); this sampler has fixed batches");
    if (packed() && !(options_.token_budget > 0.0 && std::isfinite(options_.token_budget)))
      throw error(
          "batch_sampler: packed batching needs a token budget that is a finite number > "
          "0, got " +
          detail::format_cost(options_.token_budget));
    options_.tokens.validate();
    if constexpr (requires { rule_.validate(); }) rule_.validate();
  }

  /// `f(source)` with the epoch's random source.
  template <class F>
  decltype(auto) with_source(F&& f) const {
    if constexpr (std::same_as<Sources, builtin_sources>) {
      if (options_.rng == rng_mode::numpy) {
        if constexpr (bucket_rule<Rule, numpy_source>) {
          return f(numpy_epoch_source(big_seed(options_.seed), epoch_, config_->num_buckets()));
        }
      }
      return f(fast_source(options_.seed, epoch_));
    } else {
      return f(sources_(options_.seed, epoch_, config_->num_buckets()));
    }
  }

  /// `f(ids)` with the epoch's bucket ids as a span: 16-bit ids (`compact_bucket_id`) for
  /// chunked samples when the config allows, so the epoch's ids take 2 bytes a sample.
  template <class F>
  decltype(auto) with_epoch_ids(F&& f) const {
    if constexpr (chunked) {
      if (config_->num_buckets() <= max_compact_buckets) {
        const std::vector<compact_bucket_id> ids = with_source(
            [&](const auto& source) { return assign_chunks<compact_bucket_id>(source); });
        return f(std::span<const compact_bucket_id>(ids));
      }
    }
    const std::vector<bucket_id> ids = assign();
    return f(std::span<const bucket_id>(ids));
  }

  /// Chunked samples: each chunk assigned as the rows of the whole table (its draws are those
  /// of its sample indices), its ids kept as `Id`s.
  template <class Id, class Source>
  std::vector<Id> assign_chunks(const Source& source) const {
    std::vector<Id> out;
    std::vector<bucket_id> scratch;  // a chunk's ids before they are made compact
    const std::uint64_t n = samples().for_each_chunk([&](const meta_chunk& c) {
      const auto first = static_cast<std::size_t>(c.first);
      const std::size_t rows = c.rows.size();
      if (out.capacity() < first + rows)  // the reader's estimate, or geometric growth
        out.reserve(std::max(first + rows + static_cast<std::size_t>(c.more + c.more / 8),
                             out.capacity() + out.capacity() / 2));
      out.resize(first + rows);
      const shifted_source<Source> shifted{source, c.first};
      if constexpr (std::same_as<Id, bucket_id>) {
        assign_into(std::span<bucket_id>(out).subspan(first), *config_, c.rows, rule_, shifted,
                    options_.threads);
      } else {
        scratch.resize(rows);
        assign_into(std::span<bucket_id>(scratch), *config_, c.rows, rule_, shifted,
                    options_.threads);
        compact_ids(scratch, std::span<Id>(out).subspan(first), config_->num_buckets(), c.first);
      }
    });
    if (n != out.size())
      throw error("batch_sampler: the chunked samples reported " + std::to_string(n) +
                  " samples but handed over " + std::to_string(out.size()));
    read_samples_ = out.size();
    return out;
  }

  template <class Source>
  std::vector<bucket_id> assign_with(const Source& source) const {
    if constexpr (chunked) {
      return assign_chunks<bucket_id>(source);
    } else if constexpr (std::same_as<std::remove_cv_t<Samples>, meta_table>) {
      return assign_all(*config_, samples(), rule_, source, options_.threads);
    } else {
      const auto& s = samples();
      const detail::iterator_pair<std::ranges::iterator_t<const Samples>> all{
          std::ranges::begin(s), std::ranges::begin(s) + std::ranges::ssize(s)};
      return assign_range(*config_, all, rule_, source, options_.threads);
    }
  }

  const plan_type& ensure_plan() const {
    if (!plan_) {
      plan_options o;
      o.seed = options_.seed;
      o.epoch = epoch_;
      o.policy = options_.policy;
      o.token_budget = options_.token_budget;
      o.drop_oversized = options_.drop_oversized;
      o.balance_group = options_.balance_group;
      o.threads = options_.threads;
      const latent_tokens_cost cost{options_.tokens};
      with_epoch_ids([&](auto ids) {
        if constexpr (packs) {
          plan_ = Batching::make_plan(ids, *config_, o, cost);
        } else {
          if (!costs_) {
            plan_ = Batching::make_plan(ids, *config_, o, cost);
            return;
          }
          const std::vector<double>& c = costs_->costs;
          if (c.size() != ids.size())
            throw error("batch_sampler: " + costs_name() + " holds " + std::to_string(c.size()) +
                        " per-sample costs for the " + std::to_string(ids.size()) +
                        " samples of epoch " + std::to_string(epoch_) +
                        " (one per sample, in the samples' order: one per metadata row)");
          plan_ = make_epoch_plan(ids, *config_, o, cost, std::span<const double>(c));
        }
      });
    }
    return *plan_;
  }

  const schedule_type& ensure_schedule() const {
    if (!schedule_ || dealt_from_ != consumed_) {
      schedule_ = ensure_plan().deal(options_.world, consumed_, options_.drop_last);
      dealt_from_ = consumed_;
    }
    return *schedule_;
  }

  stored_samples samples_;
  std::shared_ptr<const bucket_config> config_;
  Rule rule_;
  sampler_options options_;
  [[no_unique_address]] Sources sources_;
  std::uint64_t epoch_ = 0;
  std::uint64_t consumed_ = 0;
  std::uint32_t resumed_world_ =
      1;  // the world of the last state loaded (plan_state::position_world)
  mutable std::optional<plan_type> plan_;
  mutable std::optional<schedule_type> schedule_;
  mutable std::uint64_t dealt_from_ = 0;
  mutable std::optional<std::uint64_t> fingerprint_;
  mutable std::size_t read_samples_ = 0;  // chunked samples: the count of the last assignment
  std::shared_ptr<const detail::kept_sample_costs> costs_;  // the options' costs, copied
  std::optional<std::uint64_t> sample_cost_hash_;           // their hash, when given
};

/// `batch_sampler s(samples, config, rule, {.seed = 42, .world = W, .rank = r});`
template <class S, class C, class Rule>
batch_sampler(S&&, C&&, Rule, sampler_options = {}) -> batch_sampler<std::remove_cvref_t<S>, Rule>;
/// With a user source family as the last argument.
template <class S, class C, class Rule, class Sources>
  requires(!batching_kind<Sources>)
batch_sampler(S&&, C&&, Rule, sampler_options, Sources)
->batch_sampler<std::remove_cvref_t<S>, Rule, Sources>;
/// With a batching last: `batch_sampler s(samples, config, rule, options, packed_batching{});`
template <class S, class C, class Rule, batching_kind Batching>
batch_sampler(S&&, C&&, Rule, sampler_options, Batching)
    -> batch_sampler<std::remove_cvref_t<S>, Rule, builtin_sources, Batching>;
template <class S, class C, class Rule, class Sources, batching_kind Batching>
batch_sampler(S&&, C&&, Rule, sampler_options, Sources, Batching)
    -> batch_sampler<std::remove_cvref_t<S>, Rule, Sources, Batching>;
/// A packing sampler over `Samples` (rule and sources as `batch_sampler`'s defaults or given).
template <class Samples, class Rule = opensora_v2_rule, class Sources = builtin_sources>
using packing_sampler = batch_sampler<Samples, Rule, Sources, packed_batching>;
/// Open-Sora 2.0's rule with its defaults.
template <class S, class C>
batch_sampler(S&&, C&&, sampler_options = {}) -> batch_sampler<std::remove_cvref_t<S>>;

}  // namespace vbucket
