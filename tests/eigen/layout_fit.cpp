/// Tests of vbucket/eigen/layout_fit.hpp: a profile made from known models (steps at several
/// sp and micro-batches) is fitted back to those models; without an sp column the
/// communication terms are 0; errors name the row and the column.
#include "vbucket/eigen/layout_fit.hpp"

#include <doctest/doctest.h>

#include <cstdint>   // std::int64_t
#include <cstdio>    // std::snprintf
#include <optional>  // std::nullopt
#include <string>    // std::string, std::to_string
#include <vector>    // std::vector

#include "vbucket/bucket/aspect.hpp"  // opensora_v2_tables

#include "vbucket_test/errors.hpp"
#include "vbucket_test/temp_files.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

vbucket::bucket_config fit_config() {
  const std::vector<vbucket::bucket_spec> specs = {{"256px", 1, 1.0, std::nullopt, 8},
                                                   {"256px", 33, 1.0, std::nullopt, 2},
                                                   {"768px", 65, 1.0, std::nullopt, 1}};
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace

TEST_CASE("layout_fit: a profile of known models fits back to them") {
  const vbucket::bucket_config config = fit_config();
  const auto buckets = vbucket::batch_buckets(config);
  const vbucket::memory_model mem{30.0, 2e-4, 3e-9};
  vbucket::step_time_model time;
  time.compute = {0.4, 1e-5, 4e-10};
  time.comm_per_token = 3e-6;
  time.comm_per_micro_step = 0.02;
  std::string csv = "resolution,frames,batch_size,sp,micro_batch,peak_memory_gib,step_seconds\n";
  int rows = 0;
  for (const auto& b : buckets)
    for (const std::int64_t sp : {1, 2, 4})
      for (const std::int64_t bs : {1, 3, 4}) {
        const std::int64_t micro = bs == 4 ? 2 : bs;
        const double peak = mem.fixed + static_cast<double>(micro) * mem.per_sample(b.tokens) /
                                            static_cast<double>(sp);
        const double secs = time.predict(b.tokens, bs, sp, vbucket::micro_batch_count(bs, micro));
        char line[200];
        std::snprintf(line, sizeof line, "%s,%lld,%lld,%lld,%lld,%.17g,%.17g\n",
                      b.resolution_name.c_str(), static_cast<long long>(b.frames),
                      static_cast<long long>(micro), static_cast<long long>(sp),
                      static_cast<long long>(micro), peak, secs);
        // The memory row is of the micro-batch; the time row of the whole batch.
        csv += line;
        std::snprintf(line, sizeof line, "%s,%lld,%lld,%lld,%lld,oom,0\n",
                      b.resolution_name.c_str(), static_cast<long long>(b.frames),
                      static_cast<long long>(bs + 100), static_cast<long long>(sp),
                      static_cast<long long>(bs + 100));
        csv += line;
        ++rows;
      }
  // The time rows at the whole batch, with their micro-batch.
  std::string time_csv =
      "resolution,frames,batch_size,sp,micro_batch,peak_memory_gib,step_seconds\n";
  for (const auto& b : buckets)
    for (const std::int64_t sp : {1, 2, 4})
      for (const std::int64_t bs : {1, 3, 4}) {
        const std::int64_t micro = bs == 4 ? 2 : bs;
        const double secs = time.predict(b.tokens, bs, sp, vbucket::micro_batch_count(bs, micro));
        char line[200];
        std::snprintf(line, sizeof line, "%s,%lld,%lld,%lld,%lld,1,%.17g\n",
                      b.resolution_name.c_str(), static_cast<long long>(b.frames),
                      static_cast<long long>(bs), static_cast<long long>(sp),
                      static_cast<long long>(micro), secs);
        time_csv += line;
      }
  CHECK(rows == 27);
  const vbucket_test::temp_dir dir("layout_fit");
  const auto mem_fit = vbucket::eigen::read_layout_profile(dir.write("m.csv", csv), config,
                                                           vbucket::opensora_v2_tables{});
  CHECK(mem_fit.memory_points == 27);
  CHECK(mem_fit.memory.fixed == doctest::Approx(mem.fixed).epsilon(1e-6));
  CHECK(mem_fit.memory.linear == doctest::Approx(mem.linear).epsilon(1e-6));
  CHECK(mem_fit.memory.quadratic == doctest::Approx(mem.quadratic).epsilon(1e-6));
  const auto time_fit = vbucket::eigen::read_layout_profile(dir.write("t.csv", time_csv), config,
                                                            vbucket::opensora_v2_tables{});
  CHECK(time_fit.time.compute.fixed == doctest::Approx(time.compute.fixed).epsilon(1e-6));
  CHECK(time_fit.time.compute.linear == doctest::Approx(time.compute.linear).epsilon(1e-6));
  CHECK(time_fit.time.compute.quadratic == doctest::Approx(time.compute.quadratic).epsilon(1e-6));
  CHECK(time_fit.time.comm_per_token == doctest::Approx(time.comm_per_token).epsilon(1e-6));
  CHECK(time_fit.time.comm_per_micro_step ==
        doctest::Approx(time.comm_per_micro_step).epsilon(1e-6));
}

TEST_CASE("layout_fit: without an sp column the communication terms are 0; errors name the row") {
  const vbucket::bucket_config config = fit_config();
  const vbucket_test::temp_dir dir("layout_fit");
  const std::string plain =
      "resolution,frames,batch_size,peak_memory_gib,step_seconds\n"
      "256px,1,8,31,0.5\n256px,33,2,34,0.9\n768px,65,1,60,3.5\n256px,33,4,38,1.4\n";
  const auto fit = vbucket::eigen::read_layout_profile(dir.write("p.csv", plain), config,
                                                       vbucket::opensora_v2_tables{});
  CHECK(fit.time.comm_per_token == 0.0);
  CHECK(fit.time.comm_per_micro_step == 0.0);
  CHECK(fit.time_points == 4);
  const std::string bad_sp =
      "resolution,frames,batch_size,sp,peak_memory_gib,step_seconds\n"
      "256px,1,8,1,31,0.5\n256px,33,2,0,34,0.9\n";
  CHECK(contains(error_message([&] {
                   (void)vbucket::eigen::read_layout_profile(dir.write("b.csv", bad_sp), config,
                                                             vbucket::opensora_v2_tables{});
                 }),
                 "sp"));
  const std::string big_micro =
      "resolution,frames,batch_size,micro_batch,peak_memory_gib,step_seconds\n"
      "256px,1,8,9,31,0.5\n";
  CHECK(contains(error_message([&] {
                   (void)vbucket::eigen::read_layout_profile(dir.write("c.csv", big_micro), config,
                                                             vbucket::opensora_v2_tables{});
                 }),
                 "micro-batch 9 is larger than the batch 8"));
  const std::string too_few =
      "resolution,frames,batch_size,peak_memory_gib,step_seconds\n256px,1,8,31,0.5\n";
  CHECK(contains(error_message([&] {
                   (void)vbucket::eigen::read_layout_profile(dir.write("d.csv", too_few), config,
                                                             vbucket::opensora_v2_tables{});
                 }),
                 "1 points cannot identify 3 coefficients"));
}
