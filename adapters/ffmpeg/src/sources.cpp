// vbucket::ffmpeg's compiled part: listing tar shards (local or over http(s), read through
// FFmpeg's AVIO) and their sidecar fields (sources.hpp), compiled here once.
#include "vbucket/ffmpeg/sources.hpp"

#include <algorithm>      // std::sort, std::min
#include <cctype>         // std::tolower
#include <chrono>         // std::chrono::duration (waits between retries)
#include <cstddef>        // std::size_t
#include <cstdint>        // std::int64_t
#include <filesystem>     // std::filesystem
#include <optional>       // std::optional
#include <span>           // std::span
#include <string>         // std::string
#include <string_view>    // std::string_view
#include <system_error>   // std::error_code
#include <thread>         // std::this_thread::sleep_for
#include <unordered_map>  // std::unordered_map
#include <utility>        // std::move
#include <vector>         // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/ffmpeg/media_source.hpp"
#include "vbucket/ffmpeg/scan.hpp"
#include "vbucket/ffmpeg/tar.hpp"

namespace vbucket::ffmpeg {

namespace detail {

/// Sidecars larger than this are left out (they are not captions).
inline constexpr std::int64_t max_sidecar_bytes = std::int64_t{1} << 20;

/// The top-level fields of a JSON object: (name, value) with strings unescaped and other
/// values (numbers, true/false, null, arrays, objects) as their JSON text. Anything
/// else (not an object, malformed) gives std::nullopt.
inline std::optional<std::vector<std::pair<std::string, std::string>>> json_fields(
    std::string_view s) {
  std::size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  };
  auto string = [&](std::string& out) -> bool {  // at the opening quote
    ++i;
    while (i < s.size() && s[i] != '"') {
      if (s[i] != '\\') {
        out += s[i++];
        continue;
      }
      if (++i >= s.size()) return false;
      const char e = s[i++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          auto hex4 = [&](std::uint32_t& v) {
            if (i + 4 > s.size()) return false;
            v = 0;
            for (int k = 0; k < 4; ++k) {
              const char c = s[i++];
              v <<= 4;
              if (c >= '0' && c <= '9')
                v |= static_cast<std::uint32_t>(c - '0');
              else if (c >= 'a' && c <= 'f')
                v |= static_cast<std::uint32_t>(c - 'a' + 10);
              else if (c >= 'A' && c <= 'F')
                v |= static_cast<std::uint32_t>(c - 'A' + 10);
              else
                return false;
            }
            return true;
          };
          std::uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            i += 2;
            std::uint32_t lo = 0;
            if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          auto put = [&](std::uint32_t b) {
            out += static_cast<char>(static_cast<unsigned char>(b));
          };
          if (cp < 0x80) {
            put(cp);
          } else if (cp < 0x800) {
            put(0xC0 | (cp >> 6));
            put(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            put(0xE0 | (cp >> 12));
            put(0x80 | ((cp >> 6) & 0x3F));
            put(0x80 | (cp & 0x3F));
          } else {
            put(0xF0 | (cp >> 18));
            put(0x80 | ((cp >> 12) & 0x3F));
            put(0x80 | ((cp >> 6) & 0x3F));
            put(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          out += e;  // '"', '\\', '/'
      }
    }
    if (i >= s.size()) return false;
    ++i;  // the closing quote
    return true;
  };
  // Skips one value that is not a string; false if malformed.
  auto skip_value = [&]() -> bool {
    int depth = 0;
    const std::size_t start = i;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        std::string ignored;
        if (!string(ignored)) return false;
        if (depth == 0) return true;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (depth == 0) break;  // the end of the enclosing object
        if (--depth == 0) {
          ++i;
          return true;
        }
      }
      if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) break;
      ++i;
    }
    return i > start && depth == 0;
  };
  std::vector<std::pair<std::string, std::string>> fields;
  ws();
  if (i >= s.size() || s[i] != '{') return std::nullopt;
  ++i;
  ws();
  if (i < s.size() && s[i] == '}') return fields;
  for (;;) {
    ws();
    if (i >= s.size() || s[i] != '"') return std::nullopt;
    std::string key;
    if (!string(key)) return std::nullopt;
    ws();
    if (i >= s.size() || s[i] != ':') return std::nullopt;
    ++i;
    ws();
    if (i >= s.size()) return std::nullopt;
    std::string value;
    if (s[i] == '"') {
      if (!string(value)) return std::nullopt;
    } else {
      const std::size_t start = i;
      if (!skip_value()) return std::nullopt;
      value = std::string(s.substr(start, i - start));  // null stays "null", as documented
    }
    fields.emplace_back(std::move(key), std::move(value));
    ws();
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == '}') return fields;
    return std::nullopt;
  }
}

/// A shard opened for listing: pread on a local file, ranged reads over HTTP. Every network
/// wait (the connect, each read, the backoff between attempts) is bounded by the io timeout and
/// by the listing's deadline (`limits::timeout_seconds`, an interrupt callback on the open and
/// on every read).
class shard_reader {
 public:
  shard_reader(const std::string& shard, const limits& lim)
      : name_(shard),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(lim.timeout_seconds))) {
    if (is_url(shard)) {
      network_init();
      const network_options& net = lim.network;
      const AVIOInterruptCB interrupt{&shard_reader::interrupted, this};
      int rc = 0;
      int attempt = 0;
      for (;; ++attempt) {
        AVDictionary* opts = nullptr;  // fresh for each attempt: FFmpeg consumes what it takes
        set_http_options(&opts, net);
        rc = avio_open2(&avio_, shard.c_str(), AVIO_FLAG_READ, &interrupt, &opts);
        av_dict_free(&opts);
        if (rc >= 0 || timed_out() || !retryable(rc) || attempt >= net.retries) break;
        auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(net.retry_backoff_seconds *
                                          static_cast<double>(1 << std::min(attempt, 16))));
        wait = std::min(wait, deadline_ - std::chrono::steady_clock::now());
        if (wait > wait.zero()) std::this_thread::sleep_for(wait);
      }
      if (rc < 0) {
        avio_ = nullptr;
        const std::string attempts =
            attempt > 0 ? " (" + std::to_string(attempt + 1) + " attempts)" : "";
        if (timed_out())
          throw vbucket::error(shard + ": cannot open the shard: timed out (deadline " +
                               std::to_string(lim.timeout_seconds) + " s)" + attempts);
        throw vbucket::error(shard + ": cannot open the shard: " + io_error_text(rc) + attempts);
      }
      total_ = avio_size(avio_);
      return;
    }
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    fd_ = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw vbucket::error(shard + ": cannot open the shard: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0)
      throw vbucket::error(shard + ": cannot stat the shard: " + std::strerror(errno));
    total_ = static_cast<std::int64_t>(st.st_size);
#else
    throw vbucket::error(shard + ": tar shards are read with pread, which this system lacks");
#endif
  }
  shard_reader(const shard_reader&) = delete;
  shard_reader& operator=(const shard_reader&) = delete;
  ~shard_reader() {
    if (avio_ != nullptr) avio_closep(&avio_);
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    if (fd_ >= 0) ::close(fd_);
#endif
  }

  [[nodiscard]] bool timed_out() const noexcept {
    return std::chrono::steady_clock::now() > deadline_;
  }
  /// Why the last read failed over the network, for the listing's error; empty if it did not.
  [[nodiscard]] std::string failure() const {
    if (timed_out()) return name_ + ": timed out while listing the shard";
    if (failure_ < 0)
      return name_ + ": read error while listing the shard: " + io_error_text(failure_);
    return {};
  }

  std::int64_t read(std::int64_t pos, std::span<std::uint8_t> out) {
    if (avio_ != nullptr) {
      if (avio_tell(avio_) != pos) {
        if (const std::int64_t sk = avio_seek(avio_, pos, SEEK_SET); sk < 0) {
          failure_ = static_cast<int>(sk);
          return -1;
        }
      }
      std::size_t done = 0;
      while (done < out.size()) {
        const int got =
            avio_read(avio_, out.data() + done,
                      static_cast<int>(std::min<std::size_t>(out.size() - done, 1 << 30)));
        if (timed_out()) return -1;
        if (got == AVERROR_EOF || got == 0) break;
        if (got < 0) {
          failure_ = got;
          return -1;
        }
        done += static_cast<std::size_t>(got);
      }
      return static_cast<std::int64_t>(done);
    }
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    return pread_all(fd_, pos, out);
#else
    (void)pos;
    (void)out;
    return -1;
#endif
  }
  [[nodiscard]] std::int64_t total() const noexcept { return total_; }

 private:
  static int interrupted(void* opaque) noexcept {
    return static_cast<const shard_reader*>(opaque)->timed_out() ? 1 : 0;
  }

  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  int failure_ = 0;
  AVIOContext* avio_ = nullptr;
  int fd_ = -1;
  std::int64_t total_ = -1;
};

/// One shard's clips and sidecar fields, or why it could not be listed (in part).
struct shard_listing {
  std::vector<tar_member> clips;
  std::vector<std::vector<std::pair<std::string, std::string>>> fields;  // per clip
  std::string error;
};

inline bool is_text_sidecar(std::string_view ext) {
  return ext == "txt" || ext == "text" || ext == "caption" || ext == "cls" ||
         (ext.size() > 4 && ext.substr(ext.size() - 4) == ".txt");
}

inline shard_listing list_shard(const std::string& shard, const limits& lim) {
  shard_listing out;
  std::vector<tar_member> members;
  try {
    shard_reader reader(shard, lim);
    try {
      list_tar_into(
          [&](std::int64_t pos, std::span<std::uint8_t> b) { return reader.read(pos, b); },
          reader.total(), shard, members);
    } catch (const vbucket::error& e) {
      // The members listed before the damage (or the network's failure) are kept.
      const std::string network = reader.failure();
      out.error = network.empty() ? e.what() : network;
    }
    // Group by key (the member's path up to the first dot of its base name), in order.
    struct key_group {
      std::vector<std::size_t> clips;
      std::vector<std::pair<std::string, std::string>> fields;
    };
    std::unordered_map<std::string, key_group> groups;
    std::vector<std::string> order;
    for (std::size_t m = 0; m < members.size(); ++m) {
      const std::string& name = members[m].name;
      const std::size_t slash = name.rfind('/');
      const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
      const std::size_t dot = name.find('.', base);
      if (dot == std::string::npos || dot == base) continue;  // no key or no extension
      const std::string key = name.substr(0, dot), ext = name.substr(dot + 1);
      auto [it, fresh] = groups.try_emplace(key);
      if (fresh) order.push_back(key);
      key_group& g = it->second;
      if (is_media_name(name)) {
        g.clips.push_back(m);
        continue;
      }
      const bool json = ext == "json";
      if (!json && !is_text_sidecar(ext)) continue;
      if (members[m].size > max_sidecar_bytes) continue;
      std::string text(static_cast<std::size_t>(members[m].size), '\0');
      if (reader.read(members[m].offset, std::span(reinterpret_cast<std::uint8_t*>(text.data()),
                                                   text.size())) != members[m].size) {
        const std::string network = reader.failure();
        throw vbucket::error(network.empty() ? shard + ": cannot read the member " + name
                                             : network + " (reading " + name + ")");
      }
      if (json) {
        if (auto f = json_fields(text)) {
          for (auto& kv : *f) g.fields.push_back(std::move(kv));
        } else {
          g.fields.emplace_back("json", std::move(text));  // not an object: kept as it is
        }
      } else {
        if (!text.empty() && text.back() == '\n') text.pop_back();
        if (!text.empty() && text.back() == '\r') text.pop_back();
        g.fields.emplace_back(ext, std::move(text));
      }
    }
    // Clips in archive order, each with its key's fields.
    std::vector<std::pair<std::size_t, const key_group*>> clips;
    for (const std::string& key : order) {
      const key_group& g = groups.at(key);
      for (std::size_t m : g.clips) clips.emplace_back(m, &g);
    }
    std::sort(clips.begin(), clips.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [m, g] : clips) {
      out.clips.push_back(members[m]);
      out.fields.push_back(g->fields);
    }
  } catch (const vbucket::error& e) {
    if (out.error.empty()) out.error = e.what();
  }
  return out;
}

}  // namespace detail

namespace detail {

media_listing list_entries(std::vector<std::string> entries, unsigned threads, const limits& lim);

/// Lists nest at most this deep (a list that names itself fails instead of looping).
inline constexpr int max_list_depth = 16;

/// A local file read as a list of sources when named in a list (or a sequence): `.txt`,
/// `.list`, `.lst`.
inline bool is_list_name(std::string_view path) {
  for (std::string_view ext : {".txt", ".list", ".lst"})
    if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  return false;
}

/// Whether `path` ends in a media file extension (`is_media_name`, without a `path` object).
inline bool has_media_extension(std::string_view path) {
  const std::size_t dot = path.find_last_of("./");
  if (dot == std::string_view::npos || path[dot] != '.') return false;
  std::string ext(path.substr(dot));
  if (ext.size() > 6) return false;
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view e : media_extensions)
    if (ext == e) return true;
  return false;
}

/// Appends the sources `where` names: a URL or a shard as it is; a directory's media files and
/// shards (recursive, in path order); a list's lines, each resolved the same way (`top`: the
/// input itself, read as a list whatever its name unless it is a media file); else a clip's
/// path as it is. A tar member's path, and below the top a media file's name, is a clip without
/// a look at the file system (a loader's one path per row stays cheap).
inline void resolve_source(const std::string& where, int depth, bool top,
                           std::vector<std::string>& entries) {
  namespace fs = std::filesystem;
  if (is_url(where) || is_shard_path(where) || parse_media_path(where).in_tar() ||
      (!top && has_media_extension(where))) {
    entries.push_back(where);
    return;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(where, ec);
  if (!ec && fs::is_directory(st)) {
    std::vector<std::string> found = list_media(where);  // media files; shards below
    fs::recursive_directory_iterator it(where, fs::directory_options::skip_permission_denied, ec);
    for (const fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
      std::error_code fe;
      if (it->is_regular_file(fe) && it->path().extension() == ".tar")
        found.push_back(it->path().string());
    }
    if (ec) throw vbucket::error(where + ": cannot list the directory (" + ec.message() + ")");
    std::sort(found.begin(), found.end());
    entries.insert(entries.end(), found.begin(), found.end());
    return;
  }
  const bool list =
      top ? !is_media_name(where) : (!ec && fs::is_regular_file(st) && is_list_name(where));
  if (!list) {
    entries.push_back(where);  // a clip (probing says what is wrong with it)
    return;
  }
  if (depth >= max_list_depth)
    throw vbucket::error(where + ": lists nested more than " + std::to_string(max_list_depth) +
                         " deep (does a list name itself?)");
  for (const std::string& line : list_media(where)) resolve_source(line, depth + 1, false, entries);
}

}  // namespace detail

media_listing list_sources(const std::string& where, unsigned threads, const limits& lim) {
  std::vector<std::string> entries;
  detail::resolve_source(where, 0, true, entries);
  return detail::list_entries(std::move(entries), threads, lim);
}

media_listing list_sources(const std::vector<std::string>& sources, unsigned threads,
                           const limits& lim) {
  std::vector<std::string> entries;
  for (const std::string& where : sources) detail::resolve_source(where, 0, false, entries);
  return detail::list_entries(std::move(entries), threads, lim);
}

namespace {

/// The clips of a listing, when there are `rows` of them (else the error naming both counts).
std::vector<std::string> clips_of_rows(media_listing&& l, std::size_t rows) {
  if (l.paths.size() == rows) return std::move(l.paths);
  std::string why = "the sources give " + std::to_string(l.paths.size()) + " clip" +
                    (l.paths.size() == 1 ? "" : "s") + " but the metadata has " +
                    std::to_string(rows) + " row" + (rows == 1 ? "" : "s") +
                    ": give the sources the metadata was scanned from (in the same order), or "
                    "one path per row";
  for (const std::string& e : l.errors)
    if (!e.empty()) {
      why += " (" + e + ")";
      break;
    }
  throw vbucket::error(why);
}

}  // namespace

std::vector<std::string> clip_paths(const std::string& where, std::size_t rows, unsigned threads,
                                    const limits& lim) {
  return clips_of_rows(list_sources(where, threads, lim), rows);
}

std::vector<std::string> clip_paths(const std::vector<std::string>& sources, std::size_t rows,
                                    unsigned threads, const limits& lim) {
  return clips_of_rows(list_sources(sources, threads, lim), rows);
}

namespace detail {

/// The listing of resolved entries: shards listed (in parallel), the rest rows as they are.
media_listing list_entries(std::vector<std::string> entries, unsigned threads, const limits& lim) {
  std::vector<std::size_t> shards;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (is_shard_path(entries[i])) shards.push_back(i);
  std::vector<shard_listing> listed(shards.size());
  vbucket::detail::parallel_tasks(
      shards.size(), threads,
      [&](std::size_t s) { listed[s] = list_shard(entries[shards[s]], lim); }, {});

  media_listing out;
  out.from_shards = !shards.empty();
  std::unordered_map<std::string, std::size_t> column;
  auto add_row = [&](std::string path, std::string error, std::string shard, std::string member,
                     std::int64_t offset, std::int64_t size) {
    out.paths.push_back(std::move(path));
    out.errors.push_back(std::move(error));
    out.shard.push_back(std::move(shard));
    out.member.push_back(std::move(member));
    out.offset.push_back(offset);
    out.size.push_back(size);
    for (auto& f : out.fields) f.emplace_back();
  };
  std::size_t next_shard = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (next_shard >= shards.size() || shards[next_shard] != i) {
      add_row(entries[i], "", "", "", -1, -1);
      continue;
    }
    const shard_listing& l = listed[next_shard++];
    for (std::size_t c = 0; c < l.clips.size(); ++c) {
      const tar_member& m = l.clips[c];
      add_row(member_path(entries[i], m), "", entries[i], m.name, m.offset, m.size);
      for (const auto& [name, value] : l.fields[c]) {
        auto [it, fresh] = column.try_emplace(name, out.field_names.size());
        if (fresh) {
          out.field_names.push_back(name);
          out.fields.emplace_back(out.paths.size(), std::string());
        }
        out.fields[it->second].back() = value;
      }
    }
    if (!l.error.empty()) add_row(entries[i], l.error, entries[i], "", -1, -1);
  }
  return out;
}

}  // namespace detail

}  // namespace vbucket::ffmpeg
