/// Tests of vbucket/cache/cache_plan.hpp: the exact distributions against the rules' empirical
/// frequencies, the coverage selection against brute force, the cached rule (never an uncached
/// shape; its delivered distribution; a sampler over it resumes exactly), the window rule.
#include "vbucket/cache/cache_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal
#include <cmath>      // std::sqrt, std::abs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <map>        // std::map
#include <memory>     // std::make_shared
#include <vector>     // std::vector

#include "../../bench/synthetic.hpp"  // vbucket::bench::synthetic_table
#include "vbucket/bucket/meta.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/configs.hpp"

namespace {

using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::sample_meta;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A table whose samples cover the rules' paths: images of several sizes, short and long
/// videos, several frame rates, a too-small one and an invalid one.
std::vector<sample_meta> varied_samples() {
  std::vector<sample_meta> out;
  for (std::int64_t frames : {1, 3, 20, 40, 70, 100, 140, 300, 1000})
    for (auto [h, w] : {std::pair<std::int64_t, std::int64_t>{1080, 1920},
                        {720, 1280},
                        {1024, 1024},
                        {256, 256},
                        {1920, 1080}})
      for (double fps : {kNaN, 24.0, 60.0}) out.push_back({frames, h, w, frames == 1 ? kNaN : fps});
  out.push_back({100, 16, 16, 30.0});   // too small for every resolution
  out.push_back({0, 720, 1280, 30.0});  // invalid
  return out;
}

/// Every sample's counts per outcome (no_bucket under -1) over `epochs` epochs of `source_of`.
template <class Rule, class SourceOf>
void check_frequencies(const bucket_config& config, const Rule& rule,
                       const std::vector<sample_meta>& samples, std::uint64_t epochs,
                       SourceOf&& source_of) {
  std::vector<std::map<bucket_id, std::uint64_t>> counts(samples.size());
  for (std::uint64_t e = 0; e < epochs; ++e) {
    const auto source = source_of(e);
    for (std::size_t i = 0; i < samples.size(); ++i)
      ++counts[i][rule.assign(config, samples[i], i, source)];
  }
  const double n = static_cast<double>(epochs);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const vbucket::sample_distribution d = vbucket::bucket_distribution(rule, config, samples[i]);
    INFO("sample " << i << " (" << samples[i].num_frames << " frames, " << samples[i].height << "x"
                   << samples[i].width << ", fps " << samples[i].fps << ")");
    if (d.invalid) {
      CHECK(counts[i].size() == 1);
      CHECK(counts[i].begin()->first == vbucket::invalid_sample);
      continue;
    }
    std::map<bucket_id, double> p;
    double total = d.none;
    for (const auto& o : d.outcomes) {
      CHECK(o.probability > 0.0);
      p[o.bucket] += o.probability;
      total += o.probability;
    }
    p[vbucket::no_bucket] += d.none;
    CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
    // 5 sigma of a binomial count per outcome (+1 for the discreteness): a correct distribution
    // fails one of the ~10^3 cells with probability below 10^-3.
    for (const auto& [b, q] : p) {
      const double got = static_cast<double>(counts[i].count(b) ? counts[i].at(b) : 0);
      INFO("bucket " << b << ": p " << q << ", count " << got << " of " << n);
      CHECK(std::abs(got - n * q) <= 5.0 * std::sqrt(n * q * (1.0 - q)) + 1.0);
    }
    for (const auto& [b, c] : counts[i]) {
      INFO("drawn bucket " << b << " " << c << " times");
      CHECK(p.count(b) == 1);  // nothing drawn outside the distribution
    }
  }
}

}  // namespace

TEST_CASE("cache_plan: a long 1080p video under the Open-Sora 2.0 config, by hand") {
  const bucket_config config = vbucket_test::opensora_v2_config();
  const vbucket::opensora_v2_rule rule{16.0};
  // 1080p at 16 fps, 400 frames: 768px then 256px fit; every key fits.
  const auto d = vbucket::bucket_distribution(rule, config, sample_meta{400, 1080, 1920, 16.0});
  std::map<std::int64_t, double> at768, at256;  // frames -> probability
  for (const auto& o : d.outcomes) {
    (config.resolution_of(o.bucket).info.name == "768px"
         ? at768
         : at256)[config.frames_of(o.bucket).frames] += o.probability;
  }
  // 768px: 129 (stay 0.4, keep 0.2), 65 (reach 0.6, stay 0.5, keep 0.3), 33 (reach 0.3, stay
  // 0.5, keep 0.5); the walk leaves 768px with 0.32 + 0.21 + 0.075 + 0.15 (passed 33) = 0.755.
  CHECK(at768[129] == doctest::Approx(0.08));
  CHECK(at768[65] == doctest::Approx(0.09));
  CHECK(at768[33] == doctest::Approx(0.075));
  const double r = 0.755;
  // 256px: 129 (stay 0.7, keep 0.5), 97 (reach 0.3, stay 0.5, keep 0.5), 65 (reach 0.15).
  CHECK(at256[129] == doctest::Approx(r * 0.35));
  CHECK(at256[97] == doctest::Approx(r * 0.075));
  CHECK(at256[65] == doctest::Approx(r * 0.15));
  CHECK(at256.count(33) == 0);  // 65 always keeps: nothing reaches 33
  // Dropped: the refusals at 256px's 129 and 97.
  CHECK(d.none == doctest::Approx(r * (0.35 + 0.075)));
}

TEST_CASE("cache_plan: exact distributions equal the rules' empirical frequencies") {
  const std::vector<sample_meta> samples = varied_samples();
  SUBCASE("opensora-v2, fast draws") {
    for (const bucket_config& config :
         {vbucket_test::opensora_v2_config(), vbucket_test::draw_v2_config()})
      check_frequencies(config, vbucket::opensora_v2_rule{16.0}, samples, 4000,
                        [](std::uint64_t e) { return vbucket::fast_source(7, e); });
  }
  SUBCASE("opensora-v2, Open-Sora's NumPy draws") {
    const bucket_config config = vbucket_test::opensora_v2_config();
    check_frequencies(config, vbucket::opensora_v2_rule{16.0}, samples, 600, [&](std::uint64_t e) {
      return vbucket::numpy_source(vbucket::big_seed(e), config.num_buckets());
    });
  }
  SUBCASE("opensora-v1.2, NumPy and fast draws, frame interval 1 and 3") {
    const bucket_config config = vbucket_test::draw_v12_config();
    for (std::int64_t interval : {1, 3}) {
      const vbucket::opensora_v12_rule rule{interval};
      check_frequencies(config, rule, samples, 600, [&](std::uint64_t e) {
        return vbucket::numpy_source(vbucket::big_seed(e), config.num_buckets());
      });
      check_frequencies(config, rule, samples, 4000,
                        [](std::uint64_t e) { return vbucket::fast_source(3, e); });
    }
  }
}

TEST_CASE("cache_plan: the coverage selection is the fewest entries (brute force)") {
  const bucket_config config = vbucket_test::draw_v2_config();
  const vbucket::opensora_v2_rule rule{16.0};
  // Four samples with 1 to 4 outcomes each.
  const std::vector<sample_meta> table{
      {400, 1080, 1920, 16.0}, {1, 1080, 1920, kNaN}, {50, 720, 1280, 24.0}, {300, 300, 300, 25.0}};
  std::vector<double> q;  // every (sample, shape) probability, merged by shape
  std::vector<std::uint64_t> bytes;
  const vbucket::cache_cost_model cost{};
  double mass = 0.0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto d = vbucket::bucket_distribution(rule, config, table[i]);
    std::map<vbucket::cache_shape, double> by_shape;
    for (const auto& o : d.outcomes) by_shape[vbucket::shape_of(config, o.bucket)] += o.probability;
    for (const auto& [s, p] : by_shape) {
      q.push_back(p);
      bytes.push_back(cost.bytes(s));
      mass += p;
    }
  }
  REQUIRE(q.size() >= 6);
  REQUIRE(q.size() <= 16);
  const std::size_t m = q.size();
  for (double coverage : {0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 1.0}) {
    INFO("coverage " << coverage);
    std::size_t fewest = m + 1;
    for (std::uint32_t set = 0; set < (1u << m); ++set) {
      double covered = 0.0;
      std::size_t count = 0;
      for (std::size_t j = 0; j < m; ++j)
        if (set >> j & 1u) {
          covered += q[j];
          ++count;
        }
      if (covered >= coverage * mass * (1.0 - 1e-12) && count < fewest) fewest = count;
    }
    vbucket::cache_plan_options o;
    o.coverage = coverage;
    const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, o);
    CHECK(plan.chosen.files == fewest);
    CHECK(plan.entries.size() == fewest);
    CHECK(plan.chosen.coverage >= coverage * (1.0 - 1e-9));
    CHECK(plan.every_shape.files == m);
    CHECK(plan.every_shape.coverage == doctest::Approx(1.0));
    CHECK(plan.every_shape.tv_sample == doctest::Approx(0.0));
  }
  // A byte budget: never exceeded, and the best mass among subsets that fit is within one
  // entry's worth of the greedy's (fractional knapsack bound).
  for (std::uint64_t budget :
       {std::uint64_t{100000}, std::uint64_t{1} << 21, std::uint64_t{1} << 24}) {
    vbucket::cache_plan_options o;
    o.coverage = 1.0;
    o.budget_bytes = budget;
    const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, o);
    CHECK(plan.chosen.bytes <= budget);
    double best = 0.0;
    for (std::uint32_t set = 0; set < (1u << m); ++set) {
      double covered = 0.0;
      std::uint64_t b = 0;
      for (std::size_t j = 0; j < m; ++j)
        if (set >> j & 1u) {
          covered += q[j];
          b += bytes[j];
        }
      if (b <= budget && covered > best) best = covered;
    }
    double largest = 0.0;
    for (double p : q) largest = std::max(largest, p);
    CHECK(plan.chosen.coverage * mass >= best - largest - 1e-12);
  }
}

TEST_CASE("cache_plan: the cached rule never delivers an uncached shape") {
  const bucket_config config = vbucket_test::opensora_v2_config();
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::meta_table table = vbucket::bench::synthetic_table(3000, 5);
  vbucket::cache_plan_options o;
  o.coverage = 0.8;
  const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, o);
  const auto set = plan.cache_set_of();
  for (auto fallback : {vbucket::cache_fallback::nearest, vbucket::cache_fallback::drop}) {
    const vbucket::cached_rule cached(rule, set, fallback);
    std::uint64_t moved = 0, kept = 0;
    for (std::uint64_t e = 0; e < 20; ++e) {
      const vbucket::fast_source source(1, e);
      for (std::size_t i = 0; i < table.size(); ++i) {
        const bucket_id drawn = rule.assign(config, table[i], i, source);
        const bucket_id got = cached.assign(config, table[i], i, source);
        if (got < 0) {
          if (drawn >= 0 && fallback == vbucket::cache_fallback::nearest) CHECK(set->of(i).empty());
          continue;
        }
        bool in = false;
        for (const bucket_id c : set->of(i))
          in = in || vbucket::shape_of(config, c) == vbucket::shape_of(config, got);
        REQUIRE(in);
        (got == drawn ? kept : moved) += 1;
      }
    }
    CHECK(kept > 0);
    if (fallback == vbucket::cache_fallback::nearest) CHECK(moved > 0);
  }
  // The delivered distribution's TV per sample, averaged, is the plan's tv_sample.
  const vbucket::cached_rule cached(rule, set);
  double tv = 0.0;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto p = vbucket::bucket_distribution(rule, config, table[i], i);
    if (p.invalid) continue;
    tv += vbucket::total_variation(p, vbucket::bucket_distribution(cached, config, table[i], i));
    ++n;
  }
  CHECK(tv / static_cast<double>(n) == doctest::Approx(plan.chosen.tv_sample));
  CHECK(plan.chosen.tv_sample <= 1.0 - plan.chosen.coverage + 1e-9);
  CHECK(plan.chosen.tv_buckets <= plan.chosen.tv_sample + 1e-12);
}

TEST_CASE("cache_plan: the fallback's order") {
  using vbucket::cache_distance;
  using vbucket::cache_shape;
  const cache_shape drawn{65, 768, 768};
  const cache_distance fewer_frames = cache_distance::between(drawn, {33, 768, 768});
  const cache_distance smaller = cache_distance::between(drawn, {65, 256, 256});
  const cache_distance smaller_shorter = cache_distance::between(drawn, {33, 256, 256});
  const cache_distance longer = cache_distance::between(drawn, {129, 768, 768});
  const cache_distance larger = cache_distance::between(drawn, {1, 1024, 1024});
  CHECK(fewer_frames < smaller);
  CHECK(smaller < smaller_shorter);
  CHECK(smaller_shorter < longer);
  CHECK(cache_distance::between(drawn, {33, 768, 768}) <
        cache_distance::between(drawn, {5, 768, 768}));
  CHECK(longer.tier == 2);
  CHECK(larger.tier == 2);
}

TEST_CASE("cache_plan: a sampler over the cached rule resumes exactly, any world size") {
  const bucket_config config = vbucket_test::opensora_v2_config();
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::meta_table table = vbucket::bench::synthetic_table(4000, 9);
  vbucket::cache_plan_options o;
  o.coverage = 0.7;
  const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, o);
  const vbucket::cached_rule cached(rule, plan.cache_set_of());
  const auto set = plan.cache_set_of();
  constexpr std::uint32_t world = 2;
  constexpr std::uint64_t done = 3;
  vbucket::plan_state saved;
  std::vector<std::vector<std::vector<std::uint32_t>>> rest(world);
  for (std::uint32_t r = 0; r < world; ++r) {
    vbucket::batch_sampler s(table, config, cached, {.seed = 4, .world = world, .rank = r});
    s.set_epoch(1);
    std::uint64_t k = 0;
    for (const vbucket::batch& b : s) {
      for (const std::uint32_t i : b.indices) {  // every sample's shape is cached for it
        bool in = false;
        for (const bucket_id c : set->of(i))
          in = in ||
               vbucket::shape_of(config, c) == vbucket::cache_shape{b.frames, b.height, b.width};
        REQUIRE(in);
      }
      if (k++ >= done) rest[r].emplace_back(b.indices.begin(), b.indices.end());
    }
    s.advance(done);
    saved = s.state();
  }
  for (std::uint32_t r = 0; r < world; ++r) {
    vbucket::batch_sampler s(table, config, cached, {.seed = 4, .world = world, .rank = r});
    s.set_epoch(1);
    s.load_state(saved);
    std::size_t k = 0;
    for (const vbucket::batch& b : s) {
      REQUIRE(k < rest[r].size());
      CHECK(std::vector<std::uint32_t>(b.indices.begin(), b.indices.end()) == rest[r][k]);
      ++k;
    }
    CHECK(k == rest[r].size());
  }
  // Another world size: exactly the global batches not yet consumed, each once.
  vbucket::batch_sampler whole(table, config, cached, {.seed = 4});
  whole.set_epoch(1);
  const vbucket::epoch_plan global = whole.plan();
  std::vector<int> seen(global.num_batches(), 0);
  for (std::uint32_t r = 0; r < 3; ++r) {
    vbucket::batch_sampler s(table, config, cached, {.seed = 4, .world = 3, .rank = r});
    s.set_epoch(1);
    s.load_state(saved);
    for (const vbucket::batch& b : s) {
      if (b.repeat) continue;
      REQUIRE(b.position < global.num_batches());
      ++seen[b.position];
      CHECK(std::ranges::equal(b.indices, global.global_batch(b.position).indices));
    }
  }
  for (std::uint64_t p = 0; p < global.num_batches(); ++p)
    CHECK(seen[p] == (p < done * world ? 0 : 1));
}

TEST_CASE("cache_plan: the window depends on (seed, sample) only and fits the clip") {
  for (std::uint64_t sample = 0; sample < 200; ++sample)
    for (std::int64_t total : {1, 5, 33, 34, 100, 1000})
      for (std::int64_t frames : {1, 5, 33})
        for (std::int64_t interval : {1, 2, 3}) {
          const auto s = vbucket::cache_start_frame(11, sample, total, frames, interval);
          const bool fits = (frames - 1) * interval + 1 <= total;
          REQUIRE(s.has_value() == fits);
          if (!fits) continue;
          CHECK(*s >= 0);
          CHECK(*s + (frames - 1) * interval < total);
          CHECK(*s <= std::max<std::int64_t>(0, total - frames * interval - 1));
          CHECK(s == vbucket::cache_start_frame(11, sample, total, frames, interval));
        }
  // Spread: over many samples every start of a small range occurs (starts 0 .. 17 - 8 - 1).
  std::vector<int> seen(9, 0);
  for (std::uint64_t sample = 0; sample < 800; ++sample) {
    const std::int64_t start = *vbucket::cache_start_frame(3, sample, 17, 8, 1);
    REQUIRE(start >= 0);
    REQUIRE(start < static_cast<std::int64_t>(seen.size()));
    ++seen[static_cast<std::size_t>(start)];
  }
  for (int c : seen) CHECK(c > 50);
  CHECK(vbucket::cache_key{3, {33, 256, 256}, 7, 2, "vae"}.file_name() ==
        "vae/3_33x256x256_s7_i2.npy");
}

TEST_CASE("cache_plan: stratified selection keeps the bucket histogram with one shape a sample") {
  const bucket_config config = vbucket_test::opensora_v2_config();
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::meta_table table = vbucket::bench::synthetic_table(20000, 3);
  vbucket::cache_plan_options o;
  o.selection = vbucket::cache_selection::stratified;
  const vbucket::cache_plan plan = vbucket::plan_cache(config, table, rule, o);
  // One entry per sample that can get a bucket, none for the others.
  std::vector<int> entries(table.size(), 0);
  for (const auto& e : plan.entries) ++entries[static_cast<std::size_t>(e.key.sample)];
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto d = vbucket::bucket_distribution(rule, config, table[i]);
    CHECK(entries[i] == (d.outcomes.empty() ? 0 : 1));
  }
  // The epoch's bucket histogram, computed here from the entries: each sample delivers all its
  // bucketed mass at its one cached bucket. Its TV to the rule's is the plan's tv_buckets, far
  // below the most-probable-shape baseline's.
  std::vector<double> rule_hist(config.num_buckets(), 0.0), got(config.num_buckets(), 0.0);
  double samples = 0.0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto d = vbucket::bucket_distribution(rule, config, table[i]);
    if (d.invalid) continue;
    samples += 1.0;
    for (const auto& o2 : d.outcomes)
      rule_hist[static_cast<std::size_t>(o2.bucket)] += o2.probability;
  }
  for (const auto& e : plan.entries) {
    const auto d = vbucket::bucket_distribution(rule, config, table[e.key.sample]);
    got[static_cast<std::size_t>(e.bucket)] += 1.0 - d.none;
  }
  double tv = 0.0;
  for (std::size_t b = 0; b < got.size(); ++b) tv += std::abs(got[b] - rule_hist[b]);
  tv = 0.5 * tv / samples;
  CHECK(plan.chosen.tv_buckets == doctest::Approx(tv).epsilon(1e-9));
  CHECK(plan.chosen.tv_buckets < 0.01);
  CHECK(plan.one_per_sample.tv_buckets > 0.1);
  CHECK(plan.chosen.shapes_per_sample <= 1.0);
  // Unbiased per sample: over seeds, a sample's shape frequencies follow its distribution
  // (a long 1080p video among 40 equal ones: the class is the same for every seed).
  std::vector<sample_meta> same(40, sample_meta{400, 1080, 1920, 16.0});
  const auto d = vbucket::bucket_distribution(rule, config, same[0]);
  std::map<bucket_id, double> freq;
  constexpr int seeds = 300;
  for (int seed = 0; seed < seeds; ++seed) {
    o.seed = static_cast<std::uint64_t>(seed);
    const auto p = vbucket::plan_cache(config, same, rule, o);
    REQUIRE(p.entries.size() == same.size());
    for (const auto& e : p.entries)
      if (e.key.sample == 7) freq[e.bucket] += 1.0 / seeds;
  }
  const double mass = 1.0 - d.none;
  for (const auto& o2 : d.outcomes) {
    const double q = o2.probability / mass;
    INFO("bucket " << o2.bucket << ": q " << q << ", frequency " << freq[o2.bucket]);
    CHECK(std::abs(freq[o2.bucket] - q) <= 5.0 * std::sqrt(q * (1.0 - q) / seeds) + 1e-9);
  }
}
