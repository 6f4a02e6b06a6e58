/// Tests of vbucket/packed_loader.hpp: the flat layout of a packed batch (offsets and
/// cu_seqlens against sums written out here), decoding into it with the loader's crop seeds on
/// several threads, per-sample views, and errors naming the failing sample.

#include <doctest/doctest.h>

#include <cstdint>   // std::uint8_t, std::uint32_t
#include <cstring>   // std::memset
#include <optional>  // std::optional
#include <span>      // std::span
#include <string>    // std::string
#include <vector>    // std::vector

#include "vbucket/packed_loader.hpp"
#include "vbucket/rules.hpp"

namespace {

/// Writes the low byte of (sample + crop seed) everywhere; fails on one chosen sample.
struct marking_decoder {
  std::uint32_t fail_on = 0xffffffffu;
  std::optional<std::string> decode(const vbucket::clip_task& t, std::span<std::uint8_t> out) {
    if (t.sample == fail_on) return std::string("broken file");
    if (out.size() != t.bytes()) return std::string("wrong size");
    std::memset(out.data(), static_cast<int>((t.sample + t.seed) & 0xff), out.size());
    return std::nullopt;
  }
};

vbucket::packed_plan small_plan(const vbucket::bucket_config& c) {
  std::vector<vbucket::bucket_id> ids;
  const std::int64_t frames[] = {1, 33, 65};
  const char* const ratios[] = {"1:1", "16:9", "9:16"};
  for (std::uint32_t i = 0; i < 90; ++i)
    ids.push_back(c.find("256px", frames[i % 3], ratios[(i / 3) % 3]));
  return vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), c,
                                   {.seed = 2, .token_budget = 20000.0});
}

}  // namespace

TEST_CASE("packed_loader: layout, decoding, views and errors") {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 8},
                                                   {"256px", 33, 1.0, std::nullopt, 4},
                                                   {"256px", 65, 1.0, std::nullopt, 2}};
  const vbucket::bucket_config c(specs, vbucket::opensora_v2_tables{});
  const vbucket::packed_plan plan = small_plan(c);
  REQUIRE(plan.num_batches() > 0);
  std::size_t mixed = 0;
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const vbucket::packed_batch b = plan.global_batch(p);
    const vbucket::packed_layout layout = vbucket::make_packed_layout(b);
    REQUIRE(layout.size() == b.size());
    std::size_t bytes = 0;
    std::int32_t tokens = 0, longest = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
      CHECK(layout.clip_offsets[i] == bytes);
      CHECK(layout.cu_seqlens[i] == tokens);
      const auto& r = c.ratio_of(b.buckets[i]);
      const std::int64_t t = c.frames_of(b.buckets[i]).frames;
      bytes += static_cast<std::size_t>(t * r.height * r.width * 3);
      const auto len = static_cast<std::int32_t>((1 + (t - 1) / 4) * ((r.height + 15) / 16) *
                                                 ((r.width + 15) / 16));
      tokens += len;
      longest = std::max(longest, len);
    }
    CHECK(layout.bytes() == bytes);
    CHECK(layout.tokens() == tokens);
    CHECK(layout.max_seqlen == longest);
    mixed += b.buckets.front() != b.buckets.back() ? 1u : 0u;

    std::vector<std::uint8_t> buffer(layout.bytes() + 7, 0xab);
    marking_decoder decoder;
    vbucket::load_packed_batch(b, decoder, 2, 0, layout, buffer, 3);
    const auto views = vbucket::packed_clip_views(b, layout, buffer);
    REQUIRE(views.size() == b.size());
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto want =
          static_cast<std::uint8_t>((b.indices[i] + vbucket::crop_seed(2, 0, b.indices[i])) & 0xff);
      const auto* first = static_cast<const std::uint8_t*>(views[i].data);
      CHECK(first == buffer.data() + layout.clip_offsets[i]);
      CHECK(views[i].bytes() == layout.clip_offsets[i + 1] - layout.clip_offsets[i]);
      CHECK(first[0] == want);
      CHECK(first[views[i].bytes() - 1] == want);
    }
    CHECK(buffer[layout.bytes()] == 0xab);  // nothing written past the layout
    if (b.size() > 1) {
      marking_decoder failing{.fail_on = b.indices[1]};
      const std::string want =
          "sample " + std::to_string(b.indices[1]) + " (clip 1 of the batch at position";
      CHECK_THROWS_WITH_AS(vbucket::load_packed_batch(b, failing, 2, 0, layout, buffer, 2),
                           doctest::Contains(want.c_str()), vbucket::error);
    }
    std::vector<std::uint8_t> small(layout.bytes() - 1);
    CHECK_THROWS_AS(vbucket::load_packed_batch(b, decoder, 2, 0, layout, small), vbucket::error);
  }
  CHECK(mixed > 0);
  const auto zero = [](std::int64_t, std::int64_t, std::int64_t) { return std::int64_t{0}; };
  CHECK_THROWS_WITH_AS(vbucket::make_packed_layout(plan.global_batch(0), zero),
                       doctest::Contains("sequence length 0"), vbucket::error);
}
