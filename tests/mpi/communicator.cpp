/// Tests of vbucket/mpi/communicator.hpp, run as several processes (4 in ctest): rank and world
/// from a communicator, also a split one, for a sampler; a second environment is a no-op; a
/// failed MPI call is a vbucket::error naming the call.
#include "vbucket/mpi/communicator.hpp"

#include <doctest/doctest.h>

#include <cstdint>  // std::uint32_t
#include <string>   // std::string

#include "vbucket/base/error.hpp"

namespace {
using vbucket::mpi::communicator;
}  // namespace

TEST_CASE("rank and world come from the communicator") {
  const communicator comm;
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(comm.rank() == static_cast<std::uint32_t>(rank));
  CHECK(comm.size() == static_cast<std::uint32_t>(size));
  const vbucket::sampler_options o = vbucket::mpi::with_rank_world(comm, {});
  CHECK(o.rank == static_cast<std::uint32_t>(rank));
  CHECK(o.world == static_cast<std::uint32_t>(size));
}

TEST_CASE("a split communicator has its own rank and size") {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  {
    const communicator comm(half);
    CHECK(comm.get() == half);
    CHECK(comm.rank() == static_cast<std::uint32_t>(rank / 2));
    CHECK(comm.size() == static_cast<std::uint32_t>((size - rank % 2 + 1) / 2));
  }
  MPI_Comm_free(&half);
  const vbucket::mpi::environment again;  // MPI runs already: neither starts nor finalises it
  int initialized = 0;
  MPI_Initialized(&initialized);
  CHECK(initialized != 0);
}

TEST_CASE("a failed MPI call is an error naming the call") {
  CHECK_NOTHROW(vbucket::mpi::detail::check(MPI_SUCCESS, "MPI_Barrier"));
  try {
    vbucket::mpi::detail::check(MPI_ERR_COMM, "MPI_Comm_rank");
    FAIL("no error");
  } catch (const vbucket::error& e) {
    const std::string m = e.what();
    CHECK(m.rfind("vbucket::mpi: MPI_Comm_rank failed: ", 0) == 0);
    CHECK(m.size() > std::string("vbucket::mpi: MPI_Comm_rank failed: ").size());
  }
}
