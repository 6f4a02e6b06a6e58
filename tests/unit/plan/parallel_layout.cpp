/// Tests of vbucket/plan/parallel_layout.hpp: chosen layouts over random configs checked against
/// the models computed here (memory within the limit at the chosen sp, sequence divisible by sp,
/// accumulation bounded, no allowed sp that needs fewer GPU-seconds per sample), hand layouts
/// and their errors, padding of sequences that do not divide by sp.

#include <doctest/doctest.h>

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstdint>    // std::int64_t
#include <limits>     // std::numeric_limits
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/plan/parallel_layout.hpp"

#include "vbucket_test/errors.hpp"
#include "vbucket_test/layouts.hpp"
#include "vbucket_test/random_plans.hpp"

using namespace vbucket_test;
using vbucket::bucket_layout;
using vbucket::layout_options;
using vbucket::layout_table;

namespace {

/// Memory of a micro-batch at sp, written out from the model's definition.
double memory_at(const layout_options& o, std::int64_t tokens, std::int64_t micro,
                 std::int64_t sp) {
  const auto t = static_cast<double>(tokens);
  return o.memory.fixed + static_cast<double>(micro) *
                              (o.memory.linear * t + o.memory.quadratic * t * t) /
                              static_cast<double>(sp);
}

/// Step time of a group, written out from the model's definition.
double seconds_at(const layout_options& o, std::int64_t tokens, std::int64_t batch,
                  std::int64_t micro, std::int64_t sp) {
  const auto t = static_cast<double>(tokens);
  const auto s = static_cast<double>(sp);
  const std::int64_t steps = (batch + micro - 1) / micro;
  return o.time.compute.fixed +
         static_cast<double>(batch) *
             ((o.time.compute.linear * t + o.time.compute.quadratic * t * t) / s +
              o.time.comm_per_token * t * (s - 1.0) / s) +
         static_cast<double>(steps) * o.time.comm_per_micro_step * (s - 1.0);
}

/// The most tokens of pair (r, k) over its aspect entries.
std::int64_t raw_tokens(const bucket_config& c, std::size_t r, std::size_t k) {
  std::int64_t most = 0;
  const auto& res = c.resolutions()[r];
  for (std::size_t a = 0; a < res.info.table.size(); ++a)
    most = std::max(most, vbucket::token_count(res.frames[k].frames, res.info.table[a].height,
                                               res.info.table[a].width));
  return most;
}

/// Whether every aspect entry's token count of pair (r, k) divides by sp.
bool divides(const bucket_config& c, std::size_t r, std::size_t k, std::int64_t sp) {
  const auto& res = c.resolutions()[r];
  for (std::size_t a = 0; a < res.info.table.size(); ++a)
    if (vbucket::token_count(res.frames[k].frames, res.info.table[a].height,
                             res.info.table[a].width) %
            sp !=
        0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("parallel_layout: chosen layouts fit memory, divide, and are the cheapest per sample") {
  test_rng g{45};
  for (int iteration = 0; iteration < 60; ++iteration) {
    const bucket_config c = random_config(g);
    layout_options o = test_layout_options();
    if (g.chance(0.5)) o.remainder = vbucket::sequence_remainder::refuse;
    if (g.chance(0.3)) o.target_seconds = 2.0 + static_cast<double>(g.below(20));
    layout_table t;
    try {
      t = vbucket::choose_layouts(c, o);
    } catch (const vbucket::error& e) {
      // Only a refused remainder can leave a pair without a layout here (memory always fits
      // at sp 8 with these models).
      CHECK(o.remainder == vbucket::sequence_remainder::refuse);
      CHECK(contains(e.what(), "parallel layout: "));
      continue;
    }
    CHECK(t.target_seconds() > 0.0);
    std::size_t p = 0;
    for (std::size_t r = 0; r < c.resolutions().size(); ++r)
      for (std::size_t k = 0; k < c.resolutions()[r].frames.size(); ++k, ++p) {
        const bucket_layout& l = t.pairs()[p];
        CHECK(t.config().resolutions()[r].frames[k].batch_size == l.batch_size);
        if (c.resolutions()[r].frames[k].batch_size == 0) {
          CHECK_FALSE(l.enabled());
          continue;
        }
        REQUIRE(l.enabled());
        CHECK((l.sp == 1 || l.sp == 2 || l.sp == 4 || l.sp == 8));
        CHECK(l.tokens % l.sp == 0);
        CHECK(l.tokens >= raw_tokens(c, r, k));
        CHECK(l.tokens < raw_tokens(c, r, k) + l.sp);
        if (o.remainder == vbucket::sequence_remainder::refuse)
          CHECK(l.tokens == raw_tokens(c, r, k));
        CHECK(memory_at(o, l.tokens, l.micro_batch, l.sp) <= o.memory_limit);
        CHECK(l.accumulation() <= o.max_accumulation);
        CHECK(l.accumulation() * l.micro_batch >= l.batch_size);
        CHECK(std::abs(l.seconds - seconds_at(o, l.tokens, l.batch_size, l.micro_batch, l.sp)) <
              1e-9 * l.seconds);
        // Within the target, the batch is the largest within it; and no allowed sp whose
        // one-sample step is within the target runs more samples per rank (brute force).
        const double target = t.target_seconds();
        const bool mine_within = seconds_at(o, l.tokens, 1, 1, l.sp) <= target * (1.0 + 1e-9);
        if (mine_within) {
          CHECK(l.seconds <= target * (1.0 + 1e-9));
          if (l.batch_size < l.micro_batch * o.max_accumulation)
            CHECK(seconds_at(o, l.tokens, l.batch_size + 1, l.micro_batch, l.sp) >
                  target * (1.0 - 1e-9));
        }
        for (const std::int64_t sp : {1, 2, 4, 8}) {
          const std::int64_t raw = raw_tokens(c, r, k);
          if (!divides(c, r, k, sp) && o.remainder == vbucket::sequence_remainder::refuse) continue;
          const std::int64_t tokens = (raw + sp - 1) / sp * sp;
          std::int64_t micro = 0;
          while (micro < 100000 && memory_at(o, tokens, micro + 1, sp) <= o.memory_limit) ++micro;
          if (micro == 0) continue;
          const bool within = seconds_at(o, tokens, 1, 1, sp) <= target * (1.0 - 1e-9);
          if (!mine_within) {
            CHECK_FALSE(within);
            CHECK(l.seconds <= seconds_at(o, tokens, 1, 1, sp) * (1.0 + 1e-9));
            continue;
          }
          if (!within) continue;
          std::int64_t best = 1;
          while (best < micro * o.max_accumulation &&
                 seconds_at(o, tokens, best + 1, micro, sp) <= target * (1.0 - 1e-9))
            ++best;
          CHECK(l.batch_size * sp >= best * l.sp);
        }
      }
  }
}

TEST_CASE("parallel_layout: micro-steps cover the batch evenly") {
  for (std::int64_t batch = 1; batch < 40; ++batch)
    for (std::int64_t micro = 1; micro <= batch; ++micro) {
      const bucket_layout l{1, batch, micro, 1, 0.0};
      std::int64_t at = 0;
      for (std::int64_t k = 0; k < l.accumulation(); ++k) {
        CHECK(l.micro_offset(k) == at);
        CHECK(l.micro_size(k) <= micro);
        CHECK(l.micro_size(k) >= batch / l.accumulation());
        at += l.micro_size(k);
      }
      CHECK(at == batch);
    }
}

TEST_CASE("parallel_layout: hand layouts are checked, naming the pair") {
  const bucket_config c = small_config(8, 4, 2);  // 256px: 1, 33, 65 frames
  layout_options o = test_layout_options();
  // Pairs in the config's order: frames 65, 33, 1.
  const auto pairs = [](std::int64_t sp, std::int64_t batch, std::int64_t micro) {
    return std::vector<bucket_layout>{
        {sp, batch, micro, 0, 0.0}, {1, 4, 4, 0, 0.0}, {1, 8, 8, 0, 0.0}};
  };
  o.remainder = vbucket::sequence_remainder::pad;  // an aspect entry of 65 frames has 4250
  std::int64_t tokens65 = 0;
  const auto& table = c.resolutions()[0].info.table;
  for (std::size_t a = 0; a < table.size(); ++a)
    tokens65 =
        std::max(tokens65, (vbucket::token_count(65, table[a].height, table[a].width) + 3) / 4 * 4);
  const layout_table t = vbucket::check_layouts(c, pairs(4, 6, 2), o);
  CHECK(t.pairs()[0].tokens == tokens65);
  CHECK(t.pairs()[0].accumulation() == 3);
  CHECK(t.pairs()[0].seconds == doctest::Approx(seconds_at(o, tokens65, 6, 2, 4)));
  CHECK(t.config().resolutions()[0].frames[0].batch_size == 6);
  CHECK(t.target_seconds() == doctest::Approx(std::max({t.pairs()[0].seconds, t.pairs()[1].seconds,
                                                        t.pairs()[2].seconds})));

  CHECK(contains(error_message([&] { (void)vbucket::check_layouts(c, pairs(3, 6, 2), o); }),
                 "256px -> 65: sp 3 is not an allowed size"));
  const std::int64_t raw65 = raw_tokens(c, 0, 0);
  std::int64_t fits = 0;
  while (memory_at(o, raw65, fits + 1, 1) <= o.memory_limit) ++fits;
  CHECK_NOTHROW((void)vbucket::check_layouts(c, pairs(1, fits, fits), o));
  CHECK(contains(
      error_message([&] { (void)vbucket::check_layouts(c, pairs(1, fits + 1, fits + 1), o); }),
      "over the memory limit"));
  CHECK(contains(error_message([&] { (void)vbucket::check_layouts(c, pairs(1, 4, 5), o); }),
                 "micro-batch 5 is not in [1, batch size 4]"));
  CHECK(contains(error_message([&] { (void)vbucket::check_layouts(c, pairs(1, 40, 1), o); }),
                 "40 micro-steps exceed max_accumulation 8"));
  auto two = pairs(1, 4, 4);
  two.pop_back();
  CHECK(contains(error_message([&] { (void)vbucket::check_layouts(c, two, o); }),
                 "2 layouts given but the config has 3"));
}

TEST_CASE("parallel_layout: a sequence that does not divide by sp is refused or padded") {
  const bucket_config c = small_config(8, 4, 2);
  layout_options o = test_layout_options();
  // The image pair (frames 1, the config's third pair): find an sp that some aspect entry's
  // token count does not divide.
  const auto& table = c.resolutions()[0].info.table;
  std::int64_t sp = 0;
  for (const std::int64_t s : {2, 4, 8})
    for (std::size_t a = 0; a < table.size() && sp == 0; ++a)
      if (vbucket::token_count(1, table[a].height, table[a].width) % s != 0) sp = s;
  REQUIRE(sp != 0);
  std::vector<bucket_layout> pairs{{1, 2, 2, 0, 0.0}, {1, 4, 4, 0, 0.0}, {sp, 8, 8, 0, 0.0}};
  o.remainder = vbucket::sequence_remainder::refuse;
  const std::string msg = error_message([&] { (void)vbucket::check_layouts(c, pairs, o); });
  CHECK(contains(msg, "256px -> 1: aspect"));
  CHECK(contains(msg, "do not divide by sp " + std::to_string(sp)));
  o.remainder = vbucket::sequence_remainder::pad;
  const layout_table t = vbucket::check_layouts(c, pairs, o);
  std::int64_t padded = 0;
  for (std::size_t a = 0; a < table.size(); ++a)
    padded = std::max(
        padded, (vbucket::token_count(1, table[a].height, table[a].width) + sp - 1) / sp * sp);
  CHECK(t.pairs()[2].tokens == padded);
  // Refused, an sp is not considered by the choice; padded, it may be.
  o.remainder = vbucket::sequence_remainder::refuse;
  o.sp_sizes = {sp};
  CHECK(
      contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }), "do not divide by sp"));
}

TEST_CASE("parallel_layout: bad options and sp sizes are refused") {
  const bucket_config c = small_config(8, 4, 2);
  layout_options o = test_layout_options();
  o.sp_sizes = {2, 3};
  CHECK(contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }),
                 "sizes 2 and 3 do not divide one another"));
  o.sp_sizes = {0, 1};
  CHECK(contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }),
                 "size 0 is not a positive integer"));
  o = test_layout_options();
  o.memory_limit = 10.0;  // below the fixed part: nothing fits
  CHECK(contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }),
                 "256px -> 65: no allowed sequence-parallel size fits one sample in memory"));
  o = test_layout_options();
  o.time.compute.quadratic = -1e-6;  // negative per-sample time at long sequences
  CHECK(contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }),
                 "256px -> 65: the time model predicts"));
  CHECK(contains(error_message([&] {
                   (void)vbucket::check_layouts(
                       c, {{1, 2, 2, 0, 0.0}, {1, 4, 4, 0, 0.0}, {1, 8, 8, 0, 0.0}}, o);
                 }),
                 "it must not fall as the batch grows"));
  o = test_layout_options();
  o.max_accumulation = 0;
  CHECK(contains(error_message([&] { (void)vbucket::choose_layouts(c, o); }),
                 "max_accumulation must be at least 1"));
}

TEST_CASE("parallel_layout: uniform layouts keep the config's batches at one sp") {
  const bucket_config c = small_config(8, 4, 2);
  const layout_table t = vbucket::uniform_layouts(c, 4, test_layout_options());
  std::size_t p = 0;
  for (const auto& f : c.resolutions()[0].frames) {
    CHECK(t.pairs()[p].sp == 4);
    CHECK(t.pairs()[p].batch_size == f.batch_size);
    CHECK(t.pairs()[p].accumulation() == 1);
    ++p;
  }
}

TEST_CASE("parallel_layout: the config's batch sizes as the memory bound") {
  test_rng g{4646};
  for (int iteration = 0; iteration < 20; ++iteration) {
    const bucket_config c = random_config(g, 64);
    layout_options o = test_layout_options();
    o.memory = {};
    o.memory_limit = std::numeric_limits<double>::infinity();
    o.config_fills_memory_at_sp = 4;
    layout_table t;
    try {
      t = vbucket::choose_layouts(c, o);
    } catch (const vbucket::error& e) {
      // A batch size below 4 fills nothing at sp 1 or 2; at sp 8 everything fits.
      FAIL_CHECK(e.what());
      continue;
    }
    std::size_t p = 0;
    for (const auto& r : c.resolutions())
      for (const auto& f : r.frames) {
        const bucket_layout& l = t.pairs()[p++];
        if (f.batch_size == 0) continue;
        CHECK(l.micro_batch >= 1);
        CHECK(l.micro_batch <= f.batch_size * l.sp / 4);
      }
  }
  const bucket_config c = small_config(8, 4, 2);
  layout_options o = test_layout_options();
  o.config_fills_memory_at_sp = 4;
  // 65 frames: batch size 2 at sp 4, so at sp 2 a micro-batch of 1 at most.
  const std::vector<bucket_layout> pairs{{2, 4, 2, 0, 0.0}, {1, 4, 1, 0, 0.0}, {1, 8, 2, 0, 0.0}};
  CHECK(contains(error_message([&] { (void)vbucket::check_layouts(c, pairs, o); }),
                 "256px -> 65: micro-batch 2 at sp 2 is more than the 1 that the config's batch "
                 "size 2 at sp 4 fills"));
}

TEST_CASE(
    "parallel_layout: without a memory limit the config's batch sizes bound the micro-batch") {
  // No models at all (what `vbucket layout --config C` gives): before, the micro-batch was
  // unbounded (2^31) and the batch search walked it one sample at a time.
  const bucket_config c = small_config(8, 4, 2);
  const vbucket::layout_table t = vbucket::choose_layouts(c, vbucket::layout_options{});
  const std::int64_t config_bs[] = {2, 4, 8};  // pair order: 65, 33, 1 frames
  REQUIRE(t.pairs().size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(t.pairs()[i].sp == 1);
    CHECK(t.pairs()[i].micro_batch == config_bs[i]);
    CHECK(t.pairs()[i].batch_size == config_bs[i] * 16);  // a flat time model: the most
  }
  // The options set from text, as the CLI's flags and Python's keywords do.
  vbucket::layout_options o;
  vbucket::set_layout_option(o, "memory", "20,1e-3,1e-8");
  vbucket::set_layout_option(o, "sp_sizes", "1,2,4");
  vbucket::set_layout_option(o, "remainder", "pad");
  CHECK(o.memory.linear == 1e-3);
  CHECK(o.sp_sizes == std::vector<std::int64_t>{1, 2, 4});
  CHECK(o.remainder == vbucket::sequence_remainder::pad);
  CHECK(contains(error_message([&] { vbucket::set_layout_option(o, "memory", "1,2"); }),
                 "layout option memory: expected three numbers"));
  CHECK(contains(error_message([&] { vbucket::set_layout_option(o, "max_accumulation", "0"); }),
                 "expected a positive integer"));
  CHECK(contains(error_message([&] { vbucket::set_layout_option(o, "speed", "1"); }),
                 "layout option \"speed\" is unknown"));
}
