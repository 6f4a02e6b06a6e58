/// Tests of vbucket/plan/packed_plan.hpp: the packed planner's guarantees as property tests over
/// random configs, dataset sizes (0…10^5), world sizes (1…64) and budgets (1×…100× the
/// largest sample); first-fit decreasing; exact resume with the same and another world size;
/// oversized samples; mixed-shape Open-Sora strings; fill ratio and step balance.

#include <doctest/doctest.h>

#include <algorithm>  // std::count, std::min
#include <cstdint>    // std::uint32_t, std::uint64_t
#include <limits>     // std::numeric_limits
#include <set>        // std::set
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/rules.hpp"
#include "vbucket/plan/packed_plan.hpp"

#include "vbucket_test/random_plans.hpp"

namespace {

using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::bucket_spec;
using vbucket::packed_options;
using vbucket::packed_plan;
using vbucket::packed_schedule;
using vbucket_test::random_config;
using vbucket_test::random_size;
using vbucket_test::test_rng;

/// Bucket ids for n samples: a popular bucket, a tail, some without a bucket or invalid.
std::vector<bucket_id> packed_random_ids(test_rng& g, const bucket_config& c, std::size_t n) {
  const std::size_t nb = c.num_buckets();
  std::vector<bucket_id> active;
  const std::uint64_t nactive = 1 + g.below(std::min<std::uint64_t>(nb, 40));
  for (std::uint64_t a = 0; a < nactive; ++a) active.push_back(static_cast<bucket_id>(g.below(nb)));
  std::vector<bucket_id> ids(n);
  for (auto& id : ids) {
    const std::uint64_t u = g.below(100);
    id = u < 5    ? vbucket::no_bucket
         : u < 6  ? vbucket::invalid_sample
         : u < 40 ? active[0]
                  : active[g.below(active.size())];
  }
  return ids;
}

double sample_cost(const bucket_config& c, bucket_id b) {
  const auto& r = c.ratio_of(b);
  return vbucket::latent_tokens(c.frames_of(b).frames, r.height, r.width);
}

/// The largest cost of a sample that the plan may pack (enabled bucket with samples).
double largest_sample(const bucket_config& c, const std::vector<bucket_id>& ids) {
  double m = 0.0;
  for (bucket_id b : ids)
    if (b >= 0 && c.enabled(b)) m = std::max(m, sample_cost(c, b));
  return m;
}

/// Every guarantee of a packed plan dealt to `world` ranks from position 0.
void check_packed(const std::vector<bucket_id>& ids, const bucket_config& c,
                  const packed_plan& plan, std::uint32_t world, bool drop_last) {
  const double budget = plan.token_budget();
  const double tol = 1e-9 * budget;
  const std::uint64_t n = plan.num_batches();
  // The plan itself: every packable sample exactly once, in a batch within budget; first-fit
  // decreasing: no sample of a batch fits in the room any earlier batch has left.
  std::vector<std::uint32_t> in_plan(ids.size(), 0);
  double least_earlier = std::numeric_limits<double>::infinity();
  for (std::uint64_t id = 0; id < n; ++id) {
    const vbucket::packed_batch b = plan.make_batch(id);
    REQUIRE(b.size() > 0);
    REQUIRE(b.buckets.size() == b.size());
    double sum = 0.0, smallest = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < b.size(); ++i) {
      const std::uint32_t s = b.indices[i];
      REQUIRE(s < ids.size());
      REQUIRE(ids[s] == b.buckets[i]);
      REQUIRE(c.enabled(ids[s]));
      const auto& r = c.ratio_of(ids[s]);
      REQUIRE(b.shape(i) == vbucket::sample_shape{c.frames_of(ids[s]).frames, r.height, r.width});
      ++in_plan[s];
      sum += sample_cost(c, ids[s]);
      smallest = std::min(smallest, sample_cost(c, ids[s]));
    }
    REQUIRE(b.cost == doctest::Approx(sum).epsilon(1e-12));
    REQUIRE(sum <= budget + tol);
    REQUIRE(smallest + least_earlier > budget - tol);
    least_earlier = std::min(least_earlier, sum);
  }
  std::uint64_t packed = 0, disabled = 0, oversized = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bucket_id b = ids[i];
    if (b < 0) {
      REQUIRE(in_plan[i] == 0);
    } else if (!c.enabled(b)) {
      REQUIRE(in_plan[i] == 0);
      ++disabled;
    } else if (sample_cost(c, b) > budget) {
      REQUIRE(in_plan[i] == 0);
      ++oversized;
    } else {
      REQUIRE(in_plan[i] == 1);
      ++packed;
    }
  }
  REQUIRE(plan.samples() == packed);
  REQUIRE(plan.dropped_disabled() == disabled);
  REQUIRE(plan.dropped_oversized() == oversized);
  REQUIRE(plan.unassigned() ==
          static_cast<std::uint64_t>(std::count(ids.begin(), ids.end(), vbucket::no_bucket)));
  REQUIRE(plan.invalid() ==
          static_cast<std::uint64_t>(std::count(ids.begin(), ids.end(), vbucket::invalid_sample)));

  // The schedule: same steps on every rank, each real batch once, counted repeats.
  const packed_schedule s = plan.deal(world, 0, drop_last);
  std::vector<std::uint32_t> position_seen(n, 0);
  std::uint64_t repeats = 0, repeat_samples = 0;
  for (std::uint32_t r = 0; r < world; ++r) {
    std::uint64_t k = 0;
    for (const vbucket::packed_batch& b : s.rank(r)) {
      REQUIRE(b.step == k);
      REQUIRE(b.position == k * world + r);
      ++k;
      if (b.repeat) {
        REQUIRE(b.position >= n);
        ++repeats;
        repeat_samples += b.size();
      } else {
        REQUIRE(b.position < n);
        ++position_seen[b.position];
        REQUIRE(plan.global_batch(b.position).indices.data() == b.indices.data());
      }
    }
    REQUIRE(k == s.steps());
  }
  const std::uint64_t dealt = n - s.dropped_batches();
  for (std::uint64_t p = 0; p < n; ++p) REQUIRE(position_seen[p] == (p < dealt ? 1u : 0u));
  REQUIRE(repeats == s.repeat_batches());
  REQUIRE(repeat_samples == s.repeat_samples());
  REQUIRE(s.steps() * world == dealt + repeats);
  if (drop_last) {
    REQUIRE(repeats == 0);
    REQUIRE(s.dropped_batches() == n % world);
  } else {
    REQUIRE(repeats < world);
    REQUIRE(s.dropped_batches() == 0);
  }
}

/// First-fit decreasing done the slow way, item by item (cost descending, ties by bucket id):
/// the buckets of each batch's entries, batch by batch.
std::vector<std::vector<bucket_id>> reference_ffd(const std::vector<bucket_id>& ids,
                                                  const bucket_config& c, double budget) {
  std::vector<bucket_id> items;
  for (bucket_id b : ids)
    if (b >= 0 && c.enabled(b) && sample_cost(c, b) <= budget) items.push_back(b);
  std::stable_sort(items.begin(), items.end(), [&](bucket_id a, bucket_id b) {
    return sample_cost(c, a) > sample_cost(c, b) ||
           (sample_cost(c, a) == sample_cost(c, b) && a < b);
  });
  std::vector<std::vector<bucket_id>> bins;
  std::vector<double> used;
  for (bucket_id b : items) {
    std::size_t i = 0;
    while (i < bins.size() && used[i] + sample_cost(c, b) > budget) ++i;
    if (i == bins.size()) {
      bins.emplace_back();
      used.push_back(0.0);
    }
    bins[i].push_back(b);
    used[i] += sample_cost(c, b);
  }
  return bins;
}

/// Exact resume: after `steps_done` steps of `world`, `world2` gets exactly the rest.
void check_packed_resume(const packed_plan& plan, std::uint32_t world, std::uint64_t steps_done,
                         std::uint32_t world2) {
  const packed_schedule first = plan.deal(world);
  const vbucket::plan_state state = first.state_after(steps_done);
  REQUIRE(vbucket::plan_state::parse(state.to_string()) == state);
  const packed_schedule rest = plan.deal(world2, state);
  const std::uint64_t n = plan.num_batches();
  std::vector<std::uint32_t> seen(n, 0);
  for (std::uint64_t k = 0; k < std::min(steps_done, first.steps()); ++k)
    for (std::uint32_t r = 0; r < world; ++r)
      if (const auto b = first.at(k, r); !b.repeat) ++seen[b.position];
  for (std::uint64_t k = 0; k < rest.steps(); ++k)
    for (std::uint32_t r = 0; r < world2; ++r) {
      const auto b = rest.at(k, r);
      REQUIRE(b.position == state.consumed + k * world2 + r);
      if (!b.repeat) ++seen[b.position];
    }
  for (std::uint64_t p = 0; p < n; ++p) REQUIRE(seen[p] == 1);
  if (world2 == world)
    for (std::uint64_t k = 0; k < rest.steps(); ++k)
      for (std::uint32_t r = 0; r < world; ++r)
        REQUIRE(rest.at(k, r).indices.data() == first.at(steps_done + k, r).indices.data());
}

bucket_config packed_small_config() {
  std::vector<bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 8},
                                    {"256px", 33, 1.0, std::nullopt, 4},
                                    {"256px", 65, 1.0, std::nullopt, 2},
                                    {"256px", 129, 0.0, std::nullopt, std::nullopt}};
  return bucket_config(specs, vbucket::opensora_v2_tables{});
}

/// Square 256px buckets of `packed_small_config`: 0 image, 1 33 frames, 2 65, 3 129 (disabled).
std::vector<bucket_id> square(const bucket_config& c, const std::vector<int>& which) {
  static const std::int64_t frames[] = {1, 33, 65, 129};
  std::vector<bucket_id> ids;
  for (int w : which)
    ids.push_back(w < 0 ? static_cast<bucket_id>(w)
                        : c.find("256px", frames[static_cast<std::size_t>(w)], "1:1"));
  return ids;
}

}  // namespace

TEST_CASE("packed_plan: guarantees over random configs, sizes, worlds and budgets") {
  test_rng g{20261124};
  for (int iteration = 0; iteration < 60; ++iteration) {
    const bucket_config c = random_config(g, 64);
    const std::vector<bucket_id> ids = packed_random_ids(g, c, random_size(g));
    const double largest = std::max(1.0, largest_sample(c, ids));
    packed_options o;
    o.seed = g.next();
    o.epoch = g.below(5);
    const std::uint64_t u = g.below(4);
    o.token_budget = u == 0   ? largest
                     : u == 1 ? largest * 100.0
                              : largest * (1.0 + static_cast<double>(g.below(9900)) / 100.0);
    o.balance_group = g.chance(0.3) ? static_cast<std::uint32_t>(1 + g.below(100)) : 0;
    const auto world = static_cast<std::uint32_t>(1 + g.below(64));
    CAPTURE(iteration);
    CAPTURE(ids.size());
    CAPTURE(o.token_budget);
    CAPTURE(world);
    const packed_plan plan = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
    check_packed(ids, c, plan, world, g.chance(0.3));
    if (ids.size() <= 3000) {
      const auto bins = reference_ffd(ids, c, o.token_budget);
      REQUIRE(bins.size() == plan.num_batches());
      for (std::uint64_t id = 0; id < plan.num_batches(); ++id) {
        const auto b = plan.make_batch(id).buckets;
        REQUIRE(std::vector<bucket_id>(b.begin(), b.end()) == bins[static_cast<std::size_t>(id)]);
      }
    }
    if (plan.num_batches() > 0) {
      const std::uint32_t world2 = static_cast<std::uint32_t>(1 + g.below(64));
      const packed_schedule s = plan.deal(world);
      check_packed_resume(plan, world, g.below(s.steps() + 1), world2);
      check_packed_resume(plan, world, g.below(s.steps() + 1), world);
    }
  }
}

TEST_CASE("packed_plan: the plan depends on seed and epoch, not on the thread count") {
  test_rng g{7};
  const bucket_config c = packed_small_config();
  std::vector<int> which(5000);
  for (auto& w : which) w = static_cast<int>(g.below(3));
  const std::vector<bucket_id> ids = square(c, which);
  packed_options o{.seed = 5, .epoch = 1, .token_budget = 9000.0};
  auto flat = [&](const packed_plan& p) {
    std::vector<std::uint32_t> v;
    for (std::uint64_t q = 0; q < p.num_batches(); ++q)
      for (std::uint32_t i : p.global_batch(q).indices) v.push_back(i);
    return v;
  };
  o.threads = 1;
  const auto one = flat(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o));
  o.threads = 4;
  const auto four = flat(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o));
  CHECK(one == four);
  o.epoch = 2;
  CHECK(one != flat(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o)));
  o.epoch = 1;
  o.seed = 6;
  CHECK(one != flat(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o)));
}

TEST_CASE("packed_plan: an oversized sample is an error naming it, or a counted drop") {
  const bucket_config c = packed_small_config();
  // 256px 65 frames: 17 · 16 · 16 = 4352 tokens; 33 frames: 9 · 256 = 2304; image: 256.
  const std::vector<bucket_id> ids = square(c, {0, 1, 0, 2, 1, 2, 0});
  const double t65 = sample_cost(c, ids[3]);
  REQUIRE(t65 == 17.0 * 256.0);
  packed_options o{.token_budget = t65 - 1.0};
  try {
    (void)vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
    FAIL("no error");
  } catch (const vbucket::error& e) {
    const std::string m = e.what();
    CHECK(m.find("sample 3 ") != std::string::npos);
    CHECK(m.find("65x") != std::string::npos);
    CHECK(m.find("2 samples") != std::string::npos);
  }
  o.drop_oversized = true;
  const packed_plan p = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
  CHECK(p.dropped_oversized() == 2);
  CHECK(p.samples() == 5);
  check_packed(ids, c, p, 3, false);
  // Exactly the budget fits.
  o.token_budget = t65;
  o.drop_oversized = false;
  CHECK(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o).samples() == 7);
}

TEST_CASE("packed_plan: budgets, disabled buckets, empty input, bad arguments") {
  const bucket_config c = packed_small_config();
  const std::vector<bucket_id> ids =
      square(c, {3, 3, 0, vbucket::no_bucket, vbucket::invalid_sample});
  REQUIRE(!c.enabled(ids[0]));
  packed_options o{.token_budget = 1000.0};
  const packed_plan p = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
  CHECK(p.dropped_disabled() == 2);
  CHECK(p.samples() == 1);
  CHECK(p.num_batches() == 1);
  CHECK(p.unassigned() == 1);
  CHECK(p.invalid() == 1);
  const std::vector<bucket_id> none;
  const packed_plan e = vbucket::make_packed_plan(std::span<const bucket_id>(none), c, o);
  CHECK(e.num_batches() == 0);
  CHECK(e.deal(8).steps() == 0);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    o.token_budget = bad;
    CHECK_THROWS_AS(vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o),
                    vbucket::error);
  }
  o.token_budget = 1000.0;
  CHECK_THROWS_AS((void)p.deal(0), vbucket::error);
  CHECK_THROWS_AS((void)p.deal(2, vbucket::plan_state(1, 0, 0)), vbucket::error);
  CHECK_THROWS_AS((void)p.deal(2, vbucket::plan_state(0, 0, 0, 960)), vbucket::error);
  CHECK(p.deal(2, vbucket::plan_state(0, 0, 0, 0)).steps() == 1);
}

TEST_CASE("packed_plan: a hand-checked packing and mixed-shape Open-Sora strings") {
  const bucket_config c = packed_small_config();
  // Costs 256 (image), 2304 (33 frames), 4352 (65 frames); budget 5000: first-fit decreasing
  // puts 65+2 images (4864), 65+2 images (4864), 33+33 (4608)+1 image (4864), 33 + 2 images.
  const std::vector<bucket_id> ids = square(c, {2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0});
  const packed_plan p =
      vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, {.token_budget = 5000.0});
  REQUIRE(p.num_batches() == 4);
  const double expect[] = {4864.0, 4864.0, 4864.0, 2304.0 + 512.0};
  const std::size_t sizes[] = {3, 3, 3, 3};
  for (std::uint64_t id = 0; id < 4; ++id) {
    CHECK(p.make_batch(id).cost == expect[id]);
    CHECK(p.make_batch(id).size() == sizes[id]);
  }
  const vbucket::packed_batch b = p.make_batch(0);
  const auto strings = vbucket::encode_opensora_batch(b);
  REQUIRE(strings.size() == 3);
  CHECK(strings[0] == std::to_string(b.indices[0]) + "-65-256-256");
  CHECK(strings[1] == std::to_string(b.indices[1]) + "-1-256-256");
  CHECK(vbucket::decode_opensora_index(strings[2]).frames == 1);
}

TEST_CASE("packed_plan: fill ratio and step balance count repeats as waste") {
  const bucket_config c = packed_small_config();
  const std::vector<bucket_id> ids =
      square(c, {2, 2, 2});  // three 4352-token samples, budget 4352: three batches
  const packed_plan p =
      vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, {.token_budget = 4352.0});
  REQUIRE(p.num_batches() == 3);
  const packed_schedule s = p.deal(2);  // 2 steps, one repeat
  CHECK(s.repeat_batches() == 1);
  CHECK(vbucket::fill_ratio(s) == doctest::Approx(3.0 / 4.0));
  CHECK(vbucket::step_balance(s).worst_step_ratio == doctest::Approx(1.0));
  CHECK(vbucket::fill_ratio(p.deal(2, 0, true)) == doctest::Approx(1.0));
  CHECK(vbucket::batching_name(*vbucket::parse_batching("packed")) == "packed");
  CHECK(!vbucket::parse_batching("Packed"));
}

TEST_CASE("packed_plan: the plan from ids is the plan from groups, whatever the threads") {
  test_rng g{99};
  const bucket_config c = random_config(g, 64);
  const std::vector<bucket_id> ids = packed_random_ids(g, c, 300'000);
  const vbucket::bucket_groups serial = vbucket::group_by_bucket(ids, c.num_buckets());
  packed_options o{.seed = 3, .token_budget = 2.0 * std::max(1.0, largest_sample(c, ids))};
  o.threads = 1;
  const packed_plan one = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
  o.threads = 5;
  const packed_plan five = vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, o);
  const packed_plan from_groups = vbucket::make_packed_plan(serial, c, o);
  REQUIRE(one.num_batches() == five.num_batches());
  REQUIRE(one.num_batches() == from_groups.num_batches());
  for (std::uint64_t p = 0; p < one.num_batches(); ++p) {
    const auto a = one.global_batch(p), b = five.global_batch(p), d = from_groups.global_batch(p);
    REQUIRE(std::equal(a.indices.begin(), a.indices.end(), b.indices.begin(), b.indices.end()));
    REQUIRE(std::equal(a.indices.begin(), a.indices.end(), d.indices.begin(), d.indices.end()));
  }
}

TEST_CASE("packed_plan: the resume state records the token budget; another budget is refused") {
  const bucket_config c = packed_small_config();
  const std::vector<bucket_id> ids = square(c, {0, 0, 0, 0, 0, 0, 0, 0});
  const packed_plan p =
      vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, {.token_budget = 1000.0});
  const vbucket::plan_state saved = p.deal(2).state_after(1);
  REQUIRE(saved.token_budget.has_value());
  CHECK(*saved.token_budget == 1000.0);
  CHECK(saved.to_string() == "vbucket-plan seed=0 epoch=0 consumed=2 balance=0 budget=1000");
  CHECK(vbucket::plan_state::parse(saved.to_string()) == saved);
  // A fractional budget reads back exactly.
  const vbucket::plan_state odd(1, 2, 3, std::nullopt, 1234.5678901234567);
  CHECK(vbucket::plan_state::parse(odd.to_string()) == odd);
  // The same budget resumes; a bare state (no budget recorded) too.
  CHECK(p.deal(2, saved).steps() == p.deal(2, saved.consumed).steps());
  CHECK(p.deal(2, vbucket::plan_state(0, 0, 2)).steps() == p.deal(2, 2).steps());
  // Another budget, even by a little, is refused with both budgets named.
  const packed_plan other =
      vbucket::make_packed_plan(std::span<const bucket_id>(ids), c, {.token_budget = 1000.5});
  std::string message;
  try {
    (void)other.deal(2, saved);
  } catch (const vbucket::error& e) {
    message = e.what();
  }
  CHECK(message.find("token budget 1000 but this plan's budget is 1000.5") != std::string::npos);
  // A fixed plan refuses a packed state, whatever its numbers.
  const vbucket::epoch_plan fixed = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c);
  CHECK_THROWS_WITH_AS((void)fixed.deal(2, saved), doctest::Contains("saved from a packed plan"),
                       vbucket::error);
  // Malformed budgets in a state string.
  for (const char* bad : {"budget=0", "budget=-1", "budget=inf", "budget=nan",
                          "budget=", "budget=1e400", "budget=12x"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS((void)vbucket::plan_state::parse(
                             std::string("vbucket-plan seed=0 epoch=0 consumed=0 ") + bad),
                         doctest::Contains("budget must be a positive finite number"),
                         vbucket::error);
  }
}
