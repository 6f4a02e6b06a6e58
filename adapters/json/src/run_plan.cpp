// vbucket::run's JSON part: the reader of a multi-source, multi-stage run file (declared in
// adapters/json/include/vbucket/json/run_plan.hpp).
#include "vbucket/json/run_plan.hpp"

#include <cstdint>      // std::uint64_t, std::uint32_t
#include <filesystem>   // std::filesystem::path
#include <memory>       // std::make_shared
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include <nlohmann/json.hpp>

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/csv.hpp"          // load_meta_csv
#include "vbucket/json/bucket_config.hpp"  // parse_json, read_file, parse_bucket_config
#include "vbucket/json/run_spec.hpp"       // run_spec_entries

namespace vbucket::json {

[[nodiscard]] bool is_run_plan_text(std::string_view text, const std::string& where) {
  const nlohmann::ordered_json j = parse_json(text, where);
  return j.is_object() && (j.contains("sources") || j.contains("stages"));
}

namespace {

constexpr std::string_view run_plan_keys[] = {"sources", "stages", "epoch_samples", "replacement"};

[[noreturn]] void run_file_fail(const std::string& where, const std::string& key,
                                const std::string& what) {
  throw error(where + ": " + key + ": " + what);
}

std::string shown(const nlohmann::ordered_json& v) {
  const std::string s = v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::uint64_t run_file_uint(const nlohmann::ordered_json& v, const std::string& where,
                            const std::string& key, std::uint64_t max = ~std::uint64_t{0}) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > max)
    run_file_fail(where, key,
                  "expected an integer from 0 to " + std::to_string(max) + ", got " + shown(v));
  return v.get<std::uint64_t>();
}

double run_file_number(const nlohmann::ordered_json& v, const std::string& where,
                       const std::string& key) {
  if (!v.is_number()) run_file_fail(where, key, "expected a number, got " + shown(v));
  return v.get<double>();
}

std::string run_file_string(const nlohmann::ordered_json& v, const std::string& where,
                            const std::string& key) {
  if (!v.is_string()) run_file_fail(where, key, "expected a string, got " + shown(v));
  return v.get<std::string>();
}

std::string run_file_path(const nlohmann::ordered_json& v, const std::string& where,
                          const std::string& key) {
  std::string p = run_file_string(v, where, key);
  if (!p.empty() && std::filesystem::path(p).is_relative())
    p = (std::filesystem::path(where).parent_path() / p).string();
  return p;
}

/// A config: an inline object, or a path (relative to the run file).
template <class Tables>
bucket_config run_file_config(const nlohmann::ordered_json& v, const std::string& where,
                              const std::string& key, const Tables& tables) {
  if (v.is_object()) {
    try {
      return parse_bucket_config(v.dump(), tables, where + ": " + key);
    } catch (const error& e) {
      throw error(std::string(e.what()));
    }
  }
  if (!v.is_string())
    run_file_fail(where, key, "expected a config object or a path, got " + shown(v));
  try {
    return load_bucket_config(run_file_path(v, where, key), tables);
  } catch (const error& e) {  // the config file's own error, after the run file's key
    run_file_fail(where, key, e.what());
  }
}

/// {"weight": x} | {"count": n} | {"repeat": r} | x (a weight) | absent (repeat 1).
source_draw run_file_draw(const nlohmann::ordered_json& v, const std::string& where,
                          const std::string& key) {
  source_draw d;
  if (v.is_number()) {
    d.kind = draw_kind::weight;
    d.value = run_file_number(v, where, key);
  } else if (v.is_object()) {
    int given = 0;
    for (const auto& [k, x] : v.items()) {
      if (k == "weight")
        d.kind = draw_kind::weight;
      else if (k == "count")
        d.kind = draw_kind::count;
      else if (k == "repeat")
        d.kind = draw_kind::repeat;
      else
        run_file_fail(where, key + "." + k, "unknown key (expected weight, count or repeat)");
      d.value = k == "count" ? static_cast<double>(run_file_uint(x, where, key + "." + k))
                             : run_file_number(x, where, key + "." + k);
      ++given;
    }
    if (given != 1) run_file_fail(where, key, "give exactly one of weight, count, repeat");
  } else {
    run_file_fail(where, key,
                  "expected a weight or {\"weight\"|\"count\"|\"repeat\": x}, got " + shown(v));
  }
  if (const std::string why = d.problem(); !why.empty()) run_file_fail(where, key, why);
  return d;
}

}  // namespace

run_plan_file load_run_plan_file(const std::string& path) {
  const std::string text = read_file(path);
  const nlohmann::ordered_json j = parse_json(text, path);
  if (!j.is_object()) throw error(path + ": a run file must be a JSON object");
  run_plan_file out;
  // The run spec's fields: everything but the run plan's keys, read by the run-spec reader.
  nlohmann::ordered_json rest = nlohmann::ordered_json::object();
  for (const auto& [k, v] : j.items()) {
    bool plan_key = false;
    for (const std::string_view p : run_plan_keys) plan_key = plan_key || k == p;
    if (!plan_key) rest[k] = v;
  }
  const field_naming name{field_naming::style::file_key, path};
  for (auto& [key, value] : run_spec_entries(rest.dump(), path)) {
    // Run-spec fields a run plan does not read are refused rather than ignored: a run plan's
    // sources and stages name their own metadata and configs, it draws with the keyed fast
    // source, starts at epoch 0 (resumed by its state) and takes no latent cache or costs.
    if (key == "meta" || key == "config")
      run_file_fail(path, key,
                    "not read by a run plan (each source names its csv, each source or stage "
                    "its config)");
    if (key == "cache" || key == "sample_costs" || key == "chunk_rows")
      run_file_fail(path, key, "not supported by a run plan (sources and stages) yet");
    if (key == "epoch")
      run_file_fail(path, key, "a run plan starts at epoch 0; resume one with its state");
    if (key == "rng" && value != "fast")
      run_file_fail(
          path, key,
          "a run plan draws with the keyed fast source (\"fast\"), got \"" + value + "\"");
    out.spec.set(key, value, name);
  }
  if (out.spec.rank >= out.spec.world)
    throw error(path + ": rank: " + std::to_string(out.spec.rank) + " is not below world " +
                std::to_string(out.spec.world));
  const auto seed = seed_u64(out.spec.seed);
  if (!seed) throw error(path + ": seed: a run plan's seed must be below 2^64");
  out.options.seed = *seed;
  out.options.world = out.spec.world;
  out.options.drop_last = out.spec.drop_last;
  out.options.threads = out.spec.threads;

  // Draw options shared by every stage unless a stage sets its own.
  std::uint64_t epoch_samples = 0;
  bool replacement = false;
  if (j.contains("epoch_samples"))
    epoch_samples = run_file_uint(j["epoch_samples"], path, "epoch_samples", max_epoch_samples);
  if (j.contains("replacement")) {
    if (!j["replacement"].is_boolean())
      run_file_fail(path, "replacement", "expected true or false, got " + shown(j["replacement"]));
    replacement = j["replacement"].get<bool>();
  }

  out.spec.visit_rule([&](const auto& tables, const auto& rule) {
    // Sources.
    if (!j.contains("sources") || !j["sources"].is_array() || j["sources"].empty())
      run_file_fail(path, "sources", "expected a non-empty list of sources");
    std::vector<source_draw> draws;
    bool any_draw = false;
    for (std::size_t i = 0; i < j["sources"].size(); ++i) {
      const auto& s = j["sources"][i];
      const std::string key = "sources[" + std::to_string(i) + "]";
      if (!s.is_object()) run_file_fail(path, key, "expected an object, got " + shown(s));
      run_source src;
      std::optional<source_draw> d;
      std::optional<std::string> csv;
      for (const auto& [k, v] : s.items()) {
        const std::string kk = key + "." + k;
        if (k == "name") {
          src.name = run_file_string(v, path, kk);
        } else if (k == "csv") {
          csv = run_file_path(v, path, kk);
        } else if (k == "parquet") {
          run_file_fail(path, kk, "Parquet sources are not read by this build (give \"csv\")");
        } else if (k == "weight" || k == "count" || k == "repeat") {
          if (d) run_file_fail(path, kk, "give one of weight, count, repeat");
          nlohmann::ordered_json one = nlohmann::ordered_json::object();
          one[k] = v;
          d = run_file_draw(one, path, key);
        } else if (k == "config") {
          src.config = run_file_config(v, path, kk, tables);
        } else if (k == "rule") {
          const std::string r = run_file_string(v, path, kk);
          const auto kind = parse_rule_name(r);
          if (!kind || *kind != out.spec.rule)
            run_file_fail(path, kk,
                          "\"" + r + "\": a source's rule must be the run's (\"" +
                              std::string(rule_name(out.spec.rule)) + "\")");
        } else {
          run_file_fail(path, kk,
                        "unknown key (a source has name, csv, weight|count|repeat, config, "
                        "rule)");
        }
      }
      if (src.name.empty()) run_file_fail(path, key + ".name", "missing (a source needs a name)");
      if (!csv) run_file_fail(path, key + ".csv", "missing (the source's metadata CSV)");
      try {
        src.table = std::make_shared<const meta_table>(load_meta_csv(*csv));
      } catch (const error& e) {  // the CSV's own error (file, row, column), after the key
        run_file_fail(path, key + ".csv", e.what());
      }
      out.csvs.push_back(*csv);
      src.assign = rule_assigner(rule);
      // The name `run_source` gives its default rule, so that a run written in C++ with the
      // default rule has the same settings hash (and state line) as its run file.
      if (out.spec.rule != rule_kind::opensora_v2)
        src.rule_name = std::string(rule_name(out.spec.rule));
      // A rule's parameters name it too: a resumed run with another fps_max is refused.
      if (out.spec.fps_max)
        src.rule_name += "/fps_max=" + vbucket::detail::shortest_text(*out.spec.fps_max);
      if (out.spec.frame_interval)
        src.rule_name += "/frame_interval=" + std::to_string(*out.spec.frame_interval);
      any_draw = any_draw || d.has_value();
      draws.push_back(d.value_or(source_draw{}));
      out.sources.push_back(std::move(src));
    }
    draw_spec base;
    if (any_draw) base.draws = draws;
    base.epoch_samples = epoch_samples;
    base.replacement = replacement;

    // Stages.
    if (!j.contains("stages") || !j["stages"].is_array() || j["stages"].empty())
      run_file_fail(path, "stages", "expected a non-empty list of stages");
    for (std::size_t i = 0; i < j["stages"].size(); ++i) {
      const auto& s = j["stages"][i];
      const std::string key = "stages[" + std::to_string(i) + "]";
      if (!s.is_object()) run_file_fail(path, key, "expected an object, got " + shown(s));
      run_stage st;
      st.draws = base;
      // The stage's policy, balance, batching and budget: the run's, and the stage's own keys
      // read through the run spec's field table (the same kinds and ranges as the top level).
      run_spec own = out.spec;
      const auto set_field = [&](std::string_view field, const nlohmann::ordered_json& v,
                                 const std::string& kk) {
        const field_naming as{field_naming::style::file_key, path, kk};
        if (const auto value = field_json_text(*run_spec::find(field), v, as(field)))
          own.set(field, *value, as);
      };
      bool has_config = false;
      for (const auto& [k, v] : s.items()) {
        const std::string kk = key + "." + k;
        if (k == "name") {
          st.name = run_file_string(v, path, kk);
        } else if (k == "from_step") {
          st.from_step = run_file_uint(v, path, kk);
        } else if (k == "from_epoch") {
          st.from_epoch = run_file_uint(v, path, kk);
          if (s.contains("from_step"))
            run_file_fail(path, key, "give from_step or from_epoch, not both");
        } else if (k == "config") {
          st.config = run_file_config(v, path, kk, tables);
          has_config = true;
        } else if (k == "draws") {
          if (!v.is_object())
            run_file_fail(path, kk, "expected an object keyed by source name, got " + shown(v));
          std::vector<source_draw> sd(out.sources.size());
          for (const auto& [sn, x] : v.items()) {
            std::size_t at = out.sources.size();
            for (std::size_t q = 0; q < out.sources.size(); ++q)
              if (out.sources[q].name == sn) at = q;
            if (at == out.sources.size())
              run_file_fail(path, kk + "." + sn, "no source of that name");
            sd[at] = run_file_draw(x, path, kk + "." + sn);
          }
          st.draws.draws = std::move(sd);
        } else if (k == "epoch_samples") {
          st.draws.epoch_samples = run_file_uint(v, path, kk, max_epoch_samples);
        } else if (k == "replacement") {
          if (!v.is_boolean()) run_file_fail(path, kk, "expected true or false, got " + shown(v));
          st.draws.replacement = v.template get<bool>();
        } else if (k == "policy" || k == "batching") {
          set_field(k, v, kk);
        } else if (k == "balance") {
          // true / false (the default group, off) or a group: the run's balance and
          // balance_group fields.
          set_field("balance", v.is_boolean() ? v : nlohmann::ordered_json(false), kk);
          set_field("balance_group", v.is_boolean() ? nlohmann::ordered_json(0) : v, kk);
        } else if (k == "budget" || k == "token_budget") {
          set_field("token_budget", v, kk);
        } else {
          run_file_fail(path, kk,
                        "unknown key (a stage has name, from_step|from_epoch, config, draws, "
                        "epoch_samples, replacement, policy, balance, batching, budget)");
        }
      }
      if (!has_config) run_file_fail(path, key + ".config", "missing (the stage's bucket config)");
      st.batches = own.batches();
      out.stages.push_back(std::move(st));
    }
  });
  check_stage_order(out.stages, path);
  return out;
}

}  // namespace vbucket::json
