#pragma once
/// Random sources for bucket rules. A source hands out, for sample i and sub-stream s, a
/// generator of uniform doubles in [0, 1). Two are provided:
///  - `fast_source` (`random_source.hpp`, with the concept): counter-based, keyed by (seed,
///    epoch, sample, sub-stream, draw), so any thread or rank computes any sample's draws
///    alone, and epochs never share streams.
///  - `numpy_source` (`numpy_random.hpp`): Open-Sora's draws bit for bit
///    (`numpy.random.default_rng(s_i + s)` with s_i = seed + i · num_bucket).

#include "numpy_random.hpp"   // numpy_source, numpy_rng, big_seed
#include "random_source.hpp"  // random_source, fast_source, shifted_source
