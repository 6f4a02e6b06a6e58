/// Mistake: a loader yielding a user tensor type that has no `tensor_traits` specialisation (the
/// loader could not wrap its staging memory in it); the loader must refuse it at compile time.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "vbucket/load/loader.hpp"

struct my_tensor {
  void* data = nullptr;
  std::size_t bytes = 0;
};

#ifndef VBUCKET_COMPILE_FAIL
template <>
struct vbucket::tensor_traits<my_tensor> {
  static my_tensor wrap(const tensor_view& v) { return {v.data, v.bytes()}; }
};
#endif

struct my_decoder {
  std::optional<std::string> decode(const vbucket::clip_task&, std::span<std::uint8_t>) {
    return std::nullopt;
  }
};

void make(const vbucket::epoch_schedule& schedule, my_decoder& decoder,
          vbucket::staging_ring<vbucket::host_backend>& ring) {
  vbucket::loader<my_decoder, vbucket::host_backend, my_tensor> loader(schedule, 0, decoder, ring);
  (void)loader.steps();
}
