#include "cuda/object_counts.hpp"

namespace loom::detail {
namespace {
std::atomic<std::uint64_t> g_streams_created{0};
std::atomic<std::uint64_t> g_streams_destroyed{0};
std::atomic<std::uint64_t> g_events_created{0};
std::atomic<std::uint64_t> g_events_destroyed{0};
}  // namespace

CudaObjectCounts cuda_object_counts() noexcept {
  return {g_streams_created.load(), g_streams_destroyed.load(), g_events_created.load(),
          g_events_destroyed.load()};
}

void count_stream_created() noexcept { g_streams_created.fetch_add(1, std::memory_order_relaxed); }
void count_stream_destroyed() noexcept {
  g_streams_destroyed.fetch_add(1, std::memory_order_relaxed);
}
void count_event_created() noexcept { g_events_created.fetch_add(1, std::memory_order_relaxed); }
void count_event_destroyed() noexcept {
  g_events_destroyed.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace loom::detail
