/// GPU tests of the NVDEC decoder (vbucket/cuda/nvdec.hpp): its clips equal the device math
/// run on the host over software-decoded frames (decode_clip_reference; NVDEC's H.264 output
/// is bit-exact, so only float rounding differs: ≤ 1), are close to decode_clip's, normalise
/// as the CPU reference does, fall back per file with a count, and fail on a corrupt file with
/// the file's name. Run by main.cpp only when a CUDA device is usable (else ctest: Skipped).
#include <doctest/doctest.h>

#include <cstdint>     // std::uint8_t
#include <cstdlib>     // std::abs, std::getenv
#include <filesystem>  // std::filesystem::exists
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/cuda/nvdec.hpp"
#include "vbucket/cuda/pinned_backend.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/load/normalize.hpp"

#include "vbucket_test/ffmpeg_media.hpp"

namespace ff = vbucket::ffmpeg;
namespace vc = vbucket::cuda;

namespace {

/// A test medium: in VBUCKET_NVDEC_MEDIA_DIR when set (scripts/gpu_check.sh runs the tests
/// on another machine, with the media beside them), else the build tree's.
std::string media(const std::string& name) {
  const char* dir = std::getenv("VBUCKET_NVDEC_MEDIA_DIR");
  return (dir != nullptr && *dir != '\0' ? std::string(dir) : vbucket_test::media_dir) + "/" + name;
}

bool exists(const std::string& name) { return std::filesystem::exists(media(name)); }

std::vector<std::uint8_t> download(const vc::device_buffer& b, std::size_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  vc::check(cudaMemcpy(host.data(), b.as<std::uint8_t>(), bytes, cudaMemcpyDeviceToHost),
            "cudaMemcpy");
  return host;
}

int max_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  int m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int{a[i]} - int{b[i]}));
  return m;
}

double mean_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::abs(int{a[i]} - int{b[i]});
  return s / static_cast<double>(a.size());
}

}  // namespace

TEST_CASE("nvdec gpu: clips equal the device math on the host, close to decode_clip") {
  vc::nvdec_decoder dec;
  REQUIRE_MESSAGE(dec.on_device(), dec.why_not());
  struct one_case {
    const char* file;
    std::int64_t start, frames, interval, height, width;
    ff::layout layout;
    ff::resize_filter filter;
    bool pad;
  };
  const one_case cases[] = {
      {"h264_320x240_24fps.mp4", 3, 4, 2, 96, 128, ff::layout::thwc, ff::resize_filter::bilinear,
       false},
      {"h264_320x240_24fps.mp4", 3, 4, 2, 96, 128, ff::layout::cthw, ff::resize_filter::opensora,
       false},
      {"h264_160x120_25fps_rotate90.mp4", 5, 3, 3, 64, 48, ff::layout::thwc,
       ff::resize_filter::bilinear, false},
      {"h264_180x120_sar32x27.mp4", 2, 3, 2, 72, 128, ff::layout::thwc, ff::resize_filter::bilinear,
       false},
      {"h264_64x48_25fps_long.mp4", 400, 5, 7, 32, 32, ff::layout::thwc,
       ff::resize_filter::bilinear, false},
      {"h264_64x48_25fps_long.mkv", 300, 8, 3, 48, 64, ff::layout::cthw,
       ff::resize_filter::bilinear, false},
      {"h264_160x120_25fps.mp4", 40, 8, 2, 60, 80, ff::layout::thwc, ff::resize_filter::bilinear,
       true},  // past the end: padded
      // Under NVDEC's smallest VP9 frame (128 x 128 on current GPUs): a fallback, or decoded
      // on a GPU that takes it.
      {"vp9_160x90_30fps.webm", 1, 3, 2, 90, 160, ff::layout::thwc, ff::resize_filter::bilinear,
       false},
  };
  std::int64_t expected_fallbacks = 0;
  for (const one_case& c : cases) {
    CAPTURE(c.file);
    if (!exists(c.file)) continue;
    ff::clip_request req{.start = c.start,
                         .frames = c.frames,
                         .interval = c.interval,
                         .height = c.height,
                         .width = c.width,
                         .layout = c.layout};
    req.filter = c.filter;
    req.pad = c.pad;
    const std::size_t bytes = ff::clip_bytes(req);
    vc::device_buffer out(bytes);
    const auto r = dec.decode(media(c.file), req, out.as<std::uint8_t>());
    REQUIRE_MESSAGE(r.ok(), r.error());
    const auto got = download(out, bytes);
    std::vector<std::uint8_t> ref(bytes), cpu(bytes);
    REQUIRE(vc::decode_clip_reference(media(c.file), req, ref).ok());
    REQUIRE(ff::decode_clip(media(c.file), req, cpu).ok());
    const bool vp9 = std::string(c.file).starts_with("vp9");
    if (vp9 && !r->on_device) {
      MESSAGE(c.file, ": on the CPU (", vc::to_string(r->fallback), ": ", r->fallback_detail, ")");
      CHECK(r->fallback == vc::fallback_reason::codec);
      CHECK(got == cpu);  // the CPU decoder's bytes, copied
      ++expected_fallbacks;
      continue;
    }
    CHECK(r->on_device);
    MESSAGE(c.file, ": max |gpu - reference| ", max_difference(got, ref), ", mean |gpu - cpu| ",
            mean_difference(got, cpu));
    CHECK(max_difference(got, ref) <= 1);
    CHECK(mean_difference(got, cpu) <= 7.5);  // the bound of nvdec_cpu.cpp (libswscale's filters)
    CHECK((c.pad ? r->clip.frames_padded > 0 : r->clip.frames_padded == 0));
  }
  CHECK(dec.stats().fallbacks == expected_fallbacks);
  CHECK(dec.stats().on_device + expected_fallbacks == dec.stats().clips);
}

TEST_CASE("nvdec gpu: decode_normalized equals the CPU normalisation of the uint8 clip") {
  vc::nvdec_decoder dec;
  ff::clip_request req{.start = 2, .frames = 5, .interval = 3, .height = 64, .width = 96};
  const std::string file = media("h264_320x240_24fps.mp4");
  vbucket::normalization norm;
  norm.mean = {0.485f, 0.456f, 0.406f};
  norm.std = {0.229f, 0.224f, 0.225f};
  const std::size_t bytes = ff::clip_bytes(req);
  vc::device_buffer u8(bytes), f32(bytes * sizeof(float));
  REQUIRE(dec.decode(file, req, u8.as<std::uint8_t>()).ok());
  const auto r = dec.decode_normalized(file, req, f32.as<float>(), norm);
  REQUIRE_MESSAGE(r.ok(), r.error());
  const auto clip = download(u8, bytes);
  std::vector<float> want(bytes), got(bytes);
  vbucket::normalize_thwc_to_cthw<float>(
      clip, want, {.batch = 1, .frames = 5, .height = 64, .width = 96}, norm);
  vc::check(cudaMemcpy(got.data(), f32.as<float>(), bytes * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
  CHECK(got == want);
}

TEST_CASE("nvdec gpu: per-file fallback to the CPU decoder, counted") {
  vc::nvdec_decoder dec;
  REQUIRE(dec.on_device());
  ff::clip_request req{.start = 0, .frames = 1, .interval = 1, .height = 30, .width = 50};
  const std::size_t bytes = ff::clip_bytes(req);
  vc::device_buffer out(bytes);
  std::vector<std::uint8_t> cpu(bytes);
  // A PNG: no CUDA decoding for the codec; the CPU decoder's bytes, exactly.
  const std::string png = media("image_100x60.png");
  auto r = dec.decode(png, req, out.as<std::uint8_t>());
  REQUIRE_MESSAGE(r.ok(), r.error());
  CHECK_FALSE(r->on_device);
  CHECK(r->fallback == vc::fallback_reason::codec);
  REQUIRE(ff::decode_clip(png, req, cpu).ok());
  CHECK(download(out, bytes) == cpu);
  // A filter the kernel does not have.
  req.filter = ff::resize_filter::bicubic;
  const std::string h264 = media("h264_320x240_24fps.mp4");
  r = dec.decode(h264, req, out.as<std::uint8_t>());
  REQUIRE(r.ok());
  CHECK(r->fallback == vc::fallback_reason::filter);
  REQUIRE(ff::decode_clip(h264, req, cpu).ok());
  CHECK(download(out, bytes) == cpu);
  const auto& st = dec.stats();
  CHECK(st.clips == 2);
  CHECK(st.fallbacks == 2);
  CHECK(st.by_reason[static_cast<std::size_t>(vc::fallback_reason::codec)] == 1);
  CHECK(st.by_reason[static_cast<std::size_t>(vc::fallback_reason::filter)] == 1);
  // Without fallback the same file is an error that says why.
  vc::nvdec_decoder strict({.device = 0, .allow_fallback = false});
  req.filter = ff::resize_filter::bilinear;
  r = strict.decode(png, req, out.as<std::uint8_t>());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find(png) != std::string::npos);
  CHECK(r.error().find("codec") != std::string::npos);
}

TEST_CASE("nvdec gpu: a corrupt or truncated file is an error naming the file") {
  vc::nvdec_decoder dec;
  ff::clip_request req{.start = 0, .frames = 4, .interval = 1, .height = 32, .width = 32};
  vc::device_buffer out(ff::clip_bytes(req));
  for (const char* name : {"bad_text.mp4", "bad_zero_bytes.mp4", "bad_header_only.mp4"}) {
    const std::string file = media(name);
    const auto r = dec.decode(file, req, out.as<std::uint8_t>());
    REQUIRE_FALSE(r.ok());
    CAPTURE(r.error());
    CHECK(r.error().find(file) != std::string::npos);
  }
  CHECK(dec.stats().errors == 3);
}
