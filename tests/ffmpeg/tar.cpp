/// Tests of vbucket/ffmpeg/tar.hpp and sources.hpp: the tar reader (ustar, GNU long names, pax),
/// clip paths of members, members decoded in place with the same bytes as the plain file, and
/// bad shards and paths that fail with messages naming the shard, member and what is wrong; a
/// loader's clip per row from any source form (clip_paths) and limits from a run spec.
#include "vbucket/ffmpeg/tar.hpp"

#include <doctest/doctest.h>

#include <cstdint>     // std::uint8_t, std::int64_t
#include <cstdio>      // std::snprintf
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/probe.hpp"
#include "vbucket/ffmpeg/sources.hpp"
#include "vbucket/run/run_spec.hpp"  // limits_of

#include "vbucket_test/ffmpeg_media.hpp"
#include "vbucket_test/tar_writer.hpp"

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

namespace {
using namespace vbucket_test;  // ffmpeg_media.hpp, tar_writer.hpp

std::string slurp(const std::string& path) {
  const auto v = read_file(path);
  return std::string(v.begin(), v.end());
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("vbucket_tar_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::uint8_t> decode_bytes(const std::string& path, const ff::clip_request& req) {
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  const auto r = ff::decode_clip(path, req, out);
  REQUIRE_MESSAGE(r, (r ? "" : r.error()));
  return out;
}

const std::string mp4 = "h264_160x120_25fps.mp4";
const std::string mkv = "h264_176x144_60fps.mkv";

/// A scratch directory holding videos/a.mp4 and the shard s.tar of k0.mp4 and k1.mkv.
fs::path sources_dir(const std::string& name) {
  const fs::path dir = scratch(name);
  fs::create_directories(dir / "videos");
  fs::copy_file(media(mp4), dir / "videos" / "a.mp4");
  tar_writer w;
  w.add("k0.mp4", slurp(media(mp4)));
  w.add("k1.mkv", slurp(media(mkv)));
  w.end();
  w.save((dir / "s.tar").string());
  return dir;
}
}  // namespace

TEST_CASE("tar: members with short, GNU long and pax names, their offsets and sizes") {
  const std::string long_name = std::string(120, 'd') + "/k01.mp4";
  tar_writer w;
  w.directory("dir/");
  w.add("k00.txt", "a caption\n");
  w.add(long_name, std::string(700, 'x'));
  w.add(std::string(130, 'p') + ".json", "{}", tar_writer::long_names::pax);
  w.end();
  const auto read = [&](std::int64_t pos, std::span<std::uint8_t> out) -> std::int64_t {
    if (pos >= static_cast<std::int64_t>(w.bytes.size())) return 0;
    const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(out.size()),
                                          static_cast<std::int64_t>(w.bytes.size()) - pos);
    std::memcpy(out.data(), w.bytes.data() + pos, static_cast<std::size_t>(n));
    return n;
  };
  const auto m = ff::list_tar(read, static_cast<std::int64_t>(w.bytes.size()), "t.tar");
  REQUIRE(m.size() == 3);
  CHECK(m[0].name == "k00.txt");
  CHECK(m[0].offset == 1024);
  CHECK(m[0].size == 10);
  CHECK(m[1].name == long_name);
  CHECK(m[1].size == 700);
  CHECK(w.bytes.substr(static_cast<std::size_t>(m[1].offset), 700) == std::string(700, 'x'));
  CHECK(m[2].name == std::string(130, 'p') + ".json");
  CHECK(w.bytes.substr(static_cast<std::size_t>(m[2].offset), 2) == "{}");

  SUBCASE("a bad checksum names the byte") {
    std::string bad = w.bytes;
    bad[512 + 10] = 'Z';  // inside k00.txt's header
    const auto read_bad = [&](std::int64_t pos, std::span<std::uint8_t> out) -> std::int64_t {
      const auto n = std::min<std::int64_t>(static_cast<std::int64_t>(out.size()),
                                            static_cast<std::int64_t>(bad.size()) - pos);
      std::memcpy(out.data(), bad.data() + pos, static_cast<std::size_t>(n));
      return n;
    };
    CHECK_THROWS_WITH_AS(ff::list_tar(read_bad, static_cast<std::int64_t>(bad.size()), "t.tar"),
                         doctest::Contains("t.tar: corrupt tar at byte 512: bad header checksum"),
                         vbucket::error);
  }
  SUBCASE("a member cut short names the member and the sizes") {
    const std::int64_t cut = m[1].offset + 100;
    std::string what;
    try {
      (void)ff::list_tar(read, cut, "t.tar");
    } catch (const vbucket::error& e) {
      what = e.what();
    }
    CHECK_MESSAGE(what.find("t.tar: member " + long_name + " (700 bytes at byte " +
                            std::to_string(m[1].offset) + ") runs past the end of the archive") !=
                      std::string::npos,
                  what);
  }
}

TEST_CASE("tar: clip paths of members and URLs taken apart") {
  auto p = ff::parse_media_path("d/s-000.tar#k1.mp4@1536+2048");
  CHECK(p.container == "d/s-000.tar");
  CHECK(p.member == "k1.mp4");
  CHECK(p.offset == 1536);
  CHECK(p.size == 2048);
  CHECK(!p.url());
  p = ff::parse_media_path("https://h/b/s.tar?X-Sig=a#b#k@1.mp4@512+10");
  CHECK(p.container == "https://h/b/s.tar?X-Sig=a");
  CHECK(p.member == "b#k@1.mp4");
  CHECK(p.offset == 512);
  CHECK(p.url());
  p = ff::parse_media_path("s.tar#k1.mp4");
  CHECK(p.member == "k1.mp4");
  CHECK(p.offset == -1);
  CHECK(ff::parse_media_path("clip#1.mp4").container == "clip#1.mp4");
  CHECK(!ff::parse_media_path("x.tar#").in_tar());
  CHECK(!ff::parse_media_path("http://h/a.mp4").in_tar());
  CHECK(ff::member_path("s.tar", {"k.mp4", 0, 512, 9}) == "s.tar#k.mp4@512+9");
  CHECK(ff::is_shard_path("https://h/s.tar?sig=1"));
  CHECK(!ff::is_shard_path("a.mp4"));
  // A member's URL (the shard's with a fragment) is a clip, not a shard to list (a loader's
  // per-row paths were listed as whole shards).
  CHECK(!ff::is_shard_path("https://h/s.tar#k.mp4@512+9"));
  CHECK(!ff::is_shard_path("https://h/s.tar?sig=1#k.mp4"));
}

TEST_CASE("tar: a member decodes and probes in place with the plain file's bytes") {
  const fs::path dir = scratch("decode");
  tar_writer w;
  w.add("k0.txt", "first\n");
  w.add("k0.mp4", slurp(media(mp4)));
  w.add(std::string(110, 'l') + ".mkv", slurp(media(mkv)));
  w.end();
  const std::string shard = (dir / "s.tar").string();
  w.save(shard);
  const auto members = ff::list_tar_file(shard);
  REQUIRE(members.size() == 3);
  for (const auto& [file, m] : {std::pair{mp4, members[1]}, std::pair{mkv, members[2]}}) {
    CAPTURE(file);
    for (const std::string& path : {ff::member_path(shard, m), shard + "#" + m.name}) {
      const auto a = ff::probe(media(file)), b = ff::probe(path);
      REQUIRE(a);
      REQUIRE_MESSAGE(b, (b ? "" : b.error()));
      CHECK(a->num_frames == b->num_frames);
      CHECK(a->width == b->width);
      CHECK(a->fps == b->fps);
      const auto req = request(3, 4, 2, 48, 64);
      CHECK(decode_bytes(path, req) == decode_bytes(media(file), req));
    }
  }

  SUBCASE("bad paths name the member and what is wrong") {
    const std::string base = shard + "#k0.mp4@";
    const auto at = std::to_string(members[1].offset), size = std::to_string(members[1].size);
    const std::pair<std::string, std::string> bad[] = {
        {base + "1024+" + size, "no tar header before byte 1024"},
        {base + at + "+7", "has " + size + " bytes, the path says 7"},
        {base + at + "+99999999", "lies past the end of the shard"},
        {shard + "#k9.mp4", "the shard has no member k9.mp4"},
        {(dir / "none.tar").string() + "#k0.mp4@512+10", "cannot open the shard"},
        {base + "100+10", "start at byte 512 or later"},
    };
    for (const auto& [path, what] : bad) {
      const auto r = ff::probe(path);
      REQUIRE(!r);
      CHECK_MESSAGE(r.error().find(path + ": ") == 0, r.error());
      CHECK_MESSAGE(r.error().find(what) != std::string::npos, r.error());
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("tar: list_sources lists members with their key's sidecar fields") {
  const fs::path dir = scratch("sources");
  tar_writer w;
  w.add("a/k0.mp4", slurp(media(mp4)));
  w.add("a/k0.txt", "first caption\n");
  w.add("a/k0.json",
        R"({"caption": "line\n\u00e9\"", "score": 0.5, "tags": ["x", {"y": 1}], "n": null})");
  w.add("a/k1.mkv", slurp(media(mkv)));
  w.add("a/k1.caption.txt", "second");
  w.add("a/k1.npy", "ignored");
  w.end();
  w.save((dir / "s0.tar").string());
  // A shard cut inside its second member: the first is kept, the damage is a row of its own.
  const std::string cut = w.bytes.substr(0, w.bytes.size() / 2 + 700);
  std::ofstream((dir / "s1.tar").string(), std::ios::binary)
      .write(cut.data(), static_cast<std::streamsize>(cut.size()));
  fs::copy_file(media(mp4), dir / "plain.mp4");

  const auto l = ff::list_sources(dir.string(), 2);
  REQUIRE(l.paths.size() == 5);
  CHECK(l.from_shards);
  CHECK(l.paths[0] == (dir / "plain.mp4").string());
  CHECK(l.shard[0].empty());
  const std::string s0 = (dir / "s0.tar").string();
  CHECK(l.paths[1].starts_with(s0 + "#a/k0.mp4@"));
  CHECK(l.member[2] == "a/k1.mkv");
  CHECK(l.errors[1].empty());
  CHECK(l.errors[4].find("runs past the end of the archive") != std::string::npos);
  CHECK(l.paths[4] == (dir / "s1.tar").string());
  std::map<std::string, std::vector<std::string>> col;
  for (std::size_t c = 0; c < l.field_names.size(); ++c) col[l.field_names[c]] = l.fields[c];
  CHECK(col["txt"][1] == "first caption");
  CHECK(col["caption"][1] == "line\n\xc3\xa9\"");
  CHECK(col["score"][1] == "0.5");
  CHECK(col["tags"][1] == R"(["x", {"y": 1}])");
  CHECK(col["n"][1] == "null");  // JSON text, as the docs say of every non-string value
  CHECK(col["caption.txt"][2] == "second");
  CHECK(col["txt"][2].empty());
  CHECK(col["txt"][3] == "first caption");  // s1.tar's k0, before the damage
  CHECK(!col.contains("npy"));
  // What scan probes: every listed member decodes.
  for (std::size_t i = 1; i < 4; ++i) CHECK_MESSAGE(ff::probe(l.paths[i]), l.paths[i]);
  fs::remove_all(dir);
}

TEST_CASE("tar: members named by pax records and GNU long names decode at @OFFSET") {
  // Python's tarfile (webdataset's TarWriter) writes '?' in the ustar name of a non-ASCII name
  // and cuts long ones; the name is the pax record's (or the GNU long name's).
  const fs::path dir = scratch("pax");
  const std::string accented = "vid\xc3\xa9o 1.mp4";  // "vidéo 1.mp4", spaced
  const std::string very_long =
      std::string(150, 'd') + "/" + std::string(120, 'e') + " \xc3\xa9.mkv";
  const std::string gnu_long = std::string(110, 'g') + "/k.mp4";
  tar_writer w;
  w.add_pax(accented, slurp(media(mp4)));
  w.add_pax(very_long, slurp(media(mkv)));
  w.add(gnu_long, slurp(media(mp4)), tar_writer::long_names::gnu);
  w.end();
  const std::string shard = (dir / "s.tar").string();
  w.save(shard);
  const auto l = ff::list_sources(shard, 1);
  REQUIRE(l.paths.size() == 3);
  CHECK(l.member[0] == accented);
  CHECK(l.member[1] == very_long);
  CHECK(l.member[2] == gnu_long);
  const ff::clip_request req{.start = 2, .frames = 4, .interval = 2, .height = 48, .width = 64};
  const auto want_mp4 = decode_bytes(media(mp4), req), want_mkv = decode_bytes(media(mkv), req);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(l.paths[i]);
    CHECK(decode_bytes(l.paths[i], req) == (i == 1 ? want_mkv : want_mp4));
    CHECK(ff::probe(l.paths[i]));
  }
  // Another member's offset under this name is still refused, naming the member found there.
  const auto other = ff::parse_media_path(l.paths[2]);
  const std::string wrong = shard + "#" + accented + "@" + std::to_string(other.offset) + "+" +
                            std::to_string(other.size);
  std::vector<std::uint8_t> out(ff::clip_bytes(req));
  const auto r = ff::decode_clip(wrong, req, out);
  REQUIRE(!r);
  CHECK_MESSAGE(r.error().find("is " + gnu_long + ", not the one named") != std::string::npos,
                r.error());
  fs::remove_all(dir);
}

TEST_CASE("tar: list_sources resolves nested lists of directories, shards and lists") {
  const fs::path dir = sources_dir("nested");
  fs::copy_file(media(mkv), dir / "b.mkv");
  std::ofstream((dir / "inner.txt").string()) << (dir / "s.tar").string() << "\n";
  std::ofstream((dir / "list.txt").string()) << "# a directory, a nested list and a file\n"
                                             << (dir / "videos").string() << "\n"
                                             << (dir / "inner.txt").string() << "\n\n"
                                             << (dir / "b.mkv").string() << "\n";
  const auto l = ff::list_sources((dir / "list.txt").string(), 1);
  REQUIRE(l.paths.size() == 4);
  CHECK(l.paths[0] == (dir / "videos" / "a.mp4").string());
  CHECK(l.member[1] == "k0.mp4");
  CHECK(l.member[2] == "k1.mkv");
  CHECK(l.paths[3] == (dir / "b.mkv").string());
  // A sequence of sources: the same resolver, each shard listed (not read as a video).
  const auto seq = ff::list_sources(
      std::vector<std::string>{(dir / "s.tar").string(), (dir / "videos").string()}, 1);
  REQUIRE(seq.paths.size() == 3);
  CHECK(seq.member[0] == "k0.mp4");
  CHECK(seq.paths[2] == (dir / "videos" / "a.mp4").string());
  // A list naming itself fails, naming the depth, instead of looping.
  std::ofstream((dir / "loop.txt").string()) << (dir / "loop.txt").string() << "\n";
  CHECK_THROWS_WITH_AS(ff::list_sources((dir / "loop.txt").string(), 1),
                       doctest::Contains("lists nested more than 16 deep"), vbucket::error);
  fs::remove_all(dir);
}

TEST_CASE("tar: clip_paths gives a loader the clip of each row from any source form") {
  const fs::path dir = sources_dir("clip_paths");
  std::ofstream((dir / "list.txt").string()) << (dir / "videos").string() << "\n"
                                             << (dir / "s.tar").string() << "\n";
  // The listing a scan of the same source gives, row for row.
  const auto listed = ff::list_sources((dir / "list.txt").string(), 1);
  REQUIRE(listed.paths.size() == 3);
  CHECK(ff::clip_paths((dir / "list.txt").string(), 3, 1) == listed.paths);
  CHECK(ff::clip_paths(dir.string(), 3, 1) ==
        std::vector<std::string>{listed.paths[1], listed.paths[2], listed.paths[0]});
  // Nested: a sequence naming a directory and a shard.
  CHECK(ff::clip_paths(
            std::vector<std::string>{(dir / "videos").string(), (dir / "s.tar").string()}, 3, 1) ==
        listed.paths);
  // One path per row stays as it is, also paths that do not exist (yet): no file system look.
  const std::vector<std::string> rows = {listed.paths[2], "/no/such/dir/x.MP4", listed.paths[0],
                                         "/no/such.tar#k0.mp4@512+10",
                                         "http://127.0.0.1:9/s.tar#k0.mp4@512+10"};
  CHECK(ff::clip_paths(rows, rows.size(), 1) == rows);
  // ... and so does one member's path given alone (not read as a list)
  CHECK(ff::clip_paths(listed.paths[1], 1, 1) == std::vector<std::string>{listed.paths[1]});
  // Another count than the metadata's rows names both.
  CHECK_THROWS_WITH_AS(
      ff::clip_paths((dir / "list.txt").string(), 4, 1),
      "the sources give 3 clips but the metadata has 4 rows: give the sources the metadata was "
      "scanned from (in the same order), or one path per row",
      vbucket::error);
  // A shard that cannot be listed is named too.
  std::ofstream((dir / "bad.tar").string()) << std::string(700, 'x');
  CHECK_THROWS_WITH_AS((void)ff::clip_paths((dir / "bad.tar").string(), 2, 1),
                       doctest::Contains("bad.tar"), vbucket::error);
  fs::remove_all(dir);
}

TEST_CASE("limits: limits_of takes the run spec's media fields") {
  const auto spec =
      vbucket::run_spec::from_map({{"timeout", "7.5"}, {"io_timeout", "0.5"}, {"retries", "0"}});
  ff::limits base;
  base.max_side = 640;
  const ff::limits lim = ff::limits_of(spec, base);
  CHECK(lim.timeout_seconds == 7.5);
  CHECK(lim.network.io_timeout_seconds == 0.5);
  CHECK(lim.network.retries == 0);
  CHECK(lim.max_side == 640);  // the rest as in base
  // A default spec gives the adapter's defaults.
  const ff::limits d = ff::limits_of(vbucket::run_spec{});
  CHECK(d.timeout_seconds == ff::limits{}.timeout_seconds);
  CHECK(d.network.io_timeout_seconds == ff::network_options{}.io_timeout_seconds);
  CHECK(d.network.retries == ff::network_options{}.retries);
}
