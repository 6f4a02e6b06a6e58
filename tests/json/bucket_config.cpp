/// Tests of the JSON adapter's loader (vbucket/json/bucket_config.hpp): Open-Sora's configs
/// load with Open-Sora's bucket count, and one test per error, each checking that the message
/// names the file and the key.
#include "vbucket/json/bucket_config.hpp"

#include <doctest/doctest.h>

#include <cstdint>      // std::int64_t
#include <fstream>      // std::ifstream
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/bucket/aspect.hpp"  // opensora_v2_tables, opensora_v12_tables

#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;

/// The message of loading `text` as a v2 config named "cfg.json".
std::string json_error(std::string_view text) {
  return error_message([&] {
    (void)vbucket::json::parse_bucket_config(text, vbucket::opensora_v2_tables{}, "cfg.json");
  });
}

std::string data_path(const std::string& file) {
  return std::string(VBUCKET_TEST_DATA_DIR) + "/" + file;
}

/// `num_bucket` from the first line of a golden file.
std::int64_t golden_num_bucket(const std::string& file) {
  std::ifstream in(data_path(file));
  std::string header;
  REQUIRE(std::getline(in, header));
  return nlohmann::json::parse(header).at("num_bucket").get<std::int64_t>();
}

}  // namespace

TEST_CASE("bucket_config: Open-Sora configs load with Open-Sora's num_bucket") {
  SUBCASE("2.0") {
    const auto c = vbucket::json::load_bucket_config(data_path("config_opensora_v2.json"),
                                                     vbucket::opensora_v2_tables{});
    CHECK(static_cast<std::int64_t>(c.num_buckets()) ==
          golden_num_bucket("opensora_v2_golden.jsonl"));
    CHECK(c.num_buckets() == 141);
    const auto& rs = c.resolutions();
    REQUIRE(rs.size() == 3);
    CHECK(rs[0].info.name == "1024px");
    CHECK(rs[1].info.name == "768px");
    CHECK(rs[2].info.name == "256px");
    std::vector<std::int64_t> f256;
    for (const auto& e : rs[2].frames) f256.push_back(e.frames);
    CHECK(f256 == std::vector<std::int64_t>{129, 97, 65, 33, 5, 1});
    // "129": [[0.5, 0.3], 3]
    CHECK(rs[2].frames[0].pair);
    CHECK(rs[2].frames[0].p_resolution == 0.5);
    CHECK(rs[2].frames[0].p_frames == 0.3);
    CHECK(rs[2].frames[0].batch_size == 3);
    CHECK_FALSE(rs[2].frames[2].pair);
  }
  SUBCASE("v1.2") {
    const auto c = vbucket::json::load_bucket_config(data_path("config_opensora_v12.json"),
                                                     vbucket::opensora_v12_tables{});
    CHECK(static_cast<std::int64_t>(c.num_buckets()) ==
          golden_num_bucket("opensora_v12_golden.jsonl"));
    CHECK(c.num_buckets() == 1025);
    std::vector<std::string> names;
    for (const auto& r : c.resolutions()) names.push_back(r.info.name);
    // v1.2 pixel counts: 2048 4194304, 1080p 2073600, 1024 1048576, 720p 921600, 480p 409920,
    // 512 262144, 360p 230400, 240p 102240, 256 65536, 144p 36864.
    CHECK(names == std::vector<std::string>{"2048", "1080p", "1024", "720p", "480p", "512", "360p",
                                            "240p", "256", "144p"});
    // Every id round-trips through key() and find().
    for (std::size_t i = 0; i < c.num_buckets(); ++i) {
      const auto id = static_cast<vbucket::bucket_id>(i);
      const auto k = c.key(id);
      const auto& r = c.resolutions()[static_cast<std::size_t>(k.resolution)];
      const auto& f = r.frames[static_cast<std::size_t>(k.frames_index)];
      const auto& a = r.info.table[static_cast<std::size_t>(k.ratio_index)];
      REQUIRE(c.find(r.info.name, f.frames, a.key) == id);
    }
  }
  SUBCASE("360p example") {
    const auto c = vbucket::json::load_bucket_config(data_path("config_360p_example.json"),
                                                     vbucket::opensora_v12_tables{});
    CHECK(c.num_buckets() == 5 * 17);  // 5 frames keys x 17 ratios of v1.2's 360p
  }
}

TEST_CASE("bucket_config: equal pixel counts keep file order (v1.2 4k and 2880)") {
  const auto tables = vbucket::opensora_v12_tables{};
  const auto a = vbucket::json::parse_bucket_config(
      R"({"4k": {"1": [1.0, 1]}, "2880": {"1": [1.0, 1]}, "2k": {"1": [1.0, 1]}})", tables, "t");
  const auto b = vbucket::json::parse_bucket_config(
      R"({"2k": {"1": [1.0, 1]}, "2880": {"1": [1.0, 1]}, "4k": {"1": [1.0, 1]}})", tables, "t");
  REQUIRE(a.resolutions().size() == 3);
  CHECK(a.resolutions()[0].info.name == "4k");
  CHECK(a.resolutions()[1].info.name == "2880");
  CHECK(a.resolutions()[2].info.name == "2k");
  CHECK(b.resolutions()[0].info.name == "2880");
  CHECK(b.resolutions()[1].info.name == "4k");
  CHECK(b.resolutions()[2].info.name == "2k");
}

// ---------------------------------------------------------------------------------------------
// The JSON loader, one test per error.
// ---------------------------------------------------------------------------------------------

TEST_CASE("bucket_config json: probability below 0") {
  const auto msg = json_error(R"({"256px": {"1": [1.0, 4], "33": [-0.1, 4]}})");
  CHECK(contains(msg, "cfg.json"));
  CHECK(contains(msg, "\"256px\" -> \"33\""));
  CHECK(contains(msg, "probability"));
}

TEST_CASE("bucket_config json: probability above 1") {
  const auto msg = json_error(R"({"256px": {"33": [1.5, 4]}})");
  CHECK(contains(msg, "\"256px\" -> \"33\""));
  CHECK(contains(msg, "1.5"));
}

TEST_CASE("bucket_config json: probability that is not a number") {
  for (const std::string text :
       {R"({"256px": {"33": ["0.5", 4]}})", R"({"256px": {"33": [null, 4]}})",
        R"({"256px": {"33": [true, 4]}})"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "\"256px\" -> \"33\""));
    CHECK(contains(msg, "probability"));
  }
  // NaN is not JSON: it is a parse error.
  CHECK(contains(json_error(R"({"256px": {"33": [NaN, 4]}})"), "malformed JSON"));
}

TEST_CASE("bucket_config json: p_frames out of range") {
  for (const std::string text :
       {R"({"256px": {"33": [[0.5, 1.2], 4]}})", R"({"256px": {"33": [[0.5, -0.2], 4]}})",
        R"({"256px": {"33": [[0.5, "x"], 4]}})"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "\"256px\" -> \"33\""));
    CHECK((contains(msg, "frames probability") || contains(msg, "p_frames")));
  }
  // p_resolution in a pair is named too.
  CHECK(contains(json_error(R"({"256px": {"33": [[1.2, 0.5], 4]}})"), "\"256px\" -> \"33\""));
  // A pair must be two numbers.
  CHECK(contains(json_error(R"({"256px": {"33": [[0.5], 4]}})"), "\"256px\" -> \"33\""));
  CHECK(contains(json_error(R"({"256px": {"33": [[0.5, 0.5, 0.5], 4]}})"), "\"256px\" -> \"33\""));
}

TEST_CASE("bucket_config json: batch size 0") {
  const auto msg = json_error(R"({"256px": {"65": [1.0, 0]}})");
  CHECK(contains(msg, "\"256px\" -> \"65\""));
  CHECK(contains(msg, "batch size"));
}

TEST_CASE("bucket_config json: negative batch size") {
  const auto msg = json_error(R"({"256px": {"65": [1.0, -2]}})");
  CHECK(contains(msg, "\"256px\" -> \"65\""));
  CHECK(contains(msg, "-2"));
}

TEST_CASE("bucket_config json: fractional batch size") {
  for (const std::string text :
       {R"({"256px": {"65": [1.0, 2.5]}})", R"({"256px": {"65": [1.0, 1e30]}})",
        R"({"256px": {"65": [1.0, "4"]}})", R"({"256px": {"65": [1.0, [4]]}})"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "\"256px\" -> \"65\""));
    CHECK(contains(msg, "batch size"));
  }
}

TEST_CASE("bucket_config json: batch size too large") {
  for (const std::string text : {R"({"256px": {"65": [1.0, 2147483649]}})",
                                 R"({"256px": {"65": [1.0, 18446744073709551615]}})",
                                 R"({"256px": {"65": [1.0, -9223372036854775808]}})"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "\"256px\" -> \"65\""));
    CHECK(contains(msg, "batch size"));
  }
}

TEST_CASE("bucket_config json: null batch size with non-zero probability") {
  const auto msg = json_error(R"({"256px": {"65": [0.1, null]}})");
  CHECK(contains(msg, "\"256px\" -> \"65\""));
  CHECK(contains(msg, "null"));
  CHECK(contains(json_error(R"({"256px": {"65": [[0.1, 0.5], null]}})"), "\"256px\" -> \"65\""));
  // Probability 0 with null is a disabled bucket, as in Open-Sora's "408": [0.0, null].
  const auto c = vbucket::json::parse_bucket_config(R"({"256px": {"65": [0.0, null]}})",
                                                    vbucket::opensora_v2_tables{}, "t");
  CHECK(c.batch_size(0) == 0);
}

TEST_CASE("bucket_config json: unknown resolution") {
  const auto msg = json_error(R"({"256px": {"1": [1.0, 4]}, "300x": {"1": [1.0, 4]}})");
  CHECK(contains(msg, "cfg.json"));
  CHECK(contains(msg, "\"300x\""));
  const auto msg2 = error_message([] {
    (void)vbucket::json::parse_bucket_config(R"({"256px": {"1": [1.0, 4]}})",
                                             vbucket::opensora_v12_tables{}, "v12.json");
  });
  CHECK(contains(msg2, "v12.json"));
  CHECK(contains(msg2, "\"256px\""));
}

TEST_CASE("bucket_config json: duplicate frames key") {
  // "01" and "1" are different JSON keys but the same frames key.
  const auto msg = json_error(R"({"256px": {"1": [1.0, 4], "01": [1.0, 4]}})");
  CHECK(contains(msg, "\"256px\""));
  CHECK(contains(msg, "duplicate"));
}

TEST_CASE("bucket_config json: frames key \"0\"") {
  CHECK(contains(json_error(R"({"256px": {"0": [1.0, 4]}})"), "\"256px\" -> \"0\""));
}

TEST_CASE("bucket_config json: frames key \"-1\"") {
  CHECK(contains(json_error(R"({"256px": {"-1": [1.0, 4]}})"), "\"256px\" -> \"-1\""));
}

TEST_CASE("bucket_config json: frames key \"abc\"") {
  CHECK(contains(json_error(R"({"256px": {"abc": [1.0, 4]}})"), "\"256px\" -> \"abc\""));
}

TEST_CASE("bucket_config json: frames key \"1.5\"") {
  CHECK(contains(json_error(R"({"256px": {"1.5": [1.0, 4]}})"), "\"256px\" -> \"1.5\""));
  for (const std::string key : {"", " 1", "1 ", "+1", "1e2", "99999999999"}) {
    CAPTURE(key);
    const std::string text = std::string(R"({"256px": {")") + key + R"(": [1.0, 4]}})";
    CHECK(contains(json_error(text), std::string("\"256px\" -> \"") + key + "\""));
  }
}

TEST_CASE("bucket_config json: empty config") {
  const auto msg = json_error("{}");
  CHECK(contains(msg, "cfg.json"));
  CHECK(contains(msg, "no buckets"));
}

TEST_CASE("bucket_config json: empty resolution object") {
  const auto msg = json_error(R"({"256px": {"1": [1.0, 4]}, "768px": {}})");
  CHECK(contains(msg, "\"768px\""));
  CHECK(contains(msg, "no frames keys"));
}

TEST_CASE("bucket_config json: resolution that is not an object") {
  for (const std::string text :
       {R"({"256px": [1.0, 4]})", R"({"256px": 1})", R"({"256px": null})"}) {
    CAPTURE(text);
    CHECK(contains(json_error(text), "\"256px\""));
  }
}

TEST_CASE("bucket_config json: wrong entry shape") {
  for (const std::string text :
       {R"({"256px": {"5": [1.0]}})", R"({"256px": {"5": [1.0, 4, 2]}})",
        R"({"256px": {"5": 1.0}})", R"({"256px": {"5": {"p": 1.0, "bs": 4}}})",
        R"({"256px": {"5": []}})", R"({"256px": {"5": null}})"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "\"256px\" -> \"5\""));
  }
}

TEST_CASE("bucket_config json: malformed JSON") {
  for (const std::string text : {R"({"256px": {"1": [1.0, 4]})", R"({"256px": {"1": [1.0, 4],}})",
                                 "", "{'256px': {}}", R"({"256px": {"1": [1.0, 4]}} trailing)"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "cfg.json"));
    CHECK(contains(msg, "malformed JSON"));
  }
}

TEST_CASE("bucket_config json: duplicate JSON key") {
  const auto msg = json_error(R"({"256px": {"1": [1.0, 4]}, "256px": {"5": [1.0, 4]}})");
  CHECK(contains(msg, "cfg.json"));
  CHECK(contains(msg, "duplicate key \"256px\""));
  const auto msg2 = json_error(R"({"256px": {"5": [1.0, 4], "5": [0.5, 4]}})");
  CHECK(contains(msg2, "duplicate key \"5\""));
  // The same key in two different objects is not a duplicate.
  CHECK_NOTHROW((void)vbucket::json::parse_bucket_config(
      R"({"256px": {"5": [1.0, 4]}, "768px": {"5": [1.0, 4]}})", vbucket::opensora_v2_tables{},
      "t"));
}

TEST_CASE("bucket_config json: top level that is not an object") {
  for (const std::string text :
       {"[]", R"([{"256px": {"1": [1.0, 4]}}])", "3", R"("256px")", "null"}) {
    CAPTURE(text);
    const auto msg = json_error(text);
    CHECK(contains(msg, "cfg.json"));
    CHECK(contains(msg, "object"));
  }
}

TEST_CASE("bucket_config json: unreadable file") {
  const std::string path = data_path("no_such_dir/no_such_config.json");
  const auto msg = error_message(
      [&] { (void)vbucket::json::load_bucket_config(path, vbucket::opensora_v2_tables{}); });
  CHECK(contains(msg, path));
  // A directory cannot be read as a file either.
  const auto msg2 = error_message([&] {
    (void)vbucket::json::load_bucket_config(std::string(VBUCKET_TEST_DATA_DIR),
                                            vbucket::opensora_v2_tables{});
  });
  CHECK(contains(msg2, VBUCKET_TEST_DATA_DIR));
  // ... and says so, not libstdc++'s "basic_filebuf::underflow" (regression)
  CHECK(contains(msg2, "is a directory"));
  CHECK_FALSE(contains(msg2, "basic_filebuf"));
  const auto msg3 =
      error_message([&] { (void)vbucket::json::read_file(std::string(VBUCKET_TEST_DATA_DIR)); });
  CHECK(msg3 == std::string(VBUCKET_TEST_DATA_DIR) +
                    ": is a directory, not a file (give the "
                    "file's path)");
}
