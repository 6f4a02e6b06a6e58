#pragma once
/// The small two-resolution world the loader tests (fixed and packed) plan over: "lo" (64,
/// aspects 1:2 and 1:1) and "hi" (256, 1:1), three buckets, and a deterministic id sequence
/// that visits every bucket unevenly; and the check of a loader that delivered a whole epoch.

#include <doctest/doctest.h>

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t, std::uint32_t
#include <vector>   // std::vector

#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/meta.hpp"  // sample_meta

namespace vbucket_test {

inline vbucket::bucket_config loader_config() {
  vbucket::user_tables t;
  t.add("lo", 64, vbucket::aspect_table({{"1:2", 2.0, 8, 4}, {"1:1", 1.0, 6, 6}}));
  t.add("hi", 256, vbucket::aspect_table({{"1:1", 1.0, 12, 12}}));
  return vbucket::bucket_config(
      std::vector<vbucket::bucket_spec>{
          {"lo", 3, 1.0, {}, 4}, {"lo", 1, 1.0, {}, 7}, {"hi", 2, 1.0, {}, 3}},
      t);
}

/// Sample i's bucket: (7 i + i / 5) mod the number of buckets.
inline std::vector<vbucket::bucket_id> loader_ids(std::size_t samples, std::size_t buckets) {
  std::vector<vbucket::bucket_id> ids;
  ids.reserve(samples);
  for (std::size_t i = 0; i < samples; ++i)
    ids.push_back(static_cast<vbucket::bucket_id>((i * 7 + i / 5) % buckets));
  return ids;
}

/// 120 samples the Open-Sora 2.0 rule puts into the loader world's buckets: 8×8 ("lo", 1:1)
/// and 16×16 ("hi"), videos of 1 to 6 frames at 8 fps (no thinning).
inline std::vector<vbucket::sample_meta> loader_samples() {
  std::vector<vbucket::sample_meta> samples;
  for (std::int64_t i = 0; i < 120; ++i)
    samples.push_back({1 + i % 6, i % 3 == 0 ? 16 : 8, i % 3 == 0 ? 16 : 8, 8.0});
  return samples;
}

/// A loader `l` of rank `rank` delivered the whole epoch of a schedule of `steps` steps at world
/// `world`, `step` batches counted by the test: one batch a step, none substituted or failed,
/// and its state past the epoch's last global batch.
template <class Loader>
void check_whole_epoch(const Loader& l, std::uint64_t step, std::uint64_t steps,
                       std::uint32_t world) {
  CHECK(step == steps);
  const auto st = l.stats();
  CHECK(st.batches == steps);
  CHECK(st.substitutions == 0);
  CHECK(st.failed == 0);
  CHECK(l.state().consumed == steps * world);
}

}  // namespace vbucket_test
