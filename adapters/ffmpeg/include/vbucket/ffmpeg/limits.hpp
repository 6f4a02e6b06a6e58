#pragma once
/// The bounds of one probe or decode (`limits`, with the network's `network_options`) and the
/// process-wide FFmpeg settings (`quiet_logs`, `cap_allocations`). No FFmpeg header: these are
/// defined in vbucket::ffmpeg's compiled part.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <string>   // std::string

#include "vbucket/base/error.hpp"
#include "vbucket/load/clip_decoder.hpp"  // defaults::timeout_seconds, io_timeout_seconds, retries

namespace vbucket {
struct run_spec;  // run_spec.hpp
}  // namespace vbucket

namespace vbucket::ffmpeg {

/// How URLs (and shards behind URLs) are read.
struct network_options {
  /// A connect, or a read that stalls, fails after this long (FFmpeg's `rw_timeout`).
  double io_timeout_seconds = vbucket::defaults::io_timeout_seconds;
  /// Further attempts to open a URL after a failure that may pass (connection refused or
  /// reset, a timeout, a 5xx reply); a 4xx reply or bad data is not retried.
  int retries = vbucket::defaults::retries;
  /// The wait before retry k (0-based) is this · 2^k, cut short by the clip's deadline.
  double retry_backoff_seconds = 0.2;
  /// A connection lost in the middle of a response is reopened at the byte reached, with
  /// FFmpeg's waits of 0, 1, 3, ... s up to this many seconds (FFmpeg's `reconnect_delay_max`).
  int reconnect_delay_max_seconds = 1;
};

/// Bounds that keep corrupt or hostile files from exhausting memory or time.
struct limits {
  std::int64_t max_side = 16384;                    ///< largest frame height or width
  std::int64_t max_pixels = std::int64_t{1} << 26;  ///< largest height · width (64 Mpixel)
  std::int64_t max_packets_without_frame = 1024;    ///< packets sent with no frame coming out
  /// wall-clock bound on one probe or decode (interrupts I/O)
  double timeout_seconds = vbucket::defaults::timeout_seconds;
  network_options network{};
  ///< timeouts and retries of URLs (media_source.hpp)
};

/// Checks bounds set in C++ (front ends read them through the run spec's fields `timeout`,
/// `io_timeout` and `retries`, which check the same ranges): seconds finite and > 0 (up to
/// `defaults::max_seconds`), retries from 0 to `defaults::max_retries`. Throws `vbucket::error`
/// naming the field and the value.
inline void check_limits(const limits& lim) {
  auto seconds = [](const char* name, double v) {
    if (!(v > 0.0 && v <= vbucket::defaults::max_seconds))
      throw vbucket::error(std::string(name) + " must be seconds in (0, 1e6], got " +
                           std::to_string(v));
  };
  seconds("timeout", lim.timeout_seconds);
  seconds("io_timeout", lim.network.io_timeout_seconds);
  if (lim.network.retries < 0 || lim.network.retries > vbucket::defaults::max_retries)
    throw vbucket::error("retries must be from 0 to 100, got " +
                         std::to_string(lim.network.retries));
  if (!(lim.network.retry_backoff_seconds >= 0.0 &&
        lim.network.retry_backoff_seconds <= vbucket::defaults::max_seconds))
    throw vbucket::error("retry_backoff must be seconds in [0, 1e6], got " +
                         std::to_string(lim.network.retry_backoff_seconds));
}

/// The limits of a run spec's media fields (`timeout`, `io_timeout`, `retries`: checked when
/// the spec read them), the other bounds as in `base`.
[[nodiscard]] limits limits_of(const run_spec& spec, limits base = {});

/// Silences FFmpeg's own log output (it writes to stderr); a process-wide setting, which the
/// `vbucket` CLI and the tests use. Errors are reported by vbucket's return values anyway.
void quiet_logs() noexcept;

/// Caps every single allocation FFmpeg makes (av_malloc, av_realloc) at `bytes`, process-wide
/// (FFmpeg's default: INT_MAX). Some demuxers size buffers from fields of the file, so a hostile
/// file can ask for gigabytes in one go; with a cap it fails with an error instead. The
/// `vbucket` CLI caps at 1 GiB, the fuzzers lower.
void cap_allocations(std::size_t bytes) noexcept;

}  // namespace vbucket::ffmpeg
