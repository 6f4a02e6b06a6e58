/// Tests of vbucket/bucket/rules.hpp: golden conformance with Open-Sora's own output, the order and
/// number of draws (with a scripted random source), fps thinning, images, v1.2's frame
/// interval, invalid metadata and a user rule.
#include "vbucket/bucket/rules.hpp"

#include <doctest/doctest.h>

#include <cmath>     // std::isnan
#include <cstdint>   // std::int64_t, std::uint64_t
#include <fstream>   // std::ifstream
#include <limits>    // numeric_limits
#include <optional>  // std::optional
#include <string>    // std::string
#include <utility>   // std::pair
#include <vector>    // std::vector

#include "vbucket/bucket/assign.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#define VBUCKET_RULES_TEST_JSON 1
#include "vbucket/json/bucket_config.hpp"
#else
#define VBUCKET_RULES_TEST_JSON 0
#endif

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// One draw as the scripted source saw it: which (sample, sub-stream) drew, and what it got.
struct draw_record {
  std::uint64_t sample;
  std::uint64_t sub;
};

/// A random source whose draws are a script, in the order they are made, across all
/// sub-streams; it records which stream made each draw. Its stream is a small struct of
/// pointers, not a generator, so nothing may assume the provided stream types.
struct scripted_source {
  struct state {
    std::vector<double> script;
    std::size_t next = 0;
    std::vector<draw_record> draws;
  };
  struct stream_type {
    state* s;
    std::uint64_t sample;
    std::uint64_t sub;
    double random() {
      s->draws.push_back({sample, sub});
      REQUIRE_MESSAGE(s->next < s->script.size(), "the rule drew more often than scripted");
      return s->script[s->next++];
    }
  };
  state* s;
  stream_type stream(std::uint64_t sample, std::uint64_t sub) const { return {s, sample, sub}; }
};
static_assert(vbucket::random_source<scripted_source>);
static_assert(vbucket::bucket_rule<vbucket::opensora_v2_rule, scripted_source>);
static_assert(vbucket::bucket_rule<vbucket::opensora_v12_rule, scripted_source>);

vbucket::bucket_spec spec(std::string res, std::int64_t frames, double p,
                          std::optional<double> p_frames = std::nullopt) {
  vbucket::bucket_spec s;
  s.resolution = std::move(res);
  s.frames = frames;
  s.p_resolution = p;
  s.p_frames = p_frames;
  s.batch_size = 1;
  return s;
}

/// R: 100 pixels (a sample needs H*W >= 80), S: 50 pixels (>= 40); one ratio each.
vbucket::user_tables rs_tables() {
  vbucket::user_tables t;
  t.add("R", 100, vbucket::aspect_table({{"1:1", 1.0, 10, 10}}))
      .add("S", 50, vbucket::aspect_table({{"1:1", 1.0, 7, 7}}));
  return t;
}

/// R: 65 (0.5, 0.3), 33 0.7, 17 1.0, 9 (1.0, 1.0), 1 0.5;  S: 5 1.0, 1 1.0.
vbucket::bucket_config rs_config() {
  return vbucket::bucket_config(
      std::vector{spec("R", 65, 0.5, 0.3), spec("R", 33, 0.7), spec("R", 17, 1.0),
                  spec("R", 9, 1.0, 1.0), spec("R", 1, 0.5), spec("S", 5, 1.0), spec("S", 1, 1.0)},
      rs_tables());
}

struct outcome {
  std::string res;  // "" = no bucket
  std::int64_t frames = 0;
  std::size_t draws = 0;
  std::vector<std::uint64_t> subs;  // sub-stream of each draw
};

template <class Rule>
outcome run_script(const Rule& rule, const vbucket::bucket_config& c, vbucket::sample_meta m,
                   std::vector<double> script, std::uint64_t index = 7) {
  scripted_source::state st{std::move(script), 0, {}};
  const vbucket::bucket_id id = rule.assign(c, m, index, scripted_source{&st});
  outcome o;
  if (id >= 0) {
    o.res = c.resolution_of(id).info.name;
    o.frames = c.frames_of(id).frames;
  } else {
    CHECK(id == vbucket::no_bucket);
  }
  o.draws = st.draws.size();
  for (const auto& d : st.draws) {
    CHECK(d.sample == index);
    o.subs.push_back(d.sub);
  }
  CHECK(st.next == st.script.size());  // every scripted draw was used
  return o;
}

vbucket::sample_meta meta(std::int64_t t, std::int64_t h, std::int64_t w, double fps) {
  return {t, h, w, fps};
}

/// A config whose probabilities are all 1 (no draws for videos): the rule then picks the
/// largest frames key the sample can fill, which makes expectations plain arithmetic.
vbucket::bucket_config certain_config(std::vector<std::int64_t> keys) {
  std::vector<vbucket::bucket_spec> specs;
  for (auto k : keys) specs.push_back(spec("R", k, 1.0));
  return vbucket::bucket_config(specs, rs_tables());
}

std::int64_t chosen_frames(const vbucket::bucket_config& c, vbucket::bucket_id id) {
  return id >= 0 ? c.frames_of(id).frames : id;
}

#if VBUCKET_RULES_TEST_JSON
struct golden_sample {
  std::int64_t id, t, h, w;
  double fps;
  bool has_bucket;
  std::string res;
  std::int64_t frames;
  std::string ratio;
  std::int64_t thw[3];
};

struct golden_file {
  nlohmann::ordered_json header;
  std::vector<golden_sample> samples;
};

golden_file load_golden(const std::string& file) {
  const std::string path = std::string(VBUCKET_TEST_DATA_DIR) + "/" + file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  golden_file g;
  std::string line;
  REQUIRE(std::getline(in, line));
  g.header = nlohmann::ordered_json::parse(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    golden_sample s{};
    s.id = j.at("id").get<std::int64_t>();
    s.t = j.at("T").get<std::int64_t>();
    s.h = j.at("H").get<std::int64_t>();
    s.w = j.at("W").get<std::int64_t>();
    s.fps = j.at("fps").is_null() ? kNaN : j.at("fps").get<double>();
    s.has_bucket = !j.at("bucket").is_null();
    if (s.has_bucket) {
      s.res = j.at("bucket").at(0).get<std::string>();
      s.frames = j.at("bucket").at(1).get<std::int64_t>();
      s.ratio = j.at("bucket").at(2).get<std::string>();
      for (std::size_t k = 0; k < 3; ++k) s.thw[k] = j.at("thw").at(k).get<std::int64_t>();
    }
    g.samples.push_back(s);
  }
  return g;
}

template <class Rule, class Tables>
void check_golden(const std::string& file, const Rule& rule, const Tables& tables) {
  const golden_file g = load_golden(file);
  REQUIRE(g.samples.size() == 3000);
  const vbucket::bucket_config c(vbucket::json::bucket_specs(g.header.at("config"), file), tables);
  REQUIRE(c.num_buckets() == g.header.at("num_bucket").get<std::size_t>());
  const vbucket::numpy_source source(vbucket::big_seed(g.header.at("seed").get<std::uint64_t>()),
                                     c.num_buckets());
  vbucket::meta_table table;
  std::size_t bucketed = 0, mismatches = 0;
  for (std::size_t i = 0; i < g.samples.size(); ++i) {
    const auto& s = g.samples[i];
    REQUIRE(s.id == static_cast<std::int64_t>(i));
    const vbucket::sample_meta m{s.t, s.h, s.w, s.fps};
    table.push_back(m);
    const vbucket::bucket_id got = rule.assign(c, m, i, source);
    bool ok = false;
    if (!s.has_bucket) {
      ok = got == vbucket::no_bucket;
    } else if (got >= 0) {
      const auto& ratio = c.ratio_of(got);
      ok = c.find(s.res, s.frames, s.ratio) == got && c.frames_of(got).frames == s.thw[0] &&
           ratio.height == s.thw[1] && ratio.width == s.thw[2];
      ++bucketed;
    }
    if (!ok && ++mismatches <= 5) {
      INFO("sample " << i << ": T=" << s.t << " H=" << s.h << " W=" << s.w << " fps=" << s.fps
                     << " expected " << (s.has_bucket ? s.res : "null") << "/" << s.frames << "/"
                     << s.ratio << ", got id " << got);
      CHECK(ok);
    }
  }
  CHECK(mismatches == 0);
  // Both outcomes are exercised.
  CHECK(bucketed > 300);
  CHECK(bucketed < g.samples.size());
  // The parallel path agrees sample for sample (3000 rows split over 4 threads only if the
  // chunks are large enough; either way the result must be the same).
  const auto all = vbucket::assign_all(c, table, rule, source, 4);
  for (std::size_t i = 0; i < all.size(); ++i)
    REQUIRE(all[i] == rule.assign(c, table[i], i, source));
}
#endif

}  // namespace

#if VBUCKET_RULES_TEST_JSON
TEST_CASE("rules: Open-Sora 2.0 golden file, bucket and target shape of every sample") {
  check_golden("opensora_v2_golden.jsonl", vbucket::opensora_v2_rule{16.0},
               vbucket::opensora_v2_tables{});
}

TEST_CASE("rules: Open-Sora v1.2 golden file, bucket and target shape of every sample") {
  check_golden("opensora_v12_golden.jsonl", vbucket::opensora_v12_rule{1},
               vbucket::opensora_v12_tables{});
}
#endif

TEST_CASE("rules: Open-Sora 2.0 draws exactly as Open-Sora's get_bucket_id") {
  const auto c = rs_config();
  const vbucket::opensora_v2_rule rule{16.0};
  const auto video = meta(100, 10, 10, kNaN);
  // 65 is a pair (0.5, 0.3): draw <= 0.3 moves on to 33 (single 0.7): draw <= 0.7 takes it.
  auto o = run_script(rule, c, video, {0.3, 0.7});
  CHECK(o.res == "R");
  CHECK(o.frames == 33);
  // Draw > 0.3 stays at 65, then <= 0.5 takes (R, 65).
  o = run_script(rule, c, video, {0.31, 0.5});
  CHECK(o.res == "R");
  CHECK(o.frames == 65);
  // ... > 0.5 downgrades: leaves R, and S's 5 has p = 1: taken without a draw.
  o = run_script(rule, c, video, {0.31, 0.51});
  CHECK(o.res == "S");
  CHECK(o.frames == 5);
  CHECK(o.draws == 2);
  // Skip 65, then 33 refused (0.71 > 0.7): downgrade to S, not to R's 17.
  o = run_script(rule, c, video, {0.1, 0.71});
  CHECK(o.res == "S");
  CHECK(o.frames == 5);
  // T = 40 fills 33 but not 65: one draw.
  o = run_script(rule, c, meta(40, 10, 10, kNaN), {0.7});
  CHECK(o.frames == 33);
  // T = 20: 17 has p = 1, so no draw at all.
  o = run_script(rule, c, meta(20, 10, 10, kNaN), {});
  CHECK(o.res == "R");
  CHECK(o.frames == 17);
  // T = 12: 9 is a pair with p_t = 1: always skipped, without a draw; 1 is never a video key;
  // R is left without a bucket and S's 5 is taken.
  o = run_script(rule, c, meta(12, 10, 10, kNaN), {});
  CHECK(o.res == "S");
  CHECK(o.frames == 5);
  // Too small for R (64 < 80 pixels): R is skipped without a draw.
  o = run_script(rule, c, meta(100, 8, 8, kNaN), {});
  CHECK(o.res == "S");
  CHECK(o.frames == 5);
  // Too small for both (36 < 40): no bucket, no draw.
  o = run_script(rule, c, meta(100, 6, 6, kNaN), {});
  CHECK(o.res.empty());
  // T = 4 fills no key of S (5) either: no bucket.
  o = run_script(rule, c, meta(4, 10, 10, kNaN), {});
  CHECK(o.res.empty());
  // Every draw of the 2.0 rule comes from sub-stream 0 of the sample.
  o = run_script(rule, c, video, {0.31, 0.51}, 12345);
  CHECK(o.subs == std::vector<std::uint64_t>{0, 0});
}

TEST_CASE("rules: images (T = 1) with and without a key 1") {
  const auto c = rs_config();
  const vbucket::opensora_v2_rule v2{16.0};
  const vbucket::opensora_v12_rule v12{1};
  const auto image = meta(1, 10, 10, kNaN);
  // R's key 1 has p = 0.5 and the test is strict: random() < p.
  auto o = run_script(v2, c, image, {0.4999});
  CHECK(o.res == "R");
  CHECK(o.frames == 1);
  // 0.5 is refused; S's key 1 has p = 1 but still draws (a bare `random() < p`).
  o = run_script(v2, c, image, {0.5, 0.999});
  CHECK(o.res == "S");
  CHECK(o.frames == 1);
  CHECK(o.draws == 2);
  // v1.2: the same, each draw from the stream numbered bucket_id[res][1]: R's (65 33 17 9 1)
  // are 0..4, S's (5 1) are 5, 6.
  o = run_script(v12, c, image, {0.4999});
  CHECK(o.frames == 1);
  CHECK(o.subs == std::vector<std::uint64_t>{4});
  o = run_script(v12, c, image, {0.5, 0.0});
  CHECK(o.res == "S");
  CHECK(o.subs == std::vector<std::uint64_t>{4, 6});
  // Without any key 1 an image gets no bucket, and nothing is drawn.
  const auto no_images = certain_config({65, 33, 17});
  CHECK(run_script(v2, no_images, image, {}).res.empty());
  CHECK(run_script(v12, no_images, image, {}).res.empty());
  // With real generators an image always lands in key 1 of p = 1 (random() < 1 always).
  const auto only_images = certain_config({1, 5});
  const vbucket::fast_source fast(1, 2);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    CHECK(chosen_frames(only_images, v2.assign(only_images, image, i, fast)) == 1);
    CHECK(chosen_frames(only_images, v12.assign(only_images, image, i, fast)) == 1);
  }
  // A 2-frame clip is not an image: it fills no key (5 > 2, and 1 is not a video key).
  CHECK(v2.assign(only_images, meta(2, 10, 10, kNaN), 0, fast) == vbucket::no_bucket);
  CHECK(v12.assign(only_images, meta(2, 10, 10, kNaN), 0, fast) == vbucket::no_bucket);
}

TEST_CASE("rules: Open-Sora v1.2 draws from a fresh stream per (resolution, frames) check") {
  const auto c = rs_config();
  const vbucket::opensora_v12_rule rule{1};
  const auto video = meta(100, 10, 10, kNaN);
  // 65's pair draw 0.31 > p_t = 0.3 skips 65; 33 (stream 1): 0.7 < 0.7 fails: leave R;
  // S's 5 (stream 5) has p = 1: no draw.
  auto o = run_script(rule, c, video, {0.31, 0.7});
  CHECK(o.res == "S");
  CHECK(o.frames == 5);
  CHECK(o.subs == std::vector<std::uint64_t>{0, 1});
  // 0.3 > 0.3 is false: 65 stays, and its acceptance uses the same stream (0): 0.5 < 0.5 fails.
  o = run_script(rule, c, video, {0.3, 0.5});
  CHECK(o.res == "S");
  CHECK(o.subs == std::vector<std::uint64_t>{0, 0});
  o = run_script(rule, c, video, {0.3, 0.49});
  CHECK(o.res == "R");
  CHECK(o.frames == 65);
  // T = 12: the pair draw on 65 happens even though 12 frames cannot fill 65; 33 and 17 make
  // no draw; 9's pair (p_t = 1) draws and is never skipped (random() > 1 is false); 12 > 9
  // and p = 1 takes it with no second draw.
  o = run_script(rule, c, meta(12, 10, 10, kNaN), {0.9, 0.999});
  CHECK(o.res == "R");
  CHECK(o.frames == 9);
  CHECK(o.subs == std::vector<std::uint64_t>{0, 3});
  // The sample index is the stream's, for any index.
  o = run_script(rule, c, meta(12, 10, 10, kNaN), {0.9, 0.5}, 0);
  CHECK(o.frames == 9);
}

TEST_CASE("rules: Open-Sora v1.2 frame interval 1, 2 and 3 (T > t * interval, strict)") {
  const auto c = certain_config({16, 8, 1});
  const vbucket::fast_source src(3, 0);
  auto frames_for = [&](std::int64_t interval, std::int64_t t) {
    const vbucket::opensora_v12_rule rule{interval};
    return chosen_frames(c, rule.assign(c, meta(t, 10, 10, kNaN), 0, src));
  };
  const std::int64_t none = vbucket::no_bucket;
  // interval 1: 17 > 16; 16 > 8 (16 > 16 fails); 9 > 8; 8 > 8 fails.
  CHECK(frames_for(1, 17) == 16);
  CHECK(frames_for(1, 16) == 8);
  CHECK(frames_for(1, 9) == 8);
  CHECK(frames_for(1, 8) == none);
  // interval 2: 33 > 32; 32 > 16 (32 > 32 fails); 17 > 16; 16 > 16 fails.
  CHECK(frames_for(2, 33) == 16);
  CHECK(frames_for(2, 32) == 8);
  CHECK(frames_for(2, 17) == 8);
  CHECK(frames_for(2, 16) == none);
  CHECK(frames_for(2, 2) == none);
  // interval 3: 49 > 48; 48 > 24 (48 > 48 fails); 25 > 24; 24 > 24 fails.
  CHECK(frames_for(3, 49) == 16);
  CHECK(frames_for(3, 48) == 8);
  CHECK(frames_for(3, 25) == 8);
  CHECK(frames_for(3, 24) == none);
  // Images are unaffected by the interval.
  CHECK(frames_for(3, 1) == 1);
  // A huge interval or T cannot overflow t * interval.
  CHECK(frames_for(std::numeric_limits<std::int64_t>::max(), 100) == none);
  CHECK(frames_for(std::numeric_limits<std::int64_t>::max() / 8,
                   std::numeric_limits<std::int64_t>::max()) == 8);
  CHECK(frames_for(1, std::numeric_limits<std::int64_t>::max()) == 16);
  // validate() refuses intervals below 1.
  CHECK_THROWS_AS(vbucket::opensora_v12_rule{0}.validate(), vbucket::error);
  CHECK_THROWS_AS(vbucket::opensora_v12_rule{-2}.validate(), vbucket::error);
  CHECK_NOTHROW(vbucket::opensora_v12_rule{3}.validate());
}

TEST_CASE("rules: Open-Sora 2.0 fps thinning to fps_max") {
  // interval = 1 if fps is NaN or fps < fps_max else ceil(fps / fps_max); T //= interval.
  const vbucket::opensora_v2_rule r16{16.0};
  CHECK(r16.effective_frames(128, kNaN) == 128);
  CHECK(r16.effective_frames(128, 15.999) == 128);
  CHECK(r16.effective_frames(128, 16.0) == 128);    // ceil(1) = 1
  CHECK(r16.effective_frames(128, 16.0001) == 64);  // ceil(1.00000625) = 2
  CHECK(r16.effective_frames(129, 23.976) == 64);   // ceil(1.4985) = 2, 129 // 2
  CHECK(r16.effective_frames(128, 32.0) == 64);     // ceil(2) = 2
  CHECK(r16.effective_frames(128, 32.5) == 42);     // ceil(2.03) = 3, 128 // 3
  CHECK(r16.effective_frames(128, 60.0) == 32);     // ceil(3.75) = 4
  CHECK(r16.effective_frames(127, 59.94) == 31);    // ceil(3.74625) = 4, 127 // 4
  CHECK(r16.effective_frames(128, 120.0) == 16);    // ceil(7.5) = 8
  CHECK(r16.effective_frames(128, 0.0) == 128);
  CHECK(r16.effective_frames(128, -30.0) == 128);
  CHECK(r16.effective_frames(128, -kInf) == 128);
  CHECK(r16.effective_frames(128, kInf) == 0);  // unusable: no frames left
  CHECK(r16.effective_frames(128, 1e300) == 0);
  const vbucket::opensora_v2_rule r8{8.0};
  CHECK(r8.effective_frames(128, 7.99) == 128);
  CHECK(r8.effective_frames(128, 8.0) == 128);
  CHECK(r8.effective_frames(128, 24.0) == 42);  // ceil(3) = 3
  CHECK(r8.effective_frames(128, 30.0) == 32);  // ceil(3.75) = 4
  const vbucket::opensora_v2_rule r30{30.0};
  CHECK(r30.effective_frames(128, 29.97) == 128);
  CHECK(r30.effective_frames(128, 30.0) == 128);
  CHECK(r30.effective_frames(128, 60.0) == 64);   // ceil(2) = 2
  CHECK(r30.effective_frames(128, 60.1) == 42);   // ceil(2.003) = 3
  CHECK(r30.effective_frames(128, 120.0) == 32);  // 4

  // Through assign, with keys 64 32 16 8 1 (all p = 1): the largest key <= T // interval.
  const auto c = certain_config({64, 32, 16, 8, 1});
  const vbucket::fast_source src(11, 0);
  auto frames_for = [&](const vbucket::opensora_v2_rule& r, std::int64_t t, double fps) {
    return chosen_frames(c, r.assign(c, meta(t, 10, 10, fps), 5, src));
  };
  CHECK(frames_for(r16, 128, kNaN) == 64);
  CHECK(frames_for(r16, 128, 16.0) == 64);
  CHECK(frames_for(r16, 128, 23.976) == 64);
  CHECK(frames_for(r16, 127, 23.976) == 32);  // 63
  CHECK(frames_for(r16, 128, 60.0) == 32);
  CHECK(frames_for(r16, 128, 120.0) == 16);
  CHECK(frames_for(r16, 64, 120.0) == 8);
  CHECK(frames_for(r16, 128, 2048.0) == 1);                   // 128 // 128 = 1: now an image
  CHECK(frames_for(r16, 128, 4096.0) == vbucket::no_bucket);  // 0 frames
  CHECK(frames_for(r16, 128, kInf) == vbucket::no_bucket);
  CHECK(frames_for(r8, 128, 30.0) == 32);
  CHECK(frames_for(r8, 128, 8.0) == 64);
  CHECK(frames_for(r30, 128, 60.0) == 64);
  CHECK(frames_for(r30, 128, 60.1) == 32);
  // fps_max must be a positive finite number.
  for (double bad : {0.0, -16.0, kNaN, kInf}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(vbucket::opensora_v2_rule{bad}.validate(), vbucket::error);
  }
  CHECK_NOTHROW(r8.validate());
}

TEST_CASE("rules: invalid metadata gives invalid_sample, for any values") {
  const auto c = certain_config({64, 8, 1});
  const vbucket::opensora_v2_rule v2{16.0};
  const vbucket::opensora_v12_rule v12{1};
  const vbucket::fast_source fast(1, 0);
  const vbucket::numpy_source numpy(vbucket::big_seed(1), c.num_buckets());
  constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t small = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t side_cap = std::int64_t{1} << 24;  // H*W must be exact in a double
  const vbucket::sample_meta invalid[] = {{0, 10, 10, 24.0},
                                          {-1, 10, 10, 24.0},
                                          {small, 10, 10, 24.0},
                                          {10, 0, 10, 24.0},
                                          {10, 10, 0, 24.0},
                                          {10, -10, 10, 24.0},
                                          {10, 10, -10, kNaN},
                                          {10, small, small, kNaN},
                                          {10, side_cap + 1, 10, kNaN},
                                          {10, 10, side_cap + 1, kNaN},
                                          {10, big, big, kNaN},
                                          {10, big, 1, kInf},
                                          {0, 0, 0, kNaN}};
  for (const auto& m : invalid) {
    CAPTURE(m.num_frames);
    CAPTURE(m.height);
    CAPTURE(m.width);
    CHECK(v2.assign(c, m, 0, fast) == vbucket::invalid_sample);
    CHECK(v12.assign(c, m, 0, fast) == vbucket::invalid_sample);
    CHECK(v2.assign(c, m, 3, numpy) == vbucket::invalid_sample);
    CHECK(v12.assign(c, m, 3, numpy) == vbucket::invalid_sample);
  }
  // At the limits the sample is valid: huge T fills the largest key, the largest side is fine.
  CHECK(chosen_frames(c, v2.assign(c, {big, 10, 10, kNaN}, 0, fast)) == 64);
  CHECK(chosen_frames(c, v12.assign(c, {big, 10, 10, kNaN}, 0, fast)) == 64);
  CHECK(chosen_frames(c, v2.assign(c, {big, side_cap, side_cap, 1e300}, 0, fast)) ==
        vbucket::no_bucket);
  CHECK(chosen_frames(c, v2.assign(c, {100, side_cap, 1, 16.0}, 0, fast)) == 64);
  CHECK(chosen_frames(c, v12.assign(c, {100, 1, side_cap, kNaN}, 0, fast)) == 64);
  // A valid sample that is merely too small is "no bucket", not invalid.
  CHECK(v2.assign(c, {100, 1, 1, kNaN}, 0, fast) == vbucket::no_bucket);
  CHECK(v12.assign(c, {100, 1, 1, kNaN}, 0, fast) == vbucket::no_bucket);
}

namespace {
/// A user rule: frames key by position in the config from the sample's frames modulo the
/// number of buckets, kept when the sample's draw from sub-stream 3 is below 0.5, and invalid
/// for non-positive frames. Not one of vbucket's rules, so assign_all must only plumb it.
struct modulo_rule {
  template <vbucket::random_source Source>
  vbucket::bucket_id assign(const vbucket::bucket_config& c, const vbucket::sample_meta& m,
                            std::uint64_t index, const Source& source) const {
    if (m.num_frames < 1) return vbucket::invalid_sample;
    auto rng = source.stream(index, 3);
    if (!(rng.random() < 0.5)) return vbucket::no_bucket;
    return static_cast<vbucket::bucket_id>(static_cast<std::uint64_t>(m.num_frames) %
                                           c.num_buckets());
  }
};
static_assert(vbucket::bucket_rule<modulo_rule>);
static_assert(vbucket::bucket_rule<modulo_rule, vbucket::numpy_source>);
static_assert(vbucket::bucket_rule<modulo_rule, scripted_source>);
}  // namespace

TEST_CASE("rules: a user rule through assign_all") {
  const auto c = rs_config();  // 7 buckets
  REQUIRE(c.num_buckets() == 7);
  vbucket::meta_table table;
  constexpr std::size_t n = 50'000;
  for (std::size_t i = 0; i < n; ++i)
    table.push_back({static_cast<std::int64_t>(i % 23) - 2, 10, 10, kNaN});
  const vbucket::fast_source src(99, 4);
  const auto got = vbucket::assign_all(c, table, modulo_rule{}, src, 3);
  REQUIRE(got.size() == n);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t frames = static_cast<std::int64_t>(i % 23) - 2;
    vbucket::bucket_id expected = vbucket::invalid_sample;
    if (frames >= 1) {
      // The same draw, taken straight from the source.
      const bool keep = src.draw(i, 3, 0) < 0.5;
      expected = keep ? static_cast<vbucket::bucket_id>(frames % 7) : vbucket::no_bucket;
      kept += keep;
    }
    if (got[i] != expected) {
      INFO("sample " << i);
      REQUIRE(got[i] == expected);
    }
  }
  // About half of the 20/23 valid samples are kept.
  CHECK(kept > n * 20 / 23 * 45 / 100);
  CHECK(kept < n * 20 / 23 * 55 / 100);
}

TEST_CASE("rules: the public building blocks of a rule") {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr auto i64max = std::numeric_limits<std::int64_t>::max();
  // frame_interval: 1 below fps_max or when unknown, else ceil(fps / fps_max).
  CHECK(vbucket::frame_interval(nan, 16.0) == 1);
  CHECK(vbucket::frame_interval(0.0, 16.0) == 1);
  CHECK(vbucket::frame_interval(15.99, 16.0) == 1);
  CHECK(vbucket::frame_interval(16.0, 16.0) == 1);
  CHECK(vbucket::frame_interval(16.5, 16.0) == 2);
  CHECK(vbucket::frame_interval(30.0, 16.0) == 2);
  CHECK(vbucket::frame_interval(60.0, 16.0) == 4);
  CHECK(vbucket::frame_interval(1e300, 1e-300) == i64max);  // saturates
  const vbucket::opensora_v2_rule rule{16.0};
  CHECK(rule.effective_frames(100, 60.0) == 25);
  CHECK(rule.effective_frames(i64max, 1e300) == 0);  // an interval beyond 2^63 leaves none
  // bucketable: sides in [1, 2^24], at least one frame.
  CHECK(vbucket::bucketable({1, 1, 1, nan}));
  CHECK_FALSE(vbucket::bucketable({0, 1, 1, nan}));
  CHECK_FALSE(vbucket::bucketable({5, (std::int64_t{1} << 24) + 1, 1, nan}));
  // Resolutions {256px, 128px}: 256px needs H·W ≥ 0.8 · 65536 = 52428.8.
  const std::vector<vbucket::bucket_spec> specs{{"256px", 33, 1.0, std::nullopt, 4},
                                                {"128px", 33, 1.0, std::nullopt, 4}};
  const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
  CHECK(vbucket::first_fitting_resolution(config, {40, 229, 229, nan}) == 0);  // 52441
  CHECK(vbucket::first_fitting_resolution(config, {40, 228, 229, nan}) == 1);  // 52212
  CHECK(vbucket::first_fitting_resolution(config, {40, 10, 10, nan}) == 2);
  // bucket_for is the rule's pick of the ratio: a 9:16 clip in 256px.
  const vbucket::sample_meta wide{40, 720, 1280, 24.0};
  const auto& table = config.resolutions()[0].info.table;
  CHECK(vbucket::bucket_for(config, 0, 0, wide) == config.id_of(0, 0, table.closest(720, 1280)));
  CHECK(config.ratio_of(vbucket::bucket_for(config, 0, 0, wide)).width >
        config.ratio_of(vbucket::bucket_for(config, 0, 0, wide)).height);
}
