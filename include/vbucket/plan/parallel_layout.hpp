#pragma once
/// A parallel layout per bucket: for every (resolution, frames) pair of a config, the
/// sequence-parallel degree `sp` of the group of ranks that runs one of its batches, the batch a
/// group runs per step, and the micro-batch (the most samples one micro-step holds) with the
/// accumulation micro-steps that cover the batch. Chosen from `fit-bs`'s memory model (the
/// micro-batch fits the budget at its sp) and a step-time model (compute of the bucket's tokens
/// split over sp ranks, plus a communication term that grows with sp), or given by hand and
/// checked. `group_plan.hpp` deals an epoch over groups of these degrees.
///
/// Models (all per rank; `memory_model` is run_memory.hpp's, `fit-bs` fits both from a profile):
///     memory(bs, sp) = m.fixed + bs · m.per_sample(tokens) / sp
///     time(bs, sp)   = t.fixed + bs · (t.per_sample(tokens) / sp + κ · tokens · (sp − 1) / sp)
///                      + micro-steps · λ · (sp − 1)
/// (κ: seconds per token of sequence-parallel traffic, ring attention's K/V passes or Ulysses'
/// all-to-alls; λ: latency per micro-step per extra rank).
///
/// How a layout is chosen (`choose_layouts`): the target step time T is given, or it is the
/// longest of every pair's fastest step at a memory-filling micro-batch over the allowed degrees
/// (so every pair can reach it). For each pair and each allowed sp whose micro-batch of 1 fits
/// memory (and whose sequence divides by sp, or is padded to a multiple: `sequence_remainder`),
/// the largest batch B whose predicted time is within T (at most `max_accumulation`
/// micro-steps); a group holds its sp ranks for the whole step, so the pair takes the sp with
/// the most samples per rank and step, B / sp (ties: the smaller sp), among the degrees whose
/// one-sample step is within T, or else the sp with the fastest one-sample step.
///
///     vbucket::layout_options o{.memory = mem, .memory_limit = 130.0, .time = {.compute = t}};
///     vbucket::layout_table layouts = vbucket::choose_layouts(config, o);
///     auto plan = vbucket::make_epoch_plan(ids, layouts.config(), {.seed = s, .epoch = e});

#include <algorithm>     // std::max, std::min, std::find, std::sort, std::unique
#include <charconv>      // std::from_chars (an option's text)
#include <cmath>         // std::isfinite
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t
#include <limits>        // std::numeric_limits
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "run_memory.hpp"  // memory_model, pair_batch_sizes, pair_name, with_batch_sizes
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch_size.hpp"  // token_count, latent_compression, micro_batch_count
#include "vbucket/bucket/bucket_config.hpp"

namespace vbucket {

/// What happens when a bucket's token sequence does not divide by its sp.
enum class sequence_remainder {
  refuse,  ///< a hand layout is an error; `choose_layouts` does not consider that sp
  pad,     ///< the sequence is padded to a multiple of sp (its cost counts the padding)
};

/// One (resolution, frames) pair's layout: a group of `sp` ranks runs `batch_size` samples a
/// step in `accumulation()` micro-steps of at most `micro_batch`.
struct bucket_layout {
  std::int64_t sp = 1;
  std::int64_t batch_size = 0;   ///< samples a group runs per step; 0: the pair is disabled
  std::int64_t micro_batch = 0;  ///< the most samples of one micro-step
  std::int64_t tokens = 0;       ///< tokens per sample in the cost (padded to a multiple of sp)
  double seconds = 0.0;          ///< predicted step time of a group

  [[nodiscard]] bool enabled() const noexcept { return batch_size > 0; }
  /// Micro-steps per step: ⌈batch_size / micro_batch⌉ (0 when disabled).
  [[nodiscard]] std::int64_t accumulation() const {
    return enabled() ? micro_batch_count(batch_size, micro_batch) : 0;
  }
  /// The samples of micro-step k (k < accumulation()): as even as can be, the first
  /// batch_size mod accumulation() one larger. Its offset in the batch is `micro_offset(k)`.
  [[nodiscard]] std::int64_t micro_size(std::int64_t k) const {
    const std::int64_t a = accumulation();
    return batch_size / a + (k < batch_size % a ? 1 : 0);
  }
  [[nodiscard]] std::int64_t micro_offset(std::int64_t k) const {
    const std::int64_t a = accumulation();
    return k * (batch_size / a) + std::min(k, batch_size % a);
  }
  friend constexpr bool operator==(const bucket_layout&, const bucket_layout&) = default;
};

/// Per-rank step time of a group of sp ranks (see the top of this header). `compute` is the
/// time model `fit-bs` fits (one rank, sp = 1).
struct step_time_model {
  memory_model compute{};
  double comm_per_token = 0.0;       ///< κ, seconds per token × (sp − 1) / sp
  double comm_per_micro_step = 0.0;  ///< λ, seconds per micro-step per extra rank

  [[nodiscard]] double predict(std::int64_t tokens, std::int64_t batch_size, std::int64_t sp,
                               std::int64_t micro_steps) const noexcept {
    const auto s = static_cast<double>(sp);
    const double share = (s - 1.0) / s;
    const double per_sample =
        compute.per_sample(tokens) / s + comm_per_token * static_cast<double>(tokens) * share;
    return compute.fixed + static_cast<double>(batch_size) * per_sample +
           static_cast<double>(micro_steps) * comm_per_micro_step * (s - 1.0);
  }
};

/// What `choose_layouts` and `check_layouts` work from.
struct layout_options {
  memory_model memory{};  ///< per-rank peak memory at sp = 1 (fit-bs's memory model)
  double memory_limit = std::numeric_limits<double>::infinity();  ///< in memory's unit
  /// When > 0: the config's batch sizes fill memory at this sp (as Open-Sora tunes them), so a
  /// pair's micro-batch at sp is at most ⌊batch size · sp / this⌋ (activations per rank grow
  /// as batch / sp); with the memory model too, both bound it.
  std::int64_t config_fills_memory_at_sp = 0;
  step_time_model time{};
  /// The allowed degrees: each divides the next larger (1, 2, 4, 8, …).
  std::vector<std::int64_t> sp_sizes{1, 2, 4, 8};
  double target_seconds = 0.0;  ///< 0: chosen (see the top of this header)
  std::int64_t max_accumulation = 16;
  sequence_remainder remainder = sequence_remainder::refuse;
  latent_compression compression{};
};

/// A layout for every (resolution, frames) pair of a config, in `pair_batch_sizes` order, and
/// the config whose batch sizes are the groups' batches (what the epoch is planned with).
class layout_table {
 public:
  layout_table() = default;
  layout_table(const bucket_config& config, std::vector<bucket_layout> pairs, double target)
      : pairs_(std::move(pairs)), target_(target) {
    std::vector<std::int64_t> sizes;
    for (const bucket_layout& l : pairs_) sizes.push_back(l.batch_size);
    config_ = with_batch_sizes(config, sizes);
    std::size_t first = 0;
    for (const resolution_entry& r : config_.resolutions()) {
      first_pair_.push_back(first);
      first += r.frames.size();
    }
  }

  /// The config with every pair's batch size set to its group batch.
  [[nodiscard]] const bucket_config& config() const noexcept { return config_; }
  [[nodiscard]] std::span<const bucket_layout> pairs() const noexcept { return pairs_; }
  /// The layout of bucket `b`'s (resolution, frames) pair.
  [[nodiscard]] const bucket_layout& of(bucket_id b) const noexcept {
    const bucket_key k = config_.key(b);
    return pairs_[first_pair_[static_cast<std::size_t>(k.resolution)] +
                  static_cast<std::size_t>(k.frames_index)];
  }
  /// The step time every group aims at.
  [[nodiscard]] double target_seconds() const noexcept { return target_; }

 private:
  bucket_config config_;
  std::vector<bucket_layout> pairs_;
  std::vector<std::size_t> first_pair_;  // per resolution: its first pair's index
  double target_ = 0.0;
};

namespace detail {

/// Throws unless `sizes` is a non-empty chain of positive degrees, each dividing the next.
inline std::vector<std::int64_t> sorted_sp_sizes(std::span<const std::int64_t> sizes) {
  std::vector<std::int64_t> s(sizes.begin(), sizes.end());
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  if (s.empty()) throw error("parallel layout: no sequence-parallel size is allowed");
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 1)
      throw error("parallel layout: sequence-parallel size " + std::to_string(s[i]) +
                  " is not a positive integer");
    if (i > 0 && s[i] % s[i - 1] != 0)
      throw error("parallel layout: sequence-parallel sizes " + std::to_string(s[i - 1]) + " and " +
                  std::to_string(s[i]) +
                  " do not divide one another (each size must divide the next: 1, 2, 4, 8)");
  }
  return s;
}

/// The tokens of pair (r, k) in the cost at `sp`: the largest over its aspect entries, padded
/// to a multiple of sp; nullopt when an entry's sequence does not divide by sp and the
/// remainder is refused (`bad` then names it).
inline std::optional<std::int64_t> pair_tokens(const bucket_config& config, std::size_t r,
                                               std::size_t k, std::int64_t sp,
                                               const layout_options& o, std::string* bad) {
  const resolution_entry& res = config.resolutions()[r];
  std::int64_t most = 0;
  for (std::size_t a = 0; a < res.info.table.size(); ++a) {
    const aspect_entry& e = res.info.table[a];
    const std::int64_t t = token_count(res.frames[k].frames, e.height, e.width, o.compression);
    if (t % sp != 0) {
      if (o.remainder == sequence_remainder::refuse) {
        if (bad != nullptr)
          *bad = "aspect \"" + e.key + "\" has " + std::to_string(t) +
                 " tokens, which do not divide by sp " + std::to_string(sp);
        return std::nullopt;
      }
      most = std::max(most, (t / sp + 1) * sp);
    } else {
      most = std::max(most, t);
    }
  }
  return most;
}

/// The most samples pair (r, k) may hold at sp by `config_fills_memory_at_sp` (or `cap`).
inline std::int64_t config_cap(const bucket_config& config, std::size_t r, std::size_t k,
                               std::int64_t sp, const layout_options& o, std::int64_t cap) {
  if (o.config_fills_memory_at_sp <= 0) return cap;
  const std::int64_t bs = config.resolutions()[r].frames[k].batch_size;
  return std::min(cap, bs * sp / o.config_fills_memory_at_sp);
}

/// The largest micro-batch whose memory at sp is within the limit (at most `cap`), 0 if none.
inline std::int64_t largest_micro_batch(const layout_options& o, std::int64_t tokens,
                                        std::int64_t sp, std::int64_t cap) {
  if (cap < 1) return 0;
  const auto fits = [&](std::int64_t bs) {
    return o.memory.fixed +
               static_cast<double>(bs) * o.memory.per_sample(tokens) / static_cast<double>(sp) <=
           o.memory_limit;
  };
  if (!fits(1)) return 0;
  const double per = o.memory.per_sample(tokens) / static_cast<double>(sp);
  std::int64_t b = cap;
  if (per > 0.0) {
    const double room = (o.memory_limit - o.memory.fixed) / per;
    if (room < static_cast<double>(cap))
      b = std::max<std::int64_t>(1, static_cast<std::int64_t>(room));
  }
  while (b > 1 && !fits(b)) --b;  // floating-point guard: the predicate decides
  while (b < cap && fits(b + 1)) ++b;
  return b;
}

/// Throws naming pair `name` when the time model predicts a negative time per sample at
/// `tokens` and sp (a fit that is no use for this pair, e.g. a negative quadratic term; an
/// all-zero model, no time model, is allowed).
inline void check_per_sample(const layout_options& o, std::int64_t tokens, std::int64_t sp,
                             const std::string& name) {
  const double per = o.time.predict(tokens, 1, sp, 0) - o.time.compute.fixed;
  if (!(per >= 0.0))
    throw error("parallel layout: " + name + ": the time model predicts " + std::to_string(per) +
                " s per sample at " + std::to_string(tokens) + " tokens and sp " +
                std::to_string(sp) + " (it must not fall as the batch grows)");
}

/// The layout of `batch` samples at sp with micro-batches of at most `micro`.
inline bucket_layout layout_at(const layout_options& o, std::int64_t tokens, std::int64_t sp,
                               std::int64_t micro, std::int64_t batch) {
  bucket_layout l{sp, batch, std::min(micro, batch), tokens, 0.0};
  l.seconds = o.time.predict(tokens, batch, sp, l.accumulation());
  return l;
}

inline void check_options(const layout_options& o) {
  const auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(o.memory.fixed) || !finite(o.memory.linear) || !finite(o.memory.quadratic) ||
      !finite(o.time.compute.fixed) || !finite(o.time.compute.linear) ||
      !finite(o.time.compute.quadratic) || !finite(o.time.comm_per_token) ||
      !finite(o.time.comm_per_micro_step))
    throw error("parallel layout: the memory and time models' coefficients must be finite");
  if (std::isnan(o.memory_limit) || !(o.memory_limit > 0.0))
    throw error("parallel layout: the memory limit must be a positive number");
  if (!finite(o.target_seconds) || o.target_seconds < 0.0)
    throw error("parallel layout: the target step time must be a finite number >= 0");
  if (o.max_accumulation < 1)
    throw error("parallel layout: max_accumulation must be at least 1, got " +
                std::to_string(o.max_accumulation));
}

}  // namespace detail

/// Chooses every enabled pair's layout (see the top of this header); disabled pairs stay
/// disabled. Without a memory limit (and `config_fills_memory_at_sp`), the config's batch sizes
/// are taken to fill memory at sp 1. Throws `vbucket::error` naming the pair when no allowed sp
/// fits even one sample in memory (or divides its sequence, when the remainder is refused), and on
/// bad options.
inline layout_table choose_layouts(const bucket_config& config, const layout_options& given) {
  detail::check_options(given);
  // Without a memory limit nothing bounds a micro-batch: the config's batch sizes are taken to
  // fill memory at sp 1 (Open-Sora tunes them so).
  layout_options o = given;
  if (!std::isfinite(o.memory_limit) && o.config_fills_memory_at_sp <= 0)
    o.config_fills_memory_at_sp = 1;
  const std::vector<std::int64_t> sps = detail::sorted_sp_sizes(o.sp_sizes);
  const auto& res = config.resolutions();
  const std::int64_t cap = bucket_config::max_batch;
  // Each pair's options: (sp, tokens, memory-filling micro-batch).
  struct option {
    std::int64_t sp, tokens, micro;
  };
  std::vector<std::vector<option>> options;
  double target = o.target_seconds;
  double longest_fastest = 0.0;
  std::size_t pair = 0;
  for (std::size_t r = 0; r < res.size(); ++r)
    for (std::size_t k = 0; k < res[r].frames.size(); ++k, ++pair) {
      options.emplace_back();
      if (res[r].frames[k].batch_size == 0) continue;
      std::string why = "no allowed sequence-parallel size fits one sample in memory";
      double fastest = std::numeric_limits<double>::infinity();
      for (const std::int64_t sp : sps) {
        std::string bad;
        const auto tokens = detail::pair_tokens(config, r, k, sp, o, &bad);
        if (!tokens) {
          why = bad;
          continue;
        }
        const std::int64_t micro = detail::largest_micro_batch(
            o, *tokens, sp, detail::config_cap(config, r, k, sp, o, cap));
        if (micro == 0) continue;
        detail::check_per_sample(o, *tokens, sp, pair_name(config, pair));
        options.back().push_back({sp, *tokens, micro});
        fastest = std::min(fastest, o.time.predict(*tokens, micro, sp, 1));
      }
      if (options.back().empty())
        throw error("parallel layout: " + pair_name(config, pair) + ": " + why);
      longest_fastest = std::max(longest_fastest, fastest);
    }
  if (target == 0.0) target = longest_fastest;

  std::vector<bucket_layout> out(options.size());
  for (std::size_t p = 0; p < options.size(); ++p) {
    bool have_within = false;
    double best_cost = std::numeric_limits<double>::infinity();
    for (const option& c : options[p]) {
      const auto time_of = [&](std::int64_t b) {
        return detail::layout_at(o, c.tokens, c.sp, c.micro, b);
      };
      const bool within = time_of(1).seconds <= target;
      bucket_layout l = time_of(1);
      if (within) {  // the largest batch within the target: time grows with the batch, so
                     // a binary search (a time model flat in the batch gives the most)
        const std::int64_t most =
            c.micro > cap / o.max_accumulation ? cap : c.micro * o.max_accumulation;
        std::int64_t lo = 1, hi = most;  // time_of(lo) is within; find the last within
        while (lo < hi) {
          const std::int64_t mid = lo + (hi - lo + 1) / 2;
          if (time_of(mid).seconds <= target) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        l = time_of(lo);
      }
      // A group holds its ranks for the whole step, so within the target the measure is samples
      // per rank per step, B / sp (the most); outside it, the step itself (the shortest).
      const double cost =
          within ? -static_cast<double>(l.batch_size) / static_cast<double>(c.sp) : l.seconds;
      // Degrees within the target beat those that are not; ties keep the smaller sp.
      if ((within && !have_within) || (within == have_within && cost < best_cost)) {
        have_within = have_within || within;
        best_cost = cost;
        out[p] = l;
      }
    }
  }
  return layout_table(config, std::move(out), target);
}

/// Checks layouts given by hand (one per pair, `pair_batch_sizes` order; a disabled pair must
/// have batch size 0) and fills in their tokens and predicted seconds. Throws `vbucket::error`
/// naming the pair when the count differs, an sp is not allowed, the sequence does not divide
/// by sp and the remainder is refused, the micro-batch is not in [1, batch] or does not fit the
/// memory limit at its sp, or accumulation exceeds `max_accumulation`.
inline layout_table check_layouts(const bucket_config& config, std::vector<bucket_layout> pairs,
                                  const layout_options& o) {
  detail::check_options(o);
  const std::vector<std::int64_t> sps = detail::sorted_sp_sizes(o.sp_sizes);
  const auto& res = config.resolutions();
  const std::size_t expected = pair_batch_sizes(config).size();
  if (pairs.size() != expected)
    throw error("parallel layout: " + std::to_string(pairs.size()) +
                " layouts given but the config has " + std::to_string(expected) +
                " (resolution, frames) pairs");
  double longest = 0.0;
  std::size_t p = 0;
  for (std::size_t r = 0; r < res.size(); ++r)
    for (std::size_t k = 0; k < res[r].frames.size(); ++k, ++p) {
      bucket_layout& l = pairs[p];
      const std::string at = "parallel layout: " + pair_name(config, p);
      if (res[r].frames[k].batch_size == 0) {
        if (l.batch_size != 0) throw error(at + " is disabled; its batch size must be 0");
        l = bucket_layout{};
        continue;
      }
      if (l.batch_size < 1) throw error(at + ": batch size must be at least 1");
      if (std::find(sps.begin(), sps.end(), l.sp) == sps.end())
        throw error(at + ": sp " + std::to_string(l.sp) + " is not an allowed size");
      if (l.micro_batch < 1 || l.micro_batch > l.batch_size)
        throw error(at + ": micro-batch " + std::to_string(l.micro_batch) +
                    " is not in [1, batch size " + std::to_string(l.batch_size) + "]");
      std::string bad;
      const auto tokens = detail::pair_tokens(config, r, k, l.sp, o, &bad);
      if (!tokens) throw error(at + ": " + bad + " (pad it, or choose another sp)");
      detail::check_per_sample(o, *tokens, l.sp, pair_name(config, p));
      const std::int64_t by_config = detail::config_cap(config, r, k, l.sp, o, l.micro_batch);
      if (by_config < l.micro_batch)
        throw error(at + ": micro-batch " + std::to_string(l.micro_batch) + " at sp " +
                    std::to_string(l.sp) + " is more than the " + std::to_string(by_config) +
                    " that the config's batch size " + std::to_string(res[r].frames[k].batch_size) +
                    " at sp " + std::to_string(o.config_fills_memory_at_sp) + " fills");
      if (detail::largest_micro_batch(o, *tokens, l.sp, l.micro_batch) < l.micro_batch)
        throw error(at + ": micro-batch " + std::to_string(l.micro_batch) + " at sp " +
                    std::to_string(l.sp) + " needs " +
                    std::to_string(o.memory.fixed + static_cast<double>(l.micro_batch) *
                                                        o.memory.per_sample(*tokens) /
                                                        static_cast<double>(l.sp)) +
                    ", over the memory limit " + std::to_string(o.memory_limit));
      l = detail::layout_at(o, *tokens, l.sp, l.micro_batch, l.batch_size);
      if (l.accumulation() > o.max_accumulation)
        throw error(at + ": " + std::to_string(l.accumulation()) +
                    " micro-steps exceed max_accumulation " + std::to_string(o.max_accumulation));
      longest = std::max(longest, l.seconds);
    }
  return layout_table(config, std::move(pairs),
                      o.target_seconds > 0.0 ? o.target_seconds : longest);
}

/// One sp for every pair (Open-Sora's `sp_size`): each pair runs its config batch size at `sp`
/// in micro-batches of at most `micro_batch` (0: the whole batch at once); for comparisons.
inline layout_table uniform_layouts(const bucket_config& config, std::int64_t sp,
                                    const layout_options& o, std::int64_t micro_batch = 0) {
  std::vector<bucket_layout> pairs;
  for (const std::int64_t bs : pair_batch_sizes(config))
    pairs.push_back(
        {sp, bs, bs == 0 ? 0 : (micro_batch > 0 ? std::min(micro_batch, bs) : bs), 0, 0.0});
  layout_options u = o;
  u.sp_sizes = {sp};
  u.memory_limit = std::numeric_limits<double>::infinity();  // the config was tuned to fit
  u.config_fills_memory_at_sp = 0;
  u.max_accumulation = std::numeric_limits<std::int64_t>::max();
  return check_layouts(config, std::move(pairs), u);
}

/// One option of `layout_options`, by name: the one table that `vbucket layout`'s flags (the
/// name with '-' for '_'), its help, and Python's `GroupPlan` keywords are made from; every
/// reader sets an option from text through `set_layout_option`.
struct layout_field {
  std::string_view name;
  std::string_view value_name;
  std::string_view help;
};

inline constexpr layout_field layout_fields[] = {
    {"memory", "M0,M1,M2",
     "per-rank peak memory at sp 1: M0 + micro·(M1·tokens + M2·tokens²) (fit-bs's model)"},
    {"memory_limit", "GIB", "the memory a micro-batch must fit, per rank (default: none)"},
    {"config_fills_memory_at_sp", "SP",
     "the config's batch sizes fill memory at this sp (a micro-batch at sp holds at most "
     "batch·sp/SP)"},
    {"time", "T0,T1,T2", "step time of one rank at sp 1: T0 + bs·(T1·tokens + T2·tokens²)"},
    {"comm_per_token", "S", "seconds per token of sequence-parallel traffic, × (sp−1)/sp"},
    {"comm_per_micro_step", "S", "seconds per micro-step per extra rank of a group"},
    {"sp_sizes", "1,2,4,8", "the allowed sequence-parallel sizes, each dividing the next"},
    {"target_seconds", "S", "the step time every group aims at (default: chosen)"},
    {"max_accumulation", "N", "the most micro-steps of a step (16)"},
    {"remainder", "refuse|pad", "a sequence that does not divide by sp: refused or padded"},
};

namespace detail {
/// `text` as a finite number, or an error naming option `name`.
inline double layout_number(std::string_view name, std::string_view text) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(v))
    throw error("layout option " + std::string(name) + ": expected a number, got \"" +
                std::string(text) + "\"");
  return v;
}
/// `text` as comma-separated numbers.
inline std::vector<double> layout_numbers(std::string_view name, std::string_view text) {
  std::vector<double> out;
  for (std::size_t i = 0; i <= text.size();) {
    std::size_t comma = text.find(',', i);
    if (comma == std::string_view::npos) comma = text.size();
    out.push_back(layout_number(name, text.substr(i, comma - i)));
    i = comma + 1;
  }
  return out;
}
/// `text` as an integer in [1, 2^31).
inline std::int64_t layout_count(std::string_view name, std::string_view text) {
  const double v = layout_number(name, text);
  if (v < 1.0 || v >= 2147483648.0 || v != static_cast<double>(static_cast<std::int64_t>(v)))
    throw error("layout option " + std::string(name) + ": expected a positive integer, got \"" +
                std::string(text) + "\"");
  return static_cast<std::int64_t>(v);
}
}  // namespace detail

/// Sets option `name` of `o` from text (models as "A,B,C", sp_sizes as "1,2,4", remainder as
/// refuse or pad). Throws `vbucket::error` naming the option for an unknown name or a bad
/// value; `choose_layouts` checks the combination.
inline void set_layout_option(layout_options& o, std::string_view name, std::string_view text) {
  const auto model = [&] {
    const std::vector<double> v = detail::layout_numbers(name, text);
    if (v.size() != 3)
      throw error("layout option " + std::string(name) + ": expected three numbers A,B,C, got \"" +
                  std::string(text) + "\"");
    return memory_model{v[0], v[1], v[2]};
  };
  if (name == "memory") {
    o.memory = model();
  } else if (name == "memory_limit") {
    o.memory_limit = detail::layout_number(name, text);
  } else if (name == "config_fills_memory_at_sp") {
    o.config_fills_memory_at_sp = detail::layout_count(name, text);
  } else if (name == "time") {
    o.time.compute = model();
  } else if (name == "comm_per_token") {
    o.time.comm_per_token = detail::layout_number(name, text);
  } else if (name == "comm_per_micro_step") {
    o.time.comm_per_micro_step = detail::layout_number(name, text);
  } else if (name == "sp_sizes") {
    o.sp_sizes.clear();
    std::size_t i = 0;
    for (std::size_t comma = 0; i <= text.size(); i = comma + 1) {
      comma = text.find(',', i);
      if (comma == std::string_view::npos) comma = text.size();
      o.sp_sizes.push_back(detail::layout_count(name, text.substr(i, comma - i)));
    }
  } else if (name == "target_seconds") {
    o.target_seconds = detail::layout_number(name, text);
  } else if (name == "max_accumulation") {
    o.max_accumulation = detail::layout_count(name, text);
  } else if (name == "remainder") {
    if (text == "refuse") {
      o.remainder = sequence_remainder::refuse;
    } else if (text == "pad") {
      o.remainder = sequence_remainder::pad;
    } else {
      throw error("layout option remainder: \"" + std::string(text) + "\" is not refuse or pad");
    }
  } else {
    throw error("layout option \"" + std::string(name) + "\" is unknown");
  }
}

}  // namespace vbucket
