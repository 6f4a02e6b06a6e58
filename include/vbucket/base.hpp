#pragma once
/// vbucket/base/: The vocabulary every stage shares: errors, tensors, per-sample fields, random
/// sources (counter-based and Open-Sora's NumPy draws), rule names and per-sample costs.
#include "vbucket/base/error.hpp"          // vbucket::error
#include "vbucket/base/fields.hpp"         // per-sample fields that ride with batches
#include "vbucket/base/numpy_random.hpp"   // numpy_rng, big_seed
#include "vbucket/base/random.hpp"         // fast_source, numpy_source
#include "vbucket/base/random_source.hpp"  // random_source concept, fast_source
#include "vbucket/base/rule_kind.hpp"      // rule names: opensora-v2, opensora-v1.2
#include "vbucket/base/sample_costs.hpp"   // per-sample costs from a text file
#include "vbucket/base/tensor.hpp"         // the loader's tensor vocabulary
