#pragma once
// What a pool hands out: the memory and the pool's own handle to it. Defined
// here, below the memory layer, because storage (core) keeps one; the handle
// is opaque outside the allocator (src/memory).

#include <cstddef>

namespace loom::detail {

struct Block;  // the allocator's bookkeeping (src/memory/caching_allocator.cpp)

/// One allocation. Empty (size 0, null pointer) for a 0-byte request.
struct Allocation {
  void* ptr = nullptr;
  std::size_t size = 0;  ///< the requested size
  Block* block = nullptr;
};

}  // namespace loom::detail
