#include "memory/host_owner.hpp"

#include "copy/strided_copy.hpp"

#include <loom/error.hpp>
#include <loom/tensor.hpp>

#include <cstring>

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

void HostOwner::copy_strided(const Tensor& src, const Tensor& dst) {
  copy_strided_on_host(src, dst);
}

kernels::StridedLayout layout_of(const Tensor& t) {
  kernels::StridedLayout layout;
  layout.rank = t.rank();
  for (int i = 0; i < t.rank(); ++i) {
    layout.shape[static_cast<std::size_t>(i)] = t.shape()[i];
    layout.strides[static_cast<std::size_t>(i)] = t.strides()[i];
  }
  return layout;
}

void copy_strided_on_host(const Tensor& src, const Tensor& dst) {
  if (!dst.is_contiguous())
    throw InvalidArgument("copy: destination " + dst.describe() + " must be contiguous");
  if (src.is_contiguous()) {
    std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  if (src.dtype() == DType::i4) {
    throw InvalidArgument("copy: a strided i4 tensor cannot be gathered; " + src.describe());
  }
  kernels::strided_copy_reference(src.data(), layout_of(src), dst.data(), src.numel(),
                                  bits_of(src.dtype()) / 8);
}

}  // namespace loom::detail
