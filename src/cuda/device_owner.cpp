#include "cuda/device_owner.hpp"

#include <loom/error.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

DeviceOwner::DeviceOwner(int device, std::shared_ptr<CachingAllocator> pool,
                         const StridedCopier& copier)
    : device_(device), pool_(std::move(pool)), stream_(device, 0), copier_(&copier) {}

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
  copier_->copy_strided(src, dst, key_of(stream_.view()));
}

}  // namespace loom::detail
