#pragma once
// Storage in host memory (pageable, or pinned through a pinned upstream),
// from a caching pool; strided copies are done on the calling thread, by the
// copier the runtime gives (src/transfer).

#include "core/storage.hpp"
#include "memory/caching_allocator.hpp"

#include <memory>

namespace loom::detail {

class HostOwner final : public MemoryOwner {
 public:
  HostOwner(Memory memory, std::shared_ptr<CachingAllocator> pool, const StridedCopier& copier)
      : memory_(memory), pool_(std::move(pool)), copier_(&copier) {}

  Memory memory() const noexcept override { return memory_; }
  std::shared_ptr<Storage> allocate(std::size_t bytes) override;
  void free(Storage& storage) noexcept override { pool_->deallocate(storage.allocation); }
  void record_stream(Storage& storage, std::uintptr_t stream) override;
  void copy_strided(const Tensor& src, const Tensor& dst) override {
    copier_->copy_strided(src, dst, 0);
  }

  CachingAllocator& pool() noexcept { return *pool_; }
  const std::shared_ptr<CachingAllocator>& pool_ptr() const noexcept { return pool_; }

 private:
  Memory memory_;
  std::shared_ptr<CachingAllocator> pool_;
  const StridedCopier* copier_;
};

}  // namespace loom::detail
