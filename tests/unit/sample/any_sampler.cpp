/// Tests of vbucket/sample/any_sampler.hpp: `make_any_sampler` gives the batches, states and
/// fingerprints of the `batch_sampler` its arguments describe (fixed and packed, a 64-bit seed
/// and a NumPy seed of 2^64 or more); the other batching's members throw; the helpers over the
/// interface (dealt_end, epoch_shape, epoch_state, move_to, load_state_of_epoch).

#include "vbucket/sample/any_sampler.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t, std::uint64_t
#include <memory>   // std::make_shared, std::shared_ptr
#include <vector>   // std::vector

#include "vbucket_test/configs.hpp"

namespace {

using vbucket::any_sampler;
using vbucket::batching_mode;
using vbucket::big_seed;
using vbucket::plan_state;
using vbucket::sample_meta;
using vbucket::sampler_options;

using clips_t = std::vector<sample_meta>;

std::shared_ptr<const clips_t> some_clips(int n) {
  auto clips = std::make_shared<clips_t>();
  for (int i = 0; i < n; ++i)
    clips->push_back({1 + (i * 37) % 200, 240 + (i % 5) * 120, 320 + (i % 7) * 160, 24.0});
  return clips;
}

std::shared_ptr<const vbucket::bucket_config> shared_config() {
  return std::make_shared<const vbucket::bucket_config>(vbucket_test::opensora_v2_config());
}

/// The batches of two ranges of batches are equal (bucket, indices, step, position, repeat).
template <class A, class B>
void check_same_batches(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto x = a[k];
    const auto y = b[k];
    CHECK(std::vector<std::uint32_t>(x.indices.begin(), x.indices.end()) ==
          std::vector<std::uint32_t>(y.indices.begin(), y.indices.end()));
    CHECK(x.position == y.position);
    CHECK(x.repeat == y.repeat);
    CHECK(x.step == y.step);
  }
}

TEST_CASE("any_sampler: fixed batching, a 64-bit seed: the batch_sampler of its arguments") {
  const auto clips = some_clips(1200);
  const auto config = shared_config();
  for (const auto rng : {vbucket::rng_mode::fast, vbucket::rng_mode::numpy}) {
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
      const sampler_options o{.seed = 11, .world = 3, .rank = rank, .rng = rng};
      auto any = vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{}, o, 11);
      vbucket::batch_sampler direct(*clips, config, vbucket::opensora_v2_rule{}, o);
      any->set_epoch(2);
      direct.set_epoch(2);
      CHECK_FALSE(any->packed());
      CHECK(any->world() == 3);
      CHECK(any->rank() == rank);
      CHECK(any->seed() == 11);
      CHECK(any->num_samples() == 1200);
      CHECK(any->fingerprint() == direct.fingerprint());
      CHECK(any->num_global_batches() == direct.num_global_batches());
      check_same_batches(any->batches(), direct.batches());
      CHECK(any->size() == direct.size());
      any->advance(2);
      direct.advance(2);
      CHECK(any->state() == direct.state());
      check_same_batches(any->batches(), direct.batches());
      CHECK(any->assign() == direct.assign());
      CHECK(any->stats().total.batches == direct.stats().total.batches);
      // the packed members are refused at run time, naming what to call
      CHECK_THROWS_WITH_AS((void)any->packed_batches(), doctest::Contains("fixed batches"),
                           vbucket::error);
      CHECK_THROWS_AS((void)any->packing(), vbucket::error);
      CHECK_THROWS_AS((void)any->packed_stats(), vbucket::error);
    }
  }
}

TEST_CASE("any_sampler: packed batching: the packing batch_sampler of its arguments") {
  const auto clips = some_clips(900);
  const auto config = shared_config();
  const sampler_options o{.seed = 4,
                          .world = 2,
                          .rank = 1,
                          .rng = vbucket::rng_mode::fast,
                          .batching = batching_mode::packed,
                          .token_budget = 40000.0,
                          .drop_oversized = true};
  auto any = vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{}, o);
  vbucket::batch_sampler direct(*clips, config, vbucket::opensora_v2_rule{}, o,
                                vbucket::packed_batching{});
  CHECK(any->packed());
  CHECK(any->batching() == batching_mode::packed);
  CHECK(any->fingerprint() == direct.fingerprint());
  check_same_batches(any->packed_batches(), direct.packed_batches());
  CHECK(any->size() == direct.packed_batches().size());
  CHECK(any->packed_stats().batches == any->packing().num_batches());
  CHECK_THROWS_WITH_AS((void)any->batches(), doctest::Contains("packed_batches()"), vbucket::error);
  CHECK_THROWS_AS((void)any->plan(), vbucket::error);
  CHECK_THROWS_AS((void)any->stats(), vbucket::error);
  // the epoch's shape: ceil(N / world) steps (no drop_last)
  const std::uint64_t n = any->num_global_batches();
  CHECK(any->epoch_shape().first == (n + 1) / 2);
  CHECK(any->dealt_end(0) == (n + 1) / 2 * 2);
}

TEST_CASE("any_sampler: a NumPy seed of 2^64 or more draws from numpy_seed_family") {
  const auto clips = some_clips(600);
  const auto config = shared_config();
  const big_seed big = big_seed::parse("18446744073709551621");  // 2^64 + 5
  const sampler_options o{.world = 2, .rank = 0};                // rng numpy by default
  auto any = vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{}, o, big);
  sampler_options d = o;
  d.seed = vbucket::plan_seed(big);
  vbucket::batch_sampler direct(*clips, config, vbucket::opensora_v2_rule{}, d,
                                vbucket::numpy_seed_family{big});
  CHECK(any->seed() == vbucket::plan_seed(big));
  CHECK(any->seed() != 5);  // not the seed modulo 2^64
  CHECK(any->fingerprint() == direct.fingerprint());
  check_same_batches(any->batches(), direct.batches());
  // fast draws take seeds below 2^64 only
  sampler_options fast = o;
  fast.rng = vbucket::rng_mode::fast;
  CHECK_THROWS_WITH_AS(
      (void)vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{}, fast, big),
      doctest::Contains("does not fit in 64 bits"), vbucket::error);
  // a rule that draws from fast_source only cannot take NumPy's draws of a seed that large
  struct fast_only_rule {
    [[nodiscard]] vbucket::bucket_id assign(const vbucket::bucket_config&,
                                            const vbucket::sample_meta&, std::uint64_t,
                                            const vbucket::fast_source&) const noexcept {
      return 0;
    }
  };
  static_assert(!vbucket::bucket_rule<fast_only_rule, vbucket::numpy_source>);
  CHECK_THROWS_WITH_AS((void)vbucket::make_any_sampler(clips, config, fast_only_rule{}, o, big),
                       "make_any_sampler: seed 18446744073709551621 does not fit in 64 bits, and "
                       "this rule draws from fast_source only",
                       vbucket::error);
  CHECK(vbucket::make_any_sampler(clips, config, fast_only_rule{}, fast, big_seed(5))->seed() == 5);
}

TEST_CASE("any_sampler: positions, states of another epoch, and refused arguments") {
  const auto clips = some_clips(700);
  const auto config = shared_config();
  auto any = vbucket::make_any_sampler(clips, config, vbucket::opensora_v12_rule{},
                                       {.seed = 3, .world = 4, .rank = 2});
  const std::uint64_t n = any->num_global_batches();
  REQUIRE(n > 20);
  CHECK(any->epoch_shape() == std::pair<std::uint64_t, std::uint32_t>{(n + 3) / 4, 4});
  // from position 5 the remaining n - 5 batches are dealt to 4 ranks
  CHECK(any->steps_from(5) == (n - 5 + 3) / 4);
  CHECK(any->dealt_end(5) == 5 + (n - 5 + 3) / 4 * 4);
  const plan_state after3 = any->epoch_state(3);
  CHECK(after3.consumed == 12);
  CHECK(after3.epoch == 0);
  any->move_to(8);
  CHECK(any->state().consumed == 8);
  CHECK(any->batches().front().position == 8 + 2);
  // a state of epoch 1 moves the sampler to epoch 1
  auto other = vbucket::make_any_sampler(clips, config, vbucket::opensora_v12_rule{},
                                         {.seed = 3, .world = 4, .rank = 0});
  other->set_epoch(1);
  const plan_state s1 = other->state_after(2);
  any->load_state_of_epoch(s1);
  CHECK(any->epoch() == 1);
  CHECK(any->state().consumed == 8);
  // another plan's fingerprint is refused
  CHECK_THROWS_AS(any->load_state(any->state(), any->fingerprint() + 1), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::make_any_sampler(std::shared_ptr<const clips_t>{}, config,
                                                       vbucket::opensora_v2_rule{}, {}),
                       doctest::Contains("null"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::make_any_sampler(clips, config, vbucket::opensora_v2_rule{},
                                                       {.world = 2, .rank = 2}),
                       doctest::Contains("rank 2"), vbucket::error);
}

}  // namespace
