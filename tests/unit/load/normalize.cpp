/// Tests of vbucket/load/normalize.hpp: bfloat16 rounding, and the fused normalisation + THWC →
/// CTHW layout change against values written out index by index.
#include "vbucket/load/normalize.hpp"

#include <doctest/doctest.h>

#include <bit>      // std::bit_cast
#include <cmath>    // std::isnan
#include <cstdint>  // std::uint8_t, std::uint16_t, std::uint32_t
#include <limits>   // std::numeric_limits
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::error_message;
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

TEST_CASE("normalize: bfloat16 rounds to nearest, ties to even") {
  CHECK(vbucket::to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(vbucket::to_bfloat16_bits(-2.0f) == 0xc000);
  CHECK(vbucket::to_bfloat16_bits(from_bits(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(vbucket::to_bfloat16_bits(from_bits(0x3f818000)) == 0x3f82);  // tie, odd goes up
  CHECK(vbucket::to_bfloat16_bits(from_bits(0x3f808001)) == 0x3f81);  // above the tie
  CHECK(vbucket::to_bfloat16_bits(from_bits(0x3f807fff)) == 0x3f80);  // below the tie
  CHECK(vbucket::to_bfloat16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(vbucket::to_bfloat16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // overflows
  CHECK(std::isnan(vbucket::from_bfloat16_bits(
      vbucket::to_bfloat16_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(vbucket::from_bfloat16_bits(vbucket::to_bfloat16_bits(from_bits(0x7f800001)))));
  // Every bfloat16 value that is not NaN converts back to itself.
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = vbucket::from_bfloat16_bits(h);
    if (!std::isnan(f) && vbucket::to_bfloat16_bits(f) != h) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("normalize: THWC uint8 to CTHW float, index by index") {
  const vbucket::batch_shape shape{.batch = 2, .frames = 3, .height = 2, .width = 4};
  const std::size_t n = shape.elements();
  REQUIRE(n == 2 * 3 * 2 * 4 * 3);
  std::vector<std::uint8_t> src(n);
  // src[b][t][h][w][c] = an injective function of the indices (below 256).
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < 3; ++t)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t w = 0; w < 4; ++w)
          for (std::size_t c = 0; c < 3; ++c)
            src[(((b * 3 + t) * 2 + h) * 4 + w) * 3 + c] =
                static_cast<std::uint8_t>(b * 128 + c * 40 + t * 10 + h * 4 + w);
  vbucket::normalization norm;
  norm.mean = {0.0f, 0.25f, 0.5f};
  norm.std = {1.0f, 0.5f, 0.25f};
  std::vector<float> out(n);
  vbucket::normalize_thwc_to_cthw<float>(src, out, shape, norm);
  std::vector<std::uint16_t> half(n);
  vbucket::normalize_thwc_to_cthw<std::uint16_t>(src, half, shape, norm);
  int wrong = 0, wrong_bf16 = 0;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t t = 0; t < 3; ++t)
        for (std::size_t h = 0; h < 2; ++h)
          for (std::size_t w = 0; w < 4; ++w) {
            const double x = static_cast<double>(b * 128 + c * 40 + t * 10 + h * 4 + w);
            const double expected = (x / 255.0 - norm.mean[c]) / norm.std[c];
            const std::size_t at = (((b * 3 + c) * 3 + t) * 2 + h) * 4 + w;
            if (std::abs(out[at] - expected) > 1e-6) ++wrong;
            if (std::abs(vbucket::from_bfloat16_bits(half[at]) - expected) >
                std::abs(expected) / 256 + 1e-6)
              ++wrong_bf16;
          }
  CHECK(wrong == 0);
  CHECK(wrong_bf16 == 0);
  // The default maps 0 and 255 to −1 and 1 exactly.
  std::vector<std::uint8_t> ends = {0, 255, 0};
  std::vector<float> mapped(3);
  vbucket::normalize_thwc_to_cthw<float>(ends, mapped,
                                         {.batch = 1, .frames = 1, .height = 1, .width = 1});
  CHECK(mapped == std::vector<float>{-1.0f, 1.0f, -1.0f});
}

TEST_CASE("normalize: wrong sizes and invalid statistics are errors") {
  std::vector<std::uint8_t> src(12);
  std::vector<float> dst(11);
  const vbucket::batch_shape shape{.batch = 1, .frames = 1, .height = 2, .width = 2};
  CHECK(error_message([&] { vbucket::normalize_thwc_to_cthw<float>(src, dst, shape); }) ==
        "normalize: the shape needs 12 values, got a source of 12 and a destination of 11");
  dst.resize(12);
  vbucket::normalization bad;
  bad.std[1] = 0.0f;
  CHECK(error_message([&] { vbucket::normalize_thwc_to_cthw<float>(src, dst, shape, bad); }) ==
        "normalization: std[1] must be finite and > 0");
  bad = {};
  bad.mean[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK(error_message([&] { bad.validate(); }) == "normalization: mean[2] is not finite");
  const vbucket::batch_shape huge{
      .batch = std::size_t{1} << 40, .frames = std::size_t{1} << 30, .height = 1, .width = 1};
  CHECK(error_message([&] { (void)huge.elements(); }).find("overflows size_t") !=
        std::string::npos);
}

TEST_CASE(
    "normalize: clip_normalizer and normalize_thwc_to_cthw, bit for bit, element by element") {
  // The expected values are the scalar arithmetic (`normalize_value`, `to_bfloat16_bits`) at
  // each index, written out here: the table-driven normaliser and its four-pixel CTHW step must
  // give the same bits for any pixel count (the step's tail included) and any batch.
  const vbucket::normalization norm{{0.1f, 0.5f, 0.9f}, {0.3f, 0.25f, 2.0f}};
  const vbucket::clip_normalizer convert(norm);
  for (const std::size_t pixels : {1u, 3u, 4u, 5u, 7u, 15u, 64u, 101u}) {
    CAPTURE(pixels);
    const std::size_t batch = 2;
    std::vector<std::uint8_t> src(batch * pixels * 3);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 97 + 13);
    std::vector<float> f32(src.size());
    std::vector<std::uint16_t> bf16(src.size());
    vbucket::normalize_thwc_to_cthw<float>(src, f32, {batch, 1, 1, pixels}, norm);
    vbucket::normalize_thwc_to_cthw<std::uint16_t>(src, bf16, {batch, 1, 1, pixels}, norm);
    std::vector<float> clip(pixels * 3);
    vbucket::tensor_view v;
    v.shape = {1, 3, 1, 1, static_cast<std::int64_t>(pixels)};
    v.layout = vbucket::clip_layout::cthw;
    v.type = vbucket::element_type::f32;
    v.data = clip.data();
    convert(std::span<const std::uint8_t>(src).first(pixels * 3), v);
    int wrong = 0;
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t p = 0; p < pixels; ++p) {
          const std::uint8_t x = src[(b * pixels + p) * 3 + c];
          const float y = (static_cast<float>(x) / 255.0f - norm.mean[c]) / norm.std[c];
          const std::size_t at = (b * 3 + c) * pixels + p;
          wrong += std::bit_cast<std::uint32_t>(f32[at]) != std::bit_cast<std::uint32_t>(y);
          wrong += bf16[at] != vbucket::to_bfloat16_bits(y);
          if (b == 0)
            wrong += std::bit_cast<std::uint32_t>(clip[c * pixels + p]) !=
                     std::bit_cast<std::uint32_t>(y);
        }
    CHECK(wrong == 0);
  }
}
