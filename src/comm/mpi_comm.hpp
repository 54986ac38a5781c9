#pragma once
// The mpi backend's entry (built only with MPI): see comm.hpp.

#include <loom/comm.hpp>

#include <memory>

namespace loom::detail {

/// Every process of the job (MPI_COMM_WORLD). @throws CommError.
std::shared_ptr<Communicator> mpi_world(const CommOptions& options);

}  // namespace loom::detail

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::detail {

/// Each process's `value`, in rank order, over a private duplicate of
/// MPI_COMM_WORLD. @throws CommError past the timeout.
std::vector<std::int64_t> mpi_world_all_gather(std::int64_t value, const CommOptions& options);
/// Rank `root`'s `bytes` at `data`, on every process. @throws CommError.
void mpi_world_broadcast(void* data, std::size_t bytes, int root, const CommOptions& options);
/// This process's rank and the job's size in MPI_COMM_WORLD.
int mpi_world_rank();
int mpi_world_size();

}  // namespace loom::detail
