/// Tests of vbucket/eigen/cost_model.hpp: least-squares fits of the memory and step-time
/// models (recovery, residuals, refusal when the points cannot identify the model), batch
/// sizes from a fitted model, rescaling a config, and the batch-size search around synthetic
/// probes (known costs + noise + a hard OOM threshold): binary vs model-assisted.
#include "vbucket/eigen/cost_model.hpp"

#include <doctest/doctest.h>

#include <cmath>        // std::abs, std::isnan
#include <cstdint>      // std::int64_t, std::uint64_t
#include <cstdio>       // std::snprintf
#include <limits>       // std::numeric_limits
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#define VBUCKET_COST_MODEL_TEST_JSON 1
#include "vbucket/json/bucket_config.hpp"
#else
#define VBUCKET_COST_MODEL_TEST_JSON 0
#endif

#include "vbucket_test/errors.hpp"

namespace {

using vbucket::eigen::cost_model;
using vbucket::eigen::cost_point;
using vbucket::eigen::probe_result;
using vbucket::eigen::profile_point;
using vbucket::eigen::search_mode;

using vbucket_test::contains;
using vbucket_test::error_message;

/// splitmix64: a tiny deterministic noise source.
struct noise_source {
  std::uint64_t state = 0x5eed;
  /// Uniform in [-1, 1).
  double next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }
};

/// A synthetic GPU: known memory and step-time costs (the model's form, optionally plus a
/// term outside it), measurement noise, and a hard OOM threshold on the true memory.
struct synthetic_gpu {
  cost_model memory{22.0, 4e-4, 1e-9};  // GiB
  cost_model time{0.4, 6e-6, 6e-11};    // seconds
  double capacity_gib = 80.0;
  double memory_noise_gib = 0.02;    // uniform ± (allocator rounding)
  double time_noise_seconds = 5e-4;  // uniform ± (a few steps averaged)
  double off_model_gib = 0.0;        // × log(tokens): a cost outside the model's form
  noise_source noise{};
  std::int64_t probes = 0;

  [[nodiscard]] double true_memory(std::int64_t tokens, std::int64_t bs) const {
    return memory.predict(tokens, bs) +
           off_model_gib * std::log(static_cast<double>(tokens)) * static_cast<double>(bs);
  }
  [[nodiscard]] double true_time(std::int64_t tokens, std::int64_t bs) const {
    return time.predict(tokens, bs);
  }
  probe_result operator()(const vbucket::batch_bucket& b, std::int64_t bs) {
    ++probes;
    const double m = true_memory(b.tokens, bs);
    if (m > capacity_gib) return probe_result::out_of_memory();
    return {false, m + memory_noise_gib * noise.next(),
            true_time(b.tokens, bs) + time_noise_seconds * noise.next()};
  }

  /// The true optimum: the largest batch in [1, max_batch] that fits `limit`.
  [[nodiscard]] std::int64_t best_memory(std::int64_t tokens, double limit,
                                         std::int64_t max_batch) const {
    std::int64_t best = 0;
    for (std::int64_t b = 1; b <= max_batch; ++b)
      if (true_memory(tokens, b) <= std::min(limit, capacity_gib)) best = b;
    return best;
  }
  /// The true optimum in time mode: the fitting batch closest to `target` seconds.
  [[nodiscard]] std::int64_t best_time(std::int64_t tokens, double target, double limit,
                                       std::int64_t max_batch) const {
    const std::int64_t cap = best_memory(tokens, limit, max_batch);
    std::int64_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (std::int64_t b = 1; b <= cap; ++b) {
      const double d = std::abs(true_time(tokens, b) - target);
      if (d < best_d) {
        best_d = d;
        best = b;
      }
    }
    return best;
  }
};

static_assert(vbucket::eigen::batch_probe<synthetic_gpu>);
static_assert(!vbucket::eigen::batch_probe<int>);

std::string format(const char* f, double v) {
  char text[64];
  std::snprintf(text, sizeof text, f, v);
  return text;
}

}  // namespace

TEST_CASE("fit: recovers the coefficients and reports residuals") {
  const cost_model truth{22.0, 4e-4, 1e-9};
  std::vector<cost_point> points;
  for (std::int64_t tokens : {144, 3744, 23530, 92310})
    for (std::int64_t bs : {1, 2, 4}) points.push_back({tokens, bs, truth.predict(tokens, bs)});

  SUBCASE("exact data: exact coefficients, zero residuals") {
    const auto fit = vbucket::eigen::fit_cost_model(points, "memory model", 'm');
    CHECK(fit.model.fixed == doctest::Approx(22.0).epsilon(1e-9));
    CHECK(fit.model.linear == doctest::Approx(4e-4).epsilon(1e-9));
    CHECK(fit.model.quadratic == doctest::Approx(1e-9).epsilon(1e-9));
    CHECK(fit.points == points.size());
    CHECK(fit.residuals.size() == points.size());
    CHECK(fit.rms_residual < 1e-9);
    CHECK(fit.r_squared == doctest::Approx(1.0));
    // Column scaling keeps the problem well conditioned although the raw columns span
    // 1 to 3.4e10.
    CHECK(fit.condition < 1e3);
  }
  SUBCASE("noisy data: residuals match the noise") {
    noise_source noise;
    for (auto& p : points) p.value += 0.05 * noise.next();
    const auto fit = vbucket::eigen::fit_cost_model(points, "memory model", 'm');
    CHECK(fit.model.fixed == doctest::Approx(22.0).epsilon(0.01));
    CHECK(fit.model.linear == doctest::Approx(4e-4).epsilon(0.02));
    CHECK(fit.rms_residual > 0.0);
    CHECK(fit.rms_residual < 0.05);
    CHECK(fit.max_abs_residual <= 0.1);
    double sum = 0.0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      CHECK(fit.residuals[i] ==
            doctest::Approx(points[i].value -
                            fit.model.predict(points[i].tokens, points[i].batch_size)));
      sum += fit.residuals[i];
    }
    CHECK(std::abs(sum) < 1e-9);  // least squares with an intercept: residuals sum to 0
  }
}

TEST_CASE("fit: refuses points that cannot identify the model") {
  SUBCASE("too few points") {
    const std::vector<cost_point> two = {{100, 1, 10.0}, {200, 1, 12.0}};
    CHECK(error_message([&] { (void)vbucket::eigen::fit_cost_model(two, "memory model", 'm'); }) ==
          "memory model: 2 points cannot identify the 3 coefficients (m0, m1, m2); profile at "
          "least 3 points at 2 or more token counts");
    CHECK(contains(error_message([] { (void)vbucket::eigen::fit_cost_model({}); }), "0 points"));
  }
  SUBCASE("all from one token count") {
    const std::vector<cost_point> one = {{23530, 1, 30.0}, {23530, 2, 40.0}, {23530, 4, 60.0}};
    CHECK(
        error_message([&] { (void)vbucket::eigen::fit_cost_model(one, "step-time model", 't'); }) ==
        "step-time model: every point has 23530 tokens, so the per-token terms cannot be "
        "told apart; profile at least 2 token counts (other resolutions or frame counts)");
  }
  SUBCASE("rank deficient: bs · tokens is the same everywhere") {
    const std::vector<cost_point> flat = {{100, 2, 10.0}, {200, 1, 12.0}, {100, 2, 10.5}};
    const auto msg =
        error_message([&] { (void)vbucket::eigen::fit_cost_model(flat, "memory model", 'm'); });
    CHECK(contains(msg,
                   "memory model: the points cannot identify the model: the columns 1, "
                   "bs·tokens, bs·tokens² are linearly dependent over them"));
  }
  SUBCASE("bad points are named") {
    const std::vector<cost_point> bad = {{100, 1, 1.0}, {100, 0, 1.0}, {200, 1, 1.0}};
    CHECK(error_message([&] { (void)vbucket::eigen::fit_cost_model(bad, "memory model"); }) ==
          "memory model: point 2 (tokens 100, batch size 0): batch size must be positive");
    const std::vector<cost_point> nan = {
        {100, 1, 1.0}, {100, 2, std::numeric_limits<double>::quiet_NaN()}, {200, 1, 1.0}};
    CHECK(error_message([&] { (void)vbucket::eigen::fit_cost_model(nan, "memory model"); }) ==
          "memory model: point 2 (tokens 100, batch size 2): the measured value is not finite");
  }
  SUBCASE("profiles: OOM points are left out, missing step times too") {
    const std::vector<profile_point> profile = {
        {1000, 1, false, 10.0, 1.0},
        {1000, 8, true, 0.0, 0.0},
        {2000, 1, false, 11.0, 1.5},
        {2000, 2, false, 12.0, std::numeric_limits<double>::quiet_NaN()}};
    CHECK(vbucket::eigen::fit_memory_model(profile).points == 3);
    CHECK(contains(error_message([&] { (void)vbucket::eigen::fit_time_model(profile); }),
                   "step-time model: 2 points cannot identify"));
  }
}

TEST_CASE("batch sizes from a fitted model") {
  const cost_model memory{20.0, 1.0, 0.0};  // 20 GiB + 1 GiB per token per sample
  CHECK(vbucket::eigen::largest_batch_within(memory, 2, 80.0) == 30);  // exactly 80
  CHECK(vbucket::eigen::largest_batch_within(memory, 2, 79.9) == 29);
  CHECK(vbucket::eigen::largest_batch_within(memory, 2, 80.0, 16) == 16);
  CHECK(vbucket::eigen::largest_batch_within(memory, 61, 80.0) == 0);
  CHECK(vbucket::eigen::largest_batch_within(memory, 60, 80.0) == 1);
  CHECK(vbucket::eigen::largest_batch_within(cost_model{0.0, 1e-3, 0.0}, 1, 1e300) ==
        vbucket::bucket_config::max_batch);
  CHECK(error_message([] {
          (void)vbucket::eigen::largest_batch_within(cost_model{20.0, -1.0, 0.0}, 2, 80.0);
        }) ==
        "memory model predicts no growth with the batch size at 2 tokens (-2 GiB per "
        "sample)");

  const cost_model time{1.0, 0.5, 0.0};  // 1 s + 0.5 s per token per sample
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.0, 100) == 4);
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.2, 100) == 4);
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.25, 100) == 4);  // tie: the smaller
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.3, 100) == 5);
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.0, 3) == 3);  // the memory cap
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 0.1, 100) == 1);
  CHECK(vbucket::eigen::batch_closest_to_time(time, 1, 3.0, 0) == 0);

  CHECK(vbucket::eigen::memory_budget{80.0, 0.05}.limit() == doctest::Approx(76.0));
  CHECK(error_message([] {
          (void)vbucket::eigen::memory_budget{0.0, 0.0}.limit();
        }) == "memory budget must be a positive number of GiB, got 0");
  CHECK(error_message([] {
          (void)vbucket::eigen::memory_budget{80.0, 1.0}.limit();
        }) == "memory margin must be in [0, 1), got 1");
}

TEST_CASE("rescaling a config from a profile") {
  synthetic_gpu gpu;
  gpu.memory = {2.0, 3e-4, 1e-9};  // a smaller model, so that 360p:204 fits 24 GB
  gpu.memory_noise_gib = 0.0;
  gpu.time_noise_seconds = 0.0;
  vbucket::user_tables tables;
  tables.add("360p", 360 * 640, vbucket::aspect_table({{"0.56", 0.5625, 360, 640}}));
  const std::vector<vbucket::bucket_spec> specs = {{"360p", 1, 0.2, {}, 141},
                                                   {"360p", 51, 0.15, {}, 8},
                                                   {"360p", 102, 0.15, 0.33, 4},
                                                   {"360p", 204, 0.15, 0.1, 2},
                                                   {"360p", 408, 0.0, {}, std::nullopt}};
  const vbucket::bucket_config cfg(specs, tables);
  const auto buckets = vbucket::batch_buckets(cfg);
  // A profile on the 80 GiB device: each enabled bucket at 1 and 2, and one OOM.
  std::vector<profile_point> profile;
  for (const auto& b : buckets) {
    if (!b.enabled()) continue;
    for (std::int64_t bs : {1, 2}) {
      const auto r = gpu(b, bs);
      profile.push_back({b.tokens, bs, r.oom, r.peak_memory_gib, r.step_seconds});
    }
  }
  vbucket::eigen::rescale_options o;

  SUBCASE("fill memory on an 80 GB and a 24 GB device") {
    for (double gib : {80.0, 24.0}) {
      o.budget = {gib, 0.05};
      const auto r = vbucket::eigen::rescale_batch_sizes(buckets, profile, o);
      CHECK(r.limit_gib == doctest::Approx(gib * 0.95));
      CHECK(r.memory.rms_residual < 1e-9);
      REQUIRE(r.buckets.size() == buckets.size());
      for (const auto& rb : r.buckets) {
        if (!rb.bucket.enabled()) {
          CHECK(rb.new_batch_size == 0);  // disabled stays disabled
          continue;
        }
        CHECK(rb.new_batch_size == gpu.best_memory(rb.bucket.tokens, r.limit_gib, 1 << 20));
        CHECK(rb.predicted_memory_gib <= r.limit_gib);
        CHECK(rb.predicted_seconds ==
              doctest::Approx(gpu.true_time(rb.bucket.tokens, rb.new_batch_size)));
      }
    }
  }
  SUBCASE("match a reference bucket's step time, never above the memory limit") {
    o.budget = {80.0, 0.0};
    o.reference = vbucket::find_batch_bucket(buckets, "360p", 102);
    const auto r = vbucket::eigen::rescale_batch_sizes(buckets, profile, o);
    const std::int64_t ref_bs = gpu.best_memory(buckets[*o.reference].tokens, 80.0, 1 << 20);
    CHECK(r.buckets[*o.reference].new_batch_size == ref_bs);
    CHECK(r.reference_seconds ==
          doctest::Approx(gpu.true_time(buckets[*o.reference].tokens, ref_bs)));
    for (const auto& rb : r.buckets) {
      if (!rb.bucket.enabled()) continue;
      CHECK(rb.new_batch_size ==
            gpu.best_time(rb.bucket.tokens, r.reference_seconds, 80.0, 1 << 20));
    }
    // The image bucket would need more than memory allows for the reference's step time.
    const auto image = vbucket::find_batch_bucket(buckets, "360p", 1);
    CHECK(r.buckets[image].new_batch_size == gpu.best_memory(buckets[image].tokens, 80.0, 1 << 20));
  }
  SUBCASE("a profiled OOM caps the batch when the limit is within the profiled peaks") {
    const auto image = vbucket::find_batch_bucket(buckets, "360p", 1);
    profile.push_back({buckets[image].tokens, 40, true, 0.0, 0.0});
    o.budget = {24.0, 0.0};  // below the profile's largest peak
    auto r = vbucket::eigen::rescale_batch_sizes(buckets, profile, o);
    CHECK(r.buckets[image].new_batch_size == 39);
    CHECK(r.buckets[image].capped_by_oom);
    o.budget = {200.0, 0.0};  // a bigger device: the OOM says nothing
    r = vbucket::eigen::rescale_batch_sizes(buckets, profile, o);
    CHECK(r.buckets[image].new_batch_size > 40);
    CHECK_FALSE(r.buckets[image].capped_by_oom);
  }
  SUBCASE("errors") {
    o.budget = {24.0, 0.05};
    o.reference = vbucket::find_batch_bucket(buckets, "360p", 408);
    CHECK(error_message([&] { (void)vbucket::eigen::rescale_batch_sizes(buckets, profile, o); }) ==
          "reference bucket 360p:408 is disabled (its batch size is null)");
    o.reference.reset();
    o.budget = {15.0, 0.0};
    CHECK(contains(
        error_message([&] { (void)vbucket::eigen::rescale_batch_sizes(buckets, profile, o); }),
        "bucket 360p:204 (45900 tokens) does not fit in 15 GiB with margin 0 (15 GiB) even at "
        "batch size 1 (predicted"));
    const std::vector<profile_point> flat = {profile[0], profile[1]};
    CHECK(contains(
        error_message([&] { (void)vbucket::eigen::rescale_batch_sizes(buckets, flat, o); }),
        "memory model: 2 points cannot identify"));
  }
}

TEST_CASE("search: small configs, edge cases and errors") {
  vbucket::user_tables tables;
  tables.add("r", 256 * 256, vbucket::aspect_table({{"1:1", 1.0, 256, 256}}));
  const std::vector<vbucket::bucket_spec> specs = {{"r", 1, 1.0, {}, 64},
                                                   {"r", 33, 0.5, {}, 8},
                                                   {"r", 129, 0.5, {}, 2},
                                                   {"r", 4097, 0.0, {}, std::nullopt}};
  const vbucket::bucket_config cfg(specs, tables);
  auto buckets = vbucket::batch_buckets(cfg);

  for (const auto mode : {search_mode::binary, search_mode::model_assisted}) {
    CAPTURE(static_cast<int>(mode));
    synthetic_gpu gpu;
    vbucket::eigen::search_options o;
    o.mode = mode;
    o.budget = {80.0, 0.0};
    const auto r = vbucket::eigen::search_batch_sizes(buckets, gpu, o);
    CHECK(r.probes == gpu.probes);
    CHECK(r.profile.size() == static_cast<std::size_t>(r.probes));
    REQUIRE(r.buckets.size() == buckets.size());
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      if (!buckets[i].enabled()) {
        CHECK(r.buckets[i].batch_size == 0);
        CHECK(r.buckets[i].probes == 0);
        continue;
      }
      const auto truth = gpu.best_memory(buckets[i].tokens, 80.0, o.max_batch);
      CHECK(std::abs(r.buckets[i].batch_size - truth) <= 1);
      CHECK(r.buckets[i].measured.peak_memory_gib <= 80.0);
    }
  }
  SUBCASE("a bucket that fits nowhere gets 0") {
    buckets[0].batch_size = 1;  // enable r:4097 (1025 latent frames × 256)
    for (const auto mode : {search_mode::binary, search_mode::model_assisted}) {
      synthetic_gpu gpu;
      vbucket::eigen::search_options o;
      o.mode = mode;
      o.budget = {80.0, 0.0};
      const auto r = vbucket::eigen::search_batch_sizes(buckets, gpu, o);
      CHECK(r.buckets[0].batch_size == 0);
    }
  }
  SUBCASE("answers above max_batch are clamped") {
    synthetic_gpu gpu;
    vbucket::eigen::search_options o;
    o.budget = {80.0, 0.0};
    o.max_batch = 16;
    const auto r = vbucket::eigen::search_batch_sizes(buckets, gpu, o);
    CHECK(r.buckets[3].batch_size == 16);
  }
  SUBCASE("errors") {
    synthetic_gpu gpu;
    vbucket::eigen::search_options o;
    CHECK(error_message([&] { (void)vbucket::eigen::search_batch_sizes(buckets, gpu, o); }) ==
          "model-assisted batch-size search needs a finite memory budget");
    o.budget = {80.0, 0.0};
    o.reference = 0;
    CHECK(error_message([&] { (void)vbucket::eigen::search_batch_sizes(buckets, gpu, o); }) ==
          "batch-size search: reference bucket r:4097 is disabled");
    o.reference.reset();
    o.min_batch = 0;
    CHECK(
        contains(error_message([&] { (void)vbucket::eigen::search_batch_sizes(buckets, gpu, o); }),
                 "need 1 <= min_batch <= max_batch"));
    o.min_batch = 1;
    auto bad_probe = [](const vbucket::batch_bucket&, std::int64_t) {
      return probe_result{false, std::numeric_limits<double>::quiet_NaN(), 1.0};
    };
    CHECK(contains(
        error_message([&] { (void)vbucket::eigen::search_batch_sizes(buckets, bad_probe, o); }),
        "returned a negative or non-finite peak memory or step time"));
  }
}

#if VBUCKET_COST_MODEL_TEST_JSON
TEST_CASE("search over the Open-Sora v1.2 config: binary vs model-assisted") {
  const auto cfg = vbucket::json::load_bucket_config(
      std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v12.json",
      vbucket::opensora_v12_tables{});
  const auto buckets = vbucket::batch_buckets(cfg);
  std::size_t enabled = 0;
  for (const auto& b : buckets) enabled += b.enabled() ? 1u : 0u;
  REQUIRE(enabled == 37);

  const auto reference = vbucket::find_batch_bucket(buckets, "240p", 102);
  for (const bool time_mode : {false, true}) {
    for (const double off_model : {0.0, 2e-4}) {
      CAPTURE(time_mode);
      CAPTURE(off_model);
      std::int64_t probes[2] = {0, 0};
      for (const auto mode : {search_mode::binary, search_mode::model_assisted}) {
        synthetic_gpu gpu;
        gpu.off_model_gib = off_model;
        vbucket::eigen::search_options o;
        o.mode = mode;
        o.budget = {80.0, 0.0};
        if (time_mode) o.reference = reference;
        const auto r = vbucket::eigen::search_batch_sizes(buckets, gpu, o);
        probes[mode == search_mode::binary ? 0 : 1] = r.probes;
        CHECK(r.probes == gpu.probes);
        int misses = 0, fallbacks = 0;
        for (std::size_t i = 0; i < buckets.size(); ++i) {
          const auto& b = buckets[i];
          if (!b.enabled()) {
            CHECK(r.buckets[i].batch_size == 0);
            continue;
          }
          std::int64_t truth = gpu.best_memory(b.tokens, 80.0, o.max_batch);
          if (time_mode && i != reference) {
            // Relative to the reference's true step time at the batch the search found.
            const double target =
                gpu.true_time(buckets[reference].tokens, r.buckets[reference].batch_size);
            truth = gpu.best_time(b.tokens, target, 80.0, o.max_batch);
          }
          CAPTURE(b.name());
          CAPTURE(truth);
          CHECK(std::abs(r.buckets[i].batch_size - truth) <= 1);
          misses += r.buckets[i].batch_size != truth ? 1 : 0;
          fallbacks += r.buckets[i].fell_back ? 1 : 0;
        }
        std::string line =
            std::string(mode == search_mode::binary ? "binary        " : "model-assisted") +
            (time_mode ? " (time mode)  " : " (memory mode)") +
            (off_model > 0.0 ? " off-model" : "          ") + ": probes " +
            std::to_string(r.probes) + ", off by one " + std::to_string(misses);
        if (mode == search_mode::model_assisted) {
          line += ", fell back " + std::to_string(fallbacks);
          REQUIRE(r.memory_fit.has_value());
          line += "; memory fit rms " + format("%.4f", r.memory_fit->rms_residual) + " GiB (max " +
                  format("%.4f", r.memory_fit->max_abs_residual) + ", " +
                  std::to_string(r.memory_fit->points) + " points)";
          if (r.time_fit)
            line += ", time fit rms " + format("%.2e", r.time_fit->rms_residual) + " s";
        }
        MESSAGE(line);
      }
      CHECK(probes[1] * 10 <= probes[0] * 4);  // model-assisted needs <= 40 % of the probes
    }
  }
}
#endif

TEST_CASE("packed token budget from a fitted memory model") {
  const cost_model m{10.0, 0.001, 1e-7};
  const double limit = 70.0;
  const std::int64_t largest = 5000;
  const double b = vbucket::eigen::packed_token_budget(m, limit, largest);
  // Worst case at the budget: samples all of the largest size, b tokens in all.
  const double samples = b / static_cast<double>(largest);
  CHECK(m.fixed + samples * m.per_sample(largest) == doctest::Approx(limit));
  // Smaller samples of the same total cost less (the quadratic term is per sample).
  CHECK(m.fixed + 2.0 * samples * m.per_sample(largest / 2) < limit);
  CHECK_THROWS_WITH_AS(vbucket::eigen::packed_token_budget(m, 9.0, largest),
                       doctest::Contains("not above the model's fixed part"), vbucket::error);
  CHECK_THROWS_AS(vbucket::eigen::packed_token_budget(cost_model{1.0, 0.0, 0.0}, 9.0, largest),
                  vbucket::error);
  CHECK_THROWS_AS(vbucket::eigen::packed_token_budget(m, limit, 0), vbucket::error);
}
