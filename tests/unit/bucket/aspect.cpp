/// Tests of vbucket/bucket/aspect.hpp: Open-Sora's aspect tables (against the reference JSON made
/// by Open-Sora's own code), resolution names, `_max`/`_ar` settings and closest-ratio matching.
#include "vbucket/bucket/aspect.hpp"

#include <doctest/doctest.h>

#include <cmath>        // std::sqrt, std::fmod, std::floor
#include <cstdint>      // std::int64_t
#include <cstdlib>      // std::strtod
#include <fstream>      // std::ifstream
#include <limits>       // quiet_NaN, infinity
#include <random>       // std::mt19937_64
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#define VBUCKET_ASPECT_TEST_JSON 1
#include <nlohmann/json.hpp>
#else
#define VBUCKET_ASPECT_TEST_JSON 0
#endif

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// Python's float(s) for the plain decimals used as keys.
double py_float(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

/// Open-Sora 2.0's get_ratio("W:H") = H / W.
double py_get_ratio(const std::string& key) {
  const auto colon = key.find(':');
  return py_float(key.substr(colon + 1)) / py_float(key.substr(0, colon));
}

/// CPython's float floor division (Objects/floatobject.c, float_floor_div) for x >= 0, y > 0.
double py_floordiv(double x, double y) {
  const double mod = std::fmod(x, y);
  const double div = (x - mod) / y;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

struct ref_entry {
  std::string key;
  std::int64_t h;
  std::int64_t w;
};

/// A plain transcription of Open-Sora 2.0's get_aspect_ratios_dict(total_pixels, training=True)
/// (opensora/datasets/aspect.py) with AE_SPATIAL_COMPRESSION = d, keeping dict order.
std::vector<ref_entry> ref_v2_dict(std::int64_t total_pixels, std::int64_t d) {
  static const char* const ld_list[] = {"2.39:1", "2:1", "16:9", "1.85:1", "9:16",
                                        "5:8",    "3:2", "4:3",  "1:1"};
  std::vector<ref_entry> dict, vertical;
  auto put = [](std::vector<ref_entry>& m, const std::string& k, std::int64_t h, std::int64_t w) {
    for (auto& e : m)
      if (e.key == k) {
        e.h = h;
        e.w = w;
        return;
      }
    m.push_back({k, h, w});
  };
  const double dd = static_cast<double>(d);
  const double tp = static_cast<double>(total_pixels);
  for (std::string ratio : ld_list) {
    const auto colon = ratio.find(':');
    const double width_ratio = py_float(ratio.substr(0, colon));
    const double height_ratio = py_float(ratio.substr(colon + 1));
    // width = int(math.sqrt(total_pixels * (width_ratio / height_ratio)) // D) * D
    std::int64_t width =
        static_cast<std::int64_t>(py_floordiv(std::sqrt(tp * (width_ratio / height_ratio)), dd)) *
        d;
    // height = int((total_pixels / width) // D) * D
    std::int64_t height =
        static_cast<std::int64_t>(py_floordiv(tp / static_cast<double>(width), dd)) * d;
    auto absdiff = [&](std::int64_t h, std::int64_t w) {
      const std::int64_t v = h * w - total_pixels;
      return v < 0 ? -v : v;
    };
    std::int64_t diff = absdiff(height, width);
    const std::pair<std::int64_t, std::int64_t> candidate[] = {
        {height - d, width}, {height + d, width}, {height, width - d}, {height, width + d}};
    for (const auto& [h, w] : candidate) {
      if (absdiff(h, w) < diff) {
        height = h;
        width = w;
        diff = absdiff(h, w);
      }
    }
    bool seen = false;
    for (const auto& e : dict) seen = seen || (e.h == height && e.w == width);
    if (!seen) {
      put(dict, ratio, height, width);
      put(vertical, ratio.substr(colon + 1) + ":" + ratio.substr(0, colon), width, height);
    }
  }
  for (const auto& v : vertical) put(dict, v.key, v.h, v.w);  // dict.update(vertical)
  return dict;
}

/// Checks `table` against reference entries; `ratio_of` turns a key into Open-Sora's ratio.
template <class RatioOf>
void check_table(const vbucket::aspect_table& table, const std::vector<ref_entry>& expected,
                 RatioOf ratio_of) {
  REQUIRE(table.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(table[i].key == expected[i].key);
    CHECK(table[i].height == expected[i].h);
    CHECK(table[i].width == expected[i].w);
    CHECK(table[i].ratio == ratio_of(expected[i].key));
  }
}

vbucket::aspect_table make_table(std::vector<std::pair<std::string, double>> rows) {
  std::vector<vbucket::aspect_entry> entries;
  for (auto& [k, r] : rows) entries.push_back({k, r, 100, 100});
  return vbucket::aspect_table(std::move(entries));
}

/// Open-Sora's `min(keys, key=lambda r: abs(h / w - ratio(r)))`: strict `<` keeps the first.
std::size_t reference_closest(const vbucket::aspect_table& t, double a) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (std::abs(a - t[i].ratio) < std::abs(a - t[best].ratio)) best = i;
  return best;
}

#if VBUCKET_ASPECT_TEST_JSON
nlohmann::ordered_json load_reference(const std::string& file) {
  const std::string path = std::string(VBUCKET_TEST_DATA_DIR) + "/" + file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  return nlohmann::ordered_json::parse(in);
}

std::vector<ref_entry> entries_of(const nlohmann::ordered_json& ratios) {
  std::vector<ref_entry> out;
  for (const auto& [k, hw] : ratios.items())
    out.push_back({k, hw.at(0).get<std::int64_t>(), hw.at(1).get<std::int64_t>()});
  return out;
}
#endif

}  // namespace

#if VBUCKET_ASPECT_TEST_JSON
TEST_CASE("aspect: Open-Sora 2.0 tables equal the reference JSON") {
  const auto ref = load_reference("opensora_v2_aspect_ratios.json").at("tables");
  REQUIRE(ref.size() == 13);
  const vbucket::opensora_v2_tables tables;
  for (const auto& [name, table] : ref.items()) {
    CAPTURE(name);
    const auto expected = entries_of(table.at("ratios"));
    const vbucket::resolution_info info = tables.resolve(name);
    CHECK(info.name == name);
    CHECK(info.pixels == table.at("pixels").get<std::int64_t>());
    check_table(info.table, expected, py_get_ratio);
    // The transcription used for spatial compression 8 below must agree with Open-Sora here.
    const auto transcribed = ref_v2_dict(table.at("pixels").get<std::int64_t>(), 16);
    REQUIRE(transcribed.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(transcribed[i].key == expected[i].key);
      CHECK(transcribed[i].h == expected[i].h);
      CHECK(transcribed[i].w == expected[i].w);
    }
  }
}

TEST_CASE("aspect: Open-Sora v1.2 tables equal the reference JSON") {
  const auto ref = load_reference("opensora_v12_aspect_ratios.json").at("tables");
  REQUIRE(ref.size() == 13);
  const vbucket::opensora_v12_tables tables;
  for (const auto& [name, table] : ref.items()) {
    CAPTURE(name);
    const vbucket::resolution_info info = tables.resolve(name);
    CHECK(info.name == name);
    CHECK(info.pixels == table.at("pixels").get<std::int64_t>());
    check_table(info.table, entries_of(table.at("ratios")), py_float);
  }
}

TEST_CASE("aspect: _max keeps the single largest-area entry, first on a tie") {
  const auto ref = load_reference("opensora_v2_aspect_ratios.json").at("tables");
  const vbucket::opensora_v2_tables tables;
  for (const auto& [name, table] : ref.items()) {
    CAPTURE(name);
    // Python's max(dict, key=h*w): the first key of largest area.
    std::string best_key;
    std::int64_t best_area = -1;
    for (const auto& [k, hw] : table.at("ratios").items()) {
      const auto area = hw.at(0).get<std::int64_t>() * hw.at(1).get<std::int64_t>();
      if (area > best_area) {
        best_area = area;
        best_key = k;
      }
    }
    const auto info = tables.resolve(name + "_max");
    CHECK(info.name == name + "_max");
    CHECK(info.pixels == table.at("pixels").get<std::int64_t>());
    REQUIRE(info.table.size() == 1);
    CHECK(info.table[0].key == best_key);
    CHECK(std::int64_t{info.table[0].height} * info.table[0].width == best_area);
    CHECK(info.table[0].ratio == py_get_ratio(best_key));
  }
  // Hand check, 768px (589824 pixels): the areas are 576*1024 = 589824 for "16:9" (and its
  // vertical "9:16"), and 768*768 = 589824 for "1:1"; "2.39:1" 496*1184 = 587264;
  // "2:1" 544*1088 = 591872 is the largest, and its vertical "1:2" ties it but comes later.
  const auto info = tables.resolve("768px_max");
  REQUIRE(info.table.size() == 1);
  CHECK(info.table[0].key == "2:1");
  CHECK(info.table[0].height == 544);
  CHECK(info.table[0].width == 1088);
}

TEST_CASE("aspect: _arW:H keeps that one entry") {
  const auto ref = load_reference("opensora_v2_aspect_ratios.json").at("tables");
  const vbucket::opensora_v2_tables tables;
  for (const auto& [name, table] : ref.items()) {
    for (const auto& [k, hw] : table.at("ratios").items()) {
      CAPTURE(name);
      CAPTURE(k);
      const auto info = tables.resolve(name + "_ar" + k);
      CHECK(info.pixels == table.at("pixels").get<std::int64_t>());
      REQUIRE(info.table.size() == 1);
      CHECK(info.table[0].key == k);
      CHECK(info.table[0].height == hw.at(0).get<int>());
      CHECK(info.table[0].width == hw.at(1).get<int>());
    }
  }
  const auto info = tables.resolve("720p_ar16:9");
  REQUIRE(info.table.size() == 1);
  CHECK(info.table[0].height == 720);  // 720p is 921600 = 720 * 1280 pixels
  CHECK(info.table[0].width == 1280);
}
#endif

TEST_CASE("aspect: bad settings, unknown names and bad ratios throw vbucket::error") {
  const vbucket::opensora_v2_tables v2;
  // Each message must name the resolution as written.
  for (std::string bad : {"256px_min", "256px_ar", "256px_ar7:3", "256px_ar16:10", "256px_arx",
                          "256px_", "256px_max_max", "256px_ar16:9_max"}) {
    CAPTURE(bad);
    CHECK(contains(error_message([&] { (void)v2.resolve(bad); }), "\"" + bad + "\""));
  }
  for (std::string bad : {"", "256", "256pix", "px", "p", "0px", "0p", "-256px", "+256px", "25.6px",
                          "abcpx", "256PX", "9999999999px", "4k", "_max"}) {
    CAPTURE(bad);
    CHECK(contains(error_message([&] { (void)v2.resolve(bad); }), "\"" + bad + "\""));
    CHECK_THROWS_AS((void)vbucket::opensora_v2_pixels(bad), vbucket::error);
  }
  const vbucket::opensora_v12_tables v12;
  for (std::string bad : {"", "256px", "720", "720P", "4K", "1080p_max", "999p"}) {
    CAPTURE(bad);
    CHECK(contains(error_message([&] { (void)v12.resolve(bad); }), "\"" + bad + "\""));
  }
  // A table refuses sizes and ratios it could not bucket with.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double ratio : {0.0, -1.0, nan, inf, -inf}) {
    CAPTURE(ratio);
    CHECK(contains(error_message([&] {
                     vbucket::aspect_table({{"odd", ratio, 10, 10}});
                   }),
                   "\"odd\""));
  }
  for (auto [h, w] : {std::pair{0, 10}, std::pair{10, 0}, std::pair{-1, 10}, std::pair{10, -5}}) {
    CHECK(contains(error_message([&] { vbucket::aspect_table({{"k", 1.0, h, w}}); }), "\"k\""));
  }
  CHECK_THROWS_AS(vbucket::aspect_table(std::vector<vbucket::aspect_entry>{}), vbucket::error);
}

TEST_CASE("aspect: pixel counts of Npx and Np names") {
  // "Npx" is N*N; "Np" is Python's int(N * N / 9 * 16), evaluated by hand:
  CHECK(vbucket::opensora_v2_pixels("256px") == 65536);
  CHECK(vbucket::opensora_v2_pixels("1px") == 1);
  CHECK(vbucket::opensora_v2_pixels("2048px") == 4194304);
  CHECK(vbucket::opensora_v2_pixels("768px_max") == 589824);  // the setting is ignored
  CHECK(vbucket::opensora_v2_pixels("720p") == 921600);       // 518400 / 9 * 16
  CHECK(vbucket::opensora_v2_pixels("720p_ar16:9") == 921600);
  CHECK(vbucket::opensora_v2_pixels("360p") == 230400);    // 129600 / 9 * 16
  CHECK(vbucket::opensora_v2_pixels("144p") == 36864);     // 20736 / 9 * 16
  CHECK(vbucket::opensora_v2_pixels("1080p") == 2073600);  // 1166400 / 9 * 16
  CHECK(vbucket::opensora_v2_pixels("100p") == 17777);     // 1111.11... * 16 = 17777.77...
  CHECK(vbucket::opensora_v2_pixels("7p") == 87);          // 49 / 9 * 16 = 87.11...
  CHECK(vbucket::opensora_v2_pixels("1p") == 1);           // 16 / 9 = 1.77...
  CHECK(vbucket::opensora_v2_pixels("3p") == 16);          // 9 / 9 * 16, exact in doubles
  // And through resolve, for every N up to 300 (the ones whose tables exist).
  const vbucket::opensora_v2_tables v2;
  for (std::int64_t n = 24; n <= 300; ++n) {
    CAPTURE(n);
    CHECK(v2.resolve(std::to_string(n) + "px").pixels == n * n);
    CHECK(v2.resolve(std::to_string(n) + "p").pixels ==
          static_cast<std::int64_t>(static_cast<double>(n * n) / 9.0 * 16.0));
  }
}

TEST_CASE("aspect: Open-Sora 2.0 formula matches a transcription of Open-Sora's code") {
  // Beyond the 13 reference names: every "Npx" and "Np" from 24 to 1100, compression 16 and 8.
  for (int d : {16, 8}) {
    const vbucket::opensora_v2_tables tables{d};
    for (std::int64_t n = 24; n <= 1100; ++n) {
      for (const std::string suffix : {"px", "p"}) {
        const std::string name = std::to_string(n) + suffix;
        CAPTURE(d);
        CAPTURE(name);
        const auto info = tables.resolve(name);
        const auto expected = ref_v2_dict(info.pixels, d);
        REQUIRE(info.table.size() == expected.size());
        bool same = true;
        for (std::size_t i = 0; i < expected.size(); ++i)
          same = same && info.table[i].key == expected[i].key &&
                 info.table[i].height == expected[i].h && info.table[i].width == expected[i].w &&
                 info.table[i].ratio == py_get_ratio(expected[i].key);
        CHECK(same);
      }
    }
  }
}

TEST_CASE("aspect: spatial compression 8") {
  const vbucket::opensora_v2_tables d8{8};
  // Hand check, 256px at D = 8: "1:1" is 256x256 as at D = 16. "2.39:1": sqrt(65536 * 2.39) =
  // 395.7..., // 8 = 49 -> width 392; 65536 / 392 = 167.2, // 8 = 20 -> height 160; the area
  // 62720 is 2816 off 65536; (168, 392) = 65856 is 320 off, the best of the four neighbours.
  const auto info = d8.resolve("256px");
  const auto i11 = info.table.find("1:1");
  REQUIRE(i11 < info.table.size());
  CHECK(info.table[i11].height == 256);
  CHECK(info.table[i11].width == 256);
  const auto i239 = info.table.find("2.39:1");
  REQUIRE(i239 < info.table.size());
  CHECK(info.table[i239].height == 168);
  CHECK(info.table[i239].width == 392);
  // Every entry is a multiple of 8, and not all of them are multiples of 16 any more.
  bool any_odd16 = false;
  for (const auto& e : info.table.entries()) {
    CHECK(e.height % 8 == 0);
    CHECK(e.width % 8 == 0);
    any_odd16 = any_odd16 || e.height % 16 != 0 || e.width % 16 != 0;
  }
  CHECK(any_odd16);
  // Compression must be positive, and a resolution too small for it is an error, not a 0 size.
  CHECK_THROWS_AS((void)vbucket::opensora_v2_tables{0}.resolve("256px"), vbucket::error);
  CHECK_THROWS_AS((void)vbucket::opensora_v2_tables{-8}.resolve("256px"), vbucket::error);
  CHECK(contains(error_message([&] { (void)d8.resolve("2px"); }), "\"2px\""));
  CHECK(contains(error_message([&] { (void)vbucket::opensora_v2_tables{}.resolve("10px"); }),
                 "\"10px\""));
}

TEST_CASE("aspect: closest() equals a plain scan on a million random sizes") {
  std::vector<vbucket::aspect_table> tables;
  const vbucket::opensora_v2_tables v2;
  const vbucket::opensora_v12_tables v12;
  for (const char* n : {"144px", "256px", "768px", "240p", "720p", "1080p"})
    tables.push_back(v2.resolve(n).table);
  for (const char* n : {"144p", "256", "360p", "1024", "4k"})
    tables.push_back(v12.resolve(n).table);
  std::mt19937_64 gen(20240611);
  std::uniform_int_distribution<std::int64_t> wide(1, 8192);
  std::uniform_int_distribution<std::int64_t> narrow(200, 2200);
  std::size_t mismatches = 0, mismatches_linear = 0;
  constexpr std::size_t n = 1'000'000;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = tables[i % tables.size()];
    // Half the pairs near common video sizes (ratios near the table's), half anywhere.
    const std::int64_t h = (i & 1) ? wide(gen) : narrow(gen);
    const std::int64_t w = (i & 1) ? wide(gen) : narrow(gen);
    const double a = static_cast<double>(h) / static_cast<double>(w);
    const std::size_t got = t.closest(h, w);
    mismatches += got != reference_closest(t, a);
    mismatches_linear += got != t.linear_closest(a);
  }
  CHECK(mismatches == 0);
  CHECK(mismatches_linear == 0);
}

TEST_CASE("aspect: exact ties go to the first entry in table order") {
  // 0.5 and 1.5 are both exactly 0.5 away from 1.0 (all values are dyadic, so exact).
  const auto ab = make_table({{"a", 0.5}, {"b", 1.5}});
  const auto ba = make_table({{"b", 1.5}, {"a", 0.5}});
  CHECK(ab[ab.closest(7, 7)].key == "a");
  CHECK(ba[ba.closest(7, 7)].key == "b");
  CHECK(ab[ab.closest_ratio(1.0)].key == "a");
  CHECK(ba[ba.closest_ratio(1.0)].key == "b");
  // Duplicate ratios: the first of them wins, wherever the query falls.
  const auto dup = make_table({{"x", 1.0}, {"y", 1.0}, {"z", 2.0}, {"w", 1.0}});
  CHECK(dup[dup.closest(1, 1)].key == "x");
  CHECK(dup[dup.closest(3, 4)].key == "x");
  CHECK(dup[dup.closest(5, 4)].key == "x");  // 1.25: 0.25 from 1.0, 0.75 from 2.0
  CHECK(dup[dup.closest(3, 2)].key == "x");  // 1.5: a tie of 1.0 (x, y, w) and 2.0 (z)
  CHECK(dup[dup.closest(7, 4)].key == "z");  // 1.75
  const auto dup2 = make_table({{"z", 2.0}, {"w", 1.0}, {"x", 1.0}});
  CHECK(dup2[dup2.closest(3, 2)].key == "z");
  CHECK(dup2[dup2.closest(1, 1)].key == "w");
  // A tie where the earlier entry sits in the middle of a run of equal ratios.
  const auto run = make_table({{"p", 1.5}, {"q", 0.5}, {"r", 0.5}, {"s", 1.5}, {"t", 0.5}});
  CHECK(run[run.closest(2, 2)].key == "p");
  const auto run2 = make_table({{"q", 0.5}, {"s", 1.5}, {"r", 0.5}, {"p", 1.5}});
  CHECK(run2[run2.closest(2, 2)].key == "q");

  // Exhaustively: every ordered table of up to 4 entries from a dyadic set (duplicates
  // allowed), every query h/w with h, w in 1..8, against the plain scan.
  const double values[] = {0.25, 0.5, 0.75, 1.0, 1.5, 2.0};
  std::size_t checked = 0, mismatches = 0;
  for (std::size_t len = 1; len <= 4; ++len) {
    std::size_t combos = 1;
    for (std::size_t i = 0; i < len; ++i) combos *= std::size(values);
    for (std::size_t code = 0; code < combos; ++code) {
      std::vector<std::pair<std::string, double>> rows;
      for (std::size_t i = 0, c = code; i < len; ++i, c /= std::size(values))
        rows.push_back({"e" + std::to_string(i), values[c % std::size(values)]});
      const auto t = make_table(rows);
      for (std::int64_t h = 1; h <= 8; ++h)
        for (std::int64_t w = 1; w <= 8; ++w) {
          const double a = static_cast<double>(h) / static_cast<double>(w);
          mismatches += t.closest(h, w) != reference_closest(t, a);
          ++checked;
        }
    }
  }
  CHECK(checked == 99456);  // 64 queries x (6 + 36 + 216 + 1296) tables
  CHECK(mismatches == 0);
}

TEST_CASE("aspect: user tables") {
  vbucket::user_tables user;
  user.add("wide", 1000, make_table({{"a", 0.5}, {"b", 2.0}}))
      .add("square", 500, vbucket::aspect_table({{"1:1", 1.0, 20, 25}}));
  const auto wide = user.resolve("wide");
  CHECK(wide.name == "wide");
  CHECK(wide.pixels == 1000);
  REQUIRE(wide.table.size() == 2);
  CHECK(wide.table[1].key == "b");
  const auto sq = user.resolve("square");
  CHECK(sq.pixels == 500);
  CHECK(sq.table[0].height == 20);
  CHECK(sq.table[0].width == 25);
  // Adding a name again replaces it.
  user.add("square", 600, make_table({{"2:1", 0.5}}));
  CHECK(user.resolve("square").pixels == 600);
  CHECK(user.resolve("square").table[0].key == "2:1");
  CHECK(contains(error_message([&] { (void)user.resolve("nope"); }), "\"nope\""));
  CHECK(contains(error_message([&] { (void)user.resolve("wide_max"); }), "\"wide_max\""));
  CHECK(contains(error_message([&] {
                   user.add("zero", 0, make_table({{"a", 1.0}}));
                 }),
                 "\"zero\""));
  CHECK(contains(error_message([&] { user.add("neg", -5, make_table({{"a", 1.0}})); }), "\"neg\""));
  // The failed adds left the table as it was.
  CHECK_THROWS_AS((void)user.resolve("zero"), vbucket::error);
  CHECK(user.resolve("wide").pixels == 1000);
}
