#pragma once
/// What a loader did: its substitutions (a failed clip and what replaced it) and its
/// per-stage figures (`loader_stats`), with a printer for the end of an epoch.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t, std::uint64_t
#include <string>   // std::string

#include "vbucket/detail/compiled.hpp"

#if VBUCKET_HEADER_DEFINITIONS
#include <cstdio>  // std::snprintf
#endif

namespace vbucket {

/// A failed clip and what replaced it.
struct substitution {
  std::uint64_t position = 0;  ///< global position of the batch
  std::size_t clip = 0;        ///< index within the batch
  std::uint32_t failed = 0;    ///< the sample that failed
  std::uint32_t replacement = 0;
  std::string error;  ///< the decoder's message for `failed`
};

/// Per-stage figures of a loader, for logs and the end-of-epoch table.
struct loader_stats {
  std::uint64_t batches = 0;         ///< handed to the trainer
  std::uint64_t samples = 0;         ///< clips in those batches
  std::uint64_t repeat_batches = 0;  ///< of which rank-alignment repeats
  std::uint64_t decoded = 0;         ///< clips decoded (including failures and replacements)
  std::uint64_t failed = 0;          ///< decode attempts that failed
  std::uint64_t substitutions = 0;   ///< clips filled by a replacement sample
  std::uint64_t stalls = 0;          ///< outages: the source unreachable, the workers waiting
  std::uint64_t unavailable = 0;     ///< attempts that failed for an outage (tried again)
  double stall_seconds = 0;          ///< from each outage's first failure to its end
  double decode_seconds = 0;         ///< summed over workers
  double convert_seconds = 0;        ///< clip conversion (dtype, layout), summed over workers
  double slot_wait_seconds = 0;      ///< waiting for a staging slot (back-pressure)
  double trainer_wait_seconds = 0;   ///< the trainer blocked in `next()`
  double elapsed_seconds = 0;        ///< since construction
  std::size_t max_ready = 0;         ///< most batches ready ahead of the trainer
  double mean_ready = 0;             ///< batches ready when the trainer asked, on average

  [[nodiscard]] double samples_per_second() const noexcept {
    return elapsed_seconds > 0 ? static_cast<double>(samples) / elapsed_seconds : 0.0;
  }
};

/// The stats as a small table (one line per figure), for the end of an epoch.
VBUCKET_COMPILED_INLINE std::string format_loader_stats(const loader_stats& s);

#if VBUCKET_HEADER_DEFINITIONS
VBUCKET_COMPILED_INLINE std::string format_loader_stats(const loader_stats& s) {
  std::string out;
  char line[160];
  const auto row = [&](const char* name, double value, const char* unit) {
    std::snprintf(line, sizeof line, "  %-26s %14.3f %s\n", name, value, unit);
    out += line;
  };
  out += "loader\n";
  row("batches", static_cast<double>(s.batches), "");
  row("samples", static_cast<double>(s.samples), "");
  row("repeat batches", static_cast<double>(s.repeat_batches), "");
  row("clips decoded", static_cast<double>(s.decoded), "");
  row("decode failures", static_cast<double>(s.failed), "");
  row("substitutions", static_cast<double>(s.substitutions), "");
  row("stalls (source unreachable)", static_cast<double>(s.stalls), "");
  row("attempts in a stall", static_cast<double>(s.unavailable), "");
  row("stalled", s.stall_seconds, "s");
  row("decode (all workers)", s.decode_seconds, "s");
  row("convert (all workers)", s.convert_seconds, "s");
  row("wait for a slot", s.slot_wait_seconds, "s");
  row("trainer waited", s.trainer_wait_seconds, "s");
  row("elapsed", s.elapsed_seconds, "s");
  row("batches ready (max)", static_cast<double>(s.max_ready), "");
  row("batches ready (mean)", s.mean_ready, "");
  row("throughput", s.samples_per_second(), "samples/s");
  return out;
}
#endif  // VBUCKET_HEADER_DEFINITIONS

}  // namespace vbucket
