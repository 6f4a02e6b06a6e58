#pragma once
/// A metadata scan spread over the ranks of a communicator: each rank probes a share of the
/// files with `vbucket::ffmpeg::probe_all` (the single-process scan's code), shares balanced by
/// file size, and every rank receives every result in the input's order, so a scan under
/// mpirun gives what a single-process scan gives (a failed file's message also names the rank and
/// host). Needs vbucket::ffmpeg besides vbucket::mpi.
///
///     auto paths = vbucket::ffmpeg::list_media("videos/");        // the same list on every rank
///     auto infos = vbucket::mpi::scan_sharded(comm, paths);        // infos[i] for paths[i]

#include <algorithm>     // std::sort, std::min
#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint64_t, std::uint32_t, std::int64_t
#include <cstring>       // std::memcpy
#include <filesystem>    // std::filesystem::file_size
#include <functional>    // std::function
#include <limits>        // std::numeric_limits
#include <queue>         // std::priority_queue
#include <string>        // std::string
#include <system_error>  // std::error_code
#include <utility>       // std::pair
#include <vector>        // std::vector

#include <mpi.h>

#include "vbucket/base/error.hpp"
#include "vbucket/ffmpeg/scan.hpp"
#include "vbucket/mpi/agree.hpp"
#include "vbucket/mpi/communicator.hpp"

namespace vbucket::mpi {

/// FNV-1a 64 over the paths, each followed by a NUL: what the ranks compare before a sharded
/// scan (each rank lists the files itself).
inline std::uint64_t paths_fingerprint(const std::vector<std::string>& paths) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (const std::string& p : paths) {
    for (const char c : p) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  return h;
}

/// The rank that probes each file: largest files first, each to the rank with the least bytes
/// so far (ties: the lower rank; equal sizes: input order). A pure function of the sizes and
/// the world size, so every rank computes the same shares.
inline std::vector<std::uint32_t> scan_shares(const std::vector<std::uint64_t>& sizes,
                                              std::uint32_t world) {
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : a < b;
  });
  using load = std::pair<std::uint64_t, std::uint32_t>;  // (bytes, rank): least first
  std::priority_queue<load, std::vector<load>, std::greater<>> ranks;
  for (std::uint32_t r = 0; r < world; ++r) ranks.emplace(0, r);
  std::vector<std::uint32_t> owner(sizes.size());
  for (const std::size_t i : order) {
    load l = ranks.top();
    ranks.pop();
    owner[i] = l.second;
    // Count an empty (or unreadable) file as one byte, so that many of them spread out too.
    const std::uint64_t cost = std::max<std::uint64_t>(sizes[i], 1);
    l.first = l.first > std::numeric_limits<std::uint64_t>::max() - cost
                  ? std::numeric_limits<std::uint64_t>::max()
                  : l.first + cost;
    ranks.push(l);
  }
  return owner;
}

namespace detail {

/// Probe results as bytes (a little format of this header's own: both ends are this code).
class writer {
 public:
  template <class T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.append(b, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes += s;
  }
  std::string bytes;
};

class reader {
 public:
  reader(const char* data, std::size_t size) : data_(data), size_(size) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    need(n);
    std::string s(data_ + at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return s;
  }

 private:
  void need(std::uint64_t n) const {
    if (n > size_ - at_) throw vbucket::error("vbucket::mpi::scan_sharded: a truncated result");
  }
  const char* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

inline void put_result(writer& w, const ffmpeg::result<ffmpeg::video_info>& r) {
  w.put<std::uint8_t>(r.ok() ? 1 : 0);
  if (!r) {
    w.put_string(r.error());
    return;
  }
  const ffmpeg::video_info& v = *r;
  w.put(v.num_frames);
  w.put(v.height);
  w.put(v.width);
  w.put(v.fps);
  w.put(v.duration);
  w.put_string(v.codec);
  w.put<std::int32_t>(v.rotation);
  w.put(v.coded_height);
  w.put(v.coded_width);
  w.put<std::int32_t>(v.sar_num);
  w.put<std::int32_t>(v.sar_den);
  w.put<std::int32_t>(static_cast<std::int32_t>(v.counted_by));
  w.put_string(v.warning);
}

inline ffmpeg::result<ffmpeg::video_info> get_result(reader& in) {
  if (in.get<std::uint8_t>() == 0)
    return ffmpeg::result<ffmpeg::video_info>::failure(in.get_string());
  ffmpeg::video_info v;
  v.num_frames = in.get<std::int64_t>();
  v.height = in.get<std::int64_t>();
  v.width = in.get<std::int64_t>();
  v.fps = in.get<double>();
  v.duration = in.get<double>();
  v.codec = in.get_string();
  v.rotation = in.get<std::int32_t>();
  v.coded_height = in.get<std::int64_t>();
  v.coded_width = in.get<std::int64_t>();
  v.sar_num = in.get<std::int32_t>();
  v.sar_den = in.get<std::int32_t>();
  v.counted_by = static_cast<ffmpeg::frame_count_method>(in.get<std::int32_t>());
  v.warning = in.get_string();
  return v;
}

/// Broadcasts `bytes` from `root` (sized first; in pieces below 2^30 bytes, MPI counts are int).
inline void broadcast(const communicator& comm, std::string& bytes, std::uint32_t root) {
  auto size = static_cast<std::uint64_t>(bytes.size());
  check(MPI_Bcast(&size, 1, MPI_UINT64_T, static_cast<int>(root), comm.get()), "MPI_Bcast");
  bytes.resize(static_cast<std::size_t>(size));
  constexpr std::size_t piece = std::size_t{1} << 30;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    check(MPI_Bcast(bytes.data() + at, static_cast<int>(n), MPI_CHAR, static_cast<int>(root),
                    comm.get()),
          "MPI_Bcast");
  }
}

}  // namespace detail

/// Probes `paths` (the same list on every rank: checked first, an error on every rank if it
/// is not) over the ranks of `comm`, `threads` workers per rank (0: one per core), and returns
/// every file's result on every rank: results[i] is paths[i]'s, exactly what
/// `ffmpeg::probe_all(paths, ...)` returns in one process, but that the message of a file that
/// failed ends with " (rank R on HOST)", the rank that probed it and its host. Each rank reads the
/// sizes of a contiguous slice of the list; the shares are `scan_shares` of all the sizes.
/// `progress(done, share)` (optional) reports this rank's share as `probe_all` does.
/// Collective.
inline std::vector<ffmpeg::result<ffmpeg::video_info>> scan_sharded(
    const communicator& comm, const std::vector<std::string>& paths, unsigned threads = 0,
    const ffmpeg::probe_options& opt = {},
    const std::function<void(std::size_t, std::size_t)>& progress = {}) {
  agree(comm, paths_fingerprint(paths), "list of files to scan");
  const std::uint32_t world = comm.size();
  const std::uint32_t me = comm.rank();
  const std::size_t n = paths.size();

  // File sizes: rank r reads those of slice r, then every rank gets all of them.
  auto slice_begin = [&](std::uint32_t r) {
    // n < 2^40 and world <= 2^24 keep the product below 2^64.
    return static_cast<std::size_t>(static_cast<std::uint64_t>(n) * r / world);
  };
  std::vector<std::uint64_t> sizes(n, 0);
  for (std::size_t i = slice_begin(me); i < slice_begin(me + 1); ++i) {
    std::error_code ec;
    const auto s = std::filesystem::file_size(paths[i], ec);
    sizes[i] = ec ? 0 : static_cast<std::uint64_t>(s);  // the probe reports what is wrong
  }
  for (std::uint32_t r = 0; r < world; ++r) {
    const std::size_t begin = slice_begin(r), count = slice_begin(r + 1) - begin;
    constexpr std::size_t piece = std::size_t{1} << 26;
    for (std::size_t at = 0; at < count; at += piece)
      detail::check(
          MPI_Bcast(sizes.data() + begin + at, static_cast<int>(std::min(piece, count - at)),
                    MPI_UINT64_T, static_cast<int>(r), comm.get()),
          "MPI_Bcast");
  }
  const std::vector<std::uint32_t> owner = scan_shares(sizes, world);

  // This rank's share, probed by the single-process code.
  std::vector<std::string> mine;
  for (std::size_t i = 0; i < n; ++i)
    if (owner[i] == me) mine.push_back(paths[i]);
  auto probed = ffmpeg::probe_all(mine, threads, opt, progress);
  // A file one rank could not read may be readable elsewhere (a mount missing on one host):
  // its message says where it was read.
  const std::string where = " (rank " + std::to_string(me) + " on " + processor_name() + ")";
  for (auto& p : probed)
    if (!p) p = ffmpeg::result<ffmpeg::video_info>::failure(p.error() + where);

  // Every rank's results to every rank, placed back in the input's order.
  std::vector<ffmpeg::result<ffmpeg::video_info>> results(
      n, ffmpeg::result<ffmpeg::video_info>::failure("not probed"));
  for (std::uint32_t r = 0; r < world; ++r) {
    std::string bytes;
    if (r == me) {
      detail::writer w;
      for (const auto& p : probed) detail::put_result(w, p);
      bytes = std::move(w.bytes);
    }
    detail::broadcast(comm, bytes, r);
    detail::reader in(bytes.data(), bytes.size());
    for (std::size_t i = 0; i < n; ++i)
      if (owner[i] == r) results[i] = detail::get_result(in);
  }
  return results;
}

}  // namespace vbucket::mpi
