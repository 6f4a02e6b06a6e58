/// The Python binding of vbucket/plan/parallel_layout.hpp and vbucket/plan/group_plan.hpp (issue
/// 45):
/// `_vbucket.GroupPlan` (an epoch over groups of ranks of each bucket's sequence-parallel size,
/// from the bucket ids `assign_epoch` gives) and `_vbucket.GroupSchedule` (it dealt to a world
/// from a state). Layout options arrive as a dict of the names of `vbucket::layout_options`'
/// members; hand layouts as {"RES:FRAMES": (sp, batch, micro_batch)}. Glue only: every rule,
/// check and default is the library's. Registered by `vbucket_bind_layout(m)` from
/// vbucket_ext.cpp; the Python side is vbucket/layout.py.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>       // std::int64_t, std::uint32_t, std::uint64_t
#include <filesystem>    // std::filesystem::create_directories
#include <map>           // std::map
#include <span>          // std::span
#include <string>        // std::string
#include <system_error>  // std::error_code
#include <tuple>         // std::tuple
#include <vector>        // std::vector

#include "vbucket/bucket/seeding.hpp"  // big_seed, plan_seed
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/group_plan.hpp"
#include "vbucket/plan/parallel_layout.hpp"
#include "vbucket/run/delivery_records.hpp"  // epoch_block_of, write_epoch_block, group_record
#include "vbucket/run/ledger.hpp"            // ledger_writer

#include "glue.hpp"  // py_config

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vbucket_py::py_config;

/// `options` (names of layout_options' members, values as text) onto the library's defaults:
/// every name and value is read by `vbucket::set_layout_option`, as `vbucket layout`'s flags.
vbucket::layout_options layout_options_from(const std::map<std::string, std::string>& options) {
  vbucket::layout_options o;
  for (const auto& [key, value] : options) vbucket::set_layout_option(o, key, value);
  return o;
}

/// Hand layouts by "RES:FRAMES" name, in the config's pair order (absent pairs: batch 0, which
/// the library refuses for an enabled pair, naming it).
std::vector<vbucket::bucket_layout> hand_layouts(
    const vbucket::bucket_config& config,
    const std::map<std::string, std::tuple<std::int64_t, std::int64_t, std::int64_t>>& given) {
  std::vector<vbucket::bucket_layout> out;
  std::size_t used = 0;
  for (const vbucket::batch_bucket& b : vbucket::batch_buckets(config)) {
    vbucket::bucket_layout l;
    if (const auto it = given.find(b.name()); it != given.end()) {
      l.sp = std::get<0>(it->second);
      l.batch_size = std::get<1>(it->second);
      l.micro_batch = std::get<2>(it->second);
      ++used;
    }
    out.push_back(l);
  }
  if (used != given.size())
    for (const auto& [name, v] : given) {
      bool found = false;
      for (const vbucket::batch_bucket& b : vbucket::batch_buckets(config))
        found = found || b.name() == name;
      if (!found) throw vbucket::error("layout \"" + name + "\": no such RES:FRAMES pair");
    }
  return out;
}

struct py_group_plan {
  std::shared_ptr<const vbucket::group_plan> plan;
  std::shared_ptr<const std::vector<vbucket::bucket_id>> ids;  // the epoch's, for its ledger
};
struct py_group_schedule {
  std::shared_ptr<const vbucket::group_schedule> schedule;
  py_group_plan plan;
};

/// The ledger file of `rank` in directory `dir` (made if need be).
vbucket::ledger_writer ledger_file(const std::string& dir, std::uint32_t rank) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw vbucket::error("ledger: cannot make the directory \"" + dir + "\": " + ec.message());
  return vbucket::ledger_writer(
      (std::filesystem::path(dir) / vbucket::ledger_file_name(rank)).string());
}

py_group_plan make_group_plan(
    const py_config& cfg,
    nb::ndarray<const vbucket::bucket_id, nb::ndim<1>, nb::c_contig, nb::device::cpu> ids,
    const std::string& seed, std::uint64_t epoch, const std::map<std::string, std::string>& options,
    const std::map<std::string, std::tuple<std::int64_t, std::int64_t, std::int64_t>>& layouts) {
  const vbucket::layout_options o = layout_options_from(options);
  const std::span<const vbucket::bucket_id> id_span(ids.data(), ids.shape(0));
  nb::gil_scoped_release release;
  const vbucket::layout_table table =
      layouts.empty() ? vbucket::choose_layouts(*cfg.config, o)
                      : vbucket::check_layouts(*cfg.config, hand_layouts(*cfg.config, layouts), o);
  vbucket::plan_options po;
  po.seed = vbucket::plan_seed(vbucket::big_seed::parse(seed));
  po.epoch = epoch;
  return {std::make_shared<const vbucket::group_plan>(
              vbucket::make_epoch_plan(id_span, table.config(), po), table),
          std::make_shared<const std::vector<vbucket::bucket_id>>(id_span.begin(), id_span.end())};
}

nb::list layouts_of(const py_group_plan& p) {
  nb::list out;
  const auto buckets = vbucket::batch_buckets(p.plan->layouts().config());
  const auto pairs = p.plan->layouts().pairs();
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const vbucket::bucket_layout& l = pairs[i];
    nb::dict d;
    d["name"] = buckets[i].name();
    d["sp"] = l.sp;
    d["batch_size"] = l.batch_size;
    d["micro_batch"] = l.micro_batch;
    d["accumulation"] = l.accumulation();
    d["tokens"] = l.tokens;
    d["seconds"] = l.seconds;
    out.append(d);
  }
  return out;
}

void check_step_rank(const py_group_schedule& s, std::uint64_t step, std::uint32_t rank) {
  if (step >= s.schedule->steps())
    throw vbucket::error("group schedule: step " + std::to_string(step) + " is not below " +
                         std::to_string(s.schedule->steps()) + " steps");
  if (rank >= s.schedule->world_size())
    throw vbucket::error("group schedule: rank " + std::to_string(rank) + " is not below world " +
                         std::to_string(s.schedule->world_size()));
}

nb::dict work_of(const py_group_schedule& s, std::uint64_t step, std::uint32_t rank) {
  check_step_rank(s, step, rank);
  const vbucket::rank_work w = s.schedule->work(step, rank);
  nb::dict d;
  d["step"] = w.step;
  d["first_rank"] = w.first_rank;
  d["sp"] = w.sp;
  d["sp_rank"] = w.sp_rank;
  d["bucket"] = w.batch.bucket;
  d["thw"] = nb::make_tuple(w.batch.frames, w.batch.height, w.batch.width);
  d["position"] = w.batch.position;
  d["repeat"] = w.repeat;
  d["tokens"] = w.layout.tokens;
  d["indices"] = std::vector<std::uint32_t>(w.batch.indices.begin(), w.batch.indices.end());
  nb::list micro;
  for (std::int64_t k = 0; k < w.layout.accumulation(); ++k) {
    const auto part = w.micro_step(k);
    micro.append(std::vector<std::uint32_t>(part.begin(), part.end()));
  }
  d["micro_steps"] = micro;
  return d;
}

}  // namespace

void vbucket_bind_layout(nb::module_& m) {
  nb::list fields;
  for (const vbucket::layout_field& f : vbucket::layout_fields)
    fields.append(
        nb::make_tuple(std::string(f.name), std::string(f.value_name), std::string(f.help)));
  m.attr("LAYOUT_FIELDS") = fields;
  nb::class_<py_group_plan>(m, "GroupPlan")
      .def(nb::new_(&make_group_plan), "config"_a, "ids"_a, "seed"_a, "epoch"_a, "options"_a,
           "layouts"_a,
           "An epoch over groups of ranks, one sequence-parallel size per bucket "
           "(vbucket::group_plan).")
      .def_prop_ro("sp_sizes",
                   [](const py_group_plan& p) {
                     return std::vector<std::int64_t>(p.plan->sp_sizes().begin(),
                                                      p.plan->sp_sizes().end());
                   })
      .def_prop_ro("num_batches",
                   [](const py_group_plan& p) { return p.plan->plan().num_batches(); })
      .def_prop_ro("target_seconds",
                   [](const py_group_plan& p) { return p.plan->layouts().target_seconds(); })
      .def("layouts", &layouts_of, "Every (resolution, frames) pair's layout, as dicts.")
      .def(
          "deal",
          [](const py_group_plan& p, std::uint32_t world, const std::string& state) {
            const vbucket::group_state from =
                state.empty() ? vbucket::group_state{} : vbucket::parse_group_state(state);
            return py_group_schedule{
                std::make_shared<const vbucket::group_schedule>(p.plan->deal(world, from)), p};
          },
          "world"_a, "state"_a, "The plan dealt to `world` ranks from `state` (\"\": the start).")
      .def(
          "write_ledger_epoch",
          [](const py_group_plan& p, const std::string& dir) {
            vbucket::ledger_writer out = ledger_file(dir, 0);
            vbucket::write_epoch_block(
                out, vbucket::epoch_block_of(p.plan->plan(), p.ids->size(), *p.ids));
          },
          "dir"_a,
          "Writes the epoch's declaration into dir/rank-00000.ledger (vbucket::epoch_block_of).");

  nb::class_<py_group_schedule>(m, "GroupSchedule")
      .def_prop_ro("steps", [](const py_group_schedule& s) { return s.schedule->steps(); })
      .def_prop_ro("world", [](const py_group_schedule& s) { return s.schedule->world_size(); })
      .def_prop_ro("repeat_groups",
                   [](const py_group_schedule& s) { return s.schedule->repeat_groups(); })
      .def("work", &work_of, "step"_a, "rank"_a, "What `rank` does at `step`, as a dict.")
      .def(
          "step_seconds",
          [](const py_group_schedule& s, std::uint64_t k) {
            if (k >= s.schedule->steps())
              throw vbucket::error("group schedule: step " + std::to_string(k) + " is not below " +
                                   std::to_string(s.schedule->steps()));
            return s.schedule->step_seconds(k);
          },
          "step"_a, "Step `step`'s predicted time (its slowest group's).")
      .def(
          "state_after",
          [](const py_group_schedule& s, std::uint64_t k) {
            if (k > s.schedule->steps())
              throw vbucket::error("group schedule: " + std::to_string(k) +
                                   " steps done but it has " + std::to_string(s.schedule->steps()));
            return vbucket::to_string(s.schedule->state_after(k));
          },
          "steps_done"_a, "The resume state (text) after `steps_done` steps.")
      .def(
          "write_ledger",
          [](const py_group_schedule& s, const std::string& dir, std::uint64_t step,
             std::uint32_t rank, std::uint64_t run_step) {
            check_step_rank(s, step, rank);
            const auto r =
                vbucket::group_record(s.schedule->work(step, rank), *s.plan.plan,
                                      {.step = run_step, .world = s.schedule->world_size()});
            if (!r) return false;
            ledger_file(dir, rank).write(*r);
            return true;
          },
          "dir"_a, "step"_a, "rank"_a, "run_step"_a,
          "Writes the group's batch into dir/rank-R.ledger when `rank` leads its group "
          "(vbucket::group_record); whether it wrote.");
}
