#pragma once
/// vbucket/plan/: Planning: options, the batch plan (dealing written once), grouping by bucket, the
/// fixed and packed epoch planners, statistics, memory-derived batch sizes and parallel layouts.
#include "vbucket/plan/batch_plan.hpp"        // batch_plan, plan_schedule: dealing written once
#include "vbucket/plan/epoch_plan.hpp"        // epoch planner
#include "vbucket/plan/group.hpp"             // group_by_bucket
#include "vbucket/plan/group_plan.hpp"        // group_plan: steps over groups of ranks of each sp
#include "vbucket/plan/opensora_strings.hpp"  // Open-Sora's "idx-T-H-W" sample strings
#include "vbucket/plan/packed_layout.hpp"     // the flat layout of a packed batch
#include "vbucket/plan/packed_plan.hpp"       // packed planner (token budget)
#include "vbucket/plan/parallel_layout.hpp"   // per-bucket sp, micro-batch, accumulation
#include "vbucket/plan/plan_options.hpp"      // plan_options, batching_mode, token_formula
#include "vbucket/plan/plan_state.hpp"        // plan_state: an epoch plan's resume state
#include "vbucket/plan/plan_stats.hpp"        // plan statistics
#include "vbucket/plan/run_memory.hpp"        // batch sizes from a memory model and budget
