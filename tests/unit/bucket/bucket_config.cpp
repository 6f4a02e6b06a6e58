/// Tests of vbucket/bucket/bucket_config.hpp (the validator, order and ids): one test per error,
/// each checking that the message names the key. The JSON loader's are in
/// tests/json/bucket_config.cpp.
#include "vbucket/bucket/bucket_config.hpp"

#include <doctest/doctest.h>

#include <cstdint>      // std::int64_t
#include <limits>       // quiet_NaN
#include <optional>     // std::nullopt
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// Three resolutions of a user's own; "b" and "a" have the same pixel count.
vbucket::user_tables small_tables() {
  auto table = [](double r) { return vbucket::aspect_table({{"k", r, 10, 10}}); };
  vbucket::user_tables t;
  t.add("a", 1000, vbucket::aspect_table({{"1:1", 1.0, 30, 30}, {"2:1", 0.5, 20, 40}}))
      .add("b", 1000, table(1.0))
      .add("c", 2000,
           vbucket::aspect_table({{"x", 1.0, 40, 50}, {"y", 2.0, 60, 30}, {"z", 0.5, 30, 60}}));
  return t;
}

vbucket::bucket_spec spec(std::string res, std::int64_t frames, double p,
                          std::optional<std::int64_t> bs = 4) {
  vbucket::bucket_spec s;
  s.resolution = std::move(res);
  s.frames = frames;
  s.p_resolution = p;
  s.batch_size = bs;
  return s;
}

/// The message of validating one bad spec; it must name resolution and frames key.
std::string spec_error(const vbucket::bucket_spec& bad) {
  const std::vector<vbucket::bucket_spec> specs{spec("a", 1, 1.0), bad};
  return error_message([&] { vbucket::bucket_config c(specs, small_tables()); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The validator, one test per error (bucket_spec input, so values JSON cannot hold are covered).
// ---------------------------------------------------------------------------------------------

TEST_CASE("bucket_config: probability below 0") {
  const auto msg = spec_error(spec("c", 51, -0.25));
  CHECK(contains(msg, "\"c\""));
  CHECK(contains(msg, "\"51\""));
  CHECK(contains(msg, "probability"));
  // The value is shown as written, even when it is only just out of range.
  CHECK(contains(spec_error(spec("c", 51, -1e-9)), "-1e-09"));
}

TEST_CASE("bucket_config: probability above 1") {
  const auto msg = spec_error(spec("c", 51, 1.0000001));
  CHECK(contains(msg, "\"c\""));
  CHECK(contains(msg, "\"51\""));
  CHECK(contains(msg, "probability 1.0000001 "));
}

TEST_CASE("bucket_config: probability NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto msg = spec_error(spec("c", 51, nan));
  CHECK(contains(msg, "\"c\""));
  CHECK(contains(msg, "\"51\""));
  CHECK(contains(msg, "NaN"));
  auto pair = spec("c", 51, 0.5);
  pair.p_frames = nan;
  const auto msg2 = spec_error(pair);
  CHECK(contains(msg2, "\"51\""));
  CHECK(contains(msg2, "frames probability"));
}

TEST_CASE("bucket_config: p_frames outside [0, 1]") {
  for (double pf : {-0.5, 1.5, std::numeric_limits<double>::infinity()}) {
    CAPTURE(pf);
    auto s = spec("b", 17, 0.5);
    s.p_frames = pf;
    const auto msg = spec_error(s);
    CHECK(contains(msg, "\"b\""));
    CHECK(contains(msg, "\"17\""));
    CHECK(contains(msg, "frames probability"));
  }
  // The bounds themselves are fine.
  auto lo = spec("b", 17, 0.5), hi = spec("b", 18, 0.5);
  lo.p_frames = 0.0;
  hi.p_frames = 1.0;
  CHECK_NOTHROW(vbucket::bucket_config(std::vector{lo, hi, spec("a", 1, 0.0), spec("c", 1, 1.0)},
                                       small_tables()));
}

TEST_CASE("bucket_config: batch size 0") {
  const auto msg = spec_error(spec("c", 9, 0.5, 0));
  CHECK(contains(msg, "\"c\" -> \"9\""));
  CHECK(contains(msg, "batch size"));
}

TEST_CASE("bucket_config: negative batch size") {
  const auto msg = spec_error(spec("c", 9, 0.5, -3));
  CHECK(contains(msg, "\"c\" -> \"9\""));
  CHECK(contains(msg, "-3"));
}

TEST_CASE("bucket_config: batch size too large") {
  const auto msg = spec_error(spec("c", 9, 0.5, (std::int64_t{1} << 31) + 1));
  CHECK(contains(msg, "\"c\" -> \"9\""));
  CHECK(contains(msg, "batch size"));
  CHECK_NOTHROW(vbucket::bucket_config(std::vector{spec("c", 9, 0.5, std::int64_t{1} << 31)},
                                       small_tables()));
}

TEST_CASE("bucket_config: null batch size with a non-zero probability") {
  const auto msg = spec_error(spec("c", 9, 0.25, std::nullopt));
  CHECK(contains(msg, "\"c\" -> \"9\""));
  CHECK(contains(msg, "null"));
  // With probability 0 it is a disabled bucket: it exists and counts, batch size 0.
  const vbucket::bucket_config c(std::vector{spec("c", 9, 0.0, std::nullopt), spec("c", 3, 1.0)},
                                 small_tables());
  CHECK(c.num_buckets() == 6);
  const auto id = c.find("c", 9, "y");
  REQUIRE(id >= 0);
  CHECK(c.batch_size(id) == 0);
  CHECK_FALSE(c.enabled(id));
  CHECK(c.enabled(c.find("c", 3, "y")));
}

TEST_CASE("bucket_config: unknown resolution") {
  const auto msg = spec_error(spec("d", 9, 0.5));
  CHECK(contains(msg, "\"d\""));
  const auto msg2 =
      error_message([] { vbucket::bucket_config(std::vector{spec("", 1, 1.0)}, small_tables()); });
  CHECK(contains(msg2, "resolution"));
}

TEST_CASE("bucket_config: duplicate frames key") {
  const std::vector specs{spec("a", 1, 1.0), spec("c", 51, 0.5), spec("c", 51, 0.25)};
  const auto msg = error_message([&] { vbucket::bucket_config c(specs, small_tables()); });
  CHECK(contains(msg, "\"c\" -> \"51\""));
  CHECK(contains(msg, "duplicate"));
}

TEST_CASE("bucket_config: frames key below 1") {
  for (std::int64_t f : {0, -1}) {
    CAPTURE(f);
    const auto msg = spec_error(spec("c", f, 0.5));
    CHECK(contains(msg, "\"c\" -> \"" + std::to_string(f) + "\""));
    CHECK(contains(msg, "frames"));
  }
}

TEST_CASE("bucket_config: no buckets") {
  CHECK(contains(error_message([] {
                   vbucket::bucket_config(std::vector<vbucket::bucket_spec>{}, small_tables());
                 }),
                 "no buckets"));
}

// ---------------------------------------------------------------------------------------------
// Order, counts and ids.
// ---------------------------------------------------------------------------------------------

TEST_CASE("bucket_config: resolutions by pixels (ties in file order), frames descending") {
  // File order: b (1000 px), a (1000 px), c (2000 px), with frames keys out of order.
  const std::vector specs{spec("b", 5, 1.0),  spec("a", 1, 1.0),  spec("b", 17, 0.5),
                          spec("c", 3, 1.0),  spec("a", 33, 0.5), spec("b", 1, 1.0),
                          spec("c", 65, 1.0), spec("a", 9, 1.0)};
  const vbucket::bucket_config c(specs, small_tables());
  const auto& rs = c.resolutions();
  REQUIRE(rs.size() == 3);
  CHECK(rs[0].info.name == "c");
  CHECK(rs[1].info.name == "b");
  CHECK(rs[2].info.name == "a");
  auto frames_of = [](const vbucket::resolution_entry& r) {
    std::vector<std::int64_t> f;
    for (const auto& e : r.frames) f.push_back(e.frames);
    return f;
  };
  CHECK(frames_of(rs[0]) == std::vector<std::int64_t>{65, 3});
  CHECK(frames_of(rs[1]) == std::vector<std::int64_t>{17, 5, 1});
  CHECK(frames_of(rs[2]) == std::vector<std::int64_t>{33, 9, 1});
  // Each entry keeps its own probability and batch size through the sort.
  CHECK(rs[1].frames[0].p_resolution == 0.5);
  CHECK(rs[2].frames[0].p_resolution == 0.5);
  CHECK(rs[2].frames[1].p_resolution == 1.0);
  // 0.8 x pixels; key 1's index; Open-Sora v1.2's bucket_id numbering of (res, t) pairs.
  CHECK(rs[0].min_pixels == 1600.0);
  CHECK(rs[1].min_pixels == 800.0);
  CHECK(rs[0].image_index == -1);
  CHECK(rs[1].image_index == 2);
  CHECK(rs[2].image_index == 2);
  CHECK(rs[0].first_pair == 0);
  CHECK(rs[1].first_pair == 2);
  CHECK(rs[2].first_pair == 5);
  // Buckets: c 2 keys x 3 ratios, b 3 x 1, a 3 x 2.
  CHECK(c.num_buckets() == 6 + 3 + 6);
  CHECK(rs[0].first_bucket == 0);
  CHECK(rs[1].first_bucket == 6);
  CHECK(rs[2].first_bucket == 9);
}

TEST_CASE("bucket_config: ids enumerate (resolution, frames, ratio) and round-trip") {
  const std::vector specs{spec("a", 1, 1.0), spec("a", 9, 1.0), spec("c", 3, 1.0),
                          spec("c", 65, 1.0), spec("b", 2, 1.0)};
  const vbucket::bucket_config c(specs, small_tables());
  // Hand enumeration: c (2000 px) before a and b (1000 px each, a first in the file):
  // c (65: x y z, 3: x y z), a (9: 1:1 2:1, 1: 1:1 2:1), b (2: k).
  struct expected_bucket {
    const char* res;
    std::int64_t frames;
    const char* ratio;
    int h, w;
  };
  const expected_bucket expected[] = {
      {"c", 65, "x", 40, 50},  {"c", 65, "y", 60, 30},  {"c", 65, "z", 30, 60},
      {"c", 3, "x", 40, 50},   {"c", 3, "y", 60, 30},   {"c", 3, "z", 30, 60},
      {"a", 9, "1:1", 30, 30}, {"a", 9, "2:1", 20, 40}, {"a", 1, "1:1", 30, 30},
      {"a", 1, "2:1", 20, 40}, {"b", 2, "k", 10, 10}};
  REQUIRE(c.num_buckets() == std::size(expected));
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    CAPTURE(i);
    const auto id = static_cast<vbucket::bucket_id>(i);
    const auto& e = expected[i];
    CHECK(c.find(e.res, e.frames, e.ratio) == id);
    CHECK(c.resolution_of(id).info.name == e.res);
    CHECK(c.frames_of(id).frames == e.frames);
    CHECK(c.ratio_of(id).key == e.ratio);
    CHECK(c.ratio_of(id).height == e.h);
    CHECK(c.ratio_of(id).width == e.w);
    const auto k = c.key(id);
    CHECK(c.id_of(static_cast<std::size_t>(k.resolution), static_cast<std::size_t>(k.frames_index),
                  static_cast<std::size_t>(k.ratio_index)) == id);
  }
  CHECK(c.find("a", 2, "1:1") == vbucket::no_bucket);
  CHECK(c.find("a", 9, "k") == vbucket::no_bucket);
  CHECK(c.find("zz", 9, "1:1") == vbucket::no_bucket);
}
