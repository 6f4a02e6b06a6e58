#pragma once
/// The loader's staging backend in `vbucket._vbucket`, chosen at run time so that one loader
/// type serves both modes: plain host memory (`vbucket::host_backend`, the default), or — when
/// the extension is built with the CUDA adapter (VBUCKET_PY_HAS_CUDA) and the Loader is made
/// with `pin_memory=True` — the adapter's `vbucket::cuda::pinned_backend`: the workers decode
/// into page-locked buffers and a batch is copied to the GPU on the backend's stream, its slot
/// going back to the ring when the copy's event completes. Glue only: both backends are the
/// library's.

#include <cstddef>  // std::byte, std::size_t
#include <cstdint>  // std::uintptr_t
#include <memory>   // std::unique_ptr
#include <string>   // std::string

#include "vbucket/base/error.hpp"
#include "vbucket/load/staging.hpp"

#if VBUCKET_PY_HAS_CUDA
#include "vbucket/cuda/pinned_backend.hpp"
#endif

namespace {

class py_backend {
 public:
  /// Completion of one copy, of whichever backend made it.
  class event {
   public:
    event() = default;
    event(event&&) noexcept = default;
    event& operator=(event&&) noexcept = default;

   private:
    friend class py_backend;
    vbucket::host_backend::event host_;
#if VBUCKET_PY_HAS_CUDA
    vbucket::cuda::pinned_backend::event cuda_;
#endif
  };

  /// Host memory.
  py_backend() = default;

  /// Pinned memory on CUDA device `device`, copies on the backend's own stream. Throws
  /// `vbucket::error` when the extension was built without the CUDA adapter or no device can
  /// be used.
  static std::unique_ptr<py_backend> pinned(int device) {
    auto b = std::make_unique<py_backend>();
#if VBUCKET_PY_HAS_CUDA
    std::string why;
    if (!vbucket::cuda::device_available(&why))
      throw vbucket::error("Loader: pin_memory=True: no CUDA device can be used (" + why + ")");
    vbucket::cuda::pinned_backend::options o;
    o.device = device;
    b->cuda_ = std::make_unique<vbucket::cuda::pinned_backend>(o);
#else
    (void)device;
    throw vbucket::error(
        "Loader: this build of vbucket has no CUDA adapter (it was built without the CUDA "
        "toolkit); pin_memory=True is not available");
#endif
    return b;
  }

  py_backend(const py_backend&) = delete;
  py_backend& operator=(const py_backend&) = delete;

  /// Whether batches are staged in pinned memory for a CUDA device.
  [[nodiscard]] bool is_pinned() const noexcept {
#if VBUCKET_PY_HAS_CUDA
    return cuda_ != nullptr;
#else
    return false;
#endif
  }

  /// The CUDA stream the copies run on (a `cudaStream_t` as an integer, for
  /// `torch.cuda.ExternalStream`); 0 for host memory.
  [[nodiscard]] std::uintptr_t stream() const noexcept {
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) return reinterpret_cast<std::uintptr_t>(cuda_->stream());
#endif
    return 0;
  }

  std::byte* allocate(std::size_t n) {
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) return cuda_->allocate(n);
#endif
    return host_.allocate(n);
  }
  void deallocate(std::byte* p, std::size_t n) noexcept {
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) return cuda_->deallocate(p, n);
#endif
    host_.deallocate(p, n);
  }
  event copy_async(void* dst, const std::byte* src, std::size_t n) {
    event e;
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) {
      e.cuda_ = cuda_->copy_async(dst, src, n);
      return e;
    }
#endif
    e.host_ = host_.copy_async(dst, src, n);
    return e;
  }
  void wait(event& e) {
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) return cuda_->wait(e.cuda_);
#endif
    host_.wait(e.host_);
  }
  bool ready(event& e) {
#if VBUCKET_PY_HAS_CUDA
    if (cuda_) return cuda_->ready(e.cuda_);
#endif
    return host_.ready(e.host_);
  }

 private:
  vbucket::host_backend host_;
#if VBUCKET_PY_HAS_CUDA
  std::unique_ptr<vbucket::cuda::pinned_backend> cuda_;
#endif
};

static_assert(vbucket::staging_backend<py_backend>);

}  // namespace
