/// The Python binding of vbucket/cache/cache_plan.hpp (issue 32): `_vbucket.cache_plan`, the exact
/// per-sample shape distributions and the cache selection, and `_vbucket.cache_assign`, an
/// epoch's buckets through `cached_rule` (what a sampler over the cache delivers). Registered by
/// `vbucket_bind_cache(m)` from vbucket_ext.cpp; the Python side is vbucket/precompute.py.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>   // std::int64_t, std::uint64_t
#include <memory>    // std::make_shared
#include <optional>  // std::optional
#include <string>    // std::string
#include <tuple>     // std::tuple
#include <utility>   // std::pair
#include <vector>    // std::vector

#include "vbucket/bucket/csv.hpp"  // csv_reader (a text column of a metadata CSV)
#include "vbucket/cache/cache_plan.hpp"
#include "vbucket/json/bucket_config.hpp"

#include "glue.hpp"  // is_utf8

namespace nb = nanobind;

namespace {

using i64_array = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using f64_array = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::vector<vbucket::sample_meta> samples_of(const i64_array& frames, const i64_array& height,
                                             const i64_array& width, const f64_array& fps) {
  const std::size_t n = frames.shape(0);
  if (height.shape(0) != n || width.shape(0) != n || fps.shape(0) != n)
    throw vbucket::error("cache_plan: num_frames, height, width and fps differ in length");
  std::vector<vbucket::sample_meta> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = {frames.data()[i], height.data()[i], width.data()[i], fps.data()[i]};
  return out;
}

/// The rule and tables the name gives, to `f(config, rule)`.
template <class F>
auto with_rule(const std::string& config_json, const std::string& rule, double fps_max,
               std::int64_t frame_interval, F&& f) {
  if (rule == "opensora-v2") {
    const auto config =
        vbucket::json::parse_bucket_config(config_json, vbucket::opensora_v2_tables{}, "config");
    return f(config, vbucket::opensora_v2_rule{fps_max});
  }
  if (rule == "opensora-v1.2") {
    const auto config =
        vbucket::json::parse_bucket_config(config_json, vbucket::opensora_v12_tables{}, "config");
    return f(config, vbucket::opensora_v12_rule{frame_interval});
  }
  throw vbucket::error("rule: unknown rule \"" + rule +
                       "\" (expected opensora-v2 or opensora-v1.2)");
}

vbucket::cache_fallback fallback_of(const std::string& name) {
  if (name == "nearest") return vbucket::cache_fallback::nearest;
  if (name == "drop") return vbucket::cache_fallback::drop;
  throw vbucket::error("fallback: unknown fallback \"" + name + "\" (expected nearest or drop)");
}

nb::dict summary_dict(const vbucket::cache_summary& s) {
  nb::dict d;
  d["files"] = s.files;
  d["bytes"] = s.bytes;
  d["seconds"] = s.seconds;
  d["samples_with_entries"] = s.samples_with_entries;
  d["shapes_per_sample"] = s.shapes_per_sample;
  d["coverage"] = s.coverage;
  d["expected_draws"] = s.expected_draws;
  d["tv_sample"] = s.tv_sample;
  d["tv_buckets"] = s.tv_buckets;
  return d;
}

nb::dict cache_plan_py(const i64_array& frames, const i64_array& height, const i64_array& width,
                       const f64_array& fps, const std::string& config_json,
                       const std::string& rule, double fps_max, std::int64_t frame_interval,
                       double coverage, std::optional<std::uint64_t> budget_bytes,
                       std::uint64_t epochs, std::uint64_t seed, const std::string& encoder,
                       std::tuple<std::int64_t, std::int64_t, std::int64_t> compression,
                       std::int64_t channels, std::int64_t bytes_per_element,
                       double seconds_per_entry, double seconds_per_token,
                       const std::string& fallback, const std::string& selection) {
  const std::vector<vbucket::sample_meta> table = samples_of(frames, height, width, fps);
  vbucket::cache_plan_options o;
  if (selection == "stratified") {
    o.selection = vbucket::cache_selection::stratified;
  } else if (selection != "coverage") {
    throw vbucket::error("select: unknown selection \"" + selection +
                         "\" (expected coverage or stratified)");
  }
  o.coverage = coverage;
  o.budget_bytes = budget_bytes;
  o.epochs = epochs;
  o.seed = seed;
  o.encoder = encoder;
  o.cost.formula.compression_t = std::get<0>(compression);
  o.cost.formula.compression_h = std::get<1>(compression);
  o.cost.formula.compression_w = std::get<2>(compression);
  o.cost.channels = channels;
  o.cost.bytes_per_element = bytes_per_element;
  o.cost.seconds_per_entry = seconds_per_entry;
  o.cost.seconds_per_token = seconds_per_token;
  o.fallback = fallback_of(fallback);
  return with_rule(config_json, rule, fps_max, frame_interval, [&](const auto& config, auto r) {
    vbucket::cache_plan plan;
    {
      nb::gil_scoped_release unlocked;
      plan = vbucket::plan_cache(config, table, r, o);
    }
    nb::dict d;
    d["samples"] = plan.samples;
    d["bucketable"] = plan.bucketable;
    d["bucketed_mass"] = plan.bucketed_mass;
    d["possible_entries"] = plan.possible_entries;
    d["chosen"] = summary_dict(plan.chosen);
    d["one_per_sample"] = summary_dict(plan.one_per_sample);
    d["every_shape"] = summary_dict(plan.every_shape);
    nb::list sample, t, h, w, start, interval, bytes, probability, bucket, resolution, ratio, file;
    for (const auto& e : plan.entries) {
      sample.append(e.key.sample);
      t.append(e.key.shape.frames);
      h.append(e.key.shape.height);
      w.append(e.key.shape.width);
      start.append(e.key.start);
      interval.append(e.key.interval);
      bytes.append(e.bytes);
      probability.append(e.probability);
      bucket.append(e.bucket);
      resolution.append(config.resolution_of(e.bucket).info.name);
      ratio.append(config.ratio_of(e.bucket).key);
      file.append(e.key.file_name());
    }
    nb::dict entries;
    entries["sample"] = sample;
    entries["T"] = t;
    entries["H"] = h;
    entries["W"] = w;
    entries["start"] = start;
    entries["interval"] = interval;
    entries["bytes"] = bytes;
    entries["probability"] = probability;
    entries["bucket"] = bucket;
    entries["resolution"] = resolution;
    entries["ratio"] = ratio;
    entries["file"] = file;
    d["entries"] = entries;
    return d;
  });
}

/// The buckets of one epoch through `cached_rule` over the (sample, bucket) entries, drawn from
/// `fast_source(seed, epoch)` (a sampler's --rng fast draws).
nb::list cache_assign_py(const i64_array& frames, const i64_array& height, const i64_array& width,
                         const f64_array& fps, const std::string& config_json,
                         const std::string& rule, double fps_max, std::int64_t frame_interval,
                         const i64_array& entry_sample, const i64_array& entry_bucket,
                         std::uint64_t seed, std::uint64_t epoch, const std::string& fallback) {
  const std::vector<vbucket::sample_meta> table = samples_of(frames, height, width, fps);
  if (entry_sample.shape(0) != entry_bucket.shape(0))
    throw vbucket::error("cache_assign: entry samples and buckets differ in length");
  std::vector<std::pair<std::uint64_t, vbucket::bucket_id>> pairs;
  for (std::size_t j = 0; j < entry_sample.shape(0); ++j) {
    if (entry_sample.data()[j] < 0) throw vbucket::error("cache_assign: a negative sample index");
    pairs.emplace_back(static_cast<std::uint64_t>(entry_sample.data()[j]),
                       static_cast<vbucket::bucket_id>(entry_bucket.data()[j]));
  }
  const auto set = std::make_shared<const vbucket::cache_set>(table.size(), std::move(pairs));
  const auto f = fallback_of(fallback);
  return with_rule(config_json, rule, fps_max, frame_interval, [&](const auto& config, auto r) {
    for (std::size_t i = 0; i < table.size(); ++i)
      for (const vbucket::bucket_id b : set->of(i))
        if (static_cast<std::size_t>(b) >= config.num_buckets())
          throw vbucket::error("cache_assign: sample " + std::to_string(i) + ": bucket " +
                               std::to_string(b) + " is not a bucket of the config");
    const vbucket::cached_rule cached(r, set, f);
    const vbucket::fast_source source(seed, epoch);
    nb::list out;
    for (std::size_t i = 0; i < table.size(); ++i)
      out.append(cached.assign(config, table[i], i, source));
    return out;
  });
}

/// The exact distance between the rule's and the delivered distribution over a manifest
/// (`delivery_of`): a dict of bucketable, bucketed_mass, tv_buckets, tv_sample, fallback_share.
nb::dict cache_delivery_py(const i64_array& frames, const i64_array& height, const i64_array& width,
                           const f64_array& fps, const std::string& config_json,
                           const std::string& rule, double fps_max, std::int64_t frame_interval,
                           const std::string& manifest) {
  const std::vector<vbucket::sample_meta> table = samples_of(frames, height, width, fps);
  return with_rule(config_json, rule, fps_max, frame_interval, [&](const auto& config, auto r) {
    const vbucket::cached_rule cached(r,
                                      vbucket::load_cache_manifest(manifest, config, table.size()));
    const vbucket::cache_delivery d = vbucket::delivery_of(cached, config, table);
    nb::dict out;
    out["bucketable"] = d.bucketable;
    out["bucketed_mass"] = d.bucketed_mass;
    out["tv_buckets"] = d.tv_buckets;
    out["tv_sample"] = d.tv_sample;
    out["fallback_share"] = d.fallback_share;
    return out;
  });
}

}  // namespace

/// Column `name` of a CSV file as text, one string per data row, read by the library's CSV
/// reader (the quoting, line ends and errors of every metadata CSV); None when the header has
/// no such column. A value that is not UTF-8 text is an error naming the file, the row and the
/// column.
std::optional<std::vector<std::string>> csv_text_column(const std::string& path,
                                                        const std::string& name) {
  vbucket::detail::csv_reader reader(vbucket::detail::csv_file{path});
  std::vector<vbucket::detail::csv_field> fields;
  if (!reader.next(fields)) return std::nullopt;
  std::vector<std::string> header;
  std::size_t at = fields.size();
  for (std::size_t i = 0; i < fields.size(); ++i) {
    header.push_back(std::string(vbucket::detail::trim_blanks(fields[i].value())));
    if (header.back() == name && at == fields.size()) at = i;
  }
  if (at == fields.size()) return std::nullopt;
  reader.set_columns(std::move(header));
  std::vector<std::string> out;
  while (reader.next(fields)) {
    std::string v = at < fields.size() ? fields[at].value() : std::string();
    if (!vbucket_py::is_utf8(v)) reader.fail(at, "is not UTF-8 text");
    out.push_back(std::move(v));
  }
  return out;
}

void vbucket_bind_cache(nb::module_& m) {
  using namespace nb::literals;
  m.def("cache_plan", &cache_plan_py, "num_frames"_a, "height"_a, "width"_a, "fps"_a,
        "config_json"_a, "rule"_a, "fps_max"_a, "frame_interval"_a, "coverage"_a,
        "budget_bytes"_a.none(), "epochs"_a, "seed"_a, "encoder"_a, "compression"_a, "channels"_a,
        "bytes_per_element"_a, "seconds_per_entry"_a, "seconds_per_token"_a, "fallback"_a,
        "selection"_a);
  m.def("cache_assign", &cache_assign_py, "num_frames"_a, "height"_a, "width"_a, "fps"_a,
        "config_json"_a, "rule"_a, "fps_max"_a, "frame_interval"_a, "entry_sample"_a,
        "entry_bucket"_a, "seed"_a, "epoch"_a, "fallback"_a);
  m.def("csv_text_column", &csv_text_column, "path"_a, "name"_a);
  m.def("cache_delivery", &cache_delivery_py, "num_frames"_a, "height"_a, "width"_a, "fps"_a,
        "config_json"_a, "rule"_a, "fps_max"_a, "frame_interval"_a, "manifest"_a);
}
