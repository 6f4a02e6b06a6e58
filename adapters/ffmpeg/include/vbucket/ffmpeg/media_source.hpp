#pragma once
/// Where a clip's bytes come from: a local file, an http(s):// URL (FFmpeg's HTTP protocol:
/// range requests, one kept-alive connection per clip, a read timeout, reconnects), or a member
/// of a tar shard (tar.hpp's `SHARD#MEMBER@OFFSET+SIZE`), read in place through an
/// AVIOContext over the member's byte range: pread on a local shard, ranged HTTP reads of a
/// remote one. Nothing is extracted or copied. `probe`, `decode_clip` and `file_decoder` take
/// any of these as a path; `limits::network` sets the timeouts and retries, `limits::
/// timeout_seconds` the deadline of the whole clip (an interrupt callback checks it: a stalled
/// server never holds a clip past it).

#include <algorithm>  // std::min
#include <cerrno>     // errno
#include <cstdint>    // std::int64_t, std::uint8_t
#include <cstring>    // std::strerror, std::memcpy
#include <mutex>      // std::call_once
#include <optional>   // std::optional
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

extern "C" {
#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/mem.h>
}

#include "vbucket/base/error.hpp"
#include "vbucket/ffmpeg/limits.hpp"  // network_options
#include "vbucket/ffmpeg/tar.hpp"

namespace vbucket::ffmpeg {

namespace detail {

inline std::string io_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(code, text, sizeof text) < 0) return "FFmpeg error " + std::to_string(code);
  return text;
}

/// Whether an open that failed with `rc` may succeed when tried again.
inline bool retryable(int rc) noexcept {
  return rc == AVERROR_HTTP_SERVER_ERROR || rc == AVERROR(ETIMEDOUT) ||
         rc == AVERROR(ECONNREFUSED) || rc == AVERROR(ECONNRESET) || rc == AVERROR(EPIPE) ||
         rc == AVERROR(EIO) || rc == AVERROR(EAGAIN) || rc == AVERROR(ENETUNREACH) ||
         rc == AVERROR(EHOSTUNREACH) || rc == AVERROR_EOF;
}

inline void network_init() {
  static std::once_flag once;
  std::call_once(once, [] { avformat_network_init(); });
}

/// FFmpeg's HTTP options for one clip: timeouts, one kept-alive connection for every range
/// request of the clip, reconnects mid-response, and no other protocol.
inline void set_http_options(AVDictionary** d, const network_options& net) {
  const auto us = static_cast<std::int64_t>(std::max(0.001, net.io_timeout_seconds) * 1e6);
  av_dict_set_int(d, "rw_timeout", us, 0);
  av_dict_set_int(d, "timeout", us, 0);  // the TCP connect and socket I/O (below HTTP)
  av_dict_set(d, "multiple_requests", "1", 0);
  av_dict_set(d, "reconnect", "1", 0);
  av_dict_set_int(d, "reconnect_delay_max", std::max(0, net.reconnect_delay_max_seconds), 0);
  av_dict_set(d, "user_agent", "vbucket", 0);
  av_dict_set(d, "protocol_whitelist", "http,https,tcp,tls", 0);
}

/// The largest body read into memory from a server that ignores range requests (512 MiB).
inline constexpr std::int64_t max_body_without_ranges = std::int64_t{1} << 29;

/// Set on this thread when a read of a shard over the network failed or ended early (a lost
/// connection): whatever error the demuxer or decoder then reports is the network's, and may
/// pass (`guarded` resets it before each call and reads it after a failure).
inline thread_local bool network_read_failed = false;

/// Read/seek callbacks of the AVIOContext over a tar member: bytes [base, base + size) of a
/// local shard (pread on `fd`) or of a remote one (`inner`, FFmpeg's HTTP AVIOContext).
struct range_reader {
  int fd = -1;
  AVIOContext* inner = nullptr;
  const std::uint8_t* memory = nullptr;  ///< a body read into memory (no range requests)
  std::int64_t base = 0;
  std::int64_t size = 0;
  std::int64_t pos = 0;
  std::int64_t cut_at = -1;  ///< where the shard's bytes ended inside the member, or -1
  int cut_error = 0;         ///< the read's error there (0: the bytes just ended)

  static int read(void* opaque, std::uint8_t* buf, int n) {
    auto* r = static_cast<range_reader*>(opaque);
    const std::int64_t left = r->size - r->pos;
    if (left <= 0 || n <= 0) return AVERROR_EOF;
    const auto want = static_cast<int>(std::min<std::int64_t>(left, n));
    int got = 0;
    if (r->inner != nullptr) {
      const std::int64_t at = r->base + r->pos;
      if (avio_tell(r->inner) != at) {
        const std::int64_t s = avio_seek(r->inner, at, SEEK_SET);
        if (s < 0) {
          network_read_failed = network_read_failed || retryable(static_cast<int>(s));
          return static_cast<int>(s);
        }
      }
      got = avio_read(r->inner, buf, want);
      if (got < 0 && got != AVERROR_EOF) {
        if (retryable(got)) {  // the connection lost mid-member
          network_read_failed = true;
          r->cut_at = r->pos;
          r->cut_error = got;
        }
        return got;
      }
      got = std::max(got, 0);
      if (got == 0) network_read_failed = true;
    } else if (r->memory != nullptr) {
      std::memcpy(buf, r->memory + r->base + r->pos, static_cast<std::size_t>(want));
      got = want;
    } else {
#ifdef VBUCKET_FFMPEG_TAR_PREAD
      const std::int64_t g =
          pread_all(r->fd, r->base + r->pos, std::span(buf, static_cast<std::size_t>(want)));
      if (g < 0) return AVERROR(errno);
      got = static_cast<int>(g);
#else
      return AVERROR(ENOSYS);
#endif
    }
    if (got == 0) {  // the shard (or the connection) ends before the member does
      r->cut_at = r->pos;
      return AVERROR(EIO);
    }
    r->pos += got;
    return got;
  }
  static std::int64_t seek(void* opaque, std::int64_t offset, int whence) {
    auto* r = static_cast<range_reader*>(opaque);
    if (whence == AVSEEK_SIZE) return r->size;
    std::int64_t from = 0;
    switch (whence & ~AVSEEK_FORCE) {
      case SEEK_SET:
        from = 0;
        break;
      case SEEK_CUR:
        from = r->pos;
        break;
      case SEEK_END:
        from = r->size;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if ((offset > 0 && from > r->size - offset) || from + offset < 0) return AVERROR(EINVAL);
    r->pos = from + offset;
    return r->pos;
  }
};

/// The input side of one opened clip: what `avformat_open_input` opens (a URL with its
/// options, or an AVIOContext over a tar member) and what it holds open for it.
class media_io {
 public:
  media_io() = default;
  media_io(const media_io&) = delete;
  media_io& operator=(const media_io&) = delete;
  ~media_io() { close(); }

  /// Prepares `name` (a file, a URL, a tar member of a file or a URL): after it, `url()` is
  /// what avformat_open_input opens (or, with `pb()`, only names), with the options it added
  /// to `options`. Returns 0, or a negative AVERROR of a network failure that the caller may
  /// retry; throws `vbucket::error` (naming `name`) for what a retry cannot mend.
  int prepare(const std::string& name, const network_options& net, const AVIOInterruptCB& cb,
              AVDictionary** options) {
    close();
    media_path p = parse_media_path(name);
    network_ = p.url();
    if (!p.in_tar()) {
      if (network_) {
        url_ = name;
        set_http_options(options, net);  // for what a demuxer opens itself (HLS segments)
        return open_url(name, net, cb);
      } else {
        // "file:" so that a colon in a path is not read as a protocol; other protocols
        // (network) are refused, also for playlists that name other files.
        url_ = "file:" + name;
        av_dict_set(options, "protocol_whitelist", "file", 0);
      }
      return 0;
    }
    // A tar member: nothing in it may make a demuxer (HLS, concat, ...) open other files.
    av_dict_set(options, "protocol_whitelist", "none", 0);
    url_ = p.member;  // names the format (its extension) for the format probe
    reader_.base = p.offset;
    reader_.size = p.size;
    if (network_) {
      if (const int rc = open_remote(name, p, net, cb); rc < 0) return rc;
    } else {
      open_local(name, p);
    }
    return alloc_pb();
  }

  /// Frees what `prepare` made (after the format context that used it is closed).
  void close() noexcept {
    if (pb_ != nullptr) {
      av_freep(&pb_->buffer);  // avio may have replaced the buffer it was given
      avio_context_free(&pb_);
    }
    if (reader_.inner != nullptr) avio_closep(&reader_.inner);
    std::vector<std::uint8_t>().swap(body_);
    direct_ = false;
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    if (reader_.fd >= 0) ::close(reader_.fd);
#endif
    reader_ = {};
    url_.clear();
    network_ = false;
  }

  /// Empty, or what ended a tar member's bytes early: "a cut read: ...".
  [[nodiscard]] std::string cut_text() const {
    if (reader_.cut_at < 0) return {};
    return "a cut read: the shard's bytes end at byte " + std::to_string(reader_.cut_at) +
           " of the member's " + std::to_string(reader_.size) +
           (!network_ ? std::string(" (the shard is cut short)")
            : reader_.cut_error < 0
                ? " (the connection failed: " + io_error_text(reader_.cut_error) + ")"
                : std::string(" (the connection closed early)"));
  }

  [[nodiscard]] const std::string& url() const noexcept { return url_; }
  [[nodiscard]] AVIOContext* pb() const noexcept { return direct_ ? reader_.inner : pb_; }
  /// The bytes come over the network (retries, timeouts).
  [[nodiscard]] bool network() const noexcept { return network_; }

  /// For `input::peek`: std::nullopt when this is a plain local file (the caller reads it);
  /// else whether `out` could be read at `pos` without moving the demuxer. Over the network
  /// nothing is peeked (false): each peek would cost a request.
  [[nodiscard]] std::optional<bool> peek(std::int64_t pos, std::span<std::uint8_t> out) const {
    if (pb_ == nullptr && !network_) return std::nullopt;
    if (network_ || reader_.fd < 0) return false;
    const auto n = static_cast<std::int64_t>(out.size());
    if (pos < 0 || pos > reader_.size - n) return false;
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    return pread_all(reader_.fd, reader_.base + pos, out) == n;
#else
    return false;
#endif
  }

 private:
  void open_local(const std::string& name, media_path& p) {
#ifdef VBUCKET_FFMPEG_TAR_PREAD
    reader_.fd = ::open(p.container.c_str(), O_RDONLY | O_CLOEXEC);
    if (reader_.fd < 0)
      throw vbucket::error(name + ": cannot open the shard " + p.container + ": " +
                           std::strerror(errno));
    struct stat st {};
    if (::fstat(reader_.fd, &st) != 0)
      throw vbucket::error(name + ": cannot stat the shard: " + std::strerror(errno));
    const auto total = static_cast<std::int64_t>(st.st_size);
    const int fd = reader_.fd;
    if (p.offset < 0) {
      find_member(
          name, p,
          [fd](std::int64_t pos, std::span<std::uint8_t> out) { return pread_all(fd, pos, out); },
          total);
      return;
    }
    check_range(name, p, total);
    const std::int64_t from = header_window_start(p);
    std::vector<std::uint8_t> headers(static_cast<std::size_t>(p.offset - from));
    if (pread_all(fd, from, headers) != p.offset - from)
      throw vbucket::error(name + ": cannot read the member's tar header");
    if (const auto bad = check_member_header(headers, p)) throw vbucket::error(name + ": " + *bad);
#else
    throw vbucket::error(name + ": tar members are read with pread, which this system lacks");
#endif
  }

  /// A plain URL, opened here (with the interrupt callback) to see whether the server takes
  /// range requests: then FFmpeg's HTTP context is the demuxer's as it is; else (HTTP 200 and
  /// the whole body: every seek would start the body again) the body is read into memory, to
  /// its end by Content-Length (never waiting for a kept-alive connection to close), and the
  /// demuxer reads it there.
  int open_url(const std::string& name, const network_options& net, const AVIOInterruptCB& cb) {
    network_init();
    AVDictionary* opts = nullptr;
    set_http_options(&opts, net);
    const int rc = avio_open2(&reader_.inner, name.c_str(), AVIO_FLAG_READ, &cb, &opts);
    av_dict_free(&opts);
    if (rc < 0) {
      reader_.inner = nullptr;
      return rc;
    }
    if ((reader_.inner->seekable & AVIO_SEEKABLE_NORMAL) != 0) {
      direct_ = true;
      return 0;
    }
    const std::int64_t total = avio_size(reader_.inner);  // Content-Length, or < 0
    auto too_large = [&](std::int64_t bytes) {
      return vbucket::error(name + ": the server ignores range requests, and the file (" +
                            std::to_string(bytes) + " bytes or more) is too large to read into " +
                            "memory instead (at most " + std::to_string(max_body_without_ranges) +
                            ")");
    };
    if (total > max_body_without_ranges) throw too_large(total);
    body_.reserve(static_cast<std::size_t>(std::max<std::int64_t>(total, 0)));
    constexpr int chunk = 1 << 16;
    for (;;) {
      const std::size_t at = body_.size();
      body_.resize(at + chunk);
      const int got = avio_read(reader_.inner, body_.data() + at, chunk);
      body_.resize(at + static_cast<std::size_t>(std::max(got, 0)));
      if (got == AVERROR_EOF || got == 0) break;
      if (got < 0) return got;
      if (static_cast<std::int64_t>(body_.size()) > max_body_without_ranges)
        throw too_large(static_cast<std::int64_t>(body_.size()));
    }
    avio_closep(&reader_.inner);
    if (total >= 0 && static_cast<std::int64_t>(body_.size()) != total)
      return AVERROR(EIO);  // the body ended before its Content-Length: the connection was lost
    reader_.memory = body_.data();
    reader_.base = 0;
    reader_.size = static_cast<std::int64_t>(body_.size());
    return alloc_pb();
  }

  /// The AVIOContext over `reader_` (a tar member, or a body in memory).
  int alloc_pb() {
    constexpr int buffer_size = 1 << 15;
    auto* buffer = static_cast<std::uint8_t*>(av_malloc(buffer_size));
    if (buffer == nullptr) throw std::bad_alloc();
    pb_ = avio_alloc_context(buffer, buffer_size, 0, &reader_, &range_reader::read, nullptr,
                             &range_reader::seek);
    if (pb_ == nullptr) {
      av_free(buffer);
      throw std::bad_alloc();
    }
    return 0;
  }

  static vbucket::error no_ranges(const std::string& name) {
    return vbucket::error(name +
                          ": the server ignores range requests (it answered one with the whole "
                          "shard): a tar member over HTTP needs byte ranges");
  }

  int open_remote(const std::string& name, media_path& p, const network_options& net,
                  const AVIOInterruptCB& cb) {
    network_init();
    AVDictionary* opts = nullptr;
    set_http_options(&opts, net);
    if (p.offset >= 0) {
      // One range request from the member's headers (an extended header may name it) to its
      // end.
      av_dict_set_int(&opts, "offset", header_window_start(p), 0);
      av_dict_set_int(&opts, "end_offset", p.offset + p.size, 0);
      // FFmpeg (5.1) takes the end of such a range, short of the file's end, for a lost
      // connection and reconnects, waiting: a member is read without reconnects (a clip whose
      // connection drops fails, and the loader substitutes it).
      av_dict_set(&opts, "reconnect", "0", 0);
    }
    const int rc = avio_open2(&reader_.inner, p.container.c_str(), AVIO_FLAG_READ, &cb, &opts);
    av_dict_free(&opts);
    if (rc < 0) {
      reader_.inner = nullptr;
      // FFmpeg's HTTP gives EPERM when the reply does not start at the offset asked for: the
      // server ignored the Range header (HTTP 200 with the whole shard).
      if (rc == AVERROR(EPERM) && p.offset > 0) throw no_ranges(name);
      return rc;
    }
    AVIOContext* inner = reader_.inner;
    if ((inner->seekable & AVIO_SEEKABLE_NORMAL) == 0) throw no_ranges(name);
    if (p.offset >= 0) {
      // The context counts from 0 at the `offset` it was opened at, but its seeks go to
      // positions in the shard (and a short one forward reads on): its position is set to the
      // request's start, where HTTP is (nothing is buffered yet), so that the two agree.
      const std::int64_t from = header_window_start(p);
      if (avio_tell(inner) != 0 || inner->buf_ptr != inner->buf_end)
        throw vbucket::error(name + ": the HTTP context read before its first read");
      inner->pos = from;
    }
    const std::int64_t total = avio_size(inner);  // the shard's size (Content-Range), or < 0
    if (p.offset < 0) {
      int failure = 0;  // a read error while listing (a timeout: AVERROR_EXIT) is the result
      const auto read = [inner, &failure](std::int64_t pos,
                                          std::span<std::uint8_t> out) -> std::int64_t {
        if (const std::int64_t s = avio_seek(inner, pos, SEEK_SET); s < 0) {
          failure = static_cast<int>(s);
          return -1;
        }
        const int got = avio_read(inner, out.data(), static_cast<int>(out.size()));
        if (got == AVERROR_EOF) return 0;
        if (got < 0) failure = got;
        return got;
      };
      try {
        find_member(name, p, read, total);
      } catch (const vbucket::error&) {
        if (failure < 0) return failure;
        throw;
      }
      return 0;
    }
    check_range(name, p, total);
    std::vector<std::uint8_t> headers(static_cast<std::size_t>(p.offset - header_window_start(p)));
    const int got = avio_read(inner, headers.data(), static_cast<int>(headers.size()));
    if (got != static_cast<int>(headers.size())) {
      if (got < 0 && got != AVERROR_EOF) return got;
      throw vbucket::error(name + ": cannot read the member's tar header");
    }
    if (const auto bad = check_member_header(headers, p)) throw vbucket::error(name + ": " + *bad);
    return 0;
  }

  /// A path without @OFFSET+SIZE: the member found by listing the shard's headers.
  void find_member(const std::string& name, media_path& p, const tar_read_fn& read,
                   std::int64_t total) {
    for (const tar_member& m : list_tar(read, total, p.container)) {
      if (m.name != p.member) continue;
      p.offset = reader_.base = m.offset;
      p.size = reader_.size = m.size;
      return;
    }
    throw vbucket::error(name + ": the shard has no member " + p.member);
  }

  /// Where the bytes a member's check reads start: its header and the extended header before
  /// it, at a block boundary (data start at one).
  static std::int64_t header_window_start(const media_path& p) noexcept {
    return std::max<std::int64_t>(0, p.offset - 512 - tar_member_lookback);
  }

  static void check_range(const std::string& name, const media_path& p, std::int64_t total) {
    if (p.offset < 512)
      throw vbucket::error(name + ": a member's data start at byte 512 or later, not " +
                           std::to_string(p.offset));
    if (total >= 0 && p.size > total - p.offset)
      throw vbucket::error(name + ": the member (" + std::to_string(p.size) + " bytes at byte " +
                           std::to_string(p.offset) + ") lies past the end of the shard (" +
                           std::to_string(total) + " bytes)");
  }

  std::string url_;
  bool network_ = false;
  bool direct_ = false;             // pb() is FFmpeg's HTTP context itself
  std::vector<std::uint8_t> body_;  // a URL's body, from a server without range requests
  range_reader reader_;
  AVIOContext* pb_ = nullptr;
};

}  // namespace detail
}  // namespace vbucket::ffmpeg
