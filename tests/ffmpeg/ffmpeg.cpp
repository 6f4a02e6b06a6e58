/// Tests of the FFmpeg adapter as a whole (vbucket/ffmpeg/ffmpeg.hpp) over the media that
/// tests/ffmpeg/make_media.sh generates: bad, truncated and mangled files give error values from
/// probe and decode alike, never a crash (run under ASan in CI). Each header's own cases are in
/// the file of its name (probe.cpp, decode.cpp, scan.cpp, result.cpp, file_decoder.cpp,
/// frame_index.cpp).

#include <doctest/doctest.h>

#include <algorithm>   // std::min
#include <cmath>       // std::log10
#include <cstdint>     // std::uint8_t, std::int64_t
#include <cstdio>      // popen, pclose, std::fread
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <iterator>    // std::istreambuf_iterator
#include <map>         // std::map
#include <set>         // std::set
#include <span>        // std::span
#include <sstream>     // std::istringstream
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

TEST_CASE("ffmpeg: bad files give error values, never a crash") {
  const char* bad[] = {"bad_zero_bytes.mp4", "bad_text.mp4", "bad_audio_only.m4a",
                       "bad_huge.y4m",       "bad_huge.png", "no_such_file.mp4"};
  auto req = request(0, 4, 2, 32, 32);
  std::vector<std::uint8_t> buf(ff::clip_bytes(req));
  for (const char* name : bad) {
    CAPTURE(name);
    const auto p = ff::probe(media(name));
    REQUIRE(!p.ok());
    CHECK(p.error().find(media(name)) == 0);
    CHECK(p.error().find('\n') == std::string::npos);
    const auto d = ff::decode_clip(media(name), req, buf);
    REQUIRE(!d.ok());
    CHECK(d.error().find(media(name)) == 0);
  }
  CHECK(ff::probe(media("bad_audio_only.m4a")).error().find("audio only") != std::string::npos);
  CHECK(ff::probe(media_dir).error().find(media_dir) == 0);  // a directory
  // A file cut at 40%, moov atom first: the header promises 50 frames, fewer are there.
  const auto truncated = ff::probe(media("bad_truncated.mp4"));
  if (truncated.ok()) {
    auto late = request(40, 4, 2, 32, 32);
    const auto d = ff::decode_clip(media("bad_truncated.mp4"), late, buf);
    CHECK(!d.ok());
  }
  // Overwritten bytes and a cut tail: whatever comes back, it comes back.
  for (const char* name : {"bad_corrupt.mp4", "bad_truncated_tail.mp4"}) {
    for (std::int64_t start : {0, 10, 30, 44}) {
      auto r = request(start, 3, 2, 24, 24);
      std::vector<std::uint8_t> b(ff::clip_bytes(r));
      const auto d = ff::decode_clip(media(name), r, b);
      if (!d.ok()) CHECK(d.error().find(media(name)) == 0);
    }
  }
}

TEST_CASE("ffmpeg: every prefix and many mangled copies of a file, from memory") {
  // Deterministic mangling: cut at 40 points; overwrite bytes at 60 places. Under ASan (CI)
  // this is the leak and overflow check of every error path the cuts reach.
  const std::string name =
      exists("h264_160x120_25fps.mp4") ? "h264_160x120_25fps.mp4" : "mpeg4_96x64_60fps.mp4";
  const std::vector<std::uint8_t> good = read_file(media(name));
  REQUIRE(good.size() > 1000);
  auto req = request(8, 4, 3, 24, 32);
  std::vector<std::uint8_t> buf(ff::clip_bytes(req));
  REQUIRE(ff::decode_clip_memory(good, name, req, buf).ok());
  int failures = 0;
  for (std::size_t k = 0; k < 40; ++k) {
    const std::span<const std::uint8_t> prefix(good.data(), good.size() * k / 40);
    const auto p = ff::probe_memory(prefix, "prefix");
    const auto d = ff::decode_clip_memory(prefix, "prefix", req, buf);
    failures += !d.ok();
    if (!p.ok()) CHECK(p.error().rfind("prefix", 0) == 0);
    if (!d.ok()) CHECK(d.error().rfind("prefix", 0) == 0);
  }
  CHECK(failures > 0);
  std::uint64_t state = 12345;
  for (int k = 0; k < 60; ++k) {
    std::vector<std::uint8_t> bytes = good;
    for (int e = 0; e < 1 + k % 8; ++e) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::size_t at = (state >> 33) % bytes.size();
      bytes[at] = static_cast<std::uint8_t>(state >> 13);
    }
    const auto p = ff::probe_memory(bytes, "mangled");
    const auto d = ff::decode_clip_memory(bytes, "mangled", req, buf);
    if (!p.ok()) CHECK(p.error().rfind("mangled", 0) == 0);
    if (!d.ok()) CHECK(d.error().rfind("mangled", 0) == 0);
  }
}
