#pragma once
/// A run of `batch_sampler`s written to per-rank ledgers, as a trainer would: each epoch's
/// declaration from rank 0 at its start, one line per delivered batch from every rank, the
/// samples a drop_last deal leaves out at the epoch's end; interruptions that save `state()`
/// and resume in new samplers (new "processes", appending to the same files) under another
/// world size via `load_state()`. Shared by the ledger and audit suites.

#include <algorithm>   // std::min
#include <cstdint>     // std::uint32_t, std::uint64_t, std::int32_t
#include <filesystem>  // std::filesystem::path
#include <iterator>    // std::size
#include <limits>      // quiet_NaN
#include <optional>    // std::optional
#include <string>      // std::string
#include <utility>     // std::pair
#include <vector>      // std::vector

#include "vbucket/run/delivery_records.hpp"  // record_of, epoch_block_of
#include "vbucket/run/ledger.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket_test/random_plans.hpp"  // test_rng

namespace vbucket_test {

/// A clip's metadata under the default `meta_traits` names.
struct ledger_clip {
  std::int32_t num_frames = 0;
  std::int32_t height = 0;
  std::int32_t width = 0;
  double fps = 0;
};

/// n clips: a third images, videos of 2 to 300 frames, a few too small for any bucket.
inline std::vector<ledger_clip> ledger_clips(test_rng& g, std::size_t n) {
  static constexpr std::int32_t sizes[][2] = {{1080, 1920}, {720, 1280}, {1920, 1080},
                                              {480, 640},   {256, 256},  {96, 128}};
  std::vector<ledger_clip> out(n);
  for (ledger_clip& c : out) {
    const auto& hw = sizes[g.below(std::size(sizes))];
    c.height = hw[0];
    c.width = hw[1];
    if (g.chance(0.33)) {
      c.num_frames = 1;
      c.fps = std::numeric_limits<double>::quiet_NaN();
    } else {
      c.num_frames = static_cast<std::int32_t>(2 + g.below(299));
      c.fps = g.chance(0.5) ? 24.0 : 30.0;
    }
  }
  return out;
}

/// What a run does: epochs, the first world, and per epoch the interruptions (after k more
/// steps of the current segment, resume under world W).
struct ledger_run_spec {
  std::uint64_t seed = 0;
  std::uint64_t epochs = 1;
  std::uint32_t world = 1;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint32_t>>> changes{};  ///< per epoch
  bool drop_last = false;
  vbucket::incomplete_policy policy = vbucket::incomplete_policy::pad;
};

/// The files a run wrote (one per rank that ever ran) and what it did.
struct ledger_run_result {
  std::vector<std::string> files{};
  std::uint64_t steps = 0;
  std::uint64_t resumes = 0;
};

/// Runs `spec` over `clips` with `config`, writing `dir`/rank-NNNNN.ledger.
inline ledger_run_result write_sampler_ledgers(const std::filesystem::path& dir,
                                               const std::vector<ledger_clip>& clips,
                                               const vbucket::bucket_config& config,
                                               const ledger_run_spec& spec) {
  ledger_run_result result;
  std::uint32_t world = spec.world;
  std::uint32_t max_world = 0;
  std::uint64_t run_step = 0;
  using sampler = vbucket::batch_sampler<std::vector<ledger_clip>>;
  for (std::uint64_t e = 0; e < spec.epochs; ++e) {
    std::optional<vbucket::plan_state> state;
    std::size_t change = 0;
    const auto& changes = e < spec.changes.size()
                              ? spec.changes[static_cast<std::size_t>(e)]
                              : std::vector<std::pair<std::uint64_t, std::uint32_t>>{};
    for (;;) {  // one segment: a "process" of `world` ranks
      max_world = std::max(max_world, world);
      std::vector<sampler> ranks;
      std::vector<vbucket::ledger_writer> out;
      for (std::uint32_t r = 0; r < world; ++r) {
        vbucket::sampler_options o;
        o.seed = spec.seed;
        o.world = world;
        o.rank = r;
        o.rng = vbucket::rng_mode::fast;
        o.policy = spec.policy;
        o.drop_last = spec.drop_last;
        o.threads = 1;
        ranks.emplace_back(clips, config, vbucket::opensora_v2_rule{}, o);
        ranks.back().set_epoch(e);
        if (state) ranks.back().load_state(*state);
        out.emplace_back((dir / vbucket::ledger_file_name(r)).string(),
                         vbucket::ledger_format::text);  // the tests read and edit its lines
      }
      if (!state) {  // the epoch starts: rank 0 declares it
        const std::vector<vbucket::bucket_id> ids = ranks[0].assign();
        vbucket::write_epoch_block(
            out[0], vbucket::epoch_block_of(ranks[0].plan(), clips.size(), ids, "clips"));
      }
      const vbucket::epoch_schedule schedule = ranks[0].schedule();
      const std::uint64_t steps = ranks[0].size();
      const std::uint64_t stop =
          change < changes.size() ? std::min(changes[change].first, steps) : steps;
      for (std::uint64_t k = 0; k < stop; ++k, ++run_step) {
        for (std::uint32_t r = 0; r < world; ++r) {
          const vbucket::batch b = ranks[r].batches()[k];
          out[r].write(vbucket::record_of(
              b, ranks[r].plan(), {.step = run_step, .stage = 0, .rank = r, .world = world}));
        }
      }
      result.steps += stop;
      if (stop == steps) {  // the epoch's end
        if (schedule.dropped_batches() != 0)
          out[0].write_dropped(e, "drop_last", vbucket::drop_last_samples(schedule),
                               schedule.plan().num_batches());
        break;
      }
      for (sampler& s : ranks) s.advance(stop);
      state = ranks[0].state();
      world = changes[change].second;
      ++change;
      ++result.resumes;
    }
  }
  for (std::uint32_t r = 0; r < max_world; ++r)
    result.files.push_back((dir / vbucket::ledger_file_name(r)).string());
  return result;
}

}  // namespace vbucket_test
