/// Tests of vbucket/plan/plan_stats.hpp: totals by bucket, shape, ratio and kind agree with the
/// plan; step balance; the pad report and its downgrade figures.
#include "vbucket/plan/plan_stats.hpp"

#include <doctest/doctest.h>

#include <algorithm>  // std::ranges::equal, std::count
#include <cstdint>    // std::uint32_t, std::uint64_t
#include <limits>     // quiet_NaN
#include <span>       // std::span
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/bucket/assign.hpp"
#include "vbucket/bucket/rules.hpp"
#include "vbucket/plan/epoch_plan.hpp"

#include "vbucket_test/random_plans.hpp"

#if !defined(VBUCKET_TEST_HAS_JSON) || VBUCKET_TEST_HAS_JSON
#include "vbucket/json/bucket_config.hpp"
#define VBUCKET_PLAN_TEST_JSON 1
#endif

// test_rng, random_config, check_plan, ... and the vbucket names they use (bucket_config,
// epoch_plan, plan_options, ...).
using namespace vbucket_test;

TEST_CASE("plan_stats: totals agree with the plan, by bucket, shape, ratio and kind") {
  test_rng g{31};
  for (int iteration = 0; iteration < 10; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, static_cast<std::size_t>(g.below(20000)));
    plan_options o;
    o.policy = random_policy(g);
    const epoch_plan plan = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const std::uint32_t world = random_world(g);
    const epoch_schedule s = plan.deal(world, 0, iteration % 2 == 0);
    const vbucket::plan_stats st = vbucket::compute_plan_stats(s, c);
    vbucket::plan_counts sum_buckets, sum_shapes, sum_ratios;
    for (const auto& b : st.buckets) {
      sum_buckets.buckets += b.counts.buckets;
      sum_buckets.grouped += b.counts.grouped;
      sum_buckets.samples += b.counts.samples;
      sum_buckets.batches += b.counts.batches;
      sum_buckets.pads += b.counts.pads;
      sum_buckets.dropped += b.counts.dropped;
      CHECK(b.counts.batches == plan.bucket(b.bucket).batches);
      CHECK(b.frames == c.frames_of(b.bucket).frames);
      CHECK(b.ratio == c.ratio_of(b.bucket).key);
    }
    for (const auto& x : st.by_shape) {
      sum_shapes.samples += x.counts.samples;
      sum_shapes.batches += x.counts.batches;
      sum_shapes.pads += x.counts.pads;
    }
    for (const auto& x : st.by_ratio) {
      sum_ratios.samples += x.counts.samples;
      sum_ratios.batches += x.counts.batches;
      sum_ratios.pads += x.counts.pads;
    }
    for (std::size_t i = 1; i < st.by_ratio.size(); ++i)
      CHECK(st.by_ratio[i - 1].value <= st.by_ratio[i].value);
    CHECK(sum_buckets.samples == st.total.samples);
    CHECK(sum_buckets.batches == st.total.batches);
    CHECK(sum_buckets.pads == st.total.pads);
    CHECK(sum_buckets.dropped == st.total.dropped);
    CHECK(sum_buckets.grouped == st.total.grouped);
    CHECK(sum_buckets.buckets == st.total.buckets);
    CHECK(sum_shapes.samples == st.total.samples);
    CHECK(sum_shapes.batches == st.total.batches);
    CHECK(sum_ratios.pads == st.total.pads);
    CHECK(sum_ratios.batches == st.total.batches);
    CHECK(st.images.samples + st.videos.samples == st.total.samples);
    CHECK(st.images.batches + st.videos.batches == st.total.batches);
    CHECK(st.total.batches == plan.num_batches());
    CHECK(st.total.grouped + st.unassigned + st.invalid == ids.size());
    CHECK(st.alignment.world == world);
    CHECK(st.alignment.steps == s.steps());
    CHECK(st.alignment.repeat_batches == s.repeat_batches());
    CHECK(st.alignment.dropped_batches == s.dropped_batches());
    CHECK(st.alignment.steps * world ==
          st.total.batches + st.alignment.repeat_batches - st.alignment.dropped_batches);
  }
}

TEST_CASE("plan_stats: step balance orders batches of similar cost into each step") {
  // Open-Sora v1.2's config, metadata shaped like a web-video crawl, the v1.2 rule.
  std::vector<bucket_spec> specs;
  const bucket_config c =
#ifdef VBUCKET_PLAN_TEST_JSON
      vbucket::json::load_bucket_config(
          std::string(VBUCKET_TEST_DATA_DIR) + "/config_opensora_v12.json",
          vbucket::opensora_v12_tables{});
#else
      bucket_config(std::vector<bucket_spec>{{"144p", 1, 1.0, std::nullopt, 475},
                                             {"144p", 51, 1.0, std::nullopt, 51},
                                             {"360p", 1, 1.0, std::nullopt, 141},
                                             {"360p", 102, 0.5, std::nullopt, 4},
                                             {"720p", 51, 0.2, std::nullopt, 2}},
                    vbucket::opensora_v12_tables{});
#endif
  test_rng g{8};
  vbucket::meta_table meta;
  static const std::int64_t sizes[][2] = {{1080, 1920}, {720, 1280},  {480, 854}, {360, 640},
                                          {1920, 1080}, {1080, 1080}, {240, 426}};
  for (int i = 0; i < 30000; ++i) {
    const auto& hw = sizes[g.below(std::size(sizes))];
    const bool image = g.chance(0.15);
    meta.push_back({image ? 1 : static_cast<std::int64_t>(50 + g.below(500)), hw[0], hw[1],
                    image ? std::numeric_limits<double>::quiet_NaN() : 30.0});
  }
  const auto ids =
      vbucket::assign_all(c, meta, vbucket::opensora_v12_rule{}, vbucket::fast_source(1, 0));
  for (std::uint32_t world : {8u, 64u}) {
    CAPTURE(world);
    plan_options random_order{42, 0};
    plan_options balanced{42, 0};
    balanced.balance_group = world;
    const epoch_plan a = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, random_order);
    const epoch_plan b = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, balanced);
    const auto ra = vbucket::step_balance(a.deal(world));
    const auto rb = vbucket::step_balance(b.deal(world));
    MESSAGE("world " << world << ": max/mean per step, random order " << ra.max_over_mean
                     << ", balanced " << rb.max_over_mean);
    CHECK(ra.max_over_mean > 1.1);
    CHECK(rb.max_over_mean < 1.02);
    CHECK(rb.max_over_mean < ra.max_over_mean);
    // Balance does not change what is delivered: the same batches, another order.
    CHECK(a.num_batches() == b.num_batches());
    check_plan(ids, c, b, world, false);
    // Resuming a balanced plan with another world size stays exact.
    check_resume(b, world, b.deal(world).steps() / 3, world / 2, false);
  }
  // The CLI's --balance group does not follow the world size: worlds that divide it get steps
  // as balanced as with G = W; one that does not (7) mixes chunks in a few steps only.
  plan_options fixed{42, 0};
  fixed.balance_group = vbucket::default_balance_group;
  const epoch_plan d = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, fixed);
  for (std::uint32_t world : {7u, 8u, 24u, 64u}) {
    CAPTURE(world);
    const auto rd = vbucket::step_balance(d.deal(world));
    MESSAGE("world " << world << ": max/mean per step with G = " << fixed.balance_group << ": "
                     << rd.max_over_mean);
    CHECK(rd.max_over_mean < (vbucket::default_balance_group % world == 0 ? 1.02 : 1.05));
    check_plan(ids, c, d, world, false);
  }
  // A user cost: frames only. Costs are per bucket and must be finite and ≥ 0.
  auto frames_cost = [](const bucket_config& cfg, bucket_id id, std::int64_t bs) {
    return static_cast<double>(cfg.frames_of(id).frames * bs);
  };
  const epoch_plan f =
      vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {1, 0}, frames_cost);
  for (const auto& pb : f.buckets())
    if (pb.batches > 0)
      CHECK(pb.cost == static_cast<double>(pb.frames) * static_cast<double>(pb.batch_size));
  auto negative = [](const bucket_config&, bucket_id, std::int64_t) { return -1.0; };
  CHECK_THROWS_AS((void)vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {}, negative),
                  vbucket::error);
}

TEST_CASE("plan_stats: pad report: share of pads, worst buckets, what downgrade would leave") {
  const bucket_config c = small_config(10, 4, 4);
  const bucket_id img = c.find("256px", 1, "1:1");
  const bucket_id v33 = c.find("256px", 33, "1:1");
  const bucket_id v65 = c.find("256px", 65, "1:1");
  const bucket_id v65b = c.find("256px", 65, "16:9");
  auto report = [&](const std::vector<bucket_id>& ids, incomplete_policy policy) {
    const epoch_plan plan =
        vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, {1, 0, policy});
    return vbucket::compute_pad_report(plan, c);
  };
  SUBCASE("one image in a bucket of 10, two full video batches: downgrade cannot help") {
    std::vector<bucket_id> ids(8, v33);
    ids.push_back(img);
    const vbucket::pad_report r = report(ids, incomplete_policy::pad);
    CHECK(r.pads == 9);
    CHECK(r.slots == 18);  // 1 + 9 pads, 8
    CHECK(r.fraction() == doctest::Approx(0.5));
    CHECK(r.exceeds(0.25));
    CHECK(!r.exceeds(0.5));
    CHECK(!r.exceeds(1.0));
    REQUIRE(r.worst.size() == 1);
    CHECK(r.worst[0].bucket == img);
    CHECK(r.worst[0].resolution == "256px");
    CHECK(r.worst[0].frames == 1);
    CHECK(r.worst[0].ratio == "1:1");
    CHECK(r.worst[0].pads == 9);
    CHECK(r.worst[0].slots == 10);
    CHECK(r.downgrade_pads == 9);  // no smaller image bucket; videos never take images
    CHECK(!r.downgrade_helps());
  }
  SUBCASE("leftovers of 65 frames fill the 33-frame batch under downgrade") {
    std::vector<bucket_id> ids(5, v65);  // 5 = 4 + 1: 3 pads; downgrade: 1 -> 33
    ids.insert(ids.end(), 3, v33);       // 3: 1 pad; downgrade: 3 + 1 = 4
    ids.insert(ids.end(), 3, v65b);      // 3: 1 pad; downgrade: 33 16:9, 1 pad
    const vbucket::pad_report r = report(ids, incomplete_policy::pad);
    CHECK(r.pads == 5);
    CHECK(r.slots == 16);
    REQUIRE(r.worst.size() == 3);
    CHECK(r.worst[0].bucket == v65);
    // Equal pads: the bucket where they are the larger share first (4 slots each here), then
    // by id.
    CHECK(r.worst[1].pads == 1);
    CHECK(r.worst[2].pads == 1);
    CHECK(r.downgrade_pads == 1);
    CHECK(r.downgrade_slots == 12);
    CHECK(r.downgrade_fraction() == doctest::Approx(1.0 / 12.0));
    CHECK(r.downgrade_helps());
    // Already downgrading: the same pads, nothing to suggest.
    const vbucket::pad_report d = report(ids, incomplete_policy::downgrade);
    CHECK(d.pads == 1);
    CHECK(d.downgrade_pads == 1);
    CHECK(!d.downgrade_helps());
    // Drop: no pads at all.
    const vbucket::pad_report x = report(ids, incomplete_policy::drop);
    CHECK(x.pads == 0);
    CHECK(x.fraction() == 0.0);
    CHECK(!x.exceeds(0.0));
  }
  SUBCASE("empty plan") {
    const vbucket::pad_report r = report({}, incomplete_policy::pad);
    CHECK(r.slots == 0);
    CHECK(r.fraction() == 0.0);
    CHECK(!r.exceeds(0.0));
    CHECK(r.worst.empty());
  }
}

TEST_CASE("plan_stats: pad report's downgrade figures match a downgrade plan") {
  test_rng g{2718};
  for (int iteration = 0; iteration < 30; ++iteration) {
    const bucket_config c = random_config(g);
    const std::vector<bucket_id> ids = random_ids(g, c, random_size(g));
    plan_options o{g.next(), 0};
    const epoch_plan padded = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    o.policy = incomplete_policy::downgrade;
    const epoch_plan down = vbucket::make_epoch_plan(std::span<const bucket_id>(ids), c, o);
    const vbucket::pad_report r = vbucket::compute_pad_report(padded, c, 5);
    std::uint64_t pads = 0, slots = 0, down_pads = 0, down_slots = 0, with_pads = 0;
    for (const auto& pb : padded.buckets()) {
      pads += pb.pads;
      slots += pb.samples + pb.pads;
      with_pads += pb.pads > 0 ? 1 : 0;
    }
    for (const auto& pb : down.buckets()) {
      down_pads += pb.pads;
      down_slots += pb.samples + pb.pads;
    }
    CAPTURE(iteration);
    CHECK(r.pads == pads);
    CHECK(r.slots == slots);
    CHECK(r.downgrade_pads == down_pads);
    CHECK(r.downgrade_slots == down_slots);
    CHECK(r.worst.size() == std::min<std::uint64_t>(5, with_pads));
    for (std::size_t i = 1; i < r.worst.size(); ++i) CHECK(r.worst[i - 1].pads >= r.worst[i].pads);
    for (const auto& w : r.worst) CHECK(w.pads == padded.bucket(w.bucket).pads);
  }
}
