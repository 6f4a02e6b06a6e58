/// Tests of vbucket/bucket/compiled_rule.hpp: compiled_v2_rule's outcome tables equal the
/// probabilities of opensora_v2_rule's decision tree (enumerated exactly, no Monte Carlo), its
/// assignments follow the same distribution as opensora_v2_rule + numpy_source (two-sample
/// chi-square over a million synthetic samples), and it handles invalid metadata and threads.
#include "vbucket/bucket/compiled_rule.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::sort, std::unique, std::min_element
#include <cmath>      // std::exp, std::log, std::lgamma, std::abs, std::nextafter
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t, std::int64_t
#include <iterator>   // std::size
#include <limits>     // quiet_NaN
#include <map>        // std::map
#include <optional>   // std::nullopt
#include <string>     // std::string
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "../../bench/synthetic.hpp"  // vbucket::bench::synthetic_table
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket_test/chi_square.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"

namespace {

std::string data_path(const char* file) { return std::string(VBUCKET_TEST_DATA_DIR) + "/" + file; }

/// Exact enumeration of opensora_v2_rule's decision tree. Every comparison the rule makes is of
/// a draw with a probability of the config, so its behaviour depends only on which interval
/// between consecutive distinct probabilities each draw falls in. A scripted source replays a
/// prefix of interval choices (as the interval's midpoint) and notes when the rule asks for one
/// more draw; a depth-first search over prefixes then visits every path once, and a path's
/// probability is the product of its intervals' lengths.
struct interval_source {
  const std::vector<double>* values;  // the midpoint of each interval
  const std::vector<std::size_t>* prefix;
  bool* wanted_more;
  struct stream_type {
    const interval_source* s;
    std::size_t next = 0;
    double random() {
      if (next < s->prefix->size()) return (*s->values)[(*s->prefix)[next++]];
      *s->wanted_more = true;
      return (*s->values)[0];
    }
  };
  stream_type stream(std::uint64_t, std::uint64_t) const { return {this, 0}; }
};

/// Outcome probabilities of opensora_v2_rule for one sample, keyed by bucket id (no_bucket
/// included), over every path of its decision tree.
std::map<vbucket::bucket_id, double> enumerate(const vbucket::bucket_config& c,
                                               const vbucket::opensora_v2_rule& rule,
                                               const vbucket::sample_meta& m) {
  std::vector<double> bounds{0.0, 1.0};
  for (const auto& r : c.resolutions())
    for (const auto& f : r.frames) {
      if (f.p_resolution > 0.0 && f.p_resolution < 1.0) bounds.push_back(f.p_resolution);
      if (f.pair && f.p_frames > 0.0 && f.p_frames < 1.0) bounds.push_back(f.p_frames);
    }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::vector<double> mids, lengths;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
    mids.push_back((bounds[i] + bounds[i + 1]) / 2);
    lengths.push_back(bounds[i + 1] - bounds[i]);
  }
  std::map<vbucket::bucket_id, double> out;
  std::vector<std::size_t> prefix;
  bool wanted_more = false;
  const interval_source source{&mids, &prefix, &wanted_more};
  // Depth-first: explore(weight) runs the rule on the current prefix.
  auto explore = [&](auto& self, double weight) -> void {
    wanted_more = false;
    const vbucket::bucket_id id = rule.assign(c, m, 0, source);
    if (!wanted_more) {
      out[id] += weight;
      return;
    }
    for (std::size_t i = 0; i < mids.size(); ++i) {
      prefix.push_back(i);
      self(self, weight * lengths[i]);
      prefix.pop_back();
    }
  };
  explore(explore, 1.0);
  return out;
}

void check_tables(const char* file) {
  CAPTURE(file);
  const vbucket::bucket_config c =
      vbucket::json::load_bucket_config(data_path(file), vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::compiled_v2_rule compiled(c, rule);
  const auto& res = c.resolutions();
  std::vector<std::int64_t> keys;
  for (const auto& r : res)
    for (const auto& f : r.frames) keys.push_back(f.frames);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // Effective lengths covering every class: 0 (shorter than every key), each key, the gap
  // above each key, and the image (1).
  std::vector<std::int64_t> lengths{0, 1};
  for (const std::int64_t k : keys) {
    lengths.push_back(k);
    lengths.push_back(k + 1);
  }
  std::size_t combinations = 0;
  for (std::size_t r0 = 0; r0 <= res.size(); ++r0) {
    // A 1-pixel-high sample with exactly the pixels of resolution r0's threshold (or 1 pixel).
    const std::int64_t w =
        r0 < res.size() ? static_cast<std::int64_t>(std::ceil(res[r0].min_pixels)) : 1;
    for (const std::int64_t t : lengths) {
      // t_eff = 0 through fps thinning: 1 frame at 60 fps is 1 / 4 = 0 frames.
      const vbucket::sample_meta m{t == 0 ? 1 : t, 1, w,
                                   t == 0 ? 60.0 : std::numeric_limits<double>::quiet_NaN()};
      if (vbucket::detail::too_large(c, m) != r0) continue;  // tied resolutions
      REQUIRE(rule.effective_frames(m.num_frames, m.fps) == t);
      CAPTURE(r0);
      CAPTURE(t);
      ++combinations;
      const auto expected = enumerate(c, rule, m);
      double total = 0;
      for (const auto& [id, p] : expected) total += p;
      CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
      // Every (resolution, key) and no_bucket: the table's probability is the tree's.
      const double none = expected.count(vbucket::no_bucket) ? expected.at(vbucket::no_bucket) : 0;
      CHECK(compiled.no_bucket_probability(r0, t) == doctest::Approx(none).epsilon(1e-12));
      // The alias table the assignment draws from encodes the same probabilities.
      CHECK(std::abs(compiled.sampled_no_bucket_probability(r0, t) - none) < 1e-12);
      double sum = compiled.no_bucket_probability(r0, t);
      for (std::size_t ri = 0; ri < res.size(); ++ri) {
        for (std::size_t k = 0; k < res[ri].frames.size(); ++k) {
          double p = 0;
          for (const auto& [id, q] : expected) {
            if (id < 0) continue;
            const auto key = c.key(id);
            if (static_cast<std::size_t>(key.resolution) == ri &&
                static_cast<std::size_t>(key.frames_index) == k)
              p += q;
          }
          CAPTURE(ri);
          CAPTURE(k);
          CHECK(compiled.probability(r0, t, ri, k) == doctest::Approx(p).epsilon(1e-12));
          CHECK(std::abs(compiled.probability(r0, t, ri, k) - p) < 1e-12);
          CHECK(std::abs(compiled.sampled_probability(r0, t, c.id_of(ri, k, 0)) - p) < 1e-12);
          sum += compiled.probability(r0, t, ri, k);
        }
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-12));
    }
  }
  CHECK(combinations >= res.size() + 1);
}

using vbucket_test::chi2_critical;
using vbucket_test::chi2_result;
using vbucket_test::histogram;
using vbucket_test::numpy_histogram;
using vbucket_test::two_sample_chi2;

}  // namespace

TEST_CASE("compiled_rule: tables equal opensora_v2_rule's enumerated decision tree") {
  check_tables("config_opensora_v2.json");
  check_tables("config_360p_example.json");
}

TEST_CASE("compiled_rule: same bucket distribution as opensora_v2_rule + numpy_source") {
  // Two independent synthetic web-video sets (bench/synthetic.hpp), one per rule.
  constexpr std::size_t n = 1'000'000;
  const vbucket::meta_table table_a = vbucket::bench::synthetic_table(n, 1);
  const vbucket::meta_table table_b = vbucket::bench::synthetic_table(n, 2);
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  const std::size_t nb = config.num_buckets();
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::compiled_v2_rule compiled(config, rule);
  const auto compiled_hist =
      histogram(vbucket::assign_all(config, table_a, compiled, vbucket::fast_source(1234, 0)), nb);
  const auto numpy_hist = numpy_histogram(config, table_b, rule, 50);
  const chi2_result same = two_sample_chi2(compiled_hist, numpy_hist);
  const double critical = chi2_critical(static_cast<double>(same.df), 1e-6);
  INFO("chi-square " << same.statistic << " with " << same.df << " df, critical " << critical);
  CHECK(same.df > 50);
  CHECK(same.statistic < critical);

  // The test has power: a rule with one probability nudged (768px's 33-frame p_res 0.5 -> 0.45)
  // is told apart.
  const auto specs_of = [&](double p33) {
    std::vector<vbucket::bucket_spec> specs;
    for (const auto& r : config.resolutions())
      for (const auto& f : r.frames)
        specs.push_back({r.info.name, f.frames,
                         (r.info.name == "768px" && f.frames == 33) ? p33 : f.p_resolution,
                         f.pair ? std::optional<double>(f.p_frames) : std::nullopt, f.batch_size});
    return specs;
  };
  const vbucket::bucket_config nudged(specs_of(0.45), vbucket::opensora_v2_tables{});
  REQUIRE(nudged.num_buckets() == nb);
  const auto nudged_hist =
      histogram(vbucket::assign_all(nudged, table_a, vbucket::compiled_v2_rule(nudged, rule),
                                    vbucket::fast_source(1234, 0)),
                nb);
  const chi2_result differs = two_sample_chi2(nudged_hist, numpy_hist);
  INFO("nudged chi-square " << differs.statistic << " with " << differs.df << " df");
  CHECK(differs.statistic > chi2_critical(static_cast<double>(differs.df), 1e-6));
}

TEST_CASE("compiled_rule: invalid metadata, and the same answer for any thread count") {
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  const vbucket::compiled_v2_rule compiled(config, vbucket::opensora_v2_rule{16.0});
  const vbucket::fast_source source(7, 3);
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr std::int64_t big = std::int64_t{1} << 40;
  for (const vbucket::sample_meta m :
       {vbucket::sample_meta{0, 720, 1280, 30.0}, vbucket::sample_meta{-5, 720, 1280, 30.0},
        vbucket::sample_meta{100, 0, 1280, 30.0}, vbucket::sample_meta{100, 720, -1, nan},
        vbucket::sample_meta{100, big, 1280, 30.0}, vbucket::sample_meta{1, 720, big, nan}})
    CHECK(compiled.assign(config, m, 0, source) == vbucket::invalid_sample);
  // Odd but valid values never leave the id range.
  for (const vbucket::sample_meta m :
       {vbucket::sample_meta{1, 1, 1, nan}, vbucket::sample_meta{1000000, 1, 1 << 24, -3.0},
        vbucket::sample_meta{5, 720, 1280, 1e308}, vbucket::sample_meta{200, 2000, 2000, 1e-300},
        vbucket::sample_meta{200, 2000, 2000, std::numeric_limits<double>::infinity()}}) {
    for (std::uint64_t i = 0; i < 100; ++i) {
      const vbucket::bucket_id id = compiled.assign(config, m, i, source);
      CHECK((id == vbucket::no_bucket ||
             (id >= 0 && static_cast<std::size_t>(id) < config.num_buckets())));
    }
  }
  CHECK_THROWS(vbucket::compiled_v2_rule(config, vbucket::opensora_v2_rule{0.0}));
  // Its effective length (a double division where exact) is the rule's, at the edges too.
  for (const double fps_max : {16.0, 7.5, 1e-300, 1e300}) {
    const vbucket::opensora_v2_rule r{fps_max};
    const vbucket::compiled_v2_rule cr(config, r);
    for (const std::int64_t f :
         {std::int64_t{1}, std::int64_t{2}, std::int64_t{15}, std::int64_t{16}, std::int64_t{17},
          std::int64_t{1000003}, (std::int64_t{1} << 52) - 1, std::int64_t{1} << 52,
          std::numeric_limits<std::int64_t>::max()})
      for (const double fps :
           {nan, -1.0, 0.0, 7.4, 7.5, 16.0, 16.5, 23.976, 29.97, 60.0, 1e15, 4503599627370495.0,
            1e300, std::numeric_limits<double>::infinity()}) {
        CAPTURE(fps_max);
        CAPTURE(f);
        CAPTURE(fps);
        CHECK(cr.effective_frames(f, fps) == r.effective_frames(f, fps));
      }
  }

  // The closest ratio is the aspect table's, on synthetic samples and a grid of sizes that
  // includes every exact table ratio (two ratio groups here: 256px has fewer ratios).
  CHECK(compiled.ratio_groups() == 2);
  std::vector<vbucket::sample_meta> metas;
  for (std::int64_t h = 16; h <= 1024; h += 16)
    for (std::int64_t w = 16; w <= 1024; w += 16) metas.push_back({1, h, w, nan});
  for (const auto& r : config.resolutions())
    for (const auto& e : r.info.table.entries()) {
      metas.push_back({1, e.height, e.width, nan});
      metas.push_back({1, 4 * e.height, 4 * e.width, nan});
      metas.push_back({200, 4 * e.height, 4 * e.width, 30.0});
    }
  metas.push_back({1, 1 << 24, 1, nan});
  metas.push_back({1, 1, 1 << 24, nan});
  const vbucket::meta_table synth = vbucket::bench::synthetic_table(20'000, 4);
  for (std::size_t i = 0; i < synth.size(); ++i)
    metas.push_back({synth[i].num_frames, synth[i].height, synth[i].width, synth[i].fps});
  std::size_t bucketed = 0;
  for (const auto& m : metas) {
    for (std::uint64_t i = 0; i < 8; ++i) {
      const vbucket::bucket_id id = compiled.assign(config, m, i, source);
      if (id < 0) continue;
      ++bucketed;
      const auto key = config.key(id);
      CAPTURE(m.height);
      CAPTURE(m.width);
      CHECK(static_cast<std::size_t>(key.ratio_index) ==
            config.resolution_of(id).info.table.closest(m.height, m.width));
    }
  }
  CHECK(bucketed > metas.size());

  const vbucket::meta_table table = vbucket::bench::synthetic_table(100'000, 3);
  const auto one = vbucket::assign_all(config, table, compiled, source, 1);
  for (unsigned threads : {2u, 3u, 8u, 0u})
    CHECK(vbucket::assign_all(config, table, compiled, source, threads) == one);
  // And each is the sample's own one-draw assignment.
  for (std::size_t i = 0; i < table.size(); i += 997)
    CHECK(one[i] == compiled.assign(config,
                                    vbucket::sample_meta{table[i].num_frames, table[i].height,
                                                         table[i].width, table[i].fps},
                                    i, source));
}

TEST_CASE("compiled_rule: the closest-ratio look-up equals the aspect table's on any ratio") {
  // Random user tables (duplicates, near-ties, 1 to 40 ratios spread over 10^-3..10^3), each
  // the only resolution of a config, so ratio group 0 is its table.
  std::uint64_t state = 12345;
  const auto next = [&] {
    state += vbucket::detail::golden_gamma;
    return vbucket::detail::mix64(state);
  };
  const auto unit = [&] { return static_cast<double>(next() >> 11) * 0x1.0p-53; };
  std::size_t checked = 0, lookups = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + next() % 40;
    std::vector<vbucket::aspect_entry> entries;
    for (std::size_t i = 0; i < n; ++i) {
      double ratio = std::exp((unit() * 2.0 - 1.0) * (trial % 3 == 0 ? 6.9 : 1.6));
      if (i > 0 && next() % 5 == 0) ratio = entries[next() % i].ratio;  // a duplicate
      if (i > 0 && trial % 7 == 0) ratio = std::nextafter(entries[i - 1].ratio, 10.0);  // close
      entries.push_back({"r" + std::to_string(i), ratio, 16, 16});
    }
    const vbucket::aspect_table table(entries);
    vbucket::user_tables tables;
    tables.add("res", 256 * 256, table);
    const vbucket::bucket_config config({{"res", 17, 1.0, std::nullopt, 4}}, tables);
    const vbucket::compiled_v2_rule compiled(config, vbucket::opensora_v2_rule{16.0});
    REQUIRE(compiled.ratio_groups() == 1);
    std::vector<double> ratios;
    for (const auto& e : entries) {
      double a = e.ratio, b = e.ratio;
      for (int k = 0; k < 4; ++k) {
        ratios.push_back(a);
        ratios.push_back(b);
        a = std::nextafter(a, 0.0);
        b = std::nextafter(b, 1e9);
      }
      for (const auto& f : entries) {  // midpoints, where the answer changes
        double m = (e.ratio + f.ratio) / 2, m2 = m;
        for (int k = 0; k < 4; ++k) {
          ratios.push_back(m);
          ratios.push_back(m2);
          m = std::nextafter(m, 0.0);
          m2 = std::nextafter(m2, 1e9);
        }
      }
    }
    for (int k = 0; k < 200; ++k) ratios.push_back(std::exp((unit() * 2.0 - 1.0) * 16.0));
    for (const double a : {0x1p-24, 1e-300, 0x1p24, 0x1p25, 1e300, 1.0}) ratios.push_back(a);
    for (const double a : ratios) {
      CAPTURE(trial);
      CAPTURE(a);
      CHECK(compiled.closest_of(config, 0, a) == table.closest_ratio(a));
      CHECK(compiled.closest_of(config, 0, a) == table.linear_closest(a));
      ++checked;
    }
    for (std::int64_t h = 1; h <= 40; ++h)
      for (std::int64_t w = 1; w <= 40; ++w)
        CHECK(compiled.closest(config, 0, h, w) == table.closest(h, w));
    lookups += static_cast<std::size_t>(table.size() > 0);
  }
  CHECK(checked > 100'000);
  CHECK(lookups == 300);
}

TEST_CASE("compiled_rule: whole-table rows equal the per-sample assignment, edge values too") {
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      data_path("config_opensora_v2.json"), vbucket::opensora_v2_tables{});
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr std::int64_t tmax = vbucket::meta_table::max_size;  // the most a table holds
  vbucket::meta_table table = vbucket::bench::synthetic_table(5'000, 9);
  const std::int64_t frames[] = {
      -1,       0,   1, 2, 5, 15, 16, 17, 33, 65, 97, 129, 130, 1000003, std::int64_t{1} << 31,
      tmax - 1, tmax};
  const double rates[] = {nan,  -inf, -1.0, 0.0,  1e-300, 7.9,  15.999, 16.0,  16.000001, 23.976,
                          30.0, 32.0, 48.0, 60.0, 240.0,  1e15, 0x1p56, 1e300, inf};
  const std::int64_t sides[][2] = {
      {720, 1280},        {1, 1},       {0, 5},     {5, -3},     {1 << 24, 1}, {1, 1 << 24},
      {(1 << 24) + 1, 5}, {tmax, tmax}, {256, 256}, {4096, 2160}};
  for (const auto f : frames)
    for (const double r : rates)
      for (const auto& hw : sides) table.push_back({f, hw[0], hw[1], r});
  for (const double fps_max : {16.0, 7.5, 1e-300, 1e300}) {
    const vbucket::compiled_v2_rule compiled(config, vbucket::opensora_v2_rule{fps_max});
    const vbucket::fast_source source(99, 1);
    std::vector<vbucket::bucket_id> rows(table.size(), 12345);
    // Ranges that do not start or end on the 256-row blocks.
    const std::size_t cuts[] = {0, 1, 255, 256, 700, 4999, 5000, 5001, 6000, table.size()};
    for (std::size_t k = 0; k + 1 < std::size(cuts); ++k)
      compiled.assign_rows(config, table, cuts[k], cuts[k + 1], rows, source);
    std::size_t invalid = 0, none = 0, bucketed = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
      const vbucket::bucket_id one = compiled.assign(config, table[i], i, source);
      CAPTURE(fps_max);
      CAPTURE(i);
      CHECK(rows[i] == one);
      invalid += one == vbucket::invalid_sample;
      none += one == vbucket::no_bucket;
      bucketed += one >= 0;
    }
    CHECK(invalid > 1000);
    CHECK(none > 10);
    CHECK(bucketed > 1000);
    CHECK(vbucket::assign_all(config, table, compiled, source, 1) == rows);
  }
}

#endif  // VBUCKET_TEST_HAS_JSON

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
namespace {

/// Every sample of `table` through the fast draws of the 2.0 rule in each of its forms: the
/// rule's own walk per sample, the compiled rule per sample and per block of rows, and
/// assign_all / assign_range (which compile large tables themselves).
void check_one_definition(const vbucket::bucket_config& config, const vbucket::meta_table& table,
                          double fps_max, std::uint64_t seed, std::uint64_t epoch) {
  const vbucket::opensora_v2_rule rule{fps_max};
  const vbucket::compiled_v2_rule compiled(config, rule);
  const vbucket::fast_source source(seed, epoch);
  std::vector<vbucket::bucket_id> walked(table.size());
  std::size_t bucketed = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    walked[i] = rule.assign(config, table[i], i, source);
    bucketed += walked[i] >= 0;
    CAPTURE(i);
    REQUIRE(compiled.assign(config, table[i], i, source) == walked[i]);
  }
  CHECK(bucketed > table.size() / 10);
  CHECK(vbucket::assign_all(config, table, compiled, source, 1) == walked);
  CHECK(vbucket::assign_all(config, table, rule, source) == walked);  // compiles when large
  std::vector<vbucket::sample_meta> records;
  for (std::size_t i = 0; i < table.size(); ++i) records.push_back(table[i]);
  CHECK(vbucket::assign_range(config, records, rule, source, 2) == walked);
  // Below the size at which assign_all compiles, the rule's per-sample walk gives the same.
  vbucket::meta_table head;
  for (std::size_t i = 0; i < 1000 && i < table.size(); ++i) head.push_back(table[i]);
  const auto small = vbucket::assign_all(config, head, rule, source, 1);
  CHECK(std::equal(small.begin(), small.end(), walked.begin()));
}

}  // namespace

TEST_CASE("compiled_rule: one definition of the fast draws, sample by sample") {
  // Issue 14 item 5: opensora_v2_rule + fast_source and compiled_v2_rule used to draw
  // differently (1268 of 3000 samples in other buckets for one seed).
  vbucket::meta_table table = vbucket::bench::synthetic_table(20'000, 5);
  for (const char* file : {"config_opensora_v2.json", "config_360p_example.json"}) {
    CAPTURE(file);
    const vbucket::bucket_config config =
        vbucket::json::load_bucket_config(data_path(file), vbucket::opensora_v2_tables{});
    REQUIRE(vbucket::compiled_v2_rule(config, vbucket::opensora_v2_rule{}).tabled());
    for (const std::uint64_t epoch : {0u, 3u}) check_one_definition(config, table, 16.0, 42, epoch);
    check_one_definition(config, table, 7.5, 11, 1);
  }
}

TEST_CASE("compiled_rule: the fast draw is the inverse of the outcome distribution") {
  // A 40-frame clip under {"256px": {"33": [[0.5, 0.4], 4], "17": [0.25, 4]}}: the walk skips
  // 33 with probability 0.4, else keeps it with 0.5 or leaves the resolution; from 17 it keeps
  // it with 0.25. So 33 has probability 0.6 · 0.5 = 0.3, then 17 has 0.4 · 0.25 = 0.1, and no
  // bucket the rest: with u the sample's one draw, 33 iff u < 0.3, 17 iff 0.3 ≤ u < 0.4.
  const std::vector<vbucket::bucket_spec> specs{{"256px", 33, 0.5, 0.4, 4},
                                                {"256px", 17, 0.25, std::nullopt, 4}};
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  const vbucket::opensora_v2_rule rule{16.0};
  const vbucket::compiled_v2_rule compiled(config, rule);
  const vbucket::fast_source source(2024, 7);
  const vbucket::sample_meta clip{40, 256, 256, 24.0 / 2};  // 12 fps: no thinning
  const auto key_of = [&](vbucket::bucket_id id) {
    return id < 0 ? std::int64_t{-1} : config.frames_of(id).frames;
  };
  std::size_t seen[3] = {0, 0, 0};
  for (std::uint64_t i = 0; i < 4000; ++i) {
    const double u = source.stream(i, 0).random();
    const std::int64_t expected = u < 0.3 ? 33 : (u < 0.4 ? 17 : -1);
    CAPTURE(i);
    CAPTURE(u);
    CHECK(key_of(rule.assign(config, clip, i, source)) == expected);
    CHECK(key_of(compiled.assign(config, clip, i, source)) == expected);
    ++seen[expected == 33 ? 0 : expected == 17 ? 1 : 2];
  }
  CHECK(seen[0] > 1000);
  CHECK(seen[1] > 250);
  CHECK(seen[2] > 2000);
}

TEST_CASE("compiled_rule: a config with 600 resolutions stays small and gives the same buckets") {
  // Issue 14 item 8: 600 resolutions with one distinct frames key each (10 200 buckets) made
  // tables of (resolutions + 1) · (keys + 2) rows by resolutions · keys columns: gigabytes.
  std::vector<vbucket::bucket_spec> specs;
  for (int n = 0; n < 600; ++n)
    specs.push_back({std::to_string(200 + n) + "px", 17 + n, 0.5, std::nullopt, 1});
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  REQUIRE(config.resolutions().size() == 600);
  const vbucket::compiled_v2_rule compiled(config, vbucket::opensora_v2_rule{16.0});
  CHECK_FALSE(compiled.tabled());
  CHECK(compiled.table_bytes() <= vbucket::compiled_v2_rule::max_table_bytes);
  vbucket::meta_table table = vbucket::bench::synthetic_table(300, 3);
  for (std::int64_t k = 0; k < 300; ++k) table.push_back({20 + 2 * k, 300 + 2 * k, 500 + k, 12.0});
  check_one_definition(config, table, 16.0, 5, 0);
  // The inspection API still answers without tables: probabilities sum to 1.
  double sum = compiled.no_bucket_probability(0, 400);
  for (std::size_t ri = 0; ri < 600; ++ri) sum += compiled.probability(0, 400, ri, 0);
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-12));
}
#endif  // VBUCKET_TEST_HAS_JSON

namespace {

/// SplitMix64 for the random configs and metadata of the vector-path test.
struct test_random {
  std::uint64_t state;
  std::uint64_t next() {
    state += vbucket::detail::golden_gamma;
    return vbucket::detail::mix64(state);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

/// A random probability: often 0 or 1 exactly, else a short or a full-precision fraction.
double random_probability(test_random& r) {
  switch (r.below(6)) {
    case 0:
      return 0.0;
    case 1:
      return 1.0;
    case 2:
      return static_cast<double>(r.below(21)) / 20.0;
    default:
      return r.unit();
  }
}

/// A random config: 1 to 5 resolutions (Open-Sora 2.0's tables, or user tables of random
/// ratios, some shared, so there are 1 to 9 ratio groups), random frames keys (1 included at
/// times), single probabilities and pairs.
vbucket::bucket_config random_config(test_random& r) {
  const std::size_t num_res = 1 + r.below(5);
  const bool user = r.below(2) == 0;
  vbucket::user_tables tables;
  std::vector<vbucket::aspect_table> shared;
  std::vector<vbucket::bucket_spec> specs;
  for (std::size_t k = 0; k < num_res; ++k) {
    const std::int64_t side = 128 + static_cast<std::int64_t>(r.below(1000));
    const std::string name = std::to_string(side + static_cast<std::int64_t>(k) * 1000) + "px";
    if (user) {
      if (shared.empty() || r.below(3) == 0) {
        std::vector<vbucket::aspect_entry> entries;
        const std::size_t n = 1 + r.below(12);
        for (std::size_t i = 0; i < n; ++i) {
          double ratio = std::exp((r.unit() * 2.0 - 1.0) * 1.5);
          if (i > 0 && r.below(6) == 0) ratio = entries[r.below(i)].ratio;  // a duplicate
          if (i > 0 && r.below(10) == 0) ratio = std::nextafter(entries[i - 1].ratio, 10.0);
          entries.push_back({"r" + std::to_string(i), ratio, 16, 16});
        }
        shared.emplace_back(entries);
      }
      tables.add(name, side * side, shared[r.below(shared.size())]);
    }
    const std::size_t num_keys = 1 + r.below(6);
    std::vector<std::int64_t> keys;
    for (std::size_t i = 0; i < num_keys; ++i) {
      const std::int64_t t = r.below(5) == 0 ? 1 : 1 + static_cast<std::int64_t>(r.below(200));
      if (std::find(keys.begin(), keys.end(), t) == keys.end()) keys.push_back(t);
    }
    for (const std::int64_t t : keys) {
      const bool pair = t != 1 && r.below(2) == 0;
      specs.push_back({name, t, random_probability(r),
                       pair ? std::optional<double>(random_probability(r)) : std::nullopt,
                       1 + static_cast<std::int64_t>(r.below(8))});
    }
  }
  if (user) return vbucket::bucket_config(specs, tables);
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

/// Random rows: web-video-like sizes and rates, small sides, edge sizes (0, 1, 2^24,
/// 2^24 + 1, 2^32 - 1), odd rates (NaN, 0, negative, tiny, huge, infinite) and lengths up to 2^32
/// - 1.
vbucket::meta_table random_rows(test_random& r, std::size_t n) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr std::int64_t tmax = vbucket::meta_table::max_size;
  const double rates[] = {nan,       0.0,    -1.0,   1e-300, 7.5,  15.999, 16.0,
                          16.000001, 23.976, 24.0,   29.97,  30.0, 48.0,   60.0,
                          240.0,     1e15,   0x1p56, 1e300,  inf,  -inf,   0x1p53};
  const std::int64_t sides[] = {0,    1,    2,    16,      240,           480, 720,
                                1080, 1920, 4096, 1 << 24, (1 << 24) + 1, tmax};
  const vbucket::meta_table synth = vbucket::bench::synthetic_table(n, r.next());
  vbucket::meta_table table;
  for (std::size_t i = 0; i < n; ++i) {
    vbucket::sample_meta m = synth[i];
    if (r.below(8) == 0) m.fps = rates[r.below(std::size(rates))];
    if (r.below(16) == 0) m.height = sides[r.below(std::size(sides))];
    if (r.below(16) == 0) m.width = sides[r.below(std::size(sides))];
    if (r.below(4) == 0) m.height = 1 + static_cast<std::int64_t>(r.below(4096));
    if (r.below(4) == 0) {  // small sides: many exact ratios, midpoints between table ratios too
      m.height = 1 + static_cast<std::int64_t>(r.below(64));
      m.width = 1 + static_cast<std::int64_t>(r.below(64));
    }
    if (r.below(16) == 0)
      m.num_frames = r.below(2) == 0 ? static_cast<std::int64_t>(r.below(3))
                                     : tmax - static_cast<std::int64_t>(r.below(3));
    if (r.below(8) == 0) m.num_frames = 1 + static_cast<std::int64_t>(r.below(400));
    table.push_back(m);
  }
  return table;
}

}  // namespace

TEST_CASE("compiled_rule: the vector path gives the scalar path's ids, bit for bit") {
  // Random configs, rates and metadata; rows in ranges that start and end anywhere; the fast
  // source direct and shifted (a chunk of a larger table). Each path forced.
  const bool vector = vbucket::detail::cpu_has_avx2();
  if (!vector) MESSAGE("no AVX2 on this CPU: the vector path is not tested here");
  test_random r{2026};
  std::size_t configs = 0, vectorised = 0, rows = 0, bucketed = 0;
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    const vbucket::bucket_config config = random_config(r);
    const double maxima[] = {16.0, 7.5, 23.976, 1e-300, 1e300};
    const vbucket::opensora_v2_rule rule{maxima[r.below(std::size(maxima))]};
    const vbucket::compiled_v2_rule compiled(config, rule);
    if (!compiled.tabled()) continue;
    ++configs;
    vectorised += compiled.vectorised();
    const vbucket::meta_table table = random_rows(r, 3000 + r.below(3000));
    const vbucket::fast_source fast(r.next(), r.below(5));
    const vbucket::shifted_source<vbucket::fast_source> shifted{fast, r.below(1u << 20)};
    const std::size_t n = table.size();
    const std::size_t cuts[] = {0, 1 + r.below(7), 256 + r.below(5), n / 2 + r.below(3), n - 1, n};
    for (const int source : {0, 1}) {
      std::vector<vbucket::bucket_id> scalar(n, 12345), simd(n, 54321);
      for (std::size_t k = 0; k + 1 < std::size(cuts); ++k) {
        if (source == 0) {
          compiled.assign_rows(config, table, cuts[k], cuts[k + 1], scalar, fast,
                               vbucket::simd_path::scalar);
          compiled.assign_rows(config, table, cuts[k], cuts[k + 1], simd, fast,
                               vbucket::simd_path::avx2);
        } else {
          compiled.assign_rows(config, table, cuts[k], cuts[k + 1], scalar, shifted,
                               vbucket::simd_path::scalar);
          compiled.assign_rows(config, table, cuts[k], cuts[k + 1], simd, shifted,
                               vbucket::simd_path::avx2);
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(source);
        CAPTURE(i);
        REQUIRE(simd[i] == scalar[i]);
        bucketed += scalar[i] >= 0;
      }
      rows += n;
      // And the scalar path is the per-sample assignment (every 7th row).
      for (std::size_t i = 0; i < n; i += 7)
        CHECK(scalar[i] == (source == 0 ? compiled.assign(config, table[i], i, fast)
                                        : compiled.assign(config, table[i], i, shifted)));
    }
  }
  CHECK(configs >= 40);
  CHECK(vectorised >= 30);
  CHECK(bucketed > rows / 10);
}

TEST_CASE("compiled_rule: listed rows give each row's own assignment, on both paths") {
  // Rows listed in any order, with repeats and edge values (random_rows): entry i must be
  // assign(table[rows[i]], rows[i]) whatever the path, and assign_rows_into (the run plan's
  // re-assignment of undelivered draws) must give assign_into's bucket of each listed row.
  test_random r{4242};
  std::size_t checked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    const vbucket::bucket_config config = random_config(r);
    const vbucket::opensora_v2_rule rule{trial % 3 == 0 ? 7.5 : 16.0};
    const vbucket::compiled_v2_rule compiled(config, rule);
    const vbucket::meta_table table = random_rows(r, 5000 + r.below(3000));
    const vbucket::fast_source fast(r.next(), r.below(5));
    std::vector<std::uint32_t> rows(4096 + r.below(900));
    for (auto& x : rows) x = static_cast<std::uint32_t>(r.below(table.size()));
    std::sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(rows.size() / 2));
    const std::size_t m = rows.size();
    for (const auto path : {vbucket::simd_path::scalar, vbucket::simd_path::avx2}) {
      std::vector<vbucket::bucket_id> out(m, 777);
      const std::size_t cut = 1 + r.below(m - 2);  // ranges that start and end anywhere
      compiled.assign_rows(config, table, rows, 0, cut, out, fast, path);
      compiled.assign_rows(config, table, rows, cut, m, out, fast, path);
      for (std::size_t i = 0; i < m; ++i) {
        CAPTURE(i);
        REQUIRE(out[i] == compiled.assign(config, table[rows[i]], rows[i], fast));
      }
      checked += m;
    }
    const std::vector<vbucket::bucket_id> whole = vbucket::assign_all(config, table, rule, fast, 2);
    std::vector<vbucket::bucket_id> listed(m, 777);
    vbucket::assign_rows_into(std::span<vbucket::bucket_id>(listed), rows, config, table, rule,
                              fast, 2);
    for (std::size_t i = 0; i < m; ++i) REQUIRE(listed[i] == whole[rows[i]]);
    // A user's rule without a whole-table path: row by row.
    const vbucket::opensora_v12_rule v12;
    const std::vector<vbucket::bucket_id> whole12 = vbucket::assign_all(config, table, v12, fast);
    vbucket::assign_rows_into(std::span<vbucket::bucket_id>(listed), rows, config, table, v12,
                              fast);
    for (std::size_t i = 0; i < m; ++i) REQUIRE(listed[i] == whole12[rows[i]]);
  }
  CHECK(checked > 200000);
}
