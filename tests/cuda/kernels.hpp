#pragma once
/// Host entry points of the CUDA kernels under test (kernels.cu, compiled by nvcc), so that the
/// doctest cases stay plain C++.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::uint16_t
#include <vector>   // std::vector

#include "vbucket/load/normalize.hpp"

namespace vbucket_test {

/// Copies `src` to the device, runs vbucket::cuda::normalize_thwc_to_cthw and copies back. The
/// offsets (in elements) place input and output at unaligned addresses of their allocations.
std::vector<float> normalize_on_device_f32(const std::vector<std::uint8_t>& src,
                                           const vbucket::batch_shape& shape,
                                           const vbucket::normalization& norm,
                                           std::size_t src_offset = 0, std::size_t dst_offset = 0);
/// The same with bfloat16 output, returned as bits.
std::vector<std::uint16_t> normalize_on_device_bf16(const std::vector<std::uint8_t>& src,
                                                    const vbucket::batch_shape& shape,
                                                    const vbucket::normalization& norm,
                                                    std::size_t src_offset = 0,
                                                    std::size_t dst_offset = 0);

}  // namespace vbucket_test
