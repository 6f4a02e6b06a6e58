/// Tests of per-sample costs through the layers a user calls: `sampler_options::sample_costs`
/// (the sampler's plan is `make_epoch_plan(ids, config, options, cost, costs)`, its state
/// records their hash, a resume under other costs is refused), `read_sample_costs` (the file
/// format and its errors) and the run spec's `sample_costs` field (`make_any_sampler(spec)`).
#include <doctest/doctest.h>

#include <algorithm>   // std::ranges::equal
#include <cmath>       // std::signbit
#include <cstdint>     // std::uint32_t, std::uint64_t
#include <filesystem>  // std::filesystem::remove
#include <fstream>     // std::ofstream
#include <limits>      // quiet_NaN
#include <memory>      // std::make_shared, std::shared_ptr, std::make_unique
#include <span>        // std::span
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/base/sample_costs.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/run/run_spec.hpp"
#include "vbucket/sample/any_sampler.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/configs.hpp"
#include "vbucket_test/temp_files.hpp"  // unique_temp_path

namespace {

using vbucket::bucket_config;
using vbucket::meta_table;
using vbucket::plan_state;

/// SplitMix64 steps for test data.
struct cost_rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

/// n videos of common sizes and lengths at 24–30 fps.
meta_table make_table(std::size_t n) {
  static constexpr std::int32_t sizes[][2] = {{720, 1280}, {1080, 1920}, {480, 640},
                                              {360, 640},  {512, 512},   {1280, 720}};
  cost_rng g{77};
  meta_table t;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& hw = sizes[g.below(std::size(sizes))];
    t.push_back({static_cast<std::int32_t>(60 + g.below(240)), hw[0], hw[1],
                 g.below(2) == 0 ? 24.0f : 30.0f});
  }
  return t;
}

/// Skewed costs: a tenth of the samples cost 1000–1999 (a long GOP), the rest 0–9.
std::shared_ptr<const std::vector<double>> skewed(std::size_t n, std::uint64_t seed) {
  cost_rng g{seed};
  std::vector<double> c(n);
  for (double& v : c)
    v = g.below(10) == 0 ? 1000.0 + static_cast<double>(g.below(1000))
                         : static_cast<double>(g.below(10));
  return std::make_shared<const std::vector<double>>(std::move(c));
}

std::vector<std::vector<std::uint32_t>> batches_of(const auto& sampler) {
  std::vector<std::vector<std::uint32_t>> out;
  for (const vbucket::batch& b : sampler) out.emplace_back(b.indices.begin(), b.indices.end());
  return out;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = vbucket_test::unique_temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("batch_sampler sample costs: the plan of make_epoch_plan with the same costs") {
  const meta_table table = make_table(4000);
  const bucket_config config = vbucket_test::opensora_v2_config();
  const auto costs = skewed(table.size(), 5);
  for (const std::uint32_t group : {0u, 24u}) {
    CAPTURE(group);
    const vbucket::sampler_options base{
        .seed = 9, .world = 4, .rank = 1, .rng = vbucket::rng_mode::fast, .balance_group = group};
    vbucket::sampler_options with = base;
    with.sample_costs = *costs;
    vbucket::batch_sampler plain(table, config, vbucket::opensora_v2_rule{}, base);
    vbucket::batch_sampler costed(table, config, vbucket::opensora_v2_rule{}, with);
    plain.set_epoch(2);
    costed.set_epoch(2);
    // The hand-wired plan: the sampler's assignment, then the planner with the costs.
    const std::vector<vbucket::bucket_id> ids = plain.assign();
    vbucket::plan_options o;
    o.seed = 9;
    o.epoch = 2;
    o.balance_group = group;
    const vbucket::epoch_plan expected =
        vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, o,
                                 vbucket::latent_tokens_cost{}, std::span<const double>(*costs));
    const vbucket::epoch_plan& got = costed.plan();
    REQUIRE(got.num_batches() == expected.num_batches());
    for (std::uint64_t p = 0; p < got.num_batches(); ++p)
      REQUIRE(std::ranges::equal(got.global_batch(p).indices, expected.global_batch(p).indices));
    CHECK(costed.fingerprint() == vbucket::plan_fingerprint(expected));
    CHECK(got.sample_cost_hash() == vbucket::sample_costs_hash(*costs));
    // The state records the costs' hash; without costs it records none.
    CHECK(costed.state().sample_cost == vbucket::sample_costs_hash(*costs));
    CHECK_FALSE(plain.state().sample_cost);
    CHECK(plain.plan().sample_cost_hash() == std::nullopt);
    if (group != 0) {
      // With balance, the costs reorder the batches: another fingerprint than without.
      CHECK(costed.fingerprint() != plain.fingerprint());
      CHECK(batches_of(costed) != batches_of(plain));
    }
  }
}

TEST_CASE("batch_sampler sample costs: resume under the same costs, refused under others") {
  const meta_table table = make_table(3000);
  const bucket_config config = vbucket_test::opensora_v2_config();
  const auto costs = skewed(table.size(), 6);
  auto other = std::make_shared<std::vector<double>>(*costs);
  (*other)[17] += 1.0;
  vbucket::sampler_options o{.seed = 3, .world = 2, .rank = 0, .balance_group = 8};
  o.sample_costs = *costs;
  vbucket::batch_sampler a(table, config, vbucket::opensora_v2_rule{}, o);
  a.set_epoch(1);
  const std::vector<std::vector<std::uint32_t>> all = batches_of(a);
  REQUIRE(all.size() > 5);
  a.advance(3);
  const plan_state saved = a.state();
  REQUIRE(saved.sample_cost);
  CHECK(plan_state::parse(saved.to_string()) == saved);

  // The same costs (another copy), another world: the global batches not yet consumed.
  vbucket::sampler_options same = o;
  same.world = 3;
  const std::vector<double> copy = *costs;
  same.sample_costs = copy;
  vbucket::batch_sampler b(table, config, vbucket::opensora_v2_rule{}, same);
  b.set_epoch(1);
  b.load_state(saved);
  CHECK(b.schedule().consumed() == 6);
  CHECK(std::ranges::equal(b.plan().global_batch(6).indices, a.plan().global_batch(6).indices));

  // One cost changed: refused with the library's message; no costs: refused too.
  vbucket::sampler_options changed = o;
  changed.sample_costs = *other;
  vbucket::batch_sampler c(table, config, vbucket::opensora_v2_rule{}, changed);
  c.set_epoch(1);
  CHECK_THROWS_WITH_AS(c.load_state(saved), doctest::Contains("per-sample costs of hash"),
                       vbucket::error);
  vbucket::sampler_options none = o;
  none.sample_costs = {};
  vbucket::batch_sampler d(table, config, vbucket::opensora_v2_rule{}, none);
  d.set_epoch(1);
  CHECK_THROWS_WITH_AS(d.load_state(saved), doctest::Contains("has no per-sample costs"),
                       vbucket::error);
  // And a state saved without costs is refused by a sampler with them.
  d.advance(1);
  CHECK_THROWS_AS(c.load_state(d.state()), vbucket::error);
}

TEST_CASE("batch_sampler sample costs: bad costs, wrong count and packed batching are refused") {
  const meta_table table = make_table(500);
  const bucket_config config = vbucket_test::opensora_v2_config();
  vbucket::sampler_options o{.seed = 1};
  const std::vector<double> short_costs(499, 1.0);
  o.sample_costs = short_costs;
  o.sample_costs_name = "costs.txt";
  vbucket::batch_sampler s(table, config, vbucket::opensora_v2_rule{}, o);
  CHECK_THROWS_WITH_AS((void)s.plan(), doctest::Contains("costs.txt holds 499"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)s.plan(), doctest::Contains("500 samples"), vbucket::error);

  std::vector<double> bad(500, 1.0);
  bad[42] = -1.0;
  o.sample_costs = bad;
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(table, config, vbucket::opensora_v2_rule{}, o),
                       doctest::Contains("the cost of sample 42"), vbucket::error);
  bad[42] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(vbucket::batch_sampler(table, config, vbucket::opensora_v2_rule{}, o),
                  vbucket::error);

  const std::vector<double> ones(500, 1.0);
  o.sample_costs = ones;
  o.token_budget = 1e6;
  CHECK_THROWS_WITH_AS(vbucket::batch_sampler(table, config, vbucket::opensora_v2_rule{}, o,
                                              vbucket::packed_batching{}),
                       doctest::Contains("fixed batching only"), vbucket::error);
  o.batching = vbucket::batching_mode::packed;
  CHECK_THROWS_WITH_AS(
      (void)vbucket::make_any_sampler(std::make_shared<const meta_table>(table),
                                      std::make_shared<const bucket_config>(config),
                                      vbucket::opensora_v2_rule{}, o),
      doctest::Contains("fixed batching only"), vbucket::error);
}

TEST_CASE("batch_sampler sample costs: the sampler keeps its own copy of the costs") {
  const meta_table table = make_table(2000);
  const bucket_config config = vbucket_test::opensora_v2_config();
  const auto costs = skewed(table.size(), 12);
  std::vector<double> mine = *costs;
  vbucket::sampler_options o{.seed = 2, .world = 2, .balance_group = 8};
  o.sample_costs = mine;
  std::string name = "named.txt";  // the caller's name: copied too
  o.sample_costs_name = name;
  vbucket::batch_sampler reference(table, config, vbucket::opensora_v2_rule{}, o);
  const std::uint64_t fp = reference.fingerprint();
  auto s = std::make_unique<vbucket::batch_sampler<meta_table>>(table, config,
                                                                vbucket::opensora_v2_rule{}, o);
  for (double& c : mine) c = 0.0;  // the caller's costs change after the sampler is made
  std::vector<double>().swap(mine);
  name.assign(64, 'x');  // and so does the name (past the small-string buffer)
  std::string().swap(name);
  vbucket::batch_sampler moved = std::move(*s);
  s.reset();
  CHECK(moved.fingerprint() == fp);
  CHECK(moved.options().sample_costs.size() == table.size());
  CHECK(moved.options().sample_costs_name == "named.txt");
  CHECK(vbucket::sample_costs_hash(moved.options().sample_costs) ==
        vbucket::sample_costs_hash(*costs));
  const auto copy = moved;
  CHECK(copy.state() == moved.state());
}

TEST_CASE("read_sample_costs: one number a line, a header, errors name the file and line") {
  CHECK(vbucket::parse_sample_costs("1\n2.5\n0\n", "f") == std::vector<double>{1.0, 2.5, 0.0});
  CHECK(vbucket::parse_sample_costs("cost\r\n 3 \r\n4e-3", "f") == std::vector<double>{3, 4e-3});
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("cost\n", "e.txt"),
                       doctest::Contains("e.txt: holds no per-sample costs"), vbucket::error);
  const std::vector<double> z = vbucket::parse_sample_costs("-0\n", "f");
  REQUIRE(z.size() == 1);
  CHECK_FALSE(std::signbit(z[0]));
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1\nabc\n", "c.txt"),
                       doctest::Contains("c.txt:2: expected one per-sample cost"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1\n2\nnan\n", "c.txt"),
                       doctest::Contains("c.txt:3: a per-sample cost must be a finite number"),
                       vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("nan\n", "c.txt"),
                       doctest::Contains("c.txt:1: a per-sample cost"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1\n-2\n", "c.txt"),
                       doctest::Contains("c.txt:2:"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1\ninf\n", "c.txt"),
                       doctest::Contains("c.txt:2:"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1\n\n2\n", "c.txt"),
                       doctest::Contains("c.txt:2:"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::parse_sample_costs("1,2\n", "c.txt"),
                       doctest::Contains("one column only"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)vbucket::read_sample_costs("/nonexistent/costs.txt"),
                       doctest::Contains("/nonexistent/costs.txt: cannot open"), vbucket::error);
  const std::string path = write_file("vbucket_n5_costs.txt", "cost\n1\n2\n");
  CHECK(vbucket::read_sample_costs(path) == std::vector<double>{1.0, 2.0});
  std::filesystem::remove(path);
}

TEST_CASE("run_spec sample_costs: read by make_any_sampler, named in errors, fixed only") {
  const meta_table table = make_table(800);
  const auto config = std::make_shared<const bucket_config>(vbucket_test::opensora_v2_config());
  const auto costs = skewed(table.size(), 8);
  std::string text = "cost\n";
  for (const double c : *costs) text += std::to_string(static_cast<long long>(c)) + "\n";
  const std::string path = write_file("vbucket_n5_spec_costs.txt", text);
  const auto samples = std::make_shared<const meta_table>(table);

  vbucket::run_spec spec = vbucket::run_spec::from_map(
      {{"seed", "4"}, {"world", "2"}, {"balance_group", "16"}, {"sample_costs", path}});
  CHECK(spec.to_map().at("sample_costs") == path);
  CHECK(vbucket::run_spec{}.to_map().count("sample_costs") == 0);
  auto any = vbucket::make_any_sampler(samples, config, spec);
  any->set_epoch(0);
  vbucket::sampler_options o = spec.to_sampler_options();
  o.sample_costs = *costs;  // the integers written above are the costs exactly
  vbucket::batch_sampler direct(table, *config, vbucket::opensora_v2_rule{}, o);
  CHECK(any->fingerprint() == direct.fingerprint());
  CHECK(any->state().sample_cost == vbucket::sample_costs_hash(*costs));

  vbucket::run_spec packed = spec;
  packed.batching = vbucket::batching_mode::packed;
  packed.token_budget = 1e6;
  CHECK_THROWS_WITH_AS(packed.validate(), doctest::Contains("sample_costs applies to batching"),
                       vbucket::error);

  const std::string short_path = write_file("vbucket_n5_short_costs.txt", "1\n2\n");
  spec.sample_costs = short_path;
  auto wrong = vbucket::make_any_sampler(samples, config, spec);
  CHECK_THROWS_WITH_AS((void)wrong->fingerprint(),
                       doctest::Contains((short_path + " holds 2").c_str()), vbucket::error);
  const std::string bad_path = write_file("vbucket_n5_bad_costs.txt", "1\nx\n");
  spec.sample_costs = bad_path;
  CHECK_THROWS_WITH_AS((void)vbucket::make_any_sampler(samples, config, spec),
                       doctest::Contains((bad_path + ":2:").c_str()), vbucket::error);
  for (const std::string& p : {path, short_path, bad_path}) std::filesystem::remove(p);
}
