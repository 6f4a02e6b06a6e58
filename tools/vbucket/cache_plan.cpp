/// `vbucket cache-plan`: which (sample, shape) latents to precompute so that a cached run keeps
/// the rule's random bucketing (issue 32): every sample's exact distribution over bucket shapes,
/// the fewest entries reaching --coverage (or the most probability per byte within
/// --budget-bytes), a table of their cost against the two trivial baselines, and a manifest CSV
/// (one row per entry) for `vbucket.precompute`.

#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstdint>       // std::uint64_t, std::int64_t
#include <cstdio>        // std::printf, std::fputs
#include <map>           // std::map
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <vector>        // std::vector

#include "cli.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/cache/cache_plan.hpp"
#include "vbucket/json/bucket_config.hpp"

namespace vbucket::cli {
namespace {

constexpr flag cache_plan_flags[] = {
    {"config", "CFG.json", true, "bucket config (JSON), as Open-Sora's dict"},
    {"meta", "META.csv", true,
     "metadata CSV with num_frames,height,width,fps (a path column, when present, is copied "
     "to the manifest)"},
    {"rule", "RULE", false, "opensora-v2 (default) or opensora-v1.2"},
    {"fps-max", "F", false, "opensora-v2: frames are thinned to at most F per second (16)"},
    {"frame-interval", "N", false, "opensora-v1.2: the frame interval (1)"},
    {"coverage", "C", false,
     "the fraction of bucketed draws to serve from the cache, in (0, 1] (0.99; with "
     "--budget-bytes: 1)"},
    {"budget-bytes", "B", false, "select the most probability per byte within B bytes"},
    {"select", "MODE", false,
     "coverage (default: each sample's most probable shapes, the fewest entries) or "
     "stratified (one shape per sample, drawn so the bucket histogram is the rule's)"},
    {"epochs", "E", false, "epochs the cache serves (1): the expected cached draws"},
    {"seed", "S", false, "the window seed: each entry's start frame (0)"},
    {"encoder", "ID", false, "the encoder id, part of each entry's key and file (latent)"},
    {"compression", "T,H,W", false, "the VAE's compression of time, height, width (4,8,8)"},
    {"channels", "C", false, "latent channels (16)"},
    {"bytes-per-element", "N", false, "bytes per latent element (2: bf16/fp16)"},
    {"seconds", "A,B", false,
     "encoder seconds of an entry: A + B x latent positions T'*H'*W' (none)"},
    {"fallback", "F", false,
     "what the cached rule delivers for an uncached draw: nearest (default) or drop"},
    {"out", "MANIFEST.csv", false, "write the manifest: one row per entry"},
};

constexpr std::string_view cache_plan_description =
    "Plans a latent cache that survives random bucketing. For every sample of META.csv the\n"
    "rule's exact probability of each bucket shape (T, H, W) and of no bucket is derived from\n"
    "the rule's structure (not sampled). The fewest (sample, shape) entries whose probability\n"
    "reaches --coverage of the bucketed draws are selected (probability first: provably the\n"
    "fewest), or with --budget-bytes the most probability per byte that fits. Each entry's\n"
    "clip starts at a frame keyed by (--seed, sample), not by the epoch, so it serves every\n"
    "epoch. Prints the cost (files, bytes, encoder-seconds) against two baselines (each\n"
    "sample's most probable shape; every possible shape) and the total variation between the\n"
    "rule's distribution and the one a run over the cache delivers (cached_rule: an uncached\n"
    "draw takes the sample's nearest cached shape): per sample (mean) and of the bucket\n"
    "histogram. --select stratified instead caches one shape per sample, drawn so that samples\n"
    "with the same distribution keep the rule's bucket histogram (small TV buckets, but each\n"
    "sample always at its one shape). --out writes the manifest: "
    "sample,path,T,H,W,start,interval,bytes,probability,\n"
    "bucket,resolution,ratio,file.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

/// A fraction flag in (0, 1].
double parse_fraction(std::string_view name, const std::string& text) {
  double v = -1.0;
  const char* const end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end || !(v > 0.0 && v <= 1.0))
    throw usage_error("--" + std::string(name) + ": expected a fraction in (0, 1], got \"" + text +
                      "\"");
  return v;
}

/// Two non-negative numbers "A,B".
std::pair<double, double> parse_pair(std::string_view name, const std::string& text) {
  const auto comma = text.find(',');
  double v[2] = {-1.0, -1.0};
  if (comma != std::string::npos) {
    const std::string parts[2] = {text.substr(0, comma), text.substr(comma + 1)};
    for (int i = 0; i < 2; ++i) {
      const char* const end = parts[i].data() + parts[i].size();
      const auto [p, ec] = std::from_chars(parts[i].data(), end, v[i]);
      if (parts[i].empty() || ec != std::errc{} || p != end || !std::isfinite(v[i])) v[i] = -1.0;
    }
  }
  if (!(v[0] >= 0.0) || !(v[1] >= 0.0))
    throw usage_error("--" + std::string(name) + ": expected two numbers >= 0 as A,B, got \"" +
                      text + "\"");
  return {v[0], v[1]};
}

/// Three integers "T,H,W" from 1 to 65536.
std::array<std::int64_t, 3> parse_triple(std::string_view name, const std::string& text) {
  std::array<std::int64_t, 3> out{};
  std::size_t pos = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find(',', pos) : text.size();
    bool ok = end != std::string::npos;
    if (ok) {
      const std::string part = text.substr(pos, end - pos);
      const char* const last = part.data() + part.size();
      const auto [p, ec] = std::from_chars(part.data(), last, out[i]);
      ok = !part.empty() && ec == std::errc{} && p == last && out[i] >= 1 && out[i] <= 65536;
    }
    if (!ok)
      throw usage_error("--" + std::string(name) +
                        ": expected three integers from 1 to 65536 as T,H,W, got \"" + text + "\"");
    pos = end + 1;
  }
  return out;
}

/// The `path` column of the metadata CSV, when it has one (else empty).
std::vector<std::string> read_paths(const std::string& meta_path) {
  detail::csv_reader reader(detail::csv_file{meta_path});
  std::vector<detail::csv_field> fields;
  std::vector<std::string> out;
  if (!reader.next(fields)) return out;
  std::size_t column = fields.size();
  for (std::size_t c = 0; c < fields.size(); ++c)
    if (detail::trim_blanks(fields[c].value()) == "path") column = c;
  if (column == fields.size()) return out;
  while (reader.next(fields)) out.push_back(column < fields.size() ? fields[column].value() : "");
  return out;
}

/// `s` with control characters written as `?` (a name from a config, on one table line).
std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  return s;
}

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

std::string gib(std::uint64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), 2) + " GiB";
}

void print_plan(const cache_plan& plan, const bucket_config& config, const cache_plan_options& o) {
  const bool seconds = o.cost.seconds_per_entry > 0.0 || o.cost.seconds_per_token > 0.0;
  std::printf("samples:            %llu (%llu bucketable); bucketed draws per epoch %.1f\n",
              static_cast<unsigned long long>(plan.samples),
              static_cast<unsigned long long>(plan.bucketable), plan.bucketed_mass);
  std::printf("possible entries:   %.0f (sample, shape) pairs of positive probability\n",
              plan.possible_entries);
  const std::string selection =
      o.selection == cache_selection::stratified
          ? std::string("stratified: one shape per sample, the bucket histogram kept")
      : o.budget_bytes
          ? "most probability per byte within " + std::to_string(*o.budget_bytes) + " bytes"
          : "fewest entries reaching coverage " + fixed(o.coverage, 4);
  std::printf("selection:          %s\n", selection.c_str());
  std::fputs("\n", stdout);
  std::vector<std::vector<std::string>> rows = {
      {"selection", "files", "shapes/sample", "coverage", "TV sample", "TV buckets", "bytes",
       seconds ? "encoder-s" : "", "cached draws (" + std::to_string(o.epochs) + " ep)"}};
  auto row = [&](const char* name, const cache_summary& s) {
    rows.push_back({name, std::to_string(s.files), fixed(s.shapes_per_sample, 3),
                    fixed(s.coverage, 4), fixed(s.tv_sample, 4), fixed(s.tv_buckets, 4),
                    gib(s.bytes), seconds ? fixed(s.seconds, 1) : "", fixed(s.expected_draws, 1)});
  };
  row("chosen", plan.chosen);
  row("most probable", plan.one_per_sample);
  row("every shape", plan.every_shape);
  if (!seconds)
    for (auto& r : rows) r.erase(r.begin() + 7);
  print_table(rows, seconds ? "lrrrrrrrr" : "lrrrrrrr");
  // Entries per (resolution, frames key), in the config's order.
  std::map<std::pair<std::int32_t, std::int64_t>, std::pair<std::uint64_t, double>> by_key;
  std::map<std::pair<std::int32_t, std::int64_t>, std::uint64_t> key_bytes;
  for (const auto& e : plan.entries) {
    const std::pair<std::int32_t, std::int64_t> k{config.key(e.bucket).resolution,
                                                  -e.key.shape.frames};
    auto& [count, mass] = by_key[k];
    ++count;
    mass += e.probability;
    key_bytes[k] += e.bytes;
  }
  std::fputs("\n", stdout);
  std::vector<std::vector<std::string>> shapes = {
      {"resolution", "frames", "entries", "bytes", "draws per epoch"}};
  for (const auto& [k, v] : by_key)
    shapes.push_back({printable(config.resolutions()[static_cast<std::size_t>(k.first)].info.name),
                      std::to_string(-k.second), std::to_string(v.first), gib(key_bytes[k]),
                      fixed(v.second, 1)});
  print_table(shapes, "lrrrr");
  std::printf(
      "\nTV sample: mean over samples of the total variation between the rule's distribution and\n"
      "the delivered one (= the uncached draws moved or dropped); TV buckets: of the epoch's\n"
      "bucket histogram (no bucket included). Fallback: %s.\n",
      o.fallback == cache_fallback::nearest ? "nearest cached shape" : "drop");
}

void write_manifest(const std::string& path, const cache_plan& plan, const bucket_config& config,
                    const std::vector<std::string>& paths) {
  output_file out(path);
  std::string buffer =
      "sample,path,T,H,W,start,interval,bytes,probability,bucket,resolution,ratio,file\n";
  char prob[32];
  for (const cache_entry& e : plan.entries) {
    const auto i = static_cast<std::size_t>(e.key.sample);
    std::snprintf(prob, sizeof prob, "%.17g", e.probability);
    buffer += std::to_string(e.key.sample) + "," + (i < paths.size() ? csv_field(paths[i]) : "") +
              "," + std::to_string(e.key.shape.frames) + "," + std::to_string(e.key.shape.height) +
              "," + std::to_string(e.key.shape.width) + "," + std::to_string(e.key.start) + "," +
              std::to_string(e.key.interval) + "," + std::to_string(e.bytes) + "," + prob + "," +
              std::to_string(e.bucket) + "," + csv_field(config.resolution_of(e.bucket).info.name) +
              "," + csv_field(config.ratio_of(e.bucket).key) + "," + csv_field(e.key.file_name()) +
              "\n";
    if (buffer.size() >= (std::size_t{1} << 20)) {
      out.write(buffer);
      buffer.clear();
    }
  }
  out.write(buffer);
  out.commit();
}

}  // namespace

int cmd_cache_plan(int argc, char** argv) {
  return run_main("cache-plan", [&] {
    const args a = args::parse(argc, argv, cache_plan_flags);
    if (a.help()) {
      std::fputs(usage_text("cache-plan", cache_plan_description, cache_plan_flags).c_str(),
                 stdout);
      return exit_ok;
    }
    const std::string rule_name = a.value_or("rule", "opensora-v2");
    if (rule_name != "opensora-v2" && rule_name != "opensora-v1.2")
      throw usage_error("--rule: unknown rule \"" + rule_name +
                        "\" (expected opensora-v2 or opensora-v1.2)");
    const bool v2 = rule_name == "opensora-v2";
    if (a.has("fps-max") && !v2) throw usage_error("--fps-max applies to --rule opensora-v2 only");
    if (a.has("frame-interval") && v2)
      throw usage_error("--frame-interval applies to --rule opensora-v1.2 only");
    cache_plan_options o;
    o.budget_bytes.reset();
    if (a.has("budget-bytes")) {
      o.budget_bytes = parse_uint_flag("budget-bytes", a.value("budget-bytes"), 1,
                                       std::numeric_limits<std::uint64_t>::max());
      o.coverage = 1.0;
    }
    if (a.has("coverage")) o.coverage = parse_fraction("coverage", a.value("coverage"));
    if (a.has("select")) {
      const std::string m = a.value("select");
      if (m == "stratified") {
        o.selection = cache_selection::stratified;
        if (a.has("coverage") || a.has("budget-bytes"))
          throw usage_error("--select stratified takes neither --coverage nor --budget-bytes");
      } else if (m != "coverage") {
        throw usage_error("--select: unknown selection \"" + m +
                          "\" (expected coverage or stratified)");
      }
    }
    if (a.has("epochs"))
      o.epochs = parse_uint_flag("epochs", a.value("epochs"), 1, std::uint64_t{1} << 40);
    if (a.has("seed"))
      o.seed =
          parse_uint_flag("seed", a.value("seed"), 0, std::numeric_limits<std::uint64_t>::max());
    if (a.has("encoder")) o.encoder = a.value("encoder");
    if (o.encoder.empty() || o.encoder.find('/') != std::string::npos || o.encoder == "." ||
        o.encoder == "..")
      throw usage_error("--encoder: expected a name without '/', got \"" + o.encoder + "\"");
    if (a.has("compression")) {
      const auto c = parse_triple("compression", a.value("compression"));
      o.cost.formula.compression_t = c[0];
      o.cost.formula.compression_h = c[1];
      o.cost.formula.compression_w = c[2];
    }
    if (a.has("channels"))
      o.cost.channels =
          static_cast<std::int64_t>(parse_uint_flag("channels", a.value("channels"), 1, 65536));
    if (a.has("bytes-per-element"))
      o.cost.bytes_per_element = static_cast<std::int64_t>(
          parse_uint_flag("bytes-per-element", a.value("bytes-per-element"), 1, 64));
    if (a.has("seconds")) {
      const auto [s0, s1] = parse_pair("seconds", a.value("seconds"));
      o.cost.seconds_per_entry = s0;
      o.cost.seconds_per_token = s1;
    }
    if (a.has("fallback")) {
      const std::string f = a.value("fallback");
      if (f == "nearest") {
        o.fallback = cache_fallback::nearest;
      } else if (f == "drop") {
        o.fallback = cache_fallback::drop;
      } else {
        throw usage_error("--fallback: unknown fallback \"" + f + "\" (expected nearest or drop)");
      }
    }
    const meta_table table = load_meta_csv(a.value("meta"));
    const std::vector<std::string> paths = read_paths(a.value("meta"));
    auto run = [&](const auto& tables, const auto& rule) {
      const bucket_config config = json::load_bucket_config(a.value("config"), tables);
      const cache_plan plan = plan_cache(config, table, rule, o);
      if (a.has("out")) write_manifest(a.value("out"), plan, config, paths);
      print_plan(plan, config, o);
      std::fflush(stdout);
      return exit_ok;
    };
    if (v2) {
      opensora_v2_rule rule{};
      if (a.has("fps-max")) rule.fps_max = parse_positive_flag("fps-max", a.value("fps-max"));
      return run(opensora_v2_tables{}, rule);
    }
    opensora_v12_rule rule{};
    if (a.has("frame-interval"))
      rule.frame_interval = static_cast<std::int64_t>(
          parse_uint_flag("frame-interval", a.value("frame-interval"), 1, std::uint64_t{1} << 31));
    return run(opensora_v12_tables{}, rule);
  });
}

}  // namespace vbucket::cli
