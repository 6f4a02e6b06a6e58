// The NVDEC decoder's kernels (see nvdec_kernels.hpp): the per-pixel math of
// vbucket/cuda/yuv_resize.hpp, one thread per output pixel, and the adapter's normalisation.
#include "nvdec_kernels.hpp"

#include "vbucket/cuda/normalize.cuh"
#include "vbucket/cuda/pinned_backend.hpp"  // vbucket::cuda::check

namespace vbucket::cuda::detail {

namespace {

__global__ void yuv_resize_kernel(yuv::frame_view f, yuv::resample r, std::uint8_t* dst, bool thwc,
                                  int frames, int slot) {
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= r.width || y >= r.height) return;
  std::uint8_t rgb[3];
  yuv::pixel(f, r, y, x, rgb);
  for (int c = 0; c < 3; ++c)
    dst[yuv::clip_offset(thwc, frames, r.height, r.width, slot, y, x, c)] = rgb[c];
}

}  // namespace

void launch_yuv_resize(const yuv::frame_view& f, const yuv::resample& r, std::uint8_t* dst,
                       bool thwc, int frames, int slot, cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((r.width + 31) / 32),
                  static_cast<unsigned>((r.height + 7) / 8));
  yuv_resize_kernel<<<grid, block, 0, stream>>>(f, r, dst, thwc, frames, slot);
  check(cudaGetLastError(), "yuv_resize launch");
}

void launch_normalize(const std::uint8_t* src, float* dst, std::size_t frames, std::size_t height,
                      std::size_t width, const normalization& norm, cudaStream_t stream) {
  const batch_shape shape{.batch = 1, .frames = frames, .height = height, .width = width};
  normalize_thwc_to_cthw<float>(src, dst, shape, norm, stream);
}

}  // namespace vbucket::cuda::detail
