/// doctest's main for vbucket_mpi_tests, run as several MPI processes: every process runs every
/// test case in the same order (the cases call collectives), and the exit code is the worst of
/// all processes', so a check that fails on one rank fails the test.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <mpi.h>

#include "vbucket/mpi/communicator.hpp"

int main(int argc, char** argv) {
  const vbucket::mpi::environment env(&argc, &argv);
  doctest::Context context(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) context.setOption("minimal", true);  // failures still print, from any rank
  const int mine = context.run();
  int worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
