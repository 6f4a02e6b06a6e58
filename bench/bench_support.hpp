#pragma once
/// Helpers shared by the benchmarks: the path of a file in tests/data, the process's resident
/// memory (current and peak) from /proc on Linux, and the memory-bandwidth limit of a pass over
/// a metadata table (`stream_rows`), which the benchmarks time beside their own work so that
/// the distance to the limit is printed, not guessed.

#include <chrono>      // std::chrono::steady_clock
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint32_t
#include <cstdio>      // std::FILE, std::fopen, std::fgets
#include <cstdlib>     // std::strtol
#include <cstring>     // std::strlen, std::strncmp
#include <ctime>       // clock_gettime (thread CPU time)
#include <filesystem>  // std::filesystem::path (locating tests/data)
#include <span>        // std::span
#include <string>      // std::string

#include "vbucket/bucket/meta.hpp"  // meta_table

namespace vbucket::bench {

/// tests/data, from VBUCKET_BENCH_DATA_DIR when the build defines it, else next to this file.
inline std::string data_path(const char* file) {
#ifdef VBUCKET_BENCH_DATA_DIR
  const std::filesystem::path dir = VBUCKET_BENCH_DATA_DIR;
#else
  const std::filesystem::path dir =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data";
#endif
  return (dir / file).string();
}

/// A field of /proc/self/status in kB ("VmRSS", "VmHWM"); -1 when unavailable.
inline long proc_status_kb(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  const std::size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      kb = std::strtol(line + len + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

/// Resets the peak RSS (VmHWM) to the current RSS (Linux ≥ 4.0); false when not possible.
inline bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

/// The least work a pass over `table` that writes one id a row can do: its four 32-bit columns
/// read and out[i] written from row i, streaming (the compiler vectorises it). Its time per row
/// is the memory-bandwidth limit of the bucket rule on the same table; the bytes it moves are
/// `stream_bytes(table, out)`. Precondition: out.size() == table.size().
template <class Id>
void stream_rows(const vbucket::meta_table& table, std::span<Id> out) {
  const std::uint32_t* const f = table.num_frames_data();
  const std::uint32_t* const h = table.height_data();
  const std::uint32_t* const w = table.width_data();
  const std::uint32_t* const c = table.fps_code_data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<Id>(f[i] ^ h[i] ^ w[i] ^ c[i]);
}
/// The bytes a pass reads and writes per row: a table row and an id.
template <class Id>
constexpr double stream_bytes_per_row() {
  return static_cast<double>(vbucket::meta_table::row_bytes + sizeof(Id));
}

/// Seconds of CPU time of the calling thread (what Google Benchmark's CPU time counts), or of
/// the steady clock where there is no thread clock.
inline double thread_seconds() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}
/// Seconds of the steady clock (wall time, for benchmarks that use real time).
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace vbucket::bench
