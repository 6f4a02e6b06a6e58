/// Tests of vbucket/ffmpeg/decode.hpp: decoded pixels against the ffmpeg command (PSNR), the
/// resize-crop geometry and temporal crop, deep clips in every container, damaged files, CTHW,
/// clips past the end and impossible requests.
#include "vbucket/ffmpeg/decode.hpp"

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
  CHECK(g.top == 53);  // a video: Open-Sora's video transform floors 107 / 2
  g = ff::resize_crop_geometry(160, 90, 64, 96, ff::crop_offset::image_round);
  CHECK(g.top == 54);  // an image: round(107 / 2) = round(53.5) = 54 (even), as Python's round
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
