// vbucket::ffmpeg's compiled part: probing (probe.hpp) and the process-wide settings
// (limits.hpp), over the libav code of detail/probe_impl.hpp, compiled here once.
#include "vbucket/ffmpeg/probe.hpp"

#include <cstddef>  // std::size_t
#include <string>   // std::string

#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/detail/probe_impl.hpp"
#include "vbucket/ffmpeg/limits.hpp"
#include "vbucket/run/run_spec.hpp"  // limits_of

namespace vbucket::ffmpeg {

void quiet_logs() noexcept { av_log_set_level(AV_LOG_QUIET); }

void cap_allocations(std::size_t bytes) noexcept { av_max_alloc(bytes); }

limits limits_of(const run_spec& spec, limits base) {
  base.timeout_seconds = spec.timeout;
  base.network.io_timeout_seconds = spec.io_timeout;
  base.network.retries = static_cast<int>(spec.retries);
  return base;
}

/// Probes the file at `path`. Errors (missing, unreadable, not a video, corrupt, absurd sizes)
/// come back as an error value whose message names the file.
result<video_info> probe(const std::string& path, const probe_options& opt) noexcept {
  return detail::guarded<video_info>(path, [&] {
    return detail::probe_input(detail::source{path, {}, false}, opt);
  });
}

/// Probes a file held in memory; `name` is used in messages only.
result<video_info> probe_memory(std::span<const std::uint8_t> data, const std::string& name,
                                const probe_options& opt) noexcept {
  return detail::guarded<video_info>(name, [&] {
    return detail::probe_input(detail::source{name, data, true}, opt);
  });
}

}  // namespace vbucket::ffmpeg
