/// Tests of vbucket/ffmpeg/file_decoder.hpp that need no media.
#include "vbucket/ffmpeg/file_decoder.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::int64_t
#include <limits>   // std::numeric_limits
#include <string>   // std::string
#include <vector>   // std::vector

#include "vbucket/rules.hpp"  // frame_interval

namespace ff = vbucket::ffmpeg;

TEST_CASE("ffmpeg: file_decoder's frame interval is the rule's, also for absurd rates") {
  // It had its own copy of the fps -> interval formula without the rule's overflow guard: an
  // fps of 1e300 cast ceil(fps / fps_max) to int64 (undefined behaviour, UBSan's
  // float-cast-overflow).
  vbucket::meta_table meta;
  const double rates[] = {
      std::numeric_limits<double>::quiet_NaN(), 0.0, 15.0, 16.0, 30.0, 60.0, 1e300,
      std::numeric_limits<double>::infinity()};
  for (const double fps : rates) meta.push_back({100, 64, 64, fps});
  const std::vector<std::string> paths(meta.size(), "unused.mp4");
  const ff::file_decoder decoder(paths, meta, {.fps_max = 16});
  for (std::size_t i = 0; i < meta.size(); ++i) {
    CAPTURE(meta[i].fps);
    CHECK(decoder.interval(i) == vbucket::frame_interval(meta[i].fps, 16.0));
  }
  CHECK(decoder.interval(4) == 2);
  CHECK(decoder.interval(5) == 4);
  CHECK(decoder.interval(6) == std::numeric_limits<std::int64_t>::max());
  const ff::file_decoder fixed(paths, meta, {.frame_interval = 3});
  CHECK(fixed.interval(6) == 3);
}
