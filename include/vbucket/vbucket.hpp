#pragma once
/// vbucket: the data side of variable-resolution video training. This umbrella header
/// includes every core component of sampling and loading, one folder umbrella per stage of the
/// flow (base → bucket → plan → sample → load, and cache); the run as a whole (run spec, run
/// plan, ledger, audit) has its own umbrella, `vbucket/run.hpp`. Neither includes an adapter
/// (JSON, FFmpeg, CUDA).
#include "vbucket/base.hpp"    // errors, tensors, fields, random sources, rule names
#include "vbucket/bucket.hpp"  // aspect tables, configs, metadata, rules, assignment, batch sizes
#include "vbucket/cache.hpp"   // latent caches: what to precompute, cached_rule
#include "vbucket/load.hpp"    // decoding, normalisation, staging, the loader
#include "vbucket/plan.hpp"    // options, batch plan, epoch planners, stats, layouts
#include "vbucket/sample.hpp"  // samplers and Open-Sora's lifecycle
