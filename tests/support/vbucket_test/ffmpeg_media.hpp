#pragma once
/// Helpers shared by the FFmpeg adapter's suites (tests/ffmpeg): the generated media of
/// tests/ffmpeg/make_media.sh (VBUCKET_FFMPEG_MEDIA_DIR) and its expected.csv, clip requests, and
/// the same clip made by the ffmpeg command for a PSNR comparison.

#include <doctest/doctest.h>

#include <cmath>       // std::log10
#include <cstdint>     // std::uint8_t, std::int64_t
#include <cstdio>      // popen, pclose, std::fread
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <iterator>    // std::istreambuf_iterator
#include <map>         // std::map
#include <sstream>     // std::istringstream
#include <string>
#include <string_view>  // std::string
#include <vector>       // std::vector

#include "vbucket/ffmpeg/ffmpeg.hpp"

namespace vbucket_test {

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

inline const std::string media_dir = VBUCKET_FFMPEG_MEDIA_DIR;

inline std::string media(const std::string& name) { return media_dir + "/" + name; }

inline bool exists(const std::string& name) { return fs::exists(media(name)); }

struct quiet_init {
  quiet_init() { ff::quiet_logs(); }
};
inline const quiet_init quiet;

struct expected_row {
  std::int64_t frames = 0, width = 0, height = 0;
  double fps = 0;
  int ffprobe_rotation = 0;               // counter-clockwise degrees, as ffprobe prints them
  std::int64_t sar_num = 1, sar_den = 1;  // ffprobe's sample_aspect_ratio (1:1 if none)
};

inline std::map<std::string, expected_row> read_expected() {
  std::map<std::string, expected_row> rows;
  std::ifstream in(media("expected.csv"));
  REQUIRE_MESSAGE(in.good(), "no expected.csv: run the ffmpeg/media fixture");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string name, frames, width, height, rate, rotation, sar;
    std::getline(s, name, ',');
    std::getline(s, frames, ',');
    std::getline(s, width, ',');
    std::getline(s, height, ',');
    std::getline(s, rate, ',');
    std::getline(s, rotation, ',');
    std::getline(s, sar, ',');
    expected_row r;
    r.frames = std::stoll(frames);
    r.width = std::stoll(width);
    r.height = std::stoll(height);
    const auto slash = rate.find('/');
    r.fps = std::stod(rate.substr(0, slash)) / std::stod(rate.substr(slash + 1));
    r.ffprobe_rotation = std::stoi(rotation);
    const auto colon = sar.find(':');
    REQUIRE(colon != std::string::npos);
    r.sar_num = std::stoll(sar.substr(0, colon));
    r.sar_den = std::stoll(sar.substr(colon + 1));
    rows[name] = r;
  }
  return rows;
}

inline std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The clip the ffmpeg command makes for the same request: select the frames by index
/// (presentation order), scale with the same geometry and filter, crop; autorotated as ffmpeg
/// does by default (turned first, then scaled: what users compare against).
inline std::vector<std::uint8_t> reference(const std::string& name, const ff::clip_request& req,
                                           std::int64_t display_h, std::int64_t display_w) {
  // Open-Sora's crop offset: floored for a video, rounded for an image (as the decoder does).
  const auto ends_with = [&](std::string_view ext) {
    return name.size() >= ext.size() &&
           name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
  };
  const bool image = ends_with(".png") || ends_with(".jpg") || ends_with(".jpeg");
  const auto g =
      ff::resize_crop_geometry(display_h, display_w, req.height, req.width,
                               image ? ff::crop_offset::image_round : ff::crop_offset::video_floor);
  const std::int64_t last = req.start + (req.frames - 1) * req.interval;
  const std::string filter =
      "select='between(n\\," + std::to_string(req.start) + "\\," + std::to_string(last) +
      ")*not(mod(n-" + std::to_string(req.start) + "\\," + std::to_string(req.interval) +
      "))',scale=" + std::to_string(g.scaled_width) + ":" + std::to_string(g.scaled_height) +
      ":flags=bilinear,crop=" + std::to_string(req.width) + ":" + std::to_string(req.height) + ":" +
      std::to_string(g.left) + ":" + std::to_string(g.top);
  const std::string command = "ffmpeg -nostdin -v quiet -threads 1 -i '" + media(name) +
                              "' -vf \"" + filter + "\" -fps_mode passthrough -frames:v " +
                              std::to_string(req.frames) + " -f rawvideo -pix_fmt rgb24 -";
  std::vector<std::uint8_t> out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::uint8_t buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.insert(out.end(), buf, buf + n);
  REQUIRE(pclose(p) == 0);
  return out;
}

inline double psnr(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double se = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    se += d * d;
  }
  if (se == 0) return 99.0;
  return 10.0 * std::log10(255.0 * 255.0 / (se / double(n)));
}

/// Decodes `req` from `name` and compares every frame with the ffmpeg command's.
inline void check_against_reference(const std::string& name, ff::clip_request req) {
  CAPTURE(name);
  CAPTURE(req.start);
  CAPTURE(req.frames);
  CAPTURE(req.interval);
  CAPTURE(req.height);
  CAPTURE(req.width);
  const auto info = ff::probe(media(name));
  REQUIRE_MESSAGE(info.ok(), info.error());
  std::vector<std::uint8_t> ours(ff::clip_bytes(req));
  const auto r = ff::decode_clip(media(name), req, ours);
  REQUIRE_MESSAGE(r.ok(), r.error());
  CHECK(r->frames_converted == req.frames);
  CHECK(r->frames_padded == 0);
  CHECK(r->rotation == info->rotation);
  const std::vector<std::uint8_t> ref = reference(name, req, info->height, info->width);
  REQUIRE(ref.size() == ours.size());
  const std::size_t frame = static_cast<std::size_t>(req.height * req.width * 3);
  for (std::int64_t j = 0; j < req.frames; ++j) {
    CAPTURE(j);
    const auto at = static_cast<std::size_t>(j) * frame;
    CHECK(psnr(ours.data() + at, ref.data() + at, frame) >= 35.0);
    // The media's hue turns every frame: a neighbouring frame is far off, so the check above
    // would catch an off-by-one frame choice.
    if (j + 1 < req.frames) CHECK(psnr(ours.data() + at, ref.data() + at + frame, frame) < 30.0);
  }
}

inline ff::clip_request request(std::int64_t start, std::int64_t frames, std::int64_t interval,
                                std::int64_t h, std::int64_t w) {
  ff::clip_request r;
  r.start = start;
  r.frames = frames;
  r.interval = interval;
  r.height = h;
  r.width = w;
  return r;
}

}  // namespace vbucket_test
