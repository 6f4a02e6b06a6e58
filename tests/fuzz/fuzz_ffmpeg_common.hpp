#pragma once
/// Shared by fuzz_probe and fuzz_decode: FFmpeg's logs off, and tight limits so that one input
/// costs little time and memory (the defaults allow 64 Mpixel frames and two minutes).

#include "vbucket/ffmpeg/detail/libav.hpp"

namespace vbucket_fuzz {

inline vbucket::ffmpeg::limits fuzz_limits() {
  static const bool quiet = (vbucket::ffmpeg::quiet_logs(), true);
  (void)quiet;
  vbucket::ffmpeg::limits l;
  l.max_side = 2048;
  l.max_pixels = std::int64_t{1} << 20;
  l.max_packets_without_frame = 256;
  l.timeout_seconds = 3.0;
  return l;
}

}  // namespace vbucket_fuzz
