/// Tests of vbucket/sample/batch_sampler.hpp: class template argument deduction over a user's
/// record type and a meta_table; the batches equal the hand-wired path (assign → make_epoch_plan →
/// deal → rank) for several ranks, epochs and both random modes; coverage across ranks; size;
/// resume under the same and another world size; refused states; fingerprints; constraints.

#include <doctest/doctest.h>

#include <algorithm>   // std::ranges::equal, std::ranges::count
#include <concepts>    // std::same_as
#include <cstdint>     // std::uint32_t, std::uint64_t
#include <filesystem>  // std::filesystem::remove
#include <fstream>     // std::ofstream
#include <iterator>    // std::size
#include <limits>      // quiet_NaN
#include <list>        // std::list (not random access)
#include <memory>      // std::make_shared
#include <optional>    // std::nullopt
#include <ranges>      // std::ranges concepts
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket/vbucket.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/temp_files.hpp"  // unique_temp_path

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#define VBUCKET_SAMPLER_TEST_JSON 1
#endif

namespace sampler_test {

/// A user's own record: other member names, 32-bit sizes, a float rate, and a path.
struct clip_record {
  std::string path;
  std::int32_t length = 0;
  std::int32_t rows = 0;
  std::int32_t cols = 0;
  float rate = 0.0f;
};

/// A type that is not video metadata (no fps, no meta_traits).
struct not_meta {
  int num_frames = 0;
  int height = 0;
};

}  // namespace sampler_test

template <>
struct vbucket::meta_traits<sampler_test::clip_record> {
  static std::int32_t frames(const sampler_test::clip_record& c) { return c.length; }
  static std::int32_t height(const sampler_test::clip_record& c) { return c.rows; }
  static std::int32_t width(const sampler_test::clip_record& c) { return c.cols; }
  static float fps(const sampler_test::clip_record& c) { return c.rate; }
};

namespace {

using sampler_test::clip_record;
using vbucket::batch;
using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::epoch_plan;
using vbucket::incomplete_policy;
using vbucket::meta_table;
using vbucket::plan_state;
using vbucket::rng_mode;

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

/// A small deterministic generator for the tests (SplitMix64).
struct test_rng {
  std::uint64_t state;
  std::uint64_t next() { return vbucket::detail::mix64(state += vbucket::detail::golden_gamma); }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

/// n records like a real job's: a third images (no fps), videos of 2 to 300 frames at common
/// rates and sizes (landscape, portrait, square, some too small for any bucket), and a few
/// unusable rows (0 frames).
std::vector<clip_record> make_records(std::size_t n, std::uint64_t seed = 5) {
  static constexpr std::int32_t sizes[][2] = {
      {1080, 1920}, {720, 1280}, {1920, 1080}, {480, 640},  {360, 640}, {256, 256},
      {512, 512},   {144, 256},  {1024, 1024}, {768, 1366}, {96, 128},  {2160, 3840}};
  static constexpr float rates[] = {24.0f, 30.0f, 60.0f, 12.0f, 25.0f};
  test_rng g{seed};
  std::vector<clip_record> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& hw = sizes[g.below(std::size(sizes))];
    clip_record r;
    r.path = "clip" + std::to_string(i) + ".mp4";
    r.rows = hw[0];
    r.cols = hw[1];
    const std::uint64_t kind = g.below(100);
    if (kind < 33) {
      r.length = 1;
      r.rate = nan_f;
    } else if (kind < 35) {
      r.length = 0;  // unusable
      r.rate = 30.0f;
    } else {
      r.length = static_cast<std::int32_t>(2 + g.below(299));
      r.rate = rates[g.below(std::size(rates))];
    }
    out.push_back(r);
  }
  return out;
}

/// tests/data/config_opensora_v2.json (read through the JSON adapter when it is built; else
/// the same config written out).
bucket_config v2_config() {
#ifdef VBUCKET_SAMPLER_TEST_JSON
  return vbucket::json::load_bucket_config(
      std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v2.json",
      vbucket::opensora_v2_tables{});
#else
  return vbucket_test::opensora_v2_config();
#endif
}

/// A small Open-Sora v1.2 config (its fixed tables), with pairs.
bucket_config v12_config() {
  std::vector<vbucket::bucket_spec> specs{
      {"144p", 1, 1.0, std::nullopt, 40}, {"144p", 51, 1.0, std::nullopt, 10},
      {"240p", 1, 0.5, std::nullopt, 20}, {"240p", 51, 0.5, 0.7, 6},
      {"360p", 102, 0.5, 0.5, 3},         {"360p", 51, 0.4, std::nullopt, 4}};
  return bucket_config(specs, vbucket::opensora_v12_tables{});
}

/// The hand-wired path: assign with the source of (mode, seed, epoch), plan with the same seed
/// and epoch.
template <class Rule>
epoch_plan hand_plan(const bucket_config& config, const meta_table& table, const Rule& rule,
                     rng_mode mode, std::uint64_t seed, std::uint64_t epoch,
                     incomplete_policy policy = incomplete_policy::pad,
                     std::uint32_t balance_group = 0) {
  // Open-Sora seeds epoch E of a run seeded S with S + E (small values here).
  const std::vector<bucket_id> ids =
      mode == rng_mode::fast
          ? vbucket::assign_all(config, table, rule, vbucket::fast_source(seed, epoch))
          : vbucket::assign_all(
                config, table, rule,
                vbucket::numpy_source(vbucket::big_seed::parse(std::to_string(seed + epoch)),
                                      config.num_buckets()));
  vbucket::plan_options o;
  o.seed = seed;
  o.epoch = epoch;
  o.policy = policy;
  o.balance_group = balance_group;
  return vbucket::make_epoch_plan(std::span<const bucket_id>(ids), config, o);
}

bool same_batch(const batch& a, const batch& b) {
  return a.bucket == b.bucket && a.frames == b.frames && a.height == b.height &&
         a.width == b.width && std::ranges::equal(a.indices, b.indices) && a.step == b.step &&
         a.position == b.position && a.repeat == b.repeat;
}

/// Every batch the sampler yields, in order.
template <class Sampler>
std::vector<batch> collect(const Sampler& s) {
  std::vector<batch> out;
  for (const batch& b : s) out.push_back(b);
  return out;
}

/// The sampler's batches equal the view's, one for one.
template <class Sampler>
void check_equal(const Sampler& s, const vbucket::rank_steps& expected) {
  const std::vector<batch> got = collect(s);
  REQUIRE(got.size() == expected.size());
  CHECK(s.size() == expected.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("step " << k);
    CHECK(same_batch(got[k], expected[k]));
  }
}

/// FNV-1a 64 written out over a byte string, and the documented fingerprint built from it:
/// per global batch, FNV-1a over its bucket, its size and its indices as 32-bit little-endian
/// words; then FNV-1a over those 64-bit batch hashes as little-endian bytes, in order.
std::uint64_t fnv1a_bytes(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}
void put_le(std::string& bytes, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) bytes.push_back(static_cast<char>((v >> (8 * k)) & 0xffu));
}
std::uint64_t reference_fingerprint(const epoch_plan& plan) {
  std::string sequence;
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const batch b = plan.global_batch(p);
    std::string words;
    put_le(words, static_cast<std::uint32_t>(b.bucket), 4);
    put_le(words, b.indices.size(), 4);
    for (const std::uint32_t i : b.indices) put_le(words, i, 4);
    put_le(sequence, fnv1a_bytes(words), 8);
  }
  return fnv1a_bytes(sequence);
}

/// A user rule that buckets images only, and draws only from fast_source.
struct images_only_rule {
  [[nodiscard]] bucket_id assign(const bucket_config& c, const vbucket::sample_meta& m,
                                 std::uint64_t index, const vbucket::fast_source& s) const {
    if (m.num_frames != 1) return vbucket::no_bucket;
    return vbucket::opensora_v2_rule{}.assign(c, m, index, s);
  }
};

/// A rule-shaped type whose assign returns the wrong type (bucket ids are 32-bit).
struct not_a_rule {
  std::int64_t assign(const bucket_config&, const vbucket::sample_meta&, std::uint64_t,
                      const vbucket::fast_source&) const {
    return 0;
  }
};

template <class S>
concept sampler_of = requires {
  typename vbucket::batch_sampler<S>;
};

template <class S>
concept deducible = requires(const S& s, const bucket_config& c) {
  vbucket::batch_sampler(s, c, vbucket::opensora_v2_rule{}, vbucket::sampler_options{});
};

using records_sampler = vbucket::batch_sampler<std::vector<clip_record>>;

// The constraints: a bad sample type (or a non-random-access range) is no sample collection,
// names no sampler and deduces none; a wrong rule is no sampler rule.
static_assert(vbucket::sample_collection<std::vector<clip_record>>);
static_assert(vbucket::sample_collection<meta_table>);
static_assert(vbucket::sample_collection<std::span<const clip_record>>);
static_assert(!vbucket::sample_collection<std::vector<sampler_test::not_meta>>);
static_assert(!vbucket::sample_collection<std::list<vbucket::sample_meta>>);
static_assert(!vbucket::sample_collection<int>);
static_assert(sampler_of<std::vector<clip_record>>);
static_assert(!sampler_of<std::vector<sampler_test::not_meta>>);
static_assert(deducible<std::vector<clip_record>>);
static_assert(deducible<meta_table>);
static_assert(!deducible<std::vector<sampler_test::not_meta>>);
static_assert(vbucket::sampler_rule<vbucket::opensora_v12_rule, vbucket::builtin_sources>);
static_assert(vbucket::sampler_rule<images_only_rule, vbucket::builtin_sources>);
static_assert(!vbucket::sampler_rule<not_a_rule, vbucket::builtin_sources>);
static_assert(!vbucket::sampler_rule<int, vbucket::builtin_sources>);
// The sampler is a sized random-access range of batch values.
static_assert(std::ranges::random_access_range<const records_sampler>);
static_assert(std::ranges::sized_range<const records_sampler>);
static_assert(std::same_as<std::ranges::range_value_t<records_sampler>, batch>);
// The loader follows a sampler (its schedule, rank and state).
static_assert(vbucket::schedule_source<records_sampler>);
// The options aggregate starts with seed, world, rank.
static_assert(vbucket::sampler_options{3, 4, 2}.seed == 3 &&
              vbucket::sampler_options{3, 4, 2}.world == 4 &&
              vbucket::sampler_options{3, 4, 2}.rank == 2);
// Its defaults are the run's (vbucket::defaults), as the CLI's flags and Python's keywords.
static_assert(vbucket::sampler_options{}.rng == vbucket::defaults::rng &&
              vbucket::sampler_options{}.seed == vbucket::defaults::seed &&
              vbucket::sampler_options{}.world == vbucket::defaults::world &&
              vbucket::sampler_options{}.policy == vbucket::defaults::policy);

}  // namespace

TEST_CASE("batch_sampler: deduction over a user's records, a meta_table, a span, shared configs") {
  const std::vector<clip_record> records = make_records(500);
  const meta_table table = meta_table::from(records);
  const bucket_config config = v2_config();

  for (std::uint32_t r = 0; r < 4; ++r) {
    vbucket::batch_sampler s(records, config, vbucket::opensora_v2_rule{.fps_max = 16},
                             {.seed = 11, .world = 4, .rank = r});
    static_assert(
        std::same_as<decltype(s),
                     vbucket::batch_sampler<std::vector<clip_record>, vbucket::opensora_v2_rule,
                                            vbucket::builtin_sources>>);
    vbucket::batch_sampler t(table, config, vbucket::opensora_v2_rule{.fps_max = 16},
                             {.seed = 11, .world = 4, .rank = r});
    static_assert(std::same_as<decltype(t), vbucket::batch_sampler<meta_table>>);
    s.set_epoch(3);
    t.set_epoch(3);
    CHECK(s.rank() == r);
    CHECK(s.world_size() == 4);
    CHECK(s.size() > 0);
    CHECK(&s.samples() == &records);  // a view, not a copy
    CHECK(&t.samples() == &table);
    // One definition of the draws: the records and their table give the same batches.
    const auto a = collect(s), b = collect(t);
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) CHECK(same_batch(a[k], b[k]));
  }

  // Without a rule (Open-Sora 2.0's defaults), with a shared config, over a span (kept by value).
  const auto shared = std::make_shared<const bucket_config>(config);
  vbucket::batch_sampler d(records, shared, {.seed = 11});
  static_assert(std::same_as<decltype(d), vbucket::batch_sampler<std::vector<clip_record>>>);
  CHECK(&d.config() == shared.get());
  vbucket::batch_sampler v(std::span<const clip_record>(records), config,
                           vbucket::opensora_v2_rule{}, {.seed = 11});
  static_assert(std::same_as<decltype(v), vbucket::batch_sampler<std::span<const clip_record>>>);
  CHECK(&v.config() != &config);  // owned copy
  CHECK(v.num_samples() == records.size());
  CHECK(d.fingerprint() == v.fingerprint());
  vbucket::batch_sampler v12(table, v12_config(), vbucket::opensora_v12_rule{.frame_interval = 2},
                             {.seed = 1, .world = 2, .rank = 1});
  static_assert(std::same_as<decltype(v12)::rule_type, vbucket::opensora_v12_rule>);
  CHECK(v12.size() > 0);
}

TEST_CASE("batch_sampler: batches equal the hand-wired path, every rank, epochs, both modes") {
  const std::vector<clip_record> records = make_records(3000);
  const meta_table table = meta_table::from(records);
  const bucket_config config = v2_config();
  const vbucket::opensora_v2_rule rule{.fps_max = 16};
  for (const rng_mode mode : {rng_mode::fast, rng_mode::numpy}) {
    for (const std::uint64_t epoch : {0u, 3u, 4u}) {
      const epoch_plan plan = hand_plan(config, table, rule, mode, 11, epoch);
      for (const std::uint32_t world : {1u, 3u, 4u}) {
        const vbucket::epoch_schedule schedule = plan.deal(world);
        for (std::uint32_t r = 0; r < world; ++r) {
          INFO("mode " << vbucket::to_string(mode) << ", epoch " << epoch << ", world " << world
                       << ", rank " << r);
          vbucket::batch_sampler s(records, config, rule,
                                   {.seed = 11, .world = world, .rank = r, .rng = mode});
          s.set_epoch(epoch);
          check_equal(s, schedule.rank(r));
          vbucket::batch_sampler t(table, config, rule,
                                   {.seed = 11, .world = world, .rank = r, .rng = mode});
          t.set_epoch(epoch);
          check_equal(t, schedule.rank(r));
          CHECK(t.fingerprint() == reference_fingerprint(plan));
        }
      }
    }
  }
}

TEST_CASE("batch_sampler: the hand-wired path with Open-Sora v1.2's rule, drop, balance") {
  const meta_table table = meta_table::from(make_records(3000));
  {
    const bucket_config c12 = v12_config();
    const vbucket::opensora_v12_rule r12{.frame_interval = 1};
    for (const rng_mode mode : {rng_mode::fast, rng_mode::numpy}) {
      const epoch_plan plan = hand_plan(c12, table, r12, mode, 7, 2, incomplete_policy::drop, 3);
      const vbucket::epoch_schedule schedule = plan.deal(3, 0, true);
      for (std::uint32_t r = 0; r < 3; ++r) {
        vbucket::batch_sampler s(table, c12, r12,
                                 {.seed = 7,
                                  .world = 3,
                                  .rank = r,
                                  .rng = mode,
                                  .policy = incomplete_policy::drop,
                                  .drop_last = true,
                                  .balance_group = 3});
        s.set_epoch(2);
        check_equal(s, schedule.rank(r));
      }
    }
  }
}

TEST_CASE("batch_sampler: a user rule and a user source family") {
  const std::vector<clip_record> records = make_records(2000);
  const meta_table table = meta_table::from(records);
  const bucket_config config = v2_config();

  // The family is called with (seed, epoch, num_buckets); the plan keeps the sampler's seed.
  auto tripled = [](std::uint64_t seed, std::uint64_t epoch, std::size_t) {
    return vbucket::fast_source(seed * 3, epoch);
  };
  vbucket::batch_sampler s(records, config, images_only_rule{}, {.seed = 11, .world = 2, .rank = 1},
                           tripled);
  s.set_epoch(5);
  const std::vector<bucket_id> ids =
      vbucket::assign_all(config, table, images_only_rule{}, vbucket::fast_source(33, 5));
  vbucket::plan_options o;
  o.seed = 11;
  o.epoch = 5;
  const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), config, o);
  check_equal(s, plan.deal(2).rank(1));
  for (const batch& b : s) CHECK(b.frames == 1);  // the rule's own choice: images only

  // A rule that cannot draw from numpy_source cannot take numpy (the default) from the built-in
  // sources: the error says to choose fast. A family of one's own draws its own whatever rng.
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, config, images_only_rule{}),
                       doctest::Contains("set rng = rng_mode::fast"), vbucket::error);
  CHECK_THROWS_WITH_AS(
      vbucket::batch_sampler(records, config, images_only_rule{}, {.rng = rng_mode::numpy}),
      doctest::Contains("rng numpy (the default) needs a rule that draws from numpy_source"),
      vbucket::error);
  vbucket::batch_sampler own(records, config, images_only_rule{},
                             {.seed = 11, .world = 2, .rank = 1, .rng = rng_mode::numpy}, tripled);
  own.set_epoch(5);
  check_equal(own, plan.deal(2).rank(1));
}

TEST_CASE("batch_sampler: bad options are refused with a clear error") {
  const std::vector<clip_record> records = make_records(50);
  const bucket_config config = v2_config();
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, config, {.seed = 1, .world = 4, .rank = 4}),
                       "batch_sampler: rank 4 is not below the world size 4", vbucket::error);
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, config, {.seed = 1, .world = 0}),
                       "batch_sampler: world size must be at least 1", vbucket::error);
  CHECK_THROWS_WITH_AS(
      vbucket::batch_sampler(records, config, vbucket::opensora_v2_rule{.fps_max = 0}),
      doctest::Contains("fps_max must be a positive number"), vbucket::error);
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, std::shared_ptr<const bucket_config>{}),
                       "batch_sampler: the shared config is null", vbucket::error);
}

TEST_CASE("batch_sampler: every sample once across ranks, apart from counted pads and repeats") {
  const std::vector<clip_record> records = make_records(3000, 9);
  const meta_table table = meta_table::from(records);
  const bucket_config config = v2_config();
  const vbucket::opensora_v2_rule rule{};
  // Which samples have a bucket, independently of the sampler (every bucket of the config has
  // a batch size, so each of them must be in some batch).
  const std::vector<bucket_id> ids =
      vbucket::assign_all(config, table, rule, vbucket::fast_source(21, 1));
  const auto bucketed =
      static_cast<std::size_t>(std::ranges::count_if(ids, [](bucket_id b) { return b >= 0; }));
  REQUIRE(bucketed > 1000);

  for (const std::uint32_t world : {1u, 3u, 4u, 8u}) {
    for (const bool drop : {false, true}) {
      INFO("world " << world << (drop ? ", drop" : ", pad"));
      std::vector<std::uint32_t> count(records.size(), 0);
      std::uint64_t steps = 0, slots = 0, pads = 0, repeat_samples = 0, dropped = 0;
      for (std::uint32_t r = 0; r < world; ++r) {
        // fast draws: the ids above are fast_source's (numpy is the default)
        vbucket::sampler_options o{.seed = 21, .world = world, .rank = r, .rng = rng_mode::fast};
        if (drop) {
          o.policy = incomplete_policy::drop;
          o.drop_last = true;
        }
        vbucket::batch_sampler s(records, config, rule, o);
        s.set_epoch(1);
        std::uint64_t yielded = 0;
        for (const batch& b : s) {
          ++yielded;
          slots += b.indices.size();
          for (const std::uint32_t i : b.indices) ++count[i];
        }
        CHECK(yielded == s.size());
        if (r == 0) {
          steps = yielded;
          const vbucket::plan_stats st = s.stats();
          pads = st.total.pads;
          dropped = st.total.dropped + st.alignment.dropped_samples;
          repeat_samples = st.alignment.repeat_samples;
          // Steps per rank: the real batches over the world, rounded up (down with drop_last).
          const std::uint64_t n = s.plan().num_batches();
          CHECK(steps == (drop ? n / world : (n + world - 1) / world));
        } else {
          CHECK(yielded == steps);  // every rank runs the same number of steps
        }
      }
      std::size_t distinct = 0;
      for (std::size_t i = 0; i < count.size(); ++i) {
        if (count[i] > 0) ++distinct;
        if (ids[i] < 0) CHECK(count[i] == 0);  // no bucket: in no batch
        if (!drop && ids[i] >= 0) CHECK(count[i] >= 1);
      }
      if (drop) {
        CHECK(pads == 0);
        CHECK(repeat_samples == 0);
        CHECK(slots == distinct);  // nothing twice
        CHECK(distinct + dropped == bucketed);
      } else {
        CHECK(distinct == bucketed);
        CHECK(slots == distinct + pads + repeat_samples);
      }
    }
  }
}

TEST_CASE("batch_sampler: resume mid-epoch under the same and another world size") {
  const std::vector<clip_record> records = make_records(3000, 13);
  const bucket_config config = v2_config();
  const vbucket::opensora_v2_rule rule{};
  constexpr std::uint32_t world = 4;
  constexpr std::uint64_t done = 5;  // steps every rank ran before the checkpoint

  std::vector<std::vector<batch>> before(world);  // each rank's whole epoch, uninterrupted
  std::vector<epoch_plan> keep;                   // batches' indices are spans into the plan
  plan_state saved;
  for (std::uint32_t r = 0; r < world; ++r) {
    vbucket::batch_sampler s(records, config, rule, {.seed = 11, .world = world, .rank = r});
    s.set_epoch(2);
    before[r] = collect(s);
    keep.push_back(s.plan());
    REQUIRE(before[r].size() > done + 2);
    // The trainer's loop: advance after each step; size() in the loop re-deals, and the loop's
    // iterators keep reading the schedule they came from.
    std::uint64_t k = 0;
    for (const batch& b : s) {
      CHECK(same_batch(b, before[r][k]));
      if (++k == done) break;
      s.advance(1);
      CHECK(s.size() == before[r].size() - k);
    }
    s.advance(1);
    CHECK(s.state().consumed == done * world);
    CHECK(s.state() == s.state_after(0));
    if (r == 0) saved = plan_state::parse(s.state().to_string());
    CHECK(s.state() == saved);  // the same on every rank
  }

  const epoch_plan plan = [&] {
    vbucket::batch_sampler s(records, config, rule, {.seed = 11});
    s.set_epoch(2);
    return s.plan();
  }();

  {  // the same world size: each rank's remaining batches
    for (std::uint32_t r = 0; r < world; ++r) {
      vbucket::batch_sampler s(records, config, rule, {.seed = 11, .world = world, .rank = r});
      s.set_epoch(2);
      s.load_state(saved);
      const std::vector<batch> after = collect(s);
      REQUIRE(after.size() == before[r].size() - done);
      for (std::size_t k = 0; k < after.size(); ++k) {
        CHECK(std::ranges::equal(after[k].indices, before[r][k + done].indices));
        CHECK(after[k].position == before[r][k + done].position);
        CHECK(after[k].repeat == before[r][k + done].repeat);
      }
    }
  }
  for (const std::uint32_t other : {3u, 7u, 1u}) {
    {  // another world size: exactly the global batches not yet consumed
      INFO("world " << other);
      std::vector<int> seen(plan.num_batches(), 0);
      for (std::uint32_t r = 0; r < other; ++r) {
        vbucket::batch_sampler s(records, config, rule, {.seed = 11, .world = other, .rank = r});
        s.set_epoch(2);
        s.load_state(saved);
        for (const batch& b : s) {
          if (b.repeat) continue;
          REQUIRE(b.position < plan.num_batches());
          ++seen[b.position];
          CHECK(std::ranges::equal(b.indices, plan.global_batch(b.position).indices));
        }
      }
      for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
        INFO("global position " << p);
        CHECK(seen[p] == (p < done * world ? 0 : 1));
      }
    }
  }
}

TEST_CASE("batch_sampler: an epoch ended under a larger world, resumed under a smaller one") {
  // The end of an epoch under world W lies up to W - 1 past its N global batches (alignment
  // repeats). Resumed under a world w < W with no step since, the sampler's own state must
  // still load: it records the world the position was reached under (a state that recorded w
  // was refused as "past the end of epoch", found by the SIGKILL test of the Python Loader).
  const std::vector<clip_record> records = make_records(3000, 13);
  const bucket_config config = v2_config();
  const vbucket::opensora_v2_rule rule{};
  for (const std::uint32_t big : {2u, 3u, 4u, 7u}) {
    vbucket::batch_sampler s(records, config, rule, {.seed = 11, .world = big});
    s.set_epoch(2);
    const std::uint64_t n = s.num_global_batches();
    s.advance(s.size());  // the whole epoch
    const plan_state end = plan_state::parse(s.state().to_string());
    INFO("world " << big << ", " << n << " global batches, end " << end.to_string());
    CHECK(end.consumed >= n);
    for (const std::uint32_t small : {1u, 2u, 3u}) {
      INFO("resumed under world " << small);
      vbucket::batch_sampler t(records, config, rule, {.seed = 11, .world = small});
      t.set_epoch(2);
      t.load_state(end);
      CHECK(t.size() == 0);
      const plan_state again = plan_state::parse(t.state().to_string());
      CHECK(again.consumed == end.consumed);
      vbucket::batch_sampler u(records, config, rule, {.seed = 11, .world = small});
      u.set_epoch(2);
      CHECK_NOTHROW(u.load_state(again));
      CHECK(u.size() == 0);
    }
  }
}

TEST_CASE("batch_sampler: states of another seed, epoch or plan are refused") {
  const std::vector<clip_record> records = make_records(1000);
  const bucket_config config = v2_config();
  vbucket::batch_sampler s(records, config, {.seed = 11, .world = 2, .rank = 0});
  s.set_epoch(3);
  s.advance(2);
  // The state records the world it was saved under and the plan's fingerprint.
  plan_state expected(11, 3, 4, 0);
  expected.world = 2;
  expected.fingerprint = s.fingerprint();
  CHECK(s.state() == expected);
  expected.consumed = 10;
  CHECK(s.state_after(3) == expected);
  CHECK(plan_state::parse(s.state().to_string()) == s.state());

  CHECK_THROWS_WITH_AS(s.load_state(plan_state(11, 2, 4)),
                       doctest::Contains("it is of epoch 2, the sampler is at epoch 3 (call "
                                         "set_epoch(2) first)"),
                       vbucket::error);
  CHECK_THROWS_WITH_AS(s.load_state(plan_state(12, 3, 4)),
                       doctest::Contains("it is of seed 12, this sampler's seed is 11"),
                       vbucket::error);
  CHECK_THROWS_WITH_AS(s.load_state(plan_state(11, 3, 4, 2)), doctest::Contains("balance"),
                       vbucket::error);
  CHECK(s.state().consumed == 4);  // a refused state changes nothing

  // The fingerprint catches a plan of the same seed and epoch made otherwise (another policy).
  vbucket::batch_sampler dropping(records, config,
                                  {.seed = 11, .world = 2, .policy = incomplete_policy::drop});
  dropping.set_epoch(3);
  REQUIRE(dropping.fingerprint() != s.fingerprint());
  CHECK_THROWS_WITH_AS(s.load_state(plan_state(11, 3, 6, 0), dropping.fingerprint()),
                       doctest::Contains("saved with plan fingerprint"), vbucket::error);
  CHECK(s.state().consumed == 4);
  s.load_state(plan_state(11, 3, 6, 0), s.fingerprint());
  CHECK(s.state().consumed == 6);

  // A state that records its fingerprint is refused by any other plan without being told:
  // the plan of the same seed and epoch over metadata with one row changed.
  {
    std::vector<clip_record> edited = records;
    edited[17].rows = edited[17].rows * 3;  // another bucket for this sample
    vbucket::batch_sampler other(edited, config, {.seed = 11, .world = 2, .rank = 0});
    other.set_epoch(3);
    REQUIRE(other.fingerprint() != s.fingerprint());
    const plan_state saved = s.state();
    CHECK_THROWS_WITH_AS(other.load_state(saved), doctest::Contains("saved with plan fingerprint"),
                         vbucket::error);
    CHECK_THROWS_WITH_AS(other.load_state(plan_state::parse(saved.to_string())),
                         doctest::Contains("resuming would replay some samples and skip others"),
                         vbucket::error);
  }

  // Positions past the end of the epoch, and counts that overflow, are errors naming its size.
  {
    const std::uint64_t n = s.num_global_batches();
    plan_state past(11, 3, n + 2, 0);
    past.world = 2;
    CHECK_THROWS_WITH_AS(s.load_state(past), doctest::Contains("is past the end of epoch 3"),
                         vbucket::error);
    CHECK_THROWS_WITH_AS(s.load_state(plan_state(11, 3, ~std::uint64_t{0}, 0)),
                         doctest::Contains((std::to_string(n) + " global batches").c_str()),
                         vbucket::error);
    CHECK_THROWS_WITH_AS((void)s.state_after(~std::uint64_t{0} / 2 + 1),
                         doctest::Contains("overflow"), vbucket::error);
    CHECK_THROWS_WITH_AS((void)s.state_after(n), doctest::Contains("past the end"), vbucket::error);
    plan_state end(11, 3, n + (n % 2), 0);  // the last step's alignment repeat included
    end.world = 2;
    s.load_state(end);
    CHECK(s.size() == 0);
  }

  // set_epoch starts the epoch over.
  s.set_epoch(4);
  CHECK(s.state().consumed == 0);
  CHECK(s.state().epoch == 4);
  s.load_state(plan_state(11, 4, 2));  // a state without a recorded balance group is accepted
  CHECK(s.state().consumed == 2);
}

TEST_CASE("batch_sampler: the fingerprint is FNV-1a of the global sequence, rank-independent") {
  // FNV-1a 64's published test vectors.
  const auto fnv = [](std::string_view s) {
    vbucket::detail::fnv1a64 h;
    h.bytes(s);
    return h.value();
  };
  CHECK(fnv("") == 0xcbf29ce484222325ULL);
  CHECK(fnv("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv("foobar") == 0x85944171f73967e8ULL);
  CHECK(fnv1a_bytes("foobar") == 0x85944171f73967e8ULL);

  const std::vector<clip_record> records = make_records(2000);
  const bucket_config config = v2_config();
  auto fingerprint = [&](std::uint64_t seed, std::uint64_t epoch, std::uint32_t world,
                         std::uint32_t rank) {
    vbucket::batch_sampler s(records, config, {.seed = seed, .world = world, .rank = rank});
    s.set_epoch(epoch);
    s.advance(1);  // the state does not enter it
    return s.fingerprint();
  };
  const std::uint64_t f = fingerprint(11, 3, 1, 0);
  for (const std::uint32_t world : {2u, 4u, 7u})
    for (std::uint32_t r = 0; r < world; ++r) CHECK(fingerprint(11, 3, world, r) == f);
  CHECK(fingerprint(11, 4, 4, 0) != f);
  CHECK(fingerprint(12, 3, 4, 0) != f);

  vbucket::batch_sampler s(records, config, {.seed = 11});
  s.set_epoch(3);
  CHECK(f == reference_fingerprint(s.plan()));
  CHECK(vbucket::plan_fingerprint(s.plan()) == f);

  // Whatever the thread count: a plan of 60000 one-sample batches is hashed in several chunks.
  std::vector<bucket_id> singles;
  for (std::size_t b = 0; b < config.num_buckets(); ++b)
    if (config.frames_of(static_cast<bucket_id>(b)).batch_size == 1)
      singles.push_back(static_cast<bucket_id>(b));
  REQUIRE(singles.size() > 1);
  std::vector<bucket_id> ids(60000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = singles[(i * 7 + i / 5) % singles.size()];
  const epoch_plan many = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), config, {});
  REQUIRE(many.num_batches() == 60000);
  const std::uint64_t reference = reference_fingerprint(many);
  for (const unsigned threads : {1u, 2u, 3u, 8u})
    CHECK(vbucket::plan_fingerprint(many, threads) == reference);
}

TEST_CASE("batch_sampler: lazy per epoch, set_epoch resets, stats and schedule agree") {
  const std::vector<clip_record> records = make_records(1500);
  const bucket_config config = v2_config();
  vbucket::batch_sampler s(records, config, {.seed = 3, .world = 3, .rank = 2});
  CHECK(s.epoch() == 0);
  const std::uint64_t f0 = s.fingerprint();
  s.set_epoch(1);
  const std::size_t n1 = s.size();
  s.advance(2);
  CHECK(s.size() == n1 - 2);
  CHECK((*s.begin()).step == 0);
  CHECK((*s.begin()).position == 2 * 3 + 2);
  s.set_epoch(0);
  CHECK(s.state().consumed == 0);
  CHECK(s.fingerprint() == f0);

  const vbucket::plan_stats st = s.stats();
  CHECK(st.alignment.world == 3);
  CHECK(st.alignment.steps == s.size());
  CHECK(st.total.batches == s.plan().num_batches());
  CHECK(s.schedule().steps() == s.size());
  CHECK(s.batches().size() == s.size());
  CHECK(std::ranges::distance(s.begin(), s.end()) == static_cast<std::ptrdiff_t>(s.size()));
  CHECK(same_batch(s.begin()[1], s.schedule().at(1, 2)));
}

TEST_CASE("batch_sampler: a metadata CSV (as the CLI reads it) gives the records' batches") {
  // The records written as the CLI's META.csv (path first, NaN fps as an empty field), read
  // back with load_meta_csv: a sampler over the file's table equals one over the records.
  std::vector<clip_record> records = make_records(2500, 17);
  for (clip_record& r : records)
    if (r.length == 0) r.length = 5;  // the reader refuses 0 frames (scan marks such rows)
  const std::string path = vbucket_test::unique_temp_path("vbucket_batch_sampler_meta.csv");
  {
    std::ofstream out(path);
    out << "path,num_frames,height,width,fps\n";
    for (const clip_record& r : records) {
      out << r.path << ',' << r.length << ',' << r.rows << ',' << r.cols << ',';
      if (r.rate == r.rate) out << static_cast<int>(r.rate);
      out << '\n';
    }
  }
  const meta_table table = vbucket::load_meta_csv(path);
  std::filesystem::remove(path);
  REQUIRE(table.size() == records.size());
  const bucket_config config = v2_config();
  for (std::uint32_t r = 0; r < 4; ++r) {
    vbucket::batch_sampler from_csv(table, config, vbucket::opensora_v2_rule{.fps_max = 16},
                                    {.seed = 11, .world = 4, .rank = r});
    vbucket::batch_sampler from_records(records, config, vbucket::opensora_v2_rule{.fps_max = 16},
                                        {.seed = 11, .world = 4, .rank = r});
    from_csv.set_epoch(3);
    from_records.set_epoch(3);
    CHECK(from_csv.fingerprint() == from_records.fingerprint());
    check_equal(from_csv, from_records.batches());
  }
}

TEST_CASE("batch_sampler: a streamed metadata CSV gives the table's batches, whatever the chunks") {
  // 9000 rows (some unusable, fractional rates), written once and planned two ways: over the
  // table `load_meta_csv` reads, and over `streamed_meta_csv`, which reads the file in chunks
  // when it plans and keeps only the ids. Chunks of 4500 rows take the compiled Open-Sora 2.0
  // path with a shifted source, small ones the per-sample path.
  std::vector<clip_record> records = make_records(9000, 23);
  const double rates[] = {23.976023976023978, 29.97002997002997, 25.0, 59.94, 7.5, 1e-3};
  const std::string path = vbucket_test::unique_temp_path("vbucket_batch_sampler_streamed.csv");
  {
    std::ofstream out(path);
    out.precision(17);
    out << "path,num_frames,height,width,fps,error\n";
    for (std::size_t i = 0; i < records.size(); ++i) {
      const clip_record& r = records[i];
      if (r.length == 0) {
        out << r.path << ",,,,,unreadable\n";  // kept as an unusable row
        continue;
      }
      out << r.path << ',' << r.length << ',' << r.rows << ',' << r.cols << ',';
      if (r.rate == r.rate) out << (i % 3 == 0 ? rates[i % std::size(rates)] : r.rate);
      out << ",\n";
    }
  }
  const meta_table table = vbucket::load_meta_csv(path);
  REQUIRE(table.size() == records.size());
  const bucket_config v2 = v2_config();
  const bucket_config v12 = v12_config();
  auto check_same = [&](const auto& config, const auto& rule, vbucket::sampler_options o,
                        auto batching) {
    for (const std::size_t chunk : {std::size_t{1} << 20, std::size_t{4500}, std::size_t{7}}) {
      CAPTURE(chunk);
      vbucket::batch_sampler whole(table, config, rule, o, batching);
      vbucket::batch_sampler streamed(vbucket::streamed_meta_csv{path, chunk}, config, rule, o,
                                      batching);
      static_assert(
          std::same_as<typename decltype(streamed)::samples_type, vbucket::streamed_meta_csv>);
      CHECK(streamed.num_samples() == 0);  // not read yet
      for (const std::uint64_t epoch : {0u, 3u}) {
        whole.set_epoch(epoch);
        streamed.set_epoch(epoch);
        CHECK(streamed.assign() == whole.assign());
        CHECK(streamed.fingerprint() == whole.fingerprint());
        CHECK(streamed.num_samples() == table.size());
        if constexpr (decltype(whole)::packed()) {
          REQUIRE(streamed.size() == whole.size());
          for (std::size_t k = 0; k < whole.size(); ++k)
            CHECK(std::ranges::equal(streamed.batches()[k].indices, whole.batches()[k].indices));
        } else {
          check_equal(streamed, whole.batches());
        }
      }
    }
  };
  const vbucket::opensora_v2_rule rule_v2{.fps_max = 16};
  for (const rng_mode mode : {rng_mode::fast, rng_mode::numpy}) {
    CAPTURE(static_cast<int>(mode));
    check_same(v2, rule_v2, {.seed = 5, .world = 3, .rank = 1, .rng = mode},
               vbucket::fixed_batching{});
    check_same(v12, vbucket::opensora_v12_rule{}, {.seed = 6, .world = 2, .rank = 0, .rng = mode},
               vbucket::fixed_batching{});
  }
  check_same(v2, rule_v2,
             {.seed = 8, .world = 2, .rank = 1, .token_budget = vbucket::largest_batch_cost(v2)},
             vbucket::packed_batching{});
  std::filesystem::remove(path);

  // A bad row after whole chunks: the error names the file and row when the epoch is planned.
  const std::string bad = vbucket_test::unique_temp_path("vbucket_batch_sampler_bad.csv");
  {
    std::ofstream out(bad);
    out << "num_frames,height,width,fps\n";
    for (int i = 0; i < 20; ++i) out << 30 + i << ",360,640,30\n";
    out << "12,360,-640,30\n";
  }
  vbucket::batch_sampler broken(vbucket::streamed_meta_csv{bad, 8}, v2, rule_v2, {.seed = 1});
  CHECK_THROWS_WITH_AS((void)broken.fingerprint(), doctest::Contains("row 21"), vbucket::error);
  CHECK_NOTHROW(vbucket::streamed_meta_csv{bad}.check());  // check() reads the header only
  std::filesystem::remove(bad);
  vbucket::batch_sampler missing(vbucket::streamed_meta_csv{bad}, v2, rule_v2, {.seed = 1});
  CHECK_THROWS_WITH_AS((void)missing.size(), doctest::Contains("cannot open"), vbucket::error);
  CHECK_THROWS_WITH_AS(vbucket::streamed_meta_csv{bad}.check(), doctest::Contains("cannot open"),
                       vbucket::error);
  {
    std::ofstream out(bad);
    out << "num_frames,height,fps\n30,360,30\n";
  }
  CHECK_THROWS_WITH_AS(vbucket::streamed_meta_csv{bad}.check(), doctest::Contains("\"width\""),
                       vbucket::error);
  std::filesystem::remove(bad);
}

/// Whether a sampler type has the packed accessors (`packing()`, `packed_batches()`).
template <class S>
constexpr bool has_packing = requires(const S& s) {
  s.packing();
  s.packed_batches();
};

TEST_CASE("batch_sampler: packed batching equals the hand-wired packed path, resumes, refuses") {
  const std::vector<clip_record> records = make_records(3000);
  const bucket_config config = v2_config();
  const vbucket::opensora_v2_rule rule{.fps_max = 16};
  const double budget = vbucket::largest_batch_cost(config);
  for (const std::uint64_t epoch : {0u, 2u}) {
    const std::vector<bucket_id> ids =
        vbucket::assign_range(config, records, rule, vbucket::fast_source(7, epoch));
    const vbucket::packed_plan plan = vbucket::make_packed_plan(
        std::span<const bucket_id>(ids), config,
        {.seed = 7, .epoch = epoch, .token_budget = budget, .balance_group = 4});
    for (const std::uint32_t world : {1u, 3u, 4u}) {
      const vbucket::packed_schedule schedule = plan.deal(world);
      for (std::uint32_t r = 0; r < world; ++r) {
        vbucket::sampler_options o{.seed = 7, .world = world, .rank = r, .rng = rng_mode::fast};
        o.balance_group = 4;
        o.token_budget = budget;
        vbucket::batch_sampler s(records, config, rule, o, vbucket::packed_batching{});
        static_assert(
            std::same_as<decltype(s), vbucket::packing_sampler<std::vector<clip_record>>>);
        s.set_epoch(epoch);
        REQUIRE(s.packed());
        REQUIRE(s.options().batching == vbucket::batching_mode::packed);
        REQUIRE(s.size() == schedule.steps());
        REQUIRE(s.packed_batches().size() == schedule.steps());
        std::uint64_t k = 0;
        for (const vbucket::packed_batch& b : s) {  // a range-for yields packed batches
          const vbucket::packed_batch want = schedule.at(k++, r);
          REQUIRE(std::ranges::equal(b.indices, want.indices));
          REQUIRE(std::ranges::equal(b.buckets, want.buckets));
        }
        CHECK(s.fingerprint() == vbucket::plan_fingerprint(plan));
        // Resume under another world size from a state saved here.
        s.advance(1);
        const plan_state state = s.state();
        vbucket::sampler_options o2 = o;
        o2.world = 2;
        o2.rank = 1;
        vbucket::packing_sampler<std::vector<clip_record>> t(records, config, rule, o2);
        t.set_epoch(epoch);
        t.load_state(plan_state::parse(state.to_string()), s.fingerprint());
        const auto rest = t.packed_batches();
        if (!rest.empty()) CHECK(rest[0].position == state.consumed + 1);
        // A packing sampler's statistics are the packed ones of its schedule.
        CHECK(s.stats().batches == plan.num_batches());
        CHECK(&s.packing() == &s.plan());
      }
    }
  }
  vbucket::batch_sampler fixed(records, config, rule, {.seed = 7});
  // The packed accessors of a fixed sampler do not compile (tests/compile_fail too).
  static_assert(!has_packing<decltype(fixed)>);
  static_assert(has_packing<vbucket::packing_sampler<std::vector<clip_record>>>);
  static_assert(std::same_as<decltype(*fixed.begin()), vbucket::batch>);
  vbucket::sampler_options bad{.seed = 7};
  CHECK_THROWS_WITH_AS(
      vbucket::batch_sampler(records, config, rule, bad, vbucket::packed_batching{}),
      doctest::Contains("token budget"), vbucket::error);
  // .batching = packed on a fixed sampler type: refused, naming the packing type.
  vbucket::sampler_options packed_field{
      .seed = 7, .batching = vbucket::batching_mode::packed, .token_budget = budget};
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, config, rule, packed_field),
                       doctest::Contains("packed_batching"), vbucket::error);
  vbucket::sampler_options fixed_with_budget{.seed = 7};
  fixed_with_budget.token_budget = budget;
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(records, config, rule, fixed_with_budget),
                       doctest::Contains("apply to packed batching"), vbucket::error);
  // The packed and fixed fingerprints of one epoch differ.
  bad.token_budget = budget;
  vbucket::batch_sampler packed(records, config, rule, bad, vbucket::packed_batching{});
  CHECK(packed.fingerprint() != fixed.fingerprint());
}
