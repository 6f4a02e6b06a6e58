/// The normalisation kernel against the CPU reference (vbucket/load/normalize.hpp): identical
/// float32 and bfloat16 results over several shapes, batch sizes and statistics.
#include <doctest/doctest.h>

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <random>   // std::mt19937
#include <vector>   // std::vector

#include "kernels.hpp"
#include "vbucket/load/normalize.hpp"

TEST_CASE("cuda normalize: equals the CPU reference (float32 and bfloat16)") {
  const vbucket::batch_shape shapes[] = {
      {.batch = 1, .frames = 1, .height = 1, .width = 1},
      {.batch = 2, .frames = 3, .height = 5, .width = 7},
      {.batch = 3, .frames = 17, .height = 36, .width = 64},
      {.batch = 1, .frames = 33, .height = 192, .width = 336},
  };
  vbucket::normalization imagenet;
  imagenet.mean = {0.485f, 0.456f, 0.406f};
  imagenet.std = {0.229f, 0.224f, 0.225f};
  std::mt19937 rng(3);
  for (const auto& shape : shapes) {
    for (const auto& norm : {vbucket::normalization{}, imagenet}) {
      std::vector<std::uint8_t> src(shape.elements());
      for (auto& x : src) x = static_cast<std::uint8_t>(rng());
      std::vector<float> want(src.size());
      std::vector<std::uint16_t> want_bf16(src.size());
      vbucket::normalize_thwc_to_cthw<float>(src, want, shape, norm);
      vbucket::normalize_thwc_to_cthw<std::uint16_t>(src, want_bf16, shape, norm);
      const auto got = vbucket_test::normalize_on_device_f32(src, shape, norm);
      const auto got_bf16 = vbucket_test::normalize_on_device_bf16(src, shape, norm);
      std::size_t wrong = 0, wrong_bf16 = 0;
      for (std::size_t i = 0; i < src.size(); ++i) {
        wrong += got[i] != want[i];
        wrong_bf16 += got_bf16[i] != want_bf16[i];
      }
      CAPTURE(shape.frames);
      CHECK(wrong == 0);
      CHECK(wrong_bf16 == 0);
    }
  }
}

TEST_CASE("cuda normalize: unaligned buffers and odd shapes take the general path, same values") {
  // clip_pixels % 4 == 0 with aligned buffers is the fast path; each offset breaks one of its
  // conditions, and an odd clip size breaks the shape condition.
  const vbucket::batch_shape even{.batch = 2, .frames = 3, .height = 4, .width = 4};
  const vbucket::batch_shape odd{.batch = 2, .frames = 3, .height = 5, .width = 3};
  vbucket::normalization norm;
  norm.mean = {0.5f, 0.25f, 0.125f};
  norm.std = {0.5f, 0.75f, 0.3f};
  std::mt19937 rng(5);
  struct placement {
    std::size_t src_offset, dst_offset;
  };
  for (const auto& shape : {even, odd}) {
    std::vector<std::uint8_t> src(shape.elements());
    for (auto& x : src) x = static_cast<std::uint8_t>(rng());
    std::vector<float> want(src.size());
    std::vector<std::uint16_t> want_bf16(src.size());
    vbucket::normalize_thwc_to_cthw<float>(src, want, shape, norm);
    vbucket::normalize_thwc_to_cthw<std::uint16_t>(src, want_bf16, shape, norm);
    for (const auto& at : {placement{0, 0}, placement{1, 0}, placement{0, 1}, placement{3, 2}}) {
      CAPTURE(shape.height);
      CAPTURE(at.src_offset);
      CAPTURE(at.dst_offset);
      CHECK(vbucket_test::normalize_on_device_f32(src, shape, norm, at.src_offset, at.dst_offset) ==
            want);
      CHECK(vbucket_test::normalize_on_device_bf16(src, shape, norm, at.src_offset,
                                                   at.dst_offset) == want_bf16);
    }
  }
}
