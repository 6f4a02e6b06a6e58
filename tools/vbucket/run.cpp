/// The run of `vbucket plan`, `stats` and `assign` (plan_common.hpp): read from the run file and
/// the flags, and its sampler, made here once (the sampler types of both rules and both source
/// families are compiled in this file only).

#include <charconv>      // std::from_chars (--pad-warn)
#include <memory>        // std::make_shared, std::unique_ptr
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

#include <nlohmann/json.hpp>

#include "plan_common.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/json/run_spec.hpp"

namespace vbucket::cli {

run_flags read_run_flags(const args& a, const flag_table& t,
                         std::span<const std::string_view> skip) {
  run_flags r;
  std::vector<std::string> from_file;
  if (a.has("run")) from_file = json::apply_run_spec(r.spec, a.value("run"));
  const auto flags = t.flags();
  a.check_required(flags, [&](std::string_view name) {
    for (std::size_t i = 0; i < flags.size(); ++i)
      if (flags[i].name == name && !t.field_of(i).empty())
        for (const std::string& k : from_file)
          if (k == t.field_of(i)) return true;
    return false;
  });
  const field_naming as_flags{field_naming::style::flag, {}};
  try {
    for (std::size_t i = 0; i < flags.size(); ++i) {
      const std::string_view field = t.field_of(i);
      if (field.empty() || !a.has(flags[i].name)) continue;
      bool skipped = false;
      for (const std::string_view s : skip) skipped = skipped || s == field;
      if (skipped) continue;
      r.spec.set(field, flags[i].value_name.empty() ? "true" : a.value(flags[i].name), as_flags);
    }
    if (a.has("pad-warn")) {
      const std::string& text = a.value("pad-warn");
      double v = -1.0;
      const char* const end = text.data() + text.size();
      const auto [p, ec] = std::from_chars(text.data(), end, v);
      if (text.empty() || ec != std::errc{} || p != end || !(v >= 0.0 && v <= 1.0))
        throw usage_error("--pad-warn: expected a fraction from 0 to 1, got \"" + text + "\"");
      r.pad_warn = v;
      if (r.spec.batching == batching_mode::packed)
        throw usage_error("--pad-warn applies to --batching fixed only");
    }
    r.spec.validate(as_flags);
  } catch (const usage_error&) {
    throw;
  } catch (const vbucket::error& e) {
    throw usage_error(e.what());
  }
  return r;
}

std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::unique_ptr<any_sampler> make_sampler(const run_spec& spec) {
  auto config = json::load_config(spec);
  auto meta =
      std::make_shared<const streamed_meta_csv>(streamed_meta_csv{spec.meta, spec.chunk_rows});
  std::unique_ptr<any_sampler> s = make_any_sampler(std::move(meta), std::move(config), spec);
  s->set_epoch(spec.epoch);
  return s;
}

}  // namespace vbucket::cli
