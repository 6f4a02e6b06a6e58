/// Tests of vbucket/bucket/assign.hpp: whole-table assignment equals the per-sample rule whatever
/// the thread count, over meta_table and over a user's own type adapted with meta_traits.
#include "vbucket/bucket/assign.hpp"

#include <doctest/doctest.h>

#include <cmath>    // std::isnan
#include <cstdint>  // std::int64_t, std::uint64_t
#include <deque>    // std::deque (random access, not contiguous)
#include <limits>   // quiet_NaN
#include <random>   // std::mt19937_64
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "vbucket_test/configs.hpp"

namespace {

/// A user's sample type: other member names, narrower types, extra fields.
struct odd_clip {
  std::string uri;
  std::uint16_t rows;
  std::int32_t frame_count;
  double unrelated;
  std::uint16_t cols;
  float rate;
};

}  // namespace

template <>
struct vbucket::meta_traits<odd_clip> {
  static std::int32_t frames(const odd_clip& c) { return c.frame_count; }
  static std::uint16_t height(const odd_clip& c) { return c.rows; }
  static std::uint16_t width(const odd_clip& c) { return c.cols; }
  static float fps(const odd_clip& c) { return c.rate; }
};
static_assert(vbucket::video_meta<odd_clip>);

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A mixed metadata table: videos of many sizes and rates, images, and a few invalid rows.
vbucket::meta_table mixed_table(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  const double rates[] = {23.976, 24.0, 25.0, 29.97, 30.0, 60.0, 12.0, kNaN};
  vbucket::meta_table t;
  t.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = gen();
    const auto h = static_cast<std::int64_t>(64 + (r >> 8) % 2100);
    const auto w = static_cast<std::int64_t>(64 + (r >> 24) % 2100);
    auto frames = static_cast<std::int64_t>(1 + (r >> 40) % 400);
    if ((r & 0xff) < 25) frames = 1;                                      // ~10% images
    if ((r & 0xff) == 255) frames = -static_cast<std::int64_t>(r >> 60);  // invalid rows
    t.push_back({frames, h, w, frames == 1 ? kNaN : rates[(r >> 4) % std::size(rates)]});
  }
  return t;
}

/// Small configs of each generation whose probabilities below 1 make the draws matter.
vbucket::bucket_config v2_config() { return vbucket_test::draw_v2_config(); }
vbucket::bucket_config v12_config() { return vbucket_test::draw_v12_config(); }

/// The plain serial reference: the rule, sample by sample.
template <class Rule, class Source>
std::vector<vbucket::bucket_id> serial(const vbucket::bucket_config& c,
                                       const vbucket::meta_table& t, const Rule& rule,
                                       const Source& src) {
  std::vector<vbucket::bucket_id> out;
  out.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) out.push_back(rule.assign(c, t[i], i, src));
  return out;
}

template <class Rule, class Source>
void check_thread_independence(const vbucket::bucket_config& c, const vbucket::meta_table& t,
                               const Rule& rule, const Source& src) {
  const auto expected = serial(c, t, rule, src);
  // The outcomes are varied: buckets, no bucket and invalid rows all occur.
  std::size_t buckets = 0, none = 0, invalid = 0;
  for (auto id : expected) {
    buckets += id >= 0;
    none += id == vbucket::no_bucket;
    invalid += id == vbucket::invalid_sample;
  }
  CHECK(buckets > t.size() / 10);
  CHECK(none > 0);
  CHECK(invalid > 0);
  for (unsigned threads : {1u, 2u, 3u, 8u, 0u}) {
    CAPTURE(threads);
    CHECK(vbucket::assign_all(c, t, rule, src, threads) == expected);
  }
  std::vector<vbucket::bucket_id> into(t.size(), 12345);
  vbucket::assign_into(std::span<vbucket::bucket_id>(into), c, t, rule, src, 3);
  CHECK(into == expected);
}

}  // namespace

TEST_CASE("assign: the same ids whatever the thread count (1, 2, 3, 8, all cores)") {
  // 200,003 rows: at least 16,384 rows per chunk, so up to 12 chunks really split, unevenly.
  const auto table = mixed_table(200'003, 7);
  SUBCASE("Open-Sora 2.0 rule, fast_source") {
    check_thread_independence(v2_config(), table, vbucket::opensora_v2_rule{},
                              vbucket::fast_source(1, 2));
  }
  SUBCASE("Open-Sora 2.0 rule, numpy_source") {
    const auto c = v2_config();
    check_thread_independence(c, table, vbucket::opensora_v2_rule{},
                              vbucket::numpy_source(vbucket::big_seed(1234), c.num_buckets()));
  }
  SUBCASE("Open-Sora v1.2 rule, fast_source") {
    check_thread_independence(v12_config(), table, vbucket::opensora_v12_rule{2},
                              vbucket::fast_source(3, 0));
  }
  SUBCASE("Open-Sora v1.2 rule, numpy_source") {
    const auto c = v12_config();
    check_thread_independence(c, table, vbucket::opensora_v12_rule{1},
                              vbucket::numpy_source(vbucket::big_seed(42), c.num_buckets()));
  }
}

TEST_CASE("assign: assign_range over a user type adapted by meta_traits") {
  std::mt19937_64 gen(99);
  std::vector<odd_clip> clips;
  vbucket::meta_table expected_table;
  for (std::size_t i = 0; i < 70'000; ++i) {
    const std::uint64_t r = gen();
    odd_clip c{"clip" + std::to_string(i),
               static_cast<std::uint16_t>(100 + (r >> 8) % 1900),
               static_cast<std::int32_t>((r >> 20) % 300) - 5,
               1e9,
               static_cast<std::uint16_t>(100 + (r >> 32) % 1900),
               (r & 7) == 0 ? std::numeric_limits<float>::quiet_NaN()
                            : 24.0f + static_cast<float>(r & 63)};
    // The same sample written in vbucket's own form, by hand.
    expected_table.push_back({c.frame_count, c.rows, c.cols, static_cast<double>(c.rate)});
    clips.push_back(std::move(c));
  }
  const auto config = v2_config();
  const vbucket::opensora_v2_rule rule{};
  const vbucket::fast_source src(5, 5);
  const auto expected = serial(config, expected_table, rule, src);
  for (unsigned threads : {1u, 3u, 8u}) {
    CAPTURE(threads);
    CHECK(vbucket::assign_range(config, clips, rule, src, threads) == expected);
  }
  // Any random-access range will do, contiguous or not.
  const std::deque<odd_clip> as_deque(clips.begin(), clips.end());
  CHECK(vbucket::assign_range(config, as_deque, rule, src, 2) == expected);
  // Every built-in rule and source, over a count that is no multiple of the blocks in which
  // assign_range converts the records (with vbucket::compiled, the library assigns them).
  const std::vector<odd_clip> head(clips.begin(), clips.begin() + 5003);
  vbucket::meta_table head_table;
  for (std::size_t i = 0; i < head.size(); ++i) head_table.push_back(expected_table[i]);
  const auto c12 = v12_config();
  const vbucket::numpy_source np2(vbucket::big_seed(3), config.num_buckets());
  const vbucket::numpy_source np12(vbucket::big_seed(3), c12.num_buckets());
  for (unsigned threads : {1u, 2u}) {
    CAPTURE(threads);
    CHECK(vbucket::assign_range(config, head, rule, np2, threads) ==
          serial(config, head_table, rule, np2));
    CHECK(vbucket::assign_range(c12, head, vbucket::opensora_v12_rule{1}, src, threads) ==
          serial(c12, head_table, vbucket::opensora_v12_rule{1}, src));
    CHECK(vbucket::assign_range(c12, head, vbucket::opensora_v12_rule{1}, np12, threads) ==
          serial(c12, head_table, vbucket::opensora_v12_rule{1}, np12));
  }
  // meta_table::from reads the same values through the traits.
  const auto from = vbucket::meta_table::from(clips);
  REQUIRE(from.size() == clips.size());
  CHECK(from == expected_table);  // fps compared bit for bit, NaN equal to NaN
  // to_sample_meta widens each field.
  const auto m = vbucket::to_sample_meta(clips[3]);
  CHECK(m.num_frames == clips[3].frame_count);
  CHECK(m.height == clips[3].rows);
  CHECK(m.width == clips[3].cols);
}

TEST_CASE("assign: empty input") {
  const auto config = v2_config();
  const vbucket::meta_table empty;
  for (unsigned threads : {0u, 1u, 8u}) {
    CHECK(vbucket::assign_all(config, empty, vbucket::opensora_v2_rule{},
                              vbucket::fast_source(0, 0), threads)
              .empty());
    CHECK(vbucket::assign_range(config, std::vector<odd_clip>{}, vbucket::opensora_v12_rule{},
                                vbucket::fast_source(0, 0), threads)
              .empty());
    std::vector<vbucket::bucket_id> none;
    vbucket::assign_into(std::span<vbucket::bucket_id>(none), config, empty,
                         vbucket::opensora_v2_rule{}, vbucket::fast_source(0, 0), threads);
    CHECK(none.empty());
  }
  // One row, many threads: one chunk.
  vbucket::meta_table one;
  one.push_back({1, 256, 256, kNaN});
  const auto ids =
      vbucket::assign_all(config, one, vbucket::opensora_v2_rule{}, vbucket::fast_source(0, 0), 8);
  REQUIRE(ids.size() == 1);
  CHECK(ids[0] ==
        vbucket::opensora_v2_rule{}.assign(config, one[0], 0, vbucket::fast_source(0, 0)));
}

TEST_CASE("assign: sample i draws from stream i, so a row's id does not depend on its neighbours") {
  // Assigning a table, and assigning its rows one at a time at their own index, agree; moving a
  // row to another index changes only that it uses that index's stream.
  const auto table = mixed_table(40'000, 11);
  const auto config = v12_config();
  const vbucket::opensora_v12_rule rule{1};
  const vbucket::fast_source src(8, 1);
  const auto all = vbucket::assign_all(config, table, rule, src, 2);
  vbucket::meta_table reversed;
  for (std::size_t i = table.size(); i-- > 0;) reversed.push_back(table[i]);
  const auto rev = vbucket::assign_all(config, reversed, rule, src, 3);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::size_t j = table.size() - 1 - i;
    REQUIRE(rev[j] == rule.assign(config, table[i], j, src));
    differ += rev[j] != all[i];
  }
  CHECK(differ > 0);  // the index matters (it keys the stream)
}
