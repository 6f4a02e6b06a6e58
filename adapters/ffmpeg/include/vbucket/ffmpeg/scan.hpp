#pragma once
/// Scanning many files: the media files under a directory (recursive) or listed in a text file,
/// probed in parallel. A file that fails to probe gets its error message; the scan goes on.
///
///     auto paths = vbucket::ffmpeg::list_media("videos/");
///     auto infos = vbucket::ffmpeg::probe_all(paths, 8);   // infos[i] for paths[i]

#include <algorithm>     // std::sort
#include <cctype>        // std::tolower
#include <cerrno>        // errno
#include <cstddef>       // std::size_t
#include <cstdio>        // std::FILE
#include <filesystem>    // std::filesystem
#include <fstream>       // std::ifstream
#include <functional>    // std::function
#include <stop_token>    // std::stop_token
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code
#include <utility>       // std::move
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/detail/parallel_tasks.hpp"  // parallel_tasks
#include "vbucket/detail/task_control.hpp"    // task_control
#include "vbucket/ffmpeg/probe.hpp"

namespace vbucket::ffmpeg {

/// File name extensions (lower case, with the dot) that a directory scan probes.
inline constexpr std::string_view media_extensions[] = {
    ".mp4", ".m4v",  ".mov", ".mkv",  ".webm", ".avi",  ".flv", ".wmv",
    ".mpg", ".mpeg", ".ts",  ".mts",  ".m2ts", ".3gp",  ".ogv", ".gif",
    ".y4m", ".png",  ".jpg", ".jpeg", ".bmp",  ".webp", ".tif", ".tiff"};

inline bool is_media_name(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view e : media_extensions)
    if (ext == e) return true;
  return false;
}

/// The files to scan. A directory: every regular file with a media extension under it
/// (recursive, symlinked directories not followed), sorted by path. A file: a list, one path a
/// line (blank lines and lines starting with '#' skipped; relative paths as written). Throws
/// `vbucket::error` naming `where` if it cannot be read.
inline std::vector<std::string> list_media(const std::string& where) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(where, ec);
  if (ec || !fs::exists(st)) throw vbucket::error(where + ": no such file or directory");
  std::vector<std::string> paths;
  if (fs::is_directory(st)) {
    fs::recursive_directory_iterator it(where, fs::directory_options::skip_permission_denied, ec);
    if (ec) throw vbucket::error(where + ": cannot list the directory (" + ec.message() + ")");
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
      if (ec) throw vbucket::error(where + ": cannot list the directory (" + ec.message() + ")");
      std::error_code fe;
      if (it->is_regular_file(fe) && is_media_name(it->path()))
        paths.push_back(it->path().string());
    }
    if (ec) throw vbucket::error(where + ": cannot list the directory (" + ec.message() + ")");
    std::sort(paths.begin(), paths.end());
    return paths;
  }
  std::ifstream in(where, std::ios::binary);
  if (!in) throw vbucket::error(where + ": cannot open the list for reading");
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.find('\0') != std::string::npos)
      throw vbucket::error(where + ": line " + std::to_string(number) +
                           ": a NUL byte (is this a list of paths, one a line?)");
    paths.push_back(line);
  }
  if (in.bad()) throw vbucket::error(where + ": read error");
  return paths;
}

/// Probes every path with `threads` workers (0 = one per core), on the library's task pool
/// (`detail::parallel_tasks`); results[i] is paths[i]'s.
/// `progress(done, total)` (optional) is called from the workers, serialised, after each file.
/// When `stop` is requested no new file starts (the files being probed finish); the results of
/// the files never started are errors "not probed (the scan was stopped)".
inline std::vector<result<video_info>> probe_all(
    const std::vector<std::string>& paths, unsigned threads, const probe_options& opt = {},
    const std::function<void(std::size_t, std::size_t)>& progress = {}, std::stop_token stop = {}) {
  std::vector<result<video_info>> results(
      paths.size(), result<video_info>::failure("not probed (the scan was stopped)"));
  vbucket::detail::parallel_tasks(paths.size(), threads,
                                  [&](std::size_t i) { results[i] = probe(paths[i], opt); },
                                  {.stop = std::move(stop), .progress = progress});
  return results;
}

}  // namespace vbucket::ffmpeg
