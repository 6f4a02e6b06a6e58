#pragma once
/// A communicator as vbucket uses it: this process's rank and the world size, which are the
/// data-parallel rank and world of a `batch_sampler`, and MPI's start and end for programs that
/// do not manage MPI themselves.
///
///     vbucket::mpi::environment env(argc, argv);        // MPI_Init_thread ... MPI_Finalize
///     vbucket::mpi::communicator comm;                  // MPI_COMM_WORLD
///     options.rank = comm.rank(); options.world = comm.size();  // or with_rank_world(comm, o)

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint32_t
#include <string>   // std::string

#include <mpi.h>

#include "vbucket/base/error.hpp"
#include "vbucket/sample/batch_sampler.hpp"

namespace vbucket::mpi {

namespace detail {

/// Throws `vbucket::error` when an MPI call failed (only reachable with an error handler that
/// returns, such as MPI_ERRORS_RETURN; the default one aborts the job).
inline void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw vbucket::error(std::string("vbucket::mpi: ") + call + " failed: " +
                       std::string(text, static_cast<std::size_t>(length > 0 ? length : 0)));
}

}  // namespace detail

/// Starts MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: vbucket's worker threads never call MPI)
/// unless it is running already, and finalises it at destruction when it started it.
class environment {
 public:
  environment() : environment(nullptr, nullptr) {}
  environment(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) return;
    int provided = 0;
    detail::check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owner_ = true;
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    if (!owner_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Finalize();
  }

 private:
  bool owner_ = false;
};

/// A view of an MPI communicator (not owned: its creator frees it).
class communicator {
 public:
  communicator() noexcept : comm_(MPI_COMM_WORLD) {}
  explicit communicator(MPI_Comm comm) noexcept : comm_(comm) {}

  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  /// This process's rank, 0 to size() - 1.
  [[nodiscard]] std::uint32_t rank() const {
    int r = 0;
    detail::check(MPI_Comm_rank(comm_, &r), "MPI_Comm_rank");
    return static_cast<std::uint32_t>(r);
  }
  /// The number of processes.
  [[nodiscard]] std::uint32_t size() const {
    int s = 0;
    detail::check(MPI_Comm_size(comm_, &s), "MPI_Comm_size");
    return static_cast<std::uint32_t>(s);
  }

 private:
  MPI_Comm comm_;
};

/// The name of the machine this process runs on (`MPI_Get_processor_name`: usually the host
/// name), for messages that say where something happened.
inline std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int length = 0;
  detail::check(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(length > 0 ? length : 0));
}

/// `options` with its rank and world taken from `comm`: one data-parallel rank per process.
inline sampler_options with_rank_world(const communicator& comm, sampler_options options) {
  options.rank = comm.rank();
  options.world = comm.size();
  return options;
}

}  // namespace vbucket::mpi
