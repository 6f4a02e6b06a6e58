#pragma once
/// The loader's tensor vocabulary: element types, the clip layouts (THWC, CTHW), a batch in
/// memory (`tensor_view`, not owned), and the customization point that wraps it as a
/// framework's tensor without a copy (`tensor_traits<T>`, as {fmt}'s `formatter<T>`).
///
///     template <> struct vbucket::tensor_traits<my_tensor> {
///       static my_tensor wrap(const vbucket::tensor_view& v) { return my_tensor(v.data, ...); }
///     };

#include <array>     // std::array
#include <concepts>  // std::same_as
#include <cstddef>   // std::size_t
#include <cstdint>   // std::uint8_t, std::int64_t
#include <span>      // std::span

namespace vbucket {

enum class element_type : std::uint8_t { u8, f32, bf16 };
enum class clip_layout : std::uint8_t { thwc, cthw };
enum class device_type : std::uint8_t { cpu, cuda };

constexpr std::size_t element_size(element_type t) noexcept {
  return t == element_type::u8 ? 1 : t == element_type::f32 ? 4 : 2;
}

/// A batch in memory, not owned: what a tensor adapter wraps. `shape` is B×T×H×W×C for THWC
/// and B×C×T×H×W for CTHW, contiguous (row-major).
struct tensor_view {
  void* data = nullptr;
  element_type type = element_type::u8;
  clip_layout layout = clip_layout::thwc;
  std::array<std::int64_t, 5> shape{};
  device_type device = device_type::cpu;
  int device_index = 0;

  [[nodiscard]] std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (const auto d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return elements() * element_size(type); }
};

/// The customization point: specialise with `static T wrap(const tensor_view&)`, returning a
/// T that aliases the memory (no copy). The view stays valid while the `loaded_batch` lives.
template <class T>
struct tensor_traits;

template <class T>
concept tensor_adapter = requires(const tensor_view& v) {
  { tensor_traits<T>::wrap(v) } -> std::same_as<T>;
};

/// The plain, non-owning tensor: the view itself, with typed access for tests and simple
/// trainers.
struct plain_tensor {
  tensor_view view;

  [[nodiscard]] std::span<std::uint8_t> bytes() const noexcept {
    return {static_cast<std::uint8_t*>(view.data), view.bytes()};
  }
  /// The values as `V` (float for f32, std::uint16_t bits for bf16, std::uint8_t for u8).
  template <class V>
  [[nodiscard]] std::span<V> values() const noexcept {
    return {static_cast<V*>(view.data), view.elements()};
  }
  /// The uint8 value at (b, t, h, w, c) of a THWC batch.
  [[nodiscard]] std::uint8_t at(std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t w,
                                std::int64_t c) const noexcept {
    const auto& s = view.shape;
    return static_cast<const std::uint8_t*>(
        view.data)[static_cast<std::size_t>((((b * s[1] + t) * s[2] + h) * s[3] + w) * s[4] + c)];
  }
};

template <>
struct tensor_traits<plain_tensor> {
  static plain_tensor wrap(const tensor_view& v) { return {v}; }
};

static_assert(tensor_adapter<plain_tensor>);

}  // namespace vbucket
