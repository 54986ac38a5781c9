// A rank that leaves the job early (it finalizes MPI and returns) while the
// others run a collective: theirs fails within the timeout with a CommError
// naming the task, and every process then exits cleanly. Exit code 0 when
// that held on this rank.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ok = 1;
  {
    loom::Runtime rt;
    auto comm = loom::world_communicator(rt, {.timeout = std::chrono::milliseconds(2000)});
    if (rank != size - 1) {
      auto x = rt.tensor<float>({256});
      loom::Graph g;
      g.collective(comm->all_reduce(x, x), {.name = "grad all-reduce"});
      const auto start = std::chrono::steady_clock::now();
      try {
        rt.submit(g).wait();
        std::fprintf(stderr, "rank %d: the all-reduce succeeded without the last rank\n", rank);
        ok = 0;
      } catch (const loom::CommError& e) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const bool named = e.task() == "grad all-reduce";
        const bool bounded = s < 20.0;
        std::printf("rank %d: failed after %.2f s as expected: %s\n", rank, s, e.what());
        if (!named || !bounded) ok = 0;
      }
    }
  }
  // The last rank gets here at once: it leaves early.
  MPI_Finalize();
  if (rank == size - 1) std::printf("rank %d left early\n", rank);
  return ok != 0 ? 0 : 1;
}
