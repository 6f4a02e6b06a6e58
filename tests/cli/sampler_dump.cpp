/// A `batch_sampler` made directly from the library, without the CLI's code, for
/// tests/cli/sampler.sh: it writes this rank's batches in `vbucket plan`'s JSON lines on stdout
/// and the plan's fingerprint (0x and 16 hex digits) on stderr, so the script can compare both
/// with `vbucket plan` byte for byte.
///
///   vbucket_sampler_dump CFG.json META.csv fast|numpy SEED EPOCH WORLD RANK [BALANCE_GROUP
///                        [START_STEP]]
///
/// The rule is Open-Sora 2.0's with its defaults; BALANCE_GROUP 0 is no step balance; the
/// first START_STEP steps are done (`advance`). A NumPy SEED of 2^64 or more goes through a
/// source family, as batch_sampler.hpp describes. Exit code 1 and one line on stderr on error.

#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t, std::uint32_t
#include <cstdio>     // std::fputs, std::fprintf
#include <exception>  // std::exception
#include <memory>     // std::make_shared
#include <string>     // std::string, std::stoull, std::to_string

#include "vbucket/base/numpy_random.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/bucket/seeding.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/sample/batch_sampler.hpp"

namespace {

/// `s` as a JSON string literal (the test configs' names need no escapes but quotes and
/// backslashes are escaped anyway).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

template <class Sampler>
int dump(Sampler& sampler, std::uint64_t epoch, std::uint64_t start_step) {
  sampler.set_epoch(epoch);
  sampler.advance(start_step);
  const vbucket::bucket_config& config = sampler.config();
  std::string line;
  for (const vbucket::batch& b : sampler) {
    const auto& frames = config.frames_of(b.bucket);
    const auto& ratio = config.ratio_of(b.bucket);
    line = "{\"step\":" + std::to_string(start_step + b.step) + ",\"bucket\":[" +
           json_string(config.resolution_of(b.bucket).info.name) + "," +
           std::to_string(frames.frames) + "," + json_string(ratio.key) + "],\"thw\":[" +
           std::to_string(b.frames) + "," + std::to_string(b.height) + "," +
           std::to_string(b.width) + "],\"indices\":[";
    for (std::size_t i = 0; i < b.indices.size(); ++i) {
      if (i > 0) line.push_back(',');
      line += std::to_string(b.indices[i]);
    }
    line += "]}\n";
    std::fputs(line.c_str(), stdout);
  }
  std::fprintf(stderr, "0x%016llx\n", static_cast<unsigned long long>(sampler.fingerprint()));
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8 || argc > 10) {
    std::fputs(
        "usage: vbucket_sampler_dump CFG.json META.csv fast|numpy SEED EPOCH WORLD RANK "
        "[BALANCE_GROUP [START_STEP]]\n",
        stderr);
    return 2;
  }
  try {
    const auto config = std::make_shared<const vbucket::bucket_config>(
        vbucket::json::load_bucket_config(argv[1], vbucket::opensora_v2_tables{}));
    const vbucket::meta_table meta = vbucket::load_meta_csv(argv[2]);
    const std::string rng = argv[3];
    if (rng != "fast" && rng != "numpy") throw vbucket::error("rng must be fast or numpy: " + rng);
    const vbucket::big_seed seed = vbucket::big_seed::parse(argv[4]);
    const std::uint64_t epoch = std::stoull(argv[5]);
    const auto world = static_cast<std::uint32_t>(std::stoul(argv[6]));
    const auto rank = static_cast<std::uint32_t>(std::stoul(argv[7]));
    const auto group = static_cast<std::uint32_t>(argc > 8 ? std::stoul(argv[8]) : 0);
    const std::uint64_t start_step = argc > 9 ? std::stoull(argv[9]) : 0;
    const auto mode = rng == "fast" ? vbucket::rng_mode::fast : vbucket::rng_mode::numpy;
    if (const auto small = vbucket::seed_u64(seed)) {
      vbucket::batch_sampler sampler(meta, config, vbucket::opensora_v2_rule{},
                                     {.seed = *small,
                                      .world = world,
                                      .rank = rank,
                                      .rng = mode,
                                      .policy = vbucket::incomplete_policy::pad,
                                      .drop_last = false,
                                      .balance_group = group});
      return dump(sampler, epoch, start_step);
    }
    if (mode != vbucket::rng_mode::numpy) throw vbucket::error("a fast seed must fit in 64 bits");
    // Open-Sora's NumPy seed S + E for a seed past 64 bits; the plan is keyed by plan_seed(S).
    auto numpy_family = [seed](std::uint64_t, std::uint64_t e, std::size_t num_buckets) {
      return vbucket::numpy_epoch_source(seed, e, num_buckets);
    };
    vbucket::batch_sampler sampler(meta, config, vbucket::opensora_v2_rule{},
                                   {.seed = vbucket::plan_seed(seed),
                                    .world = world,
                                    .rank = rank,
                                    .rng = vbucket::rng_mode::fast,
                                    .policy = vbucket::incomplete_policy::pad,
                                    .drop_last = false,
                                    .balance_group = group},
                                   numpy_family);
    return dump(sampler, epoch, start_step);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vbucket_sampler_dump: error: %s\n", e.what());
    return 1;
  }
}
