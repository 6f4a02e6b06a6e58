#pragma once
/// What an epoch plan depends on besides the samples and the config (`plan_options`: seed,
/// epoch, incomplete-batch policy, packed budget, step balance), the batching modes
/// (`batching_mode`), the run's defaults (`defaults`: the one place
/// the C++ sampler, the CLI and Python take them from), and the cost of a batch (`batch_cost`,
/// by default latent tokens × batch size). See epoch_plan.hpp for how a plan is made.

#include <concepts>     // std::convertible_to
#include <cstdint>      // std::uint8_t, std::uint32_t, std::uint64_t, std::int64_t
#include <optional>     // std::optional
#include <string>       // std::string, std::to_string (token_formula errors)
#include <string_view>  // std::string_view
#include <utility>      // std::pair

#include "vbucket/base/error.hpp"
#include "vbucket/base/random.hpp"  // rng_mode
#include "vbucket/bucket/bucket_config.hpp"

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

/// How batches are formed: one bucket and its batch size per batch, or packed to a budget. As a
/// type: `fixed_batching` (`epoch_plan`) and `packed_batching` (`packed_plan`).
enum class batching_mode : std::uint8_t {
  fixed,   ///< `make_epoch_plan`: per-bucket batch sizes
  packed,  ///< `make_packed_plan`: mixed shapes up to a cost budget
};

/// "fixed" or "packed".
constexpr std::string_view batching_name(batching_mode m) noexcept {
  return m == batching_mode::packed ? "packed" : "fixed";
}

/// Parses "fixed" or "packed"; nullopt otherwise.
constexpr std::optional<batching_mode> parse_batching(std::string_view s) noexcept {
  if (s == "fixed") return batching_mode::fixed;
  if (s == "packed") return batching_mode::packed;
  return std::nullopt;
}

/// The defaults of a run, defined once: the member initialisers of `sampler_options` and
/// `plan_options`, the CLI's flag defaults and (through the binding's `DEFAULTS`) every Python
/// keyword default take them from here. Open-Sora's draws (`fast` is opt-in), seed 0, epoch 0,
/// a bucket's last batch padded, one rank.
namespace defaults {
inline constexpr rng_mode rng = rng_mode::numpy;
inline constexpr std::uint64_t seed = 0;
inline constexpr std::uint64_t epoch = 0;
inline constexpr incomplete_policy policy = incomplete_policy::pad;
inline constexpr std::uint32_t world = 1;
}  // namespace defaults

/// The latent token formula of a video diffusion model: its VAE compresses time by
/// `compression_t` (keeping the first frame) and space by `compression_h` × `compression_w`,
/// and the model cuts the latent into patches of `patch_t` × `patch_h` × `patch_w`. The default
/// (4 × 8 × 8, patches 1 × 2 × 2) is Open-Sora 2.0's: (1 + (T − 1) / 4) · (H / 16) · (W / 16).
struct token_formula {
  std::int64_t compression_t = 4;
  std::int64_t compression_h = 8;
  std::int64_t compression_w = 8;
  std::int64_t patch_t = 1;
  std::int64_t patch_h = 2;
  std::int64_t patch_w = 2;

  /// Latent frames after patching: ⌈(1 + (T − 1) / compression_t) / patch_t⌉ (T < 1 counts 1).
  [[nodiscard]] constexpr std::int64_t frames(std::int64_t t) const noexcept {
    const std::int64_t latent = t < 1 ? 1 : 1 + (t - 1) / compression_t;
    return (latent + patch_t - 1) / patch_t;
  }
  /// Pixels per token along H and along W: compression × patch.
  [[nodiscard]] constexpr std::int64_t cell_h() const noexcept { return compression_h * patch_h; }
  [[nodiscard]] constexpr std::int64_t cell_w() const noexcept { return compression_w * patch_w; }

  /// Throws `vbucket::error` naming the factor that is not an integer in [1, 2^16].
  void validate() const {
    const std::pair<const char*, std::int64_t> all[] = {{"compression_t", compression_t},
                                                        {"compression_h", compression_h},
                                                        {"compression_w", compression_w},
                                                        {"patch_t", patch_t},
                                                        {"patch_h", patch_h},
                                                        {"patch_w", patch_w}};
    for (const auto& [name, v] : all)
      if (v < 1 || v > 65536)
        throw error(std::string("token formula: ") + name + " must be an integer from 1 to " +
                    "65536, got " + std::to_string(v));
  }
  friend constexpr bool operator==(const token_formula&, const token_formula&) = default;
};

/// Latent tokens of one sample of shape (T, H, W) under `f` (by default a video VAE that
/// compresses time by 4, keeping the first frame, and space by 16 with its patches):
/// `f.frames(T)` · (H / cell_h) · (W / cell_w), with exact (fractional) spatial factors.
constexpr double latent_tokens(std::int64_t frames, std::int64_t height, std::int64_t width,
                               const token_formula& f = {}) noexcept {
  return static_cast<double>(f.frames(frames)) *
         (static_cast<double>(height) / static_cast<double>(f.cell_h())) *
         (static_cast<double>(width) / static_cast<double>(f.cell_w()));
}

/// The default cost of one batch: latent tokens of the bucket's target shape × batch size.
struct latent_tokens_cost {
  token_formula formula{};  ///< the model's token formula
  double operator()(const bucket_config& config, bucket_id b,
                    std::int64_t batch_size) const noexcept {
    const auto& r = config.ratio_of(b);
    return latent_tokens(config.frames_of(b).frames, r.height, r.width, formula) *
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

/// What a plan, fixed (`make_epoch_plan`) or packed (`make_packed_plan`), depends on besides
/// the groups and the config. The fields of one batching only are grouped and say so; the other
/// planner ignores them.
struct plan_options {
  std::uint64_t seed = defaults::seed;    ///< the run's seed
  std::uint64_t epoch = defaults::epoch;  ///< the epoch (shuffles differ per epoch)
  /// Fixed batching: what happens to a bucket's last, incomplete batch.
  incomplete_policy policy = defaults::policy;
  // --- packed batching only ---
  /// Packed: B, the most cost one batch (one rank's step) may hold, in the cost's unit (latent
  /// tokens by default). A finite number > 0.
  double token_budget = 0.0;
  /// Packed: a sample costing more than B alone: false, an error naming it; true, dropped and
  /// counted.
  bool drop_oversized = false;
  // --- both ---
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

/// The options of a packed plan: `plan_options` (its `token_budget` and `drop_oversized`).
using packed_options = plan_options;

}  // namespace vbucket
