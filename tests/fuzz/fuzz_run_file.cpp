/// Fuzzes run files (`vbucket::json::load_run_plan_file`: a run of several sources and stages):
/// arbitrary text as a run file beside a small metadata CSV (`m.csv`) and a stage config
/// (`s.json`). Bad input must throw `vbucket::error` with one line naming the file (any other
/// exception escapes and counts as a crash). A file that reads builds its run (an error there is
/// one line naming the run) unless it draws more than a bounded epoch, and the run's first
/// step is planned and its state line reloads.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint8_t, std::uint64_t
#include <filesystem>   // std::filesystem::temp_directory_path
#include <fstream>      // std::ofstream
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "fuzz_common.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/json/run_plan.hpp"
#include "vbucket/run/run_plan.hpp"

namespace {

const std::filesystem::path dir = [] {
  const auto d = std::filesystem::temp_directory_path() / "vbucket_fuzz_run_file";
  std::filesystem::create_directories(d);
  std::ofstream(d / "m.csv") << "num_frames,height,width,fps\n1,720,1280,\n33,256,256,24\n"
                                "65,1080,1920,30\n129,768,1024,16\n9,300,400,0\n";
  std::ofstream(d / "s.json") << R"({"256px": {"1": [1.0, 3], "33": [1.0, 2], "65": [1.0, 1]}})";
  return d;
}();

/// The most samples an epoch of a fuzzed run may draw before it is built (memory, time).
constexpr std::uint64_t max_fuzz_samples = 20000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = (dir / "run.json").string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  vbucket::json::run_plan_file f;
  try {
    f = vbucket::json::load_run_plan_file(path);
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), path);
    return 0;
  }
  VBUCKET_FUZZ_CHECK(!f.sources.empty() && !f.stages.empty());
  // Every stage's draws stay in a bounded epoch (a huge one is a valid run that needs memory).
  std::vector<std::uint64_t> sizes;
  std::vector<std::string> names;
  for (const auto& s : f.sources) {
    sizes.push_back(s.table->size());
    names.push_back(s.name);
  }
  for (const auto& st : f.stages) {
    std::uint64_t total = 0;
    try {
      for (const std::uint64_t n : vbucket::draw_counts(sizes, names, st.draws)) total += n;
    } catch (const vbucket::error& e) {
      vbucket_fuzz::check_message(e.what(), "");
      return 0;
    }
    if (total > max_fuzz_samples) return 0;
  }
  try {
    vbucket::run_plan run(f.sources, f.stages, f.options);
    (void)run.batch(0);
    const std::string state = run.state();
    run.advance();
    vbucket::run_plan again(f.sources, f.stages, f.options);
    again.load(state);
    VBUCKET_FUZZ_CHECK(again.state() == state);
  } catch (const vbucket::error& e) {
    vbucket_fuzz::check_message(e.what(), "");
  }
  return 0;
}
