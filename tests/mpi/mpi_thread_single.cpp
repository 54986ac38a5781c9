// MPI initialized by the program at MPI_THREAD_SINGLE (plain MPI_Init): the
// README promises that loom asks for MPI_THREAD_SERIALIZED at least, so the
// world communicator is refused with a CommError that says so, rather than
// running collectives from host workers that MPI does not allow. Exit code
// 0 when that held.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/runtime.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
  int provided = MPI_THREAD_MULTIPLE;
  MPI_Query_thread(&provided);
  int ok = 1;
  if (provided >= MPI_THREAD_SERIALIZED) {
    // An MPI that grants more than asked: nothing to refuse here.
    std::fprintf(stderr, "MPI_Init gave thread level %d: the refusal cannot be tested\n", provided);
    MPI_Finalize();
    return 77;
  }
  {
    loom::Runtime rt(loom::RuntimeOptions{.backend = loom::Backend::cpu});
    try {
      auto comm = loom::world_communicator(rt);
      std::fprintf(stderr, "a communicator was made at thread level %d\n", provided);
      ok = 0;
    } catch (const loom::CommError& e) {
      const std::string what = e.what();
      if (what.find("MPI_THREAD_SERIALIZED") == std::string::npos) {
        std::fprintf(stderr, "the refusal does not name MPI_THREAD_SERIALIZED: %s\n", e.what());
        ok = 0;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "refused with another error: %s\n", e.what());
      ok = 0;
    }
  }
  MPI_Finalize();
  return ok == 1 ? 0 : 1;
}
