#pragma once
// Where a caching pool gets its memory from: cudaMalloc, cudaMallocHost, or
// plain host memory (which lets the pool's logic be tested on any machine).

#include <cstddef>
#include <memory>
#include <string>

namespace loom::detail {

class Upstream {
 public:
  virtual ~Upstream() = default;
  /// A fresh region of `bytes`, aligned to at least 256 bytes; nullptr when
  /// out of memory (the pool then releases its cache and retries once).
  /// @throws loom::Error for any other failure.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Returns a region from allocate(). Never throws.
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
  /// For messages and logs: "device 0", "pinned host", "host".
  virtual std::string name() const = 0;
};

/// Plain host memory (aligned operator new). Thread-safe.
std::unique_ptr<Upstream> make_host_upstream();

}  // namespace loom::detail
