/// Fuzzes the epoch planner (`vbucket::make_epoch_plan`, `epoch_plan::deal`) with arbitrary
/// bucket sizes, batch sizes, policies, balance groups, world sizes and resume points, on a
/// config built from fuzz bytes. Checks the planner's promises: nothing lost, every batch
/// full, every rank the same number of steps, the two entry points agree, and resuming (also
/// with another world size) neither replays nor skips a batch. Also fuzzes the plan-state and
/// "idx-T-H-W" parsers.

#include <algorithm>    // std::min
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t, std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include <fuzzer/FuzzedDataProvider.h>

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group.hpp"

namespace {

/// 1 to 3 resolutions of 1 to 4 frames keys on small user tables; batch sizes mostly small.
vbucket::bucket_config make_config(FuzzedDataProvider& in) {
  vbucket::user_tables tables;
  std::vector<vbucket::bucket_spec> specs;
  const int resolutions = in.ConsumeIntegralInRange(1, 3);
  for (int r = 0; r < resolutions; ++r) {
    std::vector<vbucket::aspect_entry> entries;
    const int n = in.ConsumeIntegralInRange(1, 4);
    for (int e = 0; e < n; ++e) {
      const int h = in.ConsumeIntegralInRange(1, 4096), w = in.ConsumeIntegralInRange(1, 4096);
      entries.push_back({"e" + std::to_string(e), static_cast<double>(h) / w, h, w});
    }
    const std::string name = "r" + std::to_string(r);
    tables.add(name, in.ConsumeIntegralInRange<std::int64_t>(1, std::int64_t{1} << 24),
               vbucket::aspect_table(std::move(entries), name));
    const int keys = in.ConsumeIntegralInRange(1, 4);
    for (int k = 0; k < keys; ++k) {
      vbucket::bucket_spec s;
      s.resolution = name;
      s.frames = in.ConsumeIntegralInRange<std::int64_t>(1, 512);
      const auto bs = in.ConsumeIntegral<std::uint8_t>();
      if (bs == 0) {
        s.p_resolution = 0.0;  // disabled
      } else {
        s.p_resolution = 1.0;
        s.batch_size = bs < 250 ? bs % 9 + 1 : bs - 249 + 31;
      }
      specs.push_back(s);
    }
  }
  try {
    return vbucket::bucket_config(specs, tables);
  } catch (const vbucket::error& e) {  // duplicate frames keys
    vbucket_fuzz::check_message(e.what(), "bucket");
    return vbucket::bucket_config({{"r0", 1, 1.0, std::nullopt, 2}}, tables);
  }
}

void check_plan(const vbucket::epoch_plan& plan, const vbucket::bucket_config& config,
                const std::vector<vbucket::bucket_id>& ids, vbucket::incomplete_policy policy) {
  const std::size_t nb = config.num_buckets();
  VBUCKET_FUZZ_CHECK(plan.num_buckets() == nb);
  std::vector<std::uint64_t> grouped(nb, 0);
  std::uint64_t unassigned = 0, invalid = 0;
  for (auto id : ids) {
    if (id >= 0) ++grouped[static_cast<std::size_t>(id)];
    if (id == vbucket::no_bucket) ++unassigned;
    if (id == vbucket::invalid_sample) ++invalid;
  }
  VBUCKET_FUZZ_CHECK(plan.unassigned() == unassigned && plan.invalid() == invalid);

  std::uint64_t batches = 0, moved_in = 0, moved_out = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    const auto& pb = plan.bucket(static_cast<vbucket::bucket_id>(b));
    VBUCKET_FUZZ_CHECK(pb.grouped == grouped[b]);
    VBUCKET_FUZZ_CHECK(pb.samples + pb.moved_out + pb.dropped == pb.grouped + pb.moved_in);
    VBUCKET_FUZZ_CHECK(pb.batch_size == static_cast<std::uint64_t>(
                                            config.batch_size(static_cast<vbucket::bucket_id>(b))));
    if (pb.batch_size == 0) {
      VBUCKET_FUZZ_CHECK(pb.batches == 0 && pb.samples == 0 && pb.pads == 0);
    } else {
      VBUCKET_FUZZ_CHECK(pb.pads < pb.batch_size);
      VBUCKET_FUZZ_CHECK(pb.batches * pb.batch_size == pb.samples + pb.pads);
    }
    if (policy == vbucket::incomplete_policy::pad)
      VBUCKET_FUZZ_CHECK(pb.dropped == (pb.batch_size == 0 ? pb.grouped : 0));
    if (policy != vbucket::incomplete_policy::pad)
      VBUCKET_FUZZ_CHECK(pb.pads == 0 || pb.moved_out == 0);
    batches += pb.batches;
    moved_in += pb.moved_in;
    moved_out += pb.moved_out;
  }
  VBUCKET_FUZZ_CHECK(plan.num_batches() == batches);
  VBUCKET_FUZZ_CHECK(moved_in == moved_out);

  // Every sample in the epoch's batches lies in as many slots as its bucket says: the samples
  // the plan keeps appear at least once, and only samples with a bucket appear at all.
  std::vector<std::uint32_t> seen(ids.size(), 0);
  std::uint64_t slots = 0;
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const auto b = plan.global_batch(p);
    VBUCKET_FUZZ_CHECK(b.bucket >= 0 && static_cast<std::size_t>(b.bucket) < nb);
    VBUCKET_FUZZ_CHECK(b.indices.size() == plan.bucket(b.bucket).batch_size);
    VBUCKET_FUZZ_CHECK(b.frames == config.frames_of(b.bucket).frames);
    for (auto i : b.indices) {
      VBUCKET_FUZZ_CHECK(i < ids.size() && ids[i] >= 0);
      ++seen[i];
    }
    slots += b.indices.size();
  }
  std::uint64_t kept = 0, pads = 0;
  for (std::size_t b = 0; b < nb; ++b) {
    kept += plan.bucket(static_cast<vbucket::bucket_id>(b)).samples;
    pads += plan.bucket(static_cast<vbucket::bucket_id>(b)).pads;
  }
  VBUCKET_FUZZ_CHECK(slots == kept + pads);
  std::uint64_t distinct = 0;
  for (auto s : seen) distinct += s > 0 ? 1 : 0;
  VBUCKET_FUZZ_CHECK(distinct == kept);
  if (policy != vbucket::incomplete_policy::drop) {
    // Nothing lost: every sample of an enabled bucket is in some batch (downgrade may only
    // drop the samples that end in a disabled bucket).
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= 0 && config.enabled(ids[i]) && policy == vbucket::incomplete_policy::pad)
        VBUCKET_FUZZ_CHECK(seen[i] > 0);
  }
}

/// The real batches (global positions) a schedule deals, in deal order.
std::vector<std::uint64_t> real_positions(const vbucket::epoch_schedule& s) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t k = 0; k < s.steps(); ++k)
    for (std::uint32_t r = 0; r < s.world_size(); ++r) {
      const auto b = s.at(k, r);
      VBUCKET_FUZZ_CHECK(b.step == k);
      VBUCKET_FUZZ_CHECK(b.indices.size() == s.plan().bucket(b.bucket).batch_size);
      VBUCKET_FUZZ_CHECK(!b.indices.empty());
      if (!b.repeat) out.push_back(b.position);
    }
  return out;
}

void check_schedule(const vbucket::epoch_plan& plan, std::uint32_t world, std::uint64_t consumed,
                    bool drop_last) {
  const vbucket::epoch_schedule s = plan.deal(world, consumed, drop_last);
  const std::uint64_t n = plan.num_batches();
  const std::uint64_t left = consumed >= n ? 0 : n - consumed;
  if (drop_last) {
    VBUCKET_FUZZ_CHECK(s.steps() == left / world);
    VBUCKET_FUZZ_CHECK(s.dropped_batches() == left % world);
    VBUCKET_FUZZ_CHECK(s.repeat_batches() == 0);
  } else {
    VBUCKET_FUZZ_CHECK(s.steps() == (left + world - 1) / world);
    VBUCKET_FUZZ_CHECK(s.repeat_batches() == s.steps() * world - left);
  }
  if (s.steps() * world > 4096) return;  // keep one input fast
  const auto positions = real_positions(s);
  VBUCKET_FUZZ_CHECK(positions.size() == left - s.dropped_batches());
  for (std::size_t i = 0; i < positions.size(); ++i)
    VBUCKET_FUZZ_CHECK(positions[i] == consumed + i);
  for (std::uint32_t r = 0; r < std::min<std::uint32_t>(world, 4); ++r) {
    const auto steps = s.rank(r);
    VBUCKET_FUZZ_CHECK(steps.size() == s.steps());
    std::uint64_t k = 0;
    for (const auto& b : steps) VBUCKET_FUZZ_CHECK(b.step == k++);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const auto config = make_config(in);
  const std::size_t nb = config.num_buckets();

  vbucket::plan_options options;
  options.seed = in.ConsumeIntegral<std::uint64_t>();
  options.epoch = in.ConsumeIntegral<std::uint64_t>();
  options.policy = static_cast<vbucket::incomplete_policy>(in.ConsumeIntegralInRange(0, 2));
  const auto group = in.ConsumeIntegral<std::uint32_t>();
  options.balance_group = in.ConsumeBool() ? 0 : in.ConsumeBool() ? group % 70 : group;
  options.threads = in.ConsumeIntegralInRange(1u, 3u);

  // Bucket ids: mostly valid, some no_bucket / invalid_sample, rarely out of range.
  std::vector<vbucket::bucket_id> ids(in.ConsumeIntegralInRange<std::size_t>(0, 3000));
  const auto skew = in.ConsumeIntegralInRange<std::size_t>(1, nb);
  for (auto& id : ids) {
    const auto v = in.ConsumeIntegral<std::uint16_t>();
    id = v < 64000   ? static_cast<vbucket::bucket_id>(v % skew)
         : v < 65000 ? vbucket::no_bucket
         : v < 65530 ? vbucket::invalid_sample
                     : static_cast<vbucket::bucket_id>(nb + v % 3);
  }

  bool bad_id = false;
  for (auto id : ids) bad_id = bad_id || (id >= 0 && static_cast<std::size_t>(id) >= nb);
  vbucket::epoch_plan plan = [&] {
    try {
      return vbucket::make_epoch_plan(std::span<const vbucket::bucket_id>(ids), config, options);
    } catch (const vbucket::error& e) {
      VBUCKET_FUZZ_CHECK(bad_id);
      vbucket_fuzz::check_message(e.what(), "epoch plan");
      return vbucket::epoch_plan{};
    }
  }();
  if (bad_id) return 0;
  check_plan(plan, config, ids, options.policy);

  // The grouped entry point makes the same plan.
  const auto grouped = vbucket::make_epoch_plan(vbucket::group_by_bucket(ids, nb), config, options);
  VBUCKET_FUZZ_CHECK(grouped.num_batches() == plan.num_batches());
  for (std::uint64_t p = 0; p < plan.num_batches(); ++p) {
    const auto a = plan.global_batch(p), b = grouped.global_batch(p);
    VBUCKET_FUZZ_CHECK(a.bucket == b.bucket && std::equal(a.indices.begin(), a.indices.end(),
                                                          b.indices.begin(), b.indices.end()));
  }

  // Deal to fuzzed world sizes from fuzzed resume points; then resume with another world.
  for (int round = 0; round < 3 && in.remaining_bytes() > 0; ++round) {
    const std::uint32_t world = in.ConsumeBool() ? in.ConsumeIntegralInRange(1u, 9u)
                                                 : in.ConsumeIntegralInRange(1u, 1u << 12);
    const std::uint64_t consumed =
        in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, plan.num_batches() + 3)
                         : in.ConsumeIntegral<std::uint64_t>();
    const bool drop_last = in.ConsumeBool();
    check_schedule(plan, world, consumed, drop_last);

    const vbucket::epoch_schedule s = plan.deal(world, 0, drop_last);
    const std::uint64_t done =
        s.steps() == 0 ? 0 : in.ConsumeIntegralInRange<std::uint64_t>(0, s.steps());
    const auto state = s.state_after(done);
    VBUCKET_FUZZ_CHECK(vbucket::plan_state::parse(state.to_string()) == state);
    const std::uint32_t world2 = in.ConsumeIntegralInRange(1u, 9u);
    const vbucket::epoch_schedule resumed = plan.deal(world2, state, drop_last);
    VBUCKET_FUZZ_CHECK(resumed.consumed() == done * world);
    // The state records the balance group (the order depends on it): another one is refused.
    VBUCKET_FUZZ_CHECK(state.balance_group == options.balance_group);
    vbucket::plan_state other = state;
    other.balance_group = options.balance_group + 1;
    bool refused = false;
    try {
      (void)plan.deal(world2, other, drop_last);
    } catch (const vbucket::error& e) {
      vbucket_fuzz::check_message(e.what(), "plan state");
      refused = true;
    }
    VBUCKET_FUZZ_CHECK(refused);
    if (!drop_last && s.steps() * world <= 4096 && resumed.steps() * world2 <= 4096) {
      // No replay, no skip: the resumed real batches continue the global order exactly.
      const auto rest = real_positions(resumed);
      const std::uint64_t n = plan.num_batches();
      const std::uint64_t from = std::min(done * world, n);
      VBUCKET_FUZZ_CHECK(rest.size() == n - from);
      for (std::size_t i = 0; i < rest.size(); ++i) VBUCKET_FUZZ_CHECK(rest[i] == from + i);
    }
  }

  // The text parsers on the remaining bytes.
  const std::string text = in.ConsumeRemainingBytesAsString();
  try {
    const auto st = vbucket::plan_state::parse(text);
    VBUCKET_FUZZ_CHECK(vbucket::plan_state::parse(st.to_string()) == st);
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "plan state");
  }
  if (const auto sample = vbucket::try_decode_opensora_index(text)) {
    VBUCKET_FUZZ_CHECK(vbucket::decode_opensora_index(vbucket::encode_opensora_index(*sample)) ==
                       *sample);
  }
  return 0;
}
