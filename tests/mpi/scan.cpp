/// vbucket/mpi/scan.hpp, run as several processes: the shares (every file once, balanced by
/// size, the same on every rank) and `scan_sharded` against the single-process `probe_all` over
/// the same files (videos written here as Y4M, a text file, an empty file, a missing path).

#include <doctest/doctest.h>

#include <algorithm>   // std::max, std::min, std::min_element
#include <cmath>       // std::isnan
#include <cstdint>     // std::uint64_t, std::uint32_t
#include <cstdio>      // std::snprintf
#include <cstdlib>     // mkdtemp
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <string>      // std::string
#include <vector>      // std::vector

#include <mpi.h>

#include "vbucket/mpi/mpi.hpp"
#if VBUCKET_TEST_HAS_FFMPEG
#include "vbucket/mpi/scan.hpp"
#endif

#if VBUCKET_TEST_HAS_FFMPEG
namespace {

using vbucket::mpi::communicator;

/// A YUV4MPEG2 clip of `frames` w x h frames at `fps` (gray, 4:2:0).
void write_y4m(const std::string& path, int w, int h, int fps, int frames) {
  std::ofstream out(path, std::ios::binary);
  out << "YUV4MPEG2 W" << w << " H" << h << " F" << fps << ":1 Ip A1:1 C420jpeg\n";
  const std::string plane(static_cast<std::size_t>(w * h + 2 * ((w / 2) * (h / 2))), '\x80');
  for (int f = 0; f < frames; ++f) out << "FRAME\n" << plane;
}

/// A directory that rank 0 makes and fills, the same name on every rank.
std::string shared_media_dir(const communicator& comm) {
  char name[256] = {};
  if (comm.rank() == 0) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "vbucket-mpi-test.XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    std::snprintf(name, sizeof name, "%s", pattern.c_str());
    write_y4m(pattern + "/a.y4m", 64, 48, 30, 12);
    write_y4m(pattern + "/b.y4m", 32, 64, 25, 3);
    write_y4m(pattern + "/c.y4m", 96, 64, 24, 20);
    write_y4m(pattern + "/d.y4m", 16, 16, 10, 1);
    std::ofstream(pattern + "/notes.y4m") << "not a video\n";
    std::ofstream(pattern + "/empty.mp4").flush();
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm.get());
  return name;
}

}  // namespace

TEST_CASE("scan shares: every file once, the largest spread first, balanced") {
  const std::vector<std::uint64_t> sizes{5, 100, 0, 7, 100, 3, 50, 1, 1, 60};
  for (std::uint32_t world : {1u, 2u, 3u, 4u, 16u}) {
    CAPTURE(world);
    const auto owner = vbucket::mpi::scan_shares(sizes, world);
    REQUIRE(owner.size() == sizes.size());
    std::vector<std::uint64_t> load(world, 0);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(owner[i] < world);
      load[owner[i]] += std::max<std::uint64_t>(sizes[i], 1);
    }
    // Greedy to the least loaded: no rank exceeds another by more than the largest file.
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    if (world <= sizes.size()) CHECK(*hi - *lo <= 100);
    CHECK(owner == vbucket::mpi::scan_shares(sizes, world));  // a pure function
  }
  // The two largest files go to two different ranks.
  const auto two = vbucket::mpi::scan_shares(sizes, 2);
  CHECK(two[1] != two[4]);
}

TEST_CASE("scan_sharded gives every rank what probe_all gives one process") {
  const communicator comm;
  vbucket::ffmpeg::quiet_logs();
  const std::string dir = shared_media_dir(comm);
  MPI_Barrier(comm.get());
  std::vector<std::string> paths = vbucket::ffmpeg::list_media(dir);
  paths.push_back(dir + "/missing.mp4");
  REQUIRE(paths.size() == 7);
  const auto sharded = vbucket::mpi::scan_sharded(comm, paths, 1);
  const auto alone = vbucket::ffmpeg::probe_all(paths, 1);
  REQUIRE(sharded.size() == alone.size());
  std::size_t ok = 0;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    CAPTURE(paths[i]);
    REQUIRE(sharded[i].ok() == alone[i].ok());
    if (!alone[i]) {
      // The same message, and where it was read: " (rank R on HOST)".
      const std::string& e = sharded[i].error();
      CHECK(e.substr(0, alone[i].error().size()) == alone[i].error());
      const std::string rest = e.substr(std::min(e.size(), alone[i].error().size()));
      CHECK(rest.find(" (rank ") == 0);
      CHECK(rest.find(" on " + vbucket::mpi::processor_name() + ")") != std::string::npos);
      continue;
    }
    ++ok;
    const auto& s = *sharded[i];
    const auto& a = *alone[i];
    CHECK(s.num_frames == a.num_frames);
    CHECK(s.height == a.height);
    CHECK(s.width == a.width);
    CHECK((s.fps == a.fps || (std::isnan(s.fps) && std::isnan(a.fps))));
    CHECK((s.duration == a.duration || (std::isnan(s.duration) && std::isnan(a.duration))));
    CHECK(s.codec == a.codec);
    CHECK(s.rotation == a.rotation);
    CHECK(s.coded_height == a.coded_height);
    CHECK(s.coded_width == a.coded_width);
    CHECK(s.sar_num == a.sar_num);
    CHECK(s.sar_den == a.sar_den);
    CHECK(s.counted_by == a.counted_by);
    CHECK(s.warning == a.warning);
  }
  CHECK(ok == 4);  // the four clips probe; the text, empty and missing files do not

  SUBCASE("a rank with another list: every rank throws, naming it") {
    std::vector<std::string> mine = paths;
    const std::uint32_t odd = comm.size() - 1;
    if (comm.size() > 1 && comm.rank() == odd) mine.pop_back();
    std::string e;
    try {
      (void)vbucket::mpi::scan_sharded(comm, mine, 1);
    } catch (const vbucket::error& x) {
      e = x.what();
    }
    if (comm.size() > 1)
      CHECK(e.find("rank " + std::to_string(odd) + " of " + std::to_string(comm.size()) +
                   " disagree on the list of files to scan") != std::string::npos);
  }
  MPI_Barrier(comm.get());
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
}
#endif
