#pragma once
/// vbucket/load/: Loading: clip decoding (the decoder concept), normalisation, pinned staging and
/// the prefetching loader that follows a sampler.
#include "vbucket/load/clip_decoder.hpp"    // What the loader asks of a decoder
#include "vbucket/load/loader.hpp"          // loader, tensor_traits, clip_decoder
#include "vbucket/load/loader_options.hpp"  // A loader's options
#include "vbucket/load/loader_source.hpp"   // sources a loader follows: schedule, packed, either
#include "vbucket/load/loader_stats.hpp"    // What a loader did
#include "vbucket/load/loader_streams.hpp"  // The loader's random streams, by name
#include "vbucket/load/normalize.hpp"       // THWC uint8 -> CTHW float/bf16 (CPU reference)
#include "vbucket/load/staging.hpp"         // staging_ring, host_backend
