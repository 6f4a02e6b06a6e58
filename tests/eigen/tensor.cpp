/// Tests of vbucket/eigen/tensor.hpp, the Eigen tensor adapter: a loader yields
/// Eigen::TensorMap batches that alias the staging slot, with the right dimensions and values.
#include "vbucket/eigen/tensor.hpp"

#include <doctest/doctest.h>

#include <cstdint>   // std::uint8_t
#include <optional>  // std::optional
#include <string>    // std::string
#include <vector>    // std::vector

namespace {

/// Every byte of a clip is (sample + frame) mod 256 in channel 0, and 0 elsewhere (THWC).
struct frame_decoder {
  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    const auto frame = static_cast<std::size_t>(t.height * t.width * 3);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = i % 3 == 0 ? static_cast<std::uint8_t>(t.sample + i / frame) : std::uint8_t{0};
    return std::nullopt;
  }
};

}  // namespace

TEST_CASE("eigen tensor: a loaded batch as an Eigen TensorMap (threads)") {
  vbucket::user_tables t;
  t.add("x", 64, vbucket::aspect_table({{"1:2", 2.0, 6, 4}}));
  const vbucket::bucket_config config(std::vector<vbucket::bucket_spec>{{"x", 5, 1.0, {}, 3}}, t);
  const std::vector<vbucket::bucket_id> ids(9, 0);
  const auto plan =
      vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, {.seed = 1});
  frame_decoder decoder;
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 3});
  vbucket::loader<frame_decoder, vbucket::host_backend, vbucket::eigen::batch_map> l(
      plan.deal(1), 0, decoder, ring);
  int batches = 0;
  while (auto b = l.next()) {
    const vbucket::eigen::batch_map& x = b->tensor;
    CHECK(x.dimension(0) == 3);
    CHECK(x.dimension(1) == 5);
    CHECK(x.dimension(2) == 6);
    CHECK(x.dimension(3) == 4);
    CHECK(x.dimension(4) == 3);
    CHECK(x.data() == reinterpret_cast<std::uint8_t*>(b->slot.data().data()));  // no copy
    for (int c = 0; c < 3; ++c)
      for (int f = 0; f < 5; ++f) {
        CHECK(x(c, f, 5, 3, 0) ==
              static_cast<std::uint8_t>(b->samples[static_cast<std::size_t>(c)] +
                                        static_cast<unsigned>(f)));
        CHECK(x(c, f, 2, 1, 2) == 0);
      }
    ++batches;
  }
  CHECK(batches == 3);
  vbucket::tensor_view cuda_view;
  cuda_view.device = vbucket::device_type::cuda;
  CHECK_THROWS_WITH_AS(vbucket::tensor_traits<vbucket::eigen::batch_map>::wrap(cuda_view),
                       "eigen::batch_map: the batch is not in host memory", vbucket::error);
}
