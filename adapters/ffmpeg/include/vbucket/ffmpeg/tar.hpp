#pragma once
/// Tar shards (the WebDataset layout) without FFmpeg: the members of a tar archive with their
/// byte ranges (POSIX ustar, GNU long names, pax path/size records), and the path of a member
/// as a clip's path, `SHARD.tar#MEMBER@OFFSET+SIZE`, which `probe` and `decode_clip` open in
/// place (media_source.hpp).
///
///     auto members = vbucket::ffmpeg::list_tar_file("shard-000.tar");
///     std::string clip = vbucket::ffmpeg::member_path("shard-000.tar", members[0]);
///     // "shard-000.tar#k0001.mp4@1536+204800"

#include <algorithm>    // std::min
#include <cerrno>       // errno
#include <charconv>     // std::from_chars
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint8_t
#include <cstring>      // std::memcmp, std::strerror
#include <functional>   // std::function
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#if __has_include(<unistd.h>) && __has_include(<fcntl.h>)
#include <fcntl.h>     // open
#include <sys/stat.h>  // fstat
#include <unistd.h>    // pread, close
#define VBUCKET_FFMPEG_TAR_PREAD 1
#endif

#include "vbucket/base/error.hpp"

namespace vbucket::ffmpeg {

/// A regular file in a tar archive: its name (long names resolved) and where its bytes lie.
struct tar_member {
  std::string name;
  std::int64_t header = 0;  ///< byte offset of its own 512-byte header
  std::int64_t offset = 0;  ///< byte offset of its data (header + 512)
  std::int64_t size = 0;    ///< bytes of data
};

/// Reads up to `out.size()` bytes at byte `pos`; returns the count read (fewer only at the end)
/// or -1 on an error.
using tar_read_fn = std::function<std::int64_t(std::int64_t pos, std::span<std::uint8_t> out)>;

namespace detail {

inline constexpr std::int64_t tar_block = 512;
/// Longest GNU long name or pax header read (a larger one is taken for damage).
inline constexpr std::int64_t tar_max_meta = std::int64_t{1} << 20;

/// An octal field (NUL- or space-terminated, leading spaces allowed), or GNU's base-256 form
/// (first byte with its top bit set). std::nullopt if malformed.
inline std::optional<std::int64_t> tar_number(std::span<const std::uint8_t> field) {
  if (!field.empty() && (field[0] & 0x80U) != 0) {
    if ((field[0] & 0x40U) != 0) return std::nullopt;  // negative
    std::uint64_t v = field[0] & 0x3FU;
    for (std::size_t i = 1; i < field.size(); ++i) {
      if (v > (std::uint64_t{1} << 55)) return std::nullopt;
      v = (v << 8) | field[i];
    }
    return static_cast<std::int64_t>(v);
  }
  std::size_t i = 0;
  while (i < field.size() && field[i] == ' ') ++i;
  std::int64_t v = 0;
  bool digits = false;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (std::int64_t{1} << 58)) return std::nullopt;
    v = v * 8 + (field[i] - '0');
    digits = true;
  }
  for (; i < field.size(); ++i)
    if (field[i] != ' ' && field[i] != 0) return std::nullopt;
  if (!digits) return std::nullopt;
  return v;
}

/// A NUL-terminated text field (at most its size).
inline std::string tar_text(std::span<const std::uint8_t> field) {
  std::size_t n = 0;
  while (n < field.size() && field[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(field.data()), n);
}

/// One 512-byte header, decoded.
struct tar_header {
  std::string name;        ///< ustar prefix + "/" + name, or the name field
  bool name_full = false;  ///< the name field has all 100 bytes (may be a cut long name)
  std::int64_t size = 0;
  char type = '0';
};

inline bool tar_all_zero(std::span<const std::uint8_t> block) {
  for (std::uint8_t b : block)
    if (b != 0) return false;
  return true;
}

/// Decodes a header block; an error text if it is not one.
inline std::optional<std::string> parse_tar_header(std::span<const std::uint8_t, 512> b,
                                                   tar_header& h) {
  const auto chk = tar_number(b.subspan(148, 8));
  if (!chk) return "not a tar header (no checksum)";
  std::int64_t sum_unsigned = 0, sum_signed = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    const std::uint8_t c = (i >= 148 && i < 156) ? std::uint8_t{' '} : b[i];
    sum_unsigned += c;
    sum_signed += static_cast<signed char>(c);
  }
  if (*chk != sum_unsigned && *chk != sum_signed) return "bad header checksum";
  const auto size = tar_number(b.subspan(124, 12));
  if (!size) return "bad size field";
  h.size = *size;
  h.type = static_cast<char>(b[156]);
  h.name = tar_text(b.subspan(0, 100));
  h.name_full = b[99] != 0;
  static constexpr std::uint8_t posix_magic[6] = {'u', 's', 't', 'a', 'r', 0};
  if (std::memcmp(b.data() + 257, posix_magic, 6) == 0) {
    const std::string prefix = tar_text(b.subspan(345, 155));
    if (!prefix.empty()) h.name = prefix + "/" + h.name;
  }
  return std::nullopt;
}

/// The records of a pax extended header ("LEN key=value\n"...): `path` and `size`.
inline void parse_pax(std::string_view text, std::optional<std::string>& path,
                      std::optional<std::int64_t>& size) {
  while (!text.empty()) {
    std::size_t len = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), len);
    if (ec != std::errc{} || len == 0 || len > text.size()) return;
    const std::string_view record = text.substr(0, len);
    text.remove_prefix(len);
    const std::size_t sp = record.find(' '), eq = record.find('=');
    if (sp == std::string_view::npos || eq == std::string_view::npos || eq < sp) continue;
    const std::string_view key = record.substr(sp + 1, eq - sp - 1);
    std::string_view value = record.substr(eq + 1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    if (key == "path") {
      path = std::string(value);
    } else if (key == "size") {
      std::int64_t v = 0;
      const auto [e2, ec2] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec2 == std::errc{} && e2 == value.data() + value.size() && v >= 0) size = v;
    }
  }
}

}  // namespace detail

/// The regular files of the tar archive that `read` reads (`total`: its size in bytes, or -1
/// when unknown), in archive order. Directories, links and other entries are left out. Throws
/// `vbucket::error` naming `name` and the byte where the archive is corrupt, cut short, or
/// where a member runs past its end.
inline std::vector<tar_member> list_tar(const tar_read_fn& read, std::int64_t total,
                                        const std::string& name);

namespace detail {
/// `list_tar` into `members`: what was listed before an error stays there.
inline void list_tar_into(const tar_read_fn& read, std::int64_t total, const std::string& name,
                          std::vector<tar_member>& members) {
  std::int64_t pos = 0;
  std::optional<std::string> long_name;  // from a GNU 'L' entry or a pax 'path'
  // A pax 'size' for the next member, -1 for none (a plain integer: GCC 12 -O3 reports a false
  // -Wmaybe-uninitialized through an optional's value here).
  std::int64_t pax_size = -1;
  std::uint8_t block[512];
  auto fail = [&](std::int64_t at, const std::string& what) -> void {
    throw vbucket::error(name + ": corrupt tar at byte " + std::to_string(at) + ": " + what);
  };
  auto read_meta = [&](std::int64_t at, std::int64_t n) {
    if (n > tar_max_meta)
      fail(at, "an extended header of " + std::to_string(n) + " bytes (too large)");
    std::string text(static_cast<std::size_t>(n), '\0');
    const std::int64_t got =
        read(at, std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
    if (got != n) fail(at, "the archive ends inside an extended header");
    return text;
  };
  for (;;) {
    const std::int64_t got = read(pos, block);
    if (got < 0) throw vbucket::error(name + ": read error at byte " + std::to_string(pos));
    if (got == 0 && long_name == std::nullopt && pax_size < 0) break;  // end without zero blocks
    if (got != tar_block) fail(pos, "the archive ends inside a header");
    if (tar_all_zero(block)) break;  // end-of-archive marker
    tar_header h;
    if (const auto bad = parse_tar_header(block, h)) fail(pos, *bad);
    const std::int64_t data = pos + tar_block;
    std::int64_t size = h.size;
    if (h.type == 'L' || h.type == 'x') {
      if (total >= 0 && size > total - data)
        fail(pos, "an extended header runs past the end of the archive");
      std::string text = read_meta(data, size);
      if (h.type == 'L') {
        long_name =
            tar_text(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
      } else {
        std::optional<std::string> path;
        std::optional<std::int64_t> size_record;
        parse_pax(text, path, size_record);
        if (path) long_name = std::move(path);
        if (size_record) pax_size = *size_record;
      }
    } else {
      if (pax_size >= 0) size = pax_size;
      const bool regular = h.type == '0' || h.type == '\0' || h.type == '7';
      // Hard links, symlinks, devices, directories and FIFOs carry no data of their own.
      if (h.type == '1' || h.type == '2' || h.type == '3' || h.type == '4' || h.type == '5' ||
          h.type == '6')
        size = 0;
      if (regular) {
        tar_member m{long_name ? std::move(*long_name) : std::move(h.name), pos, data, size};
        if (total >= 0 && size > total - data)
          throw vbucket::error(name + ": member " + m.name + " (" + std::to_string(size) +
                               " bytes at byte " + std::to_string(data) +
                               ") runs past the end of the archive (" + std::to_string(total) +
                               " bytes): cut short?");
        members.push_back(std::move(m));
      }
      long_name.reset();
      pax_size = -1;
    }
    // 'g' (pax global), 'K' (GNU long link) and unknown types: skipped with their data.
    const std::int64_t padded = (size + tar_block - 1) / tar_block * tar_block;
    if (padded < size || data > std::numeric_limits<std::int64_t>::max() - padded)
      fail(pos, "an absurd member size");
    pos = data + padded;
  }
}
}  // namespace detail

inline std::vector<tar_member> list_tar(const tar_read_fn& read, std::int64_t total,
                                        const std::string& name) {
  std::vector<tar_member> members;
  detail::list_tar_into(read, total, name, members);
  return members;
}

#ifdef VBUCKET_FFMPEG_TAR_PREAD
/// Reads from a file descriptor with pread (restarted after signals); -1 on an error.
inline std::int64_t pread_all(int fd, std::int64_t pos, std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t got = ::pread(fd, out.data() + done, out.size() - done,
                                static_cast<off_t>(pos) + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return static_cast<std::int64_t>(done);
}

/// The regular files of the tar archive at `path` (see `list_tar`); only the headers are read.
inline std::vector<tar_member> list_tar_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw vbucket::error(path + ": cannot open: " + std::strerror(errno));
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw vbucket::error(path + ": cannot stat: " + std::strerror(errno));
  return list_tar(
      [fd](std::int64_t pos, std::span<std::uint8_t> out) { return pread_all(fd, pos, out); },
      static_cast<std::int64_t>(st.st_size), path);
}
#endif

/// Whether `path` is an http:// or https:// URL.
inline bool is_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://");
}

/// A clip's path taken apart: a file or URL (`container`), and for a tar member its name and,
/// when the path records them, the data's byte offset and size in the shard.
struct media_path {
  std::string container;  ///< the file, the URL, or the shard (a file or a URL)
  std::string member;     ///< empty unless a tar member
  std::int64_t offset = -1;
  std::int64_t size = -1;
  [[nodiscard]] bool in_tar() const noexcept { return !member.empty(); }
  [[nodiscard]] bool url() const noexcept { return is_url(container); }
};

/// Takes a clip's path apart. A tar member is `SHARD#MEMBER` or `SHARD#MEMBER@OFFSET+SIZE`
/// (what `vbucket scan` writes; OFFSET is the data's byte offset in the shard): for a URL the
/// fragment (after its first '#': a '#' in a URL is never sent to the server) names the
/// member; for a local file, a path containing `.tar#` (its first occurrence) does. Other
/// paths are files or URLs as they are.
inline media_path parse_media_path(std::string_view path) {
  media_path p;
  std::size_t hash = std::string_view::npos;
  if (is_url(path)) {
    hash = path.find('#');
  } else if (const std::size_t t = path.find(".tar#"); t != std::string_view::npos) {
    hash = t + 4;
  }
  if (hash == std::string_view::npos) {
    p.container = std::string(path);
    return p;
  }
  p.container = std::string(path.substr(0, hash));
  std::string_view member = path.substr(hash + 1);
  // The trailing @OFFSET+SIZE, when it is there and well formed.
  if (const std::size_t at = member.rfind('@'); at != std::string_view::npos) {
    const std::string_view range = member.substr(at + 1);
    const std::size_t plus = range.find('+');
    std::int64_t offset = -1, size = -1;
    if (plus != std::string_view::npos) {
      const auto [e1, c1] = std::from_chars(range.data(), range.data() + plus, offset);
      const auto [e2, c2] =
          std::from_chars(range.data() + plus + 1, range.data() + range.size(), size);
      if (c1 == std::errc{} && c2 == std::errc{} && e1 == range.data() + plus &&
          e2 == range.data() + range.size() && plus > 0 && offset >= 0 && size >= 0) {
        p.offset = offset;
        p.size = size;
        member = member.substr(0, at);
      }
    }
  }
  p.member = std::string(member);
  if (p.member.empty()) p.container = std::string(path);  // "x.tar#": not a member
  return p;
}

/// The clip path of `m` in `shard`: `SHARD#MEMBER@OFFSET+SIZE`.
inline std::string member_path(std::string_view shard, const tar_member& m) {
  return std::string(shard) + "#" + m.name + "@" + std::to_string(m.offset) + "+" +
         std::to_string(m.size);
}

/// How many bytes before a member's data `check_member_header` is given: its own header and the
/// extended header before it (a pax `path` record or a GNU long name up to about 7.5 KB).
inline constexpr std::int64_t tar_member_lookback = 8192;

/// Checks that `before` (the bytes of the shard that end where the member's data start: at
/// least its 512-byte header, up to `tar_member_lookback` bytes) holds the header of the member
/// `p` names: a header, a regular file, the same size, the same name. The name is the one
/// `list_tar` gives: a pax `path` record or a GNU long name in the extended header right before
/// it (the ustar name field of a pax member may be cut, or hold '?' for non-ASCII characters),
/// else the header's own. An error text saying what differs, else std::nullopt.
inline std::optional<std::string> check_member_header(std::span<const std::uint8_t> before,
                                                      const media_path& p) {
  const std::size_t blocks = before.size() / 512;
  if (blocks == 0 || before.size() % 512 != 0)
    return "no tar header before byte " + std::to_string(p.offset);
  auto block = [&](std::size_t i) { return before.subspan(i * 512).first<512>(); };
  detail::tar_header h;
  if (const auto bad = detail::parse_tar_header(block(blocks - 1), h))
    return "no tar header before byte " + std::to_string(p.offset) + " (" + *bad +
           "): not a member's offset, or the shard changed since the scan";
  if (h.type != '0' && h.type != '\0' && h.type != '7')
    return "the entry before byte " + std::to_string(p.offset) + " is not a regular file";
  // The extended header that ends right where this header starts: its data fill the k blocks
  // between them.
  std::optional<std::string> long_name;
  std::int64_t pax_size = -1;
  for (std::size_t k = 0; k + 2 <= blocks && !long_name; ++k) {
    const std::size_t at = blocks - 2 - k;
    detail::tar_header x;
    if (detail::parse_tar_header(block(at), x) || (x.type != 'x' && x.type != 'L')) continue;
    if ((x.size + 511) / 512 != static_cast<std::int64_t>(k)) continue;
    const auto text = before.subspan((at + 1) * 512, static_cast<std::size_t>(x.size));
    if (x.type == 'L') {
      long_name = detail::tar_text(text);
    } else {
      std::optional<std::int64_t> size_record;
      detail::parse_pax(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                        long_name, size_record);
      if (size_record) pax_size = *size_record;
      if (!long_name) break;  // a pax header without a path: the ustar name holds
    }
  }
  const std::string& name = long_name ? *long_name : h.name;
  // Without the extended header in view (a name longer than the lookback), a cut ustar name
  // that starts the path is taken for it.
  const bool same_name = name == p.member || (!long_name && h.name_full && p.member.size() > 100 &&
                                              p.member.starts_with(h.name));
  if (!same_name)
    return "the member at byte " + std::to_string(p.offset) + " is " + name +
           ", not the one named (the shard changed since the scan?)";
  const std::int64_t size = pax_size >= 0 ? pax_size : h.size;
  if (size != p.size)
    return "the member at byte " + std::to_string(p.offset) + " has " + std::to_string(size) +
           " bytes, the path says " + std::to_string(p.size) +
           " (the shard changed since the scan?)";
  return std::nullopt;
}

}  // namespace vbucket::ffmpeg
