/// Tests of vbucket/ffmpeg/scan.hpp: listing media, a parallel scan with progress, and a stopped
/// scan that starts no further file.
#include "vbucket/ffmpeg/scan.hpp"

#include <doctest/doctest.h>

#include <algorithm>   // std::min
#include <cstdint>     // std::uint8_t, std::int64_t
#include <filesystem>  // std::filesystem
#include <set>         // std::set
#include <span>        // std::span
#include <stop_token>  // std::stop_source
#include <string>      // std::string
#include <thread>      // std::thread
#include <vector>      // std::vector

#include "vbucket/bucket/meta.hpp"
#include "vbucket/ffmpeg/ffmpeg.hpp"
#include "vbucket/ffmpeg/file_decoder.hpp"

#include "vbucket_test/ffmpeg_media.hpp"

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

namespace {
using namespace vbucket_test;  // ffmpeg_media.hpp
}  // namespace

TEST_CASE("ffmpeg: a stopped scan starts no further file") {
  const auto paths = ff::list_media(media_dir);
  REQUIRE(paths.size() > 4);
  // Stopped before it starts: nothing is probed, every result says why.
  std::stop_source stopped;
  stopped.request_stop();
  std::size_t calls = 0;
  const auto none = ff::probe_all(
      paths, 2, {}, [&](std::size_t, std::size_t) { ++calls; }, stopped.get_token());
  REQUIRE(none.size() == paths.size());
  CHECK(calls == 0);
  for (const auto& r : none) CHECK(r.error() == "not probed (the scan was stopped)");
  // Stopped from the progress callback after the second file (one worker): exactly two probed.
  std::stop_source midway;
  const auto two = ff::probe_all(
      paths, 1, {},
      [&](std::size_t done, std::size_t) {
        if (done == 2) midway.request_stop();
      },
      midway.get_token());
  CHECK(two[0].error() != "not probed (the scan was stopped)");
  CHECK(two[1].error() != "not probed (the scan was stopped)");
  for (std::size_t i = 2; i < two.size(); ++i)
    CHECK(two[i].error() == "not probed (the scan was stopped)");
}

TEST_CASE("ffmpeg: parallel scan of a directory") {
  const auto paths = ff::list_media(media_dir);
  const auto expected = read_expected();
  // Every generated media file is listed (not expected.csv), sorted.
  CHECK(std::is_sorted(paths.begin(), paths.end()));
  for (const auto& [name, e] : expected)
    CHECK(std::find(paths.begin(), paths.end(), media(name)) != paths.end());
  CHECK(std::find(paths.begin(), paths.end(), media("expected.csv")) == paths.end());
  CHECK(std::find(paths.begin(), paths.end(), media("bad_huge.y4m")) != paths.end());
  std::size_t calls = 0, last = 0;
  const auto results = ff::probe_all(paths, 4, {}, [&](std::size_t done, std::size_t total) {
    ++calls;
    CHECK(total == paths.size());
    CHECK(done > last);  // serialised and increasing
    last = done;
  });
  REQUIRE(results.size() == paths.size());
  CHECK(calls == paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::string base = fs::path(paths[i]).filename().string();
    CAPTURE(base);
    if (expected.count(base) != 0) {
      REQUIRE_MESSAGE(results[i].ok(), results[i].error());
      CHECK(results[i]->num_frames == expected.at(base).frames);
    } else if (base.rfind("bad_", 0) == 0 && base != "bad_corrupt.mp4" &&
               base != "bad_truncated_tail.mp4" && base != "bad_truncated.mp4") {
      CHECK(!results[i].ok());
    }
  }
  // Parallel clip decoding (a loader's pattern): the same bytes as one at a time.
  auto req = request(3, 4, 2, 32, 32);
  std::vector<std::vector<std::uint8_t>> serial(4, std::vector<std::uint8_t>(ff::clip_bytes(req)));
  auto parallel = serial;
  const std::string name = media("mpeg4_128x96_30fps.avi");
  for (auto& b : serial) REQUIRE(ff::decode_clip(name, req, b).ok());
  std::vector<std::thread> pool;
  for (auto& b : parallel) pool.emplace_back([&] { (void)ff::decode_clip(name, req, b); });
  for (auto& t : pool) t.join();
  CHECK(serial == parallel);
  // The list form: a text file of paths.
  const std::string list = media_dir + "/../ffmpeg_list.txt";
  {
    std::ofstream out(list);
    out << "# comment\n\n" << media("image_100x60.png") << "\r\n" << media("nope.mp4") << "\n";
  }
  const auto listed = ff::list_media(list);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0] == media("image_100x60.png"));
  CHECK_THROWS_AS(ff::list_media(media_dir + "/missing_dir"), vbucket::error);
}
