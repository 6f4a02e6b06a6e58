#pragma once
/// The seed convention: how a run's (random mode, seed, epoch) become the random source that
/// assigns an epoch's samples to buckets, and the plan's 64-bit seed. `vbucket assign`, `plan`
/// and `stats` all go through here, so one (mode, seed, epoch) means one assignment everywhere.
///  - `rng_mode::numpy`: Open-Sora's draws. Epoch E of a run seeded S draws with NumPy seed
///    S + E (Open-Sora's `seed + epoch`), computed exactly for any non-negative S.
///  - `rng_mode::fast`: `fast_source(S, E)`. Its key is 64 bits, so a seed of 2^64 or more is
///    an error (folding it would silently give two seeds the same draws).
///
///     const vbucket::big_seed seed = vbucket::big_seed::parse("42");
///     auto ids = vbucket::assign_epoch(cfg, table, rule, vbucket::rng_mode::numpy, seed, epoch);

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::uint32_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_same_v
#include <vector>       // std::vector

#include "assign.hpp"
#include "bucket_config.hpp"
#include "compiled_rule.hpp"
#include "meta.hpp"
#include "rules.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/base/numpy_random.hpp"
#include "vbucket/base/random.hpp"  // rng_mode, to_string, parse_rng_mode
#include "vbucket/detail/compiled.hpp"

namespace vbucket {

/// The seed's value when it is below 2^64.
[[nodiscard]] inline std::optional<std::uint64_t> seed_u64(const big_seed& seed) noexcept {
  const auto w = seed.words();
  if (w.size() > 2) return std::nullopt;
  return w.size() == 2 ? std::uint64_t{w[1]} << 32 | w[0] : std::uint64_t{w[0]};
}

/// Throws `vbucket::error` when `mode` cannot use `seed` (fast mode and a seed >= 2^64).
inline void check_seed(rng_mode mode, const big_seed& seed) {
  if (mode == rng_mode::fast && !seed_u64(seed))
    throw error("seed " + seed.to_string() +
                " does not fit in 64 bits, which fast draws require (at most "
                "18446744073709551615; numpy draws take any non-negative integer)");
}

/// Open-Sora's NumPy seed for an epoch: seed + epoch, exactly (NumPy seeds are unbounded).
[[nodiscard]] VBUCKET_COMPILED_INLINE big_seed numpy_epoch_seed(const big_seed& seed,
                                                                std::uint64_t epoch);
#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE big_seed numpy_epoch_seed(const big_seed& seed, std::uint64_t epoch) {
  if (const auto s = seed_u64(seed); s && *s <= ~std::uint64_t{0} - epoch)
    return big_seed(*s + epoch);
  // Decimal addition: big_seed builds from decimal text, and this runs once per epoch.
  const std::string a = seed.to_string();
  const std::string b = std::to_string(epoch);
  std::string sum(a.size() + 1, '0');
  int carry = 0;
  for (std::size_t i = 0; i < sum.size(); ++i) {
    int d = carry;
    if (i < a.size()) d += a[a.size() - 1 - i] - '0';
    if (i < b.size()) d += b[b.size() - 1 - i] - '0';
    sum[sum.size() - 1 - i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  return big_seed::parse(sum);  // a leading zero parses as zero
}
#endif

/// The NumPy source of an epoch: Open-Sora's `seed + epoch`, with `num_bucket` its stride.
[[nodiscard]] inline numpy_source numpy_epoch_source(const big_seed& seed, std::uint64_t epoch,
                                                     std::uint64_t num_bucket) {
  return numpy_source(numpy_epoch_seed(seed, epoch), num_bucket);
}

/// A `batch_sampler` source family for Open-Sora's NumPy draws with a run seed of any size (the
/// sampler's own seed is 64 bits): epoch e draws from `numpy_epoch_source(seed, e, ·)`. Give the
/// sampler `.seed = plan_seed(seed)` for its shuffles and resume state.
///
///     vbucket::batch_sampler s(meta, config, rule, {.seed = vbucket::plan_seed(big)},
///                              vbucket::numpy_seed_family{big});
struct numpy_seed_family {
  big_seed seed;
  [[nodiscard]] numpy_source operator()(std::uint64_t /*plan seed*/, std::uint64_t epoch,
                                        std::size_t num_buckets) const {
    return numpy_epoch_source(seed, epoch, num_buckets);
  }
};

/// The fast source of an epoch, `fast_source(seed, epoch)`; throws `vbucket::error` for a seed
/// of 2^64 or more.
[[nodiscard]] inline fast_source fast_epoch_source(const big_seed& seed, std::uint64_t epoch) {
  check_seed(rng_mode::fast, seed);
  return fast_source(*seed_u64(seed), epoch);
}

/// The 64-bit seed of the epoch plan (`plan_options::seed`, the resume state) for a run seed:
/// the seed itself below 2^64; above, a mix of its 32-bit words (the plan's shuffles are
/// vbucket's own, keyed by 64 bits, whatever the assignment's mode).
[[nodiscard]] inline std::uint64_t plan_seed(const big_seed& seed) noexcept {
  if (const auto s = seed_u64(seed)) return *s;
  std::uint64_t h = detail::mix64(seed.words().size());
  for (const std::uint32_t w : seed.words()) h = detail::mix64(h + w + detail::golden_gamma);
  return h;
}

/// The bucket of every sample of `table` in the epoch `epoch` of a run seeded `seed`, with the
/// draws of `mode`. In fast mode the Open-Sora 2.0 rule runs as `compiled_v2_rule`, its one
/// draw per sample form, which gives the same buckets as the rule itself with `fast_source`.
/// Throws `vbucket::error` for a fast-mode seed of 2^64 or more.
template <class Rule>
  requires bucket_rule<Rule, fast_source> && bucket_rule<Rule, numpy_source>
[[nodiscard]] std::vector<bucket_id> assign_epoch(const bucket_config& config,
                                                  const meta_table& table, const Rule& rule,
                                                  rng_mode mode, const big_seed& seed,
                                                  std::uint64_t epoch, unsigned threads = 0) {
  if (mode == rng_mode::numpy)
    return assign_all(config, table, rule, numpy_epoch_source(seed, epoch, config.num_buckets()),
                      threads);
  const fast_source source = fast_epoch_source(seed, epoch);
  if constexpr (std::is_same_v<Rule, opensora_v2_rule>) {
    return assign_all(config, table, compiled_v2_rule(config, rule), source, threads);
  } else {
    return assign_all(config, table, rule, source, threads);
  }
}

}  // namespace vbucket

#if VBUCKET_EXTERN_TEMPLATES
namespace vbucket {
// Compiled once in the vbucket::compiled library (src/vbucket.cpp).
extern template std::vector<bucket_id> assign_epoch<opensora_v2_rule>(const bucket_config&,
                                                                      const meta_table&,
                                                                      const opensora_v2_rule&,
                                                                      rng_mode, const big_seed&,
                                                                      std::uint64_t, unsigned);
extern template std::vector<bucket_id> assign_epoch<opensora_v12_rule>(const bucket_config&,
                                                                       const meta_table&,
                                                                       const opensora_v12_rule&,
                                                                       rng_mode, const big_seed&,
                                                                       std::uint64_t, unsigned);
}  // namespace vbucket
#endif
