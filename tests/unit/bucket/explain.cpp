/// Tests of vbucket/bucket/explain.hpp: the traced walk gives the rule's own bucket for every
/// sample, both rules and both sources; its draws are exactly the draws the source delivered, in
/// order; and the text names the downgrade, the skipped resolutions and the chosen bucket.
#include "vbucket/bucket/explain.hpp"

#include <doctest/doctest.h>

#include <cmath>    // std::isnan
#include <cstdint>  // std::uint64_t, std::int64_t
#include <limits>   // std::numeric_limits
#include <string>   // std::string
#include <utility>  // std::declval
#include <vector>   // std::vector

#include "vbucket/base/random.hpp"
#include "vbucket_test/configs.hpp"

namespace {

using vbucket::rule_event;
using vbucket::sample_meta;

/// A source that hands out a real source's draws and records each one, in order.
template <class Source>
struct recording_source {
  Source inner;
  std::vector<double>* seen;
  struct stream_type {
    decltype(std::declval<const Source&>().stream(0, 0)) s;
    std::vector<double>* seen;
    double random() {
      const double u = s.random();
      seen->push_back(u);
      return u;
    }
  };
  stream_type stream(std::uint64_t i, std::uint64_t sub) const {
    return {inner.stream(i, sub), seen};
  }
};

std::vector<sample_meta> samples() {
  std::vector<sample_meta> out;
  const std::int64_t frames[] = {0, 1, 17, 40, 70, 140, 300};
  const std::int64_t sides[][2] = {{144, 256}, {256, 256}, {480, 640}, {768, 1024}, {1080, 1920}};
  const double fps[] = {std::numeric_limits<double>::quiet_NaN(), 24.0, 60.0};
  for (auto t : frames)
    for (auto& hw : sides)
      for (double f : fps) out.push_back({t, hw[0], hw[1], f});
  return out;
}

std::vector<double> traced_draws(const vbucket::rule_explanation& e) {
  std::vector<double> out;
  for (const rule_event& ev : e.events)
    if (!std::isnan(ev.draw) && ev.what != rule_event::step::fast_outcome) out.push_back(ev.draw);
  return out;
}

template <class Rule>
void check_rule(const vbucket::bucket_config& c, const Rule& rule) {
  const auto all = samples();
  for (std::uint64_t seed : {0u, 7u}) {
    const vbucket::numpy_source np(vbucket::big_seed(seed), c.num_buckets());
    const vbucket::fast_source fast(seed, 3);
    for (std::uint64_t i = 0; i < all.size(); ++i) {
      std::vector<double> seen;
      const recording_source<vbucket::numpy_source> rec{np, &seen};
      const auto e = vbucket::explain_assignment(c, all[i], i, rule, rec);
      CHECK(e.bucket == rule.assign(c, all[i], i, np));
      CHECK(vbucket::explain_assignment(c, all[i], i, rule, np).bucket == e.bucket);
      CHECK(traced_draws(e) == seen);  // every draw the source made, no other
      REQUIRE_FALSE(e.events.empty());
      const auto last = e.events.back().what;
      CHECK(last == (e.bucket >= 0                    ? rule_event::step::chosen
                     : e.bucket == vbucket::no_bucket ? rule_event::step::none
                                                      : rule_event::step::invalid));
      if (e.bucket >= 0) CHECK(e.events.back().bucket == e.bucket);
      const auto f = vbucket::explain_assignment(c, all[i], i, rule, fast);
      CHECK(f.bucket == rule.assign(c, all[i], i, fast));
    }
  }
}

}  // namespace

TEST_CASE("explain: the traced walk is the rule's, draw for draw") {
  check_rule(vbucket_test::draw_v2_config(), vbucket::opensora_v2_rule{16.0});
  check_rule(vbucket_test::opensora_v2_config(), vbucket::opensora_v2_rule{16.0});
  check_rule(vbucket_test::draw_v12_config(), vbucket::opensora_v12_rule{1});
  check_rule(vbucket_test::draw_v12_config(), vbucket::opensora_v12_rule{2});
}

TEST_CASE("explain: a downgrade and the skipped resolutions in words") {
  const auto c = vbucket_test::draw_v2_config();
  // A 768px-sized clip of 129 frames: 768px 129 has (p_res 0.2, p_frames 0.6). Find a seed whose
  // walk downgrades out of 768px, from the events, then check the text says so.
  const sample_meta m{129, 1024, 1024, std::numeric_limits<double>::quiet_NaN()};
  bool found = false;
  for (std::uint64_t seed = 0; seed < 64 && !found; ++seed) {
    const vbucket::numpy_source np(vbucket::big_seed(seed), c.num_buckets());
    const auto e = vbucket::explain_assignment(c, m, 0, vbucket::opensora_v2_rule{16.0}, np);
    for (const rule_event& ev : e.events)
      if (ev.what == rule_event::step::keep && !ev.passed && ev.resolution == 0) found = true;
    if (!found) continue;
    const std::string text = vbucket::describe(e, c);
    CHECK(text.find("not taken, downgraded (leaves this resolution)") != std::string::npos);
    CHECK(text.find("768px frames") != std::string::npos);
  }
  CHECK(found);
  // A small clip skips 768px by size; an invalid one says so.
  const vbucket::fast_source fast(1, 0);
  const auto small = vbucket::explain_assignment(c, {33, 256, 256, 24.0}, 0,
                                                 vbucket::opensora_v2_rule{16.0}, fast);
  CHECK(vbucket::describe(small, c).find("768px: skipped") != std::string::npos);
  const auto bad =
      vbucket::explain_assignment(c, {0, 256, 256, 24.0}, 0, vbucket::opensora_v2_rule{16.0}, fast);
  CHECK(bad.bucket == vbucket::invalid_sample);
  CHECK(vbucket::describe(bad, c).find("invalid metadata") != std::string::npos);
}
