#pragma once
// The local backend's reduction on a GPU: out[i] = the inputs' element
// offset + i combined in input order (as the host path does), enqueued on a
// stream. All pointers on the stream's device.

#include <loom/comm.hpp>
#include <loom/dtype.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace loom::detail {

/// @throws CudaError; InternalError for a dtype without a reduction.
void device_reduce(DType dtype, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                   std::int64_t offset, std::int64_t count, cudaStream_t stream);

}  // namespace loom::detail
