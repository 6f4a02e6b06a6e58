// vbucket::run's JSON part: the run-spec reader of a run file (declared in
// adapters/json/include/vbucket/json/run_spec.hpp).
#include "vbucket/json/run_spec.hpp"

#include <cstdint>      // std::uint64_t, std::int64_t
#include <filesystem>   // std::filesystem::path (paths relative to the run file)
#include <memory>       // std::shared_ptr, std::make_shared
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include <nlohmann/json.hpp>

#include "vbucket/base/error.hpp"
#include "vbucket/json/bucket_config.hpp"  // parse_json, read_file

namespace vbucket::json {

std::optional<std::string> field_json_text(const run_field& f, const nlohmann::ordered_json& v,
                                           const std::string& name) {
  const std::string shown =
      v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  auto wrong = [&](std::string_view expected) {
    throw error(name + ": expected " + std::string(expected) + ", got " +
                (shown.size() > 60 ? shown.substr(0, 57) + "..." : shown));
  };
  if (v.is_null()) return std::nullopt;
  std::string value;
  switch (f.kind) {
    case field_kind::path:
    case field_kind::choice:
      if (!v.is_string()) wrong("a string");
      value = v.get<std::string>();
      break;
    case field_kind::flag:
      if (!v.is_boolean()) wrong("true or false");
      value = v.get<bool>() ? "true" : "false";
      break;
    case field_kind::count:
    case field_kind::seed:
      if (v.is_string() && f.kind == field_kind::seed) {
        value = v.get<std::string>();
      } else if (v.is_number_unsigned()) {
        value = std::to_string(v.get<std::uint64_t>());
      } else if (v.is_number_integer()) {
        value = std::to_string(v.get<std::int64_t>());  // negative: the field's check names it
      } else if (f.kind == field_kind::seed && v.is_number_float()) {
        wrong(
            "an integer (a seed of 2^64 or more as a string of digits: JSON numbers that "
            "large lose digits)");
      } else {
        wrong("an integer");
      }
      break;
    case field_kind::number:
      if (!v.is_number()) wrong("a number");
      value = v.is_number_float() ? vbucket::detail::shortest_text(v.get<double>()) : v.dump();
      break;
    case field_kind::triple:
      if (!v.is_array() || v.size() != 3) wrong("three integers [T, H, W]");
      for (const auto& x : v) {
        if (!x.is_number_integer()) wrong("three integers [T, H, W]");
        value += (value.empty() ? "" : ",") + x.dump();
      }
      break;
  }
  return value;
}

std::vector<std::pair<std::string, std::string>> run_spec_entries(std::string_view text,
                                                                  const std::string& where) {
  const nlohmann::ordered_json j = parse_json(text, where);
  if (!j.is_object())
    throw error(where +
                ": a run file must be a JSON object of run spec keys (config, meta, "
                "seed, ...)");
  std::vector<std::pair<std::string, std::string>> out;
  const field_naming name{field_naming::style::file_key, where};
  for (const auto& [key, v] : j.items()) {
    const run_field* f = run_spec::find(key);
    if (f == nullptr) {
      run_spec probe;
      probe.set(key, "", name);  // throws: the unknown key, and the known ones
    }
    if (std::optional<std::string> value = field_json_text(*f, v, name(key)))
      out.emplace_back(key, std::move(*value));
  }
  return out;
}

std::vector<std::string> apply_run_spec(run_spec& spec, const std::string& path) {
  std::vector<std::string> given;
  const field_naming name{field_naming::style::file_key, path};
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (auto& [key, value] : run_spec_entries(read_file(path), path)) {
    const run_field* f = run_spec::find(key);
    if (f->kind == field_kind::path && !value.empty() && std::filesystem::path(value).is_relative())
      value = (dir / value).string();
    spec.set(key, value, name);
    given.push_back(key);
  }
  return given;
}

run_spec load_run_spec(const std::string& path) {
  run_spec spec;
  apply_run_spec(spec, path);
  try {
    spec.validate();
  } catch (const error& e) {
    throw error(path + ": " + e.what());
  }
  return spec;
}

std::shared_ptr<const bucket_config> load_config(const run_spec& spec) {
  return spec.visit_rule([&](const auto& tables, const auto& /*rule*/) {
    return std::make_shared<const bucket_config>(load_bucket_config(spec.config, tables));
  });
}

}  // namespace vbucket::json
