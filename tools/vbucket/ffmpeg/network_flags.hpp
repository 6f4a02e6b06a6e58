#pragma once
/// The flags that bound a file's time, network included, shared by `scan` and `decode`:
/// --timeout (the deadline of one file), --io-timeout (a stalled connect or read), --retries
/// (further attempts after a failure that may pass). They fill `ffmpeg::limits`; the library
/// holds the defaults and checks the values (`ffmpeg::check_limits`).

#include <cstdlib>  // std::strtod
#include <string>   // std::string

#include "../cli.hpp"
#include "vbucket/ffmpeg/limits.hpp"

namespace vbucket::cli {

inline constexpr flag timeout_flag{
    "timeout", "SECONDS", false,
    "deadline of one file, network included (connect, reads, retries): past it the file fails"};
inline constexpr flag io_timeout_flag{
    "io-timeout", "SECONDS", false,
    "over the network, a connect or a read that stalls this long fails (and may be retried)"};
inline constexpr flag retries_flag{
    "retries", "N", false,
    "further attempts at a URL after a failure that may pass (refused, reset, 5xx, timeout)"};

/// Reads --timeout, --io-timeout and --retries into `lim`; a bad value is a usage error naming
/// the flag.
inline void read_network_flags(const args& a, ffmpeg::limits& lim) {
  auto seconds = [&](const char* name, double& out) {
    if (!a.has(name)) return;
    const std::string& t = a.value(name);
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0' || !(v > 0.0) || !(v <= 1e6))
      throw usage_error("--" + std::string(name) + ": expected seconds (a number > 0), got '" + t +
                        "'");
    out = v;
  };
  seconds("timeout", lim.timeout_seconds);
  seconds("io-timeout", lim.network.io_timeout_seconds);
  if (a.has("retries"))
    lim.network.retries = static_cast<int>(parse_uint_flag("retries", a.value("retries"), 0, 100));
}

}  // namespace vbucket::cli
