#pragma once
/// vbucket/cache/: Latent caches: what to precompute once, and the rule that reads it back.
#include "vbucket/cache/cache_plan.hpp"  // latent caches: what to precompute, cached_rule
