/// Mistake: a staging backend without ready(e) (the ring asks whether a copy is done without
/// blocking); the ring must refuse it at compile time.
#include <cstddef>
#include <cstring>
#include <new>

#include "vbucket/load/staging.hpp"

struct my_backend {
  struct event {};
  std::byte* allocate(std::size_t n) { return static_cast<std::byte*>(::operator new(n)); }
  void deallocate(std::byte* p, std::size_t) noexcept { ::operator delete(p); }
  event copy_async(void* dst, const std::byte* src, std::size_t n) {
    std::memcpy(dst, src, n);
    return {};
  }
  void wait(event&) {}
#ifndef VBUCKET_COMPILE_FAIL
  bool ready(event&) { return true; }
#endif
};

void make(my_backend& backend) {
  vbucket::staging_ring<my_backend> ring(backend, {});
  (void)ring.stats();
}
