#pragma once
/// Helpers shared by the benchmarks: the path of a file in tests/data, and the process's
/// resident memory (current and peak) from /proc on Linux.

#include <cstddef>     // std::size_t
#include <cstdio>      // std::FILE, std::fopen, std::fgets
#include <cstdlib>     // std::strtol
#include <cstring>     // std::strlen, std::strncmp
#include <filesystem>  // std::filesystem::path (locating tests/data)
#include <string>      // std::string

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

}  // namespace vbucket::bench
