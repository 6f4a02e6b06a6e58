#pragma once
/// Host entry points of the NVDEC decoder's kernels (nvdec_kernels.cu, compiled by nvcc), so
/// that nvdec.cpp, which includes FFmpeg's headers, stays plain C++.

#include <cuda_runtime_api.h>

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t

#include "vbucket/cuda/yuv_resize.hpp"
#include "vbucket/load/normalize.hpp"

namespace vbucket::cuda::detail {

/// Enqueues the conversion of frame `f` (device planes) into slot `slot` of the uint8 clip
/// `dst` (device memory, `frames` x r.height x r.width x 3, THWC when `thwc` else CTHW).
void launch_yuv_resize(const yuv::frame_view& f, const yuv::resample& r, std::uint8_t* dst,
                       bool thwc, int frames, int slot, cudaStream_t stream);

/// Enqueues normalize_thwc_to_cthw<float> of one clip.
void launch_normalize(const std::uint8_t* src, float* dst, std::size_t frames, std::size_t height,
                      std::size_t width, const normalization& norm, cudaStream_t stream);

}  // namespace vbucket::cuda::detail
