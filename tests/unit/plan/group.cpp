/// Tests of vbucket/plan/group.hpp: the counting-sort grouping (serial or in parallel chunks)
/// equals a naive map of vectors, counts what it does not list, rejects ids out of range, and
/// handles empty input.
#include "vbucket/plan/group.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::equal
#include <cstdint>    // std::int32_t, std::uint32_t
#include <limits>     // numeric_limits
#include <map>        // std::map (the naive reference)
#include <random>     // std::mt19937_64
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/assign.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/sample/batch_sampler.hpp"  // batch_fingerprint

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// Random ids in [-2, nb): -1 and -2 about `special` of the time each.
std::vector<vbucket::bucket_id> random_ids(std::size_t n, std::size_t nb, std::uint64_t seed,
                                           std::uint64_t special_per_1000 = 50) {
  std::mt19937_64 gen(seed);
  std::vector<vbucket::bucket_id> ids(n);
  for (auto& id : ids) {
    const std::uint64_t r = gen();
    const std::uint64_t k = r % 1000;
    if (k < special_per_1000)
      id = vbucket::no_bucket;
    else if (k < 2 * special_per_1000)
      id = vbucket::invalid_sample;
    else
      id = static_cast<vbucket::bucket_id>((r >> 20) % nb);
  }
  return ids;
}

/// The naive grouping the counting sort replaces, and a check of `g` against it.
void check_against_map(const std::vector<vbucket::bucket_id>& ids, std::size_t nb,
                       const vbucket::bucket_groups& g) {
  std::map<vbucket::bucket_id, std::vector<std::uint32_t>> naive;
  std::uint64_t unassigned = 0, invalid = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0)
      naive[ids[i]].push_back(static_cast<std::uint32_t>(i));
    else if (ids[i] == vbucket::no_bucket)
      ++unassigned;
    else
      ++invalid;
  }
  REQUIRE(g.num_buckets() == nb);
  REQUIRE(g.offsets.size() == nb + 1);
  CHECK(g.offsets.front() == 0);
  CHECK(g.offsets.back() == g.indices.size());
  CHECK(g.unassigned == unassigned);
  CHECK(g.invalid == invalid);
  CHECK(g.assigned() + g.unassigned + g.invalid == ids.size());
  std::size_t bad = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    const auto id = static_cast<vbucket::bucket_id>(b);
    const auto it = naive.find(id);
    const std::vector<std::uint32_t> expected =
        it == naive.end() ? std::vector<std::uint32_t>{} : it->second;
    const auto got = g.bucket(id);
    bad += g.count(id) != expected.size();
    bad += std::vector<std::uint32_t>(got.begin(), got.end()) != expected;
    bad += g.offsets[b] > g.offsets[b + 1];
  }
  CHECK(bad == 0);
}

vbucket::bucket_config small_v2_config() {
  std::vector<vbucket::bucket_spec> specs;
  specs.push_back({"256px", 1, 0.9, std::nullopt, 8});
  specs.push_back({"256px", 33, 0.7, std::nullopt, 4});
  specs.push_back({"256px", 97, 0.5, 0.5, 2});
  specs.push_back({"768px", 33, 0.3, 0.5, 1});
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace

TEST_CASE("group: equals a naive map of vectors on random ids") {
  for (std::size_t nb : {1u, 2u, 7u, 141u, 1025u}) {
    for (std::size_t n : {1u, 2u, 100u, 10'000u, 300'000u}) {
      CAPTURE(nb);
      CAPTURE(n);
      const auto ids = random_ids(n, nb, nb * 1000003 + n);
      check_against_map(ids, nb, vbucket::group_by_bucket(ids, nb));
    }
  }
  // Skewed: almost everything in one bucket, the rest spread thin (many empty buckets).
  std::vector<vbucket::bucket_id> skewed(50'000, 3);
  for (std::size_t i = 0; i < skewed.size(); i += 97)
    skewed[i] = static_cast<vbucket::bucket_id>(i % 500);
  check_against_map(skewed, 500, vbucket::group_by_bucket(skewed, 500));
}

TEST_CASE("group: the parallel counting sort is the serial one, whatever the threads") {
  // 300,000 ids make several chunks of 2^16; 1025 buckets, many of them empty in a chunk.
  const auto ids = random_ids(300'000, 1025, 11);
  const auto serial = vbucket::group_by_bucket(ids, 1025);
  check_against_map(ids, 1025, serial);
  for (unsigned threads : {2u, 3u, 7u, 0u}) {
    CAPTURE(threads);
    const auto g = vbucket::group_by_bucket(ids, 1025, threads);
    CHECK(g.offsets == serial.offsets);
    CHECK(g.indices == serial.indices);
    CHECK(g.unassigned == serial.unassigned);
    CHECK(g.invalid == serial.invalid);
  }
  // A bad id in a later chunk is named, whatever chunk finds it.
  std::vector<vbucket::bucket_id> bad = ids;
  bad[200'000] = 1025;
  bad[250'000] = -7;
  CHECK(contains(error_message([&] { (void)vbucket::group_by_bucket(bad, 1025, 4); }),
                 "sample 200000 has bucket id 1025 but there are 1025 buckets"));
}

TEST_CASE("group: the counting sort skips the buckets it is given no room for") {
  const std::vector<vbucket::bucket_id> ids{2, 0, -1, 2, 1, -2, 0, 2};
  const vbucket::detail::bucket_sort sort(ids, 3, 1, "test");
  CHECK(std::vector<std::uint64_t>(sort.grouped().begin(), sort.grouped().end()) ==
        std::vector<std::uint64_t>{2, 1, 3});
  CHECK(sort.unassigned() == 1);
  CHECK(sort.invalid() == 1);
  std::vector<std::uint32_t> zero(2, 99), two(3, 99);
  const std::vector<std::uint32_t*> dest{zero.data(), nullptr, two.data()};
  sort.scatter(dest);
  CHECK(zero == std::vector<std::uint32_t>{1, 6});
  CHECK(two == std::vector<std::uint32_t>{0, 3, 7});
  CHECK(contains(error_message([] {
                   const std::vector<vbucket::bucket_id> bad{0, 3};
                   (void)vbucket::detail::bucket_sort(bad, 3, 1, "who");
                 }),
                 "who: sample 1 has bucket id 3"));
}

TEST_CASE("group: counts of unassigned and invalid samples") {
  // By hand: 3 x no_bucket, 2 x invalid_sample, buckets 0 (x2) and 2 (x1) of 4.
  const std::vector<vbucket::bucket_id> ids{-1, 2, -2, 0, -1, -1, 0, -2};
  const auto g = vbucket::group_by_bucket(ids, 4);
  CHECK(g.unassigned == 3);
  CHECK(g.invalid == 2);
  CHECK(g.assigned() == 3);
  CHECK(g.offsets == std::vector<std::uint64_t>{0, 2, 2, 3, 3});
  CHECK(g.indices == std::vector<std::uint32_t>{3, 6, 1});
  CHECK(g.count(1) == 0);
  CHECK(g.bucket(1).empty());
  CHECK(g.bucket(3).empty());
  // Nothing but codes.
  const std::vector<vbucket::bucket_id> codes{-1, -2, -2};
  const auto gc = vbucket::group_by_bucket(codes, 3);
  CHECK(gc.assigned() == 0);
  CHECK(gc.unassigned == 1);
  CHECK(gc.invalid == 2);
  CHECK(gc.offsets == std::vector<std::uint64_t>{0, 0, 0, 0});
}

TEST_CASE("group: an id out of range is an error naming the sample") {
  const std::vector<vbucket::bucket_id> at_end{0, 1, 5, 2};
  auto msg = error_message([&] { (void)vbucket::group_by_bucket(at_end, 5); });
  CHECK(contains(msg, "sample 2"));
  CHECK(contains(msg, "5"));
  for (vbucket::bucket_id bad : {6, 1000, std::numeric_limits<vbucket::bucket_id>::max()}) {
    const std::vector<vbucket::bucket_id> ids{0, -1, bad};
    msg = error_message([&] { (void)vbucket::group_by_bucket(ids, 5); });
    CHECK(contains(msg, "sample 2"));
    CHECK(contains(msg, std::to_string(bad)));
  }
  // Negative values other than no_bucket (-1) and invalid_sample (-2) are not ids either.
  for (vbucket::bucket_id bad : {-3, -100, std::numeric_limits<vbucket::bucket_id>::min()}) {
    CAPTURE(bad);
    const std::vector<vbucket::bucket_id> ids{0, 1, -1, bad};
    msg = error_message([&] { (void)vbucket::group_by_bucket(ids, 5); });
    CHECK(contains(msg, "sample 3"));
    CHECK(contains(msg, std::to_string(bad)));
  }
  // With no buckets at all, any id >= 0 is out of range.
  const std::vector<vbucket::bucket_id> zero{-1, 0};
  CHECK(contains(error_message([&] { (void)vbucket::group_by_bucket(zero, 0); }), "sample 1"));
}

TEST_CASE("group: empty input") {
  const std::vector<vbucket::bucket_id> none;
  const auto g = vbucket::group_by_bucket(none, 6);
  CHECK(g.num_buckets() == 6);
  CHECK(g.offsets == std::vector<std::uint64_t>(7, 0));
  CHECK(g.indices.empty());
  CHECK(g.assigned() == 0);
  CHECK(g.unassigned == 0);
  CHECK(g.invalid == 0);
  for (vbucket::bucket_id b = 0; b < 6; ++b) CHECK(g.bucket(b).empty());
  const auto g0 = vbucket::group_by_bucket(none, 0);
  CHECK(g0.num_buckets() == 0);
  CHECK(g0.offsets == std::vector<std::uint64_t>{0});
  // Only codes, with zero buckets, is fine too.
  const std::vector<vbucket::bucket_id> codes{-1, -2};
  const auto gc = vbucket::group_by_bucket(codes, 0);
  CHECK(gc.unassigned == 1);
  CHECK(gc.invalid == 1);
}

TEST_CASE("group: groups of assign_all are the same whatever the thread count") {
  // 250,000 rows split into real chunks; group the ids of each thread count and compare.
  std::mt19937_64 gen(3);
  vbucket::meta_table table;
  for (std::size_t i = 0; i < 250'000; ++i) {
    const std::uint64_t r = gen();
    const std::int64_t frames = (r & 15) == 0 ? 1 : static_cast<std::int64_t>(r >> 52) - 64;
    table.push_back({frames, static_cast<std::int64_t>(100 + (r >> 8) % 1500),
                     static_cast<std::int64_t>(100 + (r >> 24) % 1500), 24.0});
  }
  const auto config = small_v2_config();
  const vbucket::opensora_v2_rule rule{};
  const vbucket::fast_source src(77, 0);
  const auto ids1 = vbucket::assign_all(config, table, rule, src, 1);
  const auto ref = vbucket::group_by_bucket(ids1, config.num_buckets());
  check_against_map(ids1, config.num_buckets(), ref);
  CHECK(ref.assigned() > 10'000);
  CHECK(ref.unassigned > 1'000);
  CHECK(ref.invalid > 1'000);
  for (unsigned threads : {2u, 3u, 8u, 0u}) {
    CAPTURE(threads);
    const auto ids = vbucket::assign_all(config, table, rule, src, threads);
    const auto g = vbucket::group_by_bucket(ids, config.num_buckets());
    CHECK(g.offsets == ref.offsets);
    CHECK(g.indices == ref.indices);
    CHECK(g.unassigned == ref.unassigned);
    CHECK(g.invalid == ref.invalid);
  }
}

TEST_CASE("group: 16-bit ids (compact_ids) group and plan as 32-bit ids do") {
  const vbucket::bucket_config config = small_v2_config();
  const std::size_t nb = config.num_buckets();
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{5000}, std::size_t{300'000}}) {
    CAPTURE(n);
    const std::vector<vbucket::bucket_id> ids = random_ids(n, nb, 77 + n);
    std::vector<vbucket::compact_bucket_id> small(n);
    vbucket::compact_ids(ids, small, nb);
    bool same = true;
    for (std::size_t i = 0; i < n; ++i) same = same && small[i] == ids[i];
    CHECK(same);
    const vbucket::bucket_groups g =
        vbucket::group_by_bucket(std::span<const vbucket::compact_bucket_id>(small), nb, 2);
    check_against_map(ids, nb, g);
    for (const auto policy : {vbucket::incomplete_policy::pad, vbucket::incomplete_policy::drop,
                              vbucket::incomplete_policy::downgrade}) {
      const vbucket::plan_options o{.seed = 3, .epoch = 1, .policy = policy, .threads = 2};
      const vbucket::epoch_plan wide =
          vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, o);
      const vbucket::epoch_plan narrow =
          vbucket::make_epoch_plan(std::span<const vbucket::compact_bucket_id>(small), config, o);
      REQUIRE(wide.num_batches() == narrow.num_batches());
      std::size_t differ = 0;
      for (std::uint64_t p = 0; p < wide.num_batches(); ++p) {
        const vbucket::batch a = wide.global_batch(p), b = narrow.global_batch(p);
        differ += a.bucket != b.bucket || a.indices.size() != b.indices.size() ||
                  !std::equal(a.indices.begin(), a.indices.end(), b.indices.begin());
      }
      CHECK(differ == 0);
    }
    const vbucket::packed_options po{
        .seed = 3, .epoch = 1, .token_budget = vbucket::largest_batch_cost(config)};
    const vbucket::packed_plan pw =
        vbucket::make_packed_plan(std::span<const vbucket::bucket_id>(ids), config, po);
    const vbucket::packed_plan pn =
        vbucket::make_packed_plan(std::span<const vbucket::compact_bucket_id>(small), config, po);
    REQUIRE(pw.num_batches() == pn.num_batches());
    std::size_t differ = 0;
    for (std::uint64_t p = 0; p < pw.num_batches(); ++p)
      differ += vbucket::batch_fingerprint(pw.global_batch(p)) !=
                vbucket::batch_fingerprint(pn.global_batch(p));
    CHECK(differ == 0);
  }
}

TEST_CASE("group: compact_ids refuses what 16 bits cannot hold, naming the sample") {
  const std::vector<vbucket::bucket_id> ids{0, 4, -1, 5, -2};
  std::vector<vbucket::compact_bucket_id> out(ids.size());
  auto msg = error_message([&] { vbucket::compact_ids(ids, out, 5, 1000); });
  CHECK(contains(msg, "compact_ids: sample 1003 has bucket id 5 but there are 5 buckets"));
  const std::vector<vbucket::bucket_id> low{0, -3};
  msg = error_message([&] { vbucket::compact_ids(low, std::span(out).first(2), 5); });
  CHECK(contains(msg, "sample 1 has bucket id -3, which is neither a bucket"));
  // An id that would wrap to a valid 16-bit value is still an error.
  const std::vector<vbucket::bucket_id> wraps{65536 + 3};
  msg = error_message([&] { vbucket::compact_ids(wraps, std::span(out).first(1), 5); });
  CHECK(contains(msg, "bucket id 65539"));
  msg = error_message([&] { vbucket::compact_ids(ids, out, vbucket::max_compact_buckets + 1); });
  CHECK(contains(msg, "32768 buckets do not fit 16-bit ids"));
}
