#pragma once
/// The FFmpeg C API behind vbucket::ffmpeg: owning wrappers (every AVFormatContext,
/// AVCodecContext, AVFrame, AVPacket, SwsContext and custom AVIOContext is freed on every path),
/// an opened input (a file, a URL, a tar member, or a block of memory; media_source.hpp) with an
/// interrupt deadline and retries of a network open, the choice of the
/// video stream, an opened decoder, and FFmpeg error strings. Internals: failures throw
/// `vbucket::error`, which the public functions turn into error values.

#include <algorithm>    // std::min
#include <chrono>       // std::chrono::steady_clock
#include <cmath>        // std::lround, std::isnan
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint8_t
#include <cstring>      // std::memcpy
#include <memory>       // std::unique_ptr
#include <new>          // std::bad_alloc
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <thread>       // std::this_thread::sleep_for (waits between retries)
#include <vector>       // std::vector

#if __has_include(<unistd.h>) && __has_include(<fcntl.h>)
#include <fcntl.h>   // open, posix_fadvise
#include <unistd.h>  // pread, close
#define VBUCKET_FFMPEG_PREAD 1
#endif

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/display.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libavutil/pixdesc.h>
#include <libavutil/rational.h>
#include <libswscale/swscale.h>
}

#include "vbucket/base/error.hpp"
#include "vbucket/ffmpeg/limits.hpp"
#include "vbucket/ffmpeg/media_source.hpp"
#include "vbucket/load/clip_decoder.hpp"  // source_unavailable

namespace vbucket::ffmpeg {

namespace detail {

inline std::string av_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(code, text, sizeof text) < 0) return "FFmpeg error " + std::to_string(code);
  return text;
}

[[noreturn]] inline void fail(const std::string& name, const std::string& what) {
  throw vbucket::error(name + ": " + what);
}
/// A failure of the network, which may pass (the loader waits and tries again).
[[noreturn]] inline void fail_unavailable(const std::string& name, const std::string& what) {
  throw vbucket::source_unavailable(name + ": " + what);
}

struct format_closer {
  void operator()(AVFormatContext* p) const noexcept { avformat_close_input(&p); }
};
struct codec_freer {
  void operator()(AVCodecContext* p) const noexcept { avcodec_free_context(&p); }
};
struct frame_freer {
  void operator()(AVFrame* p) const noexcept { av_frame_free(&p); }
};
struct packet_freer {
  void operator()(AVPacket* p) const noexcept { av_packet_free(&p); }
};
struct sws_freer {
  void operator()(SwsContext* p) const noexcept { sws_freeContext(p); }
};
struct avio_freer {
  void operator()(AVIOContext* p) const noexcept {
    if (p == nullptr) return;
    av_freep(&p->buffer);  // avio may have replaced the buffer it was given
    avio_context_free(&p);
  }
};
struct av_freer {
  void operator()(std::uint8_t* p) const noexcept { av_free(p); }
};

using format_ptr = std::unique_ptr<AVFormatContext, format_closer>;
using codec_ptr = std::unique_ptr<AVCodecContext, codec_freer>;
using frame_ptr = std::unique_ptr<AVFrame, frame_freer>;
using packet_ptr = std::unique_ptr<AVPacket, packet_freer>;
using sws_ptr = std::unique_ptr<SwsContext, sws_freer>;
using avio_ptr = std::unique_ptr<AVIOContext, avio_freer>;
using av_buffer_ptr = std::unique_ptr<std::uint8_t, av_freer>;

inline frame_ptr make_frame() {
  frame_ptr f(av_frame_alloc());
  if (!f) throw std::bad_alloc();
  return f;
}
inline packet_ptr make_packet() {
  packet_ptr p(av_packet_alloc());
  if (!p) throw std::bad_alloc();
  return p;
}

/// Where the bytes come from: a file path, or memory (then `name` is only used in messages).
struct source {
  std::string name;
  std::span<const std::uint8_t> memory{};
  bool in_memory = false;
};

/// Read/seek callbacks of the custom AVIOContext over a block of memory.
struct memory_reader {
  const std::uint8_t* data = nullptr;
  std::int64_t size = 0;
  std::int64_t pos = 0;

  static int read(void* opaque, std::uint8_t* buf, int n) {
    auto* r = static_cast<memory_reader*>(opaque);
    const std::int64_t left = r->size - r->pos;
    if (left <= 0 || n <= 0) return AVERROR_EOF;
    const auto count = static_cast<int>(std::min<std::int64_t>(left, n));
    std::memcpy(buf, r->data + r->pos, static_cast<std::size_t>(count));
    r->pos += count;
    return count;
  }
  static std::int64_t seek(void* opaque, std::int64_t offset, int whence) {
    auto* r = static_cast<memory_reader*>(opaque);
    if (whence == AVSEEK_SIZE) return r->size;
    std::int64_t base = 0;
    switch (whence & ~AVSEEK_FORCE) {
      case SEEK_SET:
        base = 0;
        break;
      case SEEK_CUR:
        base = r->pos;
        break;
      case SEEK_END:
        base = r->size;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if ((offset > 0 && base > r->size - offset) || base + offset < 0) return AVERROR(EINVAL);
    r->pos = base + offset;
    return r->pos;
  }
};

/// An opened input with a chosen video stream. Not movable: FFmpeg holds pointers into it
/// (the interrupt deadline, the memory reader).
class input {
 public:
  input(const source& src, const limits& lim)
      : name_(src.name),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(lim.timeout_seconds))) {
    in_memory_ = src.in_memory;
    const network_options& net = lim.network;
    for (int attempt = 0;; ++attempt) {
      const int rc = open(src, lim);
      if (rc >= 0) break;
      const bool unavailable = io_.network() && (retryable(rc) || !io_.cut_text().empty());
      if (interrupted(this) != 0) {
        const std::string what =
            "timed out while opening (deadline " + std::to_string(lim.timeout_seconds) + " s" +
            (attempt > 0 ? ", " + std::to_string(attempt + 1) + " attempts" : "") + ")";
        if (io_.network()) fail_unavailable(name_, what);
        fail(name_, what);
      }
      if (!unavailable || attempt >= net.retries) {
        const std::string what =
            "cannot open: " + io_failure_text(rc) +
            (attempt > 0 ? " (" + std::to_string(attempt + 1) + " attempts)" : "");
        if (unavailable) fail_unavailable(name_, what);
        fail(name_, what);
      }
      // Backoff before the next attempt, never past the deadline.
      auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(net.retry_backoff_seconds *
                                        double(1 << std::min(attempt, 16))));
      wait = std::min(wait, deadline_ - std::chrono::steady_clock::now());
      if (wait > wait.zero()) std::this_thread::sleep_for(wait);
    }
  }
  input(const input&) = delete;
  input& operator=(const input&) = delete;
  ~input() {
#ifdef VBUCKET_FFMPEG_PREAD
    if (peek_fd_ >= 0) ::close(peek_fd_);
#endif
  }

  /// Reads `out.size()` bytes at byte `pos` of the input without moving the demuxer, and
  /// without reading a buffer's worth around them as the demuxer's AVIOContext would (a scan
  /// peeks at a few spots of every file). False if they cannot all be read.
  [[nodiscard]] bool peek(std::int64_t pos, std::span<std::uint8_t> out) {
    const auto n = static_cast<std::int64_t>(out.size());
    if (pos < 0) return false;
    if (const auto done = io_.peek(pos, out)) return *done;  // a tar member or a URL
    if (in_memory_) {
      if (pos > reader_.size - n) return false;
      std::memcpy(out.data(), reader_.data + pos, out.size());
      return true;
    }
#ifdef VBUCKET_FFMPEG_PREAD
    if (peek_fd_ == -1) {
      peek_fd_ = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
      if (peek_fd_ < 0) {
        peek_fd_ = -2;  // tried
      } else {
        (void)::posix_fadvise(peek_fd_, 0, 0, POSIX_FADV_RANDOM);  // no read-ahead
      }
    }
    if (peek_fd_ >= 0) {
      const ssize_t got = ::pread(peek_fd_, out.data(), out.size(), static_cast<off_t>(pos));
      return got == static_cast<ssize_t>(out.size());
    }
#endif
    // Without pread: through the demuxer's AVIOContext (the demuxers seek before each read).
    AVIOContext* pb = format()->pb;
    if (pb == nullptr || avio_seek(pb, pos, SEEK_SET) < 0) return false;
    return avio_read(pb, out.data(), static_cast<int>(out.size())) == static_cast<int>(n);
  }

  /// Called when a read failed or ended early (`rc`, av_read_frame's): over the network, a
  /// read error or a connection lost before the body's end (a tar member cut mid-read) throws
  /// `source_unavailable` naming it; a timeout throws. A local file's read error ends it.
  void check_read_failure(int rc) const {
    const bool timeout = timed_out();
    const std::string cut = io_.cut_text();
    if (!cut.empty() && !io_.network()) fail(name_, cut);
    if (io_.network()) {
      if (timeout) fail_unavailable(name_, "timed out while reading");
      if (!cut.empty()) fail_unavailable(name_, cut);
      const AVIOContext* pb = format() != nullptr ? format()->pb : nullptr;
      const int err = rc != AVERROR_EOF ? rc : (pb != nullptr ? pb->error : 0);
      if (err < 0 && err != AVERROR_EOF && retryable(err))
        fail_unavailable(name_, "read failed: " + av_error_text(err));
    }
    if (timeout) fail(name_, "timed out while reading");
  }

  [[nodiscard]] AVFormatContext* format() const noexcept { return format_.get(); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool timed_out() const noexcept {
    return std::chrono::steady_clock::now() > deadline_;
  }

  /// avformat_find_stream_info, needed when the header alone does not give the sizes.
  void find_stream_info() {
    const int rc = avformat_find_stream_info(format(), nullptr);
    if (rc < 0) {
      if (timed_out()) fail(name_, "timed out while reading stream information");
      fail(name_, "cannot read stream information: " + av_error_text(rc));
    }
  }

  /// The video streams that can be chosen: cover art (attached pictures) does not count.
  [[nodiscard]] int video_candidates() const noexcept {
    int n = 0;
    for (unsigned i = 0; i < format()->nb_streams; ++i) {
      const AVStream* st = format()->streams[i];
      n += st->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
           (st->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0;
    }
    return n;
  }

  /// The index of the video stream to use: FFmpeg's own choice, `av_find_best_stream` (what
  /// players built on libavformat show: a stream not marked for the hearing or visually
  /// impaired, then the default disposition, then the most frames seen while probing, then the
  /// highest bit rate, then the first), among the streams that are not cover art. Callers run
  /// `find_stream_info` first when there is more than one candidate, so that probe and decode
  /// see the same frame counts and choose the same stream. Throws if there is none.
  [[nodiscard]] int video_stream() const {
    if (video_candidates() == 0) {
      bool audio = false;
      for (unsigned i = 0; i < format()->nb_streams; ++i)
        audio = audio || format()->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO;
      fail(name_, audio ? "no video stream (audio only)" : "no video stream");
    }
    // av_find_best_stream has no notion of cover art: it is hidden from it for the call (our
    // own context, restored before anything else reads it).
    AVFormatContext* fmt = format();
    std::vector<AVCodecParameters*> hidden;
    hidden.reserve(fmt->nb_streams);  // no allocation (and no throw) while streams are hidden
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
      AVCodecParameters* par = fmt->streams[i]->codecpar;
      if ((fmt->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC) != 0 &&
          par->codec_type == AVMEDIA_TYPE_VIDEO) {
        hidden.push_back(par);
        par->codec_type = AVMEDIA_TYPE_UNKNOWN;
      }
    }
    const int best = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    for (AVCodecParameters* par : hidden) par->codec_type = AVMEDIA_TYPE_VIDEO;
    if (best < 0 || static_cast<unsigned>(best) >= fmt->nb_streams)
      fail(name_, "no video stream: " + av_error_text(best));
    return best;
  }

  /// Drops every packet of the other streams in the demuxer.
  void discard_others(int keep) const noexcept {
    for (unsigned i = 0; i < format()->nb_streams; ++i)
      if (static_cast<int>(i) != keep) format()->streams[i]->discard = AVDISCARD_ALL;
  }

 private:
  /// One attempt at opening: 0, or a negative AVERROR (a network failure may be retried).
  int open(const source& src, const limits& lim) {
    format_.reset();
    avio_.reset();
    io_.close();
    AVDictionary* options = nullptr;
    struct dict_freer {
      AVDictionary** d;
      ~dict_freer() { av_dict_free(d); }
    } free_options{&options};
    std::string url;
    const AVIOInterruptCB interrupt{&input::interrupted, this};
    if (src.in_memory) {
      reader_.data = src.memory.data();
      reader_.size = static_cast<std::int64_t>(src.memory.size());
      constexpr int buffer_size = 1 << 15;
      auto* buffer = static_cast<std::uint8_t*>(av_malloc(buffer_size));
      if (buffer == nullptr) throw std::bad_alloc();
      avio_.reset(avio_alloc_context(buffer, buffer_size, 0, &reader_, &memory_reader::read,
                                     nullptr, &memory_reader::seek));
      if (!avio_) {
        av_free(buffer);
        throw std::bad_alloc();
      }
      // Nothing in memory may make a demuxer (HLS, concat, ...) open other files.
      av_dict_set(&options, "protocol_whitelist", "none", 0);
    } else {
      const int rc = io_.prepare(src.name, lim.network, interrupt, &options);
      if (rc < 0) return rc;
      url = io_.url();
    }
    AVFormatContext* raw = avformat_alloc_context();
    if (raw == nullptr) throw std::bad_alloc();
    raw->interrupt_callback = interrupt;
    if (AVIOContext* pb = src.in_memory ? avio_.get() : io_.pb()) {
      raw->pb = pb;
      raw->flags |= AVFMT_FLAG_CUSTOM_IO;
    }
    // A '%' in a file name is not an image-sequence pattern.
    av_dict_set(&options, "pattern_type", "none", 0);
    const int rc = avformat_open_input(&raw, url.c_str(), nullptr, &options);
    if (rc < 0) return rc;  // FFmpeg freed `raw`
    format_.reset(raw);
    return 0;
  }

  /// The open's error text; a tar member's reader may say more (its shard cut short).
  [[nodiscard]] std::string io_failure_text(int rc) const {
    if (const std::string cut = io_.cut_text(); !cut.empty()) return cut;
    return av_error_text(rc);
  }

  static int interrupted(void* opaque) noexcept {
    return static_cast<const input*>(opaque)->timed_out() ? 1 : 0;
  }

  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  bool in_memory_ = false;
  int peek_fd_ = -1;  // a second descriptor for peek(); -2: could not be opened
  memory_reader reader_;
  avio_ptr avio_;  // destroyed after format_ (members are destroyed in reverse order)
  media_io io_;    // likewise: a file, a URL or a tar member (media_source.hpp)
  format_ptr format_;
};

/// Checks a frame size against the limits.
inline void check_size(const std::string& name, std::int64_t height, std::int64_t width,
                       const limits& lim) {
  if (height <= 0 || width <= 0)
    fail(name, "video stream has no valid size (" + std::to_string(width) + "x" +
                   std::to_string(height) + ")");
  if (height > lim.max_side || width > lim.max_side || height * width > lim.max_pixels)
    fail(name, "frame size " + std::to_string(width) + "x" + std::to_string(height) +
                   " is beyond the limits (sides up to " + std::to_string(lim.max_side) + ", " +
                   std::to_string(lim.max_pixels) + " pixels)");
}

/// Clockwise rotation, in degrees (0, 90, 180 or 270), that the stream's display matrix asks
/// for; 0 without one. Angles are rounded to the nearest quarter turn.
inline int display_rotation(const AVStream* st) noexcept {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
#if LIBAVFORMAT_VERSION_MAJOR >= 61
  const AVPacketSideData* sd = av_packet_side_data_get(
      st->codecpar->coded_side_data, st->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
  if (sd != nullptr) {
    data = sd->data;
    size = sd->size;
  }
#else
  data = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
#endif
  if (data == nullptr || size < 9 * sizeof(std::int32_t)) return 0;
  std::int32_t matrix[9];
  std::memcpy(matrix, data, sizeof matrix);
  const double ccw = av_display_rotation_get(matrix);
  if (std::isnan(ccw)) return 0;
  long quarter = std::lround(-ccw / 90.0) % 4;
  if (quarter < 0) quarter += 4;
  return static_cast<int>(quarter * 90);
}

/// The largest stretch a sample aspect ratio may ask for (either way); beyond it the ratio is
/// taken for damage and ignored (real ones are from about 1:2 to 2:1).
inline constexpr int max_sar_stretch = 8;

/// `sar` reduced, when it can be applied: positive, from 1:8 to 8:1. Else 1:1 (unknown: 0/1,
/// FFmpeg's "undefined"; or implausible).
inline AVRational usable_sar(AVRational sar) noexcept {
  if (sar.num <= 0 || sar.den <= 0) return {1, 1};
  if (static_cast<std::int64_t>(sar.num) > std::int64_t{max_sar_stretch} * sar.den ||
      static_cast<std::int64_t>(sar.den) > std::int64_t{max_sar_stretch} * sar.num)
    return {1, 1};
  AVRational r{1, 1};
  av_reduce(&r.num, &r.den, sar.num, sar.den, std::int64_t{1} << 30);
  return r;
}

/// The sample aspect ratio as FFmpeg's own tools take it (av_guess_sample_aspect_ratio): the
/// container's (AVStream's: MP4 `pasp`, Matroska display size, ...) when it records one, else
/// `decoder`'s (the frame's, or the codec parameters' that avformat_find_stream_info filled in).
/// Raw: check with usable_sar.
inline AVRational stream_sar(AVRational container, AVRational decoder) noexcept {
  return container.num > 0 && container.den > 0 ? container : decoder;
}

/// The width a `width`-pixel row is shown at under sample aspect ratio `sar` (usable_sar'd):
/// width · sar rounded to the nearest integer (halves up), at least 1. The height is kept, as
/// players (and ffmpeg's `scale=iw*sar:ih`) do.
inline std::int64_t display_width(std::int64_t width, AVRational sar) noexcept {
  if (sar.num == sar.den) return width;
  const std::int64_t w = (2 * width * sar.num + sar.den) / (2 * static_cast<std::int64_t>(sar.den));
  return std::max<std::int64_t>(1, w);
}

/// True for the MP4/MOV demuxer, whose index is the sample table (edit lists applied: samples
/// before the edit are marked AVINDEX_DISCARD_FRAME, their packets AV_PKT_FLAG_DISCARD).
inline bool is_mov(const AVFormatContext* fmt) noexcept {
  return fmt->iformat != nullptr && fmt->iformat->name != nullptr &&
         std::string_view(fmt->iformat->name).substr(0, 4) == "mov,";
}

/// One packet of the video stream, in decode order: where it lies and what it holds.
struct packet_entry {
  std::int64_t pos = -1;
  std::int64_t dts = AV_NOPTS_VALUE;
  int size = 0;
  bool key = false;
};

inline bool is_avi(const AVFormatContext* fmt) noexcept {
  return fmt->iformat != nullptr && fmt->iformat->name != nullptr &&
         std::string_view(fmt->iformat->name) == "avi";
}

/// AVI: the stream's packets from the file's index (idx1 or OpenDML), read with the header.
/// Empty unless it is complete (one entry per frame the header announces, each `step` time-base
/// units after the last) and lists no empty chunk (the demuxer skips those: they would not be
/// packets). The header's length is in time-base units: ffmpeg writes H.264 with B-frames at
/// a time base of half the frame duration, so its length is twice the frames.
inline std::vector<packet_entry> avi_index_table(AVStream* st) {
  const int entries = avformat_index_get_entries_count(st);
  if (entries < 2) return {};
  std::vector<packet_entry> table;
  table.reserve(static_cast<std::size_t>(entries));
  std::int64_t step = 0;
  for (int e = 0; e < entries; ++e) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, e);
    if (ie == nullptr || ie->size <= 0) return {};
    if (e == 1) step = ie->timestamp;
    // A video chunk's time is its count of chunks before it (in steps of the time base).
    if (e > 0 && (step <= 0 || ie->timestamp != e * step)) return {};
    if (e == 0 && ie->timestamp != 0) return {};
    table.push_back({ie->pos, ie->timestamp, ie->size, (ie->flags & AVINDEX_KEYFRAME) != 0});
  }
  // The header's length (frames, or time-base steps) must agree: chunks missing from the index
  // would shift the frame numbers.
  if (st->nb_frames != entries && st->nb_frames != entries * step) return {};
  return table;
}

/// MP4/MOV: true when `pkt` holds less than its sample table entry (the file ends inside the
/// sample: the demuxer returns what is there, unflagged). Such a packet is not a frame.
inline bool cut_short(AVStream* st, const AVPacket* pkt) noexcept {
  if (pkt->dts == AV_NOPTS_VALUE) return false;
  const int e = av_index_search_timestamp(st, pkt->dts, AVSEEK_FLAG_ANY | AVSEEK_FLAG_BACKWARD);
  if (e < 0) return false;
  const AVIndexEntry* ie = avformat_index_get_entry(st, e);
  return ie != nullptr && ie->timestamp == pkt->dts && ie->pos == pkt->pos && pkt->size < ie->size;
}

/// An opened decoder for one stream.
/// How a decoder is opened beyond the request (null: software decoding): a hardware device
/// context (FFmpeg's hw_device_ctx; the decoder takes its own reference) and the get_format
/// callback that picks the hardware pixel format, with the context's `opaque` for it.
struct decoder_setup {
  AVBufferRef* hw_device = nullptr;
  AVPixelFormat (*get_format)(AVCodecContext*, const AVPixelFormat*) = nullptr;
  void* opaque = nullptr;
};

inline codec_ptr open_decoder(const input& in, const AVStream* st, int threads, const limits& lim,
                              const decoder_setup* setup = nullptr) {
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (codec == nullptr)
    fail(in.name(),
         std::string("no decoder for codec ") + avcodec_get_name(st->codecpar->codec_id));
  codec_ptr ctx(avcodec_alloc_context3(codec));
  if (!ctx) throw std::bad_alloc();
  int rc = avcodec_parameters_to_context(ctx.get(), st->codecpar);
  if (rc < 0) fail(in.name(), "cannot set up the decoder: " + av_error_text(rc));
  ctx->pkt_timebase = st->time_base;
  ctx->thread_count = threads < 0 ? 0 : threads;
  if (threads != 1) ctx->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  ctx->max_pixels = lim.max_pixels;
  if (setup != nullptr && setup->hw_device != nullptr) {
    ctx->hw_device_ctx = av_buffer_ref(setup->hw_device);
    if (ctx->hw_device_ctx == nullptr) throw std::bad_alloc();
    ctx->get_format = setup->get_format;
    ctx->opaque = setup->opaque;
  }
  rc = avcodec_open2(ctx.get(), codec, nullptr);
  if (rc < 0)
    fail(in.name(),
         std::string("cannot open the ") + codec->name + " decoder: " + av_error_text(rc));
  return ctx;
}

/// A frame's presentation timestamp (the decoder's best guess when the frame has none).
inline std::int64_t frame_pts(const AVFrame* f) noexcept {
  return f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
}

}  // namespace detail
}  // namespace vbucket::ffmpeg
