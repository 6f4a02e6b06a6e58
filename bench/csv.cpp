/// Benchmark of the metadata CSV reader on a caption-heavy file, the kind a captioning pipeline
/// writes (path, sizes, fps and a long quoted caption with commas, doubled quotes and the odd
/// line break: about 380 bytes per row):
///  - `csv/read`: `load_meta_csv` of a 64 MiB file in the page cache, in MB/s of file
///    (`bytes_per_second`). Counters `rows` and, on Linux, `peak_extra_pct`: the peak RSS
///    during the reads above the RSS before them, in % of the file's size (the reader's
///    memory: its buffer and the table).
///
///     ./vbucket_bench --benchmark_filter=csv/ --benchmark_repetitions=5
///         --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t, std::int64_t
#include <cstdio>      // std::snprintf, std::fopen, std::fgets
#include <cstdlib>     // std::strtol
#include <cstring>     // std::strlen, std::strncmp
#include <filesystem>  // std::filesystem (the temporary file)
#include <fstream>     // std::ofstream
#include <string>      // std::string

#include "bench_support.hpp"
#include "vbucket/bucket/csv.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // getpid (a file name no concurrent run shares)
#endif

namespace {

using vbucket::bench::proc_status_kb;
using vbucket::bench::reset_peak_rss;

/// SplitMix64: deterministic filler without <random> distributions.
std::uint64_t next_random(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A generated caption CSV of at least `bytes` bytes in the temporary directory, removed when
/// the program ends.
class caption_csv {
 public:
  explicit caption_csv(std::size_t bytes) {
#if defined(__unix__) || defined(__APPLE__)
    const std::string tag = std::to_string(static_cast<long>(getpid()));
#else
    const std::string tag = "0";
#endif
    path_ =
        (std::filesystem::temp_directory_path() / ("vbucket_bench_csv_" + tag + ".csv")).string();
    static constexpr const char* words[] = {
        "a",      "the",   "camera", "slowly", "pans",     "across", "sunlit",      "city",
        "street", "woman", "walks",  "her",    "dog,",     "while",  "people",      "chat",
        "nearby", "in",    "soft",   "light;", "close-up", "of",     "\"vintage\"", "car"};
    constexpr std::size_t num_words = sizeof(words) / sizeof(words[0]);
    static constexpr const char* sizes[] = {"1080,1920", "720,1280",  "480,854",
                                            "360,640",   "1920,1080", "2160,3840"};
    static constexpr const char* rates[] = {"23.976", "24.0", "25", "29.97", "30.0", "60", ""};
    std::ofstream out(path_, std::ios::binary);
    out << "path,num_frames,height,width,fps,aesthetic_score,text\n";
    std::uint64_t state = 42;
    std::string row, caption;
    for (std::uint64_t i = 0; bytes_ < bytes; ++i) {
      const std::uint64_t r = next_random(state);
      caption.clear();
      const std::size_t length = 250 + (r % 200);  // 250 to 450 characters
      while (caption.size() < length) {
        const std::uint64_t w = next_random(state);
        if (!caption.empty()) caption += (w % 97 == 0) ? "\n" : " ";  // the odd line break
        const char* word = words[w % num_words];
        for (const char* c = word; *c != '\0'; ++c) {
          caption.push_back(*c);
          if (*c == '"') caption.push_back('"');  // doubled inside the quoted field
        }
      }
      char head[160];
      std::snprintf(head, sizeof head, "videos/%06llu/clip_%010llu.mp4,%llu,%s,%s,%.4f,",
                    static_cast<unsigned long long>(i / 1000), static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(1 + (r >> 8) % 1800), sizes[(r >> 20) % 6],
                    rates[(r >> 24) % 7], 4.0 + static_cast<double>((r >> 32) % 3000) / 1000.0);
      row = head;
      row += '"';
      row += caption;
      row += "\"\n";
      out << row;
      bytes_ += row.size();
      ++rows_;
    }
  }
  ~caption_csv() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  caption_csv(const caption_csv&) = delete;
  caption_csv& operator=(const caption_csv&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::uint64_t rows() const noexcept { return rows_; }

 private:
  std::string path_;
  std::size_t bytes_ = 0;
  std::uint64_t rows_ = 0;
};

void csv_read(benchmark::State& state) {
  static const caption_csv file(std::size_t{64} << 20);
  std::size_t rows = 0;
  const long rss_before = proc_status_kb("VmRSS");
  const bool peak_reset = reset_peak_rss();
  for (auto _ : state) {
    const vbucket::meta_table table = vbucket::load_meta_csv(file.path());
    rows = table.size();
    benchmark::DoNotOptimize(table.num_frames_data());
  }
  if (rows != file.rows()) state.SkipWithError("the reader returned a wrong row count");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(file.bytes()));
  state.counters["rows"] = static_cast<double>(rows);
  const long rss_peak = peak_reset ? proc_status_kb("VmHWM") : -1;
  if (rss_before >= 0 && rss_peak >= 0)
    state.counters["peak_extra_pct"] = 100.0 * 1024.0 * static_cast<double>(rss_peak - rss_before) /
                                       static_cast<double>(file.bytes());
}

[[maybe_unused]] const bool registered = [] {
  benchmark::RegisterBenchmark("csv/read", csv_read)->Unit(benchmark::kMillisecond)->UseRealTime();
  return true;
}();

}  // namespace
