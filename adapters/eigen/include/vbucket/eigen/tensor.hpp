#pragma once
/// Eigen's Tensor module as a loader tensor type: a loaded batch as an
/// `Eigen::TensorMap<Eigen::Tensor<std::uint8_t, 5, Eigen::RowMajor>>` over the staging
/// slot's memory (no copy), dimensions B×T×H×W×C (THWC) or B×C×T×H×W (CTHW).
///
///     vbucket::loader<my_decoder, vbucket::host_backend, vbucket::eigen::batch_map> l(...);
///     while (auto b = l.next()) { const vbucket::eigen::batch_map& x = b->tensor; x(0, 1, 2, 3,
///     0); }

#include <unsupported/Eigen/CXX11/Tensor>

#include <cstdint>  // std::uint8_t

#include "vbucket/base/error.hpp"
#include "vbucket/load/loader.hpp"

namespace vbucket::eigen {

/// A row-major rank-5 uint8 map: the last index (C for THWC, W for CTHW) is contiguous, as
/// in the view.
using batch_map = Eigen::TensorMap<Eigen::Tensor<std::uint8_t, 5, Eigen::RowMajor>>;

}  // namespace vbucket::eigen

template <>
struct vbucket::tensor_traits<vbucket::eigen::batch_map> {
  /// Throws `vbucket::error` for a view that is not uint8 in host memory.
  static vbucket::eigen::batch_map wrap(const vbucket::tensor_view& v) {
    if (v.type != vbucket::element_type::u8)
      throw vbucket::error("eigen::batch_map: the batch is not uint8");
    if (v.device != vbucket::device_type::cpu)
      throw vbucket::error("eigen::batch_map: the batch is not in host memory");
    return vbucket::eigen::batch_map(static_cast<std::uint8_t*>(v.data), v.shape[0], v.shape[1],
                                     v.shape[2], v.shape[3], v.shape[4]);
  }
};

static_assert(vbucket::tensor_adapter<vbucket::eigen::batch_map>);
