#pragma once
/// Packed batches: a whole-epoch token-budget planner for trainers with variable-length
/// attention (packed sequences). Instead of one bucket and a fixed batch size per batch, every
/// batch holds samples of any shapes whose total cost is at most a budget B per rank per step.
///
/// How an epoch is packed (`make_packed_plan`):
///  1. Bucket assignment as for the fixed plan; every sample keeps its bucket's target T/H/W.
///     Its cost is the plan's batch cost of a batch of one (`cost(config, bucket, 1)`; by
///     default the latent tokens of that shape). Samples in a disabled bucket (batch size null)
///     are dropped and counted, as in the fixed plan. A sample that costs more than B alone is
///     an error naming it, or with `drop_oversized` a counted drop.
///  2. Per bucket, its samples are shuffled (keyed by (seed, epoch, bucket), the fixed plan's
///     shuffle), so which samples share a batch differs per epoch.
///  3. First-fit decreasing over the whole epoch: the samples, by cost descending (ties by
///     bucket id, then in shuffled order), each go into the first batch with room. Samples of
///     one bucket are interchangeable, so this runs batch by batch over the buckets (a batch
///     takes as many of the largest remaining cost that fit, then of the next cost that fits,
///     …), which is exactly first-fit decreasing in O(N + batches · buckets per batch · log K).
///  4. The batches are put in one global order, the same whatever the world size: a keyed
///     shuffle, or with `balance_group` G > 0 the fixed plan's step balance (cost-sorted
///     chunks of G batches in shuffled chunk order, the remainder, the cheapest, last).
///
/// Dealing and resume are those of the fixed plan (`epoch_plan`): step k of rank r is global
/// position consumed + k·W + r; an incomplete last step is completed with counted repeats of
/// real batches (closest in cost to the mean of that step's real batches, earliest first) or
/// dropped with drop_last; the resume state is the same `plan_state`
/// ("vbucket-plan seed=S epoch=E consumed=C balance=G"); the plan's other inputs (metadata,
/// config, budget, cost) must be the same.
///
///     auto ids = vbucket::assign_all(cfg, table, rule, vbucket::fast_source(seed, epoch));
///     auto plan = vbucket::make_packed_plan(ids, cfg, {.seed = seed, .epoch = epoch,
///                                                      .token_budget = 65536});
///     for (const vbucket::packed_batch& b : plan.deal(world, consumed).rank(rank)) train(b);

#include <algorithm>  // std::sort, std::stable_sort, std::partition_point, std::nth_element
#include <cassert>    // assert
#include <cmath>      // std::floor, std::abs, std::isfinite
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>     // std::numeric_limits
#include <memory>     // std::shared_ptr, std::make_shared
#include <numeric>    // std::iota
#include <ranges>     // std::views::iota, std::views::transform
#include <span>       // std::span
#include <string>     // std::string, std::to_string
#include <utility>    // std::move
#include <vector>     // std::vector

#include "batch_plan.hpp"
#include "group.hpp"
#include "opensora_strings.hpp"
#include "plan_options.hpp"  // batch_cost, latent_tokens_cost
#include "plan_state.hpp"
#include "plan_stats.hpp"  // step_balance_stats
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/keyed_shuffle.hpp"
#include "vbucket/detail/parallel_tasks.hpp"

namespace vbucket {

/// A bucket as packed: its target shape, the cost of one sample and what happened to its
/// samples.
struct packed_bucket {
  std::int64_t frames = 0;    ///< target T
  std::int64_t height = 0;    ///< target H
  std::int64_t width = 0;     ///< target W
  double cost = 0.0;          ///< cost of one sample (`cost(config, bucket, 1)`)
  bool enabled = false;       ///< batch size not null in the config
  bool oversized = false;     ///< cost > budget (its samples are dropped or an error)
  std::uint64_t grouped = 0;  ///< samples the rule put in it
  std::uint64_t samples = 0;  ///< samples in batches
  std::uint64_t dropped = 0;  ///< samples in no batch (disabled or oversized)
};

/// The target shape of one entry of a packed batch.
struct sample_shape {
  std::int64_t frames = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  friend constexpr bool operator==(const sample_shape&, const sample_shape&) = default;
};

/// One packed batch for a trainer: sample indices (rows of the metadata table) and, per entry,
/// its bucket; `shape(i)` is entry i's target shape. Entries are grouped by bucket, the most
/// expensive first.
struct packed_batch {
  std::span<const std::uint32_t> indices;
  std::span<const bucket_id> buckets;          ///< per entry
  std::span<const packed_bucket> bucket_info;  ///< the plan's buckets, by id
  double cost = 0.0;                           ///< Σ cost of the entries (≤ the budget)
  std::uint64_t id = 0;                        ///< its number in the plan (packing order)
  std::uint64_t step = 0;                      ///< step of the schedule (0 = first dealt)
  std::uint64_t position = 0;                  ///< global position: consumed + step · world + rank
  bool repeat = false;  ///< a repeat added for rank alignment (its samples are repeats)

  [[nodiscard]] std::size_t size() const noexcept { return indices.size(); }
  [[nodiscard]] sample_shape shape(std::size_t i) const noexcept {
    const packed_bucket& b = bucket_info[static_cast<std::size_t>(buckets[i])];
    return {b.frames, b.height, b.width};
  }
};

/// Every sample of a packed batch as "idx-T-H-W" (shapes differ between entries).
inline std::vector<std::string> encode_opensora_batch(const packed_batch& b) {
  std::vector<std::string> out;
  out.reserve(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    const sample_shape s = b.shape(i);
    out.push_back(encode_opensora_index({b.indices[i], s.frames, s.height, s.width}));
  }
  return out;
}

class packed_plan;
/// A packed plan dealt to a world size from a resume point (`plan_schedule`, batch_plan.hpp).
using packed_schedule = plan_schedule<packed_plan>;

namespace detail {

/// A cost or budget for a message, in the shortest form that reads back the same.
inline std::string format_cost(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

struct packed_data {
  plan_options options;
  std::vector<packed_bucket> buckets;
  std::vector<std::uint32_t> slots;        // sample indices, batch after batch
  std::vector<bucket_id> slot_bucket;      // the bucket of every slot
  std::vector<std::uint64_t> batch_begin;  // batches + 1 offsets into slots
  std::vector<double> batch_cost;          // per batch
  std::vector<std::uint64_t> order;        // the global sequence of batch ids
  std::uint64_t unassigned = 0;
  std::uint64_t invalid = 0;
  std::uint64_t dropped_disabled = 0;
  std::uint64_t dropped_oversized = 0;
};

/// A keyed stream id that keeps the packed order apart from the fixed plan's order stream.
inline constexpr std::uint64_t packed_order_stream = 1;

}  // namespace detail

/// An epoch packed to a budget: the global sequence of packed batches, independent of the
/// world size. A cheap, shared, immutable handle, like `epoch_plan`.
class packed_plan {
 public:
  /// A `batch_plan` of packed batches: samples of any buckets up to the budget.
  using batch_type = packed_batch;
  static constexpr batching_mode batching = batching_mode::packed;

  packed_plan() : data_(std::make_shared<detail::packed_data>()) {}
  explicit packed_plan(std::shared_ptr<const detail::packed_data> d) : data_(std::move(d)) {}

  [[nodiscard]] const plan_options& options() const noexcept { return data_->options; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return data_->options.seed; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return data_->options.epoch; }
  [[nodiscard]] double token_budget() const noexcept { return data_->options.token_budget; }

  /// Real batches in the global sequence (repeats for rank alignment are not counted).
  [[nodiscard]] std::uint64_t num_batches() const noexcept { return data_->order.size(); }
  [[nodiscard]] std::size_t num_buckets() const noexcept { return data_->buckets.size(); }
  [[nodiscard]] const packed_bucket& bucket(bucket_id b) const noexcept {
    return data_->buckets[static_cast<std::size_t>(b)];
  }
  [[nodiscard]] std::span<const packed_bucket> buckets() const noexcept { return data_->buckets; }
  /// Samples in batches (each exactly once).
  [[nodiscard]] std::uint64_t samples() const noexcept { return data_->slots.size(); }
  /// Σ cost of all batches.
  [[nodiscard]] double total_cost() const noexcept {
    double s = 0.0;
    for (double c : data_->batch_cost) s += c;
    return s;
  }
  /// Samples the rule left without a bucket, samples with unusable metadata, samples in
  /// disabled buckets and samples costing more than the budget (`drop_oversized`).
  [[nodiscard]] std::uint64_t unassigned() const noexcept { return data_->unassigned; }
  [[nodiscard]] std::uint64_t invalid() const noexcept { return data_->invalid; }
  [[nodiscard]] std::uint64_t dropped_disabled() const noexcept { return data_->dropped_disabled; }
  [[nodiscard]] std::uint64_t dropped_oversized() const noexcept {
    return data_->dropped_oversized;
  }

  /// Batch number `id` (packing order, id < num_batches()).
  [[nodiscard]] packed_batch make_batch(std::uint64_t id) const noexcept {
    const auto& d = *data_;
    const auto i = static_cast<std::size_t>(id);
    const auto b = static_cast<std::size_t>(d.batch_begin[i]);
    const auto e = static_cast<std::size_t>(d.batch_begin[i + 1]);
    packed_batch out;
    out.indices = std::span<const std::uint32_t>(d.slots).subspan(b, e - b);
    out.buckets = std::span<const bucket_id>(d.slot_bucket).subspan(b, e - b);
    out.bucket_info = d.buckets;
    out.cost = d.batch_cost[i];
    out.id = id;
    return out;
  }
  /// The batch id at global position p (its ref, `ref_at`), a batch's cost and its samples.
  [[nodiscard]] std::uint64_t id_at(std::uint64_t p) const noexcept {
    return data_->order[static_cast<std::size_t>(p)];
  }
  [[nodiscard]] std::uint64_t ref_at(std::uint64_t p) const noexcept { return id_at(p); }
  [[nodiscard]] double cost_of(std::uint64_t id) const noexcept {
    return data_->batch_cost[static_cast<std::size_t>(id)];
  }
  [[nodiscard]] std::uint64_t size_of(std::uint64_t id) const noexcept {
    const auto i = static_cast<std::size_t>(id);
    return data_->batch_begin[i + 1] - data_->batch_begin[i];
  }
  /// A packed plan's resume state records its budget.
  [[nodiscard]] std::optional<double> recorded_budget() const noexcept { return token_budget(); }
  /// The batch at global position p (p < num_batches()).
  [[nodiscard]] packed_batch global_batch(std::uint64_t p) const noexcept {
    assert(p < num_batches());
    packed_batch out = make_batch(id_at(p));
    out.position = p;
    return out;
  }

  /// Deals the batches from global position `consumed` on to `world` ranks. Throws
  /// `vbucket::error` when world is 0.
  [[nodiscard]] packed_schedule deal(std::uint32_t world, std::uint64_t consumed = 0,
                                     bool drop_last = false) const;
  /// Deals from a saved state; throws `vbucket::error` when its seed, epoch or (recorded)
  /// balance group is not this plan's.
  [[nodiscard]] packed_schedule deal(std::uint32_t world, const plan_state& state,
                                     bool drop_last = false) const;

 private:
  std::shared_ptr<const detail::packed_data> data_;
};

/// The steps of one rank of a packed schedule (`schedule_steps`: a random-access view of
/// `packed_batch` values sharing the schedule's data).
using packed_rank_steps = plan_rank_steps<packed_plan>;

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE packed_schedule packed_plan::deal(std::uint32_t world,
                                                          std::uint64_t consumed,
                                                          bool drop_last) const {
  return packed_schedule(*this, world, consumed, drop_last);
}

VBUCKET_COMPILED_INLINE packed_schedule packed_plan::deal(std::uint32_t world,
                                                          const plan_state& state,
                                                          bool drop_last) const {
  return packed_schedule::dealt_from(*this, world, state, drop_last);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

static_assert(batch_plan<packed_plan>);
static_assert(std::ranges::random_access_range<packed_rank_steps>);
static_assert(std::ranges::sized_range<packed_rank_steps>);
static_assert(std::ranges::view<packed_rank_steps>);

/// The largest cost of one batch of the config's enabled buckets (`cost(config, b, batch
/// size)`): the memory budget its fixed batch sizes are tuned to, hence the packed budget that
/// compares with it. 0 when no bucket is enabled.
template <batch_cost Cost = latent_tokens_cost>
double largest_batch_cost(const bucket_config& config, const Cost& cost = {}) {
  double m = 0.0;
  for (std::size_t b = 0; b < config.num_buckets(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    if (config.enabled(id))
      m = std::max(m, static_cast<double>(cost(config, id, config.batch_size(id))));
  }
  return m;
}

namespace detail {

/// `make_packed_plan` on groups it may reorder (each bucket's samples are shuffled in place).
template <class Cost>
packed_plan pack_groups(bucket_groups& groups, const bucket_config& config,
                        const plan_options& options, const Cost& cost) {
  const std::size_t nb = config.num_buckets();
  if (groups.num_buckets() != nb)
    throw error("packed plan: the groups have " + std::to_string(groups.num_buckets()) +
                " buckets but the config has " + std::to_string(nb));
  const double budget = options.token_budget;
  if (!(budget > 0.0) || !std::isfinite(budget))
    throw error("packed plan: the token budget " + detail::format_cost(budget) +
                " is not a finite number > 0");
  auto data = std::make_shared<detail::packed_data>();
  data->options = options;
  data->unassigned = groups.unassigned;
  data->invalid = groups.invalid;
  auto& buckets = data->buckets;
  buckets.resize(nb);
  // The classes of first-fit decreasing: buckets with samples to pack.
  std::vector<std::uint32_t> classes;
  for (std::size_t b = 0; b < nb; ++b) {
    const auto id = static_cast<bucket_id>(b);
    packed_bucket& pb = buckets[b];
    pb.frames = config.frames_of(id).frames;
    pb.height = config.ratio_of(id).height;
    pb.width = config.ratio_of(id).width;
    pb.grouped = groups.count(id);
    pb.enabled = config.enabled(id);
    pb.cost = static_cast<double>(cost(config, id, std::int64_t{1}));
    if (!(pb.cost >= 0.0) || !std::isfinite(pb.cost))
      throw error("packed plan: the cost of one sample of bucket " + std::to_string(b) +
                  " is not a finite number >= 0");
    pb.oversized = pb.cost > budget;
    if (!pb.enabled) {
      pb.dropped = pb.grouped;
      data->dropped_disabled += pb.grouped;
    } else if (pb.oversized) {
      pb.dropped = pb.grouped;
      data->dropped_oversized += pb.grouped;
    } else {
      pb.samples = pb.grouped;
      if (pb.grouped > 0) classes.push_back(static_cast<std::uint32_t>(b));
    }
  }
  if (data->dropped_oversized > 0 && !options.drop_oversized) {
    // Name the first such sample (by row), with its shape, cost and how many there are.
    std::uint32_t row = std::numeric_limits<std::uint32_t>::max();
    std::size_t where = 0;
    for (std::size_t b = 0; b < nb; ++b) {
      const auto id = static_cast<bucket_id>(b);
      if (!buckets[b].enabled || !buckets[b].oversized || groups.count(id) == 0) continue;
      const std::uint32_t first =
          *std::min_element(groups.bucket(id).begin(), groups.bucket(id).end());
      if (first < row) {
        row = first;
        where = b;
      }
    }
    const packed_bucket& pb = buckets[where];
    throw error("packed plan: sample " + std::to_string(row) + " (bucket " + std::to_string(where) +
                ", " + std::to_string(pb.frames) + "x" + std::to_string(pb.height) + "x" +
                std::to_string(pb.width) + ") costs " + detail::format_cost(pb.cost) +
                ", more than the token budget " + detail::format_cost(budget) + " (" +
                std::to_string(data->dropped_oversized) +
                " samples do); raise the budget or drop oversized samples");
  }

  // Each class's samples, shuffled in place (the fixed plan's per-bucket shuffle).
  const std::uint64_t key = detail::plan_key(options.seed, options.epoch);
  std::uint64_t total = 0;
  for (std::uint32_t b : classes) total += buckets[b].samples;
  detail::parallel_tasks(classes.size(), options.threads, [&](std::size_t t) {
    const std::uint32_t b = classes[t];
    const std::span<std::uint32_t> region(groups.indices.data() + groups.offsets[b],
                                          static_cast<std::size_t>(buckets[b].samples));
    detail::keyed_shuffle(region, detail::stream_key(key, detail::plan_domain_bucket, b));
  });
  const std::uint32_t* const pool = groups.indices.data();

  // First-fit decreasing, batch by batch.
  std::stable_sort(classes.begin(), classes.end(), [&](std::uint32_t a, std::uint32_t b) {
    return buckets[a].cost > buckets[b].cost;
  });
  const std::size_t k_classes = classes.size();
  std::vector<double> size(k_classes);
  std::vector<std::uint64_t> left(k_classes), cursor(k_classes);
  for (std::size_t k = 0; k < k_classes; ++k) {
    size[k] = buckets[classes[k]].cost;
    left[k] = buckets[classes[k]].samples;
    cursor[k] = groups.offsets[classes[k]];
  }
  // next[k]: the first class ≥ k with samples left (union–find with path halving).
  std::vector<std::size_t> next(k_classes + 1);
  std::iota(next.begin(), next.end(), std::size_t{0});
  const auto first_left = [&](std::size_t k) {
    while (next[k] != k) {
      next[k] = next[next[k]];
      k = next[k];
    }
    return k;
  };
  data->slots.resize(static_cast<std::size_t>(total));
  data->slot_bucket.resize(static_cast<std::size_t>(total));
  data->batch_begin.push_back(0);
  std::size_t out = 0;
  struct take_from {
    std::size_t k;
    std::uint64_t count;
  };
  std::vector<take_from> pattern;
  while (true) {
    std::size_t k = first_left(0);
    if (k == k_classes) break;
    // One batch's pattern: how many of which class.
    pattern.clear();
    double used = 0.0;
    bool exhausted = false;
    while (true) {
      // The first class from k on whose size still fits (sizes descend), with samples left.
      const auto fits =
          std::partition_point(size.begin() + static_cast<std::ptrdiff_t>(k), size.end(),
                               [&](double s) { return used + s > budget; });
      k = first_left(static_cast<std::size_t>(fits - size.begin()));
      if (k == k_classes) break;
      std::uint64_t take = left[k];
      if (size[k] > 0.0) {
        const double room = std::floor((budget - used) / size[k]);
        if (room < static_cast<double>(take)) take = static_cast<std::uint64_t>(room);
        while (take > 1 && used + static_cast<double>(take) * size[k] > budget) --take;
        while (take < left[k] && used + static_cast<double>(take + 1) * size[k] <= budget) ++take;
        if (take == 0) take = 1;  // fits by the search above
      }
      pattern.push_back({k, take});
      left[k] -= take;
      used += static_cast<double>(take) * size[k];
      if (left[k] == 0) {
        next[k] = k + 1;
        exhausted = true;
      }
      ++k;
    }
    // First-fit decreasing repeats the same pattern while every class in it has enough left:
    // the classes it skipped are still empty or still too large at the same points.
    std::uint64_t repeats = 0;
    if (!exhausted) {
      repeats = std::numeric_limits<std::uint64_t>::max();
      for (const take_from& t : pattern) repeats = std::min(repeats, left[t.k] / t.count);
      for (const take_from& t : pattern) {
        left[t.k] -= repeats * t.count;
        if (left[t.k] == 0) next[t.k] = t.k + 1;
      }
    }
    for (std::uint64_t r = 0; r <= repeats; ++r) {
      for (const take_from& t : pattern) {
        const auto count = static_cast<std::size_t>(t.count);
        std::copy_n(pool + cursor[t.k], count, data->slots.data() + out);
        std::fill_n(data->slot_bucket.data() + out, count, static_cast<bucket_id>(classes[t.k]));
        out += count;
        cursor[t.k] += t.count;
      }
      data->batch_begin.push_back(out);
      data->batch_cost.push_back(used);
    }
  }
  assert(out == total);

  // The global order.
  const std::size_t n = data->batch_cost.size();
  auto& order = data->order;
  order.resize(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  detail::keyed_shuffle(
      std::span<std::uint64_t>(order),
      detail::stream_key(key, detail::plan_domain_order, detail::packed_order_stream));
  const std::uint64_t group = options.balance_group;
  if (group > 0 && n > 0) {
    const auto& c = data->batch_cost;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint64_t a, std::uint64_t b) { return c[a] > c[b]; });
    const std::uint64_t chunks = n / group;
    std::vector<std::uint64_t> chunk_order(static_cast<std::size_t>(chunks));
    std::iota(chunk_order.begin(), chunk_order.end(), std::uint64_t{0});
    detail::keyed_shuffle(
        std::span<std::uint64_t>(chunk_order),
        detail::stream_key(key, detail::plan_domain_chunks, detail::packed_order_stream));
    std::vector<std::uint64_t> sorted = order;
    const auto g = static_cast<std::size_t>(group);
    for (std::size_t ch = 0; ch < chunk_order.size(); ++ch)
      std::copy_n(sorted.data() + static_cast<std::size_t>(chunk_order[ch]) * g, g,
                  order.data() + ch * g);
  }
  return packed_plan(std::move(data));
}

}  // namespace detail

/// Packs an epoch from grouped samples (see the top of this header). Throws `vbucket::error`
/// when the groups do not match the config, the budget is not a finite number > 0, a cost is
/// not a finite number ≥ 0, or (without `drop_oversized`) a sample costs more than the budget.
template <batch_cost Cost = latent_tokens_cost>
packed_plan make_packed_plan(const bucket_groups& groups, const bucket_config& config,
                             const plan_options& options, const Cost& cost = {}) {
  bucket_groups copy = groups;
  return detail::pack_groups(copy, config, options, cost);
}

/// Packs an epoch from the bucket id of every sample (as from `assign_all`), grouping them on
/// the way (in parallel; the same plan as from `group_by_bucket(ids, …)`). Throws as
/// `group_by_bucket` and the overload above.
template <batch_cost Cost = latent_tokens_cost>
packed_plan make_packed_plan(std::span<const bucket_id> ids, const bucket_config& config,
                             const plan_options& options, const Cost& cost = {}) {
  bucket_groups groups = group_by_bucket(ids, config.num_buckets(), options.threads);
  return detail::pack_groups(groups, config, options, cost);
}
/// As above, over 16-bit ids (`compact_ids`): the same plan.
template <batch_cost Cost = latent_tokens_cost>
packed_plan make_packed_plan(std::span<const compact_bucket_id> ids, const bucket_config& config,
                             const plan_options& options, const Cost& cost = {}) {
  bucket_groups groups = group_by_bucket(ids, config.num_buckets(), options.threads);
  return detail::pack_groups(groups, config, options, cost);
}

/// Packed batching as a type (`batch_sampler`, `loader`): samples of any buckets up to a cost
/// budget per batch (`plan_options::token_budget`); its plans are `packed_plan`s, made by
/// `make_packed_plan`.
struct packed_batching {
  using plan_type = packed_plan;
  static constexpr batching_mode mode = batching_mode::packed;
  template <class Id, batch_cost Cost>
  [[nodiscard]] static packed_plan make_plan(std::span<const Id> ids, const bucket_config& config,
                                             const plan_options& options, const Cost& cost) {
    return make_packed_plan(ids, config, options, cost);
  }
};

/// The step balance of a packed schedule (max / mean batch cost over the ranks of a step).
VBUCKET_COMPILED_INLINE step_balance_stats step_balance(const packed_schedule& schedule);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE step_balance_stats step_balance(const packed_schedule& schedule) {
  return step_balance_of(schedule.steps(), schedule.world_size(),
                         [&](std::uint64_t k, std::uint32_t r) { return schedule.at(k, r).cost; });
}
#endif

/// How full a schedule's steps are: Σ cost of the real batches dealt / (steps · world ·
/// budget). Alignment repeats are waste (their cost is not counted).
VBUCKET_COMPILED_INLINE double fill_ratio(const packed_schedule& schedule);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE double fill_ratio(const packed_schedule& schedule) {
  const packed_plan& plan = schedule.plan();
  const std::uint64_t n = plan.num_batches();
  const std::uint64_t begin = std::min(schedule.consumed(), n);
  const std::uint64_t end = n - schedule.dropped_batches();
  double real = 0.0;
  for (std::uint64_t p = begin; p < end; ++p) real += plan.cost_of(plan.id_at(p));
  const double slots = static_cast<double>(schedule.steps()) *
                       static_cast<double>(schedule.world_size()) * plan.token_budget();
  return slots > 0.0 ? real / slots : 1.0;
}
#endif

/// The fixed plan's fill at a memory budget `budget` (cost per rank per step): Σ cost of the
/// distinct samples of the real batches dealt (a bucket's pads and the alignment repeats are
/// waste) / (steps · world · budget). `budget` is typically the largest batch cost of the
/// config, the memory its batch sizes are tuned to.
VBUCKET_COMPILED_INLINE double fill_ratio(const epoch_schedule& schedule, double budget);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE double fill_ratio(const epoch_schedule& schedule, double budget) {
  const epoch_plan& plan = schedule.plan();
  const std::uint64_t n = plan.num_batches();
  const std::uint64_t begin = std::min(schedule.consumed(), n);
  const std::uint64_t end = n - schedule.dropped_batches();
  double real = 0.0;
  // Pads are the last slots of a bucket's last batch.
  for (std::uint64_t p = begin; p < end; ++p) {
    const std::uint64_t ref = plan.ref_at(p);
    const plan_bucket& pb = plan.bucket(static_cast<bucket_id>(detail::ref_bucket(ref)));
    const bool last = detail::ref_local(ref) + 1 == pb.batches;
    const std::uint64_t pads = last ? pb.pads : 0;
    real +=
        pb.cost * static_cast<double>(pb.batch_size - pads) / static_cast<double>(pb.batch_size);
  }
  const double slots =
      static_cast<double>(schedule.steps()) * static_cast<double>(schedule.world_size()) * budget;
  return slots > 0.0 ? real / slots : 1.0;
}
#endif

/// Statistics of a packed schedule (`vbucket stats --batching packed`).
struct packed_stats {
  double budget = 0.0;                  ///< B
  std::uint64_t samples = 0;            ///< distinct samples in batches
  std::uint64_t unassigned = 0;         ///< the rule chose no bucket
  std::uint64_t invalid = 0;            ///< unusable metadata
  std::uint64_t dropped_disabled = 0;   ///< in a disabled bucket
  std::uint64_t dropped_oversized = 0;  ///< costing more than B (drop_oversized)
  std::uint64_t batches = 0;            ///< real batches of the plan
  std::uint64_t mixed_batches = 0;      ///< batches with samples of more than one bucket
  std::uint64_t min_entries = 0;        ///< fewest samples in a batch
  std::uint64_t max_entries = 0;        ///< most samples in a batch
  double mean_entries = 0.0;            ///< samples per batch
  double min_batch_fill = 0.0;          ///< the least full batch: its cost / B
  double total_cost = 0.0;              ///< Σ cost of the plan's batches
  double fill = 1.0;                    ///< `fill_ratio(schedule)`
  alignment_stats alignment;            ///< the schedule's rank alignment
  step_balance_stats balance;           ///< `step_balance(schedule)`
};

/// Statistics of a packed plan as dealt by `schedule`.
VBUCKET_COMPILED_INLINE packed_stats compute_packed_stats(const packed_schedule& schedule);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE packed_stats compute_packed_stats(const packed_schedule& schedule) {
  const packed_plan& plan = schedule.plan();
  packed_stats s;
  s.budget = plan.token_budget();
  s.samples = plan.samples();
  s.unassigned = plan.unassigned();
  s.invalid = plan.invalid();
  s.dropped_disabled = plan.dropped_disabled();
  s.dropped_oversized = plan.dropped_oversized();
  s.batches = plan.num_batches();
  double least = 0.0;
  for (std::uint64_t id = 0; id < s.batches; ++id) {
    const packed_batch b = plan.make_batch(id);
    const std::uint64_t n = b.size();
    s.min_entries = id == 0 ? n : std::min(s.min_entries, n);
    s.max_entries = std::max(s.max_entries, n);
    if (b.buckets.front() != b.buckets.back()) ++s.mixed_batches;  // grouped by bucket
    least = id == 0 ? b.cost : std::min(least, b.cost);
    s.total_cost += b.cost;
  }
  if (s.batches > 0) {
    s.mean_entries = static_cast<double>(s.samples) / static_cast<double>(s.batches);
    s.min_batch_fill = least / s.budget;
  }
  s.fill = fill_ratio(schedule);
  s.alignment.world = schedule.world_size();
  s.alignment.consumed = schedule.consumed();
  s.alignment.steps = schedule.steps();
  s.alignment.repeat_batches = schedule.repeat_batches();
  s.alignment.repeat_samples = schedule.repeat_samples();
  s.alignment.dropped_batches = schedule.dropped_batches();
  s.alignment.dropped_samples = schedule.dropped_samples();
  s.balance = step_balance(schedule);
  return s;
}
#endif

}  // namespace vbucket

#if VBUCKET_EXTERN_TEMPLATES
namespace vbucket {
// Compiled once in the vbucket::compiled library (src/vbucket.cpp).
extern template struct detail::schedule_data<packed_plan>;
extern template packed_plan make_packed_plan<latent_tokens_cost>(const bucket_groups&,
                                                                 const bucket_config&,
                                                                 const plan_options&,
                                                                 const latent_tokens_cost&);
extern template packed_plan make_packed_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                                 const bucket_config&,
                                                                 const plan_options&,
                                                                 const latent_tokens_cost&);
extern template packed_plan make_packed_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                                 const bucket_config&,
                                                                 const plan_options&,
                                                                 const latent_tokens_cost&);
}  // namespace vbucket
#endif
