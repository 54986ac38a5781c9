#pragma once
// The memory behind tensors, and the pool-side owner that made it. A
// Storage keeps its owner (and so the pool) alive; owned storage goes back
// to the owner when the last tensor viewing it is gone. Provided storage
// wraps a user's pointer and gives nothing back.

#include "core/allocation.hpp"

#include <loom/memory.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace loom {
class Tensor;
}

namespace loom::detail {

struct Storage;

/// The bytes a view can touch: [lo, hi) in its storage's address space.
std::pair<std::uintptr_t, std::uintptr_t> byte_span(const Tensor& t);

/// The address space a view's bytes live in, for ordering and overlap:
/// memory is identified by where it is, not by the handle that wraps it (two
/// provide() calls on one pointer are the same data). All host memory,
/// pageable or pinned, is one space; each device is its own. A graph
/// intermediate that no runtime has bound yet has no address: its storage
/// is its space. Never dereferenced; only compared.
const void* address_space(const Tensor& t) noexcept;

/// How strided tensors are gathered within one memory space. The copy paths
/// (src/transfer) implement it; the runtime gives each owner its own, so that
/// the layers below transfer need not know how copies are made.
class StridedCopier {
 public:
  virtual ~StridedCopier() = default;
  /// dst = src, same shape and dtype, both in one space; dst contiguous.
  /// `stream`: 0 on the host (done when it returns), else the device stream
  /// it is enqueued on.
  virtual void copy_strided(const Tensor& src, const Tensor& dst, std::uintptr_t stream) const = 0;
};

/// One memory space's source of storage: a pool, its default stream, and
/// how to copy strided tensors within the space.
class MemoryOwner : public std::enable_shared_from_this<MemoryOwner> {
 public:
  virtual ~MemoryOwner() = default;
  virtual Memory memory() const noexcept = 0;
  /// Fresh storage of `bytes` for use on the owner's stream. @throws OutOfMemory.
  virtual std::shared_ptr<Storage> allocate(std::size_t bytes) = 0;
  /// Gives an owned storage's memory back. Never throws.
  virtual void free(Storage& storage) noexcept = 0;
  /// The storage is (also) used on `stream`. No-op for host memory.
  virtual void record_stream(Storage& storage, std::uintptr_t stream) = 0;
  /// dst = src, same shape and dtype, both in this space; dst contiguous.
  /// Host: done when it returns. Device: enqueued on the owner's stream.
  virtual void copy_strided(const Tensor& src, const Tensor& dst) = 0;
};

struct Storage {
  void* base = nullptr;
  std::size_t bytes = 0;
  Memory memory = Memory::pageable;
  std::uintptr_t stream = 0;  ///< the stream the memory was allocated for; 0 for host
  Allocation allocation;      ///< empty for provided storage
  bool owned = false;
  std::shared_ptr<MemoryOwner> owner;
  /// A graph-scoped intermediate (Graph::intermediate): no memory until a
  /// runtime binds it (bound false), at its graph's first submit or compile.
  bool intermediate = false;
  bool bound = false;
  /// What a bound intermediate's memory lives in (a compiled graph's arena).
  std::shared_ptr<const void> keep_alive;
  /// A token (a communicator's): host memory that no task reads or writes,
  /// listed among a task's writes only to order it. Checks of where a
  /// task's tensors live pass it by, whatever runs the task.
  bool order_only = false;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (owned && owner) owner->free(*this);
  }
};

}  // namespace loom::detail
