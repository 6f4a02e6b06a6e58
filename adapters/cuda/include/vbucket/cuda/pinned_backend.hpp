#pragma once
/// The CUDA staging backend: page-locked host buffers (`cudaHostAlloc`), copies with
/// `cudaMemcpyAsync` on one stream, completion observed through a CUDA event recorded after
/// each copy. Plugs into `vbucket::staging_ring`, which releases a buffer only once its event
/// has completed. Plain C++ over the CUDA runtime API: any host compiler builds it.
///
/// Every CUDA call is checked; a failure throws `vbucket::error` naming the call, the bytes
/// and CUDA's own message ("CUDA: cudaHostAlloc(1073741824 bytes): cudaErrorMemoryAllocation
/// (out of memory)").

#include <cuda_runtime_api.h>

#include <cstddef>  // std::byte, std::size_t
#include <string>   // std::string
#include <utility>  // std::exchange

#include "vbucket/base/error.hpp"
#include "vbucket/load/staging.hpp"

namespace vbucket::cuda {

/// Throws `vbucket::error("CUDA: <what>: <name> (<message>)")` unless `status` is success.
inline void check(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  throw error("CUDA: " + what + ": " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ")");
}

/// Whether a CUDA device can be used; otherwise `why` (if given) says why not.
inline bool device_available(std::string* why = nullptr) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear it, so that later calls do not report it again
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

/// An owned non-blocking stream on the current device.
class stream {
 public:
  stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  [[nodiscard]] cudaStream_t get() const noexcept { return s_; }
  void synchronize() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

/// An owned device allocation.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes) : size_(bytes) {
    check(cudaMalloc(&p_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFree(p_);
      p_ = std::exchange(o.p_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~device_buffer() {
    if (p_) cudaFree(p_);
  }
  [[nodiscard]] void* get() const noexcept { return p_; }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(p_);
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

/// The staging backend. Copies go to device memory on `stream()` (one stream: copies complete
/// in submission order, which the ring relies on). The backend must outlive its rings.
class pinned_backend {
 public:
  /// A recorded event; destroyed with its owner.
  class event {
   public:
    event() = default;
    event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    event& operator=(event&& o) noexcept {
      if (this != &o) {
        if (e_) cudaEventDestroy(e_);
        e_ = std::exchange(o.e_, nullptr);
      }
      return *this;
    }
    ~event() {
      if (e_) cudaEventDestroy(e_);
    }

   private:
    friend class pinned_backend;
    cudaEvent_t e_ = nullptr;
  };

  struct options {
    int device = 0;
    /// Flags for cudaHostAlloc (cudaHostAllocPortable to use buffers from several devices).
    unsigned host_alloc_flags = cudaHostAllocDefault;
    /// Wait for events by blocking the reaper thread rather than spinning a core.
    bool blocking_sync = true;
  };

  pinned_backend() : pinned_backend(options{}) {}
  explicit pinned_backend(options o) : options_(o) {
    check(cudaSetDevice(options_.device), "cudaSetDevice(" + std::to_string(options_.device) + ")");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  pinned_backend(const pinned_backend&) = delete;
  pinned_backend& operator=(const pinned_backend&) = delete;
  ~pinned_backend() {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  std::byte* allocate(std::size_t n) {
    check(cudaSetDevice(options_.device), "cudaSetDevice");
    void* p = nullptr;
    check(cudaHostAlloc(&p, n, options_.host_alloc_flags),
          "cudaHostAlloc(" + std::to_string(n) + " bytes)");
    return static_cast<std::byte*>(p);
  }
  void deallocate(std::byte* p, std::size_t) noexcept { cudaFreeHost(p); }

  event copy_async(void* dst, const std::byte* src, std::size_t n) {
    check(cudaSetDevice(options_.device), "cudaSetDevice");
    event e;
    const unsigned flags =
        static_cast<unsigned>(cudaEventDisableTiming) |
        (options_.blocking_sync ? static_cast<unsigned>(cudaEventBlockingSync) : 0u);
    check(cudaEventCreateWithFlags(&e.e_, flags), "cudaEventCreate");
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync(" + std::to_string(n) + " bytes)");
    check(cudaEventRecord(e.e_, stream_), "cudaEventRecord");
    return e;
  }

  void wait(event& e) {
    if (e.e_) check(cudaEventSynchronize(e.e_), "cudaEventSynchronize (a staging copy)");
  }

  bool ready(event& e) {
    if (!e.e_) return true;
    const cudaError_t status = cudaEventQuery(e.e_);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaEventQuery (a staging copy)");
    return true;
  }

  /// The stream the copies run on: launch work that consumes a staged batch on it (or make
  /// another stream wait for it), and it is ordered after the copy.
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] int device() const noexcept { return options_.device; }

 private:
  options options_;
  cudaStream_t stream_ = nullptr;
};

static_assert(staging_backend<pinned_backend>);

}  // namespace vbucket::cuda
