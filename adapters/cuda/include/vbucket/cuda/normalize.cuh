#pragma once
/// On-device normalisation of a staged uint8 batch, fused with the layout change:
/// B×T×H×W×3 uint8 ("THWC", as decoders write and as the staging ring copies it) →
/// B×3×T×H×W float32 or bfloat16 ("CTHW"), y = (x / 255 − mean[c]) / std[c]. The arithmetic
/// is `vbucket::normalize_value`'s, so results equal the CPU reference exactly (unless the
/// including translation unit is compiled with --use_fast_math). Compile with nvcc.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint32_t, std::uintptr_t
#include <type_traits>  // std::is_same_v

#include "vbucket/cuda/pinned_backend.hpp"
#include "vbucket/load/normalize.hpp"

namespace vbucket::cuda {

namespace detail {

struct channel_stats {
  float mean[3];
  float std[3];
};

template <class Out>
__device__ inline Out from_float(float y) {
  if constexpr (std::is_same_v<Out, float>)
    return y;
  else
    return __float2bfloat16_rn(y);
}

/// The general path: one thread per pixel (grid-stride), three byte loads, three stores to the
/// three planes. Used when the fast path's alignment or shape conditions do not hold.
template <class Out>
__global__ void normalize_thwc_to_cthw_kernel(const std::uint8_t* __restrict__ src,
                                              Out* __restrict__ dst, std::size_t clip_pixels,
                                              std::size_t total_pixels, channel_stats stats) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       p < total_pixels; p += stride) {
    const std::size_t b = p / clip_pixels;
    const std::size_t q = p - b * clip_pixels;
    const std::uint8_t* in = src + p * 3;
    Out* out = dst + b * 3 * clip_pixels + q;
#pragma unroll
    for (int c = 0; c < 3; ++c)
      out[static_cast<std::size_t>(c) * clip_pixels] =
          from_float<Out>((static_cast<float>(in[c]) / 255.0f - stats.mean[c]) / stats.std[c]);
  }
}

/// Four outputs of one plane, stored with one aligned vector store.
template <class Out>
struct alignas(4 * sizeof(Out)) quad {
  Out v[4];
};

/// The fast path: the 3 × 256 possible results are computed once per block into shared memory
/// (the same arithmetic, so the same values), then each thread turns four pixels (three 32-bit
/// loads) into four outputs per plane (three vector stores). The grid's y dimension is the clip
/// of the batch, so no division per pixel. Needs clip_pixels % 4 == 0, `src` 4-byte and `dst`
/// 4·sizeof(Out)-byte aligned.
template <class Out>
__global__ void normalize_thwc_to_cthw_quad_kernel(const std::uint8_t* __restrict__ src,
                                                   Out* __restrict__ dst, std::size_t clip_pixels,
                                                   channel_stats stats) {
  __shared__ Out table[3 * 256];
  for (unsigned i = threadIdx.x; i < 3 * 256; i += blockDim.x) {
    const unsigned c = i / 256, x = i % 256;
    table[i] = from_float<Out>((static_cast<float>(x) / 255.0f - stats.mean[c]) / stats.std[c]);
  }
  __syncthreads();
  const std::size_t clip = blockIdx.y;
  const std::size_t quads = clip_pixels / 4;
  const auto* in = reinterpret_cast<const std::uint32_t*>(src + clip * clip_pixels * 3);
  auto* out = reinterpret_cast<quad<Out>*>(dst + clip * 3 * clip_pixels);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t g = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < quads;
       g += stride) {
    const std::uint32_t words[3] = {in[3 * g], in[3 * g + 1], in[3 * g + 2]};
    std::uint8_t bytes[12];
#pragma unroll
    for (int k = 0; k < 12; ++k)
      bytes[k] = static_cast<std::uint8_t>(words[k / 4] >> (8 * (k % 4)));
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      quad<Out> q;
#pragma unroll
      for (int k = 0; k < 4; ++k) q.v[k] = table[c * 256 + bytes[3 * k + c]];
      out[static_cast<std::size_t>(c) * quads + g] = q;
    }
  }
}

}  // namespace detail

/// Enqueues the normalisation of `src` (device memory, B×T×H×W×3 uint8) into `dst` (device
/// memory, B×3×T×H×W of `Out` = float or __nv_bfloat16) on `stream`. Asynchronous: errors of
/// the launch are reported here, errors of the execution by the next synchronising call.
/// Throws `vbucket::error` on an invalid `norm` or shape.
template <class Out>
  requires(std::is_same_v<Out, float> || std::is_same_v<Out, __nv_bfloat16>)
void normalize_thwc_to_cthw(const std::uint8_t* src, Out* dst, const batch_shape& shape,
                            const normalization& norm = {}, cudaStream_t stream = nullptr) {
  norm.validate();
  (void)shape.elements();  // throws on overflow
  const std::size_t total = shape.batch * shape.clip_pixels();
  if (total == 0) return;
  detail::channel_stats stats{};
  for (int c = 0; c < 3; ++c) {
    stats.mean[c] = norm.mean[static_cast<std::size_t>(c)];
    stats.std[c] = norm.std[static_cast<std::size_t>(c)];
  }
  constexpr unsigned threads = 256;
  const std::size_t clip = shape.clip_pixels();
  const bool fast = clip % 4 == 0 && shape.batch <= 65535 &&
                    reinterpret_cast<std::uintptr_t>(src) % 4 == 0 &&
                    reinterpret_cast<std::uintptr_t>(dst) % (4 * sizeof(Out)) == 0;
  if (fast) {
    const std::size_t wanted = (clip / 4 + threads - 1) / threads;
    const dim3 grid(static_cast<unsigned>(wanted < 4096 ? wanted : 4096),
                    static_cast<unsigned>(shape.batch));
    detail::normalize_thwc_to_cthw_quad_kernel<Out>
        <<<grid, threads, 0, stream>>>(src, dst, clip, stats);
  } else {
    const std::size_t wanted = (total + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(wanted < (1u << 20) ? wanted : (1u << 20));
    detail::normalize_thwc_to_cthw_kernel<Out>
        <<<blocks, threads, 0, stream>>>(src, dst, clip, total, stats);
  }
  check(cudaGetLastError(), "normalize_thwc_to_cthw launch");
}

}  // namespace vbucket::cuda
