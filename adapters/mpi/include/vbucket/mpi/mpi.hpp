#pragma once
/// vbucket::mpi: many machines through MPI. The communicator (rank and world), plan agreement.
/// The sharded scan is vbucket/mpi/scan.hpp (it needs vbucket::ffmpeg too).
#include "vbucket/mpi/agree.hpp"
#include "vbucket/mpi/communicator.hpp"
