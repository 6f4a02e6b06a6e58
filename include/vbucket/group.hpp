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
  g.offsets.assign(num_buckets + 1, 0);
  // Pass 1: counts, shifted by one so the prefix sum yields start offsets.
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bucket_id b = ids[i];
    if (b >= 0) {
      if (static_cast<std::size_t>(b) >= num_buckets)
        throw error("group_by_bucket: sample " + std::to_string(i) + " has bucket id " +
                    std::to_string(b) + " but there are " + std::to_string(num_buckets) +
                    " buckets");
      ++g.offsets[static_cast<std::size_t>(b) + 1];
    } else if (b == invalid_sample) {
      ++g.invalid;
    } else if (b == no_bucket) {
      ++g.unassigned;
    } else {
      throw error("group_by_bucket: sample " + std::to_string(i) + " has bucket id " +
                  std::to_string(b) + ", which is neither a bucket nor no_bucket (" +
                  std::to_string(no_bucket) + ") or invalid_sample (" +
                  std::to_string(invalid_sample) + ")");
    }
  }
  for (std::size_t b = 0; b < num_buckets; ++b) g.offsets[b + 1] += g.offsets[b];
  g.indices.resize(static_cast<std::size_t>(g.offsets[num_buckets]));
  // Pass 2: scatter, using a running cursor per bucket.
  std::vector<std::uint64_t> cursor(g.offsets.begin(), g.offsets.end() - 1);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bucket_id b = ids[i];
    if (b >= 0)
      g.indices[static_cast<std::size_t>(cursor[static_cast<std::size_t>(b)]++)] =
          static_cast<std::uint32_t>(i);
  }
  return g;
}

}  // namespace vbucket
