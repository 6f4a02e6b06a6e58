/// Benchmarks of the audit (`audit.hpp`) against a plain read of the same ledger files:
///
///  - `audit/fread`: the files read in 1 MiB blocks, nothing else (the I/O and memory-bandwidth
///    floor of any reader of these bytes);
///  - `audit/lines`: `ledger_reader` splitting them into lines;
///  - `audit/parse`: lines parsed into records (`parse_ledger_line`), no check;
///  - `audit/all`: `audit_ledgers`, one source drawn whole (a bit per sample);
///  - `audit/listed`: `audit_ledgers`, the same batches with the source's draws listed (`D`
///    lines, a signed count and a drawn bit per sample);
///  - `audit/binary`, `audit/binary_listed`: the same two logs in the binary format (version 2).
///
/// The log: one epoch of N samples (env VBUCKET_BENCH_AUDIT_N, default 2·10^7) in a random
/// order, batches of Open-Sora 2.0's per-bucket sizes (45, 12, 12, 6, 4, 3, 13, 2, 1, 1, 7 in
/// turn), the last batch padded, dealt round robin to 8 ranks (8 files, written once per process
/// to $TMPDIR). Counters: `ids_per_s` (sample ids of all record kinds / s), `MB_per_s` (file
/// bytes / s), `memory_MB` (the audit's per-id tables), `bytes_per_sample` (the files' bytes
/// per delivered sample) and `peak_rss_MB` (the process's peak resident memory so far, the
/// log's making included). One core.
///
///     ./build-rel/bench/vbucket_bench --benchmark_filter='audit/'

#include <benchmark/benchmark.h>

#include <algorithm>   // std::min
#include <cstdint>     // std::uint64_t
#include <cstdio>      // std::FILE, std::fopen, std::fwrite, std::fread
#include <cstdlib>     // std::getenv, std::strtoull
#include <filesystem>  // std::filesystem
#include <memory>      // std::unique_ptr
#include <random>      // std::mt19937_64
#include <string>      // std::string
#include <vector>      // std::vector

#include <sys/resource.h>  // getrusage (peak resident memory)

#include "vbucket/run/audit.hpp"
#include "vbucket/run/ledger.hpp"

namespace {

/// One log in one format: its files, the sample ids and bytes they hold.
struct log_files {
  std::vector<std::string> paths;
  std::uint64_t ids = 0;
  std::uint64_t bytes = 0;
};
struct audit_log {
  log_files all;     // draw=all, text
  log_files listed;  // draw=listed (+ D lines in rank 0's file), text
  log_files binary_all;
  log_files binary_listed;
  std::uint64_t samples = 0;
};

void write_file(const std::string& path, const std::string& text) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(text.data(), 1, text.size(), f.get()) != text.size())
    throw vbucket::error("bench: cannot write " + path);
}

const audit_log& the_log() {
  static const audit_log log = [] {
    audit_log out;
    const char* env = std::getenv("VBUCKET_BENCH_AUDIT_N");
    const std::uint64_t n = env != nullptr ? std::strtoull(env, nullptr, 10) : 20'000'000;
    out.samples = n;
    std::vector<std::uint32_t> order(n);
    for (std::uint64_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::mt19937_64 g(42);
    for (std::uint64_t i = n - 1; i > 0; --i) std::swap(order[i], order[g() % (i + 1)]);

    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("vbucket_bench_audit_" + std::to_string(n));
    std::filesystem::create_directories(dir);
    constexpr std::uint32_t world = 8;
    constexpr std::uint64_t sizes[] = {45, 12, 12, 6, 4, 3, 13, 2, 1, 1, 7};
    for (const int kind : {0, 1, 2, 3}) {
      const bool listed = kind % 2 == 1, binary = kind >= 2;
      std::vector<std::string> text(
          world, std::string(binary ? vbucket::ledger_magic_v2 : vbucket::ledger_magic) + "\n");
      const auto append = [&](std::string& into, const auto& record) {
        if (binary) {
          vbucket::append_ledger_record(into, record);
        } else {
          vbucket::append_ledger_line(into, record);
        }
      };
      vbucket::ledger_epoch e{.epoch = 0, .stage = 0, .samples = n, .sources = 1};
      append(text[0], e);
      vbucket::ledger_source s;
      s.name = "web";
      s.rows = s.drawn = n;
      s.weight = 1.0;
      std::vector<std::uint64_t> all(n);
      for (std::uint64_t i = 0; i < n; ++i) all[i] = i;
      if (listed) {
        s.draw = vbucket::ledger_draw::listed;
        s.digest = vbucket::ledger_digest(all);
      }
      append(text[0], s);
      std::uint64_t ids = 0;
      if (listed) {
        vbucket::ledger_ids d{.tag = 'D', .epoch = 0, .source = 0};
        for (std::uint64_t i = 0; i < n; i += vbucket::ledger_chunk_ids) {
          d.at = i;
          d.ids.assign(all.begin() + static_cast<std::ptrdiff_t>(i),
                       all.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(
                                         n, i + vbucket::ledger_chunk_ids)));
          append(text[0], d);
        }
        ids += n;
      }
      vbucket::ledger_batch b;
      std::uint64_t p = 0, at = 0;
      for (std::size_t k = 0; at < n; ++k, ++p) {
        const std::uint64_t size = sizes[k % std::size(sizes)];
        b.ids.clear();
        for (std::uint64_t i = 0; i < size; ++i) b.ids.push_back(order[(at + i) % n]);
        b.pads = at + size > n ? static_cast<std::uint32_t>(at + size - n) : 0;
        at += size;
        b.epoch = 0;
        b.step = p / world;
        b.rank = static_cast<std::uint32_t>(p % world);
        b.world = world;
        b.position = p;
        b.bucket = static_cast<std::int64_t>(k % std::size(sizes));
        append(text[b.rank], b);
        ids += size;
      }
      log_files& files = kind == 0   ? out.all
                         : kind == 1 ? out.listed
                         : kind == 2 ? out.binary_all
                                     : out.binary_listed;
      for (std::uint32_t r = 0; r < world; ++r) {
        files.paths.push_back(
            (dir / (std::to_string(kind) + "-" + vbucket::ledger_file_name(r))).string());
        write_file(files.paths.back(), text[r]);
        files.bytes += text[r].size();
      }
      files.ids = ids;
    }
    return out;
  }();
  return log;
}

void counters(benchmark::State& state, std::uint64_t ids, std::uint64_t bytes) {
  const double iterations = static_cast<double>(state.iterations());
  state.counters["ids_per_s"] =
      benchmark::Counter(static_cast<double>(ids) * iterations, benchmark::Counter::kIsRate);
  state.counters["MB_per_s"] = benchmark::Counter(static_cast<double>(bytes) * iterations / 1e6,
                                                  benchmark::Counter::kIsRate);
}

void bm_fread(benchmark::State& state) {
  const audit_log& log = the_log();
  std::vector<char> buf(std::size_t{1} << 20);
  for (auto _ : state) {
    std::uint64_t total = 0;
    for (const std::string& path : log.all.paths) {
      std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"),
                                                        &std::fclose);
      std::size_t got = 0;
      while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) != 0) {
        total += got;
        benchmark::DoNotOptimize(buf.data());
      }
    }
    benchmark::DoNotOptimize(total);
  }
  counters(state, log.all.ids, log.all.bytes);
}

void bm_lines(benchmark::State& state) {
  const audit_log& log = the_log();
  for (auto _ : state) {
    std::uint64_t lines = 0;
    for (const std::string& path : log.all.paths) {
      vbucket::ledger_reader r(path);
      vbucket::ledger_line l;
      while (r.next(l)) ++lines;
    }
    benchmark::DoNotOptimize(lines);
  }
  counters(state, log.all.ids, log.all.bytes);
}

void bm_parse(benchmark::State& state) {
  const audit_log& log = the_log();
  vbucket::ledger_batch b;
  for (auto _ : state) {
    std::uint64_t ids = 0;
    for (const std::string& path : log.all.paths) {
      vbucket::ledger_reader r(path);
      vbucket::ledger_line l;
      while (r.next(l)) {
        if (l.tag != 'B') continue;
        vbucket::parse_ledger_line(l.text, path, b);
        ids += b.ids.size();
      }
    }
    benchmark::DoNotOptimize(ids);
  }
  counters(state, log.all.ids, log.all.bytes);
}

void bm_audit(benchmark::State& state, int kind) {
  const audit_log& log = the_log();
  const log_files& files = kind == 0   ? log.all
                           : kind == 1 ? log.listed
                           : kind == 2 ? log.binary_all
                                       : log.binary_listed;
  std::uint64_t memory = 0;
  for (auto _ : state) {
    const vbucket::audit_report r = vbucket::audit_ledgers(files.paths);
    if (!r.clean()) {
      state.SkipWithError("the benchmark's log does not audit clean");
      return;
    }
    memory = r.epochs.front().memory_bytes;
  }
  counters(state, files.ids, files.bytes);
  state.counters["memory_MB"] = static_cast<double>(memory) / 1e6;
  state.counters["samples"] = static_cast<double>(log.samples);
  state.counters["bytes_per_sample"] =
      static_cast<double>(files.bytes) / static_cast<double>(log.samples);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_MB"] = static_cast<double>(u.ru_maxrss) / 1e3;  // KiB on Linux
}

}  // namespace

BENCHMARK(bm_fread)->Name("audit/fread")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_lines)->Name("audit/lines")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_parse)->Name("audit/parse")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_audit, all, 0)
    ->Name("audit/all")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_audit, listed, 1)
    ->Name("audit/listed")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_audit, binary, 2)
    ->Name("audit/binary")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_audit, binary_listed, 3)
    ->Name("audit/binary_listed")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
