/// Tests of vbucket/ffmpeg/probe.hpp against ffprobe over the generated media: frames, size,
/// aspect, rate, rotation, display size of anamorphic video, and the stream chosen.
#include "vbucket/ffmpeg/probe.hpp"

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
