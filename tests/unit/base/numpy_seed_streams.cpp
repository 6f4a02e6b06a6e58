/// Tests of numpy_source::seed_streams (vbucket/base/numpy_random.hpp), the block seeding of
/// NumPy's streams, and of the whole-table NumPy path that uses it (vbucket/bucket/assign.hpp): the
/// scalar and vector paths, each forced, give every stream's state exactly as `stream(i, s)` (the
/// per-sample seeding, checked against numpy itself in numpy_random.cpp), over random seeds (one to
/// six words, sums that carry into a fifth word), strides, first samples (wrapping past 2^64) and
/// sub-streams; and `assign_into`, `assign_range` give the per-sample rule's ids.
#include <doctest/doctest.h>

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint64_t, std::uint32_t
#include <string>   // std::string
#include <vector>   // std::vector

#include "../../bench/synthetic.hpp"  // vbucket::bench::synthetic_table
#include "vbucket/base/numpy_random.hpp"
#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#endif

namespace {

struct test_random {  // SplitMix64, independent of the code under test
  std::uint64_t state;
  std::uint64_t next() {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

/// A decimal seed of `words` 32-bit words: random, all ones (sums carry), or small.
vbucket::big_seed random_seed(test_random& r) {
  const std::size_t words = 1 + r.below(6);
  const std::uint64_t kind = r.below(4);
  std::string digits;
  if (kind == 0) return vbucket::big_seed(r.below(100000));
  // Build the value from its words through decimal text (an independent route to big_seed).
  std::vector<std::uint32_t> w(words);
  for (std::uint32_t& x : w)
    x = kind == 1 ? 0xffffffffu : kind == 2 ? static_cast<std::uint32_t>(r.next()) : 0u;
  w.back() |= 1u;  // no high zero word
  // words -> decimal by repeated division.
  std::vector<std::uint32_t> rest = w;
  while (true) {
    bool zero = true;
    std::uint64_t rem = 0;
    for (std::size_t i = rest.size(); i-- > 0;) {
      const std::uint64_t cur = (rem << 32) | rest[i];
      rest[i] = static_cast<std::uint32_t>(cur / 10);
      rem = cur % 10;
      zero = zero && rest[i] == 0;
    }
    digits.insert(digits.begin(), static_cast<char>('0' + rem));
    if (zero) break;
  }
  const vbucket::big_seed seed = vbucket::big_seed::parse(digits);
  REQUIRE(seed.words().size() == words);
  return seed;
}

bool same(const vbucket::numpy_rng::pcg64_state& a, const vbucket::numpy_rng::pcg64_state& b) {
  return a.state == b.state && a.increment == b.increment;
}

}  // namespace

TEST_CASE("numpy_source::seed_streams: scalar and vector paths give stream(i, s), bit for bit") {
  if (!vbucket::detail::cpu_has_avx2()) MESSAGE("no AVX2 on this CPU: the vector path is scalar");
  test_random r{35};
  std::size_t carried = 0, checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const vbucket::big_seed seed = random_seed(r);
    const std::uint64_t strides[] = {1, 2, 97, 1u << 20, ~std::uint64_t{0}, r.next()};
    const vbucket::numpy_source source(seed, strides[r.below(6)]);
    const std::uint64_t first =
        r.below(3) == 0 ? ~std::uint64_t{0} - r.below(20) : r.below(1u << 30);
    const std::uint64_t sub = r.below(2) == 0 ? 0 : r.below(200);
    const std::size_t n = r.below(45);
    std::vector<vbucket::numpy_rng::pcg64_state> scalar(n), vec(n);
    source.seed_streams(first, sub, scalar, vbucket::simd_path::scalar);
    source.seed_streams(first, sub, vec, vbucket::simd_path::avx2);
    for (std::size_t j = 0; j < n; ++j) {
      CAPTURE(j);
      const vbucket::numpy_rng expected = source.stream(first + j, sub);
      REQUIRE(same(scalar[j], expected.raw_state()));
      REQUIRE(same(vec[j], expected.raw_state()));
      // The states draw as the streams do.
      vbucket::numpy_rng a(vec[j]), b = expected;
      CHECK(a.random() == b.random());
      CHECK(a.next_u64() == b.next_u64());
      ++checked;
      // A sum past four words (the seed's words plus the offset carry into a fifth).
      const auto words = seed.words();
      if (words.size() == 4 && words[0] == 0xffffffffu && words[3] == 0xffffffffu) ++carried;
    }
  }
  CHECK(checked > 3000);
  CHECK(carried > 0);
}

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
namespace {
struct record {
  long long num_frames, height, width;
  double fps;
};
}  // namespace

TEST_CASE("numpy_source: the block-seeded whole-table path gives the per-sample ids") {
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v2.json",
      vbucket::opensora_v2_tables{});
  test_random r{2026};
  for (int trial = 0; trial < 6; ++trial) {
    CAPTURE(trial);
    const vbucket::meta_table table =
        vbucket::bench::synthetic_table(5000 + r.below(3000), r.next());
    const vbucket::numpy_source source(random_seed(r), config.num_buckets() + r.below(3));
    const vbucket::opensora_v2_rule rule{trial % 2 == 0 ? 16.0 : 7.5};
    std::vector<vbucket::bucket_id> expected(table.size());
    for (std::size_t i = 0; i < table.size(); ++i)
      expected[i] = rule.assign(config, table[i], i, source);
    CHECK(vbucket::assign_all(config, table, rule, source, 1) == expected);
    CHECK(vbucket::assign_all(config, table, rule, source, 3) == expected);
    std::vector<record> records;
    for (std::size_t i = 0; i < table.size(); ++i) {
      const vbucket::sample_meta m = table[i];
      records.push_back({m.num_frames, m.height, m.width, m.fps});
    }
    CHECK(vbucket::assign_range(config, records, rule, source, 2) == expected);
  }
}
#endif

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
TEST_CASE(
    "assign_range: records through the compiled rule's whole-table path give per-sample ids") {
  const vbucket::bucket_config config = vbucket::json::load_bucket_config(
      std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v2.json",
      vbucket::opensora_v2_tables{});
  test_random r{77};
  const long long edges[] = {-5, 0, 1, 2, 0xffffffffLL, 0x100000000LL, 1LL << 40, 1LL << 62};
  for (int trial = 0; trial < 4; ++trial) {
    CAPTURE(trial);
    const vbucket::opensora_v2_rule rule{trial % 2 == 0 ? 16.0 : 23.976};
    const vbucket::compiled_v2_rule compiled(config, rule);
    const vbucket::meta_table table =
        vbucket::bench::synthetic_table(6000 + r.below(999), r.next());
    std::vector<record> records;
    for (std::size_t i = 0; i < table.size(); ++i) {
      const vbucket::sample_meta m = table[i];
      record rec{m.num_frames, m.height, m.width, m.fps};
      if (r.below(20) == 0) rec.height = edges[r.below(8)];
      if (r.below(20) == 0) rec.width = edges[r.below(8)];
      if (r.below(20) == 0) rec.num_frames = edges[r.below(8)];
      records.push_back(rec);
    }
    const vbucket::fast_source fast(r.next(), r.below(4));
    const vbucket::shifted_source<vbucket::fast_source> shifted{fast, r.below(1u << 30)};
    std::vector<vbucket::bucket_id> expected(records.size()), expected_shifted(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      const vbucket::sample_meta m = vbucket::to_sample_meta(records[i]);
      expected[i] = rule.assign(config, m, i, fast);
      expected_shifted[i] = rule.assign(config, m, i, shifted);
    }
    CHECK(vbucket::assign_range(config, records, compiled, fast, 1) == expected);
    CHECK(vbucket::assign_range(config, records, rule, fast, 2) == expected);
    CHECK(vbucket::assign_range(config, records, compiled, shifted, 3) == expected_shifted);
  }
}
#endif
