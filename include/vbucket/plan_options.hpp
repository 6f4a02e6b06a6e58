#pragma once
/// What an epoch plan depends on besides the samples and the config (`plan_options`: seed,
/// epoch, incomplete-batch policy, step balance), and the cost of a batch (`batch_cost`, by
/// default latent tokens × batch size). See epoch_plan.hpp for how a plan is made.

#include <concepts>     // std::convertible_to
#include <cstdint>      // std::uint8_t, std::uint32_t, std::uint64_t, std::int64_t
#include <optional>     // std::optional
#include <string_view>  // std::string_view

#include "bucket_config.hpp"

namespace vbucket {

/// What happens to a bucket's last, incomplete batch.
enum class incomplete_policy : std::uint8_t {
  pad,        ///< fill it by cycling through the bucket's own samples (counted as pads)
  drop,       ///< drop the leftover samples (counted)
  downgrade,  ///< move the leftover to the nearest smaller compatible bucket, then pad
};

/// "pad", "drop" or "downgrade".
constexpr std::string_view policy_name(incomplete_policy p) noexcept {
  switch (p) {
    case incomplete_policy::pad:
      return "pad";
    case incomplete_policy::drop:
      return "drop";
    case incomplete_policy::downgrade:
      return "downgrade";
  }
  return "?";
}

/// Parses "pad", "drop" or "downgrade"; nullopt otherwise.
constexpr std::optional<incomplete_policy> parse_policy(std::string_view s) noexcept {
  if (s == "pad") return incomplete_policy::pad;
  if (s == "drop") return incomplete_policy::drop;
  if (s == "downgrade") return incomplete_policy::downgrade;
  return std::nullopt;
}

/// Latent tokens of one sample of shape (T, H, W) for a video VAE that compresses time by 4
/// (keeping the first frame) and space by 16: (1 + (T − 1) / 4) · (H / 16) · (W / 16), with an
/// integer division for time and exact (fractional) spatial factors.
constexpr double latent_tokens(std::int64_t frames, std::int64_t height,
                               std::int64_t width) noexcept {
  const std::int64_t t = frames < 1 ? 1 : 1 + (frames - 1) / 4;
  return static_cast<double>(t) * (static_cast<double>(height) / 16.0) *
         (static_cast<double>(width) / 16.0);
}

/// The default cost of one batch: latent tokens of the bucket's target shape × batch size.
struct latent_tokens_cost {
  double operator()(const bucket_config& config, bucket_id b,
                    std::int64_t batch_size) const noexcept {
    const auto& r = config.ratio_of(b);
    return latent_tokens(config.frames_of(b).frames, r.height, r.width) *
           static_cast<double>(batch_size);
  }
};

/// A cost of one batch: a pure function of (config, bucket, batch size) to a finite number ≥ 0.
/// It is called once per bucket when a plan is made.
///
///     auto seconds = [](const vbucket::bucket_config& c, vbucket::bucket_id b, std::int64_t bs) {
///       return 0.01 * static_cast<double>(bs * c.frames_of(b).frames); };
template <class F>
concept batch_cost = requires(const F& f, const bucket_config& c, bucket_id b, std::int64_t n) {
  { f(c, b, n) } -> std::convertible_to<double>;
};

/// The step balance group `vbucket plan --balance` uses: a constant, so that the global order
/// never depends on the world size. 960 = 2^6 · 3 · 5 is a multiple of every world size that
/// is a multiple of 8 up to 64 with no prime factor above 5 (8, 16, 24, 32, 40, 48, 64) and of
/// most smaller ones (1–6, 10, 12, 15, 20, …), so those worlds get fully balanced steps.
inline constexpr std::uint32_t default_balance_group = 960;

/// What a plan depends on besides the groups and the config.
struct plan_options {
  std::uint64_t seed = 0;   ///< the run's seed
  std::uint64_t epoch = 0;  ///< the epoch (shuffles differ per epoch)
  incomplete_policy policy = incomplete_policy::pad;
  /// Step balance. 0: the global order is a plain shuffle of all batches. G > 0: batches are
  /// sorted by cost (ties in shuffled order), cut into chunks of G consecutive batches and
  /// the chunks put in shuffled order, the remainder (count mod G, the cheapest) last.
  /// The order depends on G, never on the world size W it is dealt to, so a resume under
  /// another W is exact as long as G stays (`plan_state` records G and `deal(world, state)`
  /// refuses another). What "balanced" means then: a step is W consecutive batches, and the
  /// batches of one chunk cost nearly the same. When W divides G (and the consumed count is a
  /// multiple of W, as it is between resumes), every step lies inside one chunk: fully
  /// balanced. Otherwise about (W − gcd(W, G)) / G of the steps straddle two chunks and mix
  /// their costs; the rest stay balanced; with W > G every step mixes ⌈W / G⌉ chunks. A
  /// larger G keeps more steps balanced but runs longer stretches of similar batches (about
  /// G / W steps from one cost band) and, when the epoch has fewer than a few G batches,
  /// leaves the order mostly sorted by cost. `default_balance_group` (960) suits worlds that
  /// divide it; otherwise use a multiple of every world size the run will use (e.g. W itself
  /// when it never changes), the same for the whole epoch.
  std::uint32_t balance_group = 0;
  /// Threads for the per-bucket shuffles (0: one per core); the plan does not depend on it.
  unsigned threads = 0;
};

}  // namespace vbucket
