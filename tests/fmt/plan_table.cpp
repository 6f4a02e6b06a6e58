/// Tests of vbucket/fmt/plan_table.hpp: the statistics table of a small plan whose counts are
/// known by hand, the sections it can leave out, and printing to a FILE.
#include "vbucket/fmt/plan_table.hpp"

#include <doctest/doctest.h>

#include <cstdio>    // std::tmpfile, std::fread
#include <optional>  // std::nullopt
#include <span>      // std::span
#include <string>    // std::string
#include <vector>    // std::vector

#include "vbucket/bucket/rules.hpp"  // opensora_v2_tables
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// 256px: 5 images (batch 2: 2 batches + 1 pad) and 3 videos of 33 frames (batch 3: 1 batch).
vbucket::epoch_schedule small_schedule(const vbucket::bucket_config& c) {
  const vbucket::bucket_id image = c.find("256px", 1, "1:1"), video = c.find("256px", 33, "1:1");
  const std::vector<vbucket::bucket_id> ids{
      image, image, video, image, image, video, image, video, vbucket::no_bucket};
  return vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), c).deal(2);
}

}  // namespace

TEST_CASE("plan_table: counts of a hand-made plan, every section") {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 2},
                                                   {"256px", 33, 1.0, std::nullopt, 3}};
  const vbucket::bucket_config c(specs, vbucket::opensora_v2_tables{});
  const vbucket::epoch_schedule s = small_schedule(c);
  const vbucket::plan_stats st = vbucket::compute_plan_stats(s, c);
  const vbucket::step_balance_stats balance = vbucket::step_balance(s);
  const std::string text = vbucket::format_plan_table(st, &balance);
  CAPTURE(text);
  CHECK(has(text, "Buckets (samples and batches per bucket"));
  CHECK(has(text, "By (resolution, frames)"));
  CHECK(has(text, "By aspect ratio"));
  CHECK(has(text, "Images and videos"));
  CHECK(has(text, "samples:            9 rows, 8 in buckets (88.9%), 1 without bucket, 0 invalid"));
  CHECK(has(text, "#training sample:   8 distinct samples in batches, 0 dropped"));
  CHECK(has(text, "#training batch:    4 (9 slots, 1 pads = 11.1% of slots)"));
  CHECK(has(text, "#non-empty bucket:  2"));
  CHECK(has(text, "world:              2 ranks, 2 steps each after 0 consumed global batches"));
  CHECK(has(text, "step balance:"));
  CHECK(has(text, "1x256x256"));
  CHECK(has(text, "33x256x256"));
  // Sections can be left out; without the balance there is no balance line.
  const std::string summary = vbucket::format_plan_table(
      st, nullptr, {.per_bucket = false, .by_shape = false, .by_ratio = false});
  CHECK_FALSE(has(summary, "Buckets ("));
  CHECK_FALSE(has(summary, "By aspect ratio"));
  CHECK_FALSE(has(summary, "step balance:"));
  CHECK(has(summary, "#training batch:    4"));
  // print_plan_table writes exactly format_plan_table's text.
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  vbucket::print_plan_table(f, st, &balance);
  std::rewind(f);
  std::string printed;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) printed.append(buf, n);
  std::fclose(f);
  CHECK(printed == text);
}
