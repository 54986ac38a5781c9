#pragma once
// Process-wide counts of CUDA streams and events loom created and destroyed,
// so that tests can prove the steady state creates none.

#include <atomic>
#include <cstdint>

namespace loom::detail {

struct CudaObjectCounts {
  std::uint64_t streams_created = 0;
  std::uint64_t streams_destroyed = 0;
  std::uint64_t events_created = 0;
  std::uint64_t events_destroyed = 0;
};

/// A snapshot of the counters. Thread-safe.
CudaObjectCounts cuda_object_counts() noexcept;

void count_stream_created() noexcept;
void count_stream_destroyed() noexcept;
void count_event_created() noexcept;
void count_event_destroyed() noexcept;

}  // namespace loom::detail
