#pragma once
/// Per-bucket batch sizes of a config as one list (`pair_batch_sizes`, `with_batch_sizes`: the
/// unit that carries a batch size is a (resolution, frames) pair) and batch sizes derived from a
/// fitted memory model for a memory budget (`batch_sizes_for_memory`), so a config tuned on one
/// GPU runs on another. Standard library only: the model's coefficients come from `fit-bs`
/// (`vbucket::eigen::fit_cost_model`, adapters/eigen), whose model this is:
///     memory(bs) = fixed + bs · (linear · tokens + quadratic · tokens²)
///
///     vbucket::memory_model m{.fixed = 30.0, .linear = 2e-4, .quadratic = 1e-9};  // GiB
///     vbucket::bucket_config on_80gb = vbucket::fit_to_memory(config, m, 78.0);

#include <cmath>        // std::floor, std::isfinite
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <optional>     // std::optional, std::nullopt
#include <span>         // std::span
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch_size.hpp"  // bucket_tokens, latent_compression
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/parse_number.hpp"  // shortest_text

namespace vbucket {

/// `fit-bs`'s memory model: per-rank peak memory of a step on `tokens`-token samples at batch
/// size bs is fixed + bs · (linear · tokens + quadratic · tokens²), in the unit of the budget.
struct memory_model {
  double fixed = 0.0;
  double linear = 0.0;
  double quadratic = 0.0;

  [[nodiscard]] constexpr double per_sample(std::int64_t tokens) const noexcept {
    const auto t = static_cast<double>(tokens);
    return linear * t + quadratic * t * t;
  }
  [[nodiscard]] constexpr double predict(std::int64_t tokens,
                                         std::int64_t batch_size) const noexcept {
    return fixed + static_cast<double>(batch_size) * per_sample(tokens);
  }
  /// Why this model cannot size batches — a coefficient that is not a finite number ≥ 0, or
  /// samples that cost nothing (linear and quadratic both 0: every batch size would fit) —
  /// or empty.
  [[nodiscard]] std::string problem() const {
    if (!std::isfinite(fixed) || !std::isfinite(linear) || !std::isfinite(quadratic) ||
        fixed < 0.0 || linear < 0.0 || quadratic < 0.0)
      return "the coefficients F,L,Q must be finite numbers >= 0";
    if (linear == 0.0 && quadratic == 0.0)
      return "L and Q are both 0: a sample would cost no memory (every batch size fits)";
    return {};
  }
};

/// The batch size of every (resolution, frames) pair of `config`, resolutions in the config's
/// order, frames keys from most to fewest (0: disabled).
[[nodiscard]] inline std::vector<std::int64_t> pair_batch_sizes(const bucket_config& config) {
  std::vector<std::int64_t> out;
  for (const resolution_entry& r : config.resolutions())
    for (const frames_entry& f : r.frames) out.push_back(f.batch_size);
  return out;
}

/// The name of pair `i` (in `pair_batch_sizes` order) as configs write it: "768px -> 129".
[[nodiscard]] inline std::string pair_name(const bucket_config& config, std::size_t i) {
  for (const resolution_entry& r : config.resolutions()) {
    if (i < r.frames.size()) return r.info.name + " -> " + std::to_string(r.frames[i].frames);
    i -= r.frames.size();
  }
  return "pair " + std::to_string(i);
}

namespace detail {
/// Resolves a config's resolutions to the tables it was built with.
struct config_resolutions {
  const bucket_config* config;
  [[nodiscard]] resolution_info resolve(std::string_view name) const {
    for (const resolution_entry& r : config->resolutions())
      if (r.info.name == name) return r.info;
    throw error("resolution \"" + std::string(name) + "\" is not in the config");
  }
};
}  // namespace detail

/// `config` with the batch sizes `sizes` (one per pair, `pair_batch_sizes` order): the same
/// buckets, ids and probabilities. A disabled pair must stay 0 and an enabled one get ≥ 1.
/// Throws `vbucket::error` naming the pair otherwise, or when the count differs.
[[nodiscard]] inline bucket_config with_batch_sizes(const bucket_config& config,
                                                    std::span<const std::int64_t> sizes) {
  std::vector<bucket_spec> specs;
  std::size_t i = 0;
  for (const resolution_entry& r : config.resolutions())
    for (const frames_entry& f : r.frames) {
      if (i >= sizes.size()) break;
      const std::int64_t bs = sizes[i];
      if ((f.batch_size == 0) != (bs == 0) || bs < 0)
        throw error("batch sizes: " + pair_name(config, i) + " is " +
                    (f.batch_size == 0 ? "disabled and must stay 0" : "enabled and needs ≥ 1") +
                    ", got " + std::to_string(bs));
      specs.push_back({r.info.name, f.frames, f.p_resolution,
                       f.pair ? std::optional<double>(f.p_frames) : std::nullopt,
                       bs == 0 ? std::nullopt : std::optional<std::int64_t>(bs)});
      ++i;
    }
  if (i != sizes.size() || specs.size() != sizes.size())
    throw error("batch sizes: " + std::to_string(sizes.size()) + " given but the config has " +
                std::to_string(pair_batch_sizes(config).size()) + " (resolution, frames) pairs");
  return bucket_config(specs, detail::config_resolutions{&config});
}

/// The largest batch size of every pair whose predicted memory (at the pair's most expensive
/// aspect entry, `bucket_tokens`) is at most `budget`, capped at `max_batch` (0: no cap);
/// disabled pairs stay 0. Throws `vbucket::error` naming the pair that does not fit even at
/// batch size 1, and for a budget or model that is not finite.
[[nodiscard]] inline std::vector<std::int64_t> batch_sizes_for_memory(
    const bucket_config& config, const memory_model& model, double budget,
    std::int64_t max_batch = 0, latent_compression compression = {}) {
  if (const std::string why = model.problem(); !why.empty())
    throw error("memory model " + detail::shortest_text(model.fixed) + "," +
                detail::shortest_text(model.linear) + "," + detail::shortest_text(model.quadratic) +
                ": " + why);
  if (!std::isfinite(budget)) throw error("memory budget must be a finite number");
  std::vector<std::int64_t> out;
  std::size_t i = 0;
  const auto& res = config.resolutions();
  for (std::size_t r = 0; r < res.size(); ++r)
    for (std::size_t k = 0; k < res[r].frames.size(); ++k, ++i) {
      if (res[r].frames[k].batch_size == 0) {
        out.push_back(0);
        continue;
      }
      const std::int64_t tokens = bucket_tokens(config, r, k, compression);
      const double per = model.per_sample(tokens);
      const double room = budget - model.fixed;
      double most =
          per > 0.0 ? std::floor(room / per) : static_cast<double>(bucket_config::max_batch);
      if (most > static_cast<double>(bucket_config::max_batch))
        most = static_cast<double>(bucket_config::max_batch);
      auto bs = static_cast<std::int64_t>(most);
      if (max_batch > 0 && bs > max_batch) bs = max_batch;
      if (bs < 1)
        throw error("memory budget " + std::to_string(budget) + ": " + pair_name(config, i) + " (" +
                    std::to_string(tokens) + " tokens a sample) needs " +
                    std::to_string(model.predict(tokens, 1)) + " at batch size 1");
      out.push_back(bs);
    }
  return out;
}

/// `config` with `batch_sizes_for_memory`'s batch sizes.
[[nodiscard]] inline bucket_config fit_to_memory(const bucket_config& config,
                                                 const memory_model& model, double budget,
                                                 std::int64_t max_batch = 0,
                                                 latent_compression compression = {}) {
  const auto sizes = batch_sizes_for_memory(config, model, budget, max_batch, compression);
  return with_batch_sizes(config, sizes);
}

}  // namespace vbucket
