/// Tests of vbucket/eigen/profile_csv.hpp: a profile of training steps read from CSV (columns in
/// any order, "oom" rows, tokens from the config or the resolution tables), and errors that name
/// the file, the row and the column.
#include "vbucket/eigen/profile_csv.hpp"

#include <doctest/doctest.h>

#include <optional>  // std::nullopt
#include <string>    // std::string
#include <vector>    // std::vector

#include "vbucket/bucket/aspect.hpp"  // opensora_v2_tables

#include "vbucket_test/errors.hpp"
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// 256px with frames 1 and 33 (batch sizes 8 and 2).
std::vector<vbucket::batch_bucket> profile_buckets() {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 8},
                                                   {"256px", 33, 1.0, std::nullopt, 2}};
  return vbucket::batch_buckets(vbucket::bucket_config(specs, vbucket::opensora_v2_tables{}));
}

std::vector<vbucket::eigen::profile_point> read(const vbucket_test::temp_dir& dir,
                                                const std::string& text) {
  const auto buckets = profile_buckets();
  return vbucket::eigen::read_profile(dir.write("profile.csv", text), buckets,
                                      vbucket::opensora_v2_tables{}, {});
}

}  // namespace

TEST_CASE("profile_csv: rows in any column order, oom rows, tokens from config or tables") {
  const vbucket_test::temp_dir dir("profile_csv");
  const auto buckets = profile_buckets();
  const auto p = read(dir,
                      "step_seconds,batch_size,resolution,peak_memory_gib,frames\n"
                      "0.5,8,256px,12.5,1\n"
                      " 2.25 ,2,256px,30,33\n"
                      "9,4,256px,OOM,33\n"
                      "1.5,1,768px,20,1\n");
  REQUIRE(p.size() == 4);
  CHECK(p[0].tokens == buckets[1].tokens);  // 256px:1 (frames descending: 33 first)
  CHECK(p[0].batch_size == 8);
  CHECK(p[0].peak_memory_gib == 12.5);
  CHECK(p[0].step_seconds == 0.5);
  CHECK_FALSE(p[0].oom);
  CHECK(p[1].tokens == buckets[0].tokens);
  CHECK(p[1].step_seconds == 2.25);
  CHECK(p[2].oom);
  CHECK(p[2].batch_size == 4);
  // 768px is not in the config: its tokens come from the table's largest entry.
  const vbucket::resolution_info info = vbucket::opensora_v2_tables{}.resolve("768px");
  const auto& largest = info.table[info.table.largest()];
  CHECK(p[3].tokens == vbucket::token_count(1, largest.height, largest.width));
}

TEST_CASE("profile_csv: errors name the file, the row and the column") {
  const vbucket_test::temp_dir dir("profile_csv");
  const std::string header = "resolution,frames,batch_size,peak_memory_gib,step_seconds\n";
  auto msg = error_message([&] { (void)read(dir, header + "256px,1,8,-3,0.5\n"); });
  CHECK(contains(msg, "profile.csv: row 1"));
  CHECK(contains(msg, "column \"peak_memory_gib\""));
  CHECK(contains(msg, "is not a positive number of GiB"));
  msg = error_message([&] { (void)read(dir, header + "256px,1,8,3,\n"); });
  CHECK(contains(msg, "column \"step_seconds\": is empty"));
  msg = error_message([&] { (void)read(dir, header + "huge,1,8,3,1\n"); });
  CHECK(contains(msg, "column \"resolution\""));
  CHECK(contains(msg, "huge"));
  msg = error_message([&] { (void)read(dir, header + "256px,1,8,3\n"); });
  CHECK(contains(msg, "4 fields, but the header has 5 columns"));
  msg = error_message([&] { (void)read(dir, "resolution,frames,batch_size\n256px,1,8\n"); });
  CHECK(contains(msg, "missing required columns \"peak_memory_gib\", \"step_seconds\""));
  msg = error_message([&] { (void)read(dir, header); });
  CHECK(contains(msg, "no data rows"));
  msg = error_message([&] { (void)read(dir, ""); });
  CHECK(contains(msg, "empty file"));
}
