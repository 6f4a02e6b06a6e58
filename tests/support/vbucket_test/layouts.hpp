#pragma once
/// The parallel-layout tests' models, of the size of Open-Sora 2.0 on an 80 GiB device (GiB and
/// seconds per rank): one memory model, time model and limits that the layout
/// and group-plan suites both plan with (sp sizes 1, 2, 4 and 8: the default).

#include "vbucket/plan/parallel_layout.hpp"  // layout_options, sequence_remainder

namespace vbucket_test {

/// Memory 20 + micro·(1e-3·t + 1e-8·t²) GB under 80 GB; compute 0.5 + 1e-4·t + 2e-9·t² s,
/// communication 5e-6 s a token and 0.01 s a micro-step; at most 8 micro-steps; sequences
/// that do not divide by sp are padded.
inline vbucket::layout_options test_layout_options() {
  vbucket::layout_options o;
  o.memory = {20.0, 1e-3, 1e-8};
  o.memory_limit = 80.0;
  o.time.compute = {0.5, 1e-4, 2e-9};
  o.time.comm_per_token = 5e-6;
  o.time.comm_per_micro_step = 0.01;
  o.max_accumulation = 8;
  o.remainder = vbucket::sequence_remainder::pad;
  return o;
}

}  // namespace vbucket_test
