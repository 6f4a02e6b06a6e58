/// Fuzzes `vbucket::ffmpeg::probe_memory` (a custom AVIOContext over the input) on arbitrary
/// bytes: any demuxer FFmpeg recognises, decode-count included. Bad input must come back as an
/// error value with one line naming the file; a probe that succeeds must report sizes within
/// the limits, at least one frame and a positive (or unknown) rate.

#include <cmath>    // std::isnan, std::isfinite
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::int64_t
#include <span>     // std::span
#include <string>   // std::string::npos

#include "fuzz_common.hpp"
#include "fuzz_ffmpeg_common.hpp"
#include "vbucket/ffmpeg/probe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vbucket::ffmpeg::probe_options opt;
  opt.limits = vbucket_fuzz::fuzz_limits();
  opt.always_decode_count = size % 2 == 1;  // both ways of counting
  const auto r = vbucket::ffmpeg::probe_memory(std::span(data, size), "fuzz.bin", opt);
  if (!r.ok()) {
    vbucket_fuzz::check_message(r.error(), "fuzz.bin: ");
    return 0;
  }
  const auto& i = *r;
  VBUCKET_FUZZ_CHECK(i.num_frames >= 1);
  VBUCKET_FUZZ_CHECK(i.coded_height >= 1 && i.coded_height <= opt.limits.max_side);
  VBUCKET_FUZZ_CHECK(i.coded_width >= 1 && i.coded_width <= opt.limits.max_side);
  VBUCKET_FUZZ_CHECK(i.coded_height * i.coded_width <= opt.limits.max_pixels);
  VBUCKET_FUZZ_CHECK(i.rotation == 0 || i.rotation == 90 || i.rotation == 180 || i.rotation == 270);
  // Display size: the stored width stretched by a sample aspect ratio from 1:8 to 8:1, rotated.
  // (In 64 bits: a reduced ratio's terms reach 2^30.)
  const std::int64_t sar_num = i.sar_num, sar_den = i.sar_den;
  VBUCKET_FUZZ_CHECK(sar_num >= 1 && sar_den >= 1 && sar_num <= 8 * sar_den &&
                     sar_den <= 8 * sar_num);
  const std::int64_t shown_width =
      vbucket::ffmpeg::detail::display_width(i.coded_width, AVRational{i.sar_num, i.sar_den});
  const bool swap = i.rotation == 90 || i.rotation == 270;
  VBUCKET_FUZZ_CHECK(i.height == (swap ? shown_width : i.coded_height));
  VBUCKET_FUZZ_CHECK(i.width == (swap ? i.coded_height : shown_width));
  VBUCKET_FUZZ_CHECK(i.warning.find('\n') == std::string::npos);
  VBUCKET_FUZZ_CHECK(std::isnan(i.fps) || (i.fps > 0 && std::isfinite(i.fps)));
  VBUCKET_FUZZ_CHECK(!i.codec.empty());
  return 0;
}
