/// Tests of vbucket/json/run_plan.hpp: a run file with sources and stages reads as the sources,
/// stages and options written by hand (the same batches), configs inline or as paths relative
/// to the file, a stage's draws by source name, and every error names the file and the key.
#include "vbucket/json/run_plan.hpp"

#include <doctest/doctest.h>

#include <filesystem>  // std::filesystem::temp_directory_path, create_directories
#include <fstream>     // std::ofstream
#include <memory>      // std::make_shared
#include <string>      // std::string
#include <utility>     // std::pair
#include <vector>      // std::vector

#include "vbucket/bucket/csv.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/run/run_plan.hpp"

#include "vbucket_test/data_files.hpp"
#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

const std::filesystem::path dir = std::filesystem::temp_directory_path() / "vbucket_run_plan_json";

std::string write(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

constexpr const char* stage1 = R"({"256px": {"1": [1.0, 45], "33": [1.0, 12], "65": [1.0, 6]}})";
constexpr const char* stage2 = R"({"768px": {"1": [0.5, 13], "33": [[0.5, 0.5], 2]}})";

std::string run_file(const std::string& stage2_extra = "") {
  write("stage1.json", stage1);
  return R"({"seed": 9, "world": 3, "rank": 1, "epoch_samples": 2500,
  "sources": [{"name": "web", "csv": ")" +
         vbucket_test::sample_meta_csv() + R"(", "weight": 0.7},
              {"name": "curated", "csv": ")" +
         vbucket_test::sample_meta_csv() + R"(", "count": 600}],
  "stages": [{"name": "s1", "config": "stage1.json"},
             {"name": "s2", "from_step": 20, "config": )" +
         stage2 + stage2_extra + "}]}";
}

}  // namespace

TEST_CASE("json run plan: a run file reads as the same run written by hand") {
  const std::string path =
      write("run.json", run_file(R"(, "draws": {"web": 0.5, "curated": {"repeat": 1}})"));
  const vbucket::json::run_plan_file f = vbucket::json::load_run_plan_file(path);
  CHECK(f.options.seed == 9);
  CHECK(f.options.world == 3);
  CHECK(f.spec.rank == 1);
  REQUIRE(f.sources.size() == 2);
  CHECK(f.sources[0].name == "web");
  CHECK(f.sources[1].name == "curated");
  REQUIRE(f.stages.size() == 2);
  CHECK(f.stages[1].from_step == 20);
  CHECK(f.stages[1].draws.draws.size() == 2);
  CHECK(f.stages[1].draws.draws[0].kind == vbucket::draw_kind::weight);
  CHECK(f.stages[1].draws.draws[0].value == 0.5);
  CHECK(f.stages[1].draws.draws[1].kind == vbucket::draw_kind::repeat);

  // By hand.
  auto table = std::make_shared<const vbucket::meta_table>(
      vbucket::load_meta_csv(vbucket_test::sample_meta_csv()));
  std::vector<vbucket::run_source> sources(2);
  sources[0].name = "web";
  sources[1].name = "curated";
  sources[0].table = sources[1].table = table;
  vbucket::draw_spec d0;
  d0.draws = {{vbucket::draw_kind::weight, 0.7}, {vbucket::draw_kind::count, 600}};
  d0.epoch_samples = 2500;
  vbucket::draw_spec d1 = d0;
  d1.draws = {{vbucket::draw_kind::weight, 0.5}, {vbucket::draw_kind::repeat, 1}};
  std::vector<vbucket::run_stage> stages(2);
  stages[0].name = "s1";
  stages[0].config =
      vbucket::json::parse_bucket_config(stage1, vbucket::opensora_v2_tables{}, "s1");
  stages[0].draws = d0;
  stages[1].name = "s2";
  stages[1].from_step = 20;
  stages[1].config =
      vbucket::json::parse_bucket_config(stage2, vbucket::opensora_v2_tables{}, "s2");
  stages[1].draws = d1;
  vbucket::run_plan mine(sources, stages, {.seed = 9, .world = 3});
  vbucket::run_plan read(f.sources, f.stages, f.options);
  for (int step = 0; step < 60 && mine.epoch() < 2; ++step) {
    CHECK(read.epoch() == mine.epoch());
    CHECK(read.stage() == mine.stage());
    for (std::uint32_t r = 0; r < 3; ++r) {
      const vbucket::run_batch a = mine.batch(r), b = read.batch(r);
      CHECK(a.sources == b.sources);
      CHECK(a.rows == b.rows);
    }
    mine.advance();
    read.advance();
  }
  CHECK(read.state() == mine.state());
}

TEST_CASE("json run plan: errors name the file and the key") {
  auto message_of = [](const std::string& name, const std::string& text) {
    const std::string path = write(name, text);
    return error_message([&] { (void)vbucket::json::load_run_plan_file(path); });
  };
  std::string m = message_of("e1.json", run_file(R"(, "from_epoch": "two")"));
  CHECK(contains(m, "e1.json: stages[1].from_epoch: expected an integer from 0 to"));
  m = message_of("e2.json", run_file(R"(, "draws": {"crawl": 0.5})"));
  CHECK(contains(m, "e2.json: stages[1].draws.crawl: no source of that name"));
  m = message_of("e3.json", run_file(R"(, "colour": 1)"));
  CHECK(contains(m, "e3.json: stages[1].colour: unknown key"));
  m = message_of(
      "e4.json",
      R"({"sources": [{"name": "a", "csv": "x.csv", "weight": 1, "count": 2}], "stages": []})");
  CHECK(contains(m, "e4.json: sources[0].count: give one of weight, count, repeat"));
  m = message_of("e5.json", R"({"seed": "x", "sources": [], "stages": []})");
  CHECK(contains(m, "e5.json"));
  CHECK(contains(m, "seed"));
  m = message_of("e6.json", R"({"sources": [{"name": "a", "csv": ")" +
                                vbucket_test::sample_meta_csv() +
                                R"("}], "stages": [{"name": "s"}]})");
  CHECK(contains(m, "e6.json: stages[0].config: missing"));
}

TEST_CASE("json run plan: stages in start order, their fields and the draws in range, named") {
  auto message_of = [](const std::string& name, const std::string& text) {
    const std::string path = write(name, text);
    return error_message([&] { (void)vbucket::json::load_run_plan_file(path); });
  };
  const std::string src = R"({"sources": [{"name": "web", "csv": ")" +
                          vbucket_test::sample_meta_csv() + R"("}, {"name": "curated", "csv": ")" +
                          vbucket_test::sample_meta_csv() + R"("}], )";
  const std::string cfg = R"("config": )" + std::string(stage1);
  // Out of order (A@0, C@60, B@30), from the same step, both from_step and from_epoch.
  std::string m = message_of("o1.json", src + R"("stages": [{"name": "A", )" + cfg +
                                            R"(}, {"name": "C", "from_step": 60, )" + cfg +
                                            R"(}, {"name": "B", "from_step": 30, )" + cfg + "}]}");
  CHECK(contains(m, "o1.json: stage 2 (\"B\") starts at step 30, before stage 1 (\"C\")"));
  m = message_of("o2.json", src + R"("stages": [{"name": "A", )" + cfg +
                                R"(}, {"name": "B", "from_step": 0, )" + cfg + "}]}");
  CHECK(contains(m, "o2.json: stage 1 (\"B\") starts at step 0, as stage 0 (\"A\")"));
  m = message_of("o3.json", src + R"("stages": [{"name": "A", )" + cfg +
                                R"(}, {"name": "B", "from_epoch": 1, )" + cfg +
                                R"(}, {"name": "C", "from_epoch": 1, )" + cfg + "}]}");
  CHECK(contains(m, "o3.json: stage 2 (\"C\") starts at epoch 1, as stage 1 (\"B\")"));
  m = message_of("o4.json", run_file(R"(, "from_epoch": 2)"));
  CHECK(contains(m, "o4.json: stages[1]: give from_step or from_epoch, not both"));
  // A stage's balance, policy, batching and budget: the run spec's fields and ranges.
  for (const char* group : {"4294967296", "4294967297", "2147483648", "16777217"}) {
    CAPTURE(group);
    m = message_of("b.json", run_file(std::string(R"(, "balance": )") + group));
    CHECK(contains(m,
                   "b.json: key \"stages[1].balance\": expected an integer from 0 to "
                   "16777216, got \"" +
                       std::string(group) + "\""));
  }
  m = message_of("p.json", run_file(R"(, "policy": "pads")"));
  CHECK(contains(m, "p.json: key \"stages[1].policy\": unknown policy \"pads\""));
  m = message_of("t.json", run_file(R"(, "budget": -5)"));
  CHECK(contains(m, "t.json: key \"stages[1].budget\": expected a positive number"));
  CHECK_NOTHROW((void)vbucket::json::load_run_plan_file(
      write("g.json", run_file(R"(, "balance": 16777216)"))));
  // Draws: values above the limit and an epoch of 2^64 - 1 samples are refused where read.
  std::string all = run_file();
  all.replace(all.find("2500"), 4, "18446744073709551615");
  m = message_of("d1.json", all);
  CHECK(contains(m, "d1.json: epoch_samples: expected an integer from 0 to 4294967295"));
  m = message_of("d2.json", run_file(R"(, "draws": {"web": 1e300})"));
  CHECK(contains(m,
                 "d2.json: stages[1].draws.web: draw value 1e+300 must be a finite number "
                 "from 0 to 1e+15"));
  std::string big = run_file();
  big.replace(big.find(R"("count": 600)"), 12, R"("count": 18446744073709551615)");
  m = message_of("d3.json", big);
  CHECK(contains(m, "d3.json: sources[1]: draw value"));
  CHECK(contains(m, "from 0 to 1e+15"));
}

TEST_CASE("json run plan: run-spec fields a run plan does not read are refused, not ignored") {
  // A top-level "meta", "config", "cache", "sample_costs", "chunk_rows", "epoch" or a NumPy
  // "rng" would change nothing in the plan; the file is refused naming the key.
  const std::string base = run_file();  // starts with {"seed": 9, ...
  const std::pair<const char*, const char*> refused[] = {
      {"meta", R"("meta": "m.csv")"},
      {"config", R"("config": "c.json")"},
      {"cache", R"("cache": "manifest.csv")"},
      {"sample_costs", R"("sample_costs": "c.txt")"},
      {"chunk_rows", R"("chunk_rows": 10)"},
      {"epoch", R"("epoch": 2)"},
      {"rng", R"("rng": "numpy")"}};
  for (const auto& [key, entry] : refused) {
    CAPTURE(key);
    const std::string path =
        write(std::string("r_") + key + ".json", "{" + std::string(entry) + ", " + base.substr(1));
    const std::string m = error_message([&] { (void)vbucket::json::load_run_plan_file(path); });
    CHECK(contains(m, std::string("r_") + key + ".json: " + key + ": "));
  }
  // The run plan's own draws: "rng": "fast" is accepted.
  const std::string ok = write("r_fast.json", R"({"rng": "fast", )" + base.substr(1));
  CHECK_NOTHROW((void)vbucket::json::load_run_plan_file(ok));
}

TEST_CASE("json run plan: a rule parameter changed under a resumed run is refused") {
  const std::string a = write("fa.json", run_file());
  std::string text = run_file();
  text.insert(1, R"("fps_max": 8, )");
  const std::string b = write("fb.json", text);
  const auto fa = vbucket::json::load_run_plan_file(a);
  const auto fb = vbucket::json::load_run_plan_file(b);
  vbucket::run_plan ra(fa.sources, fa.stages, fa.options);
  for (int i = 0; i < 25; ++i) ra.advance();  // past stage 2's first step: stage 1 planned
  vbucket::run_plan rb(fb.sources, fb.stages, fb.options);
  CHECK_THROWS_AS(rb.load(ra.state()), vbucket::error);
  vbucket::run_plan rc(fa.sources, fa.stages, fa.options);
  CHECK_NOTHROW(rc.load(ra.state()));
}
