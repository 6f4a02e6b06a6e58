/// CPU tests of the NVDEC decoder (vbucket/cuda/nvdec.hpp) that need no GPU: the kernel's
/// per-pixel math (vbucket/cuda/yuv_resize.hpp, the code the kernel runs) on synthetic planes
/// (known BT.601/709 colours, constant frames under any resize, crop and rotation geometry,
/// NV12 = I420 = 16-bit) and on decoded frames against libswscale (decode_clip), FFmpeg's
/// CUDA support per codec, and the decoder without a device (every clip counted as a fallback,
/// errors naming the file). Runs everywhere (ctest cuda/nvdec_cpu).
#include <doctest/doctest.h>

#include <algorithm>  // std::max
#include <cmath>      // std::abs, std::lround, std::sin
#include <cstdint>    // std::uint8_t, std::uint16_t
#include <cstdlib>    // std::abs
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/cuda/nvdec.hpp"
#include "vbucket/cuda/pinned_backend.hpp"  // device_available
#include "vbucket/cuda/yuv_resize.hpp"
#include "vbucket/ffmpeg/decode.hpp"

#include "vbucket/ffmpeg/detail/libav.hpp"  // libswscale, for the reference
#include "vbucket_test/ffmpeg_media.hpp"

namespace yuv = vbucket::cuda::yuv;
namespace ff = vbucket::ffmpeg;

namespace {

/// A 4:2:0 frame in I420 (three planes) and the same samples as NV12 and as P016 (16-bit NV12,
/// the value in the high byte).
struct synthetic {
  int w = 0, h = 0;
  std::vector<std::uint8_t> y, u, v, uv, y16, uv16;

  synthetic(int width, int height) : w(width), h(height) {
    y.resize(static_cast<std::size_t>(w * h));
    u.resize(static_cast<std::size_t>(cw() * ch()));
    v.resize(u.size());
  }
  int cw() const { return (w + 1) / 2; }
  int ch() const { return (h + 1) / 2; }
  std::uint8_t& Y(int r, int c) { return y[static_cast<std::size_t>(r * w + c)]; }
  std::uint8_t& U(int r, int c) { return u[static_cast<std::size_t>(r * cw() + c)]; }
  std::uint8_t& V(int r, int c) { return v[static_cast<std::size_t>(r * cw() + c)]; }

  void fill(std::uint8_t yc, std::uint8_t uc, std::uint8_t vc) {
    std::fill(y.begin(), y.end(), yc);
    std::fill(u.begin(), u.end(), uc);
    std::fill(v.begin(), v.end(), vc);
  }

  /// The NV12 and P016 copies (call after filling the I420 planes).
  void derive() {
    uv.resize(u.size() * 2);
    for (std::size_t i = 0; i < u.size(); ++i) {
      uv[2 * i] = u[i];
      uv[2 * i + 1] = v[i];
    }
    auto widen = [](const std::vector<std::uint8_t>& in) {
      std::vector<std::uint8_t> out(in.size() * 2);
      for (std::size_t i = 0; i < in.size(); ++i) {
        out[2 * i] = 0;  // little-endian: low byte, then the value
        out[2 * i + 1] = in[i];
      }
      return out;
    };
    y16 = widen(y);
    uv16 = widen(uv);
  }

  yuv::frame_view i420(const yuv::colour& c) const {
    yuv::frame_view f;
    f.plane[0] = y.data();
    f.plane[1] = u.data();
    f.plane[2] = v.data();
    f.pitch[0] = w;
    f.pitch[1] = f.pitch[2] = cw();
    f.width = w;
    f.height = h;
    f.layout = yuv::planes::planar;
    f.coef = c;
    return f;
  }
  yuv::frame_view nv12(const yuv::colour& c) const {
    yuv::frame_view f = i420(c);
    f.plane[1] = uv.data();
    f.plane[2] = nullptr;
    f.pitch[1] = 2 * cw();
    f.layout = yuv::planes::semi;
    return f;
  }
  yuv::frame_view p016(const yuv::colour& c) const {
    yuv::frame_view f = nv12(c);
    f.plane[0] = y16.data();
    f.plane[1] = uv16.data();
    f.pitch[0] = 2 * w;
    f.pitch[1] = 4 * cw();
    f.wide = true;
    return f;
  }
};

/// The resample of a h x w coded frame to th x tw with Open-Sora's geometry (no SAR).
yuv::resample geometry(int h, int w, int th, int tw, int rotation = 0,
                       yuv::resample_mode mode = yuv::resample_mode::triangle) {
  const bool swap = rotation == 90 || rotation == 270;
  const auto g = ff::resize_crop_geometry(swap ? w : h, swap ? h : w, th, tw);
  yuv::resample r;
  r.height = th;
  r.width = tw;
  r.scaled_height = static_cast<int>(g.scaled_height);
  r.scaled_width = static_cast<int>(g.scaled_width);
  r.top = static_cast<int>(g.top);
  r.left = static_cast<int>(g.left);
  r.rotation = rotation;
  r.mode = mode;
  return r;
}

std::vector<std::uint8_t> convert(const yuv::frame_view& f, const yuv::resample& r) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(r.height * r.width * 3));
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x) {
      std::uint8_t rgb[3];
      yuv::pixel(f, r, y, x, rgb);
      for (int c = 0; c < 3; ++c)
        out[static_cast<std::size_t>(yuv::clip_offset(true, 1, r.height, r.width, 0, y, x, c))] =
            rgb[c];
    }
  return out;
}

const yuv::colour bt601 = yuv::make_colour(0.299f, 0.114f, false);
const yuv::colour bt709 = yuv::make_colour(0.2126f, 0.0722f, false);
const yuv::colour bt601_full = yuv::make_colour(0.299f, 0.114f, true);

/// The 8-bit Y'CbCr codes of R'G'B' (0..1) by the standard's forward equations (BT.601/709
/// limited range: Y' = 16 + 219·(Kr·R + Kg·G + Kb·B), C = 128 + 224·(…)/(2·(1 − K))).
std::array<std::uint8_t, 3> encode(float kr, float kb, float r, float g, float b) {
  const float kg = 1 - kr - kb;
  const float ey = kr * r + kg * g + kb * b;
  const float cb = (b - ey) / (2 * (1 - kb)), cr = (r - ey) / (2 * (1 - kr));
  return {static_cast<std::uint8_t>(std::lround(16 + 219 * ey)),
          static_cast<std::uint8_t>(std::lround(128 + 224 * cb)),
          static_cast<std::uint8_t>(std::lround(128 + 224 * cr))};
}

}  // namespace

TEST_CASE("nvdec math: known BT.601 and BT.709 colours, limited and full range") {
  struct known {
    float kr, kb;
    yuv::colour coef;
    float r, g, b;
  };
  const known cases[] = {
      {0.299f, 0.114f, bt601, 1, 0, 0},   {0.299f, 0.114f, bt601, 0, 1, 0},
      {0.299f, 0.114f, bt601, 0, 0, 1},   {0.299f, 0.114f, bt601, 1, 1, 1},
      {0.299f, 0.114f, bt601, 0, 0, 0},   {0.299f, 0.114f, bt601, 0.5f, 0.25f, 0.75f},
      {0.2126f, 0.0722f, bt709, 1, 0, 0}, {0.2126f, 0.0722f, bt709, 0, 1, 0},
      {0.2126f, 0.0722f, bt709, 0, 0, 1}, {0.2126f, 0.0722f, bt709, 0.2f, 0.6f, 0.4f},
  };
  for (const known& k : cases) {
    const auto code = encode(k.kr, k.kb, k.r, k.g, k.b);
    synthetic s(8, 6);
    s.fill(code[0], code[1], code[2]);
    s.derive();
    std::uint8_t rgb[3];
    yuv::pixel(s.nv12(k.coef), geometry(6, 8, 6, 8), 2, 3, rgb);
    CAPTURE(k.kr);
    CAPTURE(k.r);
    CAPTURE(k.g);
    CAPTURE(k.b);
    // The codes are rounded to 8 bits: within 2 of the colour (255 · 0.5 / 219 per code step
    // in Y', up to ~1.5 through the chroma terms).
    CHECK(std::abs(rgb[0] - k.r * 255) <= 2.0f);
    CHECK(std::abs(rgb[1] - k.g * 255) <= 2.0f);
    CHECK(std::abs(rgb[2] - k.b * 255) <= 2.0f);
  }
  // Nominal black and white exactly; full range: Y' 0 and 255.
  synthetic s(4, 4);
  std::uint8_t rgb[3];
  s.fill(16, 128, 128);
  s.derive();
  yuv::pixel(s.nv12(bt601), geometry(4, 4, 4, 4), 1, 1, rgb);
  CHECK((rgb[0] == 0 && rgb[1] == 0 && rgb[2] == 0));
  s.fill(235, 128, 128);
  s.derive();
  yuv::pixel(s.nv12(bt709), geometry(4, 4, 4, 4), 1, 1, rgb);
  CHECK((rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255));
  s.fill(255, 128, 128);
  s.derive();
  yuv::pixel(s.nv12(bt601_full), geometry(4, 4, 4, 4), 1, 1, rgb);
  CHECK((rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255));
  s.fill(0, 128, 128);
  s.derive();
  yuv::pixel(s.nv12(bt601_full), geometry(4, 4, 4, 4), 1, 1, rgb);
  CHECK((rgb[0] == 0 && rgb[1] == 0 && rgb[2] == 0));
  // The matrices differ: BT.601's red codes read as BT.709 are not red.
  const auto red601 = encode(0.299f, 0.114f, 1, 0, 0);
  s.fill(red601[0], red601[1], red601[2]);
  s.derive();
  yuv::pixel(s.nv12(bt709), geometry(4, 4, 4, 4), 1, 1, rgb);
  CHECK(rgb[1] > 20);
}

TEST_CASE("nvdec math: a constant frame stays constant under any resize, crop and rotation") {
  const std::uint8_t code[3] = {120, 70, 190};
  std::uint8_t want[3];
  {
    synthetic one(2, 2);
    one.fill(code[0], code[1], code[2]);
    one.derive();
    yuv::pixel(one.nv12(bt601), geometry(2, 2, 2, 2), 0, 0, want);
  }
  synthetic s(37, 23);  // odd sizes: a chroma plane of ceil(w/2) x ceil(h/2)
  s.fill(code[0], code[1], code[2]);
  s.derive();
  const int targets[][2] = {{5, 7}, {23, 37}, {64, 48}, {1, 1}, {100, 300}, {12, 4}};
  for (const auto& t : targets)
    for (int rotation : {0, 90, 180, 270})
      for (auto mode : {yuv::resample_mode::triangle, yuv::resample_mode::torch}) {
        const auto out = convert(s.i420(bt601), geometry(23, 37, t[0], t[1], rotation, mode));
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] != want[i % 3];
        CAPTURE(t[0]);
        CAPTURE(t[1]);
        CAPTURE(rotation);
        CHECK(wrong == 0);
      }
}

TEST_CASE("nvdec math: NV12, I420 and 16-bit samples give the same bytes") {
  synthetic s(45, 31);
  for (int r = 0; r < s.h; ++r)
    for (int c = 0; c < s.w; ++c)
      s.Y(r, c) = static_cast<std::uint8_t>(16 + (r * 7 + c * 13 + (r * c) % 29) % 220);
  for (int r = 0; r < s.ch(); ++r)
    for (int c = 0; c < s.cw(); ++c) {
      s.U(r, c) = static_cast<std::uint8_t>(40 + (r * 11 + c * 5) % 180);
      s.V(r, c) = static_cast<std::uint8_t>(30 + (r * 3 + c * 17) % 200);
    }
  s.derive();
  for (int rotation : {0, 90})
    for (auto mode : {yuv::resample_mode::triangle, yuv::resample_mode::torch}) {
      const auto r = geometry(31, 45, 16, 24, rotation, mode);
      const auto a = convert(s.i420(bt709), r);
      CHECK(a == convert(s.nv12(bt709), r));
      CHECK(a == convert(s.p016(bt709), r));
    }
}

TEST_CASE("nvdec math: crop offset and rotation pick the right source pixels") {
  // Neutral chroma, luma = a distinct value per pixel: at scale 1 each output pixel is one
  // source pixel, whose grey level (Y' − 16) · 255 / 219 is known.
  synthetic s(64, 48);
  for (int r = 0; r < s.h; ++r)
    for (int c = 0; c < s.w; ++c) s.Y(r, c) = static_cast<std::uint8_t>(16 + (r * 3 + c) % 220);
  std::fill(s.u.begin(), s.u.end(), 128);
  std::fill(s.v.begin(), s.v.end(), 128);
  s.derive();
  auto grey = [](int code) { return static_cast<int>(std::lround((code - 16) * 255.0 / 219.0)); };
  for (auto mode : {yuv::resample_mode::triangle, yuv::resample_mode::torch}) {
    // 48 x 64 to 48 x 32: scaled 48 x 64 (height matched), left = (64 - 32) / 2 = 16.
    const auto r = geometry(48, 64, 48, 32, 0, mode);
    REQUIRE((r.scaled_height == 48 && r.scaled_width == 64 && r.left == 16 && r.top == 0));
    const auto out = convert(s.nv12(bt601), r);
    std::size_t wrong = 0;
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c)
          wrong += std::abs(out[static_cast<std::size_t>((y * 32 + x) * 3 + c)] -
                            grey(s.Y(y, 16 + x))) > 1;
    CHECK(wrong == 0);
    // 90° clockwise, display 64 x 48 shown as-is: display (y, x) is coded (h − 1 − x, y).
    const auto t = geometry(48, 64, 64, 48, 90, mode);
    REQUIRE((t.scaled_height == 64 && t.scaled_width == 48 && t.top == 0 && t.left == 0));
    const auto turned = convert(s.nv12(bt601), t);
    wrong = 0;
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 48; ++x)
        wrong +=
            std::abs(turned[static_cast<std::size_t>((y * 48 + x) * 3)] - grey(s.Y(47 - x, y))) > 1;
    CHECK(wrong == 0);
    // 270°: display (y, x) is coded (x, w − 1 − y); 180°: (h − 1 − y, w − 1 − x).
    const auto t270 = convert(s.nv12(bt601), geometry(48, 64, 64, 48, 270, mode));
    const auto t180 = convert(s.nv12(bt601), geometry(48, 64, 48, 64, 180, mode));
    wrong = 0;
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 48; ++x)
        wrong +=
            std::abs(t270[static_cast<std::size_t>((y * 48 + x) * 3)] - grey(s.Y(x, 63 - y))) > 1;
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 64; ++x)
        wrong += std::abs(t180[static_cast<std::size_t>((y * 64 + x) * 3)] -
                          grey(s.Y(47 - y, 63 - x))) > 1;
    CHECK(wrong == 0);
  }
}

namespace {

/// libswscale's conversion of the I420 frame `s` to RGB24 at the covering size, cropped to
/// the target: what the CPU decoder's frame_writer does (SWS_BILINEAR, the BT.601 or BT.709
/// coefficients, limited range).
std::vector<std::uint8_t> swscale_reference(const synthetic& s, const yuv::resample& r,
                                            bool use_709) {
  SwsContext* ctx = sws_getContext(s.w, s.h, AV_PIX_FMT_YUV420P, r.scaled_width, r.scaled_height,
                                   AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  REQUIRE(ctx != nullptr);
  const int* coefficients = sws_getCoefficients(use_709 ? SWS_CS_ITU709 : SWS_CS_DEFAULT);
  sws_setColorspaceDetails(ctx, coefficients, 0, coefficients, 1, 0, 1 << 16, 1 << 16);
  const std::uint8_t* src[4] = {s.y.data(), s.u.data(), s.v.data(), nullptr};
  const int src_stride[4] = {s.w, s.cw(), s.cw(), 0};
  std::vector<std::uint8_t> scaled(static_cast<std::size_t>(r.scaled_width * r.scaled_height * 3));
  std::uint8_t* dst[4] = {scaled.data(), nullptr, nullptr, nullptr};
  const int dst_stride[4] = {r.scaled_width * 3, 0, 0, 0};
  sws_scale(ctx, src, src_stride, 0, s.h, dst, dst_stride);
  sws_freeContext(ctx);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(r.height * r.width * 3));
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width * 3; ++x)
      out[static_cast<std::size_t>(y * r.width * 3 + x)] =
          scaled[static_cast<std::size_t>((r.top + y) * r.scaled_width * 3 + r.left * 3 + x)];
  return out;
}

}  // namespace

TEST_CASE("nvdec math: synthetic NV12 against libswscale within tolerance") {
  // Smooth content (sums of slow sinusoids, in luma and chroma), where resampling filters
  // agree closely: the device math (NV12 view) against libswscale's conversion of the same
  // samples (I420). Measured (libswscale 6, FFmpeg 5.1): mean |d| 0.005 to 2.6, max 1 to 9;
  // libswscale's scaled path (fixed-point, table-based Y'CbCr → RGB without
  // SWS_ACCURATE_RND) is off by ~2 levels even on a constant frame at some sizes. The bounds:
  // mean ≤ 3, max ≤ 12. The other matrix (BT.709 for BT.601) measured mean 5.1 to 5.8, max
  // 22 to 24: it fails.
  synthetic s(320, 180);
  for (int r = 0; r < s.h; ++r)
    for (int c = 0; c < s.w; ++c)
      s.Y(r, c) = static_cast<std::uint8_t>(
          std::lround(125 + 60 * std::sin(c * 0.031 + r * 0.017) + 30 * std::sin(r * 0.043)));
  for (int r = 0; r < s.ch(); ++r)
    for (int c = 0; c < s.cw(); ++c) {
      s.U(r, c) = static_cast<std::uint8_t>(std::lround(128 + 50 * std::sin(c * 0.05 + 1.0)));
      s.V(r, c) = static_cast<std::uint8_t>(std::lround(128 + 45 * std::sin(r * 0.07 + c * 0.02)));
    }
  s.derive();
  const int targets[][2] = {{180, 320}, {96, 128}, {64, 64}, {256, 512}, {45, 80}};
  for (bool use_709 : {false, true})
    for (const auto& t : targets) {
      CAPTURE(use_709);
      CAPTURE(t[0]);
      CAPTURE(t[1]);
      const auto r = geometry(s.h, s.w, t[0], t[1]);
      yuv::frame_view v = s.nv12(use_709 ? bt709 : bt601);
      v.chroma_left = false;  // libswscale's default siting (centred), as it is called here
      const auto got = convert(v, r);
      const auto want = swscale_reference(s, r, use_709);
      double sum = 0;
      int max = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const int d = std::abs(int{got[i]} - int{want[i]});
        sum += d;
        max = std::max(max, d);
      }
      const double mean = sum / static_cast<double>(got.size());
      MESSAGE(t[0], "x", t[1], (use_709 ? " bt709" : " bt601"), ": mean |d| ", mean, ", max ", max);
      CHECK(mean <= 3.0);
      CHECK(max <= 12);
    }
}

TEST_CASE("nvdec math: decoded clips against libswscale (decode_clip) within tolerance") {
  // The whole path (frames, display geometry, anamorphic and rotated files, both filters) on
  // decoded H.264 and VP9 clips of ffmpeg's testsrc. Its hard colour edges are where the
  // chroma handling differs most (libswscale replicates chroma at 1:1 and in its packed RGB
  // output, the device interpolates it): measured mean |d| 0.002 (VP9 at 1:1) to 6.0 (a
  // 64x48 clip to 32x32), single values up to ~220 on an edge. Bound: mean ≤ 7.5. Geometry
  // and matrices are checked exactly above; the GPU tests compare with the host math (≤ 1).
  struct one_case {
    const char* file;
    std::int64_t start, frames, interval, height, width;
    ff::resize_filter filter;
  };
  const one_case cases[] = {
      {"h264_320x240_24fps.mp4", 3, 4, 2, 96, 128, ff::resize_filter::bilinear},    // down
      {"h264_320x240_24fps.mp4", 0, 3, 5, 240, 320, ff::resize_filter::bilinear},   // 1:1
      {"h264_320x240_24fps.mp4", 10, 2, 1, 300, 500, ff::resize_filter::bilinear},  // up, crop
      {"h264_320x240_24fps.mp4", 3, 4, 2, 96, 128, ff::resize_filter::opensora},    // torch
      {"h264_160x120_25fps_rotate90.mp4", 5, 3, 3, 64, 48, ff::resize_filter::bilinear},
      {"h264_180x120_sar32x27.mp4", 2, 3, 2, 72, 128, ff::resize_filter::bilinear},  // anamorphic
      {"h264_90x160_25fps_portrait.mp4", 0, 4, 4, 64, 96, ff::resize_filter::bilinear},
      {"vp9_160x90_30fps.webm", 1, 3, 2, 90, 160, ff::resize_filter::bilinear},
      {"h264_64x48_25fps_long.mp4", 400, 5, 7, 32, 32, ff::resize_filter::bilinear},  // deep
  };
  for (const one_case& c : cases) {
    const std::string file = c.file;
    CAPTURE(file);
    CAPTURE(static_cast<int>(c.filter));
    if (!vbucket_test::exists(c.file)) {
      MESSAGE("skipped: no ", c.file, " (encoder missing)");
      continue;
    }
    ff::clip_request req{.start = c.start,
                         .frames = c.frames,
                         .interval = c.interval,
                         .height = c.height,
                         .width = c.width};
    req.filter = c.filter;
    std::vector<std::uint8_t> want(ff::clip_bytes(req)), got(want.size());
    const auto a = ff::decode_clip(vbucket_test::media(c.file), req, want);
    REQUIRE_MESSAGE(a.ok(), a.error());
    const auto b = vbucket::cuda::decode_clip_reference(vbucket_test::media(c.file), req, got);
    REQUIRE_MESSAGE(b.ok(), b.error());
    CHECK(b->frames_converted == a->frames_converted);
    CHECK(b->source_height == a->source_height);
    CHECK(b->source_width == a->source_width);
    double sum = 0;
    std::vector<std::size_t> histogram(256, 0);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const int d = std::abs(int{want[i]} - int{got[i]});
      sum += d;
      ++histogram[static_cast<std::size_t>(d)];
    }
    const double mean = sum / static_cast<double>(want.size());
    int max = 255;
    while (max > 0 && histogram[static_cast<std::size_t>(max)] == 0) --max;
    MESSAGE(file, " ", c.height, "x", c.width, ": mean |d| ", mean, ", max ", max);
    CHECK(mean <= 7.5);
  }
}

TEST_CASE("nvdec: FFmpeg's CUDA decoding per codec") {
  // Debian's FFmpeg 5.1 (and any build with --enable-nvdec) has the nvdec hwaccels of these.
  CHECK(vbucket::cuda::nvdec_supports("h264"));
  CHECK(vbucket::cuda::nvdec_supports("hevc"));
  CHECK(vbucket::cuda::nvdec_supports("mpeg2video"));
  CHECK_FALSE(vbucket::cuda::nvdec_supports("png"));
  CHECK_FALSE(vbucket::cuda::nvdec_supports("no such codec"));
}

TEST_CASE("nvdec: without a CUDA device every clip is a counted fallback, errors name the file") {
  if (vbucket::cuda::device_available()) {
    MESSAGE("a CUDA device is present: covered by vbucket_nvdec_tests instead");
    return;
  }
  vbucket::cuda::nvdec_decoder dec;
  CHECK_FALSE(dec.on_device());
  CHECK_FALSE(dec.why_not().empty());
  ff::clip_request req{.start = 0, .frames = 2, .interval = 1, .height = 32, .width = 32};
  std::uint8_t fake_device_memory[1] = {};  // never written: there is no device to copy to
  const std::string file = vbucket_test::media("h264_320x240_24fps.mp4");
  auto r = dec.decode(file, req, fake_device_memory);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find(file) != std::string::npos);
  CHECK(r.error().find("no CUDA device") != std::string::npos);
  const std::string bad = vbucket_test::media("bad_text.mp4");
  r = dec.decode(bad, req, fake_device_memory);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find(bad) != std::string::npos);
  const auto& st = dec.stats();
  CHECK(st.clips == 2);
  CHECK(st.on_device == 0);
  CHECK(st.fallbacks == 2);
  CHECK(st.by_reason[static_cast<std::size_t>(vbucket::cuda::fallback_reason::no_device)] == 2);
  CHECK(st.errors == 2);
  // Without fallback: an error saying why, no CPU decode.
  vbucket::cuda::nvdec_decoder strict({.device = 0, .allow_fallback = false});
  r = strict.decode(file, req, fake_device_memory);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("no_device") != std::string::npos);
  CHECK(strict.stats().fallbacks == 0);
  // A bad request is an error naming the file before anything is decoded.
  req.frames = 0;
  r = dec.decode(file, req, fake_device_memory);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find(file) != std::string::npos);
}

TEST_CASE("nvdec math: decode_clip_reference's CTHW is its THWC transposed, padding repeats") {
  const std::string file = vbucket_test::media("h264_160x120_25fps.mp4");
  // 50 frames: 40, 42, ..., 48 exist, 50 .. 54 are padded with frame 48.
  ff::clip_request req{.start = 40, .frames = 8, .interval = 2, .height = 30, .width = 50};
  req.pad = true;
  std::vector<std::uint8_t> thwc(ff::clip_bytes(req)), cthw(thwc.size());
  const auto a = vbucket::cuda::decode_clip_reference(file, req, thwc);
  REQUIRE_MESSAGE(a.ok(), a.error());
  CHECK(a->frames_padded == 3);
  req.layout = ff::layout::cthw;
  REQUIRE(vbucket::cuda::decode_clip_reference(file, req, cthw).ok());
  const std::size_t hw = 30 * 50, n = 8;
  std::size_t wrong = 0;
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t p = 0; p < hw; ++p)
      for (std::size_t c = 0; c < 3; ++c)
        wrong += thwc[(t * hw + p) * 3 + c] != cthw[(c * n + t) * hw + p];
  CHECK(wrong == 0);
  for (std::size_t t = 5; t < n; ++t)
    CHECK(std::equal(thwc.begin() + static_cast<std::ptrdiff_t>(t * hw * 3),
                     thwc.begin() + static_cast<std::ptrdiff_t>((t + 1) * hw * 3),
                     thwc.begin() + static_cast<std::ptrdiff_t>(4 * hw * 3)));
  // A bad file or request: an error naming the file.
  const auto bad =
      vbucket::cuda::decode_clip_reference(vbucket_test::media("bad_text.mp4"), req, cthw);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().find("bad_text.mp4") != std::string::npos);
  req.width = 51;  // the buffer no longer fits
  const auto wrong_size = vbucket::cuda::decode_clip_reference(file, req, cthw);
  REQUIRE_FALSE(wrong_size.ok());
  CHECK(wrong_size.error().find(file) != std::string::npos);
}
