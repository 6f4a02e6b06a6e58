#pragma once
/// The libav side of clip decoding and indexing (decode.hpp): compiled in vbucket::ffmpeg
/// (src/decode.cpp).

#include <algorithm>    // std::sort, std::lower_bound, std::unique, std::adjacent_find, std::max
#include <bit>          // std::endian
#include <cmath>        // std::nearbyint
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint8_t, std::uint64_t
#include <cstring>      // std::memcpy
#include <limits>       // std::numeric_limits
#include <memory>       // std::unique_ptr
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_enum_v
#include <vector>       // std::vector

#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/detail/probe_impl.hpp"  // detail::guarded
#include "vbucket/ffmpeg/frame_index.hpp"
#include "vbucket/ffmpeg/result.hpp"

namespace vbucket::ffmpeg::detail {

/// An enum field of an FFmpeg struct as its integer value, read without loading it as the
/// enum: decoders copy some fields (colour space, range) from the bitstream unchecked, and
/// loading a value outside the enum's range is undefined behaviour (fuzz_decode found a
/// colour space of 78).
template <class E>
int enum_value(const E& field) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

inline int sws_flags_of(resize_filter f) noexcept {
  switch (f) {
    case resize_filter::bicubic:
      return SWS_BICUBIC;
    case resize_filter::area:
      return SWS_AREA;
    case resize_filter::nearest:
      return SWS_POINT;
    case resize_filter::bilinear:
    case resize_filter::opensora:
      break;
  }
  return SWS_BILINEAR;
}

/// Converts decoded frames into slots of the output buffer.
class frame_writer {
 public:
  /// `container_sar`: the stream's (AVStream::sample_aspect_ratio; 0/1 when the container
  /// records none, and then each frame's own is used, as ffmpeg does).
  /// `image`: the source is a still image (Open-Sora's image transform: the crop offset
  /// rounded; else its video transform's, floored).
  frame_writer(const clip_request& req, std::span<std::uint8_t> out, int rotation,
               AVRational container_sar, bool image = false)
      : req_(req), out_(out), rotation_(rotation), container_sar_(container_sar), image_(image) {}

  void write(const std::string& name, const AVFrame* f, std::int64_t slot, clip_info& info) {
    check_size(name, f->height, f->width, req_.limits);
    // The display shape: the stored width stretched by the sample aspect ratio, then rotated.
    // Scaling the stored frame straight to the covering size of that shape applies both.
    const AVRational sar = usable_sar(stream_sar(container_sar_, f->sample_aspect_ratio));
    const std::int64_t shown_width = display_width(f->width, sar);
    const bool swap = rotation_ == 90 || rotation_ == 270;
    const std::int64_t dh = swap ? shown_width : f->height;
    const std::int64_t dw = swap ? f->height : shown_width;
    const resize_crop g =
        resize_crop_geometry(dh, dw, req_.height, req_.width,
                             image_ ? crop_offset::image_round : crop_offset::video_floor);
    if (g.scaled_height > 4 * req_.limits.max_side || g.scaled_width > 4 * req_.limits.max_side)
      fail(name, "frame " + std::to_string(f->width) + "x" + std::to_string(f->height) +
                     " is too narrow to cover " + std::to_string(req_.width) + "x" +
                     std::to_string(req_.height));
    // A quarter turn is applied before scaling, as ffmpeg's autorotation does (transpose, then
    // scale: the reference users compare against; libswscale filters rows and columns
    // differently, so the order shows). Formats the transposition cannot take (chroma
    // subsampled unequally, e.g. 4:2:2) are scaled, then turned.
    const AVFrame* in = f;
    int turn = rotation_;  // still to apply after scaling
    if (swap && transpose(f)) {
      in = turned_.get();
      turn = 0;
    }
    const bool turned_after = turn == 90 || turn == 270;
    // Open-Sora's video resize: RGB at the frame's own size, then torch's bilinear.
    const bool torch_resize = req_.filter == resize_filter::opensora && !image_ && rotation_ == 0 &&
                              shown_width == f->width;
    const int cw = static_cast<int>(torch_resize   ? f->width
                                    : turned_after ? g.scaled_height
                                                   : g.scaled_width);
    const int ch = static_cast<int>(torch_resize   ? f->height
                                    : turned_after ? g.scaled_width
                                                   : g.scaled_height);
    const int flags = req_.filter == resize_filter::opensora ? (image_ ? SWS_BICUBIC : SWS_BILINEAR)
                                                             : sws_flags_of(req_.filter);
    // CTHW too is converted to packed RGB24 and split into planes by the copy: libswscale's
    // planar RGB output interpolates chroma differently, and both layouts must agree.
    const bool planar = req_.layout == layout::cthw;
    constexpr AVPixelFormat dst_format = AV_PIX_FMT_RGB24;

    if (f->format < 0 || f->format >= AV_PIX_FMT_NB)
      fail(name, "the decoder returned an unknown pixel format " + std::to_string(f->format));
    AVPixelFormat src_format = static_cast<AVPixelFormat>(f->format);
    int full_range = enum_value(f->color_range) == AVCOL_RANGE_JPEG ? 1 : 0;
    switch (src_format) {  // the deprecated "J" formats: the same layout, full range
      case AV_PIX_FMT_YUVJ420P:
        src_format = AV_PIX_FMT_YUV420P;
        full_range = 1;
        break;
      case AV_PIX_FMT_YUVJ422P:
        src_format = AV_PIX_FMT_YUV422P;
        full_range = 1;
        break;
      case AV_PIX_FMT_YUVJ444P:
        src_format = AV_PIX_FMT_YUV444P;
        full_range = 1;
        break;
      case AV_PIX_FMT_YUVJ440P:
        src_format = AV_PIX_FMT_YUV440P;
        full_range = 1;
        break;
      default:
        break;
    }
    sws_.reset(sws_getCachedContext(sws_.release(), in->width, in->height, src_format, cw, ch,
                                    dst_format, flags, nullptr, nullptr, nullptr));
    if (!sws_)
      fail(name, std::string("cannot convert pixel format ") +
                     (av_get_pix_fmt_name(src_format) ? av_get_pix_fmt_name(src_format) : "?") +
                     " to RGB");
    int matrix = SWS_CS_DEFAULT;
    switch (enum_value(f->colorspace)) {
      case AVCOL_SPC_BT709:
        matrix = SWS_CS_ITU709;
        break;
      case AVCOL_SPC_BT2020_NCL:
      case AVCOL_SPC_BT2020_CL:
        matrix = SWS_CS_BT2020;
        break;
      case AVCOL_SPC_SMPTE240M:
        matrix = SWS_CS_SMPTE240M;
        break;
      case AVCOL_SPC_FCC:
        matrix = SWS_CS_FCC;
        break;
      default:
        break;
    }
    const int* coefficients = sws_getCoefficients(matrix);
    sws_setColorspaceDetails(sws_.get(), coefficients, full_range, coefficients, 1, 0, 1 << 16,
                             1 << 16);

    const auto hw = static_cast<std::size_t>(req_.height * req_.width);
    const auto s = static_cast<std::size_t>(slot);
    std::uint8_t* dst[4] = {};
    int dst_stride[4] = {};
    const bool direct = !torch_resize && !planar && turn == 0 && g.scaled_height == req_.height &&
                        g.scaled_width == req_.width;
    if (direct) {  // THWC without crop or rotation: straight into the buffer
      dst[0] = out_.data() + s * hw * 3;
      dst_stride[0] = static_cast<int>(req_.width * 3);
    } else {
      const int stride = (cw * 3 + 63) & ~63;
      const std::size_t bytes =
          static_cast<std::size_t>(stride) * static_cast<std::size_t>(ch) + 64;
      if (bytes > scratch_size_) {
        scratch_.reset(static_cast<std::uint8_t*>(av_malloc(bytes)));
        if (!scratch_) throw std::bad_alloc();
        scratch_size_ = bytes;
      }
      dst[0] = scratch_.get();
      dst_stride[0] = stride;
    }
    const int rows = sws_scale(sws_.get(), in->data, in->linesize, 0, in->height, dst, dst_stride);
    if (rows <= 0) fail(name, "cannot convert a frame to RGB");
    if (torch_resize)
      resize_bilinear_crop(dst[0], dst_stride[0], cw, ch, g, s);
    else if (!direct)
      copy_crop(dst[0], dst_stride[0], cw, ch, g, s, turn);
    info.source_height = dh;
    info.source_width = dw;
    info.sar_num = sar.num;
    info.sar_den = sar.den;
    ++info.frames_converted;
  }

  /// Fills slot `to` with a copy of slot `from`.
  void repeat(std::int64_t from, std::int64_t to) noexcept {
    const auto hw = static_cast<std::size_t>(req_.height * req_.width);
    const auto n = static_cast<std::size_t>(req_.frames);
    const auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
    if (req_.layout == layout::thwc) {
      std::memcpy(out_.data() + t * hw * 3, out_.data() + f * hw * 3, hw * 3);
    } else {
      for (std::size_t c = 0; c < 3; ++c)
        std::memcpy(out_.data() + (c * n + t) * hw, out_.data() + (c * n + f) * hw, hw);
    }
  }

 private:
  /// Turns `f` by `rotation_` (90 or 270, clockwise) into `turned_`, plane by plane, as
  /// ffmpeg's transpose filter (clock, cclock) does. False for formats it does not take:
  /// bitstream, palette, Bayer and hardware formats, and chroma subsampled unequally across
  /// and down (a transposed 4:2:2 would be 4:4:0).
  bool transpose(const AVFrame* f) {
    const AVPixFmtDescriptor* d = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(f->format));
    if (d == nullptr || d->log2_chroma_w != d->log2_chroma_h ||
        (d->flags & (AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BAYER |
                     AV_PIX_FMT_FLAG_HWACCEL)) != 0)
      return false;
    if (!turned_ || turned_->format != f->format || turned_->width != f->height ||
        turned_->height != f->width) {
      turned_ = make_frame();
      turned_->format = f->format;
      turned_->width = f->height;
      turned_->height = f->width;
      if (av_frame_get_buffer(turned_.get(), 0) < 0) throw std::bad_alloc();
    }
    int steps[4] = {};
    av_image_fill_max_pixsteps(steps, nullptr, d);
    const int planes = av_pix_fmt_count_planes(static_cast<AVPixelFormat>(f->format));
    for (int p = 0; p < planes && p < 4; ++p) {
      const bool chroma = p == 1 || p == 2;
      const int w = chroma ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
      const int h = chroma ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
      turn_plane(f->data[p], f->linesize[p], w, h, turned_->data[p], turned_->linesize[p], steps[p],
                 rotation_ == 90);
    }
    return true;
  }

  /// One plane of w x h pixels of `step` bytes, turned a quarter clockwise (out(y, x) =
  /// in(h - 1 - x, y)) or counter-clockwise (out(y, x) = in(x, w - 1 - y)). Bytes (8-bit
  /// formats, the common case) go 8 x 8 at a time, transposed in 64-bit words; the rest and
  /// the edges one pixel at a time, in tiles that keep the rows read and written in cache.
  static void turn_plane(const std::uint8_t* src, int src_stride, int w, int h, std::uint8_t* dst,
                         int dst_stride, int step, bool clockwise) noexcept {
    const int out_w = h, out_h = w;
    int done_w = 0, done_h = 0;  // the top-left block of the output filled 8 x 8
    if constexpr (std::endian::native == std::endian::little) {
      if (step == 1) {
        done_w = out_w & ~7;
        done_h = out_h & ~7;
        for (int oy = 0; oy < done_h; oy += 8)
          for (int ox = 0; ox < done_w; ox += 8)
            turn_block8(src, src_stride, w, h, dst, dst_stride, oy, ox, clockwise);
      }
    }
    turn_pixels(src, src_stride, w, h, dst, dst_stride, step, clockwise, 0, done_h, done_w, out_w);
    turn_pixels(src, src_stride, w, h, dst, dst_stride, step, clockwise, done_h, out_h, 0, out_w);
  }

  /// Output block rows oy..oy+7, columns ox..ox+7 of a byte plane (see turn_plane).
  static void turn_block8(const std::uint8_t* src, int src_stride, int w, int h, std::uint8_t* dst,
                          int dst_stride, int oy, int ox, bool clockwise) noexcept {
    // m[k] byte j: clockwise in(h - 1 - ox - k, oy + j); else in(ox + k, w - 8 - oy + j).
    std::uint64_t m[8];
    const auto stride = static_cast<std::ptrdiff_t>(src_stride);
    for (int k = 0; k < 8; ++k) {
      const std::ptrdiff_t r = clockwise ? h - 1 - ox - k : ox + k;
      const std::ptrdiff_t c = clockwise ? oy : w - 8 - oy;
      std::memcpy(&m[k], src + r * stride + c, 8);
    }
    // Transpose the 8 x 8 bytes: swap 1-byte, then 2-byte, then 4-byte elements across rows.
    for (int i = 0; i < 8; i += 2) {
      const std::uint64_t t = ((m[i] >> 8) ^ m[i + 1]) & 0x00FF00FF00FF00FFull;
      m[i + 1] ^= t;
      m[i] ^= t << 8;
    }
    for (int i : {0, 1, 4, 5}) {
      const std::uint64_t t = ((m[i] >> 16) ^ m[i + 2]) & 0x0000FFFF0000FFFFull;
      m[i + 2] ^= t;
      m[i] ^= t << 16;
    }
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t t = ((m[i] >> 32) ^ m[i + 4]) & 0x00000000FFFFFFFFull;
      m[i + 4] ^= t;
      m[i] ^= t << 32;
    }
    // Now m[j] byte k is the old m[k] byte j: output row oy + j (clockwise) or oy + 7 - j.
    for (int j = 0; j < 8; ++j) {
      const std::ptrdiff_t row = clockwise ? oy + j : oy + 7 - j;
      std::memcpy(dst + row * dst_stride + ox, &m[j], 8);
    }
  }

  /// Output rows [y0, y1), columns [x0, x1) of a plane (see turn_plane), pixel by pixel.
  static void turn_pixels(const std::uint8_t* src, int src_stride, int w, int h, std::uint8_t* dst,
                          int dst_stride, int step, bool clockwise, int y0, int y1, int x0,
                          int x1) noexcept {
    constexpr int tile = 32;
    const auto stride = static_cast<std::ptrdiff_t>(src_stride);
    // Along an output row the source walks a column: up it (clockwise) or down it.
    const std::ptrdiff_t walk = clockwise ? -stride : stride;
    for (int ty = y0; ty < y1; ty += tile) {
      const int y_end = std::min(y1, ty + tile);
      for (int tx = x0; tx < x1; tx += tile) {
        const int x_end = std::min(x1, tx + tile);
        for (int y = ty; y < y_end; ++y) {
          std::uint8_t* row = dst + static_cast<std::ptrdiff_t>(y) * dst_stride;
          const int sx = clockwise ? y : w - 1 - y;
          const int sy = clockwise ? h - 1 - tx : tx;
          const std::uint8_t* from = src + sy * stride + static_cast<std::ptrdiff_t>(sx) * step;
          if (step == 1) {
            for (int x = tx; x < x_end; ++x, from += walk) row[x] = *from;
          } else {
            for (int x = tx; x < x_end; ++x, from += walk)
              std::memcpy(row + static_cast<std::ptrdiff_t>(x) * step, from,
                          static_cast<std::size_t>(step));
          }
        }
      }
    }
  }

  /// Resizes the `width` x `height` RGB24 image to `g`'s scaled size as PyTorch's
  /// `interpolate(mode="bilinear", align_corners=False, antialias=False)` does (source
  /// coordinate (i + 0.5) · in / out − 0.5, clamped at 0; the two neighbours, the last one
  /// clamped at the edge), keeping only the target window, each value rounded to uint8.
  void resize_bilinear_crop(const std::uint8_t* src, int src_stride, int width, int height,
                            const resize_crop& g, std::size_t s) noexcept {
    const std::int64_t th = req_.height, tw = req_.width;
    const auto hw = static_cast<std::size_t>(th * tw);
    const auto n = static_cast<std::size_t>(req_.frames);
    struct tap {
      int i0, i1;
      float w1;
    };
    const auto taps = [](std::int64_t out_size, int in_size, std::int64_t first,
                         std::int64_t count) {
      std::vector<tap> t(static_cast<std::size_t>(count));
      const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
      for (std::int64_t k = 0; k < count; ++k) {
        const float x = std::max(0.0f, (static_cast<float>(first + k) + 0.5f) * scale - 0.5f);
        const int i0 = std::min(static_cast<int>(x), in_size - 1);
        const int i1 = std::min(i0 + 1, in_size - 1);
        t[static_cast<std::size_t>(k)] = {i0, i1, x - static_cast<float>(i0)};
      }
      return t;
    };
    const std::vector<tap> ys = taps(g.scaled_height, height, g.top, th);
    const std::vector<tap> xs = taps(g.scaled_width, width, g.left, tw);
    const bool thwc = req_.layout == layout::thwc;
    std::uint8_t* base = out_.data();
    for (std::int64_t y = 0; y < th; ++y) {
      const tap ty = ys[static_cast<std::size_t>(y)];
      const std::uint8_t* r0 = src + static_cast<std::ptrdiff_t>(ty.i0) * src_stride;
      const std::uint8_t* r1 = src + static_cast<std::ptrdiff_t>(ty.i1) * src_stride;
      for (std::int64_t x = 0; x < tw; ++x) {
        const tap tx = xs[static_cast<std::size_t>(x)];
        const auto p = static_cast<std::size_t>(y * tw + x);
        for (int c = 0; c < 3; ++c) {
          const float a = static_cast<float>(r0[tx.i0 * 3 + c]) * (1 - tx.w1) +
                          static_cast<float>(r0[tx.i1 * 3 + c]) * tx.w1;
          const float b = static_cast<float>(r1[tx.i0 * 3 + c]) * (1 - tx.w1) +
                          static_cast<float>(r1[tx.i1 * 3 + c]) * tx.w1;
          const float v = a * (1 - ty.w1) + b * ty.w1;
          const auto u = static_cast<std::uint8_t>(std::min(255.0f, std::max(0.0f, v + 0.5f)));
          const auto cc = static_cast<std::size_t>(c);
          if (thwc)
            base[(s * hw + p) * 3 + cc] = u;
          else
            base[(cc * n + s) * hw + p] = u;
        }
      }
    }
  }

  /// Copies the target window of the scaled image into slot `s`, turning it by `rotation`
  /// (what is left to apply after scaling) for display.
  void copy_crop(const std::uint8_t* src, int src_stride, int cw, int ch, const resize_crop& g,
                 std::size_t s, int rotation) noexcept {
    const std::int64_t th = req_.height, tw = req_.width;
    const auto hw = static_cast<std::size_t>(th * tw);
    const auto n = static_cast<std::size_t>(req_.frames);
    // The RGB24 pixel of the scaled coded image that display pixel (y, x) shows.
    auto pixel = [&](std::int64_t y, std::int64_t x) -> const std::uint8_t* {
      std::int64_t r = y, c = x;
      switch (rotation) {
        case 90:
          r = ch - 1 - x;
          c = y;
          break;
        case 180:
          r = ch - 1 - y;
          c = cw - 1 - x;
          break;
        case 270:
          r = x;
          c = cw - 1 - y;
          break;
        default:
          break;
      }
      return src + r * src_stride + c * 3;
    };
    if (req_.layout == layout::thwc) {
      std::uint8_t* out = out_.data() + s * hw * 3;
      for (std::int64_t y = 0; y < th; ++y) {
        std::uint8_t* row = out + static_cast<std::size_t>(y * tw * 3);
        if (rotation == 0) {
          std::memcpy(row, pixel(g.top + y, g.left), static_cast<std::size_t>(tw * 3));
          continue;
        }
        for (std::int64_t x = 0; x < tw; ++x)
          std::memcpy(row + x * 3, pixel(g.top + y, g.left + x), 3);
      }
      return;
    }
    std::uint8_t* planes[3] = {out_.data() + s * hw, out_.data() + (n + s) * hw,
                               out_.data() + (2 * n + s) * hw};
    for (std::int64_t y = 0; y < th; ++y) {
      const auto o = static_cast<std::size_t>(y * tw);
      for (std::int64_t x = 0; x < tw; ++x) {
        const std::uint8_t* p = pixel(g.top + y, g.left + x);
        const auto i = o + static_cast<std::size_t>(x);
        planes[0][i] = p[0];
        planes[1][i] = p[1];
        planes[2][i] = p[2];
      }
    }
  }

  const clip_request& req_;
  std::span<std::uint8_t> out_;
  int rotation_ = 0;
  AVRational container_sar_{0, 1};
  bool image_ = false;
  frame_ptr turned_;  // the frame turned a quarter, reused while the size stays
  sws_ptr sws_;
  av_buffer_ptr scratch_;
  std::size_t scratch_size_ = 0;
};

/// An opened input, its video stream and decoder.
struct decode_session {
  std::unique_ptr<input> in;
  int index = -1;
  AVStream* stream = nullptr;
  codec_ptr codec;

  /// `setup`: hardware decoding (decoder_setup; null: software).
  decode_session(const source& src, const clip_request& req, const decoder_setup* setup = nullptr)
      : in(std::make_unique<input>(src, req.limits)) {
    AVFormatContext* fmt = in->format();
    bool need_info = is_image_format(fmt);
    if (!need_info) check_media_data(*in);
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
      const AVCodecParameters* par = fmt->streams[i]->codecpar;
      if (par->codec_type == AVMEDIA_TYPE_VIDEO && (par->width <= 0 || par->height <= 0))
        need_info = true;
    }
    if (fmt->nb_streams == 0) need_info = true;
    // Several video streams: the choice weighs what the packets show, as in probe.
    if (in->video_candidates() > 1) need_info = true;
    if (need_info) in->find_stream_info();
    index = in->video_stream();
    stream = fmt->streams[index];
    check_size(in->name(), stream->codecpar->height, stream->codecpar->width, req.limits);
    in->discard_others(index);
    codec = open_decoder(*in, stream, req.threads, req.limits, setup);
  }
};

/// Reads the next packet of the session's stream into `pkt`; false at the end (or at a read
/// error, which ends a truncated file like its end). Throws on a timeout.
inline bool next_packet(decode_session& s, AVPacket* pkt) {
  for (;;) {
    const int rc = av_read_frame(s.in->format(), pkt);
    if (rc < 0) {
      s.in->check_read_failure(rc);  // a timeout, or the network's failure: not the end
      return false;
    }
    // Custom I/O (memory) is never interrupted by FFmpeg: the deadline is checked here too.
    if (s.in->timed_out()) {
      av_packet_unref(pkt);
      s.in->check_read_failure(AVERROR_EXIT);
    }
    if (pkt->stream_index == s.index) return true;
    av_packet_unref(pkt);
  }
}

/// Frame j of the clip `req` asks for (`vbucket::clip_frame_index`).
inline std::int64_t frame_at(const clip_request& req, std::int64_t j) noexcept {
  return clip_frame_index(req.choice, req.start, req.frames, req.interval, j);
}

inline void check_request(const std::string& name, const clip_request& req, std::size_t bytes) {
  if (req.frames < 1 || req.frames > max_clip_frames)
    fail(name, "frames must be from 1 to " + std::to_string(max_clip_frames) + ", got " +
                   std::to_string(req.frames));
  if (req.interval < 1 || req.interval > max_clip_index)
    fail(name, "interval must be from 1 to " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.interval));
  if (req.frames * req.interval > max_clip_index)
    fail(name, "frames x interval must be at most " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.frames) + " x " + std::to_string(req.interval));
  if (req.start < 0 || req.start > max_clip_index)
    fail(name, "start must be from 0 to " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.start));
  if (req.height < 1 || req.width < 1 || req.height > req.limits.max_side ||
      req.width > req.limits.max_side)
    fail(name, "target size " + std::to_string(req.width) + "x" + std::to_string(req.height) +
                   " must have sides from 1 to " + std::to_string(req.limits.max_side));
  const std::size_t need = clip_bytes(req);
  if (bytes != need)
    fail(name, "the output buffer holds " + std::to_string(bytes) + " bytes, the clip needs " +
                   std::to_string(need) + " (frames x height x width x 3)");
}

/// The packets a decode needs (streams with timestamps), by packet timestamp: `wanted`, the
/// wanted frames' timestamps (sorted, distinct). Any other packet is sent with
/// AVDISCARD_NONREF: its frame is decoded only when other frames refer to it. A decoder decides
/// by decode order, but the wanted set is by timestamp, so a wanted B-frame whose packet comes
/// after reference frames it is shown before is still decoded, and a reference frame is decoded
/// whatever it is. With `drain_after_wanted` (the stream's timestamps are distinct), once every
/// wanted timestamp has been sent the decoder is drained: what is still to come out is in it,
/// and the packets after it are neither shown nor referenced by what is wanted.
struct packet_plan {
  const std::vector<std::int64_t>* wanted = nullptr;
  bool drain_after_wanted = false;
  bool drained = false;  ///< out: decoding stopped that way (a wanted frame not out is missing)
};

/// Frames come out of the decoder; `take` sees each one and returns true when it is done.
/// `plan` (optional): which packets' frames need not be decoded (packet_plan).
/// `first` (optional): a packet already read, sent before the ones read after it.
/// Returns the frames still in the decoder when `take` was done (decoded, or being decoded by
/// its threads, but not yet out: a decoder holds frames back to reorder them); they are drained
/// and counted, not shown to `take`, so that frames decoded = frames out + that count.
template <class Take>
std::int64_t decode_frames(decode_session& s, const clip_request& req, packet_plan* plan,
                           Take&& take, AVPacket* first = nullptr) {
  packet_ptr pkt = make_packet();
  bool held = first != nullptr;
  if (held) av_packet_move_ref(pkt.get(), first);
  frame_ptr frame = make_frame();
  AVCodecContext* ctx = s.codec.get();
  std::int64_t since_frame = 0;
  // Which wanted timestamps have been sent (a duplicate packet counts once).
  std::vector<bool> sent(plan != nullptr ? plan->wanted->size() : 0, false);
  std::size_t sent_count = 0;
  // true when done
  auto drain = [&]() -> bool {
    for (;;) {
      const int rc = avcodec_receive_frame(ctx, frame.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return false;
      if (rc < 0) fail(s.in->name(), "cannot decode: " + av_error_text(rc));
      since_frame = 0;
      const bool done = take(frame.get());
      av_frame_unref(frame.get());
      if (done) return true;
    }
  };
  auto held_back = [&]() -> std::int64_t {
    ctx->skip_frame = AVDISCARD_DEFAULT;
    avcodec_send_packet(ctx, nullptr);
    std::int64_t left = 0;
    for (; avcodec_receive_frame(ctx, frame.get()) >= 0; ++left) av_frame_unref(frame.get());
    return left;
  };
  for (; held || next_packet(s, pkt.get()); held = false) {
    if (plan != nullptr) {
      const std::vector<std::int64_t>& w = *plan->wanted;
      const auto at = std::lower_bound(w.begin(), w.end(), pkt->pts);
      const bool wanted = pkt->pts == AV_NOPTS_VALUE || (at != w.end() && *at == pkt->pts);
      ctx->skip_frame = wanted ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
      if (wanted && at != w.end() && *at == pkt->pts) {
        const auto i = static_cast<std::size_t>(at - w.begin());
        if (!sent[i]) ++sent_count;
        sent[i] = true;
      }
    }
    const int rc = avcodec_send_packet(ctx, pkt.get());
    av_packet_unref(pkt.get());
    if (rc < 0 && rc != AVERROR(EAGAIN) && rc != AVERROR_INVALIDDATA)
      fail(s.in->name(), "cannot decode: " + av_error_text(rc));
    if (++since_frame > req.limits.max_packets_without_frame)
      fail(s.in->name(), "no frame decoded from " + std::to_string(since_frame) + " packets");
    if (drain()) return held_back();
    if (plan != nullptr && plan->drain_after_wanted && sent_count == sent.size()) {
      plan->drained = true;
      break;
    }
  }
  ctx->skip_frame = AVDISCARD_DEFAULT;
  avcodec_send_packet(ctx, nullptr);
  return drain() ? held_back() : 0;
}

/// Timestamps of presentation indices base, base + 1, ... (unsorted), from `indexed_pts`.
struct indexed_timestamps {
  std::int64_t base = 0;
  std::vector<std::int64_t> pts;
};

/// MP4/MOV only, where the demuxer's index is the sample table: one entry per packet, in
/// decode order. Finds the last keyframe K whose count of earlier (non-discarded) packets d_K
/// is at most `start`, and an earlier keyframe K0 at least `margin` packets before it, seeks to
/// K0 and demuxes from there, collecting the timestamps of K and the packets after it until
/// presentation indices below `until` are covered (or the stream ends). Presentation index
/// d_K + r is then the r-th smallest of those, provided K splits the stream: every packet
/// decoded before K is shown before every packet decoded from K on. That is checked on the
/// packets read (from where the seek lands on; reordering is assumed to span fewer than
/// `margin` packets, as in the plain scan), and each packet read must be the table entry
/// expected (same position and decode time). std::nullopt when any of this does not hold; the
/// session has then been seeked and must be reopened if `touched` is set.
inline std::optional<indexed_timestamps> indexed_pts(decode_session& s, std::int64_t start,
                                                     std::int64_t until, std::int64_t margin,
                                                     bool& touched) {
  touched = false;
  AVFormatContext* fmt = s.in->format();
  if (!is_mov(fmt)) return std::nullopt;
  AVStream* st = s.stream;
  const int entries = avformat_index_get_entries_count(st);
  // A fragmented file's index grows as fragments are read: only a table that already has
  // every sample the header announced is trusted.
  if (entries <= 0 || st->nb_frames != entries) return std::nullopt;
  struct key {
    int entry;
    std::int64_t before;  // non-discarded packets before it
  };
  std::vector<key> keys;
  std::int64_t before = 0;
  std::int64_t last_dts = std::numeric_limits<std::int64_t>::min();
  for (int e = 0; e < entries && before <= start; ++e) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, e);
    if (ie == nullptr || ie->timestamp <= last_dts) return std::nullopt;
    last_dts = ie->timestamp;
    const bool discard = (ie->flags & AVINDEX_DISCARD_FRAME) != 0;
    if ((ie->flags & AVINDEX_KEYFRAME) != 0 && !discard) keys.push_back({e, before});
    if (!discard) ++before;
  }
  // K: the last keyframe with at most `start` packets before it; K0: the last keyframe at
  // least `margin` packets before K. Without both, or with K0 the first packet (a clip near
  // the start), the plain scan costs the same.
  std::size_t k = keys.size();
  while (k > 0 && keys[k - 1].before > start) --k;
  if (k == 0) return std::nullopt;
  const key kk = keys[k - 1];
  std::size_t k0 = k - 1;
  while (k0 > 0 && keys[k0 - 1].before > kk.before - margin) --k0;
  if (k0 == 0) return std::nullopt;
  const key kk0 = keys[k0 - 1];
  if (kk0.entry == 0) return std::nullopt;

  touched = true;
  // The demuxer may land on an earlier keyframe than asked (MP4 seeks by presentation time):
  // the packet it lands on is looked up in the table, and demuxing is checked from there.
  const AVIndexEntry* first = avformat_index_get_entry(st, kk0.entry);
  if (av_seek_frame(fmt, s.index, first->timestamp, AVSEEK_FLAG_BACKWARD) < 0) return std::nullopt;
  packet_ptr pkt = make_packet();
  if (!next_packet(s, pkt.get())) return std::nullopt;
  int landed = kk0.entry;
  for (; landed >= 0; --landed) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, landed);
    if (ie != nullptr && ie->pos == pkt->pos && ie->timestamp == pkt->dts) break;
  }
  if (landed < 0) return std::nullopt;
  indexed_timestamps out;
  out.base = kk.before;
  const std::int64_t count = until - kk.before;  // > 0: start < until
  out.pts.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, entries)));
  std::int64_t max_before_k = std::numeric_limits<std::int64_t>::min();
  std::int64_t min_from_k = std::numeric_limits<std::int64_t>::max();
  bool held = true;  // `pkt` holds the packet of entry `landed`
  for (int e = landed;; ++e) {
    if (e >= kk.entry && static_cast<std::int64_t>(out.pts.size()) >= count) break;
    if (!held && !next_packet(s, pkt.get())) {
      if (e <= kk.entry) return std::nullopt;  // the stream ended before K
      break;                                   // the whole rest of the stream is in hand
    }
    held = false;
    const AVIndexEntry* ie = e < entries ? avformat_index_get_entry(st, e) : nullptr;
    const bool discard = (pkt->flags & AV_PKT_FLAG_DISCARD) != 0;
    const std::int64_t p = pkt->pts, dts = pkt->dts, pos = pkt->pos;
    const int size = pkt->size;
    av_packet_unref(pkt.get());
    // A packet cut short by the end of the file: the plain scan leaves it out.
    if (ie == nullptr || pos != ie->pos || dts != ie->timestamp || size != ie->size ||
        discard != ((ie->flags & AVINDEX_DISCARD_FRAME) != 0))
      return std::nullopt;
    if (discard) continue;
    if (p == AV_NOPTS_VALUE) return std::nullopt;
    if (e < kk.entry) {
      max_before_k = std::max(max_before_k, p);
      continue;
    }
    min_from_k = std::min(min_from_k, p);
    out.pts.push_back(p);
  }
  // K splits the stream when everything decoded before it is shown before everything decoded
  // from it on (an open GOP's leading frames, decoded after K but shown before it, are fine:
  // they are counted among the packets from K on).
  if (out.pts.empty() || max_before_k >= min_from_k) return std::nullopt;
  return out;
}

/// MPEG-TS and PS: seeks through the frame index go by byte position (their timestamp seeks
/// can land after the target).
inline bool seeks_by_byte(const AVFormatContext* fmt) noexcept {
  if (fmt->iformat == nullptr || fmt->iformat->name == nullptr) return false;
  const std::string_view name = fmt->iformat->name;
  return name == "mpegts" || name == "mpeg";
}

/// Seeks `s` to keyframe `ki` (≥ 1) of the frame index entry `fi` and reads up to it: true
/// with its packet in `pkt` when a packet of the same position, size and pts comes before any
/// packet past it. MPEG-TS/PS seek by byte to the keyframe before it (after a byte seek the
/// parser loses the first frame it meets); the rest by its decode time (else pts), backward.
inline bool seek_to_key(decode_session& s, const file_index& fi, std::size_t ki, AVPacket* pkt) {
  if (ki == 0 || ki >= fi.keys.size()) return false;
  const index_key& k = fi.keys[ki];
  AVFormatContext* fmt = s.in->format();
  const bool by_byte = seeks_by_byte(fmt);
  const bool mov = is_mov(fmt);
  int rc = -1;
  if (by_byte) {
    const std::int64_t from = fi.keys[ki - 1].pos;
    if (from < 0 || k.pos < 0) return false;
    rc = av_seek_frame(fmt, s.index, from, AVSEEK_FLAG_BYTE);
  } else {
    const std::int64_t target = k.dts != index_no_value ? k.dts : k.pts;
    rc = av_seek_frame(fmt, s.index, target, AVSEEK_FLAG_BACKWARD);
  }
  if (rc < 0) return false;
  // Past K: a later position (positions grow in decode order, except in MP4/MOV) or decode
  // time. Demuxing is cheap, but a landing far before K is bounded all the same.
  constexpr int max_skipped = 1 << 16;
  for (int skipped = 0; skipped < max_skipped; ++skipped) {
    if (!next_packet(s, pkt)) return false;
    if (pkt->pos == k.pos && pkt->size == k.size && pkt->pts == k.pts) return true;
    const bool past = (!mov && k.pos >= 0 && pkt->pos > k.pos) ||
                      (k.dts != index_no_value && pkt->dts != AV_NOPTS_VALUE && pkt->dts > k.dts);
    av_packet_unref(pkt);
    if (past) return false;
  }
  return false;
}

/// The frame index's counterpart of `indexed_pts` (mode 0: a stream with presentation times):
/// K is the last keyframe of the entry at frame ≤ `start`; the input is seeked to K (checked:
/// `seek_to_key`), and the timestamps of K and the packets after it are read until presentation
/// indices below `until` are covered. Index K.frame + r is the r-th smallest of those, as the
/// scan checked that K splits the stream; here the packets read must agree: each one shown
/// after every packet before K (K.before), and a stream that ends must end at the entry's
/// frame count. std::nullopt on any doubt; the session must then be reopened if `touched`.
inline std::optional<indexed_timestamps> index_pts(decode_session& s, const file_index& fi,
                                                   std::int64_t start, std::int64_t until,
                                                   bool& touched) {
  touched = false;
  if (fi.output_order || fi.keys.empty()) return std::nullopt;
  std::size_t ki = fi.keys.size();
  while (ki > 0 && fi.keys[ki - 1].frame > start) --ki;
  if (ki <= 1) return std::nullopt;  // near the start: the plain scan costs the same
  --ki;
  const index_key& k = fi.keys[ki];
  touched = true;
  packet_ptr pkt = make_packet();
  if (!seek_to_key(s, fi, ki, pkt.get())) return std::nullopt;
  const bool mov = is_mov(s.in->format());
  indexed_timestamps out;
  out.base = k.frame;
  const std::int64_t count = until - k.frame;  // > 0: start < until
  out.pts.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, fi.frames)));
  bool ended = false;
  for (bool held = true; static_cast<std::int64_t>(out.pts.size()) < count; held = false) {
    if (!held && !next_packet(s, pkt.get())) {
      ended = true;
      break;
    }
    const bool discard =
        (pkt->flags & AV_PKT_FLAG_DISCARD) != 0 || (mov && cut_short(s.stream, pkt.get()));
    const std::int64_t p = pkt->pts;
    av_packet_unref(pkt.get());
    if (discard) continue;
    if (p == AV_NOPTS_VALUE || (k.before != index_no_value && p <= k.before)) return std::nullopt;
    out.pts.push_back(p);
  }
  if (ended && k.frame + static_cast<std::int64_t>(out.pts.size()) != fi.frames)
    return std::nullopt;
  if (out.pts.empty()) return std::nullopt;
  return out;
}

/// Packets shortly before a keyframe whose frames the decoder may show after it: H.264
/// reorders at most 16 frames.
inline constexpr std::int64_t output_order_margin = 16;

/// Streams without timestamps (AVI; MPEG-PS/TS where some packet has none): frames are
/// numbered in the decoder's output order from the stream's start. With `table`, the stream's
/// first packets in decode order (from the AVI index, or demuxed), the clip is decoded from a
/// keyframe instead of the start. K: the last keyframe at entry e_K <= req.start. If every
/// packet decodes to one frame and K splits the stream (every frame decoded before K comes out
/// before every frame decoded from K on), the first frame out of packets from K on is frame
/// e_K, and the frames after it count on from there. Decoding starts at an earlier keyframe K0
/// (at least `output_order_margin` packets before K) and checks that split on the frames out:
/// each packet is tagged with its entry number (the packet's pts, which the decoder hands to the
/// frame); each of the last `output_order_margin` packets before K must come out once, before
/// any frame of K on, and none before K after one (reordering across more packets is assumed
/// not to happen, as for the packets before K0); unreferenced frames before those are not
/// decoded. Every packet read from K0 on must be the table's entry (AVI: same decode time and
/// size; else same position and size). `s`: an opened session whose decoder has had no packet
/// (it is seeked). False when any of this fails or K0 does not exist: the caller then decodes
/// from the start in a new session (slots already written are overwritten).
template <class Writer>
bool decode_output_order_from_keyframe(decode_session& s, const clip_request& req,
                                       const std::vector<packet_entry>& table, bool avi,
                                       Writer& writer, clip_info& info, std::int64_t& filled) {
  const auto entries = static_cast<std::int64_t>(table.size());
  if (req.start >= entries) return false;  // a short stream: the start decides
  std::int64_t k = req.start;
  while (k >= 0 && !table[static_cast<std::size_t>(k)].key) --k;
  if (k < 0) return false;
  std::int64_t k0 = k - output_order_margin;
  while (k0 >= 0 && !table[static_cast<std::size_t>(k0)].key) --k0;
  if (k0 <= 0) return false;  // near the start: decoding from there costs the same

  const packet_entry& first = table[static_cast<std::size_t>(k0)];
  // AVI seeks through its index to the entry; its packets' positions are past the chunk
  // header the index points at, and their decode times are the index's: they are matched by
  // decode time and size. The rest seek by byte position, to a packet before K0 whose position
  // is known (a frame that starts inside another's PES packet has none), and are matched by
  // position and size: after a byte seek the parser loses the first frame it sees, and the
  // decode times it interpolates for packets without their own can differ from a read from
  // the start.
  // The target is the second such packet before K0, so that the first one is recognised.
  std::int64_t b = k0 - 1, last_known = -1;
  for (int known = 0; !avi && b >= 0; --b) {
    const std::int64_t pos = table[static_cast<std::size_t>(b)].pos;
    if (pos >= 0 && last_known < 0) last_known = pos;
    if (pos >= 0 && ++known == 2) break;
  }
  if (!avi && b < 0) return false;
  if (first.pos >= 0) last_known = first.pos;
  const int rc = avi ? av_seek_frame(s.in->format(), s.index, first.dts, AVSEEK_FLAG_BACKWARD)
                     : av_seek_frame(s.in->format(), s.index,
                                     table[static_cast<std::size_t>(b)].pos, AVSEEK_FLAG_BYTE);
  if (rc < 0) return false;
  auto is_entry = [avi](const AVPacket* p, const packet_entry& e) {
    return p->size == e.size && (avi ? p->dts == e.dts : p->pos == e.pos);
  };
  packet_ptr pkt = make_packet();
  frame_ptr frame = make_frame();
  // The landing is verified: the first packet recognised (AVI: K0; else one of entries b to
  // K0 with a known position) must come no later than K0, and the packets from there on must
  // be the table's, up to K0.
  std::int64_t at = -1;  // the entry `pkt` holds
  for (int skipped = 0; at < 0; ++skipped) {
    if (skipped > 4096 || !next_packet(s, pkt.get())) return false;
    if (avi) {
      if (is_entry(pkt.get(), first))
        at = k0;
      else if (pkt->dts == AV_NOPTS_VALUE || pkt->dts >= first.dts)
        return false;
    } else if (pkt->pos >= 0) {
      for (std::int64_t e = b; e <= k0 && at < 0; ++e)
        if (is_entry(pkt.get(), table[static_cast<std::size_t>(e)])) at = e;
      if (at < 0 && pkt->pos > last_known) return false;
    }
    if (at < 0) av_packet_unref(pkt.get());
  }
  for (; at < k0; ++at) {
    av_packet_unref(pkt.get());
    if (!next_packet(s, pkt.get()) || !is_entry(pkt.get(), table[static_cast<std::size_t>(at + 1)]))
      return false;
  }
  AVCodecContext* ctx = s.codec.get();
  const std::int64_t n = req.frames;
  const std::int64_t checked_from = k - output_order_margin;  // must come out before K's
  std::vector<bool> seen(static_cast<std::size_t>(k - k0), false);
  std::int64_t checked_seen = 0, from_k = 0, sent = k0, since_frame = 0;
  bool bad = false;
  filled = 0;
  info.frames_decoded = 0;
  info.frames_converted = 0;
  // true when done (or a check failed: `bad`)
  auto drain = [&]() -> bool {
    for (;;) {
      const int r = avcodec_receive_frame(ctx, frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return false;
      if (r < 0) return bad = true;
      since_frame = 0;
      ++info.frames_decoded;
      const std::int64_t tag = frame->pts;
      if (tag == AV_NOPTS_VALUE || tag < k0 || tag >= sent) return bad = true;
      if (tag < k) {
        const auto seen_at = static_cast<std::size_t>(tag - k0);
        if (from_k > 0 || seen[seen_at]) return bad = true;
        seen[seen_at] = true;
        if (tag >= checked_from) ++checked_seen;
      } else {
        if (from_k == 0 && checked_seen != k - checked_from) return bad = true;
        const std::int64_t index = k + from_k++;
        if (filled < n && index == frame_at(req, filled)) {
          writer.write(s.in->name(), frame.get(), filled, info);
          ++filled;
        }
      }
      av_frame_unref(frame.get());
      if (filled == n) return true;
    }
  };
  for (bool held = true;; held = false) {
    if (!held && !next_packet(s, pkt.get())) break;
    if (sent < entries) {
      const packet_entry& e = table[static_cast<std::size_t>(sent)];
      if (!is_entry(pkt.get(), e)) return false;
    }
    // Frames decoded more than the margin before K need not come out: the ones no other
    // frame refers to are not decoded.
    ctx->skip_frame = req.skip_unwanted && sent > k0 && sent < checked_from ? AVDISCARD_NONREF
                                                                            : AVDISCARD_DEFAULT;
    pkt->pts = sent++;  // the tag
    const int r = avcodec_send_packet(ctx, pkt.get());
    av_packet_unref(pkt.get());
    if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_INVALIDDATA) return false;
    if (++since_frame > req.limits.max_packets_without_frame) return false;
    if (drain()) return !bad;
  }
  avcodec_send_packet(ctx, nullptr);
  drain();
  // The stream ended: a clip past its end is reported by the caller, as from the start; one
  // that never reached K proves nothing.
  return !bad && from_k > 0;
}

/// Decodes the frames `req` asks for (checked by the caller: check_request) and hands each to
/// the writer `make_writer(rotation, container_sar, image)` returns (frame_writer's interface:
/// write(name, frame, slot, info), repeat(from, to)). `setup`: hardware decoding (null:
/// software). decode_input's plan, shared with the CUDA adapter's NVDEC decoder.
template <class MakeWriter>
clip_info decode_planned(const source& src, const clip_request& req, const decoder_setup* setup,
                         MakeWriter&& make_writer) {
  const std::int64_t n = req.frames;
  const std::int64_t last = frame_at(req, n - 1);
  clip_info info;
  auto s = std::make_unique<decode_session>(src, req, setup);
  info.rotation = display_rotation(s->stream);
  const bool image = is_image_format(s->in->format());
  auto writer = make_writer(info.rotation, s->stream->sample_aspect_ratio, image);
  // A copy: `s` is replaced when decoding restarts from the start (a reference into it would
  // dangle; fuzz_decode found that).
  const std::string name = src.name;

  // The frame index's entry for the file, when it is the file indexed (same size, mtime,
  // stream and time base; else it is stale and ignored).
  const file_index* fi = nullptr;
  if (req.index != nullptr && req.use_index && !src.in_memory && !image) {
    fi = req.index->find(src.name);
    if (fi != nullptr &&
        (!is_fresh(*fi) || fi->stream != static_cast<std::uint32_t>(s->index) ||
         fi->time_num != s->stream->time_base.num || fi->time_den != s->stream->time_base.den)) {
      info.index_stale = true;
      fi = nullptr;
    }
  }

  // 1. Timestamps of the frames up to the last wanted one, by demuxing (no decoding). The
  // margin covers decoders' reordering (H.264 reorders at most 16 frames).
  constexpr std::int64_t reorder_margin = 64;
  std::vector<std::int64_t> pts;
  std::int64_t base = 0;  // pts[r] (once sorted) is presentation index base + r
  // Images and streams without timestamps are decoded in order from the start.
  bool timestamps = !image;
  if (timestamps && req.use_index) {
    bool touched = false;
    auto fast = indexed_pts(*s, req.start, last + reorder_margin + 1, reorder_margin, touched);
    if (fast) {
      base = fast->base;
      pts = std::move(fast->pts);
      info.indexed = true;
    } else if (touched) {
      s = std::make_unique<decode_session>(src, req, setup);
    }
  }
  if (timestamps && !info.indexed && fi != nullptr && !fi->output_order) {
    bool touched = false;
    auto fast = index_pts(*s, *fi, req.start, last + reorder_margin + 1, touched);
    if (fast) {
      base = fast->base;
      pts = std::move(fast->pts);
      info.index_used = true;
    } else if (touched) {
      s = std::make_unique<decode_session>(src, req, setup);
    }
  }
  // Without timestamps, the packets up to `start` in decode order let decoding start at a
  // keyframe (decode_output_order_from_keyframe): AVI lists them in its index; elsewhere the
  // pass below records them, reading on up to `start` once a packet without one shows up.
  const bool avi = is_avi(s->in->format());
  const bool mov = is_mov(s->in->format());
  std::vector<packet_entry> table;
  bool table_done = !req.use_index || mov;
  // Without the index the pass below turns to output order when it meets a packet without pts
  // within a margin past the clip; with it, the same rule from the recorded first such packet.
  if (timestamps && fi != nullptr && fi->output_order && fi->no_pts_from <= last + reorder_margin) {
    // The index lists every packet in decode order: no pass.
    timestamps = false;
    table.reserve(fi->packets.size());
    for (const index_packet& p : fi->packets) table.push_back({p.pos, p.dts, p.size, p.key});
    table_done = true;
    info.index_used = true;
  }
  if (timestamps && !info.indexed && !info.index_used) {
    packet_ptr pkt = make_packet();
    for (;;) {
      if (timestamps ? static_cast<std::int64_t>(pts.size()) > last + reorder_margin
                     : table_done || static_cast<std::int64_t>(table.size()) > req.start)
        break;
      if (!next_packet(*s, pkt.get())) break;  // the whole stream is in `pts`
      // Not frames: samples before the edit list's start, and (MP4) a sample the end of the
      // file cuts (probe counts neither).
      const bool discard =
          (pkt->flags & AV_PKT_FLAG_DISCARD) != 0 || (mov && cut_short(s->stream, pkt.get()));
      const std::int64_t p = pkt->pts;
      if (!table_done && !discard)
        table.push_back({pkt->pos, pkt->dts, pkt->size, (pkt->flags & AV_PKT_FLAG_KEY) != 0});
      av_packet_unref(pkt.get());
      if (discard) continue;
      if (timestamps && p == AV_NOPTS_VALUE) {
        timestamps = false;
        if (avi && !table_done) {  // without a complete index, the pass goes on
          auto index = avi_index_table(s->stream);
          if (!index.empty()) {
            table = std::move(index);
            table_done = true;
          }
        }
        continue;
      }
      if (timestamps) pts.push_back(p);
    }
  }

  std::int64_t filled = 0;
  if (!timestamps) {
    // 2a. No timestamps: frames are numbered in the decoder's output order, from the start.
    info.presentation_index = false;
    bool done = false;
    if (!image && !table.empty()) {
      // The session the pass read packets from: seeked, its decoder still unused.
      done = decode_output_order_from_keyframe(*s, req, table, avi, writer, info, filled);
      info.seeked = done;
    }
    if (!done) {
      filled = 0;
      info.frames_decoded = 0;
      info.frames_converted = 0;
      if (!image) s = std::make_unique<decode_session>(src, req, setup);  // the pass read packets
      std::int64_t k = 0;
      const std::int64_t held_back = decode_frames(*s, req, nullptr, [&](const AVFrame* f) {
        ++info.frames_decoded;
        const std::int64_t index = k++;
        if (filled < n && index == frame_at(req, filled)) {
          writer.write(name, f, filled, info);
          ++filled;
        }
        return filled == n;
      });
      info.frames_decoded += held_back;
    }
  } else {
    // 2b. Presentation index i is the i-th smallest timestamp.
    std::sort(pts.begin(), pts.end());
    std::vector<std::int64_t> wanted;
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t i = frame_at(req, j) - base;
      if (i >= static_cast<std::int64_t>(pts.size())) break;
      wanted.push_back(pts[static_cast<std::size_t>(i)]);
    }
    const auto available = static_cast<std::int64_t>(wanted.size());
    if (available < n && (!req.pad || available == 0))
      fail(name, "clip too short: frames " + std::to_string(req.start) + " to " +
                     std::to_string(last) + " asked, the video has " +
                     std::to_string(base + static_cast<std::int64_t>(pts.size())) + " frames");
    // Distinct timestamps (as in any sound stream) let decoding stop at the last wanted packet.
    const bool distinct = std::adjacent_find(pts.begin(), pts.end()) == pts.end();
    std::vector<std::int64_t> sorted_wanted = wanted;
    std::sort(sorted_wanted.begin(), sorted_wanted.end());
    sorted_wanted.erase(std::unique(sorted_wanted.begin(), sorted_wanted.end()),
                        sorted_wanted.end());
    // Seek targets: the first wanted frame's timestamp, then 1, 3 and 7 s before it (MPEG-TS
    // and PS seek by byte position and decode time, and can land after the frame or nowhere:
    // a landing is taken only when the first frame out comes at or before it and every
    // wanted frame comes out), then the file's start.
    const AVRational tb = s->stream->time_base;
    const std::int64_t second =
        tb.num > 0 && tb.den > 0 ? std::max<std::int64_t>(1, av_rescale_q(1, {1, 1}, tb)) : 1;
    const std::int64_t targets[] = {wanted.front(), wanted.front() - second,
                                    wanted.front() - 3 * second, wanted.front() - 7 * second};
    constexpr int seek_attempts = static_cast<int>(sizeof targets / sizeof targets[0]);
    // With the frame index, first the keyframe D at or before the first wanted frame (the last
    // one shown no later), reached by `seek_to_key` (MPEG-TS/PS: by byte position).
    std::size_t d = 0;
    if (fi != nullptr && !fi->output_order)
      while (d < fi->keys.size() && fi->keys[d].pts <= wanted.front()) ++d;
    const bool key_seek = d >= 2;  // D = keys[d - 1], not the first
    bool decoded = false;          // the decoder has had packets
    bool skip = req.skip_unwanted;
    for (int attempt = key_seek ? -1 : 0; attempt <= seek_attempts; ++attempt) {
      bool seek = attempt < seek_attempts;
      packet_ptr landed;
      if (attempt < 0) {
        landed = make_packet();
        if (!seek_to_key(*s, *fi, d - 1, landed.get())) continue;
      } else if (seek) {
        if (decoded) avcodec_flush_buffers(s->codec.get());
        const int rc =
            av_seek_frame(s->in->format(), s->index, targets[attempt], AVSEEK_FLAG_BACKWARD);
        seek = rc >= 0;
      }
      if (!seek) s = std::make_unique<decode_session>(src, req, setup);  // from the start
      info.seeked = seek;
      decoded = true;
      bool overshot = false, first = true, missing = false;
      filled = 0;
      info.frames_decoded = 0;
      info.frames_converted = 0;
      packet_plan plan{.wanted = &sorted_wanted, .drain_after_wanted = distinct};
      const std::int64_t held_back = decode_frames(
          *s, req, skip ? &plan : nullptr,
          [&](const AVFrame* f) {
            ++info.frames_decoded;
            const std::int64_t p = frame_pts(f);
            if (first && p > wanted.front()) {
              overshot = true;  // the seek landed after the first wanted frame
              return true;
            }
            first = false;
            if (filled < available && p > wanted[static_cast<std::size_t>(filled)]) {
              missing = true;  // a later frame came out first
              return true;
            }
            if (filled < available && p == wanted[static_cast<std::size_t>(filled)]) {
              writer.write(name, f, filled, info);
              ++filled;
            }
            return filled == available;
          },
          landed.get());
      info.frames_decoded += held_back;
      // A wanted frame the stream has did not come out. After a seek that is the landing's
      // doing: started at an open GOP's keyframe, the frames decoded after it but shown before
      // it refer to the GOP before, and FFmpeg's H.264 decoder can then lose later frames too
      // (x264 open-gop; tests/ffmpeg/decode_skip.cpp): an earlier landing, then the start.
      // From the start it is the data's (corrupt): with skipping, once more without it, so
      // that what follows (an error, padding) is what decoding every frame gives.
      const bool short_of_wanted = !overshot && (missing || filled < available);
      if (short_of_wanted && seek) continue;
      if (short_of_wanted && plan.drained && skip) {
        skip = false;
        --attempt;
        continue;
      }
      if (missing)
        fail(name, "frame " + std::to_string(frame_at(req, filled)) +
                       " is missing from the decoded stream (corrupt data?)");
      if (!overshot && (filled > 0 || !seek)) break;
      // Landed after the first wanted frame, or nothing at all came out (some demuxers seek
      // badly, e.g. MPEG-TS near its end): earlier, then from the start.
      if (!seek)
        fail(name, "the first frame decoded comes after frame " + std::to_string(req.start));
    }
  }
  if (filled < n) {
    if (!req.pad || filled == 0)
      fail(name, "clip too short: " + std::to_string(filled) + " of " + std::to_string(n) +
                     " frames decoded (frames " + std::to_string(req.start) + " to " +
                     std::to_string(last) + " asked)");
    for (std::int64_t j = filled; j < n; ++j) writer.repeat(filled - 1, j);
    info.frames_padded = n - filled;
  }
  return info;
}

inline clip_info decode_input(const source& src, const clip_request& req,
                              std::span<std::uint8_t> out) {
  check_request(src.name, req, out.size());
  return decode_planned(src, req, nullptr, [&](int rotation, AVRational sar, bool image) {
    return frame_writer(req, out, rotation, sar, image);
  });
}

}  // namespace vbucket::ffmpeg::detail
