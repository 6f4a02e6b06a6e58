/// Tests of vbucket/ffmpeg/file_decoder.hpp: the frame interval (no media), and decoding over a
/// trainer's own records (by member, by meta_traits, by a callable) as over a meta_table.
#include "vbucket/ffmpeg/file_decoder.hpp"

#include <doctest/doctest.h>

#include <cstdint>      // std::int64_t
#include <limits>       // std::numeric_limits
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_constructible_v
#include <vector>       // std::vector

#include "vbucket/bucket/rules.hpp"  // frame_interval

#include "vbucket_test/ffmpeg_media.hpp"

namespace ff = vbucket::ffmpeg;

namespace {

using vbucket_test::media;

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
