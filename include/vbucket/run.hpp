#pragma once
/// The second umbrella header: the whole training run, beside `vbucket.hpp` (sampling and
/// loading). What a launcher or an auditing tool includes, not every trainer translation unit
/// (it keeps `vbucket.hpp` cheap to compile): the run spec (one description of a run for C++,
/// the CLI and Python), the run plan (weighted sources, stages, changes that keep every sample
/// exactly once), the ledger of delivered batches and its audit. Like `vbucket.hpp`, it includes
/// no adapter (the JSON readers of run files are `vbucket/json/run_spec.hpp` and
/// `vbucket/json/run_plan.hpp`).
#include "vbucket/audit.hpp"        // audit_ledgers: every drawn sample delivered exactly once
#include "vbucket/ledger.hpp"       // ledger lines: one per delivered batch; writer and reader
#include "vbucket/rule_kind.hpp"    // rule names: opensora-v2, opensora-v1.2
#include "vbucket/run_ledger.hpp"   // a run plan's batches as ledger lines
#include "vbucket/run_loop.hpp"     // run_loop: one rank's trainer loop and its ledger
#include "vbucket/run_memory.hpp"   // per-bucket batch sizes from a memory model and budget
#include "vbucket/run_plan.hpp"     // run_plan: sources, stages, out-of-memory, resume
#include "vbucket/run_sources.hpp"  // weighted sources and the epoch's draws
#include "vbucket/run_spec.hpp"     // run_spec: one description of a run, its field table
