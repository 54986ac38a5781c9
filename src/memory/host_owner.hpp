#pragma once
// Storage in host memory (pageable, or pinned through a pinned upstream),
// from a caching pool; strided copies are done on the calling thread.

#include "copy/strided_copy.hpp"
#include "core/storage.hpp"

#include <memory>

namespace loom::detail {

class HostOwner final : public MemoryOwner {
 public:
  HostOwner(Memory memory, std::shared_ptr<CachingAllocator> pool)
      : memory_(memory), pool_(std::move(pool)) {}

  Memory memory() const noexcept override { return memory_; }
  std::shared_ptr<Storage> allocate(std::size_t bytes) override;
  void free(Storage& storage) noexcept override { pool_->deallocate(storage.allocation); }
  void record_stream(Storage& storage, std::uintptr_t stream) override;
  void copy_strided(const Tensor& src, const Tensor& dst) override;

  CachingAllocator& pool() noexcept { return *pool_; }
  const std::shared_ptr<CachingAllocator>& pool_ptr() const noexcept { return pool_; }

 private:
  Memory memory_;
  std::shared_ptr<CachingAllocator> pool_;
};

/// The shape and strides of a tensor, as the strided-copy kernels take them.
kernels::StridedLayout layout_of(const Tensor& t);

/// dst = src on the CPU (dst contiguous; any element size; i4 contiguous only).
void copy_strided_on_host(const Tensor& src, const Tensor& dst);

}  // namespace loom::detail
