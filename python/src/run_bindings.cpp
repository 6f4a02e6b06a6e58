/// The Python binding of vbucket/run/run_plan.hpp (issue 31): `_vbucket.RunPlan`, a training run of
/// several sources and stages read from a run file by the same reader as `vbucket plan --run`
/// (json::load_run_plan_file), so the CLI and Python plan one file identically. A batch is a dict
/// with the fields of the CLI's JSON lines. Registered by `vbucket_bind_run(m)` from
/// vbucket_ext.cpp; the Python side is vbucket/run.py.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>     // std::uint32_t, std::uint64_t
#include <filesystem>  // std::filesystem::create_directories
#include <map>         // std::map
#include <memory>      // std::unique_ptr
#include <string>      // std::string
#include <vector>      // std::vector

#include "vbucket/json/run_plan.hpp"   // load_run_plan_file
#include "vbucket/run/run_ledger.hpp"  // run_ledger
#include "vbucket/run/run_loop.hpp"    // run_loop: the trainer's loop, its ledger
#include "vbucket/run/run_plan.hpp"

#include "run_glue.hpp"  // py_run_plan

namespace nb = nanobind;
using vbucket_py::batch_dict;
using vbucket_py::py_run_plan;

namespace {}  // namespace

void vbucket_bind_run(nb::module_& m) {
  nb::class_<py_run_plan>(m, "RunPlan",
                          "A training run of several sources and stages (vbucket::run_plan) read "
                          "from a run file, as `vbucket plan --run RUN.json` reads it")
      .def_static(
          "from_file",
          [](const std::string& path) {
            nb::gil_scoped_release release;
            return new py_run_plan(path);
          },
          nb::arg("path"), nb::rv_policy::take_ownership,
          "Reads a run file (\"sources\" and \"stages\"); paths in it are relative to it.")
      .def(
          "batch",
          [](const py_run_plan& p, std::uint32_t rank) {
            if (rank >= p.run->world())
              throw vbucket::error("run: rank " + std::to_string(rank) + " is not below world " +
                                   std::to_string(p.run->world()));
            vbucket::run_batch b;
            {
              nb::gil_scoped_release release;
              b = p.run->batch(rank);
            }
            return batch_dict(b, p.stages[p.run->stage()].config);
          },
          nb::arg("rank"),
          "The current step's batch of `rank`: a dict with the fields of the CLI's JSON lines "
          "(step, epoch, stage, rank, bucket, thw, source, row, pads, repeat).")
      .def(
          "advance", [](py_run_plan& p) { p.run->advance(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "The current step was trained on: move to the next (and the next epoch after the last).")
      .def(
          "set_world", [](py_run_plan& p, std::uint32_t w) { p.run->set_world(w); },
          nb::arg("world"), nb::call_guard<nb::gil_scoped_release>(),
          "From the current step on, `world` ranks (every rank calls it at the same step).")
      .def(
          "start_epoch", [](py_run_plan& p, std::uint64_t e) { p.run->start_epoch(e); },
          nb::arg("epoch"), nb::call_guard<nb::gil_scoped_release>(),
          "Begins epoch `epoch` at the current step.")
      .def(
          "out_of_memory",
          [](py_run_plan& p, const std::vector<std::uint32_t>& ranks, double factor) {
            p.run->out_of_memory(ranks, factor);
          },
          nb::arg("ranks") = std::vector<std::uint32_t>{}, nb::arg("factor") = 0.5,
          nb::call_guard<nb::gil_scoped_release>(),
          "The current step ran out of memory on `ranks` (empty: all): their batch sizes are "
          "multiplied by `factor` and the undelivered samples of the epoch planned again.")
      .def(
          "state", [](const py_run_plan& p) { return p.run->state(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "The run's state line (\"vbucket-run v=1 ...\").")
      .def(
          "load", [](py_run_plan& p, const std::string& line) { p.run->load(line); },
          nb::arg("line"), nb::call_guard<nb::gil_scoped_release>(), "Resumes from a state line.")
      .def(
          "write_ledger",
          [](py_run_plan& p, const std::string& dir, const std::vector<std::uint32_t>& ranks) {
            p.write_ledger(dir, ranks);
          },
          nb::arg("dir"), nb::arg("ranks") = std::vector<std::uint32_t>{},
          nb::call_guard<nb::gil_scoped_release>(),
          "Appends the current step's batches of `ranks` (empty: all) to DIR/rank-R.ledger, as "
          "`vbucket plan --run --ledger DIR` does (`vbucket audit DIR` reads them).")
      .def_prop_ro(
          "epoch", [](const py_run_plan& p) { return p.run->epoch(); }, "The current epoch.")
      .def_prop_ro(
          "step", [](const py_run_plan& p) { return p.run->step(); }, "The run's current step.")
      .def_prop_ro(
          "stage", [](const py_run_plan& p) { return p.run->stage(); }, "The current stage.")
      .def_prop_ro(
          "world", [](const py_run_plan& p) { return p.run->world(); }, "The number of ranks.")
      .def_prop_ro(
          "source_names",
          [](const py_run_plan& p) {
            std::vector<std::string> out;
            for (const vbucket::run_source& s : p.run->sources()) out.push_back(s.name);
            return out;
          },
          "The sources' names, in the run file's order.")
      .def_prop_ro(
          "source_csvs", [](const py_run_plan& p) { return p.csvs; },
          "Each source's metadata CSV, as the run file names it (resolved).")
      .def_prop_ro(
          "source_rows",
          [](const py_run_plan& p) {
            std::vector<std::uint64_t> out;
            for (const vbucket::run_source& s : p.run->sources()) out.push_back(s.table->size());
            return out;
          },
          "Each source's rows.")
      .def_prop_ro(
          "steps_left", [](const py_run_plan& p) { return p.run->steps_left(); },
          "Steps left in the current epoch.");

  nb::class_<vbucket::run_loop>(
      m, "RunLoop",
      "One rank's trainer loop over a RunPlan (vbucket::run_loop): a batch handed out counts as "
      "trained once the next is asked for or the state is taken; out_of_memory() replans the "
      "batch in hand; with a ledger directory it writes the rank's ledger itself")
      .def(
          "__init__",
          [](vbucket::run_loop* self, py_run_plan& p, std::uint32_t rank, const std::string& dir) {
            new (self) vbucket::run_loop(*p.run, rank, dir);
          },
          nb::arg("plan"), nb::arg("rank"), nb::arg("ledger") = std::string(),
          nb::keep_alive<1, 2>())
      .def(
          "next",
          [](vbucket::run_loop& l, py_run_plan& p) -> nb::object {
            if (&l.run() != p.run.get())
              throw vbucket::error("run: RunLoop.next: the plan is not the one this loop follows");
            std::optional<vbucket::run_batch> b;
            {
              nb::gil_scoped_release release;
              b = l.next();
            }
            if (!b) return nb::none();
            return batch_dict(*b, p.stages[b->stage].config);
          },
          nb::arg("plan"),
          "The batch handed out before counts as trained; this rank's batch of the current step "
          "(written to the ledger first), or None once at the end of an epoch.")
      .def("state", &vbucket::run_loop::state, nb::call_guard<nb::gil_scoped_release>(),
           "The run's state line after the batches handed out.")
      .def(
          "out_of_memory",
          [](vbucket::run_loop& l, const std::vector<std::uint32_t>& ranks, double factor) {
            l.out_of_memory(ranks, factor);
          },
          nb::arg("ranks") = std::vector<std::uint32_t>{}, nb::arg("factor") = 0.5,
          nb::call_guard<nb::gil_scoped_release>(),
          "The batch in hand failed: the next batch handed out is its step planned again.")
      .def(
          "set_world",
          [](vbucket::run_loop& l, std::uint32_t w, std::optional<std::uint32_t> rank) {
            l.set_world(w, rank);
          },
          nb::arg("world"), nb::arg("rank") = nb::none(), nb::call_guard<nb::gil_scoped_release>(),
          "From the step after the batch in hand, `world` ranks.")
      .def(
          "load",
          [](vbucket::run_loop& l, const std::string& line, std::optional<std::uint32_t> world) {
            l.load(line, world);
          },
          nb::arg("line"), nb::arg("world") = nb::none(), nb::call_guard<nb::gil_scoped_release>(),
          "Resumes from a state line under its world (or `world`); cuts the ledger back to it.")
      .def_prop_ro("handed_out", &vbucket::run_loop::handed_out,
                   "Whether a batch is in hand (handed out, not yet counted as trained).")
      .def_prop_ro("rank", &vbucket::run_loop::rank, "This loop's rank.");
}
