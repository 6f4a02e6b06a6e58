/// Host wrappers around vbucket/cuda/normalize.cuh for the tests (see kernels.hpp).
#include "kernels.hpp"

#include <cstring>  // std::memcpy

#include "vbucket/cuda/normalize.cuh"

namespace vbucket_test {

namespace {

template <class Out, class Host>
std::vector<Host> run(const std::vector<std::uint8_t>& src, const vbucket::batch_shape& shape,
                      const vbucket::normalization& norm, std::size_t src_offset,
                      std::size_t dst_offset) {
  using vbucket::cuda::check;
  const std::size_t n = shape.elements();
  vbucket::cuda::device_buffer in(src.size() + src_offset + 1),
      out((n + dst_offset) * sizeof(Out) + 1);
  std::uint8_t* in_at = in.as<std::uint8_t>() + src_offset;
  Out* out_at = out.as<Out>() + dst_offset;
  vbucket::cuda::stream s;
  check(cudaMemcpyAsync(in_at, src.data(), src.size(), cudaMemcpyHostToDevice, s.get()),
        "cudaMemcpyAsync");
  vbucket::cuda::normalize_thwc_to_cthw<Out>(in_at, out_at, shape, norm, s.get());
  std::vector<Host> host(n);
  check(cudaMemcpyAsync(host.data(), out_at, n * sizeof(Out), cudaMemcpyDeviceToHost, s.get()),
        "cudaMemcpyAsync");
  s.synchronize();
  return host;
}

}  // namespace

std::vector<float> normalize_on_device_f32(const std::vector<std::uint8_t>& src,
                                           const vbucket::batch_shape& shape,
                                           const vbucket::normalization& norm,
                                           std::size_t src_offset, std::size_t dst_offset) {
  return run<float, float>(src, shape, norm, src_offset, dst_offset);
}

std::vector<std::uint16_t> normalize_on_device_bf16(const std::vector<std::uint8_t>& src,
                                                    const vbucket::batch_shape& shape,
                                                    const vbucket::normalization& norm,
                                                    std::size_t src_offset,
                                                    std::size_t dst_offset) {
  static_assert(sizeof(__nv_bfloat16) == sizeof(std::uint16_t));
  return run<__nv_bfloat16, std::uint16_t>(src, shape, norm, src_offset, dst_offset);
}

}  // namespace vbucket_test
