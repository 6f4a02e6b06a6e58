/// Regression tests for bugs found by the fuzzers (tests/fuzz/) and the bad-input contract:
/// one TEST_CASE per bug, named "regression: <what>", with the input that triggered it.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "vbucket/vbucket.hpp"
#if VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#endif

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

/// A user type whose sizes are floating point, as a pandas column with a missing value is.
struct float_clip {
  double num_frames, height, width;
  double fps;
};

vbucket::bucket_config config_360p() {
  const std::vector<vbucket::bucket_spec> specs = {
      {"360p", 1, 1.0, std::nullopt, 8},
      {"360p", 51, 1.0, std::nullopt, 4},
  };
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace

// fuzz_assign: `to_sample_meta` cast a NaN (or ±inf, or 1e300) size of a user type with
// floating fields straight to int64, which is undefined behaviour (UBSan: "nan is outside the
// range of representable values of type 'long'", include/vbucket/bucket/meta.hpp).
TEST_CASE("regression: to_sample_meta with NaN, infinite and huge floating-point sizes") {
  const auto nan_meta = vbucket::to_sample_meta(float_clip{nan_v, nan_v, nan_v, nan_v});
  CHECK(nan_meta.num_frames == 0);
  CHECK(nan_meta.height == 0);
  CHECK(nan_meta.width == 0);
  const auto big = vbucket::to_sample_meta(float_clip{inf_v, 1e300, -inf_v, 30.0});
  CHECK(big.num_frames == std::numeric_limits<std::int64_t>::max());
  CHECK(big.height == std::numeric_limits<std::int64_t>::max());
  CHECK(big.width == std::numeric_limits<std::int64_t>::min());
  const auto edge = vbucket::to_sample_meta(float_clip{9223372036854775808.0, -0.5, 2.9, 1.0});
  CHECK(edge.num_frames == std::numeric_limits<std::int64_t>::max());
  CHECK(edge.height == 0);
  CHECK(edge.width == 2);

  struct unsigned_clip {
    std::uint64_t num_frames, height, width;
    double fps;
  };
  const auto u = vbucket::to_sample_meta(unsigned_clip{~std::uint64_t{0}, 360, 640, 1.0});
  CHECK(u.num_frames == std::numeric_limits<std::int64_t>::max());

  // Through assignment: such samples are invalid, never UB.
  const auto config = config_360p();
  const std::vector<float_clip> clips = {{nan_v, 360, 640, 30},
                                         {102, nan_v, 640, 30},
                                         {102, 360, inf_v, 30},
                                         {102.7, 360.2, 640.9, 30}};
  const auto ids = vbucket::assign_range(config, clips, vbucket::opensora_v2_rule{},
                                         vbucket::fast_source(1, 0), 1);
  REQUIRE(ids.size() == 4);
  CHECK(ids[0] == vbucket::invalid_sample);
  CHECK(ids[1] == vbucket::invalid_sample);
  CHECK(ids[2] == vbucket::invalid_sample);
  CHECK(ids[3] >= 0);
}

// fuzz_assign: `opensora_v2_rule::effective_frames` with a non-positive fps_max (which
// validate() rejects, but assign() is noexcept and must still be safe) computed
// ceil(fps / fps_max) = -0 or -inf and cast it to int64: a division by zero or UB
// (UBSan: "-inf is outside the range of representable values", include/vbucket/bucket/rules.hpp).
TEST_CASE("regression: opensora_v2_rule with a non-positive fps_max is safe") {
  for (const double fps_max : {0.0, -0.0, -16.0, -1e-300, -inf_v, nan_v}) {
    const vbucket::opensora_v2_rule rule{.fps_max = fps_max};
    CHECK_THROWS_AS(rule.validate(), vbucket::error);
    for (const double fps : {1.0, 30.0, 1e308, inf_v, -inf_v, nan_v, 0.0}) {
      const auto t = rule.effective_frames(102, fps);
      CHECK(t >= 0);
      CHECK(t <= 102);
    }
  }
  const auto config = config_360p();
  const vbucket::opensora_v2_rule rule{.fps_max = -16.0};
  const auto id = rule.assign(config, {102, 360, 640, 30.0}, 0, vbucket::fast_source(1, 0));
  CHECK((id == vbucket::no_bucket || id >= 0));
}

// Contract: `vbucket::error::what()` is one line, even when the input puts a newline or other
// control character into the message (fuzz_config_json: a JSON key "36\n0p" made a two-line
// "unknown resolution" message).
TEST_CASE("regression: error messages stay on one line with control characters in the input") {
  const vbucket::error e(std::string("bad key \"a\nb\rc\td\x01\x7f") + '\0' + "\"");
  const std::string_view what = e.what();
  CHECK(what == "bad key \"a\\nb\\rc\\td\\x01\\x7f\\x00\"");
  CHECK(what.find('\n') == std::string_view::npos);
  CHECK(vbucket::error("plain message").what() == std::string("plain message"));
}

#if VBUCKET_TEST_HAS_JSON
TEST_CASE("regression: a config key with a newline gives a one-line error naming the file") {
  try {
    (void)vbucket::json::parse_bucket_config(R"({"36\n0p": {"1": [0.2, 1]}})",
                                             vbucket::opensora_v2_tables{}, "cfg.json");
    FAIL("no error");
  } catch (const vbucket::error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("cfg.json: ", 0) == 0);
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find("36\\n0p") != std::string::npos);
  }
}

// fuzz_config_json (seeded by hand with a large input): a deeply nested value in the wrong
// place, e.g. {"360p": [[[[...]]]]} with 200000 '[', overflowed the stack in nlohmann's
// recursive dump() while the error message was built (ASan: stack-overflow in
// serializer::dump). parse_json now rejects nesting deeper than max_json_depth, and values in
// messages are cut short.
TEST_CASE("regression: deeply nested JSON is rejected, not a stack overflow") {
  const std::size_t depth = 200000;
  for (const std::string_view head : {R"({"360p": )", R"({"360p": {"1": [)"}) {
    std::string text(head);
    text += std::string(depth, '[') + std::string(depth, ']');
    text += head.size() > 10 ? ", 1]}}" : "}";
    try {
      (void)vbucket::json::parse_bucket_config(text, vbucket::opensora_v2_tables{}, "deep.json");
      FAIL("no error");
    } catch (const vbucket::error& e) {
      const std::string what = e.what();
      CHECK(what.rfind("deep.json: malformed JSON: nested deeper than", 0) == 0);
    }
  }
  // The limit leaves real configs alone, and a shallow but long value is cut short.
  std::string wide = R"({"360p": [)";
  for (int i = 0; i < 10000; ++i) wide += "1,";
  wide += "1]}";
  try {
    (void)vbucket::json::parse_bucket_config(wide, vbucket::opensora_v2_tables{}, "wide.json");
    FAIL("no error");
  } catch (const vbucket::error& e) {
    CHECK(std::string_view(e.what()).size() < 200);
  }
}
#endif

// fuzz_assign (its seed corpus, once closest() went branch-free): a sample whose ratio h/w is
// below every entry of the table has split 0, and `s[split - 1]` formed the pointer s + SIZE_MAX
// before reading the -inf sentinel (UBSan: "addition of unsigned offset ... overflowed",
// include/vbucket/bucket/aspect.hpp, aspect_table::closest).
TEST_CASE("regression: closest() for a ratio below or above every entry") {
  const vbucket::aspect_table table(
      {{"a", 0.5, 100, 200}, {"b", 1.0, 100, 100}, {"c", 2.0, 200, 100}});
  CHECK(table.closest(1, 1000) == 0);
  CHECK(table.closest(1, 16777216) == 0);
  CHECK(table.closest(1000, 1) == 2);
  CHECK(table.closest(16777216, 1) == 2);
  for (const std::int64_t h : {1, 2, 50, 100, 150, 199, 200, 400, 16777216})
    for (const std::int64_t w : {1, 2, 50, 100, 150, 199, 200, 400, 16777216})
      CHECK(table.closest(h, w) ==
            table.linear_closest(static_cast<double>(h) / static_cast<double>(w)));
}
