/// Tests of vbucket/ffmpeg/media_source.hpp against a real server: nginx (started here on a free
/// port of 127.0.0.1, as the current user, from a generated nginx.conf in a temporary prefix)
/// serves the test media and a tar shard with range support; faults come from nginx itself
/// (limit_rate, `return 503`, missing files, a file cut short, the server stopped and started
/// again). Every clip decodes with the local file's bytes or fails with its URL named, within
/// its deadline. Skipped, with a message, where nginx is not installed (Debian: nginx).
#include "vbucket/ffmpeg/media_source.hpp"

#include <doctest/doctest.h>

#include <unistd.h>  // getpid

#include <chrono>      // std::chrono::steady_clock
#include <cstdint>     // std::uint8_t
#include <cstdlib>     // std::getenv
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <optional>    // std::optional
#include <string>      // std::string
#include <thread>      // std::this_thread::sleep_for
#include <vector>      // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/probe.hpp"
#include "vbucket/ffmpeg/sources.hpp"

#include "vbucket_test/ffmpeg_media.hpp"
#include "vbucket_test/nginx_server.hpp"
#include "vbucket_test/tar_writer.hpp"

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

namespace {
using namespace vbucket_test;  // ffmpeg_media.hpp, nginx_server.hpp, tar_writer.hpp

std::string slurp(const std::string& path) {
  const auto v = read_file(path);
  return std::string(v.begin(), v.end());
}

const std::string mp4 = "h264_160x120_25fps.mp4";
const std::string mkv = "h264_176x144_60fps.mkv";

/// The served tree: two clips, a shard holding them, a copy of the MP4 cut in half.
struct served {
  fs::path root;
  std::vector<ff::tar_member> members;
  std::unique_ptr<nginx_server> server;

  explicit served(const std::string& binary)
      : root(fs::temp_directory_path() / ("vbucket_http_test_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root);
    fs::copy_file(media(mp4), root / mp4);
    fs::copy_file(media(mkv), root / mkv);
    tar_writer w;
    w.add("k0.mp4", slurp(media(mp4)));
    w.add("k0.txt", "a caption");
    w.add("k1.mkv", slurp(media(mkv)));
    w.end();
    w.save((root / "s.tar").string());
    members = ff::list_tar_file((root / "s.tar").string());
    const std::string bytes = slurp(media(mp4));
    std::ofstream((root / "cut.mp4").string(), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    server = std::make_unique<nginx_server>(
        binary, root,
        "    location /slow/ { alias " + root.string() +
            "/; limit_rate 2k; limit_rate_after 1k; }\n    location /e503/ { return 503; }\n");
  }
  ~served() {
    server.reset();
    fs::remove_all(root);
  }
  [[nodiscard]] std::string member(std::size_t i) const {
    return ff::member_path(server->url("s.tar"), members[i]);
  }
};

ff::clip_request quick(double timeout = 20.0) {
  auto r = request(2, 4, 3, 48, 64);
  r.limits.timeout_seconds = timeout;
  r.limits.network.io_timeout_seconds = 2.0;
  r.limits.network.retry_backoff_seconds = 0.05;
  return r;
}

ff::result<ff::clip_info> decode(const std::string& path, const ff::clip_request& req,
                                 std::vector<std::uint8_t>& out) {
  out.assign(ff::clip_bytes(req), 0);
  return ff::decode_clip(path, req, out);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

#define VBUCKET_NEED_NGINX(binary)                                                          \
  const auto binary = find_nginx();                                                         \
  if (!binary) {                                                                            \
    MESSAGE("nginx not found (Debian: apt-get install nginx): the HTTP tests are skipped"); \
    return;                                                                                 \
  }
}  // namespace

TEST_CASE("http: files and tar members over HTTP decode with the local file's bytes") {
  VBUCKET_NEED_NGINX(binary);
  served s(*binary);
  const auto req = quick();
  std::vector<std::uint8_t> local, remote;
  REQUIRE(decode(media(mp4), req, local));
  for (const std::string& url :
       {s.server->url(mp4), s.member(0), s.server->url("s.tar") + "#k0.mp4"}) {
    CAPTURE(url);
    const auto r = decode(url, req, remote);
    REQUIRE_MESSAGE(r, (r ? "" : r.error()));
    CHECK(remote == local);
    const auto a = ff::probe(media(mp4)), b = ff::probe(url);
    REQUIRE_MESSAGE(b, (b ? "" : b.error()));
    CHECK(a->num_frames == b->num_frames);
    CHECK(a->height == b->height);
  }
  REQUIRE(decode(media(mkv), req, local));
  for (const std::string& url : {s.server->url(mkv), s.member(2)}) {
    CAPTURE(url);
    const auto r = decode(url, req, remote);
    REQUIRE_MESSAGE(r, (r ? "" : r.error()));
    CHECK(remote == local);
  }
  // A scan over the shard's URL lists its members and their sidecars.
  const auto l = ff::list_sources(s.server->url("s.tar"));
  REQUIRE(l.paths.size() == 2);
  CHECK(l.paths[0] == s.member(0));
  CHECK(l.paths[1] == s.member(2));
  REQUIRE(l.field_names == std::vector<std::string>{"txt"});
  CHECK(l.fields[0][0] == "a caption");
}

TEST_CASE("http: 404, 503, a refused connection and a stall fail with the URL named, in time") {
  VBUCKET_NEED_NGINX(binary);
  served s(*binary);
  std::vector<std::uint8_t> out;
  struct fault {
    std::string url, what;
    double seconds;  // at most
  };
  const fault faults[] = {
      {s.server->url("none.mp4"), "404 Not Found", 1.0},  // not retried
      {s.server->url("e503/" + mp4), "5XX Server Error reply (3 attempts)", 2.0},
      {"http://127.0.0.1:1/" + mp4, "Connection refused (3 attempts)", 2.0},
      {ff::member_path(s.server->url("none.tar"), s.members[0]), "404 Not Found", 1.0},
  };
  for (const fault& f : faults) {
    CAPTURE(f.url);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = decode(f.url, quick(), out);
    REQUIRE(!r);
    CHECK_MESSAGE(r.error().find(f.url + ": ") == 0, r.error());
    CHECK_MESSAGE(r.error().find(f.what) != std::string::npos, r.error());
    CHECK(seconds_since(t0) < f.seconds);
  }
  // 2 kB/s: the clip's deadline (1 s) ends it, with no hang beyond it.
  for (const std::string& url :
       {s.server->url("slow/" + mp4), s.server->url("slow/s.tar") + "#k1.mkv"}) {
    CAPTURE(url);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = decode(url, quick(1.0), out);
    const double took = seconds_since(t0);
    REQUIRE(!r);
    CHECK_MESSAGE(r.error().find(url + ": ") == 0, r.error());
    CHECK_MESSAGE(r.error().find("timed out") != std::string::npos, r.error());
    CHECK(took < 2.5);
  }
  // A file cut short: a clip past the cut fails, naming the URL; the probe says what it counts.
  auto late = quick();
  late.start = 40;
  late.frames = 5;
  late.interval = 1;
  const auto r = decode(s.server->url("cut.mp4"), late, out);
  REQUIRE(!r);
  CHECK_MESSAGE(r.error().find(s.server->url("cut.mp4") + ": ") == 0, r.error());
}

TEST_CASE(
    "http: a server stopped mid-run: every clip decodes or fails naming its URL, none hangs") {
  VBUCKET_NEED_NGINX(binary);
  served s(*binary);
  const auto req = quick(5.0);
  std::vector<std::uint8_t> local, out;
  REQUIRE(decode(media(mp4), req, local));
  const std::vector<std::string> clips = {s.server->url(mp4), s.member(0),
                                          s.server->url("s.tar") + "#k0.mp4"};
  std::size_t good = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < 4; ++round) {
    if (round == 1) s.server->stop();   // rounds 1 and 2: no server
    if (round == 3) s.server->start();  // round 3: back
    for (const std::string& url : clips) {
      const auto r = decode(url, req, out);
      if (r) {
        ++good;
        CHECK(out == local);
      } else {
        ++failed;
        CHECK_MESSAGE(r.error().find(url + ": ") == 0, r.error());
        CHECK_MESSAGE(r.error().find("Connection refused") != std::string::npos, r.error());
      }
    }
  }
  CHECK(good == 6);
  CHECK(failed == 6);
  CHECK(seconds_since(t0) < 10.0);
}
