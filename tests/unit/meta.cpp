/// Tests of vbucket/meta.hpp's metadata contract for one value (what the CSV reader and the
/// Python package's numeric columns both apply).
#include "vbucket/meta.hpp"

#include <doctest/doctest.h>

#include <cmath>    // std::isnan
#include <cstdint>  // std::int64_t
#include <limits>   // std::numeric_limits

TEST_CASE("meta: sizes given as numbers, fps given as numbers") {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  bool whole = false;
  CHECK(vbucket::meta_size_value(51.0, 100, &whole) == 51);
  CHECK(whole);
  CHECK(vbucket::meta_size_value(1.0, 1) == 1);
  CHECK_FALSE(vbucket::meta_size_value(51.5, 100, &whole));
  CHECK_FALSE(whole);  // a fraction: "is not an integer"
  CHECK_FALSE(vbucket::meta_size_value(nan, 100, &whole));
  CHECK_FALSE(whole);
  CHECK_FALSE(vbucket::meta_size_value(inf, 100, &whole));
  CHECK_FALSE(whole);
  CHECK_FALSE(vbucket::meta_size_value(101.0, 100, &whole));
  CHECK(whole);  // whole but out of range: "must be an integer from 1 to 100"
  CHECK_FALSE(vbucket::meta_size_value(0.0, 100));
  CHECK_FALSE(vbucket::meta_size_value(-3.0, 100));
  CHECK_FALSE(vbucket::meta_size_value(1e300, vbucket::max_meta_frames));
  CHECK(vbucket::meta_size_expectation(vbucket::max_meta_side) == "an integer from 1 to 16777216");
  // fps: NaN and 0 (also -0) are unknown; positive finite rates pass; the rest is an error.
  CHECK(std::isnan(*vbucket::meta_fps_value(nan)));
  CHECK(std::isnan(*vbucket::meta_fps_value(0.0)));
  CHECK(std::isnan(*vbucket::meta_fps_value(-0.0)));
  CHECK(*vbucket::meta_fps_value(29.97) == 29.97);
  CHECK(*vbucket::meta_fps_value(1e-300) == 1e-300);
  CHECK_FALSE(vbucket::meta_fps_value(-1.0));
  CHECK_FALSE(vbucket::meta_fps_value(inf));
  CHECK_FALSE(vbucket::meta_fps_value(-inf));
}
