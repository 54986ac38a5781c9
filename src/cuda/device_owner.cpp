#include "cuda/device_owner.hpp"

#include "copy/strided_copy.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "memory/host_owner.hpp"

#include <loom/error.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

DeviceOwner::DeviceOwner(int device, std::shared_ptr<CachingAllocator> pool)
    : device_(device), pool_(std::move(pool)), stream_(device, 0) {}

std::shared_ptr<Storage> DeviceOwner::allocate(std::size_t bytes) {
  auto storage = std::make_shared<Storage>();
  storage->stream = key_of(stream_.view());
  storage->allocation = pool_->allocate(bytes, storage->stream);
  storage->base = storage->allocation.ptr;
  storage->bytes = bytes;
  storage->memory = memory();
  storage->owned = true;
  storage->owner = shared_from_this();
  return storage;
}

void DeviceOwner::record_stream(Storage& storage, std::uintptr_t stream) {
  if (storage.owned) pool_->record_stream(storage.allocation, stream);
}

void DeviceOwner::copy_strided(const Tensor& src, const Tensor& dst) {
  if (!dst.is_contiguous()) {
    throw InvalidArgument("copy: destination " + dst.describe() + " must be contiguous");
  }
  DeviceGuard guard(device_);
  if (src.is_contiguous()) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                    stream_.view()));
    return;
  }
  if (src.dtype() == DType::i4) {
    throw InvalidArgument("copy: a strided i4 tensor cannot be gathered; " + src.describe());
  }
  kernels::strided_copy(src.data(), layout_of(src), dst.data(), src.numel(),
                        bits_of(src.dtype()) / 8, stream_.view());
}

}  // namespace loom::detail
