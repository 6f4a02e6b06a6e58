/// The memory model of `vbucket fit-bs` for Python (built when the Eigen adapter is): reads a
/// profile with `eigen::read_profile`, fits and rescales with `eigen::rescale_batch_sizes`, and
/// returns per bucket the memory the fitted model predicts at the config's batch size and at
/// the one fit-bs would choose. Registered by `vbucket_bind_memory(m)` from vbucket_ext.cpp.

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>  // std::string
#include <vector>  // std::vector

#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/eigen/cost_model.hpp"
#include "vbucket/eigen/profile_csv.hpp"

#include "glue.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vbucket::rule_kind;
using vbucket_py::py_config;

template <class Tables>
nb::dict memory_prediction_for(const py_config& cfg, const Tables& tables,
                               const std::string& profile_path, double memory_gib, double margin) {
  namespace eg = vbucket::eigen;
  const std::vector<vbucket::batch_bucket> buckets = vbucket::batch_buckets(*cfg.config);
  const auto profile = eg::read_profile(profile_path, buckets, tables, {});
  eg::rescale_options o;
  o.budget = {memory_gib, margin};
  eg::rescale_result r;
  try {
    r = eg::rescale_batch_sizes(buckets, profile, o);
  } catch (const vbucket::error& e) {
    throw vbucket::error(profile_path + ": " + e.what());
  }
  nb::list rows;
  for (const auto& b : r.buckets) {
    nb::dict row;
    row["resolution"] = b.bucket.resolution_name;
    row["frames"] = b.bucket.frames;
    row["tokens"] = b.bucket.tokens;
    row["batch_size"] = b.bucket.batch_size;
    row["enabled"] = b.bucket.enabled();
    row["predicted_gib"] = b.bucket.enabled()
                               ? r.memory.model.predict(b.bucket.tokens, b.bucket.batch_size)
                               : std::numeric_limits<double>::quiet_NaN();
    row["new_batch_size"] = b.new_batch_size;
    row["new_predicted_gib"] = b.predicted_memory_gib;
    row["capped_by_oom"] = b.capped_by_oom;
    rows.append(row);
  }
  nb::dict d;
  d["buckets"] = rows;
  d["memory_gib"] = memory_gib;
  d["limit_gib"] = r.limit_gib;
  d["r_squared"] = r.memory.r_squared;
  d["points"] = r.memory.points;
  d["profile_rows"] = profile.size();
  return d;
}

nb::dict memory_prediction(const py_config& cfg, const std::string& profile_path, double memory_gib,
                           double margin) {
  if (cfg.rule == rule_kind::opensora_v2)
    return memory_prediction_for(cfg, vbucket::opensora_v2_tables{}, profile_path, memory_gib,
                                 margin);
  return memory_prediction_for(cfg, vbucket::opensora_v12_tables{}, profile_path, memory_gib,
                               margin);
}

}  // namespace

void vbucket_bind_memory(nb::module_& m) {
  m.def("memory_prediction", &memory_prediction, "config"_a, "profile"_a, "memory_gib"_a,
        "margin"_a);
}
