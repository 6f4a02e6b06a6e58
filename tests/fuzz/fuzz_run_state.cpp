/// Fuzzes run states (`vbucket::run_plan::load`): arbitrary text as the state line of a fixed
/// run of two sources and two stages, loaded into a run that has moved on. A line the run refuses
/// must throw `vbucket::error` with one line starting "run state" and leave the run as it was
/// (the strong guarantee: the same state line and the same batches after). An input starting
/// with '!' has its check= made again first (a state a program wrote that way), so that the
/// fuzzer reaches the fields behind the check; those whose drawn counts exceed a bounded epoch
/// are skipped (a valid state of a huge epoch needs memory, not a fix). A line that loads gives
/// a state that loads again to itself, and the run goes on.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint64_t
#include <memory>       // std::make_shared
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/run/run_plan.hpp"

namespace {

std::shared_ptr<const vbucket::meta_table> table(std::size_t n, std::int64_t salt) {
  auto t = std::make_shared<vbucket::meta_table>();
  const std::int64_t frames[] = {1, 40, 70, 140};
  for (std::size_t i = 0; i < n; ++i) {
    vbucket::sample_meta m;
    const auto k = static_cast<std::int64_t>(i) * 7 + salt;
    m.num_frames = frames[k % 4];
    m.height = 256 + (k % 3) * 16;
    m.width = 256 + (k % 5) * 32;
    t->push_back(m);
  }
  return t;
}

vbucket::bucket_config config(std::int64_t scale) {
  const auto spec = [](const char* res, std::int64_t frames, std::int64_t bs) {
    return vbucket::bucket_spec{res, frames, 1.0, std::nullopt, bs};
  };
  return vbucket::bucket_config(
      std::vector{spec("256px", 1, 4 * scale), spec("256px", 33, 3 * scale), spec("256px", 65, 2),
                  spec("256px", 129, 1)},
      vbucket::opensora_v2_tables{});
}

struct fixture {
  std::vector<vbucket::run_source> sources;
  std::vector<vbucket::run_stage> stages;
  fixture() {
    for (const char* name : {"web", "curated"}) {
      vbucket::run_source s;
      s.name = name;
      s.table = table(sources.empty() ? 60 : 40, static_cast<std::int64_t>(sources.size()));
      sources.push_back(std::move(s));
    }
    stages.push_back({.name = "a", .config = config(1)});
    stages.push_back({.name = "b", .from_step = 9, .config = config(2)});
  }
  [[nodiscard]] vbucket::run_plan run(std::uint32_t world) const {
    return vbucket::run_plan(sources, stages, {.seed = 3, .world = world});
  }
};

const fixture& runs() {
  static const fixture f;
  return f;
}

/// The most samples a fuzzed state may ask to draw.
constexpr std::uint64_t max_fuzz_samples = 20000;

bool drawn_too_many(std::string_view line) {
  const std::size_t at = line.find(" drawn=");
  if (at == std::string_view::npos) return false;
  std::uint64_t total = 0, n = 0;
  for (std::size_t i = at + 7; i < line.size() && line[i] != ' '; ++i) {
    if (line[i] >= '0' && line[i] <= '9') {
      if (n > max_fuzz_samples) return true;
      n = n * 10 + static_cast<std::uint64_t>(line[i] - '0');
    } else {
      total += n;
      n = 0;
    }
  }
  return total + n > max_fuzz_samples;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string line(reinterpret_cast<const char*>(data), size);
  if (!line.empty() && line[0] == '!') {
    line.erase(0, 1);
    const std::size_t check = line.rfind(" check=");
    const std::string body = check == std::string::npos ? line : line.substr(0, check);
    line = body + " check=" + vbucket::plan_state::hex(vbucket::detail::hash_bytes(body));
    if (drawn_too_many(line)) return 0;
  }
  vbucket::run_plan run = runs().run(3);
  for (int i = 0; i < 4; ++i) run.advance();
  const std::string before = run.state();
  const std::vector<vbucket::run_batch> batches = run.step_batches();
  try {
    run.load(line);
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "run state");
    VBUCKET_FUZZ_CHECK(run.state() == before);
    const std::vector<vbucket::run_batch> now = run.step_batches();
    VBUCKET_FUZZ_CHECK(now.size() == batches.size());
    for (std::size_t i = 0; i < now.size(); ++i)
      VBUCKET_FUZZ_CHECK(now[i].rows == batches[i].rows && now[i].drawn == batches[i].drawn &&
                         now[i].step == batches[i].step);
    run.advance();
    return 0;
  }
  const std::string loaded = run.state();
  vbucket::run_plan again = runs().run(3);
  again.load(loaded);
  VBUCKET_FUZZ_CHECK(again.state() == loaded);
  try {
    run.advance();
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "run");
  }
  return 0;
}
