/// Tests of vbucket/bucket/meta.hpp: the metadata contract for one value (what the CSV reader and
/// the Python package's numeric columns both apply) and the compact `meta_table`.
#include "vbucket/bucket/meta.hpp"

#include <doctest/doctest.h>

#include <bit>       // std::bit_cast
#include <cmath>     // std::isnan
#include <cstdint>   // std::int64_t, std::uint64_t
#include <iterator>  // std::size
#include <limits>    // std::numeric_limits
#include <vector>    // std::vector

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

TEST_CASE("meta_table: 16 bytes a row, every value kept exactly") {
  static_assert(vbucket::meta_table::row_bytes == 16);
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const double rates[] = {
      30.0, 29.97002997002997, nan, 29.97002997002997 + 1e-14, -0.0, 0.0, 1e-300, 24.0, -nan, 30.0};
  vbucket::meta_table t;
  std::vector<vbucket::sample_meta> rows;
  for (std::int64_t i = 0; i < 1000; ++i) {
    const vbucket::sample_meta m{i % 7 == 0 ? 0 : 1 + i * 4099 % 100'003, 1 + i % 2160,
                                 1 + (i * 7) % 3840,
                                 rates[static_cast<std::size_t>(i) % std::size(rates)]};
    rows.push_back(m);
    t.push_back(m);
  }
  t.push_back({vbucket::meta_table::max_size, vbucket::meta_table::max_size, 1, 5.0});
  rows.push_back({vbucket::meta_table::max_size, vbucket::meta_table::max_size, 1, 5.0});
  REQUIRE(t.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    const vbucket::sample_meta got = t[i];
    CHECK(got.num_frames == rows[i].num_frames);
    CHECK(got.height == rows[i].height);
    CHECK(got.width == rows[i].width);
    CHECK(std::bit_cast<std::uint64_t>(t.fps(i)) ==
          std::bit_cast<std::uint64_t>(std::isnan(rows[i].fps) ? nan : rows[i].fps));
    CHECK(std::bit_cast<std::uint64_t>(got.fps) == std::bit_cast<std::uint64_t>(t.fps(i)));
  }
  // One code per distinct rate: NaN (whatever its sign) once, -0.0 apart from 0.0.
  CHECK(t.fps_values().size() == 9);
  // The columns: 16 bytes a row (capacity), plus the rates and their index.
  vbucket::meta_table big;
  big.reserve(1 << 16);
  for (std::size_t i = 0; i < (1 << 16); ++i)
    big.push_back({static_cast<std::int64_t>(i) + 1, 360, 640, rates[i % 3]});
  CHECK(big.memory_bytes() < (std::size_t{1} << 16) * 16 + 4096);
  // Equality compares rates bit for bit, NaN equal to NaN.
  vbucket::meta_table copy = vbucket::meta_table::from(rows);
  CHECK(copy == t);
  copy.push_back({1, 1, 1, nan});
  CHECK_FALSE(copy == t);
}

TEST_CASE("meta_table: negative sizes are stored as 0, sizes above 2^32 - 1 are an error") {
  vbucket::meta_table t;
  t.push_back({-5, 360, -1, 30.0});
  CHECK(t[0].num_frames == 0);
  CHECK(t[0].width == 0);
  CHECK(t[0].height == 360);
  t.push_back({1, 1, 1, 1.0});
  CHECK_THROWS_WITH_AS(t.push_back({1, std::int64_t{1} << 32, 1, 1.0}),
                       "meta_table: row 2: height 4294967296 is more than a table holds "
                       "(4294967295)",
                       vbucket::error);
  CHECK(t.size() == 2);  // nothing appended
  // clear() keeps the rates: a reader that refills the table in chunks reuses their codes.
  t.clear();
  CHECK(t.empty());
  t.push_back({2, 2, 2, 30.0});
  CHECK(t.fps_values().size() == 2);
  CHECK(t.fps(0) == 30.0);
}

TEST_CASE("meta_table: many distinct rates (the index grows)") {
  vbucket::meta_table t;
  for (int i = 0; i < 100'000; ++i) t.push_back({1, 1, 1, 1.0 + i * 0.001});
  for (int i = 0; i < 100'000; i += 997) t.push_back({1, 1, 1, 1.0 + i * 0.001});
  CHECK(t.fps_values().size() == 100'000);
  for (std::size_t i = 0; i < t.size(); ++i) {
    const int k = i < 100'000 ? static_cast<int>(i) : static_cast<int>(i - 100'000) * 997;
    if (t.fps(i) != 1.0 + k * 0.001) FAIL_CHECK("row " << i);
  }
}

TEST_CASE("meta_table: append is push_back of each row") {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<vbucket::sample_meta> rows;
  for (std::int64_t i = 0; i < 5000; ++i)
    rows.push_back({i % 11 - 3, 1 + i % 720, 1 + i % 1280,
                    i % 5 == 0 ? nan : 1.0 + static_cast<double>(i % 37) * 0.5});
  vbucket::meta_table one_by_one, at_once;
  at_once.push_back({7, 7, 7, 7.0});
  one_by_one.push_back({7, 7, 7, 7.0});
  for (const auto& m : rows) one_by_one.push_back(m);
  at_once.append(rows);
  CHECK(at_once == one_by_one);
  CHECK(at_once.fps_values().size() == one_by_one.fps_values().size());
  // A size too large: the first such row is named (rows count from the table's start),
  // nothing is appended.
  rows[1234].width = std::int64_t{1} << 40;
  rows[2000].num_frames = std::int64_t{1} << 33;
  CHECK_THROWS_WITH_AS(at_once.append(rows),
                       "meta_table: row 6235: width 1099511627776 is more than a table holds "
                       "(4294967295)",
                       vbucket::error);
  CHECK(at_once.size() == 5001);
  CHECK(at_once == one_by_one);
}
