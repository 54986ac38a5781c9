#pragma once
/// @file memory_stats.hpp
/// Statistics of one memory pool (device, pinned host or pageable host).

#include <loom/export.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace loom {

/// A snapshot of a pool's counters. Byte figures are of rounded block sizes.
struct PoolStatistics {
  std::size_t reserved_bytes = 0;       ///< held from the upstream (cudaMalloc, ...)
  std::size_t in_use_bytes = 0;         ///< handed out and not yet freed
  std::size_t peak_in_use_bytes = 0;    ///< the most in use at any time
  std::size_t peak_reserved_bytes = 0;  ///< the most reserved at any time
  std::uint64_t allocations = 0;        ///< successful non-empty allocations
  std::uint64_t cache_hits = 0;         ///< allocations served without the upstream
  std::uint64_t upstream_allocations = 0;
  std::uint64_t upstream_frees = 0;
  std::uint64_t cache_releases = 0;  ///< times cached blocks were given back (OOM or on request)
  std::uint64_t pending_reuse = 0;   ///< freed blocks waiting for another stream's event
  std::uint64_t cache_trims = 0;  ///< free segments given back before growing (fragmentation guard)
  std::uint64_t cross_stream_reuses = 0;  ///< cached blocks handed from an idle stream to another

  /// Fraction of allocations served from the cache; 0 with no allocations.
  double cache_hit_rate() const noexcept {
    return allocations == 0 ? 0.0
                            : static_cast<double>(cache_hits) / static_cast<double>(allocations);
  }
  /// reserved / in use: 1.0 means no waste. 1.0 when nothing is reserved;
  /// infinity when memory is reserved but none is in use.
  double fragmentation() const noexcept {
    if (reserved_bytes == 0) return 1.0;
    if (in_use_bytes == 0) return std::numeric_limits<double>::infinity();
    return static_cast<double>(reserved_bytes) / static_cast<double>(in_use_bytes);
  }
};

/// "reserved 40.0 MiB, in use 12.5 MiB (peak 20.0 MiB), 1000 allocations, 99.8% hits, ..."
LOOM_API std::string to_string(const PoolStatistics& stats);

/// "1.50 GiB", "512 B".
LOOM_API std::string format_bytes(std::size_t bytes);

}  // namespace loom
