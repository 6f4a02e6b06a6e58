/// Tests of vbucket/base/random.hpp: fast_source is deterministic, keyed by (seed, epoch, sample,
/// sub-stream), free of Open-Sora's epoch/sample seed collisions, draws in [0, 1), and
/// buckets a web-video-like data set with the same distribution as numpy_source.
#include "vbucket/base/random.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::sort
#include <cmath>      // std::exp, std::log, std::lgamma, std::round
#include <cstdint>    // std::uint64_t
#include <limits>     // quiet_NaN
#include <random>     // std::mt19937_64 (specified bit for bit by the standard)
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"

#include "vbucket_test/chi_square.hpp"
#include "vbucket_test/configs.hpp"

// histogram, numpy_histogram, two_sample_chi2, chi2_critical; opensora_v2_config.
using namespace vbucket_test;

namespace {

constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

/// SplitMix64 as published by Vigna (prng.di.unimi.it/splitmix64.c): the reference for
/// fast_stream, whose draw d is the (d+1)-th SplitMix64 output from its state.
struct splitmix64 {
  std::uint64_t x;
  std::uint64_t next() {
    std::uint64_t z = (x += kGamma);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

std::uint64_t odd_inverse(std::uint64_t a) {  // a * inv == 1 mod 2^64 (Newton's iteration)
  std::uint64_t inv = a;
  for (int i = 0; i < 6; ++i) inv *= 2 - a * inv;
  return inv;
}
std::uint64_t unxorshift(std::uint64_t y, unsigned s) {
  std::uint64_t x = y;
  for (unsigned i = 0; i < 64 / s + 1; ++i) x = y ^ (x >> s);
  return x;
}
/// The state z such that SplitMix64's output mixer maps z + gamma to `out`.
std::uint64_t state_for_output(std::uint64_t out) {
  std::uint64_t z = unxorshift(out, 31);
  z *= odd_inverse(0x94d049bb133111ebULL);
  z = unxorshift(z, 27);
  z *= odd_inverse(0xbf58476d1ce4e5b9ULL);
  z = unxorshift(z, 30);
  return z - kGamma;
}

/// A deterministic, web-video-like metadata table: mostly 16:9 and 9:16 clips at common
/// sizes and frame rates, some 4:3, square, 4K and odd sizes, log-uniform durations from half a
/// second to a minute, and 12% images. Only mt19937_64's raw output is used (its sequence is
/// fixed by the standard; the std distributions are not), so the table is the same everywhere.
vbucket::meta_table web_video_table(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto uniform = [&] { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
  auto below = [&](std::uint64_t k) { return gen() % k; };
  struct size_weight {
    std::int64_t h, w;
    double weight;
  };
  const size_weight sizes[] = {{1080, 1920, 0.30}, {720, 1280, 0.25},  {360, 640, 0.08},
                               {480, 854, 0.08},   {1920, 1080, 0.08}, {1280, 720, 0.06},
                               {1080, 1440, 0.03}, {2160, 3840, 0.04}, {256, 256, 0.02},
                               {480, 480, 0.02},   {0, 0, 0.04}};  // {0, 0}: any size
  const double fps_choices[] = {23.976, 24.0, 25.0, 29.97, 30.0, 50.0, 59.94, 60.0, 15.0, 12.0};
  vbucket::meta_table t;
  t.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    double pick = uniform();
    std::int64_t h = 0, w = 0;
    for (const auto& s : sizes) {
      h = s.h;
      w = s.w;
      if ((pick -= s.weight) < 0) break;
    }
    if (h == 0) {
      h = 64 + static_cast<std::int64_t>(below(1985));
      w = 64 + static_cast<std::int64_t>(below(1985));
    }
    if (uniform() < 0.12) {
      t.push_back({1, h, w, std::numeric_limits<double>::quiet_NaN()});
      continue;
    }
    const bool unknown_fps = uniform() < 0.01;
    const double fps = unknown_fps ? std::numeric_limits<double>::quiet_NaN()
                                   : fps_choices[below(std::size(fps_choices))];
    const double seconds = 0.5 * std::exp(uniform() * std::log(120.0));  // 0.5 s .. 60 s
    const auto frames =
        std::max<std::int64_t>(2, static_cast<std::int64_t>(seconds * (unknown_fps ? 24 : fps)));
    t.push_back({frames, h, w, fps});
  }
  return t;
}

/// A source whose draws are fast_source's, squeezed towards 0 by 5%: a small bias the
/// distribution test must notice.
struct biased_source {
  vbucket::fast_source inner;
  struct stream_type {
    vbucket::fast_stream s;
    double random() { return s.random() * 0.95; }
  };
  stream_type stream(std::uint64_t i, std::uint64_t sub) const { return {inner.stream(i, sub)}; }
};

}  // namespace

TEST_CASE("random: fast_source is SplitMix64 from a keyed state, and deterministic") {
  // fast_stream(s) yields SplitMix64's outputs from state s; SplitMix64 from 0 starts with
  // 0xe220a8397b1dcdaf (the well-known first output of splitmix64.c seeded with 0).
  vbucket::fast_stream zero(0);
  CHECK(zero.next_u64() == 0xe220a8397b1dcdafULL);
  for (std::uint64_t state : {0ULL, 1ULL, 0xdeadbeefULL, ~0ULL}) {
    vbucket::fast_stream s(state);
    splitmix64 ref{state};
    for (int d = 0; d < 10; ++d) CHECK(s.next_u64() == ref.next());
  }
  // random() is the top 53 bits scaled by 2^-53.
  vbucket::fast_stream s(42);
  splitmix64 ref{42};
  for (int d = 0; d < 10; ++d)
    CHECK(s.random() == static_cast<double>(ref.next() >> 11) / 9007199254740992.0);

  // The same key gives the same streams, whatever order they are asked for in.
  const vbucket::fast_source a(1234, 3), b(1234, 3);
  std::vector<double> forward, backward;
  for (std::uint64_t i = 0; i < 200; ++i) {
    auto st = a.stream(i, i % 5);
    for (int d = 0; d < 3; ++d) forward.push_back(st.random());
  }
  for (std::uint64_t i = 200; i-- > 0;) {
    auto st = b.stream(i, i % 5);
    std::vector<double> three;
    for (int d = 0; d < 3; ++d) three.push_back(st.random());
    backward.insert(backward.begin(), three.begin(), three.end());
  }
  CHECK(forward == backward);
  // draw(i, s, d) is the d-th draw of stream(i, s), computed directly.
  for (std::uint64_t i : {0ULL, 1ULL, 77ULL, ~0ULL}) {
    for (std::uint64_t sub : {0ULL, 1ULL, 1024ULL}) {
      auto st = a.stream(i, sub);
      for (std::uint64_t d = 0; d < 5; ++d) CHECK(a.draw(i, sub, d) == st.random());
    }
  }
  // It can run at compile time, to the same values.
  constexpr double at_compile_time = vbucket::fast_source(7, 8).draw(9, 10, 11);
  CHECK(at_compile_time == vbucket::fast_source(7, 8).draw(9, 10, 11));
  // Changing any part of the key changes the draws.
  const double base = a.draw(5, 2, 0);
  CHECK(vbucket::fast_source(1235, 3).draw(5, 2, 0) != base);
  CHECK(vbucket::fast_source(1234, 4).draw(5, 2, 0) != base);
  CHECK(a.draw(6, 2, 0) != base);
  CHECK(a.draw(5, 3, 0) != base);
  CHECK(a.draw(5, 2, 1) != base);
  CHECK(vbucket::fast_source(1234, 3).key() == a.key());
  CHECK(vbucket::fast_source(3, 1234).key() != a.key());
}

TEST_CASE("random: Open-Sora's numpy seeding collides across epochs; fast_source does not") {
  // Open-Sora seeds sample i of epoch e with (seed + e) + i * num_bucket, so sample i + 1 of
  // epoch e draws exactly what sample i of epoch e + num_bucket draws.
  constexpr std::uint64_t seed = 1234, nb = 141;
  for (std::uint64_t e : {0ULL, 1ULL, 5ULL}) {
    const vbucket::numpy_source epoch_e(vbucket::big_seed(seed + e), nb);
    const vbucket::numpy_source epoch_later(vbucket::big_seed(seed + e + nb), nb);
    const vbucket::fast_source fast_e(seed, e), fast_later(seed, e + nb);
    for (std::uint64_t i : {0ULL, 1ULL, 10ULL, 999ULL}) {
      for (std::uint64_t sub : {0ULL, 3ULL}) {
        CAPTURE(e);
        CAPTURE(i);
        auto x = epoch_e.stream(i + 1, sub);
        auto y = epoch_later.stream(i, sub);
        auto fx = fast_e.stream(i + 1, sub);
        auto fy = fast_later.stream(i, sub);
        for (int d = 0; d < 4; ++d) {
          CHECK(x.random() == y.random());
          CHECK(fx.random() != fy.random());
        }
      }
    }
  }
  // More broadly: over 100,000 samples the first draws of two epochs share no value and are
  // uncorrelated (|r| < 0.02 is more than 6 standard errors of 1 / sqrt(1e5)).
  const vbucket::fast_source e0(seed, 0), e1(seed, 1);
  constexpr std::size_t n = 100'000;
  std::vector<double> first0(n), first1(n);
  double sx = 0, sy = 0, sxy = 0, sxx = 0, syy = 0;
  std::size_t equal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = e0.draw(i, 0, 0), y = e1.draw(i, 0, 0);
    first0[i] = x;
    first1[i] = y;
    equal += x == y;
    sx += x;
    sy += y;
    sxy += x * y;
    sxx += x * x;
    syy += y * y;
  }
  const double dn = static_cast<double>(n);
  const double r = (sxy - sx * sy / dn) / std::sqrt((sxx - sx * sx / dn) * (syy - sy * sy / dn));
  CHECK(equal == 0);
  CHECK(std::abs(r) < 0.02);
  // Within an epoch, no two samples share a first draw (53-bit values: a collision among 1e5
  // would have probability about 5e-7).
  std::sort(first0.begin(), first0.end());
  CHECK(std::adjacent_find(first0.begin(), first0.end()) == first0.end());
}

TEST_CASE("random: draws are in [0, 1)") {
  // The extreme raw outputs: all ones maps to 1 - 2^-53, the largest double below 1; zero to 0.
  vbucket::fast_stream top(state_for_output(~0ULL));
  CHECK(top.random() == 1.0 - 0x1.0p-53);
  vbucket::fast_stream bottom(state_for_output(0));
  CHECK(bottom.random() == 0.0);
  // And a million ordinary draws of each source, with a sane mean.
  const vbucket::fast_source fast(99, 1);
  const vbucket::numpy_source numpy(vbucket::big_seed(99), 141);
  double fast_sum = 0, numpy_sum = 0;
  std::size_t outside = 0;
  constexpr std::size_t streams = 50'000, per_stream = 20;
  for (std::uint64_t i = 0; i < streams; ++i) {
    auto f = fast.stream(i, i % 7);
    auto g = numpy.stream(i, i % 7);
    for (std::size_t d = 0; d < per_stream; ++d) {
      const double x = f.random(), y = g.random();
      outside += !(x >= 0.0 && x < 1.0) + !(y >= 0.0 && y < 1.0);
      fast_sum += x;
      numpy_sum += y;
    }
  }
  CHECK(outside == 0);
  // Mean of 1e6 uniforms: standard error 0.289 / 1000; 0.002 is about 7 standard errors.
  const double total = streams * per_stream;
  CHECK(std::abs(fast_sum / total - 0.5) < 0.002);
  CHECK(std::abs(numpy_sum / total - 0.5) < 0.002);
}

TEST_CASE("random: fast_source buckets like numpy_source (two-sample chi-square, 1M samples)") {
  // Two independent samples of the same web-video-like distribution, one bucketed with each
  // source (on one shared table the samples would be paired, and the statistic too small).
  constexpr std::size_t n = 1'000'000;
  const vbucket::meta_table table_a = web_video_table(n, 0x5eed'0001);
  const vbucket::meta_table table_b = web_video_table(n, 0x5eed'0002);
  const vbucket::bucket_config config = opensora_v2_config();
  const std::size_t nb = config.num_buckets();
  REQUIRE(nb == 141);
  const vbucket::opensora_v2_rule rule{16.0};
  const auto fast_hist =
      histogram(vbucket::assign_all(config, table_a, rule, vbucket::fast_source(1234, 0)), nb);
  // The data set really spreads over the config: most buckets are used, and some samples fall
  // through to no bucket.
  const auto numpy_hist = numpy_histogram(config, table_b, rule, 100);

  // With these tables every one of the 141 buckets and "no bucket" expects at least 5 samples
  // (the smallest count is 12), so nothing is pooled: 142 bins, 141 degrees of freedom. The
  // chi-square critical value for p = 1e-6 at 141 degrees of freedom is 235.656 (computed by
  // chi2_critical below, and checked against mpmath's regularised incomplete gamma function).
  const chi2_result same = two_sample_chi2(fast_hist, numpy_hist);
  CHECK(same.df == 141);
  const double critical = chi2_critical(static_cast<double>(same.df), 1e-6);
  CHECK(critical == doctest::Approx(235.656).epsilon(1e-5));
  INFO("chi-square " << same.statistic << " with " << same.df << " df, critical " << critical);
  CHECK(same.statistic < critical);

  // The test has the power to see draws squeezed towards 0 by 5%.
  const auto biased_hist = histogram(
      vbucket::assign_all(config, table_a, rule, biased_source{vbucket::fast_source(1234, 0)}), nb);
  const chi2_result biased = two_sample_chi2(biased_hist, numpy_hist);
  INFO("biased chi-square " << biased.statistic << " with " << biased.df << " df");
  CHECK(biased.statistic > chi2_critical(static_cast<double>(biased.df), 1e-6));
}

TEST_CASE("random: the chi-square tail function") {
  // Closed forms: df = 2 has P(X > x) = exp(-x / 2); df = 1 has P(X > 3.841459) = 0.05.
  CHECK(gamma_q(1.0, 5.0) == doctest::Approx(std::exp(-5.0)).epsilon(1e-12));
  CHECK(chi2_critical(2, 1e-6) == doctest::Approx(-2 * std::log(1e-6)).epsilon(1e-9));
  CHECK(chi2_critical(1, 0.05) == doctest::Approx(3.841459).epsilon(1e-6));
  CHECK(chi2_critical(10, 0.05) == doctest::Approx(18.307038).epsilon(1e-6));
  // Pooling, by hand: bins 2 and 3 expect 1.5 and 2 (< 5) and pool to (5, 2), which still
  // expects only 3.5, so it joins the smallest bin, bin 0: (105, 92). Statistic
  // 13^2 / 197 + 10^2 / 210 = 1.334058, with 2 bins: 1 degree of freedom.
  const auto pooled = two_sample_chi2({100, 100, 2, 3}, {90, 110, 1, 1});
  CHECK(pooled.df == 1);
  CHECK(pooled.statistic == doctest::Approx(169.0 / 197 + 100.0 / 210).epsilon(1e-12));
  // A pool that is large enough is a bin of its own: (6, 4) expects 5.
  const auto own = two_sample_chi2({100, 100, 3, 3}, {90, 110, 2, 2});
  CHECK(own.df == 2);
  CHECK(own.statistic == doctest::Approx(100.0 / 190 + 100.0 / 210 + 4.0 / 10).epsilon(1e-12));
}
