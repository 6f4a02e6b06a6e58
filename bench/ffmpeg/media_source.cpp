/// Benchmarks of where a clip's bytes come from (vbucket::ffmpeg media_source.hpp): the same
/// clip as `decode/clip` (33 frames from frame 90 at interval 2, 192x336, one thread) of
/// $VBUCKET_BENCH_VIDEO_DIR/h264_<H>p_10s.mp4 (scripts/bench_decode.sh makes it), decoded
///  - `decode/file/<H>p`: from the plain file;
///  - `decode/tar/<H>p`: from a member of a tar shard holding it (with a caption before it),
///    read in place (pread through an AVIOContext over the member's bytes);
///  - `decode/http/<H>p`: from a loopback nginx serving the file (ranged HTTP);
///  - `decode/http_tar/<H>p`: the shard's member over the same nginx (one range request).
/// The shard and the nginx (a generated nginx.conf in a temporary prefix, a free port; skipped
/// without nginx) are made once per run, so the ratios come from one run:
///
///     VBUCKET_BENCH_VIDEO_DIR=build-bench-media ./vbucket_bench
///       --benchmark_filter='decode/(file|tar|http|http_tar)/' --benchmark_repetitions=10
///       --benchmark_report_aggregates_only=true  (one command line)

#include <benchmark/benchmark.h>

#include <unistd.h>  // getpid

#include <cstdint>     // std::int64_t, std::uint8_t
#include <cstdlib>     // std::getenv
#include <exception>   // std::exception
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream, std::ofstream
#include <iterator>    // std::istreambuf_iterator
#include <memory>      // std::unique_ptr
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/tar.hpp"
#include "vbucket_test/nginx_server.hpp"
#include "vbucket_test/tar_writer.hpp"

namespace {

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

/// The served copies of one video: a shard and an nginx (when installed), made once.
struct sources {
  std::string file, member, url, url_member, error, http_error;
  fs::path dir;
  std::unique_ptr<vbucket_test::nginx_server> server;

  explicit sources(std::int64_t height) {
    const char* media = std::getenv("VBUCKET_BENCH_VIDEO_DIR");
    const std::string name = "h264_" + std::to_string(height) + "p_10s.mp4";
    if (media == nullptr || !fs::exists(fs::path(media) / name)) {
      error = "set VBUCKET_BENCH_VIDEO_DIR to the clips of scripts/bench_decode.sh";
      return;
    }
    file = (fs::path(media) / name).string();
    dir = fs::temp_directory_path() /
          ("vbucket_bench_media_" + std::to_string(::getpid()) + "_" + std::to_string(height));
    fs::create_directories(dir);
    fs::copy_file(file, dir / name, fs::copy_options::overwrite_existing);
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    vbucket_test::tar_writer w;
    w.add("k0.txt", "a caption");
    const auto offset = static_cast<std::int64_t>(w.bytes.size()) + 512;
    w.add("k0.mp4", bytes);
    w.end();
    w.save((dir / "s.tar").string());
    const ff::tar_member m{"k0.mp4", offset - 512, offset, static_cast<std::int64_t>(bytes.size())};
    member = ff::member_path((dir / "s.tar").string(), m);
    start_nginx(name, m);
  }
  ~sources() {
    server.reset();
    if (!dir.empty()) fs::remove_all(dir);
  }

  void start_nginx(const std::string& name, const ff::tar_member& m) {
    const auto binary = vbucket_test::find_nginx();
    if (!binary) return;
    try {
      server = std::make_unique<vbucket_test::nginx_server>(*binary, dir);
    } catch (const std::exception& e) {  // the HTTP benchmarks skip, naming why
      http_error = e.what();
      return;
    }
    url = server->url(name);
    url_member = ff::member_path(server->url("s.tar"), m);
  }
};

sources& served(std::int64_t height) {
  static sources s720(720), s1080(1080);
  return height == 720 ? s720 : s1080;
}

enum class where { file, tar, http, http_tar };

void BM_decode_from(benchmark::State& state, where w) {
  const std::int64_t height = state.range(0);
  const sources& s = served(height);
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  const std::string& path = w == where::file   ? s.file
                            : w == where::tar  ? s.member
                            : w == where::http ? s.url
                                               : s.url_member;
  if (path.empty()) {
    state.SkipWithError(s.http_error.empty() ? "nginx not found (Debian: nginx): no HTTP benchmark"
                                             : s.http_error.c_str());
    return;
  }
  ff::clip_request req;
  req.start = 90;
  req.frames = 33;
  req.interval = 2;
  req.height = 192;
  req.width = 336;
  req.threads = 1;
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  for (auto _ : state) {
    const auto r = ff::decode_clip(path, req, out);
    if (!r) {
      state.SkipWithError(r.error().c_str());
      return;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(path.substr(path.rfind('/') + 1));
}

// Interleaved per height, so that the four run under the same conditions.
BENCHMARK_CAPTURE(BM_decode_from, file, where::file)
    ->Name("decode/file")
    ->ArgName("p")
    ->Arg(720)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_decode_from, tar, where::tar)
    ->Name("decode/tar")
    ->ArgName("p")
    ->Arg(720)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_decode_from, http, where::http)
    ->Name("decode/http")
    ->ArgName("p")
    ->Arg(720)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_decode_from, http_tar, where::http_tar)
    ->Name("decode/http_tar")
    ->ArgName("p")
    ->Arg(720)
    ->Unit(benchmark::kMillisecond);

}  // namespace
