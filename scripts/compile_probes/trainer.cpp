// compile_times.sh probe: the quickstart trainer (a JSON config, its own records, assign and
// plan, checkpoint and resume) with the umbrella header included first, so the trainer's
// translation unit compiles every core component (the example itself includes only
// batch_sampler.hpp). The trainer's code is the example's, included, not copied.
#include <vbucket/vbucket.hpp>  // the umbrella: every core component

#include "../../examples/quickstart/main.cpp"  // IWYU pragma: keep
