// world_communicator (comm.hpp): which backend a job's ranks talk through.
#include "comm/nccl_comm.hpp"

#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/runtime.hpp>

#if defined(LOOM_HAS_MPI)
#include "comm/mpi_comm.hpp"
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace loom {
namespace {

// The job's size as the launcher (mpirun, srun, hydra) tells each process,
// or 0 outside one.
int launched_ranks() {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::max(0, std::atoi(value));
    }
  }
  return 0;
}

std::string comm_choice() {
  const char* env = std::getenv("LOOM_COMM");
  if (env == nullptr || *env == '\0') return "automatic";
  std::string value(env);
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value != "nccl" && value != "mpi" && value != "local" && value != "automatic") {
    throw InvalidArgument("LOOM_COMM='" + std::string(env) +
                          "' is none of nccl, mpi, local and automatic");
  }
  return value;
}

std::shared_ptr<Communicator> mpi_or_refuse(const CommOptions& options, const std::string& why) {
#if defined(LOOM_HAS_MPI)
  (void)why;
  return detail::mpi_world(options);
#else
  (void)options;
  throw CommError(why + ": this build of loom has no MPI (install an MPI and configure again)");
#endif
}

}  // namespace

std::shared_ptr<Communicator> world_communicator(const Runtime& rt, CommOptions options) {
  if (options.timeout.count() <= 0) {
    throw InvalidArgument("world_communicator: a timeout of " +
                          std::to_string(options.timeout.count()) + " ms");
  }
  const std::string choice = comm_choice();
  const int ranks = launched_ranks();
  const bool on_gpu = rt.default_memory().is_device();
  if (choice == "local") {
    if (ranks > 1) {
      throw CommError("LOOM_COMM=local keeps its ranks inside one process, and this job has " +
                      std::to_string(ranks) + " processes: use mpi or nccl");
    }
    return local_communicators(1, options)[0];
  }
  if (choice == "mpi") return mpi_or_refuse(options, "LOOM_COMM=mpi");
  if (choice == "nccl") {
    if (!on_gpu) {
      throw CommError("LOOM_COMM=nccl needs a runtime on a GPU; this one runs the CPU backend");
    }
    return detail::nccl_world(rt.default_memory().device(), ranks > 1, options);
  }
  // Automatic: NCCL where every rank has a GPU of its own, MPI where ranks
  // share one or run on the CPU, one local rank outside a launcher.
  if (ranks == 0) {
    if (on_gpu) return detail::nccl_world(rt.default_memory().device(), false, options);
    return local_communicators(1, options)[0];
  }
  if (on_gpu && detail::gpus_are_distinct(rt.default_memory().device(), options)) {
    return detail::nccl_world(rt.default_memory().device(), ranks > 1, options);
  }
  return mpi_or_refuse(options, "a job of " + std::to_string(ranks) + " processes");
}

}  // namespace loom
