#pragma once
/// vbucket/sample/: Samplers: a planner behind a sampler's face (fixed, packed, chosen at run time)
/// and Open-Sora's sampler lifecycle (held epochs, set_step, state_dict).
#include "vbucket/sample/any_sampler.hpp"         // any_sampler: the batching chosen at run time
#include "vbucket/sample/batch_sampler.hpp"       // samples + config + rule -> batches
#include "vbucket/sample/held_schedule.hpp"       // a held epoch's steps (sampler and loader)
#include "vbucket/sample/opensora_held.hpp"       // every epoch held to the first reported length
#include "vbucket/sample/opensora_lifecycle.hpp"  // Open-Sora's set_step / state_dict(n)
#include "vbucket/sample/opensora_sampler.hpp"    // any_sampler + Open-Sora's lifecycle sequencing
