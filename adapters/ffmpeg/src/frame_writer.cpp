// vbucket::ffmpeg's frame conversion: decoded frames to RGB24 slots of the caller's buffer
// (libswscale, a quarter turn before scaling, Open-Sora's resize), the CPU decoder's frame_sink
// (detail/decode_impl.hpp), and decode_input, the CPU decoder over decode_planned
// (decode_impl.cpp).
#include <algorithm>  // std::min, std::max
#include <bit>        // std::endian
#include <cstddef>    // std::size_t, std::ptrdiff_t
#include <cstdint>    // std::int64_t, std::uint8_t, std::uint64_t
#include <cstring>    // std::memcpy
#include <new>        // std::bad_alloc
#include <span>       // std::span
#include <string>     // std::string, std::to_string
#include <vector>     // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/detail/decode_impl.hpp"
#include "vbucket/ffmpeg/detail/libav.hpp"

namespace vbucket::ffmpeg::detail {
namespace {

int sws_flags_of(resize_filter f) noexcept {
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
class frame_writer final : public frame_sink {
 public:
  frame_writer(const clip_request& req, std::span<std::uint8_t> out) : req_(req), out_(out) {}

  void write(const std::string& name, const AVFrame* f, std::int64_t slot,
             clip_info& info) override {
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
  void repeat(std::int64_t from, std::int64_t to) noexcept override {
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
  frame_ptr turned_;  // the frame turned a quarter, reused while the size stays
  sws_ptr sws_;
  av_buffer_ptr scratch_;
  std::size_t scratch_size_ = 0;
};

}  // namespace

clip_info decode_input(const source& src, const clip_request& req, std::span<std::uint8_t> out) {
  check_request(src.name, req, out.size());
  frame_writer writer(req, out);
  return decode_planned(src, req, nullptr, writer);
}

}  // namespace vbucket::ffmpeg::detail
