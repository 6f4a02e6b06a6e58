/// Tests of clip_request::skip_unwanted (vbucket/ffmpeg/decode.hpp): decoding only the frames a
/// clip needs (unwanted non-reference frames discarded per packet, the decoder drained after the
/// last wanted packet) gives every wanted frame's bytes exactly as decoding every frame does, in
/// every codec the ffmpeg command encodes here and in the GOP structures where decode order is
/// not presentation order (make_codec_media.sh), and decodes no more frames.
#include <doctest/doctest.h>

#include <algorithm>   // std::equal, std::min
#include <cstddef>     // std::size_t, std::ptrdiff_t
#include <cstdint>     // std::int64_t, std::uint8_t, std::uint64_t
#include <filesystem>  // std::filesystem::exists
#include <memory>      // std::make_shared
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/probe.hpp"

namespace ff = vbucket::ffmpeg;

namespace {

const std::string codec_media_dir = VBUCKET_FFMPEG_CODEC_MEDIA_DIR;

struct quiet_init {
  quiet_init() { ff::quiet_logs(); }
};
const quiet_init quiet;

struct skip_case {
  const char* name;
  /// Some unwanted frame is a non-reference one (B-frames nothing refers to): skipping must
  /// decode fewer frames at interval ≥ 2.
  bool has_nonref;
};

/// Decodes `req` with skipping on and off; checks the bytes and counts. Returns the frames
/// decoded {on, off}, or {-1, -1} when both fail alike.
std::pair<std::int64_t, std::int64_t> compare(const std::string& path, ff::clip_request req) {
  std::vector<std::uint8_t> on(ff::clip_bytes(req), 1), off(on.size(), 2);
  req.skip_unwanted = true;
  const auto a = ff::decode_clip(path, req, on);
  req.skip_unwanted = false;
  const auto b = ff::decode_clip(path, req, off);
  REQUIRE(a.ok() == b.ok());
  if (!a.ok()) {
    CHECK(a.error() == b.error());
    return {-1, -1};
  }
  CHECK(on == off);
  CHECK(a->frames_converted == b->frames_converted);
  CHECK(a->frames_padded == b->frames_padded);
  CHECK(a->frames_decoded <= b->frames_decoded);
  CHECK(a->frames_decoded >= a->frames_converted);
  return {a->frames_decoded, b->frames_decoded};
}

}  // namespace

TEST_CASE("ffmpeg: skipping unwanted frames keeps every byte across codecs and GOP structures") {
  // B-pyramids (B-frames other frames refer to), plain B-frames, open GOPs (in MP4 through the
  // sample table, in Matroska through the frame index), GOPs of 30 and 250, VP9 and AV1 with
  // hidden alt-ref frames; intervals 1 to 3, seeded random starts and lengths, both ends, one
  // and two decoder threads.
  const skip_case cases[] = {
      {"h264_pyramid_g30.mp4", true},  {"h264_bframes_g30.mp4", true},
      {"h264_pyramid_g250.mp4", true}, {"h264_opengop_g30.mp4", true},
      {"h264_opengop_g30.mkv", true},  {"hevc_pyramid_g30.mp4", true},
      {"hevc_bframes_g250.mkv", true}, {"vp9_altref_g30.webm", false},
      {"av1_altref_g30.mkv", false},
  };
  int files = 0;
  for (const skip_case& c : cases) {
    const std::string path = codec_media_dir + "/" + c.name;
    if (!std::filesystem::exists(path)) {
      MESSAGE("no " << c.name << " (its encoder is missing): not tested");
      continue;
    }
    ++files;
    const std::string name = c.name;
    CAPTURE(path);
    const auto probed = ff::probe(path);
    REQUIRE(probed.ok());
    const std::int64_t total = probed->num_frames;
    REQUIRE(total == 96);
    // The Matroska copy goes through the frame index (seek_to_key), the rest through the
    // sample table or the demux pass.
    ff::frame_index index;
    if (std::string(c.name).ends_with(".mkv")) {
      auto entry = ff::index_video(path);
      REQUIRE(entry.ok());
      index.add(*entry);
    }
    std::int64_t decoded_on = 0, decoded_off = 0;
    std::int64_t decoded_on_sparse = 0, decoded_off_sparse = 0;  // interval ≥ 2
    std::uint64_t seed = 0;
    for (std::int64_t interval : {1, 2, 3}) {
      for (int k = 0; k < 8; ++k) {
        const std::int64_t frames = 3 + (k % 4) * 3;
        const std::int64_t span = (frames - 1) * interval + 1;
        // Starts: the first frame, the last possible, then seeded random ones.
        const std::int64_t start = k == 0 ? 0
                                   : k == 1
                                       ? total - span
                                       : *ff::temporal_random_crop(total, frames, interval, ++seed);
        CAPTURE(interval);
        CAPTURE(frames);
        CAPTURE(start);
        ff::clip_request req{
            .start = start, .frames = frames, .interval = interval, .height = 24, .width = 32};
        req.threads = k % 3 == 2 ? 2 : 1;
        req.index = index.size() > 0 ? &index : nullptr;
        const auto [on, off] = compare(path, req);
        REQUIRE(on >= 0);  // every clip lies inside the video
        decoded_on += on;
        decoded_off += off;
        if (interval >= 2) {
          decoded_on_sparse += on;
          decoded_off_sparse += off;
        }
      }
    }
    // Past the end: the same padding, and the same error without it.
    for (bool pad : {false, true}) {
      ff::clip_request req{
          .start = total - 4, .frames = 6, .interval = 2, .height = 24, .width = 32};
      req.pad = pad;
      CAPTURE(pad);
      compare(path, req);
    }
    MESSAGE(name << ": frames decoded " << decoded_on << " skipping, " << decoded_off
                 << " not (interval >= 2: " << decoded_on_sparse << ", " << decoded_off_sparse
                 << ")");
    if (c.has_nonref) CHECK(decoded_on_sparse < decoded_off_sparse);
  }
  CHECK(files > 0);
}

TEST_CASE("ffmpeg: skipping decodes the wanted frames and the ones they refer to, no more") {
  // Plain B-frames (nothing refers to them; decode order I P B B B P ...). From the keyframe
  // at 30, interval 1 wants every frame: nothing is discarded, and the decoder is drained once
  // the last wanted packet is in it, which is a B-frame decoded after the P-frame it is shown
  // before (that P-frame is decoded, nothing after it). Every other frame wanted leaves the
  // B-frames between the wanted ones out.
  const std::string path = codec_media_dir + "/h264_bframes_g30.mp4";
  if (!std::filesystem::exists(path)) return;
  ff::clip_request req{.start = 30, .frames = 20, .interval = 1, .height = 24, .width = 32};
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  auto r = ff::decode_clip(path, req, out);
  REQUIRE(r.ok());
  CHECK(r->frames_decoded >= 20);
  CHECK(r->frames_decoded <= 21);
  req.skip_unwanted = false;
  const auto all = ff::decode_clip(path, req, out);
  REQUIRE(all.ok());
  CHECK(all->frames_decoded >= r->frames_decoded);
  req.skip_unwanted = true;
  req.interval = 2;
  req.frames = 10;
  out.resize(ff::clip_bytes(req));
  r = ff::decode_clip(path, req, out);
  REQUIRE(r.ok());
  CHECK(r->frames_decoded < 19);  // without skipping: frames 30 to 48
  CHECK(r->frames_decoded >= 10);
}

TEST_CASE("ffmpeg: clips after an open GOP's keyframe are the frames decoded from the start") {
  // An open GOP's keyframe is followed (in decode order) by frames shown before it that refer
  // to the GOP before; started at that keyframe, FFmpeg's H.264 decoder can lose frames after
  // it too (x264 open-gop=1: "mmco: unref short failure", then frame 94 of 96 never comes out;
  // the ffmpeg command with -ss loses it as well). Such a landing is retried from an earlier
  // keyframe, so every clip, skipping or not, is the frames the decode from the start gives.
  for (const char* file :
       {"h264_opengop_g30.mp4", "h264_opengop_g30.mkv", "hevc_pyramid_g30.mp4"}) {
    const std::string path = codec_media_dir + "/" + file;
    if (!std::filesystem::exists(path)) continue;
    CAPTURE(path);
    ff::frame_index index;
    if (std::string(file).ends_with(".mkv")) {
      auto entry = ff::index_video(path);
      REQUIRE(entry.ok());
      index.add(*entry);
    }
    ff::clip_request all{.start = 0, .frames = 96, .interval = 1, .height = 24, .width = 32};
    std::vector<std::uint8_t> whole(ff::clip_bytes(all));
    const auto w = ff::decode_clip(path, all, whole);
    REQUIRE(w.ok());
    CHECK(w->frames_padded == 0);
    const std::size_t frame_bytes = 24 * 32 * 3;
    for (std::int64_t interval : {1, 2}) {
      for (std::int64_t start = 55; start < 96; ++start) {
        const std::int64_t frames = std::min<std::int64_t>(6, (95 - start) / interval + 1);
        for (bool skip : {true, false}) {
          CAPTURE(interval);
          CAPTURE(start);
          CAPTURE(skip);
          ff::clip_request req{
              .start = start, .frames = frames, .interval = interval, .height = 24, .width = 32};
          req.pad = true;
          req.skip_unwanted = skip;
          req.index = index.size() > 0 ? &index : nullptr;
          std::vector<std::uint8_t> out(ff::clip_bytes(req));
          const auto r = ff::decode_clip(path, req, out);
          REQUIRE(r.ok());
          CHECK(r->frames_padded == 0);
          for (std::int64_t j = 0; j < frames; ++j) {
            const auto at = static_cast<std::size_t>(start + j * interval) * frame_bytes;
            CHECK(std::equal(out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) *
                                                                       frame_bytes),
                             out.begin() + static_cast<std::ptrdiff_t>(
                                               static_cast<std::size_t>(j + 1) * frame_bytes),
                             whole.begin() + static_cast<std::ptrdiff_t>(at)));
          }
        }
      }
    }
  }
}
