#pragma once
/// The libav side of `probe` (probe.hpp): compiled in vbucket::ffmpeg (src/probe.cpp).

#include <cmath>        // std::isfinite, std::isnan
#include <cstdint>      // std::int64_t, std::uint8_t
#include <exception>    // std::exception
#include <limits>       // quiet_NaN
#include <new>          // std::bad_alloc
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/probe.hpp"
#include "vbucket/ffmpeg/result.hpp"

namespace vbucket::ffmpeg {

namespace detail {

/// Runs `body` (returning T), turning every exception into an error value.
template <class T, class Body>
result<T> guarded(const std::string& name, Body&& body) noexcept {
  network_read_failed = false;
  try {
    return body();
  } catch (const vbucket::source_unavailable& e) {
    return result<T>::failure(e.what(), true);
  } catch (const vbucket::error& e) {
    // After a shard's connection failed, whatever broke next is the network's doing.
    return result<T>::failure(e.what(), network_read_failed);
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

/// What an MP4/MOV sample table says about one stream, edit list applied.
struct table_count {
  std::int64_t shown = 0;    ///< samples the edit list keeps (not marked discard)
  std::int64_t present = 0;  ///< of those, the ones whose data lie wholly inside the file
  bool prefix = true;        ///< the missing ones (if any) all come after the present ones
  bool zeroed = false;       ///< a sample checked starts with 8 zero bytes (overwritten data)
};

/// Counts the sample table of `st` (MP4/MOV, a table read in full from the header). Reads the
/// first 8 bytes of up to 33 samples spread over the table: no codec's frame starts with 8 zero
/// bytes (length-prefixed NAL units of length 0, start codes 00 00 01, VP9/AV1 headers), so
/// zeros there mean data overwritten (uncompressed video may start so: it is then merely
/// counted by decoding; `check_zeros` false skips these reads). std::nullopt when the table is
/// not there to count.
inline std::optional<table_count> mov_table_count(input& in, AVStream* st, bool check_zeros) {
  AVFormatContext* fmt = in.format();
  const int entries = avformat_index_get_entries_count(st);
  if (!is_mov(fmt) || entries <= 0 || st->nb_frames <= 0 || fmt->pb == nullptr) return std::nullopt;
  const std::int64_t file_size = avio_size(fmt->pb);
  table_count t;
  bool missing = false;
  for (int e = 0; e < entries; ++e) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, e);
    if (ie == nullptr) return std::nullopt;
    if ((ie->flags & AVINDEX_DISCARD_FRAME) != 0) continue;
    ++t.shown;
    const bool inside =
        file_size < 0 || (ie->pos >= 0 && ie->size >= 0 && ie->pos <= file_size - ie->size);
    if (inside) {
      ++t.present;
      t.prefix = t.prefix && !missing;
    } else {
      missing = true;
    }
  }
  if (t.present == 0 || !check_zeros) return t;
  constexpr int checks = 32;
  std::int64_t last_checked = -1;
  for (int k = 0; k <= checks && !t.zeroed; ++k) {
    const auto e = static_cast<int>(static_cast<std::int64_t>(entries - 1) * k / checks);
    if (e == last_checked) continue;
    last_checked = e;
    const AVIndexEntry* ie = avformat_index_get_entry(st, e);
    if (ie == nullptr || ie->size < 8 || ie->pos < 0 ||
        (file_size >= 0 && ie->pos > file_size - ie->size))
      continue;
    std::uint8_t head[8] = {};
    if (!in.peek(ie->pos, head)) continue;
    bool zero = true;
    for (std::uint8_t b : head) zero = zero && b == 0;
    t.zeroed = zero;
  }
  if (in.timed_out()) fail(in.name(), "timed out while checking the sample table");
  return t;
}

/// Fails when an MP4/MOV's sample tables point past the end of the file only (a file cut after
/// its header): before anything reads packets, whose absence gives less clear errors.
inline void check_media_data(input& in) {
  AVFormatContext* fmt = in.format();
  if (!is_mov(fmt)) return;
  std::optional<table_count> missing;
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    AVStream* st = fmt->streams[i];
    if (st->codecpar->codec_type != AVMEDIA_TYPE_VIDEO ||
        (st->disposition & AV_DISPOSITION_ATTACHED_PIC) != 0)
      continue;
    const auto t = mov_table_count(in, st, false);
    if (!t || t->present > 0) return;
    if (t->shown > 0 && !missing) missing = t;
  }
  if (missing)
    fail(in.name(), "no media data: the sample table lists " + std::to_string(missing->shown) +
                        " frames, the file ends at byte " + std::to_string(avio_size(fmt->pb)) +
                        " before the first one's data (cut after the header?)");
}

inline video_info probe_input(const source& src, const probe_options& opt) {
  input in(src, opt.limits);
  AVFormatContext* fmt = in.format();
  const bool image = is_image_format(fmt);
  if (!image) check_media_data(in);
  {
    // The header alone gives sizes and rates for most containers; otherwise read some packets.
    // With several video streams, always: the choice among them weighs what the packets show,
    // and decode_clip reads them too, so both choose the same stream.
    const AVStream* st = nullptr;
    for (unsigned i = 0; i < fmt->nb_streams && st == nullptr; ++i)
      if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) st = fmt->streams[i];
    if (image || st == nullptr || st->codecpar->width <= 0 || st->codecpar->height <= 0 ||
        std::isnan(rate_of(st->avg_frame_rate)) || in.video_candidates() > 1)
      in.find_stream_info();
  }
  const int index = in.video_stream();
  AVStream* st = fmt->streams[index];
  video_info info;
  info.codec = avcodec_get_name(st->codecpar->codec_id);
  info.coded_height = st->codecpar->height;
  info.coded_width = st->codecpar->width;
  check_size(in.name(), info.coded_height, info.coded_width, opt.limits);
  const AVRational raw_sar = stream_sar(st->sample_aspect_ratio, st->codecpar->sample_aspect_ratio);
  const AVRational sar = usable_sar(raw_sar);
  if (raw_sar.num > 0 && raw_sar.den > 0 && sar.num == 1 && sar.den == 1 &&
      raw_sar.num != raw_sar.den)
    info.warning = "sample aspect ratio " + std::to_string(raw_sar.num) + ":" +
                   std::to_string(raw_sar.den) +
                   " ignored (beyond 1:" + std::to_string(max_sar_stretch) + " to " +
                   std::to_string(max_sar_stretch) + ":1)";
  info.sar_num = sar.num;
  info.sar_den = sar.den;
  const std::int64_t shown_width = display_width(info.coded_width, sar);
  info.rotation = display_rotation(st);
  const bool swap = info.rotation == 90 || info.rotation == 270;
  info.height = swap ? shown_width : info.coded_height;
  info.width = swap ? info.coded_height : shown_width;
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
  auto add_warning = [&](const std::string& w) {
    info.warning = info.warning.empty() ? w : info.warning + "; " + w;
  };
  bool decode = opt.always_decode_count || st->nb_frames <= 0;
  std::optional<table_count> table;
  if (!decode) table = mov_table_count(in, st, true);
  std::string damage;  // why the table is not trusted
  if (table) {
    const std::int64_t file_size = avio_size(fmt->pb);
    if (table->present == 0)
      fail(in.name(),
           table->shown == 0
               ? "the edit list leaves no frame of the " +
                     std::to_string(avformat_index_get_entries_count(st)) + " in the sample table"
               : "no media data: the sample table lists " + std::to_string(table->shown) +
                     " frames, the file ends at byte " + std::to_string(file_size) +
                     " before the first one's data (cut after the header?)");
    if (table->zeroed) {
      damage = "damaged: media data overwritten with zeros; ";
    } else if (!table->prefix) {
      damage = "damaged: the data of " + std::to_string(table->shown - table->present) +
               " frames lie past the end of the file, not all at the end; ";
    } else {
      info.num_frames = table->present;
      info.counted_by = frame_count_method::container;
      if (table->present < table->shown) {
        add_warning("cut short: the sample table lists " + std::to_string(table->shown) +
                    " frames, the data of " + std::to_string(table->present) +
                    " are in the file (counted)");
        if (std::isfinite(info.duration) && table->shown > 0)
          info.duration *= static_cast<double>(table->present) / static_cast<double>(table->shown);
      }
    }
    decode = !damage.empty();
  } else if (!decode) {
    info.num_frames = st->nb_frames;
    info.counted_by = frame_count_method::container;
    // AVI: the header's length may count time-base units, not frames (see avi_index_table);
    // a complete index has one chunk per frame.
    if (is_avi(fmt)) {
      const auto avi_index = avi_index_table(st);
      if (!avi_index.empty()) info.num_frames = static_cast<std::int64_t>(avi_index.size());
    }
  }
  if (decode) {
    info.num_frames = decode_count(in, index, opt);
    info.counted_by = frame_count_method::decoded;
    if (info.num_frames == 0) fail(in.name(), damage + "no frame could be decoded");
    if (!damage.empty())
      add_warning(damage + std::to_string(info.num_frames) + " of " + std::to_string(table->shown) +
                  " frames decode (counted by decoding; clips across the damage fail)");
  }
  if (!std::isfinite(info.duration) && std::isfinite(info.fps))
    info.duration = static_cast<double>(info.num_frames) / info.fps;
  return info;
}

}  // namespace detail

}  // namespace vbucket::ffmpeg
