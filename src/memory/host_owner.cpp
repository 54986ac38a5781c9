#include "memory/host_owner.hpp"

#include <loom/error.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

std::shared_ptr<Storage> HostOwner::allocate(std::size_t bytes) {
  auto storage = std::make_shared<Storage>();
  storage->allocation = pool_->allocate(bytes, 0);
  storage->base = storage->allocation.ptr;
  storage->bytes = bytes;
  storage->memory = memory_;
  storage->owned = true;
  storage->owner = shared_from_this();
  return storage;
}

void HostOwner::record_stream(Storage& storage, std::uintptr_t stream) {
  // Pinned memory is read and written by DMA on device streams.
  if (memory_ == Memory::pinned && storage.owned) pool_->record_stream(storage.allocation, stream);
}

}  // namespace loom::detail
