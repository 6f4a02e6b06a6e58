#pragma once
/// Batch sizing: the data-parallel size of a run (world / (tp · pp · sp), validated), global
/// batch per bucket, gradient accumulation to a target global batch, the token count of a
/// (resolution, frames) bucket, and micro-batching of any contiguous range. Standard library
/// only; the fitted cost models and the batch-size search are in the Eigen adapter
/// (`vbucket/eigen/cost_model.hpp`).

#include <cmath>        // std::isnan, std::isfinite
#include <concepts>     // std::invocable, std::convertible_to
#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::int64_t
#include <iterator>     // std::random_access_iterator_tag
#include <limits>       // std::numeric_limits
#include <ranges>       // std::ranges::contiguous_range, std::ranges::view_interface
#include <span>         // std::span
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <type_traits>  // std::remove_reference_t, std::invoke_result_t
#include <utility>      // std::forward
#include <vector>       // std::vector

#include "bucket_config.hpp"
#include "vbucket/base/error.hpp"

namespace vbucket {

// ---------------------------------------------------------------------------------------------
// Data-parallel size, global batch, gradient accumulation
// ---------------------------------------------------------------------------------------------

/// How a run's ranks are split: `world` ranks in all, in groups of tensor- × pipeline- ×
/// sequence-parallel degree; each group is one data-parallel replica.
struct parallel_layout {
  std::int64_t world = 1;
  std::int64_t tensor = 1;
  std::int64_t pipeline = 1;
  std::int64_t sequence = 1;
};

/// A model dimension that tensor parallelism splits (attention heads, hidden size, ...).
/// Ulysses-style sequence parallelism splits heads too: set `split_by_sequence` and tp · sp
/// must divide it.
struct model_dimension {
  std::string_view name;
  std::int64_t size = 0;
  bool split_by_sequence = false;
};

/// How `gradient_accumulation` treats a target that is not a multiple of one step's batch.
enum class accumulation_rounding {
  exact,    ///< refuse (throws `vbucket::error` naming the nearest multiples)
  up,       ///< the smallest multiple at or above the target
  down,     ///< the largest multiple at or below the target (at least one step)
  nearest,  ///< the nearest multiple (ties go up; at least one step)
};

/// Accumulation steps per optimizer step and the global batch they give.
struct accumulation_plan {
  std::int64_t steps = 0;
  std::int64_t global_batch = 0;  ///< steps · per-rank batch · data-parallel size

  friend constexpr bool operator==(const accumulation_plan&, const accumulation_plan&) = default;
};

namespace detail {

[[noreturn]] inline void fail_positive(std::string_view what, std::int64_t value) {
  throw error(std::string(what) + " must be a positive integer, got " + std::to_string(value));
}

[[noreturn]] inline void fail_overflow(std::string_view what) {
  throw error(std::string(what) + " overflows a 64-bit integer");
}

[[noreturn]] inline void fail_world(const parallel_layout& p, std::int64_t group) {
  throw error("world size " + std::to_string(p.world) + " is not divisible by tp · pp · sp = " +
              std::to_string(group) + " (tp " + std::to_string(p.tensor) + " × pp " +
              std::to_string(p.pipeline) + " × sp " + std::to_string(p.sequence) + ")");
}

[[noreturn]] inline void fail_dimension(const model_dimension& d, std::int64_t divisor,
                                        bool with_sequence) {
  throw error(std::string(with_sequence ? "tp · sp = " : "tensor-parallel size ") +
              std::to_string(divisor) + " does not divide " + std::string(d.name) + " = " +
              std::to_string(d.size));
}

[[noreturn]] inline void fail_accumulation(std::int64_t target, std::int64_t per_rank,
                                           std::int64_t dp, std::int64_t step, bool too_small) {
  const std::string step_text = "one step's global batch " + std::to_string(step) +
                                " (per-rank batch " + std::to_string(per_rank) +
                                " × data-parallel size " + std::to_string(dp) + ")";
  if (too_small)
    throw error("target global batch " + std::to_string(target) + " is smaller than " + step_text);
  const std::int64_t below = target / step * step;
  throw error("target global batch " + std::to_string(target) + " is not a multiple of " +
              step_text + "; the nearest are " + std::to_string(below) + " and " +
              std::to_string(below + step));
}

[[noreturn]] inline void fail_negative(std::string_view what, std::int64_t value) {
  throw error(std::string(what) + " must not be negative, got " + std::to_string(value));
}

[[noreturn]] inline void fail_latent_pixels(std::int64_t height, std::int64_t width,
                                            std::int64_t spatial) {
  throw error(std::to_string(height) + "×" + std::to_string(width) +
              " is smaller than one latent pixel at spatial compression " +
              std::to_string(spatial));
}

/// a · b for positive a and b, or fails naming `what`.
constexpr std::int64_t checked_product(std::int64_t a, std::int64_t b, std::string_view what) {
  if (a > std::numeric_limits<std::int64_t>::max() / b) fail_overflow(what);
  return a * b;
}

constexpr void check_positive(std::int64_t value, std::string_view what) {
  if (value < 1) fail_positive(what, value);
}

}  // namespace detail

/// The data-parallel size world / (tp · pp · sp). Throws `vbucket::error` when a degree is
/// below 1 or the world size is not divisible by their product.
constexpr std::int64_t data_parallel_size(const parallel_layout& p) {
  detail::check_positive(p.world, "world size");
  detail::check_positive(p.tensor, "tensor-parallel size");
  detail::check_positive(p.pipeline, "pipeline-parallel size");
  detail::check_positive(p.sequence, "sequence-parallel size");
  const std::int64_t group = detail::checked_product(
      detail::checked_product(p.tensor, p.pipeline, "tp · pp · sp"), p.sequence, "tp · pp · sp");
  if (p.world % group != 0) detail::fail_world(p, group);
  return p.world / group;
}

/// As above, and checks that tp (tp · sp for a dimension `split_by_sequence`) divides every
/// model dimension in `dims`.
constexpr std::int64_t data_parallel_size(const parallel_layout& p,
                                          std::span<const model_dimension> dims) {
  const std::int64_t dp = data_parallel_size(p);
  for (const auto& d : dims) {
    if (d.size < 1) detail::fail_positive(d.name, d.size);
    const std::int64_t divisor = d.split_by_sequence ? p.tensor * p.sequence : p.tensor;
    if (d.size % divisor != 0) detail::fail_dimension(d, divisor, d.split_by_sequence);
  }
  return dp;
}

/// The samples one optimizer step sees without accumulation: per-rank batch × dp size.
constexpr std::int64_t global_batch_size(std::int64_t per_rank_batch, std::int64_t dp) {
  detail::check_positive(per_rank_batch, "per-rank batch size");
  detail::check_positive(dp, "data-parallel size");
  return detail::checked_product(per_rank_batch, dp, "global batch size");
}

/// Gradient-accumulation steps so that steps × per-rank batch × dp reaches
/// `target_global_batch` (how a target that is not a multiple is treated: `rounding`).
constexpr accumulation_plan gradient_accumulation(
    std::int64_t target_global_batch, std::int64_t per_rank_batch, std::int64_t dp,
    accumulation_rounding rounding = accumulation_rounding::exact) {
  detail::check_positive(target_global_batch, "target global batch size");
  const std::int64_t step = global_batch_size(per_rank_batch, dp);
  const std::int64_t below = target_global_batch / step;
  const std::int64_t remainder = target_global_batch % step;
  std::int64_t steps = below;
  if (remainder != 0) {
    switch (rounding) {
      case accumulation_rounding::exact:
        detail::fail_accumulation(target_global_batch, per_rank_batch, dp, step, below == 0);
      case accumulation_rounding::up:
        steps = below + 1;
        break;
      case accumulation_rounding::down:
        steps = below;
        break;
      case accumulation_rounding::nearest:
        steps = remainder >= step - remainder ? below + 1 : below;
        break;
    }
    if (steps == 0) steps = 1;
  }
  return {steps, detail::checked_product(steps, step, "accumulated global batch size")};
}

// ---------------------------------------------------------------------------------------------
// Tokens of a bucket
// ---------------------------------------------------------------------------------------------

/// The VAE's downsampling: `temporal` frames and `spatial` × `spatial` pixels per latent.
struct latent_compression {
  std::int64_t temporal = 4;
  std::int64_t spatial = 16;
};

/// Latent frames of a `frames`-frame clip: 1 + (frames − 1) / temporal (integer division).
constexpr std::int64_t latent_frames(std::int64_t frames, std::int64_t temporal = 4) {
  detail::check_positive(frames, "frames");
  detail::check_positive(temporal, "temporal compression");
  return 1 + (frames - 1) / temporal;
}

/// Latent pixels of an H × W frame: H · W / spatial² (integer division).
constexpr std::int64_t latent_pixels(std::int64_t height, std::int64_t width,
                                     std::int64_t spatial = 16) {
  detail::check_positive(height, "height");
  detail::check_positive(width, "width");
  detail::check_positive(spatial, "spatial compression");
  const std::int64_t area = detail::checked_product(height, width, "height × width");
  const std::int64_t cell = detail::checked_product(spatial, spatial, "spatial compression²");
  const std::int64_t pixels = area / cell;
  if (pixels < 1) detail::fail_latent_pixels(height, width, spatial);
  return pixels;
}

/// Tokens of a (frames, H, W) clip: latent frames × latent pixels.
constexpr std::int64_t token_count(std::int64_t frames, std::int64_t height, std::int64_t width,
                                   latent_compression c = {}) {
  return detail::checked_product(latent_frames(frames, c.temporal),
                                 latent_pixels(height, width, c.spatial), "token count");
}

/// Tokens of the (resolution, frames) bucket `frames_index` of resolution `resolution` in
/// `config`, at the resolution's largest-area aspect entry (the sample that costs most).
inline std::int64_t bucket_tokens(const bucket_config& config, std::size_t resolution,
                                  std::size_t frames_index, latent_compression c = {}) {
  const auto& r = config.resolutions().at(resolution);
  const auto& largest = r.info.table[r.info.table.largest()];
  try {
    return token_count(r.frames.at(frames_index).frames, largest.height, largest.width, c);
  } catch (const error& e) {
    throw error("bucket \"" + r.info.name + "\" -> \"" +
                std::to_string(r.frames[frames_index].frames) + "\": " + e.what());
  }
}

/// Tokens of the (resolution, frames) pair bucket `id` belongs to (all its ratios share them).
inline std::int64_t bucket_tokens(const bucket_config& config, bucket_id id,
                                  latent_compression c = {}) {
  const auto k = config.key(id);
  return bucket_tokens(config, static_cast<std::size_t>(k.resolution),
                       static_cast<std::size_t>(k.frames_index), c);
}

/// A (resolution, frames) pair of a config: the unit that carries a batch size.
struct batch_bucket {
  std::size_t resolution = 0;    ///< index into `bucket_config::resolutions()`
  std::size_t frames_index = 0;  ///< index into that resolution's `frames`
  std::string resolution_name;
  std::int64_t frames = 0;
  std::int64_t tokens = 0;      ///< `bucket_tokens` of this pair
  std::int64_t batch_size = 0;  ///< per-rank batch size; 0 = disabled

  [[nodiscard]] bool enabled() const noexcept { return batch_size > 0; }
  /// "RES:FRAMES", as `vbucket fit-bs --reference` names a bucket.
  [[nodiscard]] std::string name() const { return resolution_name + ":" + std::to_string(frames); }
};

/// Every (resolution, frames) pair of `config` in its order (most pixels first, then most
/// frames first), disabled ones included.
inline std::vector<batch_bucket> batch_buckets(const bucket_config& config,
                                               latent_compression c = {}) {
  std::vector<batch_bucket> out;
  const auto& resolutions = config.resolutions();
  for (std::size_t r = 0; r < resolutions.size(); ++r)
    for (std::size_t k = 0; k < resolutions[r].frames.size(); ++k)
      out.push_back({r, k, resolutions[r].info.name, resolutions[r].frames[k].frames,
                     bucket_tokens(config, r, k, c), resolutions[r].frames[k].batch_size});
  return out;
}

/// The index in `buckets` of the pair (resolution name, frames), or buckets.size().
inline std::size_t find_batch_bucket(std::span<const batch_bucket> buckets,
                                     std::string_view resolution, std::int64_t frames) noexcept {
  for (std::size_t i = 0; i < buckets.size(); ++i)
    if (buckets[i].resolution_name == resolution && buckets[i].frames == frames) return i;
  return buckets.size();
}

/// The global batch of every bucket of `config` (by bucket id): per-rank batch × `dp`;
/// 0 for a disabled bucket.
inline std::vector<std::int64_t> global_batch_sizes(const bucket_config& config, std::int64_t dp) {
  detail::check_positive(dp, "data-parallel size");
  std::vector<std::int64_t> out(config.num_buckets(), 0);
  for (std::size_t id = 0; id < out.size(); ++id) {
    const std::int64_t bs = config.batch_size(static_cast<bucket_id>(id));
    if (bs > 0) out[id] = global_batch_size(bs, dp);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Micro-batching
// ---------------------------------------------------------------------------------------------

/// The number of micro-batches of at most `m` items that hold `n` items: ⌈n / m⌉.
constexpr std::int64_t micro_batch_count(std::int64_t n, std::int64_t m) {
  if (n < 0) detail::fail_negative("item count", n);
  detail::check_positive(m, "micro-batch size");
  return n / m + (n % m != 0 ? 1 : 0);
}

/// A batch seen as consecutive micro-batches of `size` items (the last may be shorter), each
/// a `std::span<T>` into the caller's storage. An item may span several elements
/// (`item_extent`, e.g. the C·H·W values of one frame). A random-access, sized view; it
/// borrows, so the storage must outlive it.
template <class T>
class micro_batch_view : public std::ranges::view_interface<micro_batch_view<T>> {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = std::span<T>;
    using difference_type = std::ptrdiff_t;
    using reference = std::span<T>;

    iterator() = default;

    [[nodiscard]] std::span<T> operator*() const noexcept {
      const std::size_t first = index_ * step_;
      const std::size_t rest = all_.size() - first;
      return all_.subspan(first, rest < step_ ? rest : step_);
    }
    [[nodiscard]] std::span<T> operator[](difference_type n) const noexcept { return *(*this + n); }

    iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    iterator operator++(int) noexcept {
      auto old = *this;
      ++index_;
      return old;
    }
    iterator& operator--() noexcept {
      --index_;
      return *this;
    }
    iterator operator--(int) noexcept {
      auto old = *this;
      --index_;
      return old;
    }
    iterator& operator+=(difference_type n) noexcept {
      index_ = static_cast<std::size_t>(static_cast<difference_type>(index_) + n);
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    [[nodiscard]] friend iterator operator+(iterator it, difference_type n) noexcept {
      return it += n;
    }
    [[nodiscard]] friend iterator operator+(difference_type n, iterator it) noexcept {
      return it += n;
    }
    [[nodiscard]] friend iterator operator-(iterator it, difference_type n) noexcept {
      return it -= n;
    }
    [[nodiscard]] friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }
    [[nodiscard]] friend bool operator==(const iterator& a, const iterator& b) noexcept {
      return a.index_ == b.index_;
    }
    [[nodiscard]] friend auto operator<=>(const iterator& a, const iterator& b) noexcept {
      return a.index_ <=> b.index_;
    }

   private:
    friend class micro_batch_view;
    iterator(std::span<T> all, std::size_t step, std::size_t index) noexcept
        : all_(all), step_(step), index_(index) {}

    std::span<T> all_;
    std::size_t step_ = 1;  // elements per micro-batch
    std::size_t index_ = 0;
  };

  micro_batch_view() = default;
  /// Micro-batches of `size` items of `item_extent` elements each. Throws `vbucket::error`
  /// when `size` or `item_extent` is 0 or `all` is not a whole number of items.
  micro_batch_view(std::span<T> all, std::size_t size, std::size_t item_extent = 1) : all_(all) {
    if (size == 0) throw error("micro-batch size must be at least 1");
    if (item_extent == 0) throw error("micro-batch item extent must be at least 1");
    if (all.size() % item_extent != 0)
      throw error("a batch of " + std::to_string(all.size()) +
                  " elements is not a whole number of items of " + std::to_string(item_extent) +
                  " elements");
    if (size > std::numeric_limits<std::size_t>::max() / item_extent)
      throw error("micro-batch size × item extent overflows");
    step_ = size * item_extent;
    count_ = all.size() / step_ + (all.size() % step_ != 0 ? 1 : 0);
  }

  [[nodiscard]] iterator begin() const noexcept { return {all_, step_, 0}; }
  [[nodiscard]] iterator end() const noexcept { return {all_, step_, count_}; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  std::span<T> all_;
  std::size_t step_ = 1;
  std::size_t count_ = 0;
};

}  // namespace vbucket

/// The view only holds a span, so its chunks outlive it.
template <class T>
inline constexpr bool std::ranges::enable_borrowed_range<vbucket::micro_batch_view<T>> = true;

namespace vbucket {

/// Splits a contiguous range of the caller's type into micro-batches of at most `size`
/// items (`item_extent` elements per item); see `micro_batch_view`. `size` larger than the
/// batch gives one micro-batch; an empty range gives none.
///
///     std::vector<clip> batch = ...;
///     for (std::span<clip> part : vbucket::micro_batches(batch, 4)) encode(part);
template <std::ranges::contiguous_range R>
  requires std::ranges::sized_range<R> && std::ranges::borrowed_range<R>
[[nodiscard]] auto micro_batches(R&& range, std::size_t size, std::size_t item_extent = 1) {
  using T = std::remove_reference_t<std::ranges::range_reference_t<R>>;
  return micro_batch_view<T>(std::span<T>(std::ranges::data(range), std::ranges::size(range)), size,
                             item_extent);
}

/// A micro-batch size and the number of micro-batches it takes.
struct micro_batch_plan {
  std::int64_t size = 0;
  std::int64_t count = 0;

  friend constexpr bool operator==(const micro_batch_plan&, const micro_batch_plan&) = default;
};

/// The micro-batch size for a batch of `batch` items that keeps `predict_memory(m)` (the
/// predicted peak memory of a micro-batch of m items, non-decreasing in m) within `budget`:
/// the fewest micro-batches possible, and with `balance` the smallest size that still needs
/// no more of them (9 items under a limit of 8 run as 5 + 4, not 8 + 1). Throws
/// `vbucket::error` when not even one item fits or a prediction is NaN.
template <class PredictMemory>
  requires std::invocable<PredictMemory&, std::int64_t> &&
      std::convertible_to < std::invoke_result_t<PredictMemory&, std::int64_t>,
double > micro_batch_plan choose_micro_batch(std::int64_t batch, double budget,
                                             PredictMemory&& predict_memory, bool balance = true) {
  detail::check_positive(batch, "batch size");
  if (std::isnan(budget)) throw error("micro-batch memory budget is NaN");
  auto fits = [&](std::int64_t m) {
    const double predicted = static_cast<double>(predict_memory(m));
    if (std::isnan(predicted))
      throw error("predicted memory of a micro-batch of " + std::to_string(m) + " is NaN");
    return predicted <= budget;
  };
  if (!fits(1))
    throw error("a micro-batch of 1 is predicted to need " +
                std::to_string(static_cast<double>(predict_memory(std::int64_t{1}))) +
                ", over the budget " + std::to_string(budget));
  std::int64_t lo = 1, hi = batch;  // largest m with fits(m) lies in [lo, hi]
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const std::int64_t count = micro_batch_count(batch, lo);
  const std::int64_t size = balance ? micro_batch_count(batch, count) : lo;
  return {size, count};
}

}  // namespace vbucket
