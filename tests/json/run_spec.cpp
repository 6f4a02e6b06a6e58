/// Tests of vbucket/run/run_spec.hpp and the JSON adapter's run files (vbucket/json/run_spec.hpp):
/// the defaults are the library's, every value error names its key and value, the combinations
/// that are not a run are refused, a run file reads as the same spec as its map, and a sampler
/// made from a spec gives the batches of one made by hand with the same options.
#include "vbucket/json/run_spec.hpp"

#include <doctest/doctest.h>

#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem::temp_directory_path
#include <fstream>     // std::ofstream
#include <map>         // std::map
#include <memory>      // std::make_shared
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/bucket/csv.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/load/loader_options.hpp"  // the outage deadline's default
#include "vbucket/run/run_spec.hpp"
#include "vbucket/sample/any_sampler.hpp"
#include "vbucket/sample/batch_sampler.hpp"

#include "vbucket_test/data_files.hpp"
#include "vbucket_test/errors.hpp"

namespace {

using vbucket_test::contains;
using vbucket_test::error_message;
using vbucket_test::test_data;

/// A file with `text` in the temporary directory.
std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("vbucket_run_spec_" + name);
  std::ofstream(path) << text;
  return path.string();
}

/// Every batch of every rank of an epoch: (bucket, indices) in step order.
template <class Sampler>
std::vector<std::vector<std::uint32_t>> all_batches(Sampler& s, std::uint64_t epoch) {
  s.set_epoch(epoch);
  std::vector<std::vector<std::uint32_t>> out;
  for (const vbucket::batch& b : s) {
    out.emplace_back(b.indices.begin(), b.indices.end());
    out.back().push_back(static_cast<std::uint32_t>(b.bucket));
  }
  return out;
}

}  // namespace

TEST_CASE("run_spec: the defaults are the library's") {
  const vbucket::run_spec s;
  const vbucket::sampler_options o = s.to_sampler_options();
  const vbucket::sampler_options d;
  CHECK(o.seed == d.seed);
  CHECK(o.world == d.world);
  CHECK(o.rank == d.rank);
  CHECK(o.rng == d.rng);
  CHECK(o.policy == d.policy);
  CHECK(o.drop_last == d.drop_last);
  CHECK(o.balance_group == d.balance_group);
  CHECK(o.threads == d.threads);
  CHECK(o.batching == d.batching);
  CHECK(o.token_budget == d.token_budget);
  CHECK(o.drop_oversized == d.drop_oversized);
  CHECK(o.tokens == d.tokens);
  CHECK(s.v2_rule().fps_max == vbucket::opensora_v2_rule{}.fps_max);
  CHECK(s.v12_rule().frame_interval == vbucket::opensora_v12_rule{}.frame_interval);
  // the help of every valued field names its default, the one of a default spec
  for (const vbucket::run_field& f : vbucket::run_spec::fields()) {
    const std::string d_text = vbucket::field_text(s, f);
    if (f.kind != vbucket::field_kind::flag && !d_text.empty()) {
      CHECK(contains(vbucket::field_help(f), "(default: " + d_text + ")"));
    }
    if (f.kind == vbucket::field_kind::choice) {
      CHECK(vbucket::detail::spec_is_choice(f.choices, d_text));
    }
  }
}

TEST_CASE("run_spec: from_map reads every field, to_map gives them back") {
  const std::map<std::string, std::string> m = {{"config", "c.json"},
                                                {"meta", "m.csv"},
                                                {"rule", "opensora-v1.2"},
                                                {"frame_interval", "3"},
                                                {"rng", "fast"},
                                                {"seed", "18446744073709551615"},
                                                {"epoch", "7"},
                                                {"world", "8"},
                                                {"rank", "5"},
                                                {"policy", "downgrade"},
                                                {"drop_last", "true"},
                                                {"balance_group", "48"},
                                                {"threads", "2"},
                                                {"compression", "4,16,16"},
                                                {"patch", "1,1,1"},
                                                {"chunk_rows", "1000"}};
  const vbucket::run_spec s = vbucket::run_spec::from_map(m);
  CHECK(s.rule == vbucket::rule_kind::opensora_v12);
  CHECK(s.v12_rule().frame_interval == 3);
  CHECK(s.rng == vbucket::rng_mode::fast);
  CHECK(s.seed.to_string() == "18446744073709551615");
  CHECK(s.epoch == 7);
  CHECK(s.world == 8);
  CHECK(s.rank == 5);
  CHECK(s.batches().policy == vbucket::incomplete_policy::downgrade);
  CHECK(s.drop_last);
  CHECK(s.batches().balance_group == 48);
  CHECK(s.tokens == vbucket::token_formula{4, 16, 16, 1, 1, 1});
  CHECK(s.chunk_rows == 1000);
  CHECK(vbucket::run_spec{}.chunk_rows == vbucket::streamed_meta_csv{}.chunk_rows);
  const auto back = s.to_map();
  for (const auto& [k, v] : m) CHECK(back.at(k) == v);
  CHECK(vbucket::run_spec::from_map(back).to_map() == back);
  // An optional field left unset is not listed (its text would be the default in effect).
  const auto defaults = vbucket::run_spec{}.to_map();
  for (const char* unset : {"fps_max", "frame_interval", "policy", "config", "meta", "cache"})
    CHECK_MESSAGE(defaults.count(unset) == 0, unset);
  CHECK(defaults.at("world") == "1");
}

TEST_CASE("run_spec: drop_last alone means policy drop; balance means the default group") {
  auto s = vbucket::run_spec::from_map({{"drop_last", "true"}, {"balance", "true"}});
  CHECK(s.batches().policy == vbucket::incomplete_policy::drop);
  CHECK(s.batches().balance_group == vbucket::default_balance_group);
  s = vbucket::run_spec::from_map({{"drop_last", "true"}, {"policy", "pad"}});
  CHECK(s.batches().policy == vbucket::incomplete_policy::pad);
}

TEST_CASE("run_spec: a bad value names the key and the value") {
  auto msg = [](const std::string& key, const std::string& value) {
    return error_message([&] { (void)vbucket::run_spec::from_map({{key, value}}); });
  };
  CHECK(msg("seed", "-1") ==
        std::string("seed: ") + error_message([] { (void)vbucket::big_seed::parse("-1"); }));
  CHECK(msg("world", "0") == "world: expected an integer from 1 to 16777216, got \"0\"");
  CHECK(msg("chunk_rows", "0") ==
        "chunk_rows: expected an integer from 1 to 4294967296, got \"0\"");
  CHECK(msg("fps_max", "nan") == "fps_max: expected a positive number, got \"nan\"");
  CHECK(msg("rule", "opensora-v3") ==
        "rule: unknown rule \"opensora-v3\" (expected opensora-v2 or opensora-v1.2)");
  CHECK(msg("rng", "python") == "rng: unknown random source \"python\" (expected numpy or fast)");
  CHECK(msg("policy", "x") == "policy: unknown policy \"x\" (expected pad, drop or downgrade)");
  CHECK(msg("drop_last", "yes") == "drop_last: expected true or false, got \"yes\"");
  CHECK(msg("patch", "1,2") ==
        "patch: expected three integers from 1 to 65536 as T,H,W, got \"1,2\"");
  CHECK(msg("compression", "4,0,8") ==
        "compression: expected three integers from 1 to 65536 as T,H,W, got \"4,0,8\": "
        "compression_h must be an integer from 1 to 65536, got 0");
  CHECK(msg("compression", "1,2,3,4") ==
        "compression: expected three integers from 1 to 65536 as T,H,W, got \"1,2,3,4\"");
  CHECK(contains(msg("sources", "x"), "unknown key \"sources\" (known: config, meta, "));
  // as the CLI names them
  const vbucket::field_naming flags{vbucket::field_naming::style::flag, {}};
  CHECK(error_message([&] {
          (void)vbucket::run_spec::from_map({{"fps_max", "0"}}, flags);
        }) == "--fps-max: expected a positive number, got \"0\"");
}

TEST_CASE("run_spec: combinations that are not a run are refused") {
  auto msg = [](const std::map<std::string, std::string>& m) {
    return error_message([&] { (void)vbucket::run_spec::from_map(m); });
  };
  CHECK(msg({{"rule", "opensora-v1.2"}, {"fps_max", "8"}}) ==
        "fps_max applies to rule opensora-v2 only");
  CHECK(msg({{"frame_interval", "2"}}) == "frame_interval applies to rule opensora-v1.2 only");
  CHECK(msg({{"world", "2"}, {"rank", "2"}}) == "rank 2 is not below world 2 (ranks are 0 to 1)");
  CHECK(contains(msg({{"rng", "fast"}, {"seed", "18446744073709551616"}}), "seed: seed "));
  CHECK(msg({{"batching", "packed"}}) ==
        "batching packed needs token_budget B (the token budget: latent tokens per batch)");
  CHECK(contains(msg({{"batching", "packed"}, {"token_budget", "10"}, {"policy", "pad"}}),
                 "policy applies to batching fixed only"));
  CHECK(msg({{"token_budget", "10"}}) == "token_budget applies to batching packed only");
  CHECK(msg({{"drop_oversized", "true"}}) == "drop_oversized applies to batching packed only");
  const vbucket::field_naming flags{vbucket::field_naming::style::flag, {}};
  CHECK(error_message([&] {
          (void)vbucket::run_spec::from_map({{"token_budget", "1"}}, flags);
        }) == "--token-budget applies to --batching packed only");
}

TEST_CASE("json run file: the same spec as its map; errors name the file and the key") {
  const std::string path =
      write_temp("a.json",
                 R"({"config": "c.json", "meta": "/abs/m.csv", "seed": "1180591620717411303427",
          "epoch": 2, "world": 4, "rank": 3, "balance": true, "compression": [4, 16, 16],
          "fps_max": 12.5, "threads": null})");
  const vbucket::run_spec s = vbucket::json::load_run_spec(path);
  CHECK(s.config == (std::filesystem::path(path).parent_path() / "c.json").string());
  CHECK(s.meta == "/abs/m.csv");
  CHECK(s.seed.to_string() == "1180591620717411303427");
  CHECK(s.epoch == 2);
  CHECK(s.world == 4);
  CHECK(s.rank == 3);
  CHECK(s.batches().balance_group == vbucket::default_balance_group);
  CHECK(s.tokens.compression_h == 16);
  CHECK(s.v2_rule().fps_max == 12.5);
  CHECK(s.threads == 0);

  auto msg = [](const std::string& name, const std::string& text) {
    const std::string p = write_temp(name, text);
    return error_message([&] { (void)vbucket::json::load_run_spec(p); });
  };
  const std::string dir = std::filesystem::temp_directory_path().string() + "/vbucket_run_spec_";
  CHECK(msg("b.json", R"({"world": 0})") ==
        dir + "b.json: key \"world\": expected an integer from 1 to 16777216, got \"0\"");
  CHECK(msg("c.json", R"({"world": "two"})") ==
        dir + "c.json: key \"world\": expected an integer, got \"two\"");
  CHECK(contains(msg("d.json", R"({"seed": 1e30})"), "key \"seed\": expected an integer (a seed"));
  CHECK(contains(msg("e.json", R"({"worlds": 2})"), dir + "e.json: unknown key \"worlds\""));
  CHECK(msg("f.json", R"({"balance": 1})") ==
        dir + "f.json: key \"balance\": expected true or false, got 1");
  CHECK(msg("g.json", R"([1])") == dir +
                                       "g.json: a run file must be a JSON object of run spec "
                                       "keys (config, meta, seed, ...)");
  CHECK(msg("h.json", R"({"rank": 4, "world": 4})") ==
        dir + "h.json: rank 4 is not below world 4 (ranks are 0 to 3)");
  CHECK(contains(msg("i.json", R"({"seed": 1, "seed": 2})"), "duplicate key \"seed\""));
}

TEST_CASE("run_spec: media fields (timeouts, retries, outage deadline) read, checked, defaulted") {
  // The defaults are the ones the loader and the adapters start from (vbucket::defaults).
  const vbucket::run_spec d;
  CHECK(d.timeout == vbucket::defaults::timeout_seconds);
  CHECK(d.io_timeout == vbucket::defaults::io_timeout_seconds);
  CHECK(d.retries == static_cast<std::uint32_t>(vbucket::defaults::retries));
  CHECK(d.outage_deadline == vbucket::loader_options{}.outage_deadline_seconds);
  for (const char* name : {"timeout", "io_timeout", "retries", "outage_deadline"}) {
    CAPTURE(name);
    const vbucket::run_field* f = vbucket::run_spec::find(name);
    REQUIRE(f != nullptr);
    CHECK(f->use == vbucket::field_use::media);
    CHECK(contains(vbucket::field_help(*f), "(default: "));
  }
  CHECK(vbucket::run_spec::find("seed")->use == vbucket::field_use::plan);
  CHECK(vbucket::field_help(*vbucket::run_spec::find("timeout")).ends_with("(default: 120)"));

  const auto s = vbucket::run_spec::from_map(
      {{"timeout", "3.5"}, {"io_timeout", "0.25"}, {"retries", "0"}, {"outage_deadline", "60"}});
  CHECK(s.timeout == 3.5);
  CHECK(s.io_timeout == 0.25);
  CHECK(s.retries == 0);
  CHECK(s.outage_deadline == 60.0);
  CHECK(vbucket::run_spec::from_map(s.to_map()).to_map() == s.to_map());

  auto msg = [](const std::string& key, const std::string& value) {
    return error_message([&] { (void)vbucket::run_spec::from_map({{key, value}}); });
  };
  for (const std::string key : {"timeout", "io_timeout", "outage_deadline"})
    for (const std::string bad : {"nan", "inf", "-1", "0", "1000001", "1e300", "", "ten"}) {
      CAPTURE(key);
      CAPTURE(bad);
      CHECK(msg(key, bad) ==
            key + ": expected a positive number up to 1000000, got \"" + bad + "\"");
    }
  CHECK(vbucket::run_spec::from_map({{"timeout", "1000000"}}).timeout == 1e6);  // the bound
  CHECK(msg("retries", "101") == "retries: expected an integer from 0 to 100, got \"101\"");
  CHECK(msg("retries", "-1") == "retries: expected an integer from 0 to 100, got \"-1\"");
  CHECK(msg("retries", "1.5") == "retries: expected an integer from 0 to 100, got \"1.5\"");
  const vbucket::field_naming flags{vbucket::field_naming::style::flag, {}};
  CHECK(error_message([&] {
          (void)vbucket::run_spec::from_map({{"io_timeout", "-2"}}, flags);
        }) == "--io-timeout: expected a positive number up to 1000000, got \"-2\"");

  // A run file: the same values, errors naming the file and the key.
  const std::string path = write_temp(
      "media.json",
      R"({"timeout": 3.5, "io_timeout": 0.25, "retries": 0, "outage_deadline": 60, "seed": 1})");
  const vbucket::run_spec f = vbucket::json::load_run_spec(path);
  CHECK(f.timeout == s.timeout);
  CHECK(f.io_timeout == s.io_timeout);
  CHECK(f.retries == s.retries);
  CHECK(f.outage_deadline == s.outage_deadline);
  auto file_msg = [](const std::string& name, const std::string& text) {
    const std::string p = write_temp(name, text);
    return error_message([&] { (void)vbucket::json::load_run_spec(p); });
  };
  const std::string dir = std::filesystem::temp_directory_path().string() + "/vbucket_run_spec_";
  CHECK(file_msg("m1.json", R"({"timeout": -1})") ==
        dir + "m1.json: key \"timeout\": expected a positive number up to 1000000, got \"-1\"");
  CHECK(file_msg("m2.json", R"({"io_timeout": 1e7})") ==
        dir +
            "m2.json: key \"io_timeout\": expected a positive number up to 1000000, got "
            "\"1e+07\"");
  CHECK(file_msg("m3.json", R"({"outage_deadline": "10"})") ==
        dir + "m3.json: key \"outage_deadline\": expected a number, got \"10\"");
  CHECK(file_msg("m4.json", R"({"retries": 2.5})") ==
        dir + "m4.json: key \"retries\": expected an integer, got 2.5");
}

TEST_CASE("run_spec: a sampler made from a run file gives the batches of one made by hand") {
  // by hand: the options written out, the rule and the sources chosen here
  const auto config =
      std::make_shared<const vbucket::bucket_config>(vbucket::json::load_bucket_config(
          test_data("config_360p_example.json"), vbucket::opensora_v2_tables{}));
  const vbucket::meta_table meta = vbucket::load_meta_csv(vbucket_test::sample_meta_csv());
  for (const char* seed : {"5", "1180591620717411303427"}) {
    CAPTURE(seed);
    const std::string path = write_temp(
        "parity.json", std::string(R"({"config": ")") + test_data("config_360p_example.json") +
                           R"(", "meta": ")" + vbucket_test::sample_meta_csv() +
                           R"(", "rng": "numpy", "seed": ")" + seed +
                           R"(", "world": 3, "rank": 2, "balance_group": 12,
                           "policy": "downgrade", "fps_max": 8})");
    const vbucket::run_spec spec = vbucket::json::load_run_spec(path);
    const auto from_spec = spec.visit_rule([&](const auto& tables, const auto& rule) {
      const auto cfg = std::make_shared<const vbucket::bucket_config>(
          vbucket::json::load_bucket_config(spec.config, tables));
      const vbucket::meta_table m = vbucket::load_meta_csv(spec.meta);
      return spec.visit_sources([&](const vbucket::sampler_options& o, auto sources) {
        vbucket::batch_sampler s(m, cfg, rule, o, sources);
        return all_batches(s, 1);
      });
    });
    vbucket::sampler_options o{.world = 3, .rank = 2};
    o.rng = vbucket::rng_mode::numpy;
    o.policy = vbucket::incomplete_policy::downgrade;
    o.balance_group = 12;
    const vbucket::big_seed big = vbucket::big_seed::parse(seed);
    std::vector<std::vector<std::uint32_t>> by_hand;
    if (std::string(seed) == "5") {
      o.seed = 5;
      vbucket::batch_sampler s(meta, config, vbucket::opensora_v2_rule{8.0}, o);
      by_hand = all_batches(s, 1);
    } else {
      o.seed = vbucket::plan_seed(big);
      vbucket::batch_sampler s(meta, config, vbucket::opensora_v2_rule{8.0}, o,
                               vbucket::numpy_seed_family{big});
      by_hand = all_batches(s, 1);
    }
    CHECK(!by_hand.empty());
    CHECK(from_spec == by_hand);
    // the type-erased sampler of the spec (what the CLI and Python make)
    const auto any = vbucket::make_any_sampler(
        std::make_shared<const vbucket::meta_table>(vbucket::load_meta_csv(spec.meta)),
        vbucket::json::load_config(spec), spec);
    any->set_epoch(1);
    std::vector<std::vector<std::uint32_t>> erased;
    for (const vbucket::batch& b : any->batches()) {
      erased.emplace_back(b.indices.begin(), b.indices.end());
      erased.back().push_back(static_cast<std::uint32_t>(b.bucket));
    }
    CHECK(erased == by_hand);
  }
}
