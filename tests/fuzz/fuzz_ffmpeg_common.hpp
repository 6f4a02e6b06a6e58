#pragma once
/// Shared by fuzz_probe and fuzz_decode: FFmpeg's logs off, allocations capped, and tight limits
/// so that one input costs little time and memory (the defaults allow 64 Mpixel frames and two
/// minutes).

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t

#include "vbucket/ffmpeg/detail/libav.hpp"

namespace vbucket_fuzz {

inline vbucket::ffmpeg::limits fuzz_limits() {
  // FFmpeg's logs off; no single FFmpeg allocation above 64 MiB (libFuzzer's malloc limit is
  // 1 GiB, and the PNG demuxer sizes packets from chunk lengths: fuzz_probe found one asking 1.3
  // GB).
  static const bool quiet = (vbucket::ffmpeg::quiet_logs(),
                             vbucket::ffmpeg::cap_allocations(std::size_t{64} << 20), true);
  (void)quiet;
  vbucket::ffmpeg::limits l;
  l.max_side = 2048;
  l.max_pixels = std::int64_t{1} << 20;
  l.max_packets_without_frame = 256;
  l.timeout_seconds = 3.0;
  return l;
}

}  // namespace vbucket_fuzz
