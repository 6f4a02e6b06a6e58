#pragma once
/// The frame index (`vbucket scan --index`): a sidecar next to META.csv (META.vbidx) that
/// records, per video, where a decoder can start, so that a deep clip in Matroska/WebM,
/// fragmented MP4, MPEG-TS/PS or AVI needs no demuxing from the file's start.
/// `index_video` (decode.hpp) builds one file's entry by demuxing it once; `decode_clip` takes
/// the index through `clip_request::index`.
///
/// File format, version 1 (every integer little-endian; i64/i32 signed, u32 unsigned):
///
///     magic    8 bytes "VBIDX\r\n\x1a"
///     version  u32 = 1
///     files    u32
///     per file:
///       path     u32 length (1 to 65536), the bytes (no NUL): the path as scanned (META.csv's;
///                a lookup matches any spelling of the same file, `canonical_media_path`)
///       size     i64 bytes of the file when indexed
///       mtime    i64 its modification time (ns since the file clock's epoch)
///       stream   u32 the video stream's index
///       time     i32 num, i32 den: the stream's time base (both > 0)
///       mode     u32 0 = presentation times (keyframes follow), 1 = output order (packets)
///       frames   i64 the stream's packets (frames) in decode order, edit-list discards left out
///       no_pts   i64 the first of them without a pts (= frames in mode 0; < frames in mode 1)
///       count    u32 entries
///       mode 0, per keyframe that splits the stream (every packet decoded before it is shown
///       before every packet decoded from it on), by frame:
///         frame i64 packets before it (its presentation index: the first frame it starts)
///         pts, dts, pos i64 (dts -2^63 when unknown), size i32 (> 0)
///         before i64 the largest pts of the packets before it (-2^63 for the first)
///       mode 1 (some packet has no pts: frames count in the decoder's output order), one per
///       packet in decode order (count = frames):
///         pos i64, dts i64, size i32 (> 0), key u32 (0 or 1)
///
/// A file is used only while its size and mtime are the recorded ones (else the entry is stale:
/// `clip_info::index_stale`, and decoding goes the way it goes without an index). Every seek
/// through the index is checked on the packets read (position, size, pts) and falls back to the
/// path without index on any doubt, so the bytes decoded are the same either way.

#include <chrono>         // std::chrono::nanoseconds
#include <cstddef>        // std::size_t
#include <cstdint>        // std::int64_t, std::uint32_t
#include <cstring>        // std::memcpy
#include <filesystem>     // std::filesystem
#include <fstream>        // std::ifstream
#include <iterator>       // std::istreambuf_iterator
#include <limits>         // std::numeric_limits
#include <memory>         // std::unique_ptr (the canonical keys)
#include <mutex>          // std::call_once, std::once_flag
#include <optional>       // std::optional
#include <span>           // std::span
#include <string>         // std::string
#include <string_view>    // std::string_view
#include <system_error>   // std::error_code
#include <unordered_map>  // std::unordered_map
#include <utility>        // std::move
#include <vector>         // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/ffmpeg/tar.hpp"  // parse_media_path (a member's stamp is its shard's)

namespace vbucket::ffmpeg {

inline constexpr char frame_index_magic[8] = {'V', 'B', 'I', 'D', 'X', '\r', '\n', '\x1a'};
inline constexpr std::uint32_t frame_index_version = 1;
/// "Unknown" for pts/dts/pos in the index (FFmpeg's AV_NOPTS_VALUE).
inline constexpr std::int64_t index_no_value = std::numeric_limits<std::int64_t>::min();

/// A keyframe that splits the stream (mode 0).
struct index_key {
  std::int64_t frame = 0;  ///< packets before it = presentation index of its first frame
  std::int64_t pts = 0;
  std::int64_t dts = index_no_value;
  std::int64_t pos = -1;
  std::int32_t size = 0;
  std::int64_t before = index_no_value;  ///< largest pts of the packets before it
};

/// A packet in decode order (mode 1).
struct index_packet {
  std::int64_t pos = -1;
  std::int64_t dts = index_no_value;
  std::int32_t size = 0;
  bool key = false;
};

/// One file's entry.
struct file_index {
  std::string path;
  std::int64_t size = 0;
  std::int64_t mtime = 0;
  std::uint32_t stream = 0;
  std::int32_t time_num = 1;
  std::int32_t time_den = 1;
  bool output_order = false;  ///< mode 1: `packets`; else `keys`
  std::int64_t frames = 0;
  /// The first packet (in decode order) without a pts; `frames` when every one has one. A clip
  /// whose packets up to a margin past its end all have one is numbered by pts (mode 1 is used
  /// only for clips that reach it, as without the index).
  std::int64_t no_pts_from = 0;
  std::vector<index_key> keys;
  std::vector<index_packet> packets;
};

/// The file's size and modification time now; nullopt when it cannot be read. A tar member
/// (`SHARD.tar#MEMBER@OFFSET+SIZE`, tar.hpp) has its local shard's: any change to the shard
/// makes its members' entries stale. A URL (or a member of a shard behind one) has none.
inline std::optional<std::pair<std::int64_t, std::int64_t>> file_stamp(const std::string& path) {
  namespace fs = std::filesystem;
  const media_path where = parse_media_path(path);
  if (where.url()) return std::nullopt;
  const std::string& file = where.in_tar() ? where.container : path;
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) return std::nullopt;
  const auto time = fs::last_write_time(file, ec);
  if (ec) return std::nullopt;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch());
  return std::pair{static_cast<std::int64_t>(size), static_cast<std::int64_t>(ns.count())};
}

/// True when the file at `e.path` still has the recorded size and modification time.
inline bool is_fresh(const file_index& e) {
  const auto now = file_stamp(e.path);
  return now && now->first == e.size && now->second == e.mtime;
}

/// The sidecar of a metadata CSV: META.csv -> META.vbidx (the extension replaced).
inline std::string index_path_for(const std::string& csv) {
  std::filesystem::path p(csv);
  p.replace_extension(".vbidx");
  return p.string();
}

/// The one key of a path in the frame index: the absolute path with `.`, `..` and symlinks of
/// its existing part resolved (`std::filesystem::weakly_canonical`), so that `v/a.mkv`,
/// `./v/a.mkv`, `/data/v/a.mkv` and a path through a symlinked directory name the same file.
/// Relative paths resolve against the current directory, as opening the file does.
inline std::string canonical_media_path(std::string_view path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path absolute = fs::absolute(fs::path(path), ec);
  if (ec) return std::string(path);
  const fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal().string() : canonical.string();
}

/// The entries of many files, by path.
class frame_index {
 public:
  frame_index() = default;
  frame_index(const frame_index& other) : files_(other.files_), by_path_(other.by_path_) {}
  frame_index& operator=(const frame_index& other) {
    if (this != &other) {
      files_ = other.files_;
      by_path_ = other.by_path_;
      canonical_ = std::make_unique<canonical_keys>();
    }
    return *this;
  }
  frame_index(frame_index&&) noexcept = default;
  frame_index& operator=(frame_index&&) noexcept = default;
  ~frame_index() = default;

  /// Adds (or replaces) a file's entry.
  void add(file_index e) {
    canonical_ = std::make_unique<canonical_keys>();  // rebuilt when next needed
    const auto it = by_path_.find(e.path);
    if (it != by_path_.end()) {
      files_[it->second] = std::move(e);
      return;
    }
    by_path_.emplace(e.path, files_.size());
    files_.push_back(std::move(e));
  }

  /// The entry of the file at `path`, or nullptr: the path as scanned, or any other spelling of
  /// the same file (`canonical_media_path`: relative or absolute, with `./` or `..`, through a
  /// symlink). Safe to call from several threads at once.
  [[nodiscard]] const file_index* find(std::string_view path) const {
    if (const file_index* exact = find_exact(path)) return exact;
    if (!canonical_) return nullptr;  // moved from
    canonical_keys& c = *canonical_;
    std::call_once(c.once, [&] {
      c.by_key.reserve(files_.size());
      for (std::size_t i = 0; i < files_.size(); ++i)
        c.by_key.emplace(canonical_media_path(files_[i].path), i);  // the first of a file wins
    });
    const auto it = c.by_key.find(canonical_media_path(path));
    return it == c.by_key.end() ? nullptr : &files_[it->second];
  }

  /// The entry of `path` exactly as scanned, or nullptr.
  [[nodiscard]] const file_index* find_exact(std::string_view path) const {
    const auto it = by_path_.find(std::string(path));
    return it == by_path_.end() ? nullptr : &files_[it->second];
  }
  [[nodiscard]] const std::vector<file_index>& files() const noexcept { return files_; }
  [[nodiscard]] std::size_t size() const noexcept { return files_.size(); }

  /// The sidecar's bytes (format above).
  [[nodiscard]] std::string serialize() const {
    std::string out(frame_index_magic, sizeof frame_index_magic);
    put32(out, frame_index_version);
    put32(out, static_cast<std::uint32_t>(files_.size()));
    for (const file_index& f : files_) {
      put32(out, static_cast<std::uint32_t>(f.path.size()));
      out += f.path;
      put64(out, f.size);
      put64(out, f.mtime);
      put32(out, f.stream);
      put32(out, static_cast<std::uint32_t>(f.time_num));
      put32(out, static_cast<std::uint32_t>(f.time_den));
      put32(out, f.output_order ? 1u : 0u);
      put64(out, f.frames);
      put64(out, f.no_pts_from);
      if (f.output_order) {
        put32(out, static_cast<std::uint32_t>(f.packets.size()));
        for (const index_packet& p : f.packets) {
          put64(out, p.pos);
          put64(out, p.dts);
          put32(out, static_cast<std::uint32_t>(p.size));
          put32(out, p.key ? 1u : 0u);
        }
      } else {
        put32(out, static_cast<std::uint32_t>(f.keys.size()));
        for (const index_key& k : f.keys) {
          put64(out, k.frame);
          put64(out, k.pts);
          put64(out, k.dts);
          put64(out, k.pos);
          put32(out, static_cast<std::uint32_t>(k.size));
          put64(out, k.before);
        }
      }
    }
    return out;
  }

  /// Parses a sidecar's bytes; `name` (the sidecar's path) is named in errors. Throws
  /// `vbucket::error` for anything that is not a well-formed version-1 index: every length and
  /// count is checked against the bytes left, every field against its range.
  static frame_index parse(std::span<const std::uint8_t> bytes, const std::string& name) {
    reader r{bytes, 0, name};
    if (bytes.size() < sizeof frame_index_magic ||
        std::memcmp(bytes.data(), frame_index_magic, sizeof frame_index_magic) != 0)
      throw error(name + ": not a vbucket frame index (no VBIDX magic at its start)");
    r.at = sizeof frame_index_magic;
    const std::uint32_t version = r.u32("the version");
    if (version != frame_index_version)
      throw error(name + ": frame index version " + std::to_string(version) +
                  ", this vbucket reads version " + std::to_string(frame_index_version));
    const std::uint32_t count = r.u32("the file count");
    frame_index idx;
    for (std::uint32_t i = 0; i < count; ++i) {
      file_index f;
      const std::string what = "file " + std::to_string(i + 1) + " of " + std::to_string(count);
      const std::uint32_t len = r.u32(what + ": the path length");
      if (len == 0 || len > 65536) r.bad(what + ": path length " + std::to_string(len));
      f.path = r.text(len, what + ": the path");
      if (f.path.find('\0') != std::string::npos) r.bad(what + ": a NUL byte in the path");
      const std::string file = what + " (" + f.path + ")";
      f.size = r.i64(file + ": the size");
      f.mtime = r.i64(file + ": the mtime");
      f.stream = r.u32(file + ": the stream");
      f.time_num = static_cast<std::int32_t>(r.u32(file + ": the time base"));
      f.time_den = static_cast<std::int32_t>(r.u32(file + ": the time base"));
      const std::uint32_t mode = r.u32(file + ": the mode");
      f.frames = r.i64(file + ": the frame count");
      f.no_pts_from = r.i64(file + ": the first packet without pts");
      const std::uint32_t entries = r.u32(file + ": the entry count");
      if (f.size < 0) r.bad(file + ": negative size");
      if (f.time_num <= 0 || f.time_den <= 0) r.bad(file + ": time base must be positive");
      if (mode > 1) r.bad(file + ": unknown mode " + std::to_string(mode));
      if (f.frames < 0 || f.frames > (std::int64_t{1} << 40))
        r.bad(file + ": frame count " + std::to_string(f.frames));
      f.output_order = mode == 1;
      if (f.output_order ? f.no_pts_from < 0 || f.no_pts_from >= f.frames
                         : f.no_pts_from != f.frames)
        r.bad(file + ": the first packet without pts (" + std::to_string(f.no_pts_from) +
              ") does not fit the mode and " + std::to_string(f.frames) + " frames");
      const std::size_t entry_bytes = f.output_order ? 24 : 44;
      if (entries > r.left() / entry_bytes)
        r.bad(file + ": truncated (" + std::to_string(entries) +
              " entries do not fit in the bytes left)");
      if (f.output_order) {
        if (entries != f.frames)
          r.bad(file + ": " + std::to_string(entries) + " packets for " + std::to_string(f.frames) +
                " frames");
        f.packets.resize(entries);
        for (index_packet& p : f.packets) {
          p.pos = r.i64(file);
          p.dts = r.i64(file);
          p.size = static_cast<std::int32_t>(r.u32(file));
          const std::uint32_t key = r.u32(file);
          if (p.size <= 0 || key > 1) r.bad(file + ": a packet with size ≤ 0 or a bad key flag");
          p.key = key == 1;
        }
      } else {
        f.keys.resize(entries);
        std::int64_t last = -1;
        for (index_key& k : f.keys) {
          k.frame = r.i64(file);
          k.pts = r.i64(file);
          k.dts = r.i64(file);
          k.pos = r.i64(file);
          k.size = static_cast<std::int32_t>(r.u32(file));
          k.before = r.i64(file);
          if (k.frame <= last || k.frame >= f.frames)
            r.bad(file + ": keyframes out of order or past the frame count");
          if (k.size <= 0 || k.pts == index_no_value)
            r.bad(file + ": a keyframe without size or pts");
          if (k.before != index_no_value && k.before >= k.pts)
            r.bad(file + ": a keyframe shown before the frames decoded before it");
          last = k.frame;
        }
      }
      if (idx.find_exact(f.path) != nullptr) r.bad(file + ": listed twice");
      idx.add(std::move(f));
    }
    if (r.left() != 0)
      r.bad(std::to_string(r.left()) + " bytes after the last file (a foreign or damaged file)");
    return idx;
  }

  /// Reads a sidecar file (throws `vbucket::error` naming it).
  static frame_index load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error(path + ": cannot open the frame index for reading");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    if (in.bad()) throw error(path + ": read error");
    return parse(bytes, path);
  }

 private:
  struct reader {
    std::span<const std::uint8_t> bytes;
    std::size_t at = 0;
    const std::string& name;

    [[noreturn]] void bad(const std::string& what) const {
      throw error(name + ": damaged frame index: " + what);
    }
    [[nodiscard]] std::size_t left() const noexcept { return bytes.size() - at; }
    std::uint64_t take(std::size_t n, const std::string& what) {
      if (left() < n)
        bad("truncated at byte " + std::to_string(bytes.size()) + " (reading " + what + ")");
      std::uint64_t v = 0;
      for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{bytes[at + i]} << (8 * i);
      at += n;
      return v;
    }
    std::uint32_t u32(const std::string& what) { return static_cast<std::uint32_t>(take(4, what)); }
    std::int64_t i64(const std::string& what) { return static_cast<std::int64_t>(take(8, what)); }
    std::string text(std::size_t n, const std::string& what) {
      if (left() < n)
        bad("truncated at byte " + std::to_string(bytes.size()) + " (reading " + what + ")");
      std::string s(reinterpret_cast<const char*>(bytes.data() + at), n);
      at += n;
      return s;
    }
  };

  static void put32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  static void put64(std::string& out, std::int64_t s) {
    const auto v = static_cast<std::uint64_t>(s);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }

  /// The entries by `canonical_media_path`, built at the first lookup of another spelling (it
  /// touches the filesystem, so an index whose paths are used as scanned never pays for it).
  struct canonical_keys {
    std::once_flag once;
    std::unordered_map<std::string, std::size_t> by_key;
  };

  std::vector<file_index> files_;
  std::unordered_map<std::string, std::size_t> by_path_;
  std::unique_ptr<canonical_keys> canonical_ = std::make_unique<canonical_keys>();
};

}  // namespace vbucket::ffmpeg
