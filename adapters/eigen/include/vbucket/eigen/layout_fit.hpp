#pragma once
/// Fitting the parallel layout's models (`vbucket/plan/parallel_layout.hpp`) to a user's profile,
/// as `fit-bs` fits its own: PROFILE.csv as `read_profile` reads it (resolution, frames,
/// batch_size, peak_memory_gib or "oom", step_seconds), with two optional columns, `sp` (the
/// sequence-parallel size the step ran at; 1 when absent) and `micro_batch` (the most samples of
/// one micro-step; the whole batch when absent). Least squares, each column scaled to a largest
/// entry of 1, solved by SVD:
///     memory = m0 + bs · (m1·t + m2·t²) / sp
///     time   = t0 + bs · ((t1·t + t2·t²) / sp + κ · t · (sp − 1)/sp) + micro_steps · λ · (sp − 1)
/// κ and λ are fitted only when some profiled step ran at sp > 1 (else 0).
///
///     auto fit = vbucket::eigen::read_layout_profile("profile.csv", config,
///                                                    vbucket::opensora_v2_tables{});
///     vbucket::layout_options o{.memory = fit.memory, .time = fit.time, ...};

#include <cmath>        // std::isnan
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <limits>       // std::numeric_limits
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <Eigen/Core>  // Eigen::MatrixXd, Eigen::VectorXd
#include <Eigen/SVD>   // Eigen::JacobiSVD

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/eigen/profile_csv.hpp"
#include "vbucket/plan/parallel_layout.hpp"

namespace vbucket::eigen {

/// One profiled step of a group: `read_profile`'s point and the layout it ran.
struct layout_profile_point {
  profile_point step;
  std::int64_t sp = 1;
  std::int64_t micro_batch = 0;  ///< 0: the whole batch in one micro-step
};

/// The models fitted to a profile.
struct layout_fit {
  memory_model memory{};
  step_time_model time{};
  std::size_t memory_points = 0;
  std::size_t time_points = 0;
};

namespace detail {

/// Least squares of y on the columns of x, each scaled to a largest |entry| of 1. Throws naming
/// `what` when there are fewer points than columns or the columns are dependent over them.
inline Eigen::VectorXd scaled_least_squares(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                            const std::string& what) {
  if (x.rows() < x.cols())
    throw error(what + ": " + std::to_string(x.rows()) + " points cannot identify " +
                std::to_string(x.cols()) + " coefficients");
  Eigen::RowVectorXd scale = x.cwiseAbs().colwise().maxCoeff();
  for (Eigen::Index j = 0; j < scale.size(); ++j)
    if (scale(j) == 0.0) scale(j) = 1.0;
  const Eigen::MatrixXd scaled = x * scale.cwiseInverse().asDiagonal();
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(scaled, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const auto& sv = svd.singularValues();
  const double condition =
      sv(sv.size() - 1) > 0.0 ? sv(0) / sv(sv.size() - 1) : std::numeric_limits<double>::infinity();
  if (!(condition < 1e9))
    throw error(what +
                ": the profile cannot identify the model (its columns are linearly "
                "dependent over the points; profile more token counts, batch sizes or sp)");
  const Eigen::VectorXd solution = svd.solve(y);
  return solution.cwiseQuotient(scale.transpose());
}

}  // namespace detail

/// Fits both models to profiled steps (memory from the steps that did not run out of memory,
/// time from those with a step time). Throws `vbucket::error` when a model cannot be identified.
inline layout_fit fit_layout_models(std::span<const layout_profile_point> points) {
  layout_fit fit;
  std::vector<const layout_profile_point*> mem, time;
  bool split = false;
  for (const layout_profile_point& p : points) {
    if (p.step.oom) continue;
    mem.push_back(&p);
    if (!std::isnan(p.step.step_seconds)) time.push_back(&p);
    split = split || p.sp > 1;
  }
  // Memory grows with the micro-batch (what one micro-step holds), time with the batch.
  const auto micro_of = [](const layout_profile_point& p) {
    return p.micro_batch > 0 ? p.micro_batch : p.step.batch_size;
  };
  const auto row = [&](const layout_profile_point& p, std::int64_t batch, Eigen::MatrixXd& x,
                       Eigen::Index i, bool with_comm) {
    const auto t = static_cast<double>(p.step.tokens);
    const auto bs = static_cast<double>(batch);
    const auto sp = static_cast<double>(p.sp);
    x(i, 0) = 1.0;
    x(i, 1) = bs * t / sp;
    x(i, 2) = bs * t * t / sp;
    if (with_comm) {
      x(i, 3) = bs * t * (sp - 1.0) / sp;
      x(i, 4) = static_cast<double>(micro_batch_count(batch, micro_of(p))) * (sp - 1.0);
    }
  };
  {
    Eigen::MatrixXd x(static_cast<Eigen::Index>(mem.size()), 3);
    Eigen::VectorXd y(x.rows());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      const layout_profile_point& p = *mem[static_cast<std::size_t>(i)];
      row(p, micro_of(p), x, i, false);
      y(i) = p.step.peak_memory_gib;
    }
    const Eigen::VectorXd c = detail::scaled_least_squares(x, y, "layout memory model");
    fit.memory = {c(0), c(1), c(2)};
    fit.memory_points = mem.size();
  }
  {
    Eigen::MatrixXd x(static_cast<Eigen::Index>(time.size()), split ? 5 : 3);
    Eigen::VectorXd y(x.rows());
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      const layout_profile_point& p = *time[static_cast<std::size_t>(i)];
      row(p, p.step.batch_size, x, i, split);
      y(i) = p.step.step_seconds;
    }
    const Eigen::VectorXd c = detail::scaled_least_squares(x, y, "layout step-time model");
    fit.time.compute = {c(0), c(1), c(2)};
    if (split) {
      fit.time.comm_per_token = c(3);
      fit.time.comm_per_micro_step = c(4);
    }
    fit.time_points = time.size();
  }
  return fit;
}

/// Reads PROFILE.csv (`read_profile`'s columns, and the optional `sp` and `micro_batch`) and
/// fits both models. Errors name the file, the row and the column.
template <class Tables>
layout_fit read_layout_profile(const std::string& path, const bucket_config& config,
                               const Tables& tables, latent_compression c = {}) {
  const std::vector<batch_bucket> buckets = batch_buckets(config, c);
  const std::vector<profile_point> steps = read_profile(path, buckets, tables, c);
  // The optional columns, row by row (read_profile has checked the rows).
  const std::string text = vbucket::detail::read_whole_file(path);
  vbucket::detail::csv_reader reader(text, path);
  std::vector<vbucket::detail::csv_field> fields;
  reader.next(fields);
  constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t sp_col = npos, micro_col = npos;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    names.push_back(std::string(vbucket::detail::trim_blanks(fields[i].value())));
    if (names.back() == "sp") sp_col = i;
    if (names.back() == "micro_batch") micro_col = i;
  }
  reader.set_columns(names);
  std::vector<layout_profile_point> points;
  while (reader.next(fields)) {
    layout_profile_point p;
    p.step = steps[points.size()];
    if (sp_col != npos)
      p.sp = vbucket::detail::csv_size(reader, sp_col, fields[sp_col], std::int64_t{1} << 16);
    if (micro_col != npos) {
      p.micro_batch =
          vbucket::detail::csv_size(reader, micro_col, fields[micro_col], bucket_config::max_batch);
      if (p.micro_batch > p.step.batch_size)
        reader.fail(micro_col, "micro-batch " + std::to_string(p.micro_batch) +
                                   " is larger than the batch " +
                                   std::to_string(p.step.batch_size));
    }
    points.push_back(p);
  }
  return fit_layout_models(points);
}

}  // namespace vbucket::eigen
