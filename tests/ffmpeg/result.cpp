/// Tests of vbucket/ffmpeg/result.hpp: a value or an error message; reading the value of an
/// error throws vbucket::error with the message.
#include "vbucket/ffmpeg/result.hpp"

#include <doctest/doctest.h>

#include <memory>       // std::unique_ptr (a move-only value)
#include <string>       // std::string
#include <type_traits>  // std::is_convertible_v
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"

namespace ff = vbucket::ffmpeg;

static_assert(std::is_convertible_v<int, ff::result<int>>);    // a value converts, like expected
static_assert(!std::is_convertible_v<ff::result<int>, bool>);  // explicit operator bool

TEST_CASE("ffmpeg: result: a value") {
  const ff::result<std::vector<int>> r = std::vector<int>{1, 2, 3};
  REQUIRE(r.ok());
  CHECK(static_cast<bool>(r));
  CHECK(r.error().empty());
  CHECK(r->size() == 3);
  CHECK((*r)[2] == 3);
  CHECK(r.value().front() == 1);
}

TEST_CASE("ffmpeg: result: an error throws its message when the value is read") {
  const auto r = ff::result<int>::failure("clip.mp4: no video stream");
  CHECK_FALSE(r.ok());
  CHECK_FALSE(static_cast<bool>(r));
  CHECK(r.error() == "clip.mp4: no video stream");
  CHECK_THROWS_WITH_AS((void)r.value(), "clip.mp4: no video stream", vbucket::error);
  CHECK_THROWS_AS((void)*r, vbucket::error);
  auto moved = ff::result<std::string>::failure("bad");
  CHECK_THROWS_WITH_AS((void)std::move(moved).value(), "bad", vbucket::error);
}

TEST_CASE("ffmpeg: result: a move-only value moves out") {
  ff::result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  const std::unique_ptr<int> p = std::move(r).value();
  REQUIRE(p != nullptr);
  CHECK(*p == 7);
}
