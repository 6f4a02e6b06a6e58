#pragma once
/// The statistics of the distribution tests: histograms of bucket ids and a two-sample
/// chi-square test with its critical value (Q(a, x) and its inverse by bisection).

#include <doctest/doctest.h>

#include <algorithm>  // std::min_element
#include <cmath>      // std::log, std::lgamma, std::exp, std::abs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "vbucket/base/numpy_random.hpp"     // numpy_source, big_seed
#include "vbucket/bucket/assign.hpp"         // assign_all
#include "vbucket/bucket/bucket_config.hpp"  // bucket_id, invalid_sample
#include "vbucket/bucket/meta.hpp"           // meta_table
#include "vbucket/bucket/rules.hpp"          // opensora_v2_rule

namespace vbucket_test {

/// Q(a, x), the regularised upper incomplete gamma function (series below a + 1, Lentz's
/// continued fraction above): the chi-square tail.
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000 && term > sum * 1e-17; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  constexpr double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}
/// x with P(chi-square(df) > x) = p.
inline double chi2_critical(double df, double p) {
  double lo = 0, hi = 10 * df + 1000;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (gamma_q(df / 2, mid / 2) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

/// Histogram of bucket ids (no_bucket in the last slot).
inline std::vector<std::uint64_t> histogram(const std::vector<vbucket::bucket_id>& ids,
                                            std::size_t nb) {
  std::vector<std::uint64_t> h(nb + 1, 0);
  std::size_t invalid = 0;
  for (auto id : ids) {
    invalid += id == vbucket::invalid_sample;
    ++h[id >= 0 ? static_cast<std::size_t>(id) : nb];
  }
  CHECK(invalid == 0);
  return h;
}

/// The reference of the distribution tests: the histogram of `table` under the 2.0 rule
/// `rule` with Open-Sora's NumPy draws (seed 1234). Checks that the data set spreads over the
/// config: more than `min_used` buckets used, and over 1000 samples in no bucket.
inline std::vector<std::uint64_t> numpy_histogram(const vbucket::bucket_config& config,
                                                  const vbucket::meta_table& table,
                                                  const vbucket::opensora_v2_rule& rule,
                                                  std::size_t min_used) {
  const std::size_t nb = config.num_buckets();
  const auto h = histogram(
      vbucket::assign_all(config, table, rule, vbucket::numpy_source(vbucket::big_seed(1234), nb)),
      nb);
  std::size_t used = 0;
  for (std::size_t b = 0; b < nb; ++b) used += h[b] > 0;
  CHECK(used > min_used);
  CHECK(h[nb] > 1000);
  return h;
}

struct chi2_result {
  double statistic = 0;
  std::size_t df = 0;
};

/// Two-sample chi-square for equal totals: sum of (a - b)^2 / (a + b) over bins. Bins whose
/// expected count (a + b) / 2 is below 5 are pooled into one; if the pool itself is below 5 it
/// joins the smallest remaining bin.
inline chi2_result two_sample_chi2(const std::vector<std::uint64_t>& a,
                                   const std::vector<std::uint64_t>& b) {
  std::vector<std::pair<double, double>> bins;
  double pool_a = 0, pool_b = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = static_cast<double>(a[k]), y = static_cast<double>(b[k]);
    if ((x + y) / 2 < 5) {
      pool_a += x;
      pool_b += y;
    } else {
      bins.push_back({x, y});
    }
  }
  if (pool_a + pool_b > 0) {
    if ((pool_a + pool_b) / 2 >= 5 || bins.empty()) {
      bins.push_back({pool_a, pool_b});
    } else {
      auto smallest = std::min_element(bins.begin(), bins.end(), [](auto& l, auto& r) {
        return l.first + l.second < r.first + r.second;
      });
      smallest->first += pool_a;
      smallest->second += pool_b;
    }
  }
  chi2_result r;
  for (const auto& [x, y] : bins) r.statistic += (x - y) * (x - y) / (x + y);
  r.df = bins.size() - 1;
  return r;
}

}  // namespace vbucket_test
