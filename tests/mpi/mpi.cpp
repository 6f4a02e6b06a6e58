/// Tests of the umbrella vbucket/mpi/mpi.hpp: through it alone, ranks agree on a value and a
/// sampler gets its rank and world.
#include "vbucket/mpi/mpi.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t

TEST_CASE("the umbrella: agree and with_rank_world through mpi.hpp") {
  const vbucket::mpi::communicator comm;
  CHECK_NOTHROW(vbucket::mpi::agree(comm, 0x5eedULL, "umbrella test"));
  const vbucket::sampler_options o = vbucket::mpi::with_rank_world(comm, {});
  CHECK(o.world == comm.size());
  CHECK(o.rank < o.world);
}
