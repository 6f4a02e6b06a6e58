/// Tests of the frame index (vbucket/ffmpeg/frame_index.hpp, `index_video`, and decode_clip
/// with `clip_request::index`) over the long media of tests/ffmpeg/make_media.sh: the same bytes,
/// paddings and errors with and without the index, per container; stale entries ignored and
/// reported; damaged sidecars refused with a message naming the file.

#include <doctest/doctest.h>

#include <cstdint>     // std::uint8_t, std::int64_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <memory>      // std::make_shared
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/bucket/meta.hpp"
#include "vbucket/ffmpeg/ffmpeg.hpp"
#include "vbucket/ffmpeg/file_decoder.hpp"

#include "vbucket_test/ffmpeg_media.hpp"
#include "vbucket_test/temp_files.hpp"

namespace ff = vbucket::ffmpeg;
namespace fs = std::filesystem;

namespace {

using vbucket_test::media;

/// A 24×32 clip request.
ff::clip_request clip(std::int64_t start, std::int64_t frames, std::int64_t interval) {
  return vbucket_test::request(start, frames, interval, 24, 32);
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("ffmpeg: the frame index gives the same clips as decoding without it, per container") {
  struct file_case {
    const char* name;
    bool output_order;  // no pts on some packet: every packet recorded
  };
  const file_case files[] = {
      {"h264_64x48_25fps_long.mkv", false},      {"vp9_64x48_25fps_long.webm", false},
      {"h264_64x48_25fps_long_frag.mp4", false}, {"h264_64x48_25fps_long.ts", false},
      {"h264_64x48_25fps_opengop.mkv", false},   {"h264_64x48_25fps_long.avi", true},
      {"mpeg2_64x48_25fps_long.mpg", true},      {"mpeg4_64x48_25fps_long.avi", true}};
  ff::frame_index index;
  int tested = 0;
  for (const auto& fc : files) {
    if (!fs::exists(media(fc.name))) continue;
    ++tested;
    const std::string file = media(fc.name);
    CAPTURE(file);
    const auto entry = ff::index_video(file);
    REQUIRE_MESSAGE(entry.ok(), entry.error());
    CHECK(entry->output_order == fc.output_order);
    CHECK((entry->no_pts_from < entry->frames) == fc.output_order);
    const auto info = ff::probe(file);
    REQUIRE(info.ok());
    const std::int64_t total = info->num_frames;
    CHECK(entry->frames == total);
    if (!entry->output_order) {
      REQUIRE(entry->keys.size() >= 5);  // GOPs of 50 (12 in the WebM)
      CHECK(entry->keys.front().frame == 0);
    }
    index.add(*entry);
  }
  REQUIRE(tested >= 4);
  // The sidecar's bytes round-trip.
  const std::string bytes = index.serialize();
  const auto back = ff::frame_index::parse(bytes_of(bytes), "META.vbidx");
  CHECK(back.serialize() == bytes);
  CHECK(back.size() == index.size());

  for (const ff::file_index& e : back.files()) {
    CAPTURE(e.path);
    const std::int64_t total = e.frames;
    // Starts: 0, around keyframes (the index's own, and a GOP-aligned guess for output-order
    // entries), the middle, near the end, and past it (padding and the error).
    std::vector<std::int64_t> starts = {0,         1,         total / 2, total - 6,
                                        total - 3, total - 1, total + 2};
    if (!e.output_order) {
      for (std::size_t k : {std::size_t{2}, e.keys.size() - 1}) {
        starts.push_back(e.keys[k].frame);
        starts.push_back(e.keys[k].frame - 1);
        starts.push_back(e.keys[k].frame + 1);
      }
    } else {
      std::int64_t key = -1;
      for (std::size_t i = 0; i < e.packets.size(); ++i)
        if (e.packets[i].key && static_cast<std::int64_t>(i) > total / 3) {
          key = static_cast<std::int64_t>(i);
          break;
        }
      REQUIRE(key > 0);
      starts.push_back(key);
      starts.push_back(key - 1);
    }
    int used = 0;
    for (const std::int64_t start : starts) {
      for (const auto& [frames, interval] : {std::pair<std::int64_t, std::int64_t>{5, 1}, {4, 3}}) {
        for (const bool pad : {false, true}) {
          CAPTURE(start);
          CAPTURE(frames);
          CAPTURE(interval);
          CAPTURE(pad);
          auto req = clip(start, frames, interval);
          req.pad = pad;
          std::vector<std::uint8_t> with(ff::clip_bytes(req), 1), without(with.size(), 2);
          req.index = &back;
          const auto a = ff::decode_clip(e.path, req, with);
          req.index = nullptr;
          const auto b = ff::decode_clip(e.path, req, without);
          REQUIRE(a.ok() == b.ok());
          if (!a.ok()) {
            CHECK(a.error() == b.error());
            continue;
          }
          CHECK(!a->index_stale);
          CHECK(!b->index_used);
          CHECK(a->frames_padded == b->frames_padded);
          CHECK(a->frames_converted == b->frames_converted);
          CHECK(with == without);
          if (a->index_used) ++used;
        }
      }
    }
    CHECK(used > 8);  // the deep starts go through the index
  }
}

TEST_CASE("ffmpeg: a stale frame index entry is ignored, reported and counted") {
  const std::string name = "h264_64x48_25fps_long.mkv";
  if (!fs::exists(media(name))) return;
  const vbucket_test::temp_dir dir("frame_index");
  const std::string copy = (dir.path / name).string();
  fs::copy_file(media(name), copy);
  ff::frame_index index;
  const auto entry = ff::index_video(copy);
  REQUIRE_MESSAGE(entry.ok(), entry.error());
  index.add(*entry);
  auto req = clip(400, 5, 2);
  req.index = &index;
  std::vector<std::uint8_t> fresh(ff::clip_bytes(req)), stale(fresh.size(), 9);
  const auto a = ff::decode_clip(copy, req, fresh);
  REQUIRE_MESSAGE(a.ok(), a.error());
  CHECK(a->index_used);
  CHECK(!a->index_stale);
  SUBCASE("the size changed") { std::ofstream(copy, std::ios::app | std::ios::binary) << "x"; }
  SUBCASE("the mtime changed") {
    fs::last_write_time(copy, fs::last_write_time(copy) + std::chrono::seconds(5));
  }
  const auto b = ff::decode_clip(copy, req, stale);
  REQUIRE_MESSAGE(b.ok(), b.error());
  CHECK(b->index_stale);
  CHECK(!b->index_used);
  CHECK(fresh == stale);
  // The loader's decoder counts the stale entries it met.
  vbucket::meta_table meta;
  meta.push_back({entry->frames, 48, 64, 25.0});
  ff::file_decoder::options o;
  o.index = std::make_shared<const ff::frame_index>(index);
  const ff::file_decoder decoder(std::vector<std::string>{copy}, meta, o);
  vbucket::clip_task task{};
  task.sample = 0;
  task.frames = 4;
  task.height = 24;
  task.width = 32;
  task.seed = 5;
  std::vector<std::uint8_t> out(4 * 24 * 32 * 3);
  CHECK(!decoder.decode(task, out).has_value());
  CHECK(decoder.stale_index_entries() == 1);
}

TEST_CASE("ffmpeg: a damaged, truncated or foreign frame index is an error naming the file") {
  ff::frame_index index;
  ff::file_index f;
  f.path = "a.mkv";
  f.size = 1000;
  f.frames = 100;
  f.no_pts_from = 100;
  f.keys = {{0, 0, 0, 10, 50, ff::index_no_value}, {50, 2000, 1960, 500, 40, 1960}};
  index.add(f);
  ff::file_index g;
  g.path = "b.avi";
  g.output_order = true;
  g.frames = 2;
  g.no_pts_from = 0;
  g.packets = {{10, 0, 30, true}, {40, 1, 20, false}};
  index.add(g);
  const std::string good = index.serialize();
  REQUIRE(ff::frame_index::parse(bytes_of(good), "M.vbidx").size() == 2);
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      ff::frame_index::parse(bytes_of(bytes), "M.vbidx");
    } catch (const vbucket::error& e) {
      return e.what();
    }
    return "";
  };
  // Every prefix: an error naming the file.
  for (std::size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    const std::string e = error_of(good.substr(0, n));
    CHECK(e.find("M.vbidx") != std::string::npos);
    if (n >= 8) CHECK(e.find("truncated") != std::string::npos);
  }
  CHECK(error_of("path,num_frames\n").find("not a vbucket frame index") != std::string::npos);
  CHECK(error_of(good + "x").find("bytes after the last file") != std::string::npos);
  std::string v2 = good;
  v2[8] = 2;
  CHECK(error_of(v2).find("version 2") != std::string::npos);
  // Every byte changed: parsed or refused, never a crash (the fuzz target goes further).
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string m = good;
    m[i] = static_cast<char>(m[i] ^ 0x5A);
    const std::string e = error_of(m);
    if (!e.empty()) CHECK(e.find("M.vbidx") != std::string::npos);
  }
  // Unreadable file.
  try {
    ff::frame_index::load("/nonexistent/M.vbidx");
    FAIL("no error");
  } catch (const vbucket::error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/M.vbidx") != std::string::npos);
  }
  CHECK(ff::index_path_for("out/META.csv") == "out/META.vbidx");
  CHECK(ff::index_path_for("META") == "META.vbidx");
}

TEST_CASE("ffmpeg: the frame index finds a file under any spelling of its path") {
  const vbucket_test::temp_dir dir("frame_index_paths");
  (void)dir.write("a.mkv", "not a video: the lookup only needs the path");
  fs::create_directory_symlink(dir.path, dir.path.string() + "-link");
  const std::string abs = (dir.path / "a.mkv").string();
  ff::frame_index idx;
  ff::file_index e;
  e.path = abs;
  idx.add(e);
  const ff::file_index* const entry = idx.find(abs);
  REQUIRE(entry != nullptr);
  const fs::path cwd = fs::current_path();
  const std::string relative = fs::relative(abs, cwd).string();
  for (const std::string& spelling :
       {dir.path.string() + "/./a.mkv",
        dir.path.string() + "/../" + dir.path.filename().string() + "/a.mkv",
        dir.path.string() + "-link/a.mkv", relative, "./" + relative}) {
    CAPTURE(spelling);
    CHECK(idx.find(spelling) == entry);
    CHECK(idx.find_exact(spelling) == nullptr);
  }
  CHECK(idx.find((dir.path / "b.mkv").string()) == nullptr);
  // An index of relative paths (scanned from the current directory) finds the absolute one.
  ff::frame_index rel;
  e.path = "./" + relative;
  rel.add(e);
  CHECK(rel.find(abs) != nullptr);
  // Copies look up the same way (their own keys); an added entry is found under any spelling.
  const ff::frame_index copy = idx;
  CHECK(copy.find(dir.path.string() + "/./a.mkv") == &copy.files()[0]);
  (void)dir.write("c.mkv", "");
  e.path = (dir.path / "c.mkv").string();
  ff::frame_index grown = copy;
  grown.add(e);
  CHECK(grown.find(dir.path.string() + "-link/c.mkv") == &grown.files()[1]);
  fs::remove(dir.path.string() + "-link");
}
