#pragma once
/// Probing a media file: frames, display height and width, average frame rate, duration, codec
/// and display rotation. The frame count comes from the container when it records one;
/// otherwise the stream is decoded and its frames counted (`info.counted_by` says which).
/// Images (PNG, JPEG, ...) probe as one frame with an unknown (NaN) frame rate.
///
///     auto info = vbucket::ffmpeg::probe("clip.mp4");
///     if (info) std::printf("%lld frames\n", (long long)info->num_frames);

#include <cmath>        // std::isfinite, std::isnan
#include <cstdint>      // std::int64_t, std::uint8_t
#include <exception>    // std::exception
#include <limits>       // quiet_NaN
#include <new>          // std::bad_alloc
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/result.hpp"

namespace vbucket::ffmpeg {

/// Where a probe's frame count comes from.
enum class frame_count_method {
  container,  ///< the container's header (e.g. MP4's sample table)
  decoded,    ///< every frame decoded and counted (the container records no count)
  image,      ///< a still image: one frame
};

inline constexpr std::string_view to_string(frame_count_method m) noexcept {
  switch (m) {
    case frame_count_method::container:
      return "container";
    case frame_count_method::decoded:
      return "decoded";
    case frame_count_method::image:
      return "image";
  }
  return "?";
}

/// What `probe` finds. `height` and `width` are the display sizes (after the rotation), which
/// is what bucketing needs; a `video_meta` (members num_frames, height, width, fps).
struct video_info {
  std::int64_t num_frames = 0;
  std::int64_t height = 0;  ///< display height (coded width when rotated by 90 or 270)
  std::int64_t width = 0;
  double fps = std::numeric_limits<double>::quiet_NaN();       ///< average rate; NaN for images
  double duration = std::numeric_limits<double>::quiet_NaN();  ///< seconds; NaN if unknown
  std::string codec;  ///< FFmpeg's codec name: "h264", "vp9", "png", ...
  int rotation = 0;   ///< clockwise display rotation: 0, 90, 180 or 270
  std::int64_t coded_height = 0;
  std::int64_t coded_width = 0;
  frame_count_method counted_by = frame_count_method::container;
};

struct probe_options {
  /// Count frames by decoding even when the container records a count.
  bool always_decode_count = false;
  /// Decoder threads for a decode count (0 = FFmpeg's choice).
  int threads = 1;
  ffmpeg::limits limits{};
};

namespace detail {

/// Runs `body` (returning T), turning every exception into an error value.
template <class T, class Body>
result<T> guarded(const std::string& name, Body&& body) noexcept {
  try {
    return body();
  } catch (const vbucket::error& e) {
    return result<T>::failure(e.what());
  } catch (const std::bad_alloc&) {
    return result<T>::failure(vbucket::error(name + ": out of memory").what());
  } catch (const std::exception& e) {
    return result<T>::failure(vbucket::error(name + ": " + e.what()).what());
  }
}

inline bool is_image_format(const AVFormatContext* fmt) noexcept {
  const std::string_view name = fmt->iformat->name;
  return name == "image2" ||
         (name.size() > 5 && name.substr(name.size() - 5) == "_pipe");  // png_pipe, jpeg_pipe
}

inline double rate_of(AVRational r) noexcept {
  if (r.num <= 0 || r.den <= 0) return std::numeric_limits<double>::quiet_NaN();
  return av_q2d(r);
}

/// Decodes every frame of stream `index` and counts them (the fallback when the container
/// records no count). Loop filters are skipped: they change pixels, not the count.
inline std::int64_t decode_count(input& in, int index, const probe_options& opt) {
  AVStream* st = in.format()->streams[index];
  codec_ptr ctx = open_decoder(in, st, opt.threads, opt.limits);
  ctx->skip_loop_filter = AVDISCARD_ALL;
  ctx->flags2 |= AV_CODEC_FLAG2_FAST;
  in.discard_others(index);
  packet_ptr pkt = make_packet();
  frame_ptr frame = make_frame();
  std::int64_t frames = 0, since_frame = 0;
  auto drain = [&] {
    for (;;) {
      const int rc = avcodec_receive_frame(ctx.get(), frame.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0)
        fail(in.name(), "cannot decode frame " + std::to_string(frames) + ": " + av_error_text(rc));
      check_size(in.name(), frame->height, frame->width, opt.limits);
      ++frames;
      since_frame = 0;
      av_frame_unref(frame.get());
    }
  };
  for (;;) {
    const int rc = av_read_frame(in.format(), pkt.get());
    if (rc == AVERROR_EOF) break;
    if (rc < 0) {
      if (in.timed_out()) fail(in.name(), "timed out while counting frames");
      fail(in.name(),
           "cannot read after frame " + std::to_string(frames) + ": " + av_error_text(rc));
    }
    if (in.timed_out()) {
      av_packet_unref(pkt.get());
      fail(in.name(), "timed out while counting frames");
    }
    if (pkt->stream_index == index) {
      const int sent = avcodec_send_packet(ctx.get(), pkt.get());
      av_packet_unref(pkt.get());
      if (sent < 0 && sent != AVERROR(EAGAIN) && sent != AVERROR_INVALIDDATA)
        fail(in.name(),
             "cannot decode after frame " + std::to_string(frames) + ": " + av_error_text(sent));
      if (++since_frame > opt.limits.max_packets_without_frame)
        fail(in.name(), "no frame decoded from " + std::to_string(since_frame) + " packets");
      drain();
    } else {
      av_packet_unref(pkt.get());
    }
  }
  avcodec_send_packet(ctx.get(), nullptr);
  drain();
  return frames;
}

inline video_info probe_input(const source& src, const probe_options& opt) {
  input in(src, opt.limits);
  AVFormatContext* fmt = in.format();
  const bool image = is_image_format(fmt);
  {
    // The header alone gives sizes and rates for most containers; otherwise read some packets.
    const AVStream* st = nullptr;
    for (unsigned i = 0; i < fmt->nb_streams && st == nullptr; ++i)
      if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) st = fmt->streams[i];
    if (image || st == nullptr || st->codecpar->width <= 0 || st->codecpar->height <= 0 ||
        std::isnan(rate_of(st->avg_frame_rate)))
      in.find_stream_info();
  }
  const int index = in.video_stream();
  AVStream* st = fmt->streams[index];
  video_info info;
  info.codec = avcodec_get_name(st->codecpar->codec_id);
  info.coded_height = st->codecpar->height;
  info.coded_width = st->codecpar->width;
  check_size(in.name(), info.coded_height, info.coded_width, opt.limits);
  info.rotation = display_rotation(st);
  const bool swap = info.rotation == 90 || info.rotation == 270;
  info.height = swap ? info.coded_width : info.coded_height;
  info.width = swap ? info.coded_height : info.coded_width;
  if (image) {
    info.num_frames = 1;
    info.counted_by = frame_count_method::image;
    return info;
  }
  info.fps = rate_of(st->avg_frame_rate);
  if (!std::isfinite(info.fps)) info.fps = rate_of(st->r_frame_rate);
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0) {
    info.duration = static_cast<double>(st->duration) * av_q2d(st->time_base);
  } else if (fmt->duration != AV_NOPTS_VALUE && fmt->duration > 0) {
    info.duration = static_cast<double>(fmt->duration) / AV_TIME_BASE;
  }
  if (st->nb_frames > 0 && !opt.always_decode_count) {
    info.num_frames = st->nb_frames;
    info.counted_by = frame_count_method::container;
  } else {
    info.num_frames = decode_count(in, index, opt);
    info.counted_by = frame_count_method::decoded;
    if (info.num_frames == 0) fail(in.name(), "no frame could be decoded");
  }
  if (!std::isfinite(info.duration) && std::isfinite(info.fps))
    info.duration = static_cast<double>(info.num_frames) / info.fps;
  return info;
}

}  // namespace detail

/// Probes the file at `path`. Errors (missing, unreadable, not a video, corrupt, absurd sizes)
/// come back as an error value whose message names the file.
inline result<video_info> probe(const std::string& path, const probe_options& opt = {}) noexcept {
  return detail::guarded<video_info>(path, [&] {
    return detail::probe_input(detail::source{path, {}, false}, opt);
  });
}

/// Probes a file held in memory; `name` is used in messages only.
inline result<video_info> probe_memory(std::span<const std::uint8_t> data, const std::string& name,
                                       const probe_options& opt = {}) noexcept {
  return detail::guarded<video_info>(name, [&] {
    return detail::probe_input(detail::source{name, data, true}, opt);
  });
}

}  // namespace vbucket::ffmpeg
