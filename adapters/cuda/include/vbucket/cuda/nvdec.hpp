#pragma once
/// NVDEC clip decoding (vbucket::ffmpeg_cuda: built when both the FFmpeg and the CUDA adapters
/// are): the clip `vbucket::ffmpeg::decode_clip` would decode, decoded by FFmpeg's CUDA
/// hardware decoding (hwaccel cuda) with the frames kept on the device, converted to RGB,
/// resized and cropped to the bucket (Open-Sora's resize-crop) by a kernel, and written into
/// device memory: uint8 THWC/CTHW as decode_clip's buffer, or float32 CTHW normalised by the
/// adapter's kernel (normalize.cuh). The frames are the same ones: decode_clip's plan (seek,
/// wanted frames, skipping) is shared (ffmpeg/detail/decode_impl.hpp: decode_planned).
///
/// Per file, a clip NVDEC cannot decode goes to the CPU decoder (decode_clip) and is copied
/// to the device: no CUDA device, a codec or profile NVDEC does not take (FFmpeg offers no
/// CUDA format for it), a frame format the kernel does not read, a filter other than bilinear
/// and opensora, or an error on the device. Never silently: `stats()` counts each, and
/// `nvdec_info::fallback` says why.
///
///     vbucket::cuda::nvdec_decoder dec;          // dec.on_device(): false without a GPU
///     vbucket::cuda::device_buffer clip(vbucket::ffmpeg::clip_bytes(req));
///     auto r = dec.decode("clip.mp4", req, clip.as<std::uint8_t>());
///     if (!r) error(r.error());                  // names the file
///
/// One decoder per thread (it owns a CUDA stream and scratch memory); the calls are
/// synchronous: the clip is in device memory when they return. `out` may be any clip's slot of
/// a batch tensor (B x T x H x W x 3 uint8: out = base + i · clip_bytes(req); B x 3 x T x H x W
/// float: base + i · 3 · T · H · W), so a batch is filled clip by clip on the device, without
/// the staging ring (which moves host-decoded clips).

#include <cuda_runtime_api.h>

#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint8_t
#include <memory>   // std::unique_ptr
#include <span>     // std::span
#include <string>   // std::string

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/result.hpp"
#include "vbucket/load/normalize.hpp"

namespace vbucket::cuda {

/// Why a clip went to the CPU decoder.
enum class fallback_reason : int {
  none = 0,
  no_device,     ///< no usable CUDA device, or FFmpeg could not open one
  codec,         ///< the codec or its profile is not decoded by NVDEC
  pixel_format,  ///< NVDEC gave frames in a format the kernel does not read
  filter,        ///< clip_request::filter is not bilinear or opensora
  device_error,  ///< decoding on the device failed (the CPU decoder then decides)
};

/// The reason's name ("codec", ...).
const char* to_string(fallback_reason r) noexcept;

/// Counts since the decoder was made.
struct nvdec_stats {
  std::int64_t clips = 0;                   ///< decode calls
  std::int64_t on_device = 0;               ///< clips decoded and converted on the device
  std::int64_t fallbacks = 0;               ///< clips handed to the CPU decoder (by_reason: why)
  std::int64_t errors = 0;                  ///< calls that returned an error
  std::array<std::int64_t, 6> by_reason{};  ///< fallbacks by fallback_reason
};

/// What one call did.
struct nvdec_info {
  ffmpeg::clip_info clip;
  bool on_device = false;  ///< decoded by NVDEC (else by the CPU decoder)
  fallback_reason fallback = fallback_reason::none;
  std::string fallback_detail;  ///< the message behind the fallback (empty when none)
};

struct nvdec_options {
  int device = 0;  ///< CUDA device ordinal
  /// false: a clip NVDEC cannot decode is an error instead of a CPU decode (tests, benchmarks).
  bool allow_fallback = true;
};

class nvdec_decoder {
 public:
  explicit nvdec_decoder(nvdec_options options = {});
  ~nvdec_decoder();
  nvdec_decoder(const nvdec_decoder&) = delete;
  nvdec_decoder& operator=(const nvdec_decoder&) = delete;

  /// Whether NVDEC can be used (a device and FFmpeg's CUDA context); else why_not() says why.
  [[nodiscard]] bool on_device() const noexcept;
  [[nodiscard]] const std::string& why_not() const noexcept;

  /// Decodes the clip into `out`: device memory of clip_bytes(req) bytes, uint8 in
  /// req.layout, as decode_clip fills a host buffer.
  [[nodiscard]] ffmpeg::result<nvdec_info> decode(const std::string& path,
                                                  const ffmpeg::clip_request& req,
                                                  std::uint8_t* out) noexcept;

  /// Decodes the clip into `out`: device memory of 3 · frames · height · width floats, CTHW,
  /// (x / 255 − mean[c]) / std[c] (normalize_thwc_to_cthw's arithmetic). req.layout is unused.
  [[nodiscard]] ffmpeg::result<nvdec_info> decode_normalized(const std::string& path,
                                                             const ffmpeg::clip_request& req,
                                                             float* out,
                                                             const normalization& norm) noexcept;

  [[nodiscard]] const nvdec_stats& stats() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Whether FFmpeg (as linked) has CUDA hardware decoding for the codec named `codec`
/// ("h264", "hevc", "vp9", "av1", ...): a decoder whose hw configs list AV_HWDEVICE_TYPE_CUDA.
/// Says nothing about the GPU: a profile (e.g. H.264 4:2:2) may still be refused there.
[[nodiscard]] bool nvdec_supports(const std::string& codec) noexcept;

/// The device path's arithmetic on the CPU: the clip decode_clip decodes (software decoding,
/// the same plan), each frame converted and resized by vbucket/cuda/yuv_resize.hpp on the
/// host instead of by libswscale, into `out` (host memory, clip_bytes(req) bytes). What the
/// NVDEC decoder's frames should equal (up to float rounding); the CPU tests compare it with
/// decode_clip. Frames in formats the kernel does not read, and filters other than bilinear
/// and opensora, are errors.
[[nodiscard]] ffmpeg::result<ffmpeg::clip_info> decode_clip_reference(
    const std::string& path, const ffmpeg::clip_request& req, std::span<std::uint8_t> out) noexcept;

}  // namespace vbucket::cuda
