#pragma once
// The nccl backend's entries: see comm.hpp.

#include <loom/comm.hpp>

#include <memory>

namespace loom::detail {

/// Every process of the job on `device`, bootstrapped over MPI when
/// `over_mpi` (rank 0's NCCL id broadcast), or one rank alone.
/// @throws CommError (a rank missing past the timeout), NcclError.
std::shared_ptr<Communicator> nccl_world(int device, bool over_mpi, const CommOptions& options);

/// True when every process of the job drives a GPU that no other drives
/// (NCCL refuses two ranks on one GPU). False without MPI. @throws CommError.
bool gpus_are_distinct(int device, const CommOptions& options);

}  // namespace loom::detail
