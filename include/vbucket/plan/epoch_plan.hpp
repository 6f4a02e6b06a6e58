#pragma once
/// The epoch planner: a distributed batch sampler that loses nothing, is a pure function of
/// (bucket groups, config, seed, epoch, options), and resumes exactly, also with another world
/// size. Its parts, each in its own header and all included here: `plan_options.hpp` (options,
/// policy, batch cost), `batch.hpp` (`plan_bucket`, `batch`), `plan_state.hpp` (resume state)
/// and `opensora_strings.hpp` ("idx-T-H-W").
///
/// How an epoch is planned (`make_epoch_plan`):
///  1. Per bucket, its samples are shuffled (Fisher–Yates keyed by (seed, epoch, bucket)).
///  2. Incomplete batches, per bucket, by `incomplete_policy`:
///     - `pad` (default): the last batch is filled by cycling through the bucket's own shuffled
///       samples (pad k repeats sample k mod count), so even a one-sample bucket yields one
///       full batch. The repeats are counted as pads.
///     - `drop`: the leftover (count mod batch size, the last ones in shuffled order) is dropped
///       and counted.
///     - `downgrade`: the leftover moves to the nearest smaller compatible bucket (the same
///       kind, video or image: videos never move to a frames-1 bucket nor images to a video
///       one; the same aspect ratio, i.e. the closest entry of the other resolution's table;
///       at most as many frames and pixels and fewer of one; "nearest" = the most latent
///       tokens per sample, then the lowest id), where it is shuffled in and may move on
///       again; a bucket with no such bucket pads. Moves are counted.
///     Samples in a disabled bucket (batch size null) are dropped, or moved under downgrade.
///  3. The batches are put in one global order, the same whatever the world size: a keyed
///     shuffle of all batches, or with step balance (`balance_group` G > 0, chosen without
///     regard to the world size) cost-sorted chunks of G batches in shuffled chunk order (see
///     `plan_options::balance_group`).
///
/// How it is dealt (`epoch_plan::deal(world, consumed, drop_last)` → `epoch_schedule`):
/// the global batches not yet consumed, from position `consumed` on, are dealt round robin:
/// step k of rank r is global position consumed + k·W + r. When the remaining count is not a
/// multiple of W, the last step is completed with full repeats of real batches (never short or
/// empty ones: the real batches of the epoch, outside the last step, closest in cost to the mean
/// of that last step's real batches, earliest first), or with drop_last the incomplete last
/// step is dropped. Both are counted. So all ranks get the same number of steps.
///
/// Resume: the state is (seed, epoch, global batches consumed, balance group) (`plan_state`;
/// the plan's other inputs, the metadata, config and policy, must be the same). After k steps
/// under world W, consumed grows by k·W. Dealing the same plan from that count under any world
/// size W' yields exactly the batches not yet consumed, in global order, with no replay and no
/// skip: the first step after a change of world size is formed by global positions consumed …
/// consumed + W' − 1, i.e. rank r of the new world starts at position consumed + r. (A batch
/// consumed as a repeat in the last step is not a position; repeats never precede real batches.)
///
/// Cost (step balance and repeats): by default latent tokens × batch size, with latent tokens
/// = (1 + (T − 1) / 4) · (H / 16) · (W / 16) of the bucket's target shape (`latent_tokens`).
/// With per-sample costs (`make_epoch_plan(..., cost, sample_cost)`, e.g. each sample's expected
/// decode seconds in the cost's unit), a batch costs its bucket's cost + Σ sample_cost over its
/// slots (pads included), so step balance sorts the batches themselves, not their buckets; the
/// plan records a hash of the costs (`sample_cost_hash`), which its resume state carries.
///
/// Randomness is counter-based (`fast_source`'s mix64) and keyed by (seed, epoch, bucket) or
/// (seed, epoch, "order"), so every rank computes the same plan alone, whatever its thread
/// count. Memory: one flat array of sample indices (4 bytes per slot) and one 8-byte reference
/// per batch; a batch is a span into the flat array.
///
///     auto ids = vbucket::assign_all(cfg, table, rule, vbucket::fast_source(seed, epoch));
///     auto plan = vbucket::make_epoch_plan(ids, cfg, {.seed = seed, .epoch = epoch});
///     for (const vbucket::batch& b : plan.deal(world, consumed).rank(rank)) train(b);

#include <algorithm>  // std::sort, std::stable_sort, std::min, std::max, std::find
#include <array>      // std::array
#include <bit>        // std::bit_cast
#include <cassert>    // assert
#include <cmath>      // std::abs
#include <compare>    // operator<=>
#include <concepts>   // std::convertible_to
#include <cstddef>    // std::size_t, std::ptrdiff_t
#include <cstdint>    // std::uint32_t, std::uint64_t, std::int64_t
#include <iterator>   // std::random_access_iterator_tag
#include <limits>     // std::numeric_limits
#include <memory>     // std::shared_ptr
#include <numeric>    // std::iota
#include <optional>   // std::optional
#include <ranges>     // std::ranges::view_base
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::move, std::as_const, std::declval, std::exchange
#include <vector>     // std::vector

#include "batch_plan.hpp"
#include "group.hpp"
#include "opensora_strings.hpp"
#include "plan_options.hpp"
#include "plan_state.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/keyed_shuffle.hpp"
#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/detail/u128.hpp"

namespace vbucket {

class epoch_plan;
/// An epoch plan dealt to a world size from a resume point (`plan_schedule`, batch_plan.hpp).
using epoch_schedule = plan_schedule<epoch_plan>;

namespace detail {

/// A global batch: its bucket in the high 32 bits, its number within the bucket in the low.
constexpr std::uint64_t batch_ref(std::uint64_t bucket, std::uint64_t local) noexcept {
  return (bucket << 32) | local;
}
constexpr std::uint32_t ref_bucket(std::uint64_t ref) noexcept {
  return static_cast<std::uint32_t>(ref >> 32);
}
constexpr std::uint64_t ref_local(std::uint64_t ref) noexcept { return ref & 0xffffffffULL; }

struct plan_data {
  plan_options options;
  std::vector<plan_bucket> buckets;
  std::unique_ptr<std::uint32_t[]> slots;  // per bucket: shuffled samples, then pads
  std::size_t num_slots = 0;
  std::unique_ptr<std::uint64_t[]> order;  // the global sequence of batch refs
  std::size_t num_batches = 0;
  std::uint64_t unassigned = 0;
  std::uint64_t invalid = 0;
  // With per-sample costs: every batch's cost, bucket after bucket (batch j of bucket b at
  // first_batch[b] + j), and the hash of the costs (`sample_costs_hash`).
  std::unique_ptr<double[]> batch_costs;
  std::vector<std::uint64_t> first_batch;
  std::optional<std::uint64_t> sample_cost_hash;
};

/// The two large arrays of a plan that nothing else holds, for the next plan to build in
/// (`epoch_plan::take_storage`): their pages are mapped already, where fresh arrays of this size
/// cost the kernel a page fault and a zeroed page every 4 KiB.
struct plan_storage {
  std::unique_ptr<std::uint32_t[]> slots;
  std::size_t slots_size = 0;
  std::unique_ptr<std::uint64_t[]> order;
  std::size_t order_size = 0;
};

}  // namespace detail

/// An epoch's plan: the global sequence of batches, independent of the world size. A cheap,
/// shared, immutable handle: copies, schedules and the spans in batches keep its data alive.
class epoch_plan {
 public:
  /// A `batch_plan` of fixed batches: each one bucket's target shape and batch size.
  using batch_type = batch;
  static constexpr batching_mode batching = batching_mode::fixed;

  epoch_plan() : data_(std::make_shared<detail::plan_data>()) {}

  [[nodiscard]] const plan_options& options() const noexcept { return data_->options; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return data_->options.seed; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return data_->options.epoch; }

  /// Real batches in the global sequence (repeats for rank alignment are not counted).
  [[nodiscard]] std::uint64_t num_batches() const noexcept { return data_->num_batches; }
  [[nodiscard]] std::size_t num_buckets() const noexcept { return data_->buckets.size(); }
  [[nodiscard]] const plan_bucket& bucket(bucket_id b) const noexcept {
    return data_->buckets[static_cast<std::size_t>(b)];
  }
  [[nodiscard]] std::span<const plan_bucket> buckets() const noexcept { return data_->buckets; }
  /// Samples the rule left without a bucket, and samples with unusable metadata.
  [[nodiscard]] std::uint64_t unassigned() const noexcept { return data_->unassigned; }
  [[nodiscard]] std::uint64_t invalid() const noexcept { return data_->invalid; }
  /// Every bucket's region, one flat array: batch j of bucket b is
  /// slots[b.slot_begin + j · b.batch_size, + b.batch_size).
  [[nodiscard]] std::span<const std::uint32_t> slots() const noexcept {
    return {data_->slots.get(), data_->num_slots};
  }

  /// The batch at global position p (p < num_batches()).
  [[nodiscard]] batch global_batch(std::uint64_t p) const noexcept {
    assert(p < num_batches());
    batch out = make_batch(data_->order[static_cast<std::size_t>(p)]);
    out.position = p;
    return out;
  }
  /// The bucket of the batch at global position p.
  [[nodiscard]] bucket_id bucket_at(std::uint64_t p) const noexcept {
    return static_cast<bucket_id>(detail::ref_bucket(data_->order[static_cast<std::size_t>(p)]));
  }

  /// Deals the batches from global position `consumed` on to `world` ranks. Throws
  /// `vbucket::error` when world is 0.
  [[nodiscard]] epoch_schedule deal(std::uint32_t world, std::uint64_t consumed = 0,
                                    bool drop_last = false) const;
  /// Deals from a saved state; throws `vbucket::error` when its seed, epoch, (recorded)
  /// balance group or (recorded) per-sample cost hash is not this plan's.
  [[nodiscard]] epoch_schedule deal(std::uint32_t world, const plan_state& state,
                                    bool drop_last = false) const;

  /// A batch from a batch ref (bucket, number within the bucket).
  [[nodiscard]] batch make_batch(std::uint64_t ref) const noexcept {
    const plan_bucket& pb = data_->buckets[detail::ref_bucket(ref)];
    batch out;
    out.bucket = static_cast<bucket_id>(detail::ref_bucket(ref));
    out.frames = pb.frames;
    out.height = pb.height;
    out.width = pb.width;
    out.indices = slots().subspan(
        static_cast<std::size_t>(pb.slot_begin + detail::ref_local(ref) * pb.batch_size),
        static_cast<std::size_t>(pb.batch_size));
    return out;
  }
  /// The ref of the batch at global position p.
  [[nodiscard]] std::uint64_t ref_at(std::uint64_t p) const noexcept {
    return data_->order[static_cast<std::size_t>(p)];
  }
  /// The cost of a ref's batch: its bucket's `plan_bucket::cost`, plus the per-sample costs of
  /// its slots when the plan was made with them.
  [[nodiscard]] double cost_of(std::uint64_t ref) const noexcept {
    const detail::plan_data& d = *data_;
    if (d.batch_costs)
      return d.batch_costs[static_cast<std::size_t>(d.first_batch[detail::ref_bucket(ref)] +
                                                    detail::ref_local(ref))];
    return d.buckets[detail::ref_bucket(ref)].cost;
  }
  /// The hash of the per-sample costs the plan was made with (`sample_costs_hash`; its resume
  /// states record it), or nullopt without them.
  [[nodiscard]] std::optional<std::uint64_t> sample_cost_hash() const noexcept {
    return data_->sample_cost_hash;
  }
  /// The samples of a ref's batch (its bucket's batch size).
  [[nodiscard]] std::uint64_t size_of(std::uint64_t ref) const noexcept {
    return data_->buckets[detail::ref_bucket(ref)].batch_size;
  }
  /// A fixed plan's resume state records no budget.
  [[nodiscard]] static constexpr std::optional<double> recorded_budget() noexcept {
    return std::nullopt;
  }

  /// Wraps planned data (used by `make_epoch_plan`).
  explicit epoch_plan(std::shared_ptr<const detail::plan_data> d) : data_(std::move(d)) {}

  /// Empties `p` and returns its slot and order arrays for the next plan to build in, when no
  /// other handle (copy, schedule, batch) holds its data; otherwise only empties `p`.
  [[nodiscard]] static detail::plan_storage take_storage(epoch_plan&& p) noexcept {
    detail::plan_storage s;
    if (p.data_.use_count() == 1) {  // the data was made non-const (plan_from_counts)
      auto& d = const_cast<detail::plan_data&>(*p.data_);
      s.slots = std::move(d.slots);
      s.slots_size = d.num_slots;
      s.order = std::move(d.order);
      s.order_size = d.num_batches;
    }
    p = epoch_plan();
    return s;
  }

 private:
  std::shared_ptr<const detail::plan_data> data_;
};

/// This rank's steps of an `epoch_schedule`.
using rank_steps = plan_rank_steps<epoch_plan>;

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE epoch_schedule epoch_plan::deal(std::uint32_t world, std::uint64_t consumed,
                                                        bool drop_last) const {
  return epoch_schedule(*this, world, consumed, drop_last);
}

VBUCKET_COMPILED_INLINE epoch_schedule epoch_plan::deal(std::uint32_t world,
                                                        const plan_state& state,
                                                        bool drop_last) const {
  return epoch_schedule::dealt_from(*this, world, state, drop_last);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(batch_plan<epoch_plan>);

static_assert(std::ranges::random_access_range<rank_steps>);
static_assert(std::ranges::sized_range<rank_steps>);
static_assert(std::ranges::view<rank_steps>);

namespace detail {

/// Under `downgrade`, bucket b's leftovers go to the nearest smaller compatible bucket: among
/// the enabled buckets (r', t', a') of the same kind (image: frames key 1, or video: more; the
/// rule never gives a video frames key 1, so neither does a move) where a' is the entry of
/// resolution r''s table closest to b's aspect ratio (the one the rule would pick for b's
/// shape), with t' ≤ T and H'·W' ≤ H·W, not both equal, the one with the most latent tokens
/// per sample, then the lowest id; no_bucket when there is none.
inline void choose_downgrades(const bucket_config& config, std::vector<plan_bucket>& buckets) {
  const auto& resolutions = config.resolutions();
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    plan_bucket& src = buckets[b];
    const double ratio = config.ratio_of(static_cast<bucket_id>(b)).ratio;
    const std::int64_t src_px = src.height * src.width;
    double best_tokens = -1.0;
    for (std::size_t r = 0; r < resolutions.size(); ++r) {
      const std::size_t a = resolutions[r].info.table.closest_ratio(ratio);
      const aspect_entry& e = resolutions[r].info.table[a];
      const std::int64_t px = std::int64_t{e.height} * e.width;
      if (px > src_px) continue;
      for (std::size_t k = 0; k < resolutions[r].frames.size(); ++k) {
        const frames_entry& f = resolutions[r].frames[k];
        if (f.batch_size == 0 || f.frames > src.frames) continue;
        if ((f.frames == 1) != src.image()) continue;
        if (f.frames == src.frames && px == src_px) continue;
        const bucket_id id = config.id_of(r, k, a);
        if (static_cast<std::size_t>(id) == b) continue;
        const double tokens = latent_tokens(f.frames, e.height, e.width);
        if (tokens > best_tokens || (tokens == best_tokens && id < src.downgrade_to)) {
          best_tokens = tokens;
          src.downgrade_to = id;
        }
      }
    }
  }
}

}  // namespace detail

/// The hash a plan records of its per-sample costs (`epoch_plan::sample_cost_hash`, a resume
/// state's `sample_cost`): 64 bits over their count and each cost's IEEE-754 bits (−0 as +0),
/// in four interleaved chains through SplitMix64's mix64 (cost i in chain i mod 4), then the
/// chains combined. Throws `vbucket::error` naming the first sample whose cost is not a finite
/// number ≥ 0.
inline std::uint64_t sample_costs_hash(std::span<const double> costs) {
  const std::size_t n = costs.size();
  const std::uint64_t seed = detail::mix64(0x73616d706c65636fULL ^ n);
  std::uint64_t h[4] = {seed, seed + 1, seed + 2, seed + 3};
  const auto bits = [&](std::size_t i) {
    const double c = costs[i];
    if (!(c >= 0.0) || !(c < std::numeric_limits<double>::infinity()))
      throw error("epoch plan: the cost of sample " + std::to_string(i) + " is " +
                  std::to_string(c) + ", not a finite number >= 0");
    return std::bit_cast<std::uint64_t>(c + 0.0);
  };
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    h[0] = detail::mix64(h[0] ^ bits(i));
    h[1] = detail::mix64(h[1] ^ bits(i + 1));
    h[2] = detail::mix64(h[2] ^ bits(i + 2));
    h[3] = detail::mix64(h[3] ^ bits(i + 3));
  }
  for (; i < n; ++i) h[i % 4] = detail::mix64(h[i % 4] ^ bits(i));
  return detail::mix64(detail::mix64(detail::mix64(h[0] ^ h[1]) ^ h[2]) ^ h[3]);
}

namespace detail {

/// Phase 1 of a plan: what it does with each bucket's samples, from the counts alone: fills
/// `buckets` (shapes, batch sizes, costs, downgrade targets, moves, pads, drops, batches), `topo`
/// (the buckets in source-to-target order) and `capacity` (slots per bucket region).
template <class Cost>
void count_plan_buckets(std::span<const std::uint64_t> grouped, const bucket_config& config,
                        incomplete_policy policy, const Cost& cost,
                        std::vector<plan_bucket>& buckets, std::vector<std::uint32_t>& topo,
                        std::vector<std::uint64_t>& capacity) {
  const std::size_t nb = config.num_buckets();
  buckets.assign(nb, plan_bucket{});
  for (std::size_t b = 0; b < nb; ++b) {
    const auto id = static_cast<bucket_id>(b);
    plan_bucket& pb = buckets[b];
    pb.batch_size = static_cast<std::uint64_t>(config.batch_size(id));
    pb.frames = config.frames_of(id).frames;
    pb.height = config.ratio_of(id).height;
    pb.width = config.ratio_of(id).width;
    pb.grouped = grouped[b];
    if (pb.batch_size > 0) {
      pb.cost = static_cast<double>(cost(config, id, static_cast<std::int64_t>(pb.batch_size)));
      if (!(pb.cost >= 0.0) || !(pb.cost < std::numeric_limits<double>::infinity()))
        throw error("epoch plan: the cost of bucket " + std::to_string(b) +
                    " is not a finite number >= 0");
    }
  }
  const bool downgrade = policy == incomplete_policy::downgrade;
  if (downgrade) choose_downgrades(config, buckets);

  // Sources before targets: a target has strictly fewer frames·pixels than its source.
  topo.resize(nb);
  std::iota(topo.begin(), topo.end(), std::uint32_t{0});
  if (downgrade) {
    auto volume = [&](std::uint32_t b) {
      return static_cast<u128>(buckets[b].frames) *
             static_cast<u128>(buckets[b].height * buckets[b].width);
    };
    std::stable_sort(topo.begin(), topo.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return volume(a) > volume(b); });
  }

  // Counts, moves, pads and drops depend on counts only; regions get their final sizes.
  capacity.assign(nb, 0);
  for (std::uint32_t b : topo) {
    plan_bucket& pb = buckets[b];
    const std::uint64_t count = pb.grouped + pb.moved_in;
    const std::uint64_t rem = pb.batch_size == 0 ? count : count % pb.batch_size;
    capacity[b] = count;
    if (downgrade && rem != 0 && pb.downgrade_to != no_bucket) {
      pb.moved_out = rem;
      buckets[static_cast<std::size_t>(pb.downgrade_to)].moved_in += rem;
      pb.samples = count - rem;
    } else if (pb.batch_size == 0) {
      pb.dropped = count;
      capacity[b] = 0;
    } else if (policy == incomplete_policy::drop) {
      pb.dropped = rem;
      pb.samples = count - rem;
    } else {
      pb.samples = count;
      pb.pads = rem == 0 ? 0 : pb.batch_size - rem;
      capacity[b] += pb.pads;
    }
    pb.batches = pb.batch_size == 0 ? 0 : (pb.samples + pb.pads) / pb.batch_size;
    if (pb.batches > 0xffffffffULL) throw error("epoch plan: more than 2^32 batches in a bucket");
  }
}

/// Phase 2 of a plan: gives every bucket its region of the flat slot array (`slot_begin`, in
/// bucket order) and allocates the array, not zero-filled (every slot a batch reads is written
/// by the phases after it), or takes `reuse`'s when it is large enough. Returns the number of
/// batches.
inline std::uint64_t lay_out_slots(plan_data& data, std::span<const std::uint64_t> capacity,
                                   plan_storage* reuse) {
  std::uint64_t total_slots = 0, total_batches = 0;
  for (std::size_t b = 0; b < data.buckets.size(); ++b) {
    data.buckets[b].slot_begin = total_slots;
    total_slots += capacity[b];
    total_batches += data.buckets[b].batches;
  }
  if (total_slots > std::numeric_limits<std::size_t>::max() / sizeof(std::uint64_t))
    throw error("epoch plan: too many slots");
  data.num_slots = static_cast<std::size_t>(total_slots);
  if (reuse != nullptr && reuse->slots && reuse->slots_size >= data.num_slots)
    data.slots = std::move(reuse->slots);
  else
    data.slots = std::make_unique_for_overwrite<std::uint32_t[]>(data.num_slots);
  return total_batches;
}

/// Phase 4: each bucket's own samples are shuffled in place (Fisher–Yates keyed by (seed,
/// epoch, bucket)), the largest first, in parallel. `also`, work of `also_bytes` that does not
/// touch the slots (phase 7), runs as one more task among them, placed by its size, so that
/// neither waits for the other.
template <class Also>
void shuffle_own_samples(std::uint32_t* slots, std::span<const plan_bucket> buckets,
                         std::span<const std::uint64_t> capacity, std::uint64_t key,
                         unsigned threads, std::uint64_t also_bytes, Also also) {
  constexpr std::uint32_t also_task = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> work{also_task};
  for (std::uint32_t b = 0; b < buckets.size(); ++b)
    if (capacity[b] > 0 && buckets[b].grouped > 1) work.push_back(b);
  const auto bytes = [&](std::uint32_t b) {
    return b == also_task ? also_bytes : buckets[b].grouped * sizeof(std::uint32_t);
  };
  std::stable_sort(work.begin(), work.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return bytes(a) > bytes(b); });
  parallel_tasks(work.size(), threads, [&](std::size_t t) {
    const std::uint32_t b = work[t];
    if (b == also_task) return also();
    keyed_shuffle(std::span<std::uint32_t>(slots + buckets[b].slot_begin,
                                           static_cast<std::size_t>(buckets[b].grouped)),
                  stream_key(key, plan_domain_bucket, b));
  });
}

/// Phase 5 (downgrade only): in source-to-target order (`topo`), each bucket shuffles the
/// samples moved in after its own (inside-out Fisher–Yates, which keeps the order uniform) and
/// passes its last `moved_out` samples on to its target.
inline void move_leftovers(std::uint32_t* slots, std::span<const plan_bucket> buckets,
                           std::span<const std::uint32_t> topo, std::uint64_t key) {
  std::vector<std::uint64_t> cursor(buckets.size());
  for (std::size_t b = 0; b < buckets.size(); ++b) cursor[b] = buckets[b].grouped;
  for (std::uint32_t b : topo) {
    const plan_bucket& pb = buckets[b];
    std::uint32_t* region = slots + pb.slot_begin;
    const std::uint64_t count = pb.grouped + pb.moved_in;
    const std::uint64_t k = stream_key(key, plan_domain_insert, b);
    for (std::uint64_t m = pb.grouped; m < count; ++m)
      std::swap(region[m], region[keyed_below(k, m, m + 1)]);
    if (pb.moved_out == 0) continue;
    const auto to = static_cast<std::size_t>(pb.downgrade_to);
    std::copy(region + (count - pb.moved_out), region + count,
              slots + buckets[to].slot_begin + cursor[to]);
    cursor[to] += pb.moved_out;
  }
}

/// Phase 6: a bucket's pads cycle through its own shuffled samples (pad k repeats sample k).
inline void fill_pads(std::uint32_t* slots, std::span<const plan_bucket> buckets) {
  for (const plan_bucket& pb : buckets) {
    std::uint32_t* region = slots + pb.slot_begin;
    for (std::uint64_t k = 0; k < pb.pads; ++k) region[pb.samples + k] = region[k % pb.samples];
  }
}

/// Phase 7: every batch's ref, in bucket order, then a keyed shuffle into the global order.
inline void shuffle_batches(std::span<std::uint64_t> order, std::span<const plan_bucket> buckets,
                            std::uint64_t key) {
  std::size_t i = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    for (std::uint64_t j = 0; j < buckets[b].batches; ++j) order[i++] = batch_ref(b, j);
  keyed_shuffle(order, stream_key(key, plan_domain_order, 0));
}

/// Phase 8's last part: the cost-sorted batches `sorted` (n = order.size()) cut into chunks of
/// `group`, put in `order` in a keyed shuffled order of the chunks; the remainder (n mod group,
/// the cheapest) stays last.
inline void place_chunks(std::span<std::uint64_t> order, const std::uint64_t* sorted,
                         std::uint64_t group, std::uint64_t key) {
  const std::size_t n = order.size();
  const std::uint64_t chunks = n / group;
  std::vector<std::uint64_t> chunk_order(static_cast<std::size_t>(chunks));
  std::iota(chunk_order.begin(), chunk_order.end(), std::uint64_t{0});
  keyed_shuffle(std::span<std::uint64_t>(chunk_order), stream_key(key, plan_domain_chunks, 0));
  const auto g = static_cast<std::size_t>(group);
  for (std::size_t c = 0; c < chunk_order.size(); ++c)
    std::copy_n(sorted + static_cast<std::size_t>(chunk_order[c]) * g, g, order.data() + c * g);
  std::copy(sorted + chunk_order.size() * g, sorted + n, order.data() + chunk_order.size() * g);
}

/// Phase 8 (balance_group G > 0): a stable counting sort of the shuffled order by bucket cost,
/// most expensive first, cut into chunks of G batches that are put in a keyed shuffled order;
/// the remainder (count mod G, the cheapest) stays last.
inline void balance_steps(std::span<std::uint64_t> order, std::span<const plan_bucket> buckets,
                          std::uint64_t group, std::uint64_t key) {
  const std::size_t n = order.size();
  if (group == 0 || n == 0) return;
  const std::size_t nb = buckets.size();
  std::vector<std::uint32_t> by_cost(nb);
  std::iota(by_cost.begin(), by_cost.end(), std::uint32_t{0});
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](std::uint32_t a, std::uint32_t b) {
    return buckets[a].cost > buckets[b].cost;
  });
  std::vector<std::uint64_t> start(nb, 0);  // output start per bucket, in cost order
  {
    std::uint64_t s = 0;
    for (std::uint32_t b : by_cost) {
      start[b] = s;
      s += buckets[b].batches;
    }
  }
  const auto sorted = std::make_unique_for_overwrite<std::uint64_t[]>(n);
  for (std::uint64_t ref : order) sorted[static_cast<std::size_t>(start[ref_bucket(ref)]++)] = ref;
  place_chunks(order, sorted.get(), group, key);
}

/// A batch's sort key in `balance_batches`.
struct cost_item {
  std::uint64_t key;   // ~bits of its cost
  std::uint32_t rank;  // its bucket's rank in `balance_steps`' order
  std::uint32_t pos;   // its position in the shuffled order
};

/// Sorts `items` by (key, rank) ascending, stably: LSD radix, 8 bits a pass (rank's 4 bytes,
/// then key's 8), a pass skipped when every item has the same digit.
inline void radix_sort_items(std::vector<cost_item>& items) {
  constexpr int digits = 12;
  const auto digit = [](const cost_item& it, int d) -> std::size_t {
    return d < 4 ? (it.rank >> (8 * d)) & 0xffU
                 : static_cast<std::size_t>((it.key >> (8 * (d - 4))) & 0xffU);
  };
  std::vector<std::array<std::size_t, 256>> count(digits);
  for (auto& c : count) c.fill(0);
  for (const cost_item& it : items)
    for (int d = 0; d < digits; ++d) ++count[static_cast<std::size_t>(d)][digit(it, d)];
  std::vector<cost_item> other(items.size());
  for (int d = 0; d < digits; ++d) {
    auto& c = count[static_cast<std::size_t>(d)];
    if (std::find(c.begin(), c.end(), items.size()) != c.end()) continue;  // one digit
    std::size_t start = 0;
    for (std::size_t& v : c) start += std::exchange(v, start);
    for (const cost_item& it : items) other[c[digit(it, d)]++] = it;
    items.swap(other);
  }
}

/// Phase 8 with per-batch costs (`cost_batches`): the shuffled order stably sorted by batch
/// cost, most expensive first, ties by `balance_steps`' bucket order (bucket cost descending,
/// then id), then cut into chunks as there. So with every sample cost 0 it is `balance_steps`'
/// order.
inline void balance_batches(std::span<std::uint64_t> order, std::span<const plan_bucket> buckets,
                            const double* batch_costs, std::span<const std::uint64_t> first_batch,
                            std::uint64_t group, std::uint64_t key) {
  const std::size_t n = order.size();
  if (group == 0 || n == 0) return;
  std::vector<std::uint32_t> by_cost(buckets.size()), rank(buckets.size());
  std::iota(by_cost.begin(), by_cost.end(), std::uint32_t{0});
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](std::uint32_t a, std::uint32_t b) {
    return buckets[a].cost > buckets[b].cost;
  });
  for (std::uint32_t i = 0; i < by_cost.size(); ++i) rank[by_cost[i]] = i;
  // Sort keys: the cost's bits inverted (a cost ≥ 0 orders as its IEEE-754 bits, so this is
  // most expensive first), then the bucket's rank; the shuffled position is kept by the stable
  // radix sort. A batch holds a sample at least, so positions fit 32 bits.
  std::vector<cost_item> items(n);
  for (std::size_t p = 0; p < n; ++p) {
    const std::uint64_t ref = order[p];
    const std::uint32_t b = ref_bucket(ref);
    const double c = batch_costs[static_cast<std::size_t>(first_batch[b] + ref_local(ref))] + 0.0;
    items[p] = {~std::bit_cast<std::uint64_t>(c), rank[b], static_cast<std::uint32_t>(p)};
  }
  radix_sort_items(items);
  const auto sorted = std::make_unique_for_overwrite<std::uint64_t[]>(n);
  for (std::size_t p = 0; p < n; ++p) sorted[p] = order[items[p].pos];
  place_chunks(order, sorted.get(), group, key);
}

/// Phase 7b (with per-sample costs): every batch's cost, its bucket's cost + Σ sample_cost over
/// its slots (pads included, in slot order), bucket after bucket, in parallel over buckets.
inline void cost_batches(plan_data& data, std::span<const double> sample_cost, unsigned threads) {
  const std::size_t nb = data.buckets.size();
  data.first_batch.assign(nb, 0);
  std::uint64_t total = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    data.first_batch[b] = total;
    total += data.buckets[b].batches;
  }
  data.batch_costs = std::make_unique_for_overwrite<double[]>(static_cast<std::size_t>(total));
  double* const out = data.batch_costs.get();
  const std::uint32_t* const slots = data.slots.get();
  parallel_tasks(nb, threads, [&](std::size_t b) {
    const plan_bucket& pb = data.buckets[b];
    for (std::uint64_t j = 0; j < pb.batches; ++j) {
      const std::uint32_t* batch = slots + pb.slot_begin + j * pb.batch_size;
      double c = pb.cost;
      for (std::uint64_t k = 0; k < pb.batch_size; ++k) c += sample_cost[batch[k]];
      out[static_cast<std::size_t>(data.first_batch[b] + j)] = c;
    }
  });
}

/// Plans from per-bucket sample counts, in named phases: 1 `count_plan_buckets` (what happens
/// to each bucket's samples, from the counts alone), 2 `lay_out_slots`, 3 `fill_own(slots,
/// buckets, capacity)`, the caller's, which writes every bucket's grouped samples, ascending, at
/// the start of its region (buckets with capacity 0 are skipped), 4 `shuffle_own_samples`, 5
/// `move_leftovers` (downgrade), 6 `fill_pads`, 7 `shuffle_batches`, 7b `cost_batches` (with
/// per-sample costs, which the caller has checked cover every sample index), 8 `balance_steps`
/// (or `balance_batches` with per-sample costs). The slot and order arrays are `reuse`'s where
/// it has them large enough.
template <class Cost, class FillOwn>
epoch_plan plan_from_counts(std::span<const std::uint64_t> grouped, std::uint64_t unassigned,
                            std::uint64_t invalid, const bucket_config& config,
                            const plan_options& options, const Cost& cost, FillOwn fill_own,
                            std::optional<std::span<const double>> sample_cost = std::nullopt,
                            plan_storage* reuse = nullptr) {
  auto data = std::make_shared<plan_data>();
  if (sample_cost) data->sample_cost_hash = sample_costs_hash(*sample_cost);
  data->options = options;
  data->unassigned = unassigned;
  data->invalid = invalid;
  std::vector<std::uint32_t> topo;
  std::vector<std::uint64_t> capacity;
  count_plan_buckets(grouped, config, options.policy, cost, data->buckets, topo, capacity);
  const std::uint64_t num_batches = lay_out_slots(*data, capacity, reuse);
  std::uint32_t* const slots = data->slots.get();
  const std::span<const plan_bucket> buckets = data->buckets;
  const std::uint64_t key = plan_key(options.seed, options.epoch);

  fill_own(slots, std::as_const(data->buckets), std::span<const std::uint64_t>(capacity));
  const auto n = static_cast<std::size_t>(num_batches);
  data->num_batches = n;
  if (reuse != nullptr && reuse->order && reuse->order_size >= n)
    data->order = std::move(reuse->order);
  else
    data->order = std::make_unique_for_overwrite<std::uint64_t[]>(n);
  const std::span<std::uint64_t> order(data->order.get(), n);
  // Phase 7 needs the counts alone: it runs beside phase 4's shuffles.
  shuffle_own_samples(slots, buckets, capacity, key, options.threads, n * sizeof(std::uint64_t),
                      [&] { shuffle_batches(order, buckets, key); });
  if (options.policy == incomplete_policy::downgrade) move_leftovers(slots, buckets, topo, key);
  fill_pads(slots, buckets);
  if (sample_cost) {
    cost_batches(*data, *sample_cost, options.threads);
    balance_batches(order, buckets, data->batch_costs.get(), data->first_batch,
                    options.balance_group, key);
  } else {
    balance_steps(order, buckets, options.balance_group, key);
  }
  return epoch_plan(std::move(data));
}

}  // namespace detail

namespace detail {
template <class Cost>
epoch_plan plan_from_groups(const bucket_groups& groups, const bucket_config& config,
                            const plan_options& options, const Cost& cost,
                            std::optional<std::span<const double>> sample_cost = std::nullopt) {
  const std::size_t nb = config.num_buckets();
  if (groups.num_buckets() != nb)
    throw error("epoch plan: the groups have " + std::to_string(groups.num_buckets()) +
                " buckets but the config has " + std::to_string(nb));
  std::vector<std::uint64_t> grouped(nb);
  for (std::size_t b = 0; b < nb; ++b) grouped[b] = groups.count(static_cast<bucket_id>(b));
  const auto fill_own = [&](std::uint32_t* slots, const std::vector<plan_bucket>& buckets,
                            std::span<const std::uint64_t> capacity) {
    parallel_tasks(nb, options.threads, [&](std::size_t b) {
      if (capacity[b] == 0) return;
      const auto src = groups.bucket(static_cast<bucket_id>(b));
      std::copy(src.begin(), src.end(), slots + buckets[b].slot_begin);
    });
  };
  return plan_from_counts(grouped, groups.unassigned, groups.invalid, config, options, cost,
                          fill_own, sample_cost);
}
}  // namespace detail

/// Plans an epoch from grouped samples. Throws `vbucket::error` when the groups do not match
/// the config or the cost is not a finite number ≥ 0.
template <batch_cost Cost = latent_tokens_cost>
epoch_plan make_epoch_plan(const bucket_groups& groups, const bucket_config& config,
                           const plan_options& options = {}, const Cost& cost = {}) {
  return detail::plan_from_groups(groups, config, options, cost);
}

/// Plans an epoch from grouped samples with per-sample costs: a batch costs `cost(config,
/// bucket, batch size)` + Σ `sample_cost[i]` over its slots i (sample indices; pads count
/// again), and step balance (`balance_group` > 0) sorts the batches by that cost; the repeats
/// that complete a last step are chosen by it too. `sample_cost[i]` is sample i's cost in the
/// unit of `cost` (e.g. its expected decode seconds × latent tokens per second:
/// `vbucket::ffmpeg::sample_decode_costs`). The plan records the costs' hash
/// (`sample_cost_hash`), and its resume states too, so that resuming under other costs is
/// refused. Costs that are all 0 give the plan `make_epoch_plan(groups, config, options, cost)`
/// gives. Throws `vbucket::error` as that one does, and when a sample index is not below
/// sample_cost.size() or a cost is not a finite number ≥ 0.
template <batch_cost Cost>
epoch_plan make_epoch_plan(const bucket_groups& groups, const bucket_config& config,
                           const plan_options& options, const Cost& cost,
                           std::span<const double> sample_cost) {
  for (const std::uint32_t i : groups.indices)
    if (i >= sample_cost.size())
      throw error("epoch plan: sample " + std::to_string(i) + " is grouped but there are " +
                  std::to_string(sample_cost.size()) + " per-sample costs");
  return detail::plan_from_groups(groups, config, options, cost,
                                  std::optional<std::span<const double>>(sample_cost));
}

namespace detail {
template <class Id, class Cost>
epoch_plan plan_from_ids(std::span<const Id> ids, const bucket_config& config,
                         const plan_options& options, const Cost& cost,
                         std::optional<std::span<const double>> sample_cost = std::nullopt,
                         plan_storage* reuse = nullptr) {
  if (sample_cost && sample_cost->size() != ids.size())
    throw error("epoch plan: " + std::to_string(ids.size()) + " bucket ids but " +
                std::to_string(sample_cost->size()) + " per-sample costs");
  const bucket_sort<Id> sort(ids, config.num_buckets(), options.threads, "epoch plan");
  const auto fill_own = [&](std::uint32_t* slots, const std::vector<plan_bucket>& buckets,
                            std::span<const std::uint64_t> capacity) {
    std::vector<std::uint32_t*> dest(buckets.size(), nullptr);
    for (std::size_t b = 0; b < buckets.size(); ++b)
      if (capacity[b] > 0) dest[b] = slots + buckets[b].slot_begin;
    sort.scatter(dest);
  };
  return plan_from_counts(sort.grouped(), sort.unassigned(), sort.invalid(), config, options, cost,
                          fill_own, sample_cost, reuse);
}
}  // namespace detail

/// Plans an epoch from the bucket id of every sample (as from `assign_all`), grouping them on
/// the way (a parallel counting sort straight into the plan; the same plan as
/// `make_epoch_plan(group_by_bucket(ids, …), …)`). Throws `vbucket::error` on an id that is
/// neither a bucket nor no_bucket or invalid_sample, 2^32 samples or more, or a cost that is not a
/// finite number ≥ 0.
template <batch_cost Cost = latent_tokens_cost>
epoch_plan make_epoch_plan(std::span<const bucket_id> ids, const bucket_config& config,
                           const plan_options& options = {}, const Cost& cost = {}) {
  return detail::plan_from_ids(ids, config, options, cost);
}
/// As above, over 16-bit ids (`compact_ids`): the same plan.
template <batch_cost Cost = latent_tokens_cost>
epoch_plan make_epoch_plan(std::span<const compact_bucket_id> ids, const bucket_config& config,
                           const plan_options& options = {}, const Cost& cost = {}) {
  return detail::plan_from_ids(ids, config, options, cost);
}

/// Plans an epoch from the bucket id of every sample with per-sample costs (`sample_cost[i]`:
/// sample i's, one per id; see the grouped overload): the same plan as `make_epoch_plan(
/// group_by_bucket(ids, …), config, options, cost, sample_cost)`. Throws `vbucket::error` as
/// the overload without costs does, and when sample_cost.size() ≠ ids.size() or a cost is not
/// a finite number ≥ 0 (naming the sample).
template <batch_cost Cost>
epoch_plan make_epoch_plan(std::span<const bucket_id> ids, const bucket_config& config,
                           const plan_options& options, const Cost& cost,
                           std::span<const double> sample_cost) {
  return detail::plan_from_ids(ids, config, options, cost,
                               std::optional<std::span<const double>>(sample_cost));
}
/// As above, over 16-bit ids (`compact_ids`): the same plan.
template <batch_cost Cost>
epoch_plan make_epoch_plan(std::span<const compact_bucket_id> ids, const bucket_config& config,
                           const plan_options& options, const Cost& cost,
                           std::span<const double> sample_cost) {
  return detail::plan_from_ids(ids, config, options, cost,
                               std::optional<std::span<const double>>(sample_cost));
}

/// Fixed batching as a type (`batch_sampler`, `loader`): one bucket and its batch size per
/// batch; its plans are `epoch_plan`s, made by `make_epoch_plan`.
struct fixed_batching {
  using plan_type = epoch_plan;
  static constexpr batching_mode mode = batching_mode::fixed;
  template <class Id, batch_cost Cost>
  [[nodiscard]] static epoch_plan make_plan(std::span<const Id> ids, const bucket_config& config,
                                            const plan_options& options, const Cost& cost) {
    return make_epoch_plan(ids, config, options, cost);
  }
};

}  // namespace vbucket

#if VBUCKET_EXTERN_TEMPLATES
namespace vbucket {
// Compiled once in the vbucket::compiled library (src/vbucket.cpp).
extern template struct detail::schedule_data<epoch_plan>;
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(const bucket_groups&,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&);
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&);
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&);
// With per-sample costs (batch_sampler instantiates them beside the overloads above).
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(const bucket_groups&,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&,
                                                               std::span<const double>);
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&,
                                                               std::span<const double>);
extern template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                               const bucket_config&,
                                                               const plan_options&,
                                                               const latent_tokens_cost&,
                                                               std::span<const double>);
}  // namespace vbucket
#endif
