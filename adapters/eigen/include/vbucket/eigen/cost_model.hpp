#pragma once
/// Fitted cost models and batch-size search (the `vbucket::eigen` adapter).
///
/// Per-rank peak memory and step time of a training step on a bucket of `tokens` tokens
/// (`vbucket::bucket_tokens`) at batch size bs are modelled as
///     memory = m0 + bs · (m1 · tokens + m2 · tokens²)
///     time   = t0 + bs · (t1 · tokens + t2 · tokens²)
/// (m0: weights, optimizer state; m1: activations; m2: attention), fitted by least squares
/// from a handful of profiled points. From a fitted model: the largest batch under a memory
/// limit, or the batch whose step time is closest to a reference bucket's (`rescale_batch_sizes`
/// does both for a whole config). Around a user's probe (one real training step): Open-Sora
/// v1.2's binary search, and a model-assisted search that needs a fraction of its probes.

#include <algorithm>    // std::sort, std::min, std::max
#include <cmath>        // std::isfinite, std::floor, std::ceil, std::sqrt, std::abs
#include <concepts>     // std::invocable, std::convertible_to
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <cstdio>       // std::snprintf
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::invoke_result_t
#include <utility>      // std::pair
#include <vector>       // std::vector

#include <Eigen/Core>  // Eigen::MatrixXd, Eigen::VectorXd
#include <Eigen/SVD>   // Eigen::JacobiSVD

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/plan/run_memory.hpp"  // memory_model (cost_model)

namespace vbucket::eigen {

// ---------------------------------------------------------------------------------------------
// The model and its fit
// ---------------------------------------------------------------------------------------------

/// cost = fixed + bs · (linear · tokens + quadratic · tokens²): the core's `memory_model`
/// (run_memory.hpp), which the run plan sizes batches with; fitted here from measurements.
using cost_model = vbucket::memory_model;

/// One measured cost: `value` for a step at (tokens, batch_size).
struct cost_point {
  std::int64_t tokens = 0;
  std::int64_t batch_size = 0;
  double value = 0.0;
};

/// A fitted model and how well it fits.
struct cost_fit {
  cost_model model;
  std::vector<double> residuals;  ///< measured − predicted, in the order of the points
  double rms_residual = 0.0;
  double max_abs_residual = 0.0;
  double max_relative_residual = 0.0;  ///< max |residual| / |measured|
  double r_squared = 1.0;
  double condition = 1.0;  ///< condition number of the column-scaled design matrix
  std::size_t points = 0;
};

namespace detail {

inline std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace detail

/// Fits `cost_model` to `points` by least squares. The design columns (1, bs·tokens,
/// bs·tokens²) span many orders of magnitude, so each is scaled to a largest entry of 1 before
/// an SVD solve. `what` ("memory model") and `symbol` ('m': m0, m1, m2) name the model in
/// messages. Throws `vbucket::error` on a bad point, or when the points cannot identify the
/// model: fewer than 3, a single token count, or linearly dependent columns.
inline cost_fit fit_cost_model(std::span<const cost_point> points,
                               std::string_view what = "cost model", char symbol = 'c') {
  const std::string name(what);
  const std::string coeffs = std::string(1, symbol) + "0, " + symbol + "1, " + symbol + "2";
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const std::string at = name + ": point " + std::to_string(i + 1) + " (tokens " +
                           std::to_string(p.tokens) + ", batch size " +
                           std::to_string(p.batch_size) + ")";
    if (p.tokens < 1) throw error(at + ": tokens must be positive");
    if (p.batch_size < 1) throw error(at + ": batch size must be positive");
    if (!std::isfinite(p.value)) throw error(at + ": the measured value is not finite");
  }
  if (points.size() < 3)
    throw error(name + ": " + std::to_string(points.size()) + " point" +
                (points.size() == 1 ? "" : "s") + " cannot identify the 3 coefficients (" + coeffs +
                "); profile at least 3 points at 2 or more token counts");
  bool one_token_count = true;
  for (const auto& p : points) one_token_count = one_token_count && p.tokens == points[0].tokens;
  if (one_token_count)
    throw error(name + ": every point has " + std::to_string(points[0].tokens) +
                " tokens, so the per-token terms cannot be told apart; profile at least 2 token "
                "counts (other resolutions or frame counts)");

  const auto n = static_cast<Eigen::Index>(points.size());
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& p = points[static_cast<std::size_t>(i)];
    const auto t = static_cast<double>(p.tokens);
    const auto b = static_cast<double>(p.batch_size);
    x(i, 0) = 1.0;
    x(i, 1) = b * t;
    x(i, 2) = b * t * t;
    y(i) = p.value;
  }
  const Eigen::RowVector3d scale = x.cwiseAbs().colwise().maxCoeff();
  const Eigen::MatrixXd scaled = x * scale.cwiseInverse().asDiagonal();
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(scaled, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const auto& sv = svd.singularValues();
  const double condition = sv(2) > 0.0 ? sv(0) / sv(2) : std::numeric_limits<double>::infinity();
  if (!(condition < 1e9))
    throw error(name + ": the points cannot identify the model: the columns 1, bs·tokens, " +
                "bs·tokens² are linearly dependent over them (condition number " +
                detail::format_number(condition) + "); profile other batch sizes or token counts");
  const Eigen::Vector3d solution = svd.solve(y);
  const Eigen::Vector3d coef = solution.cwiseQuotient(scale.transpose());

  cost_fit fit;
  fit.model = {coef(0), coef(1), coef(2)};
  fit.condition = condition;
  fit.points = points.size();
  fit.residuals.resize(points.size());
  double sum = 0.0, ss_res = 0.0, ss_tot = 0.0;
  for (const auto& p : points) sum += p.value;
  const double mean = sum / static_cast<double>(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const double r = p.value - fit.model.predict(p.tokens, p.batch_size);
    fit.residuals[i] = r;
    ss_res += r * r;
    ss_tot += (p.value - mean) * (p.value - mean);
    fit.max_abs_residual = std::max(fit.max_abs_residual, std::abs(r));
    if (p.value != 0.0)
      fit.max_relative_residual = std::max(fit.max_relative_residual, std::abs(r / p.value));
  }
  fit.rms_residual = std::sqrt(ss_res / static_cast<double>(points.size()));
  fit.r_squared = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 1.0;
  return fit;
}

// ---------------------------------------------------------------------------------------------
// Profiles: measured steps, some of which ran out of memory
// ---------------------------------------------------------------------------------------------

/// One profiled step: a bucket of `tokens` tokens at `batch_size`; either it ran out of
/// memory, or it peaked at `peak_memory_gib` and took `step_seconds` (NaN: not measured).
struct profile_point {
  std::int64_t tokens = 0;
  std::int64_t batch_size = 0;
  bool oom = false;
  double peak_memory_gib = 0.0;
  double step_seconds = std::numeric_limits<double>::quiet_NaN();
};

/// The memory model from the points that did not run out of memory.
inline cost_fit fit_memory_model(std::span<const profile_point> profile) {
  std::vector<cost_point> points;
  for (const auto& p : profile)
    if (!p.oom) points.push_back({p.tokens, p.batch_size, p.peak_memory_gib});
  return fit_cost_model(points, "memory model", 'm');
}

/// The step-time model from the points that did not run out of memory and have a step time.
inline cost_fit fit_time_model(std::span<const profile_point> profile) {
  std::vector<cost_point> points;
  for (const auto& p : profile)
    if (!p.oom && !std::isnan(p.step_seconds))
      points.push_back({p.tokens, p.batch_size, p.step_seconds});
  return fit_cost_model(points, "step-time model", 't');
}

// ---------------------------------------------------------------------------------------------
// Batch sizes from a fitted model
// ---------------------------------------------------------------------------------------------

/// A memory budget: `gib` of device memory, of which `margin` (a fraction) is kept free.
struct memory_budget {
  double gib = std::numeric_limits<double>::infinity();
  double margin = 0.0;

  /// gib · (1 − margin). Throws `vbucket::error` for a budget that is not positive or a
  /// margin outside [0, 1).
  [[nodiscard]] double limit() const {
    if (std::isnan(gib) || !(gib > 0.0))
      throw error("memory budget must be a positive number of GiB, got " +
                  detail::format_number(gib));
    if (std::isnan(margin) || margin < 0.0 || margin >= 1.0)
      throw error("memory margin must be in [0, 1), got " + detail::format_number(margin));
    return gib * (1.0 - margin);
  }
};

/// The largest batch size in [1, max_batch] whose predicted memory is within `limit_gib`, or
/// 0 when not even 1 fits. Throws `vbucket::error` when the model predicts that memory does not
/// grow with the batch (a fit that is no use for this bucket).
inline std::int64_t largest_batch_within(const cost_model& memory, std::int64_t tokens,
                                         double limit_gib,
                                         std::int64_t max_batch = bucket_config::max_batch) {
  const double a = memory.per_sample(tokens);
  if (!(a > 0.0))
    throw error("memory model predicts no growth with the batch size at " + std::to_string(tokens) +
                " tokens (" + detail::format_number(a) + " GiB per sample)");
  if (memory.predict(tokens, 1) > limit_gib) return 0;
  const double room = (limit_gib - memory.fixed) / a;
  std::int64_t b =
      room >= static_cast<double>(max_batch) ? max_batch : static_cast<std::int64_t>(room);
  // Floating-point guard: the predicate itself decides at the boundary.
  while (b > 1 && memory.predict(tokens, b) > limit_gib) --b;
  while (b < max_batch && memory.predict(tokens, b + 1) <= limit_gib) ++b;
  return std::max<std::int64_t>(b, 1);
}

/// The batch size in [1, max_batch] whose predicted step time is closest to `target_seconds`
/// (ties go to the smaller); `max_batch` is the memory cap (e.g. `largest_batch_within`).
/// Returns 0 when `max_batch` is 0. Throws `vbucket::error` when the model predicts that the
/// step time does not grow with the batch.
inline std::int64_t batch_closest_to_time(const cost_model& time, std::int64_t tokens,
                                          double target_seconds, std::int64_t max_batch) {
  if (max_batch < 1) return 0;
  const double s = time.per_sample(tokens);
  if (!(s > 0.0))
    throw error("step-time model predicts no growth with the batch size at " +
                std::to_string(tokens) + " tokens (" + detail::format_number(s) + " s per sample)");
  const double x = (target_seconds - time.fixed) / s;
  std::int64_t b = x <= 1.0                              ? 1
                   : x >= static_cast<double>(max_batch) ? max_batch
                                                         : static_cast<std::int64_t>(std::floor(x));
  // b or b + 1, whichever is closer (ties to the smaller).
  if (b < max_batch && std::abs(time.predict(tokens, b + 1) - target_seconds) <
                           std::abs(time.predict(tokens, b) - target_seconds))
    ++b;
  return b;
}

// ---------------------------------------------------------------------------------------------
// Rescaling a config's batch sizes (what `vbucket fit-bs` does)
// ---------------------------------------------------------------------------------------------

struct rescale_options {
  memory_budget budget{80.0, 0.05};
  /// Match this bucket's step time (an index into the buckets); none: fill memory.
  std::optional<std::size_t> reference;
  std::int64_t max_batch = bucket_config::max_batch;
};

struct rescaled_bucket {
  batch_bucket bucket;              ///< as given, with the old batch size
  std::int64_t new_batch_size = 0;  ///< 0: disabled (stays disabled)
  double predicted_memory_gib = std::numeric_limits<double>::quiet_NaN();
  double predicted_seconds = std::numeric_limits<double>::quiet_NaN();  ///< NaN: no time model
  bool capped_by_oom = false;  ///< a profiled OOM lowered the batch size the model allowed
};

struct rescale_result {
  cost_fit memory;
  std::optional<cost_fit> time;  ///< none when the profile cannot identify it (no reference)
  double limit_gib = 0.0;
  double reference_seconds = std::numeric_limits<double>::quiet_NaN();
  std::vector<rescaled_bucket> buckets;
};

/// The packed token budget (`packed_options::token_budget`, `--token-budget`) that keeps every
/// packed batch within `limit_gib` by the fitted memory model: a batch of samples of t_i
/// tokens, none above `max_sample_tokens`, costs fixed + Σ (linear·t_i + quadratic·t_i²) ≤
/// fixed + (linear + quadratic·max_sample_tokens)·Σ t_i, so B = (limit − fixed) / (linear +
/// quadratic·max_sample_tokens). Throws `vbucket::error` when the limit is not above the fixed
/// part, the per-token cost is not positive, or max_sample_tokens < 1.
inline double packed_token_budget(const cost_model& memory, double limit_gib,
                                  std::int64_t max_sample_tokens) {
  if (max_sample_tokens < 1)
    throw error("packed token budget: the largest sample must have at least 1 token, got " +
                std::to_string(max_sample_tokens));
  const double per_token =
      memory.linear + memory.quadratic * static_cast<double>(max_sample_tokens);
  if (!(per_token > 0.0) || !std::isfinite(per_token))
    throw error("packed token budget: the memory model's cost per token (" +
                detail::format_number(per_token) + " GiB) is not positive");
  if (!(limit_gib > memory.fixed))
    throw error("packed token budget: the memory limit " + detail::format_number(limit_gib) +
                " GiB is not above the model's fixed part " + detail::format_number(memory.fixed) +
                " GiB");
  return (limit_gib - memory.fixed) / per_token;
}

/// New batch sizes for `buckets` (e.g. `batch_buckets(config)`) from a profile: every enabled
/// bucket gets the largest batch whose predicted memory is within the budget's limit, or with
/// a reference, the batch whose predicted step time is closest to the reference bucket's at
/// its own largest batch, never above the memory limit. A profiled OOM at (tokens τ, bs N)
/// caps buckets of τ or more tokens at N − 1 when the limit is no more than the largest
/// profiled peak (the profiling device held that peak, so it holds no less than the limit).
/// Throws `vbucket::error` when a fit fails, the reference is disabled, or a bucket does not
/// fit even at batch size 1.
inline rescale_result rescale_batch_sizes(std::span<const batch_bucket> buckets,
                                          std::span<const profile_point> profile,
                                          const rescale_options& options) {
  rescale_result out;
  out.limit_gib = options.budget.limit();
  out.memory = fit_memory_model(profile);
  if (options.reference) {
    if (*options.reference >= buckets.size()) throw error("reference bucket index out of range");
    if (!buckets[*options.reference].enabled())
      throw error("reference bucket " + buckets[*options.reference].name() +
                  " is disabled (its batch size is null)");
    out.time = fit_time_model(profile);
  } else {
    try {
      out.time = fit_time_model(profile);
    } catch (const error&) {
      out.time.reset();  // only shown in the table; not needed without a reference
    }
  }
  double largest_peak = 0.0;
  for (const auto& p : profile)
    if (!p.oom) largest_peak = std::max(largest_peak, p.peak_memory_gib);
  const bool ooms_bind = out.limit_gib <= largest_peak;

  auto memory_cap = [&](const batch_bucket& b, bool& capped) {
    std::int64_t cap =
        largest_batch_within(out.memory.model, b.tokens, out.limit_gib, options.max_batch);
    capped = false;
    if (ooms_bind)
      for (const auto& p : profile)
        if (p.oom && p.tokens <= b.tokens && p.batch_size - 1 < cap) {
          cap = p.batch_size - 1;
          capped = true;
        }
    if (cap < 1)
      throw error("bucket " + b.name() + " (" + std::to_string(b.tokens) +
                  " tokens) does not fit in " + detail::format_number(options.budget.gib) +
                  " GiB with margin " + detail::format_number(options.budget.margin) + " (" +
                  detail::format_number(out.limit_gib) + " GiB) even at batch size 1" +
                  (capped ? " (a profiled step ran out of memory)"
                          : " (predicted " +
                                detail::format_number(out.memory.model.predict(b.tokens, 1)) +
                                " GiB)") +
                  "; disable it (probability 0, batch size null) to rescale the rest");
    return cap;
  };

  if (options.reference) {
    const auto& ref = buckets[*options.reference];
    bool capped = false;
    const std::int64_t ref_bs = memory_cap(ref, capped);
    out.reference_seconds = out.time->model.predict(ref.tokens, ref_bs);
  }
  out.buckets.reserve(buckets.size());
  for (const auto& b : buckets) {
    rescaled_bucket r;
    r.bucket = b;
    if (b.enabled()) {
      const std::int64_t cap = memory_cap(b, r.capped_by_oom);
      r.new_batch_size = cap;
      if (options.reference) {
        r.new_batch_size =
            batch_closest_to_time(out.time->model, b.tokens, out.reference_seconds, cap);
        r.capped_by_oom = r.capped_by_oom && r.new_batch_size == cap;
      }
      r.predicted_memory_gib = out.memory.model.predict(b.tokens, r.new_batch_size);
      if (out.time) r.predicted_seconds = out.time->model.predict(b.tokens, r.new_batch_size);
    }
    out.buckets.push_back(std::move(r));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Batch-size search around a probe
// ---------------------------------------------------------------------------------------------

/// What one probe (a real training step) measured: it ran out of memory, or it peaked at
/// `peak_memory_gib` and took `step_seconds`.
struct probe_result {
  bool oom = false;
  double peak_memory_gib = 0.0;
  double step_seconds = 0.0;

  [[nodiscard]] static constexpr probe_result out_of_memory() noexcept { return {true, 0.0, 0.0}; }
};

/// A probe runs a training step (a few, averaged) of `bucket` at a batch size and reports
/// what it measured. It catches its own out-of-memory error and returns
/// `probe_result::out_of_memory()`; it must leave the device as it found it.
///
///     auto probe = [&](const vbucket::batch_bucket& b, std::int64_t bs) { return step(b, bs); };
///     static_assert(vbucket::eigen::batch_probe<decltype(probe)>);
template <class P>
concept batch_probe = std::invocable<P&, const batch_bucket&, std::int64_t> &&
    std::convertible_to<std::invoke_result_t<P&, const batch_bucket&, std::int64_t>, probe_result>;

enum class search_mode {
  binary,          ///< Open-Sora v1.2's search_bs: bisection over [min_batch, max_batch]
  model_assisted,  ///< probe a few points, fit, predict, verify with one probe per bucket
};

struct search_options {
  search_mode mode = search_mode::model_assisted;
  /// A probe fits when it did not run out of memory and its peak is within the limit (an
  /// infinite budget: only OOM counts; model-assisted search needs a finite one).
  memory_budget budget{};
  /// Match this bucket's step time (an index into the buckets): its batch size fills memory,
  /// and every other bucket gets the fitting batch whose step time is closest to it.
  std::optional<std::size_t> reference;
  std::int64_t min_batch = 1;
  std::int64_t max_batch = 1024;
  /// Model-assisted: buckets (spread over the token counts) probed at min_batch and
  /// min_batch + 1 for the first fit.
  std::size_t anchors = 3;
  /// Model-assisted: corrections on one bucket before it falls back to bisection.
  std::int64_t newton_probes = 4;
};

struct bucket_search {
  std::int64_t batch_size = 0;  ///< 0: disabled, or not even min_batch fits
  probe_result measured;        ///< the probe at batch_size (when it is not 0)
  std::int64_t probes = 0;      ///< probes spent on this bucket
  std::int64_t predicted = 0;   ///< model-assisted: the model's first answer (0: none)
  bool fell_back = false;       ///< model-assisted: the verification probe was not enough
};

struct search_result {
  std::vector<bucket_search> buckets;  ///< one per bucket given
  std::int64_t probes = 0;
  double reference_seconds = std::numeric_limits<double>::quiet_NaN();
  /// Model-assisted: the models fitted to every probe that ran (none if they could not be).
  std::optional<cost_fit> memory_fit;
  std::optional<cost_fit> time_fit;
  /// Every probe in the order it ran, OOMs included: a profile for `rescale_batch_sizes` (or a
  /// PROFILE.csv for `vbucket fit-bs`) to move the result to another device.
  std::vector<profile_point> profile;
};

namespace detail {

/// What one bucket's search knows: every probe on it, and the bracket they give.
struct bucket_probes {
  std::vector<std::pair<std::int64_t, probe_result>> tried;
  std::int64_t lo_ok = 0;    // largest batch known to fit (0: none)
  std::int64_t hi_fail = 0;  // smallest batch known not to fit (max_batch + 1: none)

  [[nodiscard]] const probe_result* find(std::int64_t bs) const noexcept {
    for (const auto& [b, r] : tried)
      if (b == bs) return &r;
    return nullptr;
  }
};

template <class Probe>
class batch_search {
 public:
  batch_search(std::span<const batch_bucket> buckets, Probe& probe, const search_options& o)
      : buckets_(buckets), probe_(probe), o_(o), limit_(o.budget.limit()) {
    if (o.min_batch < 1 || o.max_batch < o.min_batch)
      throw error("batch-size search: need 1 <= min_batch <= max_batch, got " +
                  std::to_string(o.min_batch) + " and " + std::to_string(o.max_batch));
    if (o.reference) {
      if (*o.reference >= buckets.size())
        throw error("batch-size search: reference bucket index out of range");
      if (!buckets[*o.reference].enabled())
        throw error("batch-size search: reference bucket " + buckets[*o.reference].name() +
                    " is disabled");
    }
    if (o.mode == search_mode::model_assisted && !std::isfinite(limit_))
      throw error("model-assisted batch-size search needs a finite memory budget");
    state_.resize(buckets.size());
    for (auto& s : state_) s.hi_fail = o.max_batch + 1;
    result_.buckets.resize(buckets.size());
  }

  search_result run() {
    if (o_.mode == search_mode::binary) {
      run_binary();
    } else {
      run_assisted();
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      auto& r = result_.buckets[i];
      r.probes = static_cast<std::int64_t>(state_[i].tried.size());
      result_.probes += r.probes;
      if (r.batch_size > 0) {
        if (const auto* m = state_[i].find(r.batch_size)) r.measured = *m;
      }
    }
    return std::move(result_);
  }

 private:
  // ---- shared --------------------------------------------------------------------------

  [[nodiscard]] bool fits(const probe_result& r) const noexcept {
    return !r.oom && r.peak_memory_gib <= limit_;
  }
  [[nodiscard]] bool time_mode() const noexcept { return target_.has_value(); }

  const probe_result& run_probe(std::size_t i, std::int64_t bs) {
    if (const auto* known = state_[i].find(bs)) return *known;
    const probe_result r = probe_(buckets_[i], bs);
    if (!r.oom && (!std::isfinite(r.peak_memory_gib) || r.peak_memory_gib < 0.0 ||
                   !std::isfinite(r.step_seconds) || r.step_seconds < 0.0))
      throw error("batch-size search: the probe of bucket " + buckets_[i].name() +
                  " at batch size " + std::to_string(bs) +
                  " returned a negative or non-finite peak memory or step time");
    auto& s = state_[i];
    s.tried.emplace_back(bs, r);
    result_.profile.push_back({buckets_[i].tokens, bs, r.oom, r.oom ? 0.0 : r.peak_memory_gib,
                               r.oom ? std::numeric_limits<double>::quiet_NaN() : r.step_seconds});
    if (fits(r)) {
      s.lo_ok = std::max(s.lo_ok, bs);
    } else {
      s.hi_fail = std::min(s.hi_fail, bs);
    }
    if (!r.oom) {
      data_.push_back({buckets_[i].tokens, bs, false, r.peak_memory_gib, r.step_seconds});
      data_changed_ = true;
    }
    return s.tried.back().second;
  }

  /// Time mode: the fitting probe of bucket i whose step time is closest to the target (ties:
  /// the smaller batch); 0 when none fits.
  [[nodiscard]] std::int64_t closest_tried(std::size_t i) const {
    std::int64_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (const auto& [b, r] : state_[i].tried) {
      if (!fits(r)) continue;
      const double d = std::abs(r.step_seconds - *target_);
      if (d < best_d || (d == best_d && b < best)) {
        best = b;
        best_d = d;
      }
    }
    return best;
  }

  void set_reference(std::size_t ref) {
    const std::int64_t bs = result_.buckets[ref].batch_size;
    if (bs == 0)
      throw error("batch-size search: reference bucket " + buckets_[ref].name() +
                  " does not fit even at batch size " + std::to_string(o_.min_batch));
    target_ = state_[ref].find(bs)->step_seconds;
    result_.reference_seconds = *target_;
  }

  // ---- binary search (Open-Sora v1.2's search_bs) ----------------------------------------

  void binary_bucket(std::size_t i) {
    std::int64_t lo = o_.min_batch, hi = o_.max_batch, best = 0;
    while (lo <= hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      const probe_result& r = run_probe(i, mid);
      const bool go_up = fits(r) && (!time_mode() || r.step_seconds < *target_);
      if (go_up) {
        best = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    // Time mode: the closest of the fitting probes (Open-Sora keeps the closest below).
    result_.buckets[i].batch_size = time_mode() ? closest_tried(i) : best;
  }

  void run_binary() {
    if (o_.reference) {
      binary_bucket(*o_.reference);
      set_reference(*o_.reference);
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].enabled() && !(o_.reference && i == *o_.reference)) binary_bucket(i);
  }

  // ---- model-assisted search -------------------------------------------------------------

  void refit() {
    if (!data_changed_) return;
    data_changed_ = false;
    try {
      memory_fit_ = fit_memory_model(data_);
    } catch (const error&) {
      memory_fit_.reset();
    }
    try {
      time_fit_ = fit_time_model(data_);
    } catch (const error&) {
      time_fit_.reset();
    }
  }

  /// Enabled buckets spread over the token counts: the fewest and most tokens, then the
  /// ones closest to geometric steps between them.
  [[nodiscard]] std::vector<std::size_t> pick_anchors() const {
    std::vector<std::size_t> enabled;
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].enabled()) enabled.push_back(i);
    std::stable_sort(enabled.begin(), enabled.end(), [&](std::size_t a, std::size_t b) {
      return buckets_[a].tokens < buckets_[b].tokens;
    });
    std::vector<std::size_t> anchors;
    const std::size_t want = std::max<std::size_t>(o_.anchors, 2);
    if (enabled.empty()) return anchors;
    const double lo = std::log(static_cast<double>(buckets_[enabled.front()].tokens));
    const double hi = std::log(static_cast<double>(buckets_[enabled.back()].tokens));
    for (std::size_t k = 0; k < want; ++k) {
      const double goal = lo + (hi - lo) * static_cast<double>(k) / static_cast<double>(want - 1);
      std::size_t best = enabled.size();
      double best_d = std::numeric_limits<double>::infinity();
      for (std::size_t e = 0; e < enabled.size(); ++e) {
        const auto idx = enabled[e];
        bool taken = false;
        for (auto a : anchors) taken = taken || buckets_[a].tokens == buckets_[idx].tokens;
        if (taken) continue;
        const double d = std::abs(std::log(static_cast<double>(buckets_[idx].tokens)) - goal);
        if (d < best_d) {
          best_d = d;
          best = e;
        }
      }
      if (best == enabled.size()) break;
      anchors.push_back(enabled[best]);
    }
    return anchors;
  }

  /// A bucket's own per-sample cost from its measurement (value − intercept) / bs, when the
  /// measurement covers at least a tenth of the way from the intercept to the goal (below
  /// that, noise swamps it and the fitted slope is the better estimate).
  [[nodiscard]] static double own_slope(double measured, double intercept, std::int64_t bs,
                                        double goal, double fitted) noexcept {
    const double rise = measured - intercept;
    if (rise > 0.0 && rise >= 0.1 * (goal - intercept)) return rise / static_cast<double>(bs);
    return fitted;
  }

  /// The model's largest fitting batch for bucket i, corrected by the bucket's own non-OOM
  /// probe whose peak is closest to the limit; unclamped; nullopt when nothing is known.
  [[nodiscard]] std::optional<std::int64_t> memory_guess(std::size_t i) const {
    if (!memory_fit_) return std::nullopt;
    const cost_model& m = memory_fit_->model;
    double slope = m.per_sample(buckets_[i].tokens);
    const std::pair<std::int64_t, probe_result>* best = nullptr;
    for (const auto& t : state_[i].tried)
      if (!t.second.oom && (best == nullptr || std::abs(t.second.peak_memory_gib - limit_) <
                                                   std::abs(best->second.peak_memory_gib - limit_)))
        best = &t;
    // The bucket's own slope through the shared intercept: exact where the model's form
    // holds, and right near the answer whatever the form.
    if (best != nullptr)
      slope = own_slope(best->second.peak_memory_gib, m.fixed, best->first, limit_, slope);
    if (!(slope > 0.0)) return std::nullopt;
    const double x = (limit_ - m.fixed) / slope;
    if (!(x < static_cast<double>(o_.max_batch))) return o_.max_batch + 1;
    return x < 0.0 ? std::int64_t{0} : static_cast<std::int64_t>(std::floor(x));
  }

  /// Time mode: the batch whose step time is closest to the target, corrected by bucket i's
  /// own fitting probe closest to the target; unclamped.
  [[nodiscard]] std::optional<std::int64_t> time_guess(std::size_t i) const {
    if (!time_fit_) return std::nullopt;
    const cost_model& t = time_fit_->model;
    double slope = t.per_sample(buckets_[i].tokens);
    const std::pair<std::int64_t, probe_result>* best = nullptr;
    for (const auto& tr : state_[i].tried)
      if (fits(tr.second) &&
          (best == nullptr || std::abs(tr.second.step_seconds - *target_) <
                                  std::abs(best->second.step_seconds - *target_)))
        best = &tr;
    if (best != nullptr)
      slope = own_slope(best->second.step_seconds, t.fixed, best->first, *target_, slope);
    if (!(slope > 0.0)) return std::nullopt;
    const double x = (*target_ - t.fixed) / slope;
    if (!(x < static_cast<double>(o_.max_batch))) return o_.max_batch;
    // Closest on a line: round, ties to the smaller.
    return x <= 0.0 ? std::int64_t{1} : static_cast<std::int64_t>(std::ceil(x - 0.5));
  }

  /// What bucket i's probes bracket. `fill`: the largest fitting batch lies in [lo, hi);
  /// time mode: batches up to lo fit and step faster than the target, hi does not (it is
  /// slower, or does not fit), so the answer is lo or hi.
  struct bracket {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    bool hi_fits = false;
  };

  [[nodiscard]] bracket bracket_of(std::size_t i, bool fill) const {
    const auto& s = state_[i];
    if (fill) return {s.lo_ok, s.hi_fail, false};
    bracket br{0, s.hi_fail, false};
    for (const auto& [b, r] : s.tried) {
      const bool pass = fits(r) && r.step_seconds < *target_;
      if (pass) {
        br.lo = std::max(br.lo, b);
      } else if (b <= br.hi) {
        br.hi = b;
        br.hi_fits = fits(r);
      }
    }
    return br;
  }

  /// The model's next batch for bucket i (unclamped); nullopt when there is no estimate.
  [[nodiscard]] std::optional<std::int64_t> propose(std::size_t i, bool fill) const {
    auto guess = memory_guess(i);
    if (guess && !fill) {
      const auto t = time_guess(i);
      if (!t) return std::nullopt;
      guess = std::min(*guess, *t);
    }
    return guess;
  }

  /// Searches bucket i: verify the model's answer with one probe; when the bucket's bracket
  /// is not closed by that, correct the answer from the measurement, gallop down from an OOM
  /// the model did not foresee, and bisect when corrections do not converge. `memory_only`:
  /// the largest fitting batch even in time mode (the reference bucket).
  void assisted_bucket(std::size_t i, bool memory_only) {
    auto& s = state_[i];
    auto& out = result_.buckets[i];
    const bool fill = memory_only || !time_mode();
    auto next = propose(i, fill);
    if (!next) {
      binary_bucket(i);  // no usable model: Open-Sora's way
      out.fell_back = true;
      return;
    }
    out.predicted = std::clamp(*next, o_.min_batch, o_.max_batch);
    std::int64_t step_down = 0;  // 0: not galloping yet
    std::int64_t corrections = 0;
    const std::size_t before = s.tried.size();
    for (;;) {
      if (s.hi_fail <= o_.min_batch) {                       // not even the smallest batch fits
        out.batch_size = fill ? s.lo_ok : closest_tried(i);  // 0 unless noise contradicts
        break;
      }
      const bracket br = bracket_of(i, fill);
      if (br.hi - br.lo <= 1) {  // closed
        out.batch_size = fill ? br.lo : closest_tried(i);
        break;
      }
      const std::int64_t low = std::max(br.lo, o_.min_batch);
      const std::int64_t high = std::max(low, br.hi_fits ? br.hi : br.hi - 1);
      if (!next) next = br.lo + (br.hi - br.lo) / 2;  // bisect
      const std::int64_t b = std::clamp(*next, low, high);
      if (s.find(b) != nullptr) {  // the estimate is a batch already measured: converged
        out.batch_size = fill ? s.lo_ok : closest_tried(i);
        break;
      }
      const probe_result& r = run_probe(i, b);
      next.reset();
      if (!fits(r)) {
        // Failed: trust a corrected estimate only if it now lands below the failure.
        const auto guess = propose(i, fill);
        if (guess && *guess < s.hi_fail && corrections < o_.newton_probes) {
          next = guess;
          ++corrections;
        } else {
          // Gallop down, from steps of about 1.5 % (models err by a few per cent), doubling;
          // bisect once a step would pass the bracket's low end.
          step_down = step_down == 0 ? std::max<std::int64_t>(1, s.hi_fail / 64) : 2 * step_down;
          if (s.hi_fail - step_down > bracket_of(i, fill).lo) next = s.hi_fail - step_down;
        }
      } else if (corrections < o_.newton_probes) {
        next = propose(i, fill);
        ++corrections;
      }
    }
    out.fell_back = s.tried.size() - before > 1;
  }

  void run_assisted() {
    // 1. Anchors: two small batches on buckets spread over the token counts.
    for (const std::size_t a : pick_anchors()) {
      run_probe(a, o_.min_batch);
      if (o_.min_batch + 1 <= o_.max_batch && state_[a].hi_fail > o_.min_batch)
        run_probe(a, o_.min_batch + 1);
    }
    refit();
    // 2. The reference bucket (time mode) fills memory; its step time is the target.
    if (o_.reference) {
      assisted_bucket(*o_.reference, true);
      set_reference(*o_.reference);
      refit();
    }
    // 3. Every other enabled bucket: predict, verify, correct; refit as data comes in.
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      if (!buckets_[i].enabled() || (o_.reference && i == *o_.reference)) continue;
      assisted_bucket(i, false);
      refit();
    }
    result_.memory_fit = memory_fit_;
    result_.time_fit = time_fit_;
  }

  std::span<const batch_bucket> buckets_;
  Probe& probe_;
  const search_options& o_;
  double limit_;
  std::vector<bucket_probes> state_;
  std::vector<profile_point> data_;
  bool data_changed_ = false;
  std::optional<cost_fit> memory_fit_;
  std::optional<cost_fit> time_fit_;
  std::optional<double> target_;  // time mode: the reference's step time
  search_result result_;
};

}  // namespace detail

/// Finds every enabled bucket's batch size with `probe` (see `batch_probe`): the largest that
/// fits the memory budget, or with `options.reference`, the fitting one whose step time is
/// closest to the reference bucket's at its largest. Disabled buckets (batch size 0) are not
/// probed and get 0. `search_mode::binary` is Open-Sora v1.2's search_bs (about log2(max_batch)
/// probes per bucket); `search_mode::model_assisted` probes a few anchors, fits the cost
/// models and verifies each bucket's predicted batch with one probe, correcting it from that
/// measurement (and bisecting if corrections do not converge) when the model was off.
template <batch_probe Probe>
search_result search_batch_sizes(std::span<const batch_bucket> buckets, Probe&& probe,
                                 const search_options& options = {}) {
  return detail::batch_search<std::remove_reference_t<Probe>>(buckets, probe, options).run();
}

}  // namespace vbucket::eigen
