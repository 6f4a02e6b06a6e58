#pragma once
/// Configs written out in C++ (so the suites need no JSON adapter): `spec` writes one entry;
/// `draw_v2_config` and `draw_v12_config` are small configs of each generation whose
/// probabilities below 1 make the rule's draws matter (assignment, seeding); `opensora_v2_config`
/// is tests/data/config_opensora_v2.json.

#include <cstdint>   // std::int64_t
#include <optional>  // std::nullopt
#include <string>    // std::string
#include <utility>   // std::move
#include <vector>    // std::vector

#include "vbucket/bucket/aspect.hpp"         // opensora_v2_tables, opensora_v12_tables
#include "vbucket/bucket/bucket_config.hpp"  // bucket_config, bucket_spec

namespace vbucket_test {

/// One entry; p_frames < 0 means none (a plain probability).
inline vbucket::bucket_spec spec(std::string res, std::int64_t frames, double p,
                                 double p_frames = -1, std::int64_t batch_size = 2) {
  vbucket::bucket_spec s{std::move(res), frames, p, std::nullopt, batch_size};
  if (p_frames >= 0) s.p_frames = p_frames;
  return s;
}

inline vbucket::bucket_config draw_v2_config() {
  return vbucket::bucket_config(
      std::vector{spec("256px", 1, 0.9), spec("256px", 33, 1.0), spec("256px", 65, 0.8),
                  spec("256px", 129, 0.5, 0.3), spec("768px", 1, 0.5), spec("768px", 65, 0.3, 0.5),
                  spec("768px", 129, 0.2, 0.6)},
      vbucket::opensora_v2_tables{});
}

inline vbucket::bucket_config draw_v12_config() {
  return vbucket::bucket_config(
      std::vector{spec("240p", 1, 1.0), spec("240p", 51, 0.5), spec("240p", 102, 0.5, 0.4),
                  spec("480p", 1, 0.5), spec("480p", 51, 0.5), spec("720p", 1, 0.3),
                  spec("720p", 102, 0.1)},
      vbucket::opensora_v12_tables{});
}

/// tests/data/config_opensora_v2.json, written out.
inline vbucket::bucket_config opensora_v2_config() {
  const std::vector<vbucket::bucket_spec> specs{
      spec("256px", 1, 1.0, -1, 45),  spec("256px", 5, 1.0, -1, 12),
      spec("256px", 33, 1.0, -1, 12), spec("256px", 65, 1.0, -1, 6),
      spec("256px", 97, 0.5, 0.5, 4), spec("256px", 129, 0.5, 0.3, 3),
      spec("768px", 1, 0.5, -1, 13),  spec("768px", 33, 0.5, 0.5, 2),
      spec("768px", 65, 0.3, 0.5, 1), spec("768px", 129, 0.2, 0.6, 1),
      spec("1024px", 1, 0.5, -1, 7)};
  return vbucket::bucket_config(specs, vbucket::opensora_v2_tables{});
}

}  // namespace vbucket_test
