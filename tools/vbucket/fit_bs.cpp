/// `vbucket fit-bs`: fits the memory and step-time models to a profile of training steps and
/// rewrites a bucket config's batch sizes for a device of G GiB (or to match a reference
/// bucket's step time); prints the table of old and new batch sizes.

#include <algorithm>     // std::max
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite, std::isnan, std::floor
#include <cstdint>       // std::int64_t
#include <cstdio>        // std::fputs, std::fflush
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include <fmt/core.h>         // fmt::format, fmt::print
#include <nlohmann/json.hpp>  // nlohmann::ordered_json

#include "cli.hpp"
#include "vbucket/base/rule_kind.hpp"
#include "vbucket/bucket/aspect.hpp"
#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/eigen/cost_model.hpp"
#include "vbucket/eigen/profile_csv.hpp"
#include "vbucket/json/bucket_config.hpp"

namespace vbucket::cli {
namespace {

constexpr flag fit_bs_flags[] = {
    {"config", "CFG.json", true,
     "bucket config (JSON), as Open-Sora's dict: {\"360p\": {\"102\": [[0.15, 0.33], 4]}}"},
    {"profile", "PROFILE.csv", true,
     "profiled steps: resolution,frames,batch_size,peak_memory_gib,step_seconds (memory may "
     "be \"oom\")"},
    {"memory-gib", "G", true, "device memory to fit, in GiB"},
    {"out", "NEW.json", true, "the config with every enabled bucket's batch size replaced"},
    {"margin", "M", false, "fraction of G kept free, in [0, 1) (0.05)"},
    {"reference", "RES:FRAMES", false,
     "match this bucket's step time (at its largest batch) instead of filling memory"},
    {"temporal-compression", "N", false, "frames per latent frame (4)"},
    {"spatial-compression", "N", false, "pixels per latent pixel along each side (16)"},
    {"rule", "RULE", false,
     "resolution tables: opensora-v2 or opensora-v1.2 (default: opensora-v1.2 when every "
     "resolution is a v1.2 name, else opensora-v2)"},
};

constexpr std::string_view fit_bs_description =
    "Fits per-rank peak memory = m0 + bs·(m1·tokens + m2·tokens²) and step time = t0 +\n"
    "bs·(t1·tokens + t2·tokens²) to PROFILE.csv by least squares (tokens = latent frames ×\n"
    "latent pixels of the resolution's largest aspect entry), then gives every enabled bucket\n"
    "of CFG.json the largest batch whose predicted memory is within G·(1 − margin) or, with\n"
    "--reference, the batch whose predicted step time is closest to the reference bucket's,\n"
    "never above that memory limit. A profiled OOM caps buckets of as many tokens or more\n"
    "when G·(1 − margin) is within the profile's largest peak. Disabled buckets stay\n"
    "disabled; NEW.json keeps CFG.json's keys in order. Prints the fits and a table.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

struct fit_bs_options {
  std::string config_path;
  std::string profile_path;
  std::string out_path;
  double memory_gib = 0.0;
  double margin = 0.05;
  std::optional<std::string> reference_resolution;
  std::int64_t reference_frames = 0;
  latent_compression compression{};
  std::optional<rule_kind> tables;
};

fit_bs_options read_fit_bs_options(const args& a) {
  fit_bs_options o;
  o.config_path = a.value("config");
  o.profile_path = a.value("profile");
  o.out_path = a.value("out");
  o.memory_gib = parse_positive_flag("memory-gib", a.value("memory-gib"));
  if (a.has("margin")) {
    const std::string& text = a.value("margin");
    double v = -1.0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || !(v >= 0.0) ||
        !(v < 1.0))
      throw usage_error("--margin: expected a fraction in [0, 1), got \"" + text + "\"");
    o.margin = v;
  }
  if (a.has("reference")) {
    const std::string& text = a.value("reference");
    const auto colon = text.rfind(':');  // resolution names may hold ':' ("720p_ar16:9")
    if (colon == std::string::npos || colon == 0)
      throw usage_error("--reference: expected RES:FRAMES (e.g. 360p:102), got \"" + text + "\"");
    o.reference_resolution = text.substr(0, colon);
    o.reference_frames = static_cast<std::int64_t>(
        parse_uint_flag("reference", std::string_view(text).substr(colon + 1), 1,
                        static_cast<std::uint64_t>(bucket_config::max_frames)));
  }
  if (a.has("temporal-compression"))
    o.compression.temporal = static_cast<std::int64_t>(
        parse_uint_flag("temporal-compression", a.value("temporal-compression"), 1, 1024));
  if (a.has("spatial-compression"))
    o.compression.spatial = static_cast<std::int64_t>(
        parse_uint_flag("spatial-compression", a.value("spatial-compression"), 1, 1024));
  if (a.has("rule")) {
    try {
      o.tables = parse_rule_or_throw(a.value("rule"), "--rule");
    } catch (const vbucket::error& e) {
      throw usage_error(e.what());
    }
  }
  return o;
}

/// Open-Sora v1.2's tables when they know every resolution of the config, else 2.0's.
rule_kind infer_tables(const std::vector<bucket_spec>& specs) {
  const opensora_v12_tables v12;
  for (const auto& s : specs) {
    try {
      (void)v12.resolve(s.resolution);
    } catch (const error&) {
      return rule_kind::opensora_v2;
    }
  }
  return rule_kind::opensora_v12;
}

std::string coefficients(const eigen::cost_fit& f, std::string_view unit) {
  return fmt::format(
      "{:.4g} + bs·({:.4g}·tokens + {:.4g}·tokens²) {}; rms residual {:.3g} {} "
      "(max {:.3g}, {} points, R² {:.5f})",
      f.model.fixed, f.model.linear, f.model.quadratic, unit, f.rms_residual, unit,
      f.max_abs_residual, f.points, f.r_squared);
}

void print_report(const eigen::rescale_result& r, const fit_bs_options& o, std::size_t profile_rows,
                  std::size_t oom_rows) {
  fmt::print("profile: {} steps ({} out of memory)\n", profile_rows, oom_rows);
  fmt::print("memory:  {}\n", coefficients(r.memory, "GiB"));
  if (r.time) {
    fmt::print("time:    {}\n", coefficients(*r.time, "s"));
  } else {
    fmt::print("time:    not fitted (the profile cannot identify it)\n");
  }
  fmt::print("limit:   {:.4g} GiB × (1 − {:.4g}) = {:.4g} GiB\n", o.memory_gib, o.margin,
             r.limit_gib);
  if (o.reference_resolution)
    fmt::print("target:  {}:{} at {:.4g} s per step\n", *o.reference_resolution, o.reference_frames,
               r.reference_seconds);
  fmt::print("\n");

  std::vector<std::vector<std::string>> rows = {
      {"bucket", "tokens", "old bs", "new bs", "memory GiB", "step s"}};
  for (const auto& b : r.buckets) {
    if (!b.bucket.enabled()) {
      rows.push_back({escape_control(b.bucket.name()), std::to_string(b.bucket.tokens), "-",
                      "disabled", "-", "-"});
      continue;
    }
    rows.push_back({escape_control(b.bucket.name()), std::to_string(b.bucket.tokens),
                    std::to_string(b.bucket.batch_size),
                    std::to_string(b.new_batch_size) + (b.capped_by_oom ? "*" : ""),
                    fmt::format("{:.2f}", b.predicted_memory_gib),
                    std::isnan(b.predicted_seconds) ? std::string("-")
                                                    : fmt::format("{:.3f}", b.predicted_seconds)});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}", row[0], width[0]);
    for (std::size_t c = 1; c < row.size(); ++c) line += fmt::format("  {:>{}}", row[c], width[c]);
    fmt::print("{}\n", line);
  }
  bool any_capped = false;
  for (const auto& b : r.buckets) any_capped = any_capped || b.capped_by_oom;
  if (any_capped) fmt::print("* capped below a profiled out-of-memory step\n");
}

template <class Tables>
int run_fit_bs(const fit_bs_options& o, nlohmann::ordered_json config_json,
               const std::vector<bucket_spec>& specs, const Tables& tables) {
  bucket_config config;
  std::vector<batch_bucket> buckets;
  try {
    config = bucket_config(specs, tables);
    buckets = batch_buckets(config, o.compression);
  } catch (const error& e) {
    throw error(o.config_path + ": " + e.what());
  }
  const auto profile = eigen::read_profile(o.profile_path, buckets, tables, o.compression);
  std::size_t oom_rows = 0;
  for (const auto& p : profile) oom_rows += p.oom ? 1 : 0;

  eigen::rescale_options options;
  options.budget = {o.memory_gib, o.margin};
  if (o.reference_resolution) {
    const auto ref = find_batch_bucket(buckets, *o.reference_resolution, o.reference_frames);
    if (ref == buckets.size())
      throw usage_error("--reference: " + *o.reference_resolution + ":" +
                        std::to_string(o.reference_frames) + " is not a bucket of " +
                        o.config_path);
    options.reference = ref;
  }
  eigen::rescale_result result;
  try {
    result = eigen::rescale_batch_sizes(buckets, profile, options);
  } catch (const error& e) {
    throw error(o.profile_path + ": " + e.what());
  }

  // NEW.json: the input with each enabled bucket's batch size replaced, keys in order.
  for (auto& [res, frames] : config_json.items()) {
    for (auto& [key, entry] : frames.items()) {
      const auto i = find_batch_bucket(buckets, res, std::stoll(key));
      if (i < buckets.size() && buckets[i].enabled()) entry[1] = result.buckets[i].new_batch_size;
    }
  }
  output_file out(o.out_path);
  out.write(config_json.dump(1) + "\n");
  out.commit();

  print_report(result, o, profile.size(), oom_rows);
  // Packed batching: the budget that keeps a batch of mixed shapes within the same limit.
  std::int64_t max_tokens = 0;
  for (const auto& b : buckets)
    if (b.enabled()) max_tokens = std::max(max_tokens, b.tokens);
  if (max_tokens > 0) {
    try {
      const double budget =
          eigen::packed_token_budget(result.memory.model, result.limit_gib, max_tokens);
      fmt::print(
          "packed:  --token-budget {:.0f} keeps a packed batch (samples up to {} tokens) within "
          "{:.4g} GiB\n",
          std::floor(budget), max_tokens, result.limit_gib);
    } catch (const error& e) {
      fmt::print("packed:  no token budget: {}\n", e.what());
    }
  }
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace

int cmd_fit_bs(int argc, char** argv) {
  return run_main("fit-bs", [&] {
    const args a = args::parse(argc, argv, fit_bs_flags);
    if (a.help()) {
      std::fputs(usage_text("fit-bs", fit_bs_description, fit_bs_flags).c_str(), stdout);
      return exit_ok;
    }
    const fit_bs_options o = read_fit_bs_options(a);
    auto config_json = json::parse_json(json::read_file(o.config_path), o.config_path);
    const auto specs = json::bucket_specs(config_json, o.config_path);
    const rule_kind kind = o.tables ? *o.tables : infer_tables(specs);
    if (kind == rule_kind::opensora_v12)
      return run_fit_bs(o, std::move(config_json), specs, opensora_v12_tables{});
    // The tables stay Open-Sora's (as `vbucket assign` uses them); the compressions only
    // turn a bucket's size into tokens.
    return run_fit_bs(o, std::move(config_json), specs, opensora_v2_tables{});
  });
}

}  // namespace vbucket::cli
