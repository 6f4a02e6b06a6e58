#pragma once
/// vbucket: the data side of variable-resolution video training. This umbrella header
/// includes every core component of sampling and loading; the run as a whole (run spec, run
/// plan, ledger, audit) has its own umbrella, `vbucket/run.hpp`. Neither includes an adapter
/// (JSON, FFmpeg, CUDA).

#include "vbucket/any_sampler.hpp"         // any_sampler: the batching chosen at run time
#include "vbucket/aspect.hpp"              // aspect tables, resolutions, closest ratio
#include "vbucket/assign.hpp"              // assign_all
#include "vbucket/batch_plan.hpp"          // batch_plan, plan_schedule: dealing written once
#include "vbucket/batch_sampler.hpp"       // batch_sampler: samples + config + rule -> batches
#include "vbucket/batch_size.hpp"          // data-parallel size, tokens, micro-batching
#include "vbucket/bucket_config.hpp"       // bucket_config
#include "vbucket/cache_plan.hpp"          // latent caches: what to precompute, cached_rule
#include "vbucket/compiled_rule.hpp"       // compiled_v2_rule (one draw per sample)
#include "vbucket/csv.hpp"                 // metadata CSV reader
#include "vbucket/epoch_plan.hpp"          // epoch planner
#include "vbucket/error.hpp"               // vbucket::error
#include "vbucket/explain.hpp"             // explain_sample: the rule's decisions for one sample
#include "vbucket/group.hpp"               // group_by_bucket
#include "vbucket/group_plan.hpp"          // group_plan: steps over groups of ranks of each sp
#include "vbucket/held_schedule.hpp"       // a held epoch's steps (sampler and loader)
#include "vbucket/loader.hpp"              // loader, tensor_traits, clip_decoder
#include "vbucket/meta.hpp"                // video_meta, meta_table
#include "vbucket/normalize.hpp"           // THWC uint8 -> CTHW float/bf16 (CPU reference)
#include "vbucket/numpy_random.hpp"        // numpy_rng, big_seed
#include "vbucket/opensora_held.hpp"       // every epoch held to the first reported length
#include "vbucket/opensora_lifecycle.hpp"  // Open-Sora's set_step / state_dict(n) over a position
#include "vbucket/opensora_sampler.hpp"    // any_sampler + Open-Sora's lifecycle sequencing
#include "vbucket/packed_plan.hpp"         // packed planner (token budget)
#include "vbucket/parallel_layout.hpp"     // per-bucket sp, micro-batch, accumulation
#include "vbucket/plan_stats.hpp"          // plan statistics
#include "vbucket/random.hpp"              // fast_source, numpy_source
#include "vbucket/rules.hpp"               // opensora_v2_rule, opensora_v12_rule
#include "vbucket/seeding.hpp"             // rng_mode, seed + epoch -> source, assign_epoch
#include "vbucket/staging.hpp"             // staging_ring, host_backend
