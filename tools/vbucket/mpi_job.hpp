#pragma once
/// The CLI under an MPI launcher (mpirun, mpiexec, srun): whether this process was started by
/// one, and, when the CLI is built with vbucket::mpi, MPI's start and end and the
/// communicator. `vbucket scan` shards its probes over the ranks; `vbucket plan --rank mpi
/// --world mpi` plans on every rank and checks that the ranks agree before writing.

#include <cstdint>      // std::uint32_t
#include <cstdlib>      // std::getenv
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "cli.hpp"

#if VBUCKET_CLI_HAS_MPI
#include "vbucket/mpi/mpi.hpp"
#endif

namespace vbucket::cli {

/// The number of processes the launcher that started this one started, as its environment
/// says (Open MPI's mpirun: OMPI_COMM_WORLD_SIZE; MPICH's Hydra and Slurm's PMI: PMI_SIZE);
/// 1 when started by a PMIx launcher that does not say (PMIX_RANK set: ask MPI); 0 when no
/// launcher started it.
inline std::uint32_t launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    try {
      return static_cast<std::uint32_t>(parse_uint_flag(name, value, 1, std::uint64_t{1} << 24));
    } catch (const usage_error&) {
      return 1;  // not a count we understand: let MPI say
    }
  }
  return std::getenv("PMIX_RANK") != nullptr ? 1u : 0u;
}

/// Whether argv gives `--name mpi` or `--name=mpi`.
inline bool flag_is_mpi(int argc, char** argv, std::string_view name) {
  const std::string dashed = "--" + std::string(name);
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == dashed + "=mpi") return true;
    if (arg == dashed && i + 1 < argc && std::string_view(argv[i + 1]) == "mpi") return true;
  }
  return false;
}

}  // namespace vbucket::cli
