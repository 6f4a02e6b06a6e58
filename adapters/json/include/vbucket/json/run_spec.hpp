#pragma once
/// Reads a `vbucket::run_spec` from a JSON run file: one object whose keys are the spec's field
/// names (`run_spec::fields()`) and whose values are strings, numbers, booleans, `[T, H, W]`
/// lists for the token formula, or null (the default):
///
///     {"config": "cfg.json", "meta": "meta.csv", "rule": "opensora-v2", "rng": "numpy",
///      "seed": 42, "epoch": 0, "world": 8, "balance": true, "compression": [4, 8, 8]}
///
/// Relative paths (config, meta) are taken from the run file's directory. A seed of 2^64 or
/// more is written as a string ("1180591620717411303427"): JSON numbers that large lose digits.
/// Every error names the file and the key and says what is wrong, in one line.
///
/// Compiled in vbucket::run (adapters/json/src/run_spec.cpp): link it with vbucket::json.

#include <memory>       // std::shared_ptr
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include <nlohmann/json_fwd.hpp>

#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/run/run_spec.hpp"

namespace vbucket::json {

/// The text of JSON value `v` for field `f` (what `run_spec::set` reads), or nullopt for null
/// (the default); `name` names the key in messages ("run.json: key \"seed\""). Strings,
/// numbers and booleans as the field's kind takes them, `[T, H, W]` for a triple; the value's
/// range is the field's check (`run_spec::set`).
[[nodiscard]] std::optional<std::string> field_json_text(const run_field& f,
                                                         const nlohmann::ordered_json& v,
                                                         const std::string& name);

/// The (key, value as text) pairs of a run file's JSON text, in file order; `where` names the
/// file in messages. Keys are checked against the field table; values against their kind when
/// they are set (`apply_run_spec`).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> run_spec_entries(
    std::string_view text, const std::string& where);

/// Sets the fields a run file gives on `spec` (the others keep their values; call
/// `spec.validate()` once everything is set) and returns their names. Relative paths are taken
/// from the file's directory.
std::vector<std::string> apply_run_spec(run_spec& spec, const std::string& path);

/// The run spec of a run file: the defaults, the file's fields, validated (errors name the file).
[[nodiscard]] run_spec load_run_spec(const std::string& path);

/// The bucket config a spec names (`spec.config`), loaded with the tables of its rule.
[[nodiscard]] std::shared_ptr<const bucket_config> load_config(const run_spec& spec);

}  // namespace vbucket::json
