#pragma once
/// vbucket/bucket/: Buckets: aspect tables, bucket configs, metadata and its CSV reader,
/// Open-Sora's bucket rules (compiled), assignment, seeding, explanation and batch sizes.
#include "vbucket/bucket/aspect.hpp"         // aspect tables, resolutions, closest ratio
#include "vbucket/bucket/assign.hpp"         // assign_all
#include "vbucket/bucket/batch.hpp"          // What a plan produces
#include "vbucket/bucket/batch_size.hpp"     // data-parallel size, tokens, micro-batching
#include "vbucket/bucket/bucket_config.hpp"  // bucket_config
#include "vbucket/bucket/compiled_rule.hpp"  // compiled_v2_rule (one draw per sample)
#include "vbucket/bucket/csv.hpp"            // metadata CSV reader
#include "vbucket/bucket/explain.hpp"        // explain_sample: one sample's rule decisions
#include "vbucket/bucket/meta.hpp"           // video_meta, meta_table
#include "vbucket/bucket/rules.hpp"          // opensora_v2_rule, opensora_v12_rule
#include "vbucket/bucket/seeding.hpp"        // rng_mode, seed + epoch -> source, assign_epoch
