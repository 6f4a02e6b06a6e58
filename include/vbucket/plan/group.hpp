#pragma once
/// O(N) grouping of assigned samples by bucket: a counting sort into per-bucket offsets and
/// one flat index array (no vector per bucket). Within a bucket, indices ascend. The same
/// counting sort (`detail::bucket_sort`) groups ids straight into the planners' slot arrays.

#include <algorithm>  // std::min, std::max
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>     // std::numeric_limits
#include <span>       // std::span
#include <string>     // std::string, std::to_string
#include <vector>     // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/compiled.hpp"
#include "vbucket/detail/parallel_tasks.hpp"

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

namespace detail {

/// Throws the error for sample `sample`'s bucket id `id`, which is neither a bucket of a config
/// of `nb` buckets nor no_bucket or invalid_sample; the message starts with `who`.
[[noreturn]] inline void throw_bad_id(const char* who, std::uint64_t sample, std::int64_t id,
                                      std::size_t nb) {
  const std::string head = std::string(who) + ": sample " + std::to_string(sample) +
                           " has bucket id " + std::to_string(id);
  if (id >= 0) throw error(head + " but there are " + std::to_string(nb) + " buckets");
  throw error(head + ", which is neither a bucket nor no_bucket (" + std::to_string(no_bucket) +
              ") or invalid_sample (" + std::to_string(invalid_sample) + ")");
}

/// The counting sort of bucket ids behind `group_by_bucket` and the planners' overloads that
/// take ids, in parallel chunks. The samples are split into contiguous chunks, each counted
/// alone; then each chunk writes its samples of a bucket after those of the chunks before it, so
/// every bucket lists its samples in ascending order whatever the number of chunks. Neither
/// pass branches on the id (a fifth of the samples without a bucket would make such a branch a
/// coin flip): a chunk's counts and cursors are one row of columns (invalid_sample, no_bucket,
/// bucket 0 .. nb - 1, an id that is none of these), and what is not written goes to a scratch
/// word whose cursor does not move.
template <class Id>
class bucket_sort {
 public:
  /// Counts `ids` in chunks of at least 2^16 samples on up to `threads` threads (0: one per
  /// core). Throws `vbucket::error`, its message starting with `who`, on 2^32 samples or more or
  /// an id that is neither a bucket nor no_bucket or invalid_sample.
  bucket_sort(std::span<const Id> ids, std::size_t num_buckets, unsigned threads, const char* who)
      : ids_(ids), nb_(num_buckets), row_(num_buckets + 3) {
    const std::size_t n = ids.size();
    if (n > std::numeric_limits<std::uint32_t>::max())
      throw error(std::string(who) + ": " + std::to_string(n) + " samples is more than 2^32 - 1");
    if (threads == 0) threads = hardware_threads();
    threads_ = threads;
    constexpr std::size_t min_chunk = std::size_t{1} << 16;
    chunks_ =
        std::max<std::size_t>(1, std::min<std::size_t>(threads, (n + min_chunk - 1) / min_chunk));
    step_ = (n + chunks_ - 1) / chunks_;
    counts_.assign(chunks_ * row_, 0);
    parallel_tasks(chunks_, threads_, [&](std::size_t c) {
      std::uint64_t* count = counts_.data() + c * row_;
      for (std::size_t i = c * step_, e = std::min(n, (c + 1) * step_); i < e; ++i)
        ++count[column(ids_[i])];
    });
    grouped_.assign(nb_, 0);
    std::uint64_t out_of_range = 0;
    for (std::size_t c = 0; c < chunks_; ++c) {
      invalid_ += counts_[c * row_];
      unassigned_ += counts_[c * row_ + 1];
      for (std::size_t b = 0; b < nb_; ++b) grouped_[b] += counts_[c * row_ + b + 2];
      out_of_range += counts_[c * row_ + nb_ + 2];
    }
    if (out_of_range > 0) throw_first_bad(who);
  }

  /// Samples per bucket, and those without one.
  [[nodiscard]] std::span<const std::uint64_t> grouped() const noexcept { return grouped_; }
  [[nodiscard]] std::uint64_t unassigned() const noexcept { return unassigned_; }
  [[nodiscard]] std::uint64_t invalid() const noexcept { return invalid_; }

  /// Writes the index of every sample of bucket b, ascending, from dest[b] on (room for
  /// grouped()[b] indices); a bucket whose dest is null is skipped.
  void scatter(std::span<std::uint32_t* const> dest) const {
    struct alignas(64) spare {  // one cache line per chunk: no false sharing
      std::uint32_t word = 0;
    };
    std::vector<spare> trash(chunks_);
    std::vector<std::uint32_t*> cursor(chunks_ * row_);
    std::vector<std::uint8_t> advance(row_, 0);
    for (std::size_t c = 0; c < chunks_; ++c) {
      cursor[c * row_] = &trash[c].word;
      cursor[c * row_ + 1] = &trash[c].word;
      cursor[c * row_ + nb_ + 2] = &trash[c].word;
    }
    for (std::size_t b = 0; b < nb_; ++b) {
      advance[b + 2] = dest[b] != nullptr ? 1 : 0;
      std::uint32_t* at = dest[b];
      for (std::size_t c = 0; c < chunks_; ++c) {
        cursor[c * row_ + b + 2] = at != nullptr ? at : &trash[c].word;
        if (at != nullptr) at += counts_[c * row_ + b + 2];
      }
    }
    const std::size_t n = ids_.size();
    parallel_tasks(chunks_, threads_, [&](std::size_t c) {
      std::uint32_t** next = cursor.data() + c * row_;
      for (std::size_t i = c * step_, e = std::min(n, (c + 1) * step_); i < e; ++i) {
        const std::size_t k = column(ids_[i]);
        *next[k] = static_cast<std::uint32_t>(i);
        next[k] += advance[k];
      }
    });
  }

 private:
  /// The column of an id: invalid_sample 0, no_bucket 1, bucket b b + 2, anything else nb + 2.
  [[nodiscard]] std::size_t column(std::int64_t b) const noexcept {
    const auto bad = static_cast<std::int64_t>(nb_);
    const std::int64_t k = b < invalid_sample ? bad : std::min<std::int64_t>(b, bad);
    return static_cast<std::size_t>(k + 2);
  }

  [[noreturn]] void throw_first_bad(const char* who) const {
    std::size_t i = 0;
    while (column(ids_[i]) != nb_ + 2) ++i;
    throw_bad_id(who, i, ids_[i], nb_);
  }

  std::span<const Id> ids_;
  std::size_t nb_;
  std::size_t row_;  // invalid, no bucket, every bucket, bad id
  unsigned threads_ = 1;
  std::size_t chunks_ = 1;
  std::size_t step_ = 0;
  std::vector<std::uint64_t> counts_;  // chunks_ × row_
  std::vector<std::uint64_t> grouped_;
  std::uint64_t unassigned_ = 0;
  std::uint64_t invalid_ = 0;
};

template <class Id, class A>
bucket_sort(const std::vector<Id, A>&, std::size_t, unsigned, const char*) -> bucket_sort<Id>;

}  // namespace detail

namespace detail {
template <class Id>
bucket_groups group_ids(std::span<const Id> ids, std::size_t num_buckets, unsigned threads) {
  const bucket_sort<Id> sort(ids, num_buckets, threads, "group_by_bucket");
  bucket_groups g;
  g.invalid = sort.invalid();
  g.unassigned = sort.unassigned();
  g.offsets.resize(num_buckets + 1);
  std::uint64_t total = 0;
  for (std::size_t b = 0; b < num_buckets; ++b) {
    g.offsets[b] = total;
    total += sort.grouped()[b];
  }
  g.offsets[num_buckets] = total;
  g.indices.resize(static_cast<std::size_t>(total));
  std::vector<std::uint32_t*> dest(num_buckets, nullptr);
  if (total > 0)
    for (std::size_t b = 0; b < num_buckets; ++b)
      dest[b] = g.indices.data() + static_cast<std::size_t>(g.offsets[b]);
  sort.scatter(dest);
  return g;
}
}  // namespace detail

/// Groups `ids` (one per sample, as from `assign_all`) into `num_buckets` buckets, on up to
/// `threads` threads (0: one per core; the result does not depend on it). Throws
/// `vbucket::error` when an id is out of range or there are 2^32 samples or more.
/// (Defined in vbucket::compiled when it is linked: the sort is compiled once.)
VBUCKET_COMPILED_INLINE bucket_groups group_by_bucket(std::span<const bucket_id> ids,
                                                      std::size_t num_buckets,
                                                      unsigned threads = 1);
/// As above, over 16-bit ids (`compact_ids`).
VBUCKET_COMPILED_INLINE bucket_groups group_by_bucket(std::span<const compact_bucket_id> ids,
                                                      std::size_t num_buckets,
                                                      unsigned threads = 1);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE bucket_groups group_by_bucket(std::span<const bucket_id> ids,
                                                      std::size_t num_buckets, unsigned threads) {
  return detail::group_ids(ids, num_buckets, threads);
}
VBUCKET_COMPILED_INLINE bucket_groups group_by_bucket(std::span<const compact_bucket_id> ids,
                                                      std::size_t num_buckets, unsigned threads) {
  return detail::group_ids(ids, num_buckets, threads);
}
#endif  // VBUCKET_HEADER_DEFINITIONS

/// Writes `in` as 16-bit ids to `out` (the same size), for a config of `num_buckets` ≤
/// `max_compact_buckets` buckets; `first` is the sample index of in[0] (for messages). Throws
/// `vbucket::error` as the planners do for an id that is neither a bucket nor no_bucket or
/// invalid_sample, and when the config has more than `max_compact_buckets` buckets.
inline void compact_ids(std::span<const bucket_id> in, std::span<compact_bucket_id> out,
                        std::size_t num_buckets, std::uint64_t first = 0) {
  if (num_buckets > max_compact_buckets)
    throw error("compact_ids: " + std::to_string(num_buckets) +
                " buckets do not fit 16-bit ids (at most " + std::to_string(max_compact_buckets) +
                ")");
  const auto nb = static_cast<bucket_id>(num_buckets);
  unsigned bad = 0;  // no branch per id (clang: bitwise on bools is a warning)
  for (std::size_t i = 0; i < in.size(); ++i) {
    bad |= static_cast<unsigned>(in[i] < invalid_sample) | static_cast<unsigned>(in[i] >= nb);
    out[i] = static_cast<compact_bucket_id>(in[i]);
  }
  if (bad == 0) return;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] < invalid_sample || in[i] >= nb)
      detail::throw_bad_id("compact_ids", first + i, in[i], num_buckets);
}

}  // namespace vbucket
