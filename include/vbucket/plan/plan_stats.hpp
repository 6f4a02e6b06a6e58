#pragma once
/// Statistics of an epoch plan, as data: per bucket samples, batches, pads, drops and moves;
/// image and video totals; by aspect ratio and by (resolution, frames); the rank alignment of
/// a schedule; the step balance (max/mean cost of the batches that run in one step); and how
/// much of the batches are pads (`compute_pad_report`, behind `vbucket stats`' and `plan`'s
/// pad warning).
/// `vbucket/fmt/plan_table.hpp` prints them as a table.

#include <algorithm>    // std::max, std::stable_sort, std::find_if
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::int64_t, std::uint32_t
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "epoch_plan.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/compiled.hpp"

namespace vbucket {

/// Counts summed over some buckets.
struct plan_counts {
  std::uint64_t buckets = 0;    ///< buckets with at least one batch
  std::uint64_t grouped = 0;    ///< samples the rule put in them
  std::uint64_t moved_in = 0;   ///< leftovers moved in (downgrade)
  std::uint64_t moved_out = 0;  ///< leftovers moved out (downgrade)
  std::uint64_t samples = 0;    ///< distinct samples in batches
  std::uint64_t batches = 0;    ///< batches
  std::uint64_t pads = 0;       ///< repeated slots filling last batches
  std::uint64_t dropped = 0;    ///< samples in no batch
  double cost = 0.0;            ///< total cost of the batches

  /// Slots in batches: samples + pads.
  [[nodiscard]] constexpr std::uint64_t slots() const noexcept { return samples + pads; }

  constexpr plan_counts& operator+=(const plan_bucket& b) noexcept {
    buckets += b.batches > 0 ? 1 : 0;
    grouped += b.grouped;
    moved_in += b.moved_in;
    moved_out += b.moved_out;
    samples += b.samples;
    batches += b.batches;
    pads += b.pads;
    dropped += b.dropped;
    cost += b.cost * static_cast<double>(b.batches);
    return *this;
  }
  friend constexpr bool operator==(const plan_counts&, const plan_counts&) = default;
};

/// One bucket's statistics.
struct bucket_stats {
  bucket_id bucket = no_bucket;
  std::string resolution;
  std::int64_t frames = 0;  ///< the frames key = target T
  std::string ratio;        ///< the aspect table key
  std::int64_t height = 0;  ///< target H
  std::int64_t width = 0;   ///< target W
  std::int64_t batch_size = 0;
  plan_counts counts;
};

/// Statistics of one (resolution, frames) pair, over its aspect ratios.
struct shape_stats {
  std::string resolution;
  std::int64_t frames = 0;
  std::int64_t batch_size = 0;
  plan_counts counts;
};

/// Statistics of one aspect ratio key, over resolutions and frames.
struct ratio_stats {
  std::string ratio;
  double value = 0.0;  ///< H / W
  plan_counts counts;
};

/// Rank alignment of a schedule: what was added or dropped so every rank runs `steps` steps.
struct alignment_stats {
  std::uint32_t world = 0;
  std::uint64_t consumed = 0;         ///< global batches consumed before the schedule
  std::uint64_t steps = 0;            ///< steps per rank
  std::uint64_t repeat_batches = 0;   ///< repeats completing the last step
  std::uint64_t repeat_samples = 0;   ///< their slots (pads)
  std::uint64_t dropped_batches = 0;  ///< drop_last: real batches left out
  std::uint64_t dropped_samples = 0;  ///< their slots
};

/// Everything `compute_plan_stats` reports.
struct plan_stats {
  std::vector<bucket_stats> buckets;  ///< buckets with any sample, by id
  std::vector<shape_stats> by_shape;  ///< every (resolution, frames) of the config, config order
  std::vector<ratio_stats> by_ratio;  ///< ratio keys with any sample, by ratio value
  plan_counts images;                 ///< buckets with one frame
  plan_counts videos;                 ///< buckets with more
  plan_counts total;
  std::uint64_t unassigned = 0;  ///< samples the rule left without a bucket
  std::uint64_t invalid = 0;     ///< samples with unusable metadata
  alignment_stats alignment;     ///< world == 0 when computed from a plan alone
};

/// Statistics of a plan (without rank alignment). `config` is the plan's config.
VBUCKET_COMPILED_INLINE plan_stats compute_plan_stats(const epoch_plan& plan,
                                                      const bucket_config& config);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE plan_stats compute_plan_stats(const epoch_plan& plan,
                                                      const bucket_config& config) {
  plan_stats s;
  s.unassigned = plan.unassigned();
  s.invalid = plan.invalid();
  const auto& resolutions = config.resolutions();
  std::vector<ratio_stats> ratios;
  for (std::size_t r = 0; r < resolutions.size(); ++r) {
    const auto& res = resolutions[r];
    for (std::size_t k = 0; k < res.frames.size(); ++k) {
      shape_stats shape{res.info.name, res.frames[k].frames, res.frames[k].batch_size, {}};
      for (std::size_t a = 0; a < res.info.table.size(); ++a) {
        const bucket_id id = config.id_of(r, k, a);
        const plan_bucket& pb = plan.bucket(id);
        shape.counts += pb;
        (pb.image() ? s.images : s.videos) += pb;
        s.total += pb;
        if (pb.grouped == 0 && pb.moved_in == 0) continue;
        const aspect_entry& ratio = res.info.table[a];
        bucket_stats b{id,
                       res.info.name,
                       pb.frames,
                       ratio.key,
                       pb.height,
                       pb.width,
                       static_cast<std::int64_t>(pb.batch_size),
                       {}};
        b.counts += pb;
        s.buckets.push_back(std::move(b));
        auto it = std::find_if(ratios.begin(), ratios.end(),
                               [&](const ratio_stats& x) { return x.ratio == ratio.key; });
        if (it == ratios.end()) {
          ratios.push_back({ratio.key, ratio.ratio, {}});
          it = ratios.end() - 1;
        }
        it->counts += pb;
      }
      s.by_shape.push_back(std::move(shape));
    }
  }
  std::stable_sort(
      s.buckets.begin(), s.buckets.end(),
      [](const bucket_stats& a, const bucket_stats& b) { return a.bucket < b.bucket; });
  std::stable_sort(ratios.begin(), ratios.end(),
                   [](const ratio_stats& a, const ratio_stats& b) { return a.value < b.value; });
  s.by_ratio = std::move(ratios);
  return s;
}
#endif

/// Statistics of a plan as dealt by `schedule`, with its rank alignment.
VBUCKET_COMPILED_INLINE plan_stats compute_plan_stats(const epoch_schedule& schedule,
                                                      const bucket_config& config);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE plan_stats compute_plan_stats(const epoch_schedule& schedule,
                                                      const bucket_config& config) {
  plan_stats s = compute_plan_stats(schedule.plan(), config);
  s.alignment = {schedule.world_size(),     schedule.consumed(),       schedule.steps(),
                 schedule.repeat_batches(), schedule.repeat_samples(), schedule.dropped_batches(),
                 schedule.dropped_samples()};
  return s;
}
#endif

/// One bucket's pads (for `pad_report`).
struct bucket_pads {
  bucket_id bucket = no_bucket;
  std::string resolution;
  std::int64_t frames = 0;  ///< the frames key
  std::string ratio;        ///< the aspect table key
  std::uint64_t pads = 0;   ///< repeated slots in its last batch
  std::uint64_t slots = 0;  ///< all its slots: samples + pads
};

/// How much of a plan's batches are pads (repeats that fill a bucket's last batch; the rank
/// alignment's repeats are not counted), where they are, and what `downgrade` would leave.
/// A bucket much smaller than its batch size is mostly pads: one image in a bucket of batch
/// size 141 is trained 141 times per epoch.
struct pad_report {
  incomplete_policy policy = incomplete_policy::pad;  ///< the plan's policy
  std::uint64_t pads = 0;                             ///< pads of all buckets
  std::uint64_t slots = 0;                            ///< slots of all batches
  std::vector<bucket_pads> worst;  ///< buckets with pads, the most pads first (a few)
  /// Pads and slots the same buckets' samples would give under `downgrade` (equal to the
  /// above when the plan already downgrades).
  std::uint64_t downgrade_pads = 0;
  std::uint64_t downgrade_slots = 0;

  /// Pads / slots (0 when there are no slots).
  [[nodiscard]] constexpr double fraction() const noexcept {
    return slots == 0 ? 0.0 : static_cast<double>(pads) / static_cast<double>(slots);
  }
  [[nodiscard]] constexpr double downgrade_fraction() const noexcept {
    return downgrade_slots == 0
               ? 0.0
               : static_cast<double>(downgrade_pads) / static_cast<double>(downgrade_slots);
  }
  /// Whether the pads are more than `threshold` of the slots (a threshold of 1 never is).
  [[nodiscard]] constexpr bool exceeds(double threshold) const noexcept {
    return fraction() > threshold;
  }
  /// Whether switching to `downgrade` would leave fewer pads (never when already downgrading).
  [[nodiscard]] constexpr bool downgrade_helps() const noexcept {
    return policy != incomplete_policy::downgrade && downgrade_pads < pads;
  }
};

/// The pads of a plan, its `max_worst` buckets with the most pads (ties: the larger share of
/// pads, then the lower id), and the pads of the same samples under `downgrade` (computed from
/// the plan's per-bucket counts, without planning again). `config` is the plan's config.
VBUCKET_COMPILED_INLINE pad_report compute_pad_report(const epoch_plan& plan,
                                                      const bucket_config& config,
                                                      std::size_t max_worst = 3);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE pad_report compute_pad_report(const epoch_plan& plan,
                                                      const bucket_config& config,
                                                      std::size_t max_worst) {
  pad_report r;
  r.policy = plan.options().policy;
  const std::span<const plan_bucket> buckets = plan.buckets();
  std::vector<std::uint64_t> grouped(buckets.size());
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const plan_bucket& pb = buckets[b];
    grouped[b] = pb.grouped;
    r.pads += pb.pads;
    r.slots += pb.samples + pb.pads;
    if (pb.pads == 0) continue;
    const auto id = static_cast<bucket_id>(b);
    r.worst.push_back({id, config.resolution_of(id).info.name, pb.frames, config.ratio_of(id).key,
                       pb.pads, pb.samples + pb.pads});
  }
  std::stable_sort(r.worst.begin(), r.worst.end(), [](const bucket_pads& a, const bucket_pads& b) {
    if (a.pads != b.pads) return a.pads > b.pads;
    // a.pads / a.slots > b.pads / b.slots without division (pads equal and > 0).
    return a.slots < b.slots;
  });
  if (r.worst.size() > max_worst) r.worst.resize(max_worst);
  if (r.policy == incomplete_policy::downgrade) {
    r.downgrade_pads = r.pads;
    r.downgrade_slots = r.slots;
  } else {
    std::vector<plan_bucket> down;
    std::vector<std::uint32_t> topo;
    std::vector<std::uint64_t> capacity;
    detail::count_plan_buckets(std::span<const std::uint64_t>(grouped), config,
                               incomplete_policy::downgrade, latent_tokens_cost{}, down, topo,
                               capacity);
    for (const plan_bucket& pb : down) {
      r.downgrade_pads += pb.pads;
      r.downgrade_slots += pb.samples + pb.pads;
    }
  }
  return r;
}
#endif

/// How evenly the batches of one step cost, over a schedule's steps. In synchronous data
/// parallel training a step lasts as long as its most expensive batch, so `max_over_mean`
/// (Σ max / Σ mean over steps) is the expected slowdown against perfect balance.
struct step_balance_stats {
  std::uint64_t steps = 0;
  double max_over_mean = 1.0;     ///< Σ_steps max cost / Σ_steps mean cost
  double mean_step_ratio = 1.0;   ///< mean over steps of (max / mean)
  double worst_step_ratio = 1.0;  ///< the largest max / mean of a step
};

/// The step balance of `steps` steps over `world` ranks, where `cost(step, rank)` is the cost
/// of the batch a rank runs at a step: one definition for every kind of schedule.
template <class Cost>
step_balance_stats step_balance_of(std::uint64_t steps, std::uint32_t world, Cost&& cost) {
  step_balance_stats s;
  s.steps = steps;
  double sum_max = 0.0, sum_mean = 0.0, sum_ratio = 0.0;
  for (std::uint64_t k = 0; k < steps; ++k) {
    double mx = 0.0, sum = 0.0;
    for (std::uint32_t r = 0; r < world; ++r) {
      const double c = cost(k, r);
      mx = std::max(mx, c);
      sum += c;
    }
    const double mean = sum / static_cast<double>(world);
    const double ratio = mean > 0.0 ? mx / mean : 1.0;
    sum_max += mx;
    sum_mean += mean;
    sum_ratio += ratio;
    s.worst_step_ratio = std::max(s.worst_step_ratio, ratio);
  }
  if (steps > 0) {
    s.max_over_mean = sum_mean > 0.0 ? sum_max / sum_mean : 1.0;
    s.mean_step_ratio = sum_ratio / static_cast<double>(steps);
  }
  return s;
}

/// The step balance of a schedule with the plan's batch costs (those of `make_epoch_plan`,
/// per-sample costs included: `epoch_plan::cost_of`).
VBUCKET_COMPILED_INLINE step_balance_stats step_balance(const epoch_schedule& schedule);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE step_balance_stats step_balance(const epoch_schedule& schedule) {
  const epoch_plan& plan = schedule.plan();
  return step_balance_of(
      schedule.steps(), schedule.world_size(),
      [&](std::uint64_t k, std::uint32_t r) { return plan.cost_of(schedule.ref_at(k, r)); });
}
#endif

}  // namespace vbucket
