#pragma once
/// vbucket/run/, the second umbrella header: the whole training run, beside `vbucket.hpp` (sampling
/// and loading). What a launcher or an auditing tool includes, not every trainer translation unit
/// (it keeps `vbucket.hpp` cheap to compile): the run spec (one description of a run for C++, the
/// CLI and Python), the run plan (weighted sources, stages, changes that keep every sample exactly
/// once), the ledger of delivered batches and its audit. Like `vbucket.hpp`, it includes no adapter
/// (the JSON readers of run files are `vbucket/json/run_spec.hpp` and `vbucket/json/run_plan.hpp`).
#include "vbucket/run/audit.hpp"
#include "vbucket/run/delivery_records.hpp"  // a plan's batches and draws as ledger records        // audit_ledgers: every drawn sample delivered exactly once
#include "vbucket/run/ledger.hpp"       // ledger lines: one per delivered batch; writer and reader
#include "vbucket/run/run_ledger.hpp"   // a run plan's batches as ledger lines
#include "vbucket/run/run_loader.hpp"   // run_loader: a loader over a run
#include "vbucket/run/run_loop.hpp"     // run_loop: one rank's trainer loop and its ledger
#include "vbucket/run/run_plan.hpp"     // run_plan: sources, stages, out-of-memory, resume
#include "vbucket/run/run_sources.hpp"  // weighted sources and the epoch's draws
#include "vbucket/run/run_spec.hpp"     // run_spec: one description of a run, its field table
