#pragma once
/// O(N) grouping of assigned samples by bucket: a counting sort into per-bucket offsets and
/// one flat index array (no vector per bucket). Within a bucket, indices ascend.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t
#include <limits>   // std::numeric_limits
#include <span>     // std::span
#include <string>   // std::to_string
#include <vector>   // std::vector

#include "bucket_config.hpp"
#include "error.hpp"

namespace vbucket {

/// Samples grouped by bucket: the samples of bucket b are
/// indices[offsets[b] .. offsets[b + 1]). Samples without a bucket are counted, not listed.
struct bucket_groups {
  std::vector<std::uint64_t> offsets;  // num_buckets + 1 entries
  std::vector<std::uint32_t> indices;  // sample indices, grouped
  std::uint64_t unassigned = 0;        // rule chose no bucket
  std::uint64_t invalid = 0;           // metadata could not be bucketed

  [[nodiscard]] std::size_t num_buckets() const noexcept {
    return offsets.empty() ? 0 : offsets.size() - 1;
  }
  [[nodiscard]] std::span<const std::uint32_t> bucket(bucket_id b) const noexcept {
    const auto i = static_cast<std::size_t>(b);
    return {indices.data() + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i])};
  }
  [[nodiscard]] std::uint64_t count(bucket_id b) const noexcept {
    const auto i = static_cast<std::size_t>(b);
    return offsets[i + 1] - offsets[i];
  }
  /// Samples that are in some bucket.
  [[nodiscard]] std::uint64_t assigned() const noexcept { return indices.size(); }
};

/// Groups `ids` (one per sample, as from `assign_all`) into `num_buckets` buckets. Throws
/// `vbucket::error` when an id is out of range or there are 2^32 samples or more.
inline bucket_groups group_by_bucket(std::span<const bucket_id> ids, std::size_t num_buckets) {
  if (ids.size() > std::numeric_limits<std::uint32_t>::max())
    throw error("group_by_bucket: " + std::to_string(ids.size()) +
                " samples is more than 2^32 - 1");
  bucket_groups g;
  // Pass 1: counts in slots shifted by two, so invalid_sample (-2) and no_bucket (-1) count in
  // slots 0 and 1 without a branch (a fifth of samples unassigned makes that branch a coin
  // flip). An id outside [-2, num_buckets) is only noted; it is named after the loop.
  const std::size_t slots = num_buckets + 2;
  std::vector<std::uint64_t> count(slots, 0);
  bool bad = false;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto slot = static_cast<std::size_t>(static_cast<std::int64_t>(ids[i]) + 2);
    bad |= slot >= slots;
    ++count[slot < slots ? slot : 0];
  }
  if (bad) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const bucket_id b = ids[i];
      if (b >= 0 && static_cast<std::size_t>(b) >= num_buckets)
        throw error("group_by_bucket: sample " + std::to_string(i) + " has bucket id " +
                    std::to_string(b) + " but there are " + std::to_string(num_buckets) +
                    " buckets");
      if (b < invalid_sample)
        throw error("group_by_bucket: sample " + std::to_string(i) + " has bucket id " +
                    std::to_string(b) + ", which is neither a bucket nor no_bucket (" +
                    std::to_string(no_bucket) + ") or invalid_sample (" +
                    std::to_string(invalid_sample) + ")");
    }
  }
  g.invalid = count[0];
  g.unassigned = count[1];
  g.offsets.resize(num_buckets + 1);
  std::uint64_t total = 0;
  for (std::size_t b = 0; b < num_buckets; ++b) {
    g.offsets[b] = total;
    total += count[b + 2];
  }
  g.offsets[num_buckets] = total;
  // Pass 2: scatter without a branch: unbucketed samples write to one spare slot past the end
  // (their cursors never move), which is dropped afterwards.
  g.indices.resize(static_cast<std::size_t>(total) + 1);
  std::vector<std::uint64_t>& cursor = count;
  cursor[0] = cursor[1] = total;
  for (std::size_t b = 0; b < num_buckets; ++b) cursor[b + 2] = g.offsets[b];
  std::uint32_t* const out = g.indices.data();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto slot = static_cast<std::size_t>(static_cast<std::int64_t>(ids[i]) + 2);
    out[cursor[slot]] = static_cast<std::uint32_t>(i);
    cursor[slot] += static_cast<std::uint64_t>(slot >= 2);
  }
  g.indices.pop_back();
  return g;
}

}  // namespace vbucket
