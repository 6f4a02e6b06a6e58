/// Mistake: a batch cost that leaves out the config argument; planning must refuse it at
/// compile time rather than call something else.
#include <cstdint>
#include <span>

#include "vbucket/plan/epoch_plan.hpp"

void plan(std::span<const vbucket::bucket_id> ids, const vbucket::bucket_config& config) {
#ifdef VBUCKET_COMPILE_FAIL
  auto cost = [](vbucket::bucket_id, std::int64_t batch_size) {
    return static_cast<double>(batch_size);
  };
#else
  auto cost = [](const vbucket::bucket_config&, vbucket::bucket_id, std::int64_t batch_size) {
    return static_cast<double>(batch_size);
  };
#endif
  (void)vbucket::make_epoch_plan(ids, config, {}, cost);
}
