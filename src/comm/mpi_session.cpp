#include "comm/mpi_session.hpp"

#include "comm/mpi_check.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {

MpiSession& MpiSession::get() {
  static MpiSession session;
  return session;
}

bool MpiSession::finalized() noexcept {
  int done = 0;
  return MPI_Finalized(&done) == MPI_SUCCESS && done != 0;
}

MpiSession::MpiSession() {
  if (finalized()) throw CommError("MPI was finalized already; loom cannot use it");
  int initialized = 0;
  LOOM_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    // mpirun's arguments reach MPI through its environment, not argv.
    LOOM_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    initialized_here_ = true;
  } else {
    LOOM_MPI_CHECK(MPI_Query_thread(&provided));
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (initialized_here_) MPI_Finalize();
    throw CommError("MPI was initialized with thread level " + std::to_string(provided) +
                    "; loom's collectives run on host workers and need MPI_THREAD_SERIALIZED at "
                    "least (MPI_THREAD_MULTIPLE is best): initialize MPI with MPI_Init_thread, "
                    "or let loom initialize it");
  }
  serialized_ = provided < MPI_THREAD_MULTIPLE;
}

MpiSession::~MpiSession() {
  if (initialized_here_ && !finalized()) MPI_Finalize();
}

}  // namespace loom::detail
