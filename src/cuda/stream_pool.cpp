#include "cuda/stream_pool.hpp"

#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

namespace loom::detail {

StreamPool::StreamPool(int device) : device_(device) {
  int least = 0;
  int greatest = 0;
  {
    DeviceGuard guard(device);
    LOOM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  }
  // CUDA's numerically smaller priority runs first; greatest <= least.
  cuda_priorities_[priority_index(Priority::low)] = least;
  cuda_priorities_[priority_index(Priority::normal)] = least + (greatest - least) / 2;
  cuda_priorities_[priority_index(Priority::high)] = greatest;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    const int cuda_priority = cuda_priorities_[i];
    pools_[i] = std::make_unique<RecyclingPool<Stream>>(
        [device, cuda_priority] { return Stream(device, cuda_priority); });
  }
}

StreamPool::Lease StreamPool::acquire(Priority priority) {
  return pools_[static_cast<std::size_t>(priority_index(priority))]->acquire();
}

void StreamPool::reserve(Priority priority, std::size_t count) {
  pools_[static_cast<std::size_t>(priority_index(priority))]->reserve(count);
}

std::size_t StreamPool::created() const {
  std::size_t n = 0;
  for (const auto& pool : pools_) n += pool->created();
  return n;
}

std::size_t StreamPool::in_use() const {
  std::size_t n = 0;
  for (const auto& pool : pools_) n += pool->in_use();
  return n;
}

}  // namespace loom::detail
