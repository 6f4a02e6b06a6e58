// vbucket::ffmpeg_cuda: NVDEC clip decoding (vbucket/cuda/nvdec.hpp). decode_clip's plan
// (ffmpeg/detail/decode_impl.hpp: decode_planned, compiled in vbucket::ffmpeg) with FFmpeg's CUDA
// hardware decoding and a frame_sink that converts each frame on the device (nvdec_kernels.cu)
// instead of libswscale.
#include "vbucket/cuda/nvdec.hpp"

extern "C" {
#include <libavutil/hwcontext.h>
}

#include <cstring>    // std::memcpy
#include <exception>  // std::exception
#include <new>        // std::bad_alloc
#include <stdexcept>  // std::runtime_error
#include <string>     // std::string, std::to_string
#include <utility>    // std::move
#include <vector>     // std::vector

#include "nvdec_kernels.hpp"
#include "vbucket/cuda/pinned_backend.hpp"  // check, device_available, device_buffer
#include "vbucket/cuda/yuv_resize.hpp"
#include "vbucket/ffmpeg/detail/decode_impl.hpp"

namespace vbucket::cuda {

const char* to_string(fallback_reason r) noexcept {
  switch (r) {
    case fallback_reason::none:
      return "none";
    case fallback_reason::no_device:
      return "no_device";
    case fallback_reason::codec:
      return "codec";
    case fallback_reason::pixel_format:
      return "pixel_format";
    case fallback_reason::filter:
      return "filter";
    case fallback_reason::device_error:
      return "device_error";
  }
  return "?";
}

namespace {

namespace av = vbucket::ffmpeg::detail;
using ffmpeg::clip_info;
using ffmpeg::clip_request;
using ffmpeg::resize_filter;

/// Thrown by a writer for a frame the device path does not take: the clip goes to the CPU.
class needs_cpu : public std::runtime_error {
 public:
  needs_cpu(fallback_reason r, const std::string& what) : std::runtime_error(what), reason(r) {}
  fallback_reason reason;
};

/// The get_format state of one decode.
struct hw_state {
  bool refused = false;  ///< FFmpeg offered no CUDA format (codec or profile not on NVDEC)
};

AVPixelFormat pick_cuda(AVCodecContext* ctx, const AVPixelFormat* formats) {
  auto* st = static_cast<hw_state*>(ctx->opaque);
  for (const AVPixelFormat* p = formats; *p != AV_PIX_FMT_NONE; ++p)
    if (*p == AV_PIX_FMT_CUDA) return *p;
  // Nothing the device decodes (the codec or profile, or the hwaccel failed to start):
  // software frames, which the writer refuses at once, so the file goes to the CPU decoder.
  if (st != nullptr) st->refused = true;
  return avcodec_default_get_format(ctx, formats);
}

/// The frame layout of pixel format `fmt` in `v` (planes, depth, subsampling); false for a
/// format the math does not read. `full`: a "J" format (full range whatever the frame says).
bool describe(AVPixelFormat fmt, yuv::frame_view& v, bool& full) noexcept {
  struct layout {
    AVPixelFormat fmt;
    yuv::planes planes;
    bool wide;
    int chroma_shift;
    bool full;
  };
  constexpr layout layouts[] = {
      {AV_PIX_FMT_NV12, yuv::planes::semi, false, 1, false},
      {AV_PIX_FMT_P010LE, yuv::planes::semi, true, 1, false},
      {AV_PIX_FMT_P016LE, yuv::planes::semi, true, 1, false},
      {AV_PIX_FMT_YUV420P, yuv::planes::planar, false, 1, false},
      {AV_PIX_FMT_YUVJ420P, yuv::planes::planar, false, 1, true},
      {AV_PIX_FMT_YUV444P, yuv::planes::planar, false, 0, false},
      {AV_PIX_FMT_YUVJ444P, yuv::planes::planar, false, 0, true},
      {AV_PIX_FMT_YUV444P16LE, yuv::planes::planar, true, 0, false},
  };
  full = false;
  for (const layout& l : layouts) {
    if (l.fmt != fmt) continue;
    v.layout = l.planes;
    v.wide = l.wide;
    v.chroma_shift = l.chroma_shift;
    full = l.full;
    return true;
  }
  return false;
}

/// The view of frame `f` whose samples are laid out as `fmt`, with its colour matrix and range
/// as the CPU decoder reads them (frame_writer: unspecified = BT.601).
bool view_of(const AVFrame* f, AVPixelFormat fmt, yuv::frame_view& v) noexcept {
  bool full = false;
  if (!describe(fmt, v, full)) return false;
  for (int p = 0; p < 3; ++p) {
    v.plane[p] = f->data[p];
    v.pitch[p] = f->linesize[p];
  }
  v.width = f->width;
  v.height = f->height;
  float kr = 0.299f, kb = 0.114f;
  switch (av::enum_value(f->colorspace)) {
    case AVCOL_SPC_BT709:
      kr = 0.2126f;
      kb = 0.0722f;
      break;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      kr = 0.2627f;
      kb = 0.0593f;
      break;
    case AVCOL_SPC_SMPTE240M:
      kr = 0.212f;
      kb = 0.087f;
      break;
    case AVCOL_SPC_FCC:
      kr = 0.30f;
      kb = 0.11f;
      break;
    default:
      break;
  }
  full = full || av::enum_value(f->color_range) == AVCOL_RANGE_JPEG;
  v.coef = yuv::make_colour(kr, kb, full);
  // Chroma sited as the frame says: left (MPEG-2, H.264, HEVC) or else centred (libswscale's
  // default for an unspecified siting, which the CPU decoder relies on).
  v.chroma_left = av::enum_value(f->chroma_location) == AVCHROMA_LOC_LEFT;
  return true;
}

/// The geometry of frame `f` for the request, as frame_writer computes it (display shape from
/// the sample aspect ratio and the rotation, Open-Sora's resize-crop); fills `info`'s source
/// fields. Throws needs_cpu for a filter the math does not have.
yuv::resample plan_frame(const std::string& name, const clip_request& req, const AVFrame* f,
                         AVRational container_sar, int rotation, bool image, clip_info& info) {
  av::check_size(name, f->height, f->width, req.limits);
  const AVRational sar = av::usable_sar(av::stream_sar(container_sar, f->sample_aspect_ratio));
  const std::int64_t shown_width = av::display_width(f->width, sar);
  const bool swap = rotation == 90 || rotation == 270;
  const std::int64_t dh = swap ? shown_width : f->height;
  const std::int64_t dw = swap ? f->height : shown_width;
  const ffmpeg::resize_crop g = ffmpeg::resize_crop_geometry(
      dh, dw, req.height, req.width,
      image ? ffmpeg::crop_offset::image_round : ffmpeg::crop_offset::video_floor);
  if (g.scaled_height > 4 * req.limits.max_side || g.scaled_width > 4 * req.limits.max_side)
    av::fail(name, "frame " + std::to_string(f->width) + "x" + std::to_string(f->height) +
                       " is too narrow to cover " + std::to_string(req.width) + "x" +
                       std::to_string(req.height));
  yuv::resample r;
  r.height = static_cast<int>(req.height);
  r.width = static_cast<int>(req.width);
  r.scaled_height = static_cast<int>(g.scaled_height);
  r.scaled_width = static_cast<int>(g.scaled_width);
  r.top = static_cast<int>(g.top);
  r.left = static_cast<int>(g.left);
  r.rotation = rotation;
  if (req.filter == resize_filter::opensora && !image && rotation == 0 && shown_width == f->width)
    r.mode = yuv::resample_mode::torch;  // as the CPU decoder: torch's bilinear only there
  else if (req.filter == resize_filter::bilinear || req.filter == resize_filter::opensora)
    r.mode = yuv::resample_mode::triangle;
  else
    throw needs_cpu(fallback_reason::filter,
                    "the device resizes with the bilinear and opensora "
                    "filters only");
  info.source_height = dh;
  info.source_width = dw;
  info.sar_num = sar.num;
  info.sar_den = sar.den;
  return r;
}

/// decode_planned's writer for NVDEC frames: one kernel per frame into the device clip.
class device_writer final : public av::frame_sink {
 public:
  device_writer(const clip_request& req, std::uint8_t* out, cudaStream_t stream, bool sync_each)
      : req_(req), out_(out), stream_(stream), sync_each_(sync_each) {}

  void write(const std::string& name, const AVFrame* f, std::int64_t slot,
             clip_info& info) override {
    if (f->format != AV_PIX_FMT_CUDA || f->hw_frames_ctx == nullptr) {
      const char* fmt = av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format));
      throw needs_cpu(fallback_reason::codec, name + ": the decoder gave " +
                                                  (fmt != nullptr ? fmt : "unknown") +
                                                  " frames, not CUDA ones (no CUDA decoding for "
                                                  "the codec or its profile)");
    }
    const auto* frames = reinterpret_cast<const AVHWFramesContext*>(f->hw_frames_ctx->data);
    yuv::frame_view v;
    if (!view_of(f, frames->sw_format, v)) {
      const char* fmt = av_get_pix_fmt_name(frames->sw_format);
      throw needs_cpu(fallback_reason::pixel_format, name + ": NVDEC frames in " +
                                                         (fmt != nullptr ? fmt : "unknown") +
                                                         ", which the kernel does not read");
    }
    const yuv::resample r = plan_frame(name, req_, f, container_sar_, rotation_, image_, info);
    detail::launch_yuv_resize(v, r, out_, req_.layout == ffmpeg::layout::thwc,
                              static_cast<int>(req_.frames), static_cast<int>(slot), stream_);
    // The frame's surface goes back to FFmpeg's pool when the caller unrefs it: FFmpeg copies
    // into it on the legacy default stream, which a blocking stream is ordered with; another
    // stream must finish the kernel first.
    if (sync_each_) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    ++info.frames_converted;
  }

  void repeat(std::int64_t from, std::int64_t to) override {
    const auto hw = static_cast<std::size_t>(req_.height * req_.width);
    const auto n = static_cast<std::size_t>(req_.frames);
    const auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
    if (req_.layout == ffmpeg::layout::thwc) {
      copy(out_ + t * hw * 3, out_ + f * hw * 3, hw * 3);
    } else {
      for (std::size_t c = 0; c < 3; ++c)
        copy(out_ + (c * n + t) * hw, out_ + (c * n + f) * hw, hw);
    }
  }

 private:
  void copy(std::uint8_t* to, const std::uint8_t* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync (padding)");
  }

  const clip_request& req_;
  std::uint8_t* out_;
  cudaStream_t stream_;
  bool sync_each_;
};

/// decode_planned's writer for software frames, with the device's math on the host
/// (decode_clip_reference).
class host_writer final : public av::frame_sink {
 public:
  host_writer(const clip_request& req, std::span<std::uint8_t> out) : req_(req), out_(out) {}

  void write(const std::string& name, const AVFrame* f, std::int64_t slot,
             clip_info& info) override {
    yuv::frame_view v;
    if (!view_of(f, static_cast<AVPixelFormat>(f->format), v)) {
      const char* fmt = av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format));
      av::fail(name, std::string("frames in ") + (fmt != nullptr ? fmt : "unknown") +
                         ", which the device's math does not read");
    }
    yuv::resample r;
    try {
      r = plan_frame(name, req_, f, container_sar_, rotation_, image_, info);
    } catch (const needs_cpu& e) {
      av::fail(name, e.what());
    }
    const bool thwc = req_.layout == ffmpeg::layout::thwc;
    const int n = static_cast<int>(req_.frames), s = static_cast<int>(slot);
    for (int y = 0; y < r.height; ++y)
      for (int x = 0; x < r.width; ++x) {
        std::uint8_t rgb[3];
        yuv::pixel(v, r, y, x, rgb);
        for (int c = 0; c < 3; ++c)
          out_[static_cast<std::size_t>(yuv::clip_offset(thwc, n, r.height, r.width, s, y, x, c))] =
              rgb[c];
      }
    ++info.frames_converted;
  }

  void repeat(std::int64_t from, std::int64_t to) noexcept override {
    const auto hw = static_cast<std::size_t>(req_.height * req_.width);
    const auto n = static_cast<std::size_t>(req_.frames);
    const auto f = static_cast<std::size_t>(from), t = static_cast<std::size_t>(to);
    std::uint8_t* base = out_.data();
    if (req_.layout == ffmpeg::layout::thwc) {
      std::memcpy(base + t * hw * 3, base + f * hw * 3, hw * 3);
    } else {
      for (std::size_t c = 0; c < 3; ++c)
        std::memcpy(base + (c * n + t) * hw, base + (c * n + f) * hw, hw);
    }
  }

 private:
  const clip_request& req_;
  std::span<std::uint8_t> out_;
};

}  // namespace

struct nvdec_decoder::impl {
  nvdec_options options;
  std::string why_not;
  AVBufferRef* device = nullptr;  // FFmpeg's CUDA device context (the primary context)
  cudaStream_t stream = nullptr;
  nvdec_stats stats;
  device_buffer scratch;           // decode_normalized's uint8 clip
  std::vector<std::uint8_t> host;  // the CPU decoder's clip

  explicit impl(nvdec_options o) : options(o) {
    if (!device_available(&why_not)) return;
    if (cudaSetDevice(options.device) != cudaSuccess) {
      why_not = "cannot use CUDA device " + std::to_string(options.device);
      cudaGetLastError();
      return;
    }
    // The runtime API's primary context, so that the kernels can read FFmpeg's frames.
    AVDictionary* opts = nullptr;
    av_dict_set(&opts, "primary_ctx", "1", 0);
    const int rc = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_CUDA,
                                          std::to_string(options.device).c_str(), opts, 0);
    av_dict_free(&opts);
    if (rc < 0) {
      device = nullptr;
      why_not = "FFmpeg cannot open CUDA device " + std::to_string(options.device) + ": " +
                av::av_error_text(rc);
      return;
    }
    // Blocking: ordered with the legacy default stream, which FFmpeg copies frames on.
    if (cudaStreamCreateWithFlags(&stream, cudaStreamDefault) != cudaSuccess) {
      cudaGetLastError();
      av_buffer_unref(&device);
      stream = nullptr;
      why_not = "cannot create a CUDA stream";
    }
  }

  ~impl() {
    if (stream != nullptr) cudaStreamDestroy(stream);
    av_buffer_unref(&device);
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  /// The uint8 clip into device memory `out`; throws vbucket::error (naming the file).
  nvdec_info run(const std::string& path, const clip_request& req, std::uint8_t* out) {
    av::check_request(path, req, ffmpeg::clip_bytes(req));
    if (out == nullptr) av::fail(path, "no output buffer");
    // The calling thread's current device (per thread in the runtime API) must be ours.
    if (stream != nullptr) check(cudaSetDevice(options.device), "cudaSetDevice");
    nvdec_info ni;
    if (device == nullptr) {
      ni.fallback = fallback_reason::no_device;
      ni.fallback_detail = why_not;
    } else if (req.filter != resize_filter::bilinear && req.filter != resize_filter::opensora) {
      ni.fallback = fallback_reason::filter;
      ni.fallback_detail = "the device resizes with the bilinear and opensora filters only";
    } else {
      hw_state st;
      const av::decoder_setup setup{device, &pick_cuda, &st};
      try {
        device_writer writer(req, out, stream, false);
        ni.clip = av::decode_planned(av::source{path, {}, false}, req, &setup, writer);
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        ni.on_device = true;
        ++stats.on_device;
        return ni;
      } catch (const needs_cpu& e) {
        ni.fallback = e.reason;
        ni.fallback_detail = e.what();
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        ni.fallback = st.refused ? fallback_reason::codec : fallback_reason::device_error;
        ni.fallback_detail = e.what();
      }
    }
    if (!options.allow_fallback)
      av::fail(path, std::string("not decoded on the device (") + to_string(ni.fallback) +
                         "): " + ni.fallback_detail);
    ++stats.fallbacks;
    ++stats.by_reason[static_cast<std::size_t>(ni.fallback)];
    host.resize(ffmpeg::clip_bytes(req));
    auto r = ffmpeg::decode_clip(path, req, host);
    if (!r) {
      std::string message = r.error();
      if (ni.fallback == fallback_reason::device_error)
        message += " (on the device: " + ni.fallback_detail + ")";
      throw vbucket::error(message);
    }
    ni.clip = *r;
    if (stream == nullptr)
      av::fail(path,
               "decoded on the CPU, but there is no CUDA device to copy it to (" + why_not + ")");
    check(cudaMemcpyAsync(out, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (" + std::to_string(host.size()) + " bytes)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return ni;
  }

  template <class Body>
  ffmpeg::result<nvdec_info> guarded(Body&& body) noexcept {
    ++stats.clips;
    auto r = av::guarded<nvdec_info>("nvdec", std::forward<Body>(body));
    if (!r) ++stats.errors;
    return r;
  }
};

nvdec_decoder::nvdec_decoder(nvdec_options options) : impl_(std::make_unique<impl>(options)) {}
nvdec_decoder::~nvdec_decoder() = default;

bool nvdec_decoder::on_device() const noexcept { return impl_->device != nullptr; }
const std::string& nvdec_decoder::why_not() const noexcept { return impl_->why_not; }
const nvdec_stats& nvdec_decoder::stats() const noexcept { return impl_->stats; }

ffmpeg::result<nvdec_info> nvdec_decoder::decode(const std::string& path, const clip_request& req,
                                                 std::uint8_t* out) noexcept {
  return impl_->guarded([&] { return impl_->run(path, req, out); });
}

ffmpeg::result<nvdec_info> nvdec_decoder::decode_normalized(const std::string& path,
                                                            const clip_request& req, float* out,
                                                            const normalization& norm) noexcept {
  return impl_->guarded([&] {
    norm.validate();
    if (out == nullptr) av::fail(path, "no output buffer");
    clip_request thwc = req;
    thwc.layout = ffmpeg::layout::thwc;
    av::check_request(path, thwc, ffmpeg::clip_bytes(thwc));
    if (impl_->stream == nullptr)
      av::fail(path, "no CUDA device to normalise on (" + impl_->why_not + ")");
    const std::size_t bytes = ffmpeg::clip_bytes(thwc);
    if (impl_->scratch.size() < bytes) impl_->scratch = device_buffer(bytes);
    nvdec_info ni = impl_->run(path, thwc, impl_->scratch.as<std::uint8_t>());
    detail::launch_normalize(impl_->scratch.as<std::uint8_t>(), out,
                             static_cast<std::size_t>(req.frames),
                             static_cast<std::size_t>(req.height),
                             static_cast<std::size_t>(req.width), norm, impl_->stream);
    check(cudaStreamSynchronize(impl_->stream), "cudaStreamSynchronize");
    return ni;
  });
}

bool nvdec_supports(const std::string& codec) noexcept {
  const AVCodecDescriptor* d = avcodec_descriptor_get_by_name(codec.c_str());
  if (d == nullptr) return false;
  // The decoder the CPU path opens for the codec (avcodec_find_decoder), as the NVDEC path
  // opens the same one.
  const AVCodec* c = avcodec_find_decoder(d->id);
  if (c == nullptr) return false;
  for (int i = 0;; ++i) {
    const AVCodecHWConfig* cfg = avcodec_get_hw_config(c, i);
    if (cfg == nullptr) return false;
    if (cfg->device_type == AV_HWDEVICE_TYPE_CUDA &&
        (cfg->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0)
      return true;
  }
}

ffmpeg::result<clip_info> decode_clip_reference(const std::string& path, const clip_request& req,
                                                std::span<std::uint8_t> out) noexcept {
  return av::guarded<clip_info>(path, [&] {
    av::check_request(path, req, out.size());
    host_writer writer(req, out);
    return av::decode_planned(av::source{path, {}, false}, req, nullptr, writer);
  });
}

}  // namespace vbucket::cuda
