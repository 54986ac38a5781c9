#pragma once
// Storage in one device's memory, from its caching pool, for use on the
// owner's stream (a non-blocking stream: the device's default loom stream).
// Strided copies go through the copier the runtime gives (src/transfer).

#include "core/storage.hpp"
#include "cuda/stream.hpp"
#include "memory/caching_allocator.hpp"

#include <memory>

namespace loom::detail {

class DeviceOwner final : public MemoryOwner {
 public:
  DeviceOwner(int device, std::shared_ptr<CachingAllocator> pool, const StridedCopier& copier);

  Memory memory() const noexcept override { return Memory::on_device(device_); }
  std::shared_ptr<Storage> allocate(std::size_t bytes) override;
  void free(Storage& storage) noexcept override { pool_->deallocate(storage.allocation); }
  void record_stream(Storage& storage, std::uintptr_t stream) override;
  /// Enqueued on the owner's stream.
  void copy_strided(const Tensor& src, const Tensor& dst) override;

  int device() const noexcept { return device_; }
  StreamView stream() const noexcept { return stream_.view(); }
  CachingAllocator& pool() noexcept { return *pool_; }

 private:
  int device_;
  std::shared_ptr<CachingAllocator> pool_;
  Stream stream_;
  const StridedCopier* copier_;
};

inline std::uintptr_t key_of(StreamView s) noexcept {
  return reinterpret_cast<std::uintptr_t>(s.native());
}

}  // namespace loom::detail
