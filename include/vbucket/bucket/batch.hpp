#pragma once
/// What a plan produces: a bucket as planned (`plan_bucket`: its region, batches and what
/// happened to its samples) and one batch for a trainer (`batch`).

#include <cstdint>  // std::uint32_t, std::uint64_t, std::int64_t
#include <span>     // std::span

#include "bucket_config.hpp"  // bucket_id, no_bucket

namespace vbucket {

/// A bucket as planned: where its samples lie, its batches, and what happened to its samples.
struct plan_bucket {
  std::uint64_t slot_begin = 0;        ///< first slot of its region in `epoch_plan::slots()`
  std::uint64_t batches = 0;           ///< its batches in the epoch
  std::uint64_t batch_size = 0;        ///< per-GPU batch size (0: disabled)
  std::int64_t frames = 0;             ///< target T
  std::int64_t height = 0;             ///< target H
  std::int64_t width = 0;              ///< target W
  double cost = 0.0;                   ///< cost of one of its batches
  bucket_id downgrade_to = no_bucket;  ///< where leftovers go under `downgrade`
  std::uint64_t grouped = 0;           ///< samples the rule put in it
  std::uint64_t moved_in = 0;          ///< leftovers moved in from larger buckets (downgrade)
  std::uint64_t moved_out = 0;         ///< leftovers moved on to a smaller bucket (downgrade)
  std::uint64_t samples = 0;           ///< distinct samples in its batches
  std::uint64_t pads = 0;              ///< repeated slots that fill its last batch
  std::uint64_t dropped = 0;           ///< samples in no batch (drop policy, disabled bucket)

  [[nodiscard]] constexpr bool image() const noexcept { return frames == 1; }
};

/// One batch for a trainer: the bucket, its target shape and its sample indices (row numbers
/// of the metadata table). `indices.size()` is always the bucket's batch size.
struct batch {
  bucket_id bucket = no_bucket;
  std::int64_t frames = 0;  ///< target T
  std::int64_t height = 0;  ///< target H
  std::int64_t width = 0;   ///< target W
  std::span<const std::uint32_t> indices;
  std::uint64_t step = 0;      ///< step of the schedule it belongs to (0 = the first dealt step)
  std::uint64_t position = 0;  ///< global position: consumed + step · world + rank
  bool repeat = false;         ///< a repeat added for rank alignment (its samples are pads)
};

}  // namespace vbucket
