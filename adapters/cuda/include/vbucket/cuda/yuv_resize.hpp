#pragma once
/// The NVDEC decoder's per-pixel math (nvdec.hpp), in one place for the CUDA kernel and the
/// host: a decoded Y'CbCr frame (NV12, P010/P016, or planar 4:2:0 / 4:4:4, 8 or 16 bits)
/// → RGB, resized and cropped to the bucket with Open-Sora's geometry (the frame scaled to
/// cover the target, the middle taken: `vbucket::ffmpeg::resize_crop`), turned for display.
/// Plain C++ that nvcc compiles as `__host__ __device__`, so the CPU tests check the exact
/// code the kernel runs (tests/cuda/yuv_resize.cpp: against libswscale, within a stated
/// tolerance, and exact properties).
///
/// Two resamplings:
///  - `resample_mode::triangle` (resize_filter::bilinear): a tent filter whose width grows with
///    the downscaling factor (antialiased bilinear, as libswscale's SWS_BILINEAR and PIL's
///    bilinear), applied to the luma and chroma planes, then converted to RGB, as libswscale
///    scales Y'CbCr before converting;
///  - `resample_mode::torch` (resize_filter::opensora): every source pixel converted to RGB
///    and rounded to uint8 first, then PyTorch's interpolate(mode="bilinear",
///    align_corners=False, antialias=False), rounded, as Open-Sora's video transform does.

#include <cstdint>  // std::uint8_t, std::uint16_t

#if defined(__CUDACC__)
#define VBUCKET_HD __host__ __device__
#else
#define VBUCKET_HD
#endif

namespace vbucket::cuda::yuv {

/// How the frame's planes are laid out.
enum class planes : int {
  semi = 0,    ///< NV12 / P010 / P016: plane 0 luma, plane 1 interleaved Cb Cr
  planar = 1,  ///< YUV420P / YUV444P (and 16-bit): planes 0, 1, 2 = Y', Cb, Cr
};

/// Y'CbCr → R'G'B' coefficients of a colour matrix (Kr, Kb) and range: R = y + cr_r·v,
/// G = y − cb_g·u − cr_g·v, B = y + cb_b·u, with y, u, v scaled to 0..255 (u, v centred).
struct colour {
  float y_offset = 16.0f;  ///< black level, in 8-bit units
  float y_scale = 255.0f / 219.0f;
  float c_scale = 255.0f / 224.0f;
  float cr_r = 0, cb_g = 0, cr_g = 0, cb_b = 0;
};

/// The coefficients of the matrix with luma weights `kr`, `kb` (BT.601: 0.299, 0.114; BT.709:
/// 0.2126, 0.0722; BT.2020: 0.2627, 0.0593), limited ("TV", Y' 16..235, C 16..240) or full
/// range.
VBUCKET_HD inline colour make_colour(float kr, float kb, bool full_range) {
  colour c;
  const float kg = 1.0f - kr - kb;
  c.y_offset = full_range ? 0.0f : 16.0f;
  c.y_scale = full_range ? 1.0f : 255.0f / 219.0f;
  c.c_scale = full_range ? 1.0f : 255.0f / 224.0f;
  c.cr_r = 2.0f * (1.0f - kr);
  c.cb_b = 2.0f * (1.0f - kb);
  c.cb_g = 2.0f * kb * (1.0f - kb) / kg;
  c.cr_g = 2.0f * kr * (1.0f - kr) / kg;
  return c;
}

/// A decoded frame as the math reads it (device or host pointers).
struct frame_view {
  const std::uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  int pitch[3] = {0, 0, 0};  ///< bytes per row
  int width = 0;             ///< luma size (the coded frame, before rotation)
  int height = 0;
  planes layout = planes::semi;
  bool wide = false;        ///< 16-bit samples (P010/P016: the value in the high bits)
  int chroma_shift = 1;     ///< log2 of the chroma subsampling, both ways (1: 4:2:0; 0: 4:4:4)
  bool chroma_left = true;  ///< 4:2:0 chroma sited at even columns (MPEG-2, H.264), else centred
  colour coef{};
};

/// Which resampling (see the file's comment).
enum class resample_mode : int { triangle = 0, torch = 1 };

/// Where output pixel (y, x) of the target comes from: the display frame scaled to
/// scaled_height x scaled_width (resize_crop), the window from (top, left), turned by
/// `rotation` (clockwise: 0, 90, 180, 270) after the scaling of the coded frame.
struct resample {
  int height = 0, width = 0;  ///< target
  int scaled_height = 0, scaled_width = 0;
  int top = 0, left = 0;
  int rotation = 0;
  resample_mode mode = resample_mode::triangle;
};

VBUCKET_HD inline int clamp_index(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

VBUCKET_HD inline float sample_at(const frame_view& f, int p, int y, int x, int component) {
  const std::uint8_t* row = f.plane[p] + static_cast<long long>(y) * f.pitch[p];
  const int step = f.layout == planes::semi && p == 1 ? 2 : 1;
  const int i = x * step + component;
  if (f.wide) {
    std::uint16_t v = 0;
    // Byte-wise, little-endian: the rows need no 2-byte alignment.
    v = static_cast<std::uint16_t>(row[2 * i] | (row[2 * i + 1] << 8));
    return static_cast<float>(v) / 256.0f;
  }
  return static_cast<float>(row[i]);
}

/// The coded-frame position (before rotation) that target pixel (y, x) shows, in scaled coded
/// coordinates, and that scaled image's size.
struct coded_point {
  int row, col;    ///< in the scaled coded image
  int rows, cols;  ///< its size
};

VBUCKET_HD inline coded_point locate(const resample& r, int y, int x) {
  const int dy = r.top + y, dx = r.left + x;  // in the scaled display image
  const bool swap = r.rotation == 90 || r.rotation == 270;
  coded_point p{dy, dx, swap ? r.scaled_width : r.scaled_height,
                swap ? r.scaled_height : r.scaled_width};
  switch (r.rotation) {
    case 90:  // display (dy, dx) shows coded (rows - 1 - dx, dy)
      p.row = p.rows - 1 - dx;
      p.col = dy;
      break;
    case 180:
      p.row = p.rows - 1 - dy;
      p.col = p.cols - 1 - dx;
      break;
    case 270:
      p.row = dx;
      p.col = p.cols - 1 - dy;
      break;
    default:
      break;
  }
  return p;
}

/// The tent filter of radius `radius` (≥ 1, in source samples) centred at `centre` over a
/// plane of `h` x `w` samples, edges replicated. `fetch(y, x)` reads a sample.
template <class Fetch>
VBUCKET_HD float tent(Fetch fetch, float cy, float cx, float ry, float rx, int h, int w) {
  const int y0 = static_cast<int>(floorf(cy - ry)) + 1, y1 = static_cast<int>(floorf(cy + ry));
  const int x0 = static_cast<int>(floorf(cx - rx)) + 1, x1 = static_cast<int>(floorf(cx + rx));
  float acc = 0.0f, total = 0.0f;
  for (int ky = y0; ky <= y1; ++ky) {
    const float wy = 1.0f - fabsf(static_cast<float>(ky) - cy) / ry;
    if (wy <= 0.0f) continue;
    const int yy = clamp_index(ky, h);
    for (int kx = x0; kx <= x1; ++kx) {
      const float wx = 1.0f - fabsf(static_cast<float>(kx) - cx) / rx;
      if (wx <= 0.0f) continue;
      const float wgt = wy * wx;
      acc += wgt * fetch(yy, clamp_index(kx, w));
      total += wgt;
    }
  }
  return total > 0.0f
             ? acc / total
             : fetch(clamp_index(static_cast<int>(cy), h), clamp_index(static_cast<int>(cx), w));
}

VBUCKET_HD inline std::uint8_t to_byte(float v) {
  v = v + 0.5f;
  v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
  return static_cast<std::uint8_t>(v);
}

/// R'G'B' (0..255, unclamped) of luma y and chroma u, v (8-bit scale).
VBUCKET_HD inline void to_rgb(const colour& c, float y, float u, float v, float rgb[3]) {
  const float ys = (y - c.y_offset) * c.y_scale;
  const float us = (u - 128.0f) * c.c_scale, vs = (v - 128.0f) * c.c_scale;
  rgb[0] = ys + c.cr_r * vs;
  rgb[1] = ys - c.cb_g * us - c.cr_g * vs;
  rgb[2] = ys + c.cb_b * us;
}

/// The chroma sample position (in chroma samples) of luma position (ly, lx).
VBUCKET_HD inline void chroma_position(const frame_view& f, float ly, float lx, float& cy,
                                       float& cx) {
  if (f.chroma_shift == 0) {
    cy = ly;
    cx = lx;
    return;
  }
  cy = (ly + 0.5f) * 0.5f - 0.5f;
  cx = f.chroma_left ? lx * 0.5f : (lx + 0.5f) * 0.5f - 0.5f;
}

/// Y', Cb, Cr of the frame at luma position (ly, lx), chroma interpolated bilinearly (the
/// torch mode's per-pixel conversion).
VBUCKET_HD inline void yuv_at_pixel(const frame_view& f, int ly, int lx, float out[3]) {
  out[0] = sample_at(f, 0, ly, lx, 0);
  const int ch = (f.height + (1 << f.chroma_shift) - 1) >> f.chroma_shift;
  const int cw = (f.width + (1 << f.chroma_shift) - 1) >> f.chroma_shift;
  float cy = 0, cx = 0;
  chroma_position(f, static_cast<float>(ly), static_cast<float>(lx), cy, cx);
  const bool semi = f.layout == planes::semi;
  for (int k = 0; k < 2; ++k) {
    const int p = semi ? 1 : 1 + k, comp = semi ? k : 0;
    auto fetch = [&](int yy, int xx) { return sample_at(f, p, yy, xx, comp); };
    out[1 + k] = f.chroma_shift == 0 ? fetch(ly, lx) : tent(fetch, cy, cx, 1.0f, 1.0f, ch, cw);
  }
}

/// The RGB bytes of target pixel (y, x).
VBUCKET_HD inline void pixel(const frame_view& f, const resample& r, int y, int x,
                             std::uint8_t rgb[3]) {
  const coded_point p = locate(r, y, x);
  const float fy = static_cast<float>(f.height) / static_cast<float>(p.rows);
  const float fx = static_cast<float>(f.width) / static_cast<float>(p.cols);
  const float ly = (static_cast<float>(p.row) + 0.5f) * fy - 0.5f;
  const float lx = (static_cast<float>(p.col) + 0.5f) * fx - 0.5f;
  if (r.mode == resample_mode::torch) {
    // torch: source coordinate clamped at 0, neighbours i0 and i1 = min(i0 + 1, n - 1).
    const float sy = ly < 0.0f ? 0.0f : ly, sx = lx < 0.0f ? 0.0f : lx;
    const int y0 = clamp_index(static_cast<int>(sy), f.height);
    const int x0 = clamp_index(static_cast<int>(sx), f.width);
    const int y1 = clamp_index(y0 + 1, f.height), x1 = clamp_index(x0 + 1, f.width);
    const float wy = sy - static_cast<float>(y0), wx = sx - static_cast<float>(x0);
    const int ys[2] = {y0, y1}, xs[2] = {x0, x1};
    std::uint8_t corner[2][2][3];
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        float yuv[3], c[3];
        yuv_at_pixel(f, ys[a], xs[b], yuv);
        to_rgb(f.coef, yuv[0], yuv[1], yuv[2], c);
        for (int k = 0; k < 3; ++k) corner[a][b][k] = to_byte(c[k]);
      }
    for (int k = 0; k < 3; ++k) {
      const float top =
          static_cast<float>(corner[0][0][k]) * (1 - wx) + static_cast<float>(corner[0][1][k]) * wx;
      const float bottom =
          static_cast<float>(corner[1][0][k]) * (1 - wx) + static_cast<float>(corner[1][1][k]) * wx;
      rgb[k] = to_byte(top * (1 - wy) + bottom * wy);
    }
    return;
  }
  // triangle: radius max(1, scale) in each plane's own samples.
  const float ry = fy > 1.0f ? fy : 1.0f, rx = fx > 1.0f ? fx : 1.0f;
  const float yv = tent([&](int yy, int xx) { return sample_at(f, 0, yy, xx, 0); }, ly, lx, ry, rx,
                        f.height, f.width);
  float cy = 0, cx = 0;
  chroma_position(f, ly, lx, cy, cx);
  const float div = static_cast<float>(1 << f.chroma_shift);
  const float cry = ry / div > 1.0f ? ry / div : 1.0f, crx = rx / div > 1.0f ? rx / div : 1.0f;
  const int ch = (f.height + (1 << f.chroma_shift) - 1) >> f.chroma_shift;
  const int cw = (f.width + (1 << f.chroma_shift) - 1) >> f.chroma_shift;
  const bool semi = f.layout == planes::semi;
  float uv[2];
  for (int k = 0; k < 2; ++k) {
    const int pl = semi ? 1 : 1 + k, comp = semi ? k : 0;
    uv[k] = tent([&](int yy, int xx) { return sample_at(f, pl, yy, xx, comp); }, cy, cx, cry, crx,
                 ch, cw);
  }
  float c[3];
  to_rgb(f.coef, yv, uv[0], uv[1], c);
  for (int k = 0; k < 3; ++k) rgb[k] = to_byte(c[k]);
}

/// The byte offset of channel `c` of pixel (y, x) of clip slot `slot` in a uint8 clip of
/// `frames` x `height` x `width` (THWC when `thwc`, else CTHW).
VBUCKET_HD inline long long clip_offset(bool thwc, int frames, int height, int width, int slot,
                                        int y, int x, int c) {
  const long long hw = static_cast<long long>(height) * width;
  const long long p = static_cast<long long>(y) * width + x;
  return thwc ? (slot * hw + p) * 3 + c : (static_cast<long long>(c) * frames + slot) * hw + p;
}

}  // namespace vbucket::cuda::yuv
