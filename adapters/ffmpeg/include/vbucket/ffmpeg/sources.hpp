#pragma once
/// What a scan probes when media live in tar shards (the WebDataset layout) or behind URLs:
/// `list_sources` lists plain files, URLs and the members of `.tar` shards (local or http(s)),
/// one clip path each (tar.hpp's `SHARD#MEMBER@OFFSET+SIZE`, which probe and decode open in
/// place), with the shard, member, byte offset and size, and the sidecar fields of the
/// member's key (`key.txt`, `key.json`, ...) as columns.
///
///     auto list = vbucket::ffmpeg::list_sources("shards/");  // every *.tar and media file
///     auto infos = vbucket::ffmpeg::probe_all(list.paths, 8);
///     // list.fields[c][i]: sidecar column list.field_names[c] of clip i (e.g. "txt", "caption")
///
/// WebDataset: members are grouped by key, the member's path up to the first dot of its base
/// name (`a/b/k01.caption.txt` has key `a/b/k01` and extension `caption.txt`). Every media
/// member (by extension, as a directory scan: `.mp4`, `.mkv`, `.jpg`, ...) is a clip; its
/// key's text members (extension `txt`, `*.txt`, `text`, `caption`, `cls`) are columns named
/// by their extension (the text without one final newline), and the top-level fields of its
/// `json` member are columns named by the field (strings unquoted, other values as JSON text).

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/ffmpeg/limits.hpp"  // limits, network_options
#include "vbucket/ffmpeg/tar.hpp"     // is_url

namespace vbucket::ffmpeg {

/// The clips a scan probes, in order, with where each lies and its sidecar fields.
struct media_listing {
  std::vector<std::string> paths;  ///< the clips' paths (files, URLs, `SHARD#MEMBER@O+S`)
  /// Per path: empty, or why it cannot be probed (a shard that could not be listed: its path
  /// is the shard's; members listed before a corrupt spot are kept as clips).
  std::vector<std::string> errors;
  bool from_shards = false;              ///< some path is a tar member or a shard (columns below)
  std::vector<std::string> shard;        ///< per path: its shard, or empty
  std::vector<std::string> member;       ///< per path: its member name, or empty
  std::vector<std::int64_t> offset;      ///< per path: the data's byte offset in the shard, or -1
  std::vector<std::int64_t> size;        ///< per path: the data's size in bytes, or -1
  std::vector<std::string> field_names;  ///< sidecar columns, in order of first appearance
  /// fields[c][i]: column c of path i; empty when its key has no such field.
  std::vector<std::vector<std::string>> fields;
};

/// Whether `path` names a tar shard: a local `.tar` file or a URL whose path ends in `.tar`
/// (a URL with a fragment names a member of the shard, `SHARD#MEMBER`: a clip, not a shard).
inline bool is_shard_path(std::string_view path) {
  if (is_url(path)) {
    if (path.find('#') != std::string_view::npos) return false;
    path = path.substr(0, path.find('?'));
  }
  return path.size() > 4 && path.substr(path.size() - 4) == ".tar";
}

/// The clips under `where`: a directory (its media files and the members of its `.tar`
/// shards, recursively, in path order), a `.tar` shard (a file or a URL), a URL, a media file,
/// or a text file listing any of these one a line (as `list_media` reads it; a line naming a
/// directory, a shard or another list (`.txt`, `.list`, `.lst`) is expanded the same way, up
/// to 16 lists deep). The one resolver of sources: the CLI, Python's `scan` and the loaders'
/// sources all go through it. Shards are listed with `threads` workers (0 = one per core), each
/// within `lim.timeout_seconds` and the network's io timeout and retries; a shard that cannot
/// be listed keeps a row (its path, the reason in `errors`). Throws `vbucket::error` naming
/// `where` if it cannot be read.
[[nodiscard]] media_listing list_sources(const std::string& where, unsigned threads = 0,
                                         const limits& lim = {});
/// The same for several sources, each a clip, a URL, a shard, a directory or a list (a local
/// `.txt`, `.list` or `.lst` file), in order. A clip's path (a media file name, a URL, a tar
/// member `SHARD#MEMBER...`) is taken as it is, without looking at the file system, so one
/// path per metadata row resolves to itself at the cost of a string check each.
[[nodiscard]] media_listing list_sources(const std::vector<std::string>& sources,
                                         unsigned threads = 0, const limits& lim = {});

/// What a loader decodes: the clip of each of `rows` metadata rows (a decoder's paths,
/// `file_decoder`), from sources as `list_sources` resolves them — the directory, list, shard
/// or URL the metadata was scanned from (`vbucket scan`, Python's `scan`), several of them
/// nested, or one path per row as it is. Throws `vbucket::error` when they give another number
/// of clips than `rows` (naming both counts and the first source that could not be listed).
///
///     auto paths = vbucket::ffmpeg::clip_paths("shards/", meta.size());
///     const vbucket::ffmpeg::file_decoder decoder(std::move(paths), meta);
[[nodiscard]] std::vector<std::string> clip_paths(const std::string& where, std::size_t rows,
                                                  unsigned threads = 0, const limits& lim = {});
/// The same for several sources (or one path per row), in order.
[[nodiscard]] std::vector<std::string> clip_paths(const std::vector<std::string>& sources,
                                                  std::size_t rows, unsigned threads = 0,
                                                  const limits& lim = {});

}  // namespace vbucket::ffmpeg
