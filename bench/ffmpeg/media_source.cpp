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

#include <arpa/inet.h>   // htonl
#include <netinet/in.h>  // sockaddr_in
#include <signal.h>      // kill
#include <sys/socket.h>  // socket
#include <sys/wait.h>    // waitpid
#include <unistd.h>      // fork, execv

#include <chrono>      // std::chrono::milliseconds
#include <cstdint>     // std::int64_t, std::uint8_t
#include <cstdlib>     // std::getenv
#include <cstring>     // std::memcpy
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream, std::ofstream
#include <iterator>    // std::istreambuf_iterator
#include <string>      // std::string
#include <thread>      // std::this_thread::sleep_for
#include <vector>      // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/tar.hpp"

namespace {

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

/// A tar header for a regular file (ustar).
std::string tar_header(const std::string& name, std::size_t size) {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<std::size_t>(name.size(), 99));
  std::snprintf(h + 100, 8, "%07o", 0644U);
  std::snprintf(h + 108, 8, "%07o", 0U);
  std::snprintf(h + 116, 8, "%07o", 0U);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));
  std::snprintf(h + 136, 12, "%011o", 0U);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(h + 148, 8, "%06o", sum);
  return std::string(h, 512);
}

bool accepts(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

/// The served copies of one video: a shard and an nginx (when installed), made once.
struct sources {
  std::string file, member, url, url_member, error;
  fs::path dir;
  pid_t nginx = -1;

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
    std::string tar = tar_header("k0.txt", 9) + "a caption" + std::string(503, '\0');
    const std::int64_t offset = static_cast<std::int64_t>(tar.size()) + 512;
    tar += tar_header("k0.mp4", bytes.size()) + bytes;
    tar.append((512 - bytes.size() % 512) % 512, '\0');
    tar.append(1024, '\0');
    std::ofstream((dir / "s.tar").string(), std::ios::binary)
        .write(tar.data(), static_cast<std::streamsize>(tar.size()));
    const ff::tar_member m{"k0.mp4", offset - 512, offset, static_cast<std::int64_t>(bytes.size())};
    member = ff::member_path((dir / "s.tar").string(), m);
    start_nginx(name, m);
  }
  ~sources() {
    if (nginx > 0) {
      ::kill(nginx, SIGTERM);
      ::waitpid(nginx, nullptr, 0);
    }
    if (!dir.empty()) fs::remove_all(dir);
  }

  void start_nginx(const std::string& name, const ff::tar_member& m) {
    std::string binary;
    for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"})
      if (::access(p, X_OK) == 0) binary = p;
    if (binary.empty()) return;
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    const int port = ntohs(a.sin_port);
    const std::string p = dir.string(), conf = (dir / "nginx.conf").string();
    fs::create_directories(dir / "logs");
    std::ofstream c(conf);
    c << "daemon off;\nmaster_process off;\npid " << p << "/nginx.pid;\nerror_log " << p
      << "/logs/error.log;\n"
      << (::geteuid() == 0 ? "user root;\n" : "") << "events { worker_connections 64; }\n"
      << "http {\n  access_log off;\n";
    for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
      c << "  " << t << "_temp_path " << p << "/" << t << ";\n";
    c << "  server { listen 127.0.0.1:" << port << "; root " << p << "; }\n}\n";
    c.close();
    nginx = ::fork();
    if (nginx == 0) {
      const char* argv[] = {binary.c_str(), "-p", p.c_str(), "-c", conf.c_str(), nullptr};
      ::execv(binary.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !accepts(port); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/";
    url = base + name;
    url_member = ff::member_path(base + "s.tar", m);
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
    state.SkipWithError("nginx not found (Debian: nginx): no HTTP benchmark");
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
