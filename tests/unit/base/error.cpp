/// Tests of vbucket/base/error.hpp: one exception type, a message on one line whatever the input.
#include "vbucket/base/error.hpp"

#include <doctest/doctest.h>

#include <stdexcept>    // std::runtime_error
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_base_of_v

static_assert(std::is_base_of_v<std::runtime_error, vbucket::error>);
static_assert(!std::is_convertible_v<std::string, vbucket::error>);  // explicit

TEST_CASE("error: each control character is written as an escape") {
  const auto what = [](const std::string& m) { return std::string(vbucket::error(m).what()); };
  CHECK(what("a\nb") == "a\\nb");
  CHECK(what("a\rb") == "a\\rb");
  CHECK(what("a\tb") == "a\\tb");
  CHECK(what(std::string("a") + '\0' + "b") == "a\\x00b");
  CHECK(what("\x1f\x7f") == "\\x1f\\x7f");
  CHECK(what("\x1b[31m") == "\\x1b[31m");
  // Printable ASCII and UTF-8 bytes (≥ 0x80) are kept as they are.
  CHECK(what("row 3: \"16:9\" ~ 1.77") == "row 3: \"16:9\" ~ 1.77");
  CHECK(what("caf\xc3\xa9 \xe2\x89\xa5 0") == "caf\xc3\xa9 \xe2\x89\xa5 0");
  CHECK(what("").empty());
}

TEST_CASE("error: caught as std::exception with the same message") {
  try {
    throw vbucket::error("config.json: key \"36\n0p\": unknown resolution");
  } catch (const std::exception& e) {
    const std::string_view m = e.what();
    CHECK(m == "config.json: key \"36\\n0p\": unknown resolution");
    CHECK(m.find('\n') == std::string_view::npos);
  }
}
