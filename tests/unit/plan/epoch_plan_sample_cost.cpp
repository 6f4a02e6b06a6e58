/// Tests of the epoch planner with per-sample costs (`make_epoch_plan(..., cost, sample_cost)`):
/// a batch costs its bucket's cost + Σ its samples' costs, step balance sorts batches by that,
/// the plan and its resume states record the costs' hash, and without costs (or with all costs
/// 0) the plan is the one made without them.
#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal, std::max, std::min
#include <cstdint>    // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>     // quiet_NaN, infinity
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"
#include "vbucket/sample/batch_sampler.hpp"  // plan_fingerprint
#include "vbucket_test/random_plans.hpp"

using namespace vbucket_test;

namespace {

/// A batch cost of 0: the loads are the per-sample costs alone.
constexpr auto zero_cost = [](const bucket_config&, bucket_id, std::int64_t) { return 0.0; };

/// Skewed per-sample costs: a tenth of the samples cost 50–99, the rest 1–2.
std::vector<double> skewed_costs(test_rng& g, std::size_t n) {
  std::vector<double> c(n);
  for (double& v : c)
    v = g.below(10) == 0 ? 50.0 + static_cast<double>(g.below(50))
                         : 1.0 + static_cast<double>(g.below(100)) / 100.0;
  return c;
}

/// Σ_steps max / Σ_steps mean of the per-rank loads, a rank's load being Σ cost of its batch's
/// samples, computed from the dealt batches alone; and the largest and smallest batch load.
struct loads {
  double sum_max_over_sum_mean = 0.0;
  double sum_mean = 0.0;
  double largest = 0.0;
  double smallest = 0.0;
};
loads step_loads(const epoch_schedule& s, const std::vector<double>& cost) {
  loads out;
  out.smallest = std::numeric_limits<double>::infinity();
  double sum_max = 0.0;
  for (std::uint64_t k = 0; k < s.steps(); ++k) {
    double mx = 0.0, sum = 0.0;
    for (std::uint32_t r = 0; r < s.world_size(); ++r) {
      double load = 0.0;
      for (const std::uint32_t i : s.at(k, r).indices) load += cost[i];
      mx = std::max(mx, load);
      sum += load;
      out.largest = std::max(out.largest, load);
      out.smallest = std::min(out.smallest, load);
    }
    sum_max += mx;
    out.sum_mean += sum / static_cast<double>(s.world_size());
  }
  out.sum_max_over_sum_mean = sum_max / out.sum_mean;
  return out;
}

}  // namespace

TEST_CASE("epoch_plan sample cost: step balance by batch cost evens out a skewed corpus") {
  const bucket_config c = small_config(4, 2, 1);
  test_rng g{3301};
  // 8192 samples in a bucket of batch size 4: 2048 batches, a whole number of 8-rank steps.
  bucket_id four = 0;
  while (c.batch_size(four) != 4) ++four;
  const std::vector<bucket_id> ids(8192, four);
  const std::vector<double> cost = skewed_costs(g, ids.size());
  constexpr std::uint32_t world = 8;
  for (const std::uint32_t group : {world, vbucket::default_balance_group}) {
    CAPTURE(group);
    plan_options o{11, 0};
    o.balance_group = group;
    const epoch_plan by_bucket =
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o, zero_cost);
    const epoch_plan by_batch =
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o, zero_cost, cost);
    REQUIRE(by_batch.num_batches() == 2048);
    const loads before = step_loads(by_bucket.deal(world), cost);
    const loads after = step_loads(by_batch.deal(world), cost);
    // The case is skewed: without per-sample costs a step is far from even.
    CHECK(before.sum_max_over_sum_mean > 1.5);
    // With them every step (W divides G and the batch count) holds W consecutive batches of the
    // cost-sorted order, so Σ_steps (max − min) ≤ largest − smallest batch load (the steps are
    // disjoint stretches of one sorted sequence), and Σ max − Σ mean is at most that.
    const double bound = 1.0 + (after.largest - after.smallest) / after.sum_mean;
    CHECK(after.sum_max_over_sum_mean <= bound + 1e-12);
    CHECK(after.sum_max_over_sum_mean < 1.1);
    CHECK(after.sum_mean == doctest::Approx(before.sum_mean));  // the same work
    // The plan's batch costs are the sums, and step_balance reports the same figure.
    const epoch_schedule s = by_batch.deal(world);
    for (std::uint64_t p = 0; p < by_batch.num_batches(); p += 97) {
      double sum = 0.0;
      for (const std::uint32_t i : by_batch.global_batch(p).indices) sum += cost[i];
      CHECK(by_batch.cost_of(by_batch.ref_at(p)) == doctest::Approx(sum));
    }
    CHECK(vbucket::step_balance(s).max_over_mean == doctest::Approx(after.sum_max_over_sum_mean));
    check_plan(ids, c, by_batch, world, false);
  }
}

TEST_CASE("epoch_plan sample cost: guarantees and exact resume over random configs") {
  test_rng g{4402};
  for (int iteration = 0; iteration < 40; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids =
        random_ids(g, c, static_cast<std::size_t>(g.below(iteration < 30 ? 1500 : 20000)));
    const std::vector<double> cost = skewed_costs(g, ids.size());
    plan_options o;
    o.seed = g.next();
    o.epoch = g.below(3);
    o.policy = random_policy(g);
    const std::uint32_t world = static_cast<std::uint32_t>(1 + g.below(12));
    o.balance_group = iteration % 3 == 2 ? 0 : iteration % 3 == 0 ? world : 960;
    const bool drop_last = g.chance(0.3);
    CAPTURE(iteration);
    CAPTURE(ids.size());
    CAPTURE(world);
    CAPTURE(o.balance_group);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o,
                                                     vbucket::latent_tokens_cost{}, cost);
    REQUIRE(plan.sample_cost_hash() == vbucket::sample_costs_hash(cost));
    check_plan(ids, c, plan, world, drop_last);
    check_plan(ids, c, plan, random_world(g), drop_last);
    const std::uint64_t steps = plan.deal(world, 0, drop_last).steps();
    for (std::uint64_t k : {std::uint64_t{0}, steps / 3, steps})
      for (std::uint32_t w2 : {world, std::uint32_t{1}, std::uint32_t{world + 5}})
        check_resume(plan, world, k, w2, drop_last);
    // Grouped first, the same plan; and on any number of threads.
    const vbucket::bucket_groups groups =
        vbucket::group_by_bucket(std::span<const bucket_id>(ids), c.num_buckets());
    const epoch_plan grouped =
        vbucket::make_epoch_plan(groups, c, o, vbucket::latent_tokens_cost{}, cost);
    o.threads = 1 + static_cast<unsigned>(iteration % 3);
    const epoch_plan threaded = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o,
                                                         vbucket::latent_tokens_cost{}, cost);
    REQUIRE(std::ranges::equal(plan.slots(), grouped.slots()));
    REQUIRE(std::ranges::equal(plan.slots(), threaded.slots()));
    for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
      REQUIRE(plan.ref_at(p) == grouped.ref_at(p));
      REQUIRE(plan.ref_at(p) == threaded.ref_at(p));
    }
  }
}

TEST_CASE("epoch_plan sample cost: costs of 0 give the plan made without them") {
  test_rng g{5503};
  for (int iteration = 0; iteration < 12; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, 500 + g.below(5000));
    plan_options o;
    o.seed = g.next();
    o.policy = random_policy(g);
    o.balance_group = iteration % 2 == 0 ? 960 : static_cast<std::uint32_t>(1 + g.below(16));
    CAPTURE(iteration);
    const epoch_plan plain = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const std::vector<double> zeros(ids.size(), 0.0);
    const epoch_plan costed = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o,
                                                       vbucket::latent_tokens_cost{}, zeros);
    CHECK(!plain.sample_cost_hash());
    CHECK(costed.sample_cost_hash() == vbucket::sample_costs_hash(zeros));
    CHECK(vbucket::plan_fingerprint(plain) == vbucket::plan_fingerprint(costed));
    for (std::uint64_t p = 0; p < plain.num_batches(); ++p) {
      REQUIRE(plain.ref_at(p) == costed.ref_at(p));
      REQUIRE(plain.cost_of(plain.ref_at(p)) == costed.cost_of(costed.ref_at(p)));
    }
    // A plan made without costs records none: its state reads as before.
    const vbucket::plan_state s = plain.deal(3).state_after(1);
    CHECK(!s.sample_cost);
    CHECK(s.to_string().find("sample_cost") == std::string::npos);
  }
  // Without balance, costs do not change the global order (only which batches repeat).
  const bucket_config c = small_config(4, 2, 1);
  std::vector<bucket_id> ids(600);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % 3);
  const std::vector<double> cost = skewed_costs(g, ids.size());
  const epoch_plan plain = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {9, 1});
  const epoch_plan costed = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {9, 1},
                                                     vbucket::latent_tokens_cost{}, cost);
  CHECK(vbucket::plan_fingerprint(plain) == vbucket::plan_fingerprint(costed));
}

TEST_CASE("epoch_plan sample cost: the resume state records the costs; other costs are refused") {
  const bucket_config c = small_config(4, 2, 1);
  test_rng g{6604};
  std::vector<bucket_id> ids(900);
  for (auto& id : ids) id = static_cast<bucket_id>(g.below(3));
  const std::vector<double> cost = skewed_costs(g, ids.size());
  std::vector<double> other = cost;
  other[17] += 1.0;
  plan_options o{42, 1};
  o.balance_group = 4;
  const auto plan_with = [&](const std::vector<double>* costs) {
    return costs == nullptr ? vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o)
                            : vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o,
                                                       vbucket::latent_tokens_cost{}, *costs);
  };
  const epoch_plan first_plan = plan_with(&cost);
  const epoch_schedule first = first_plan.deal(4);
  REQUIRE(first.steps() > 12);
  const vbucket::plan_state state = first.state_after(10);
  REQUIRE(state.sample_cost == vbucket::sample_costs_hash(cost));
  CHECK(state.sample_cost != vbucket::sample_costs_hash(other));
  const std::string saved = state.to_string();
  CHECK(saved.find(" sample_cost=" + vbucket::plan_state::hex(*state.sample_cost)) !=
        std::string::npos);
  CHECK(vbucket::plan_state::parse(saved) == state);
  CHECK(state.advanced(2, 4).sample_cost == state.sample_cost);

  // Other costs, or none: refused, naming the costs.
  CHECK_THROWS_WITH_AS((void)plan_with(&other).deal(2, state),
                       doctest::Contains("per-sample costs of hash"), vbucket::error);
  CHECK_THROWS_WITH_AS((void)plan_with(nullptr).deal(2, state),
                       doctest::Contains("has no per-sample costs"), vbucket::error);
  // A state of a plan without costs does not resume a plan with them.
  const vbucket::plan_state plain = plan_with(nullptr).deal(4).state_after(3);
  CHECK_THROWS_WITH_AS((void)plan_with(&cost).deal(4, plain),
                       doctest::Contains("without per-sample costs"), vbucket::error);
  // Nothing recorded (three numbers): not checked.
  CHECK(plan_with(&cost).deal(2, vbucket::plan_state{42, 1, 12}).consumed() == 12);

  // The same costs: the rest on 2 ranks covers every sample once with the first 10 steps.
  const epoch_plan again = plan_with(&cost);
  const epoch_schedule rest = again.deal(2, vbucket::plan_state::parse(saved));
  check_resumed_covers_once(ids, first_plan, first, 10, rest);
  // And the costs change the order (so recording them matters).
  const std::uint64_t with = vbucket::plan_fingerprint(plan_with(&cost));
  CHECK(with != vbucket::plan_fingerprint(plan_with(nullptr)));
}

TEST_CASE("epoch_plan sample cost: bad costs are named") {
  const bucket_config c = small_config(4, 2, 1);
  const std::vector<bucket_id> ids(20, 1);
  std::vector<double> cost(20, 1.0);
  const auto plan = [&](std::span<const double> costs) {
    return vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {}, zero_cost, costs);
  };
  CHECK_THROWS_WITH_AS((void)plan(std::span<const double>(cost).first(19)),
                       doctest::Contains("20 bucket ids but 19 per-sample costs"), vbucket::error);
  cost[5] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS((void)plan(cost), doctest::Contains("the cost of sample 5"), vbucket::error);
  cost[5] = -1.0;
  CHECK_THROWS_WITH_AS((void)plan(cost), doctest::Contains("the cost of sample 5"), vbucket::error);
  cost[5] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS((void)plan(cost), doctest::Contains("the cost of sample 5"), vbucket::error);
  cost[5] = 0.0;
  const vbucket::bucket_groups groups =
      vbucket::group_by_bucket(std::span<const bucket_id>(ids), c.num_buckets());
  CHECK_THROWS_WITH_AS((void)vbucket::make_epoch_plan(groups, c, {}, zero_cost,
                                                      std::span<const double>(cost).first(10)),
                       doctest::Contains("sample 10 is grouped but there are 10 per-sample costs"),
                       vbucket::error);
  // −0 hashes as +0 (the same plan).
  std::vector<double> negzero(20, 0.0);
  negzero[3] = -0.0;
  CHECK(vbucket::sample_costs_hash(negzero) == vbucket::sample_costs_hash(std::vector<double>(20)));
  CHECK(vbucket::sample_costs_hash(std::vector<double>(20)) !=
        vbucket::sample_costs_hash(std::vector<double>(21)));
}

TEST_CASE(
    "epoch_plan sample cost: a packed plan and a sampler, which take no costs, refuse a "
    "state with them") {
  const bucket_config c = small_config(4, 2, 1);
  std::vector<bucket_id> ids(300);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<bucket_id>(i % 3);
  const std::vector<double> cost(ids.size(), 2.0);
  plan_options o{5, 0};
  const vbucket::plan_state with_costs =
      vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o, vbucket::latent_tokens_cost{},
                               cost)
          .deal(2)
          .state_after(1);
  REQUIRE(with_costs.sample_cost);
  o.token_budget = 2.0 * vbucket::largest_batch_cost(c);
  vbucket::plan_state packed_state = with_costs;
  packed_state.token_budget = o.token_budget;
  const vbucket::packed_plan packed =
      vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
  CHECK_THROWS_WITH_AS((void)packed.deal(2, packed_state),
                       doctest::Contains("has no per-sample costs"), vbucket::error);
  packed_state.sample_cost.reset();
  CHECK(packed.deal(2, packed_state).consumed() == 2);

  vbucket::meta_table table;
  for (int i = 0; i < 200; ++i) table.push_back({100 + i, 720, 1280, 30.0});
  vbucket::batch_sampler sampler(table, c, vbucket::opensora_v2_rule{}, {.seed = 5});
  vbucket::plan_state s = sampler.state();
  s.sample_cost = 0x1234;
  CHECK_THROWS_WITH_AS(sampler.load_state(s), doctest::Contains("has no per-sample costs"),
                       vbucket::error);
}
