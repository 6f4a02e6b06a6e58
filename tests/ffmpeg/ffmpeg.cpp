/// Tests of vbucket::ffmpeg against media that tests/ffmpeg/make_media.sh generates with the
/// ffmpeg command (the ctest fixture ffmpeg/media): probe results against ffprobe's, decoded
/// pixels against the ffmpeg command doing the same select + scale + crop (PSNR), and bad,
/// truncated and mangled files (error values, never a crash: run under ASan in CI).

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

#include "vbucket/ffmpeg/ffmpeg.hpp"
#include "vbucket/ffmpeg/file_decoder.hpp"
#include "vbucket/meta.hpp"

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

namespace {

const std::string media_dir = VBUCKET_FFMPEG_MEDIA_DIR;

std::string media(const std::string& name) { return media_dir + "/" + name; }

bool exists(const std::string& name) { return fs::exists(media(name)); }

struct quiet_init {
  quiet_init() { ff::quiet_logs(); }
} const quiet;

struct expected_row {
  std::int64_t frames = 0, width = 0, height = 0;
  double fps = 0;
  int ffprobe_rotation = 0;               // counter-clockwise degrees, as ffprobe prints them
  std::int64_t sar_num = 1, sar_den = 1;  // ffprobe's sample_aspect_ratio (1:1 if none)
};

std::map<std::string, expected_row> read_expected() {
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

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The clip the ffmpeg command makes for the same request: select the frames by index
/// (presentation order), scale with the same geometry and filter, crop; autorotated as ffmpeg
/// does by default (turned first, then scaled: what users compare against).
std::vector<std::uint8_t> reference(const std::string& name, const ff::clip_request& req,
                                    std::int64_t display_h, std::int64_t display_w) {
  const auto g = ff::resize_crop_geometry(display_h, display_w, req.height, req.width);
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

double psnr(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  double se = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    se += d * d;
  }
  if (se == 0) return 99.0;
  return 10.0 * std::log10(255.0 * 255.0 / (se / double(n)));
}

/// Decodes `req` from `name` and compares every frame with the ffmpeg command's.
void check_against_reference(const std::string& name, ff::clip_request req) {
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

ff::clip_request request(std::int64_t start, std::int64_t frames, std::int64_t interval,
                         std::int64_t h, std::int64_t w) {
  ff::clip_request r;
  r.start = start;
  r.frames = frames;
  r.interval = interval;
  r.height = h;
  r.width = w;
  return r;
}

}  // namespace

TEST_CASE("ffmpeg: resize_crop_geometry is Open-Sora's resize_crop_to_fill") {
  // 1080x1920 to 192x336: the height ratio is larger, so the height is matched.
  auto g = ff::resize_crop_geometry(1080, 1920, 192, 336);
  CHECK(g.scaled_height == 192);
  CHECK(g.scaled_width == 341);  // round(1920 * 192 / 1080) = round(341.33)
  CHECK(g.top == 0);
  CHECK(g.left == 2);  // round(2.5) = 2, half to even as Python's round
  // Portrait source, landscape target: the width is matched.
  g = ff::resize_crop_geometry(160, 90, 64, 96);
  CHECK(g.scaled_width == 96);
  CHECK(g.scaled_height == 171);  // round(160 * 96 / 90) = round(170.67)
  CHECK(g.left == 0);
  CHECK(g.top == 54);  // round(107 / 2) = round(53.5) = 54 (even)
  // Same aspect ratio: no crop.
  g = ff::resize_crop_geometry(240, 320, 120, 160);
  CHECK((g.scaled_height == 120 && g.scaled_width == 160 && g.top == 0 && g.left == 0));
}

TEST_CASE("ffmpeg: temporal_random_crop is seeded, in range, and refuses short videos") {
  std::set<std::int64_t> seen;
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    const auto s = ff::temporal_random_crop(100, 16, 2, seed);
    REQUIRE(s.has_value());
    CHECK(*s >= 0);
    CHECK(*s <= 100 - 32 - 1);  // Open-Sora: randint(0, total - frames * interval - 1)
    CHECK(*s == *ff::temporal_random_crop(100, 16, 2, seed));
    seen.insert(*s);
  }
  CHECK(seen.size() == 68);                            // every start in [0, 67] drawn
  CHECK(ff::temporal_random_crop(31, 16, 2, 1) == 0);  // exactly fits: (16 - 1) * 2 + 1 = 31
  CHECK(!ff::temporal_random_crop(30, 16, 2, 1).has_value());
  CHECK(!ff::temporal_random_crop(100, 0, 2, 1).has_value());
  CHECK(!ff::temporal_random_crop(100, 4, 0, 1).has_value());
}

TEST_CASE("ffmpeg: probe matches ffprobe (frames, size, aspect, rate, rotation)") {
  const auto expected = read_expected();
  REQUIRE(expected.size() >= 6);
  for (const auto& [name, e] : expected) {
    CAPTURE(name);
    const auto info = ff::probe(media(name));
    REQUIRE_MESSAGE(info.ok(), info.error());
    CHECK(info->num_frames == e.frames);
    CHECK(info->coded_width == e.width);
    CHECK(info->coded_height == e.height);
    const int cw = ((-e.ffprobe_rotation) % 360 + 360) % 360;
    CHECK(info->rotation == cw);
    // Display size: the stored width stretched by the sample aspect ratio (the height kept),
    // then rotated.
    CHECK(info->sar_num == e.sar_num);
    CHECK(info->sar_den == e.sar_den);
    const auto shown_width = static_cast<std::int64_t>(
        std::floor(double(e.width) * double(e.sar_num) / double(e.sar_den) + 0.5));
    const bool swap = cw == 90 || cw == 270;
    CHECK(info->height == (swap ? shown_width : e.height));
    CHECK(info->width == (swap ? e.height : shown_width));
    CHECK(info->warning.empty());
    const bool image = name.ends_with(".png") || name.ends_with(".jpg");
    if (image) {
      CHECK(info->counted_by == ff::frame_count_method::image);
      CHECK(std::isnan(info->fps));
    } else {
      CHECK(info->fps == doctest::Approx(e.fps).epsilon(1e-6));
      CHECK(info->duration > 0.5);
      CHECK(info->duration < 30.0);
      // Matroska/WebM, MPEG-PS/TS and fragmented MP4 record no frame count up front: those are
      // counted by decoding (an MP4 edit list is applied to the sample table: not decoded).
      const bool counted = name.ends_with(".mkv") || name.ends_with(".webm") ||
                           name.ends_with(".mpg") || name.ends_with(".ts") ||
                           name.ends_with("_frag.mp4");
      CHECK(info->counted_by ==
            (counted ? ff::frame_count_method::decoded : ff::frame_count_method::container));
      ff::probe_options o;
      o.always_decode_count = true;
      const auto decoded = ff::probe(media(name), o);
      REQUIRE(decoded.ok());
      CHECK(decoded->num_frames == e.frames);
      CHECK(decoded->counted_by == ff::frame_count_method::decoded);
    }
    // From memory: the same answer.
    const auto bytes = read_file(media(name));
    const auto mem = ff::probe_memory(bytes, name);
    REQUIRE_MESSAGE(mem.ok(), mem.error());
    CHECK(mem->num_frames == info->num_frames);
    CHECK(mem->height == info->height);
    static_assert(vbucket::video_meta<ff::video_info>);
  }
}

TEST_CASE("ffmpeg: decoded pixels match the ffmpeg command (PSNR)") {
  SUBCASE("h264 with B-frames, seek into the second GOP, crop the width") {
    if (exists("h264_160x120_25fps.mp4"))
      check_against_reference("h264_160x120_25fps.mp4", request(29, 6, 2, 64, 48));
  }
  SUBCASE("h264 from frame 0, crop the height") {
    if (exists("h264_320x240_24fps.mp4"))
      check_against_reference("h264_320x240_24fps.mp4", request(0, 5, 3, 48, 96));
  }
  SUBCASE("h264 to the last frame, no crop") {
    if (exists("h264_320x240_24fps.mp4"))
      check_against_reference("h264_320x240_24fps.mp4", request(40, 4, 2, 120, 160));
  }
  SUBCASE("portrait source") {
    if (exists("h264_90x160_25fps_portrait.mp4"))
      check_against_reference("h264_90x160_25fps_portrait.mp4", request(12, 5, 4, 64, 96));
  }
  SUBCASE("display rotation 90") {
    if (exists("h264_160x120_25fps_rotate90.mp4"))
      check_against_reference("h264_160x120_25fps_rotate90.mp4", request(7, 4, 3, 80, 48));
  }
  SUBCASE("display rotation 180") {
    if (exists("h264_160x120_25fps_rotate180.mp4"))
      check_against_reference("h264_160x120_25fps_rotate180.mp4", request(3, 4, 1, 48, 64));
  }
  SUBCASE("variable frame rate: frames by presentation order, across the rate change") {
    if (exists("h264_128x96_vfr.mp4"))
      check_against_reference("h264_128x96_vfr.mp4", request(24, 8, 3, 48, 64));
  }
  SUBCASE("matroska (no frame count in the container)") {
    if (exists("h264_176x144_60fps.mkv"))
      check_against_reference("h264_176x144_60fps.mkv", request(33, 6, 4, 72, 72));
  }
  SUBCASE("mpeg4 in AVI") {
    check_against_reference("mpeg4_128x96_30fps.avi", request(17, 5, 5, 32, 48));
  }
  SUBCASE("mpeg4 with B-frames in MP4") {
    check_against_reference("mpeg4_96x64_60fps.mp4", request(21, 6, 2, 64, 96));
  }
  SUBCASE("vp9 in WebM") {
    if (exists("vp9_160x90_30fps.webm"))
      check_against_reference("vp9_160x90_30fps.webm", request(16, 7, 3, 64, 64));
  }
  SUBCASE("deep into a long MP4: timestamps from the sample table") {
    if (exists("h264_64x48_25fps_long.mp4"))
      check_against_reference("h264_64x48_25fps_long.mp4", request(433, 8, 3, 32, 48));
  }
  SUBCASE("deep into a fragmented MP4 and an open-GOP MP4") {
    if (exists("h264_64x48_25fps_long_frag.mp4"))
      check_against_reference("h264_64x48_25fps_long_frag.mp4", request(377, 6, 5, 48, 32));
    if (exists("h264_64x48_25fps_opengop.mp4"))
      check_against_reference("h264_64x48_25fps_opengop.mp4", request(451, 7, 2, 32, 32));
  }
  SUBCASE("an MP4 edit list: frames numbered after it, up to the last one it shows") {
    // 47 samples in the table, the first 8 before the edit (ffprobe decodes 39): the last
    // frames of the clip lie past what the edit list shows if it is not applied.
    if (exists("h264_160x120_25fps_editlist.mp4")) {
      const auto info = ff::probe(media("h264_160x120_25fps_editlist.mp4"));
      REQUIRE(info.ok());
      CHECK(info->counted_by == ff::frame_count_method::container);
      check_against_reference("h264_160x120_25fps_editlist.mp4",
                              request(info->num_frames - 7, 4, 2, 48, 64));
      check_against_reference("h264_160x120_25fps_editlist.mp4", request(0, 3, 5, 48, 64));
    }
  }
  SUBCASE("anamorphic (SAR 32:27): stretched to the display shape in the one scaling pass") {
    // The reference scales the stored 180x120 (192x128) frame straight to the covering size of
    // the display shape, as `scale=iw*sar:ih` then a resize would, in one pass.
    for (const char* name : {"h264_180x120_sar32x27.mp4", "h264_180x120_sar32x27.mkv",
                             "h264_180x120_container_aspect.mp4", "mpeg2_192x128_aspect16x9.mpg"}) {
      if (!exists(name)) continue;
      check_against_reference(name, request(3, 4, 2, 72, 96));    // 4:3 target: crops the width
      check_against_reference(name, request(10, 3, 1, 90, 160));  // 16:9 target: little crop
    }
    // Stretched, then rotated: 213x120 shown upright as 120x213.
    if (exists("h264_180x120_sar32x27_rotate90.mp4"))
      check_against_reference("h264_180x120_sar32x27_rotate90.mp4", request(5, 3, 3, 96, 64));
  }
  SUBCASE("png and jpeg images") {
    check_against_reference("image_100x60.png", request(0, 1, 1, 40, 40));
    check_against_reference("image_120x80.jpg", request(0, 1, 1, 60, 90));
  }
}

TEST_CASE("ffmpeg: deep clips in MPEG-TS seek (earlier when a seek lands after the clip)") {
  // MPEG-TS seeks by byte position and decode time: a seek to the first wanted frame lands on
  // a keyframe after it; the seek is retried earlier (1, 3, 7 s) instead of decoding from the
  // file's start. The frames are ffmpeg's, and the decode started at a seek.
  const std::string name = "h264_64x48_25fps_long.ts";
  if (!exists(name)) return;
  for (const std::int64_t start : {0, 37, 260, 433, 577}) {
    const auto req = request(start, 6, 4, 32, 48);
    check_against_reference(name, req);
    std::vector<std::uint8_t> buf(ff::clip_bytes(req));
    const auto clip = ff::decode_clip(media(name), req, buf);
    REQUIRE(clip.ok());
    CAPTURE(start);
    CHECK(clip->seeked);
    if (start >= 260) CHECK(clip->frames_decoded < 100);  // not from the file's start
  }
}

TEST_CASE(
    "ffmpeg: deep clips in AVI and MPEG-PS start at a keyframe (streams without timestamps)") {
  // AVI packets carry no presentation time, and in a program stream a frame that starts inside
  // another's PES packet has none: frames are numbered in the decoder's output order from the
  // stream's start. A deep clip decodes from a keyframe found in the AVI index (or by a demux
  // pass and a byte seek), checked on the frames out. The bytes must be those of the decode
  // from the start (use_index = false) and the frames ffmpeg's.
  for (const char* name :
       {"h264_64x48_25fps_long.avi", "mpeg4_64x48_25fps_long.avi", "mpeg2_64x48_25fps_long.mpg"}) {
    if (!exists(name)) continue;
    CAPTURE(name);
    for (const std::int64_t start : {0, 5, 40, 99, 260, 433, 577}) {
      CAPTURE(start);
      auto req = request(start, 6, 4, 32, 48);
      req.frames = std::min<std::int64_t>(6, (600 - start + 3) / 4);
      std::vector<std::uint8_t> fast(ff::clip_bytes(req)), slow(ff::clip_bytes(req));
      const auto f = ff::decode_clip(media(name), req, fast);
      REQUIRE_MESSAGE(f.ok(), f.error());
      auto from_start = req;
      from_start.use_index = false;
      const auto s = ff::decode_clip(media(name), from_start, slow);
      REQUIRE_MESSAGE(s.ok(), s.error());
      CHECK(!f->presentation_index);
      CHECK(!s->seeked);
      CHECK(fast == slow);
      if (start >= 260) {  // past the first keyframes: not from the start
        CHECK(f->seeked);
        CHECK(f->frames_decoded < start - 100);
      }
      if (start == 0 || start == 433) check_against_reference(name, req);
    }
    // Past the end: the same error as from the start.
    auto past = request(590, 6, 4, 32, 48);
    std::vector<std::uint8_t> buf(ff::clip_bytes(past));
    const auto d = ff::decode_clip(media(name), past, buf);
    REQUIRE(!d.ok());
    CHECK(d.error().find("clip too short") != std::string::npos);
    past.pad = true;
    const auto padded = ff::decode_clip(media(name), past, buf);
    REQUIRE_MESSAGE(padded.ok(), padded.error());
    CHECK(padded->frames_padded == 3);
  }
}

TEST_CASE("ffmpeg: a deep clip in an AVI without its index starts at a keyframe from a pass") {
  // Cut before its index: the packets up to the clip come from a demux pass; the bytes (and a
  // clip past the cut's end, its error) are those of the decode from the start.
  const std::string name = "h264_64x48_25fps_long_noindex.avi";
  if (!exists(name)) return;
  for (const std::int64_t start : {99, 260, 420, 490, 560}) {
    CAPTURE(start);
    const auto req = request(start, 6, 4, 32, 48);
    auto from_start = req;
    from_start.use_index = false;
    std::vector<std::uint8_t> fast(ff::clip_bytes(req)), slow(ff::clip_bytes(req));
    const auto f = ff::decode_clip(media(name), req, fast);
    const auto s = ff::decode_clip(media(name), from_start, slow);
    REQUIRE(f.ok() == s.ok());
    if (start == 560) CHECK(!f.ok());  // about 450 frames are left
    if (!f.ok()) {
      CHECK(f.error() == s.error());
      CHECK(f.error().find("clip too short") != std::string::npos);
      continue;
    }
    CHECK(fast == slow);
    CHECK(!s->seeked);
    if (start >= 260) {
      CHECK(f->seeked);
      CHECK(f->frames_decoded < start - 100);
    }
  }
}

TEST_CASE("ffmpeg: anamorphic video probes and decodes at its display size") {
  // 180x120 stored with 32:27 pixels shows as round(180 * 32 / 27) = round(213.3) = 213 x 120
  // (16:9 as near as whole pixels go); 192x128 as round(227.6) = 228 x 128.
  struct sar_case {
    const char* name;
    std::int64_t width, height;
  };
  for (const sar_case& c : {sar_case{"h264_180x120_sar32x27.mp4", 213, 120},
                            sar_case{"h264_180x120_sar32x27.mkv", 213, 120},
                            sar_case{"h264_180x120_container_aspect.mp4", 213, 120},
                            sar_case{"mpeg2_192x128_aspect16x9.mpg", 228, 128},
                            sar_case{"h264_180x120_sar32x27_rotate90.mp4", 120, 213}}) {
    if (!exists(c.name)) continue;
    CAPTURE(c.name);
    const auto info = ff::probe(media(c.name));
    REQUIRE_MESSAGE(info.ok(), info.error());
    CHECK(info->width == c.width);
    CHECK(info->height == c.height);
    CHECK((info->sar_num == 32 && info->sar_den == 27));
    CHECK(info->coded_height == std::min(c.height, c.width));
    auto req = request(0, 1, 1, 36, 64);
    std::vector<std::uint8_t> buf(ff::clip_bytes(req));
    const auto clip = ff::decode_clip(media(c.name), req, buf);
    REQUIRE_MESSAGE(clip.ok(), clip.error());
    CHECK(clip->source_width == c.width);
    CHECK(clip->source_height == c.height);
    CHECK((clip->sar_num == 32 && clip->sar_den == 27));
  }
  // A bucket is chosen by the display aspect: 213/120 = 1.775, not the stored 1.5.
  if (exists("h264_180x120_sar32x27.mp4")) {
    const auto info = ff::probe(media("h264_180x120_sar32x27.mp4"));
    REQUIRE(info.ok());
    CHECK(double(info->width) / double(info->height) == doctest::Approx(16.0 / 9.0).epsilon(0.01));
  }
}

TEST_CASE("ffmpeg: damaged faststart MP4s count what decodes, with a warning, or fail") {
  // damaged.csv: what the ffmpeg command decodes of each (make_media.sh), from a 120-frame
  // faststart MP4 cut in the middle, and with zeros over its middle 40%.
  std::ifstream in(media("damaged.csv"));
  if (!in.good()) return;  // made only with libx264
  std::map<std::string, std::int64_t> decodable;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const auto comma = line.find(',');
    decodable[line.substr(0, comma)] = std::stoll(line.substr(comma + 1));
  }
  REQUIRE(decodable.size() == 2);

  // Cut in the middle: the sample table lists 120 frames; those whose data are in the file are
  // counted (from the table, no decoding), with a warning; the last of them decode.
  const std::string cut = "damaged_cut_middle.mp4";
  const auto c = ff::probe(media(cut));
  REQUIRE_MESSAGE(c.ok(), c.error());
  CHECK(c->num_frames == decodable.at(cut));
  CHECK(c->num_frames < 120);
  CHECK(c->counted_by == ff::frame_count_method::container);
  CHECK(c->warning.find("cut short") != std::string::npos);
  CHECK(c->warning.find("120") != std::string::npos);
  check_against_reference(cut, request(c->num_frames - 4, 4, 1, 32, 48));
  {
    auto past = request(c->num_frames - 2, 3, 1, 32, 48);
    std::vector<std::uint8_t> buf(ff::clip_bytes(past));
    const auto d = ff::decode_clip(media(cut), past, buf);
    REQUIRE(!d.ok());
    CHECK(d.error().find("too short") != std::string::npos);
  }
  ff::probe_options decode_count;
  decode_count.always_decode_count = true;
  CHECK(ff::probe(media(cut), decode_count)->num_frames == c->num_frames);

  // Zeros over the middle: the table and the file size look whole; the zeroed samples give it
  // away, and it is counted by decoding, with a warning.
  const std::string zeros = "damaged_zeros_middle.mp4";
  const auto z = ff::probe(media(zeros));
  REQUIRE_MESSAGE(z.ok(), z.error());
  CHECK(z->num_frames == decodable.at(zeros));
  CHECK(z->num_frames < 120);
  CHECK(z->counted_by == ff::frame_count_method::decoded);
  CHECK(z->warning.find("damaged") != std::string::npos);
  // From memory: the same.
  const auto zm = ff::probe_memory(read_file(media(zeros)), zeros);
  REQUIRE(zm.ok());
  CHECK(zm->num_frames == z->num_frames);
  CHECK(zm->warning == z->warning);

  // Cut right after the moov box: no media data at all, an error naming the file.
  const auto h = ff::probe(media("bad_header_only.mp4"));
  REQUIRE(!h.ok());
  CHECK(h.error().rfind(media("bad_header_only.mp4") + ": no media data", 0) == 0);
  CHECK(h.error().find('\n') == std::string::npos);
  auto req = request(0, 2, 1, 16, 16);
  std::vector<std::uint8_t> buf(ff::clip_bytes(req));
  CHECK(!ff::decode_clip(media("bad_header_only.mp4"), req, buf).ok());
}

TEST_CASE("ffmpeg: the video stream is av_find_best_stream's") {
  // Two video streams, 64x48 then 160x120, neither the default. A stream marked for the
  // visually impaired loses to one that is not; with nothing to tell them apart (no bit rate
  // recorded, as many frames seen), the first is taken.
  struct stream_case {
    const char* name;
    std::int64_t width, height;
  };
  for (const stream_case& c : {stream_case{"streams_two_impaired_first.mkv", 160, 120},
                               stream_case{"streams_two_plain.mkv", 64, 48}}) {
    CAPTURE(c.name);
    const auto info = ff::probe(media(c.name));
    REQUIRE_MESSAGE(info.ok(), info.error());
    CHECK(info->width == c.width);
    CHECK(info->height == c.height);
    auto req = request(2, 2, 3, 24, 32);
    std::vector<std::uint8_t> buf(ff::clip_bytes(req));
    const auto clip = ff::decode_clip(media(c.name), req, buf);
    REQUIRE_MESSAGE(clip.ok(), clip.error());
    CHECK(clip->source_width == c.width);
    CHECK(clip->source_height == c.height);
  }
}

TEST_CASE("ffmpeg: the sample-table start gives the same clip as demuxing from the start") {
  // Every start from 0 to past the end, several intervals and lengths: the bytes, the padding
  // and the errors are the same with and without the index; the index is used deep into the
  // plain and the open-GOP MP4 (whose leading frames, decoded after a keyframe but shown
  // before it, count from the keyframe on), never in the fragmented one (its table fills as
  // fragments are read).
  struct file_case {
    const char* name;
    bool expect_indexed;  // for starts well past the first two GOPs
  };
  const file_case files[] = {{"h264_64x48_25fps_long.mp4", true},
                             {"h264_64x48_25fps_long_frag.mp4", false},
                             {"h264_64x48_25fps_opengop.mp4", true}};
  for (const auto& fc : files) {
    if (!exists(fc.name)) continue;
    const std::string file = fc.name;
    CAPTURE(file);
    const std::int64_t total = ff::probe(media(fc.name))->num_frames;
    REQUIRE(total == 600);
    std::int64_t indexed = 0, compared = 0;
    for (std::int64_t start = 0; start < total + 3; start += 37) {
      for (const auto& [frames, interval] : {std::pair<std::int64_t, std::int64_t>{5, 1}, {4, 7}}) {
        CAPTURE(start);
        CAPTURE(frames);
        CAPTURE(interval);
        for (bool pad : {false, true}) {
          auto req = request(start, frames, interval, 24, 32);
          req.pad = pad;
          std::vector<std::uint8_t> with(ff::clip_bytes(req)), without(with.size(), 7);
          const auto a = ff::decode_clip(media(fc.name), req, with);
          req.use_index = false;
          const auto b = ff::decode_clip(media(fc.name), req, without);
          REQUIRE(a.ok() == b.ok());
          ++compared;
          if (!a.ok()) {
            CHECK(a.error() == b.error());
            continue;
          }
          CHECK(!b->indexed);
          CHECK(a->frames_padded == b->frames_padded);
          CHECK(a->frames_converted == b->frames_converted);
          CHECK(with == without);
          if (a->indexed) ++indexed;
          if (start >= 150 && start < total - frames * interval)
            CHECK(a->indexed == fc.expect_indexed);
          if (start < 50) CHECK(!a->indexed);  // no keyframe a margin before: plain scan
        }
      }
    }
    CHECK(compared == 68);
    if (fc.expect_indexed) CHECK(indexed > 30);
  }
}

TEST_CASE("ffmpeg: CTHW holds the THWC clip's channels as planes") {
  const std::string name = "mpeg4_128x96_30fps.avi";
  auto req = request(5, 3, 4, 40, 56);
  std::vector<std::uint8_t> thwc(ff::clip_bytes(req)), cthw(ff::clip_bytes(req));
  REQUIRE(ff::decode_clip(media(name), req, thwc).ok());
  req.layout = ff::layout::cthw;
  REQUIRE(ff::decode_clip(media(name), req, cthw).ok());
  const std::size_t t = 3, h = 40, w = 56;
  int worst = 0;
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t f = 0; f < t; ++f)
      for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x)
          worst = std::max(worst, std::abs(int(thwc[((f * h + y) * w + x) * 3 + c]) -
                                           int(cthw[((c * t + f) * h + y) * w + x])));
  CHECK(worst == 0);
}

TEST_CASE("ffmpeg: a clip past the end is an error, or padded with the last frame") {
  const std::string name = "mpeg4_128x96_30fps.avi";  // 60 frames
  auto req = request(50, 8, 2, 32, 32);               // frames 50, 52, ..., 64
  std::vector<std::uint8_t> buf(ff::clip_bytes(req));
  const auto short_clip = ff::decode_clip(media(name), req, buf);
  REQUIRE(!short_clip.ok());
  CHECK(short_clip.error().find("too short") != std::string::npos);
  CHECK(short_clip.error().find(media(name)) == 0);
  req.pad = true;
  const auto padded = ff::decode_clip(media(name), req, buf);
  REQUIRE_MESSAGE(padded.ok(), padded.error());
  CHECK(padded->frames_converted == 5);  // 50, 52, 54, 56, 58
  CHECK(padded->frames_padded == 3);
  const std::ptrdiff_t frame = 32 * 32 * 3;
  for (std::ptrdiff_t j = 5; j < 8; ++j)
    CHECK(std::equal(buf.begin() + 4 * frame, buf.begin() + 5 * frame, buf.begin() + j * frame));
  CHECK(!std::equal(buf.begin() + 3 * frame, buf.begin() + 4 * frame, buf.begin() + 4 * frame));
  // Starting past the end: nothing to repeat, an error even with pad.
  req.start = 60;
  CHECK(!ff::decode_clip(media(name), req, buf).ok());
  // An image asked for more than its one frame: the error names the file (fuzz_decode found
  // this path reading the name through a dangling reference; ASan checks it here).
  auto image = request(1, 3, 2, 16, 16);
  std::vector<std::uint8_t> small(ff::clip_bytes(image));
  const auto past = ff::decode_clip(media("image_100x60.png"), image, small);
  REQUIRE(!past.ok());
  CHECK(past.error().rfind(media("image_100x60.png") + ": clip too short", 0) == 0);
  image.start = 0;
  image.pad = true;
  const auto padded_image = ff::decode_clip(media("image_100x60.png"), image, small);
  REQUIRE_MESSAGE(padded_image.ok(), padded_image.error());
  CHECK(padded_image->frames_padded == 2);
}

TEST_CASE("ffmpeg: impossible requests are error values naming the file") {
  const std::string name = media("mpeg4_128x96_30fps.avi");
  auto req = request(0, 4, 1, 32, 32);
  std::vector<std::uint8_t> buf(ff::clip_bytes(req));
  CHECK(buf.size() == 4 * 32 * 32 * 3);
  std::vector<std::uint8_t> small(buf.size() - 1);
  auto r = ff::decode_clip(name, req, small);
  REQUIRE(!r.ok());
  CHECK(r.error().find("output buffer") != std::string::npos);
  CHECK_THROWS_AS((void)r.value(), vbucket::error);
  for (auto bad : {request(0, 0, 1, 32, 32), request(0, 4, 0, 32, 32), request(-1, 4, 1, 32, 32),
                   request(0, 4, 1, 0, 32), request(0, 4, 1, 32, 100000)}) {
    const auto e = ff::decode_clip(name, bad, buf);
    CHECK(!e.ok());
    CHECK(e.error().find(name) == 0);
  }
}

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

namespace {

/// A trainer's record with the members vbucket reads by default, `path` included.
struct plain_record {
  std::int64_t num_frames = 0, height = 0, width = 0;
  double fps = 0;
  std::string path;
};

/// A record that names everything differently; its meta_traits say where the file is.
struct odd_record {
  std::string where;
  float rate = 0;
  std::int32_t len = 0, rows = 0, cols = 0;
};

}  // namespace

template <>
struct vbucket::meta_traits<odd_record> {
  static std::int32_t frames(const odd_record& r) { return r.len; }
  static std::int32_t height(const odd_record& r) { return r.rows; }
  static std::int32_t width(const odd_record& r) { return r.cols; }
  static float fps(const odd_record& r) { return r.rate; }
  static std::string_view path(const odd_record& r) { return r.where; }
};

static_assert(ff::media_record<plain_record>);
static_assert(ff::media_record<odd_record>);
static_assert(!ff::media_record<vbucket::sample_meta>);  // no path

TEST_CASE("ffmpeg: file_decoder over the trainer's own records decodes as over a meta_table") {
  const std::vector<std::string> names = {"h264_160x120_25fps.mp4", "mpeg4_96x64_60fps.mp4",
                                          "vp9_160x90_30fps.webm", "image_100x60.png"};
  std::vector<std::string> paths;
  vbucket::meta_table meta;
  std::vector<plain_record> plain;
  std::vector<odd_record> odd;
  for (const auto& n : names) {
    const auto p = ff::probe(media(n));
    REQUIRE(p.ok());
    paths.push_back(media(n));
    meta.push_back({p->num_frames, p->height, p->width, p->fps});
    plain.push_back({p->num_frames, p->height, p->width, p->fps, media(n)});
    odd.push_back({media(n), static_cast<float>(p->fps), static_cast<std::int32_t>(p->num_frames),
                   static_cast<std::int32_t>(p->height), static_cast<std::int32_t>(p->width)});
  }
  const ff::file_decoder reference(paths, meta, {.fps_max = 16});
  const ff::file_decoder by_member(plain, {.fps_max = 16});
  const ff::file_decoder by_traits(odd, {.fps_max = 16});
  const ff::file_decoder by_callable([&](std::size_t i) { return media(names[i]); }, meta,
                                     {.fps_max = 16});
  static_assert(!std::is_constructible_v<ff::file_decoder, std::vector<plain_record>&&>);
  for (const ff::file_decoder* d : {&by_member, &by_traits, &by_callable}) {
    REQUIRE(d->size() == names.size());
    for (std::uint32_t i = 0; i < names.size(); ++i) {
      CAPTURE(names[i]);
      CHECK(d->path(i) == media(names[i]));
      CHECK(d->interval(i) == reference.interval(i));
      const std::int64_t frames = names[i] == "image_100x60.png" ? 1 : 3;
      const vbucket::clip_task task{i, frames, 32, 48, vbucket::clip_layout::thwc, 1234 + i};
      std::vector<std::uint8_t> want(task.bytes()), got(task.bytes());
      REQUIRE_FALSE(reference.decode(task, want));
      REQUIRE_FALSE(d->decode(task, got));
      CHECK(got == want);
    }
  }
  // 60 fps thinned to 16: interval ceil(60 / 16) = 4, read through the odd record's traits.
  CHECK(by_traits.interval(1) == 4);
  // Errors name the record's file.
  odd[2].where = media("no_such_file.mp4");
  std::vector<std::uint8_t> buf(vbucket::clip_task{2, 3, 32, 48}.bytes());
  const auto e = by_traits.decode({2, 3, 32, 48}, buf);
  REQUIRE(e);
  CHECK(e->find("no_such_file.mp4") != std::string::npos);
  const auto past = by_member.decode({9, 3, 32, 48}, buf);
  REQUIRE(past);
  CHECK(*past == "file_decoder: sample 9 has no path");
}
