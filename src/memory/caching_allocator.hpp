#pragma once
// The one caching allocator, over an Upstream (device, pinned host or plain
// host memory).
//
// - Sizes round up to 512 B. Requests up to 1 MiB come from 2 MiB segments
//   (the small pool); up to 10 MiB from 20 MiB segments; larger ones from a
//   segment of their own size rounded to 2 MiB (the large pool).
// - Best fit among the free blocks of the requesting stream; a block larger
//   than needed is split (small pool: any remainder of 512 B or more; large
//   pool: a remainder over 1 MiB); freed neighbours in a segment merge.
// - Free lists are per stream: a block freed on the stream it was allocated
//   on is reusable at once by that stream, in stream order. A block that
//   record_stream() says was used on other streams is reused only after a
//   marker recorded on each of those streams at free time has completed.
// - A miss first looks at the free blocks of other streams that are idle
//   (every piece of their work has completed): those are handed over
//   instead of growing the pool. Blocks of different streams never merge.
// - A miss that would grow the pool past 1.25 x the memory in use first
//   gives wholly free cached segments back to the upstream (the cache must
//   not fill with pieces no request fits).
// - Upstream out of memory: the cached (wholly free) segments go back to the
//   upstream and the request is retried once; then loom::OutOfMemory, whose
//   message carries the request and the pool's statistics.
//
// Thread-safety: every public function is safe from any thread. All of them
// take the pool's one mutex, but none holds it across an upstream call
// (cudaMalloc and cudaFree take milliseconds and synchronize the device; the
// scheduling thread must not wait behind them): a miss decides under the
// lock, takes the segments to give back (trim, out-of-memory release) out of
// every index and statistic, then frees them and allocates the new segment
// without the lock, and re-takes it to add the segment and carve the
// request. Threads that miss at once may each grow the pool. release_cached()
// likewise detaches under the lock and frees outside it. An upstream that
// throws leaves the pool consistent (what was detached has gone back).
// Steady state allocates nothing: free lists are intrusive, and block
// records are recycled.

#include "core/allocation.hpp"
#include "memory/event_source.hpp"
#include "memory/upstream.hpp"

#include <loom/memory_stats.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace loom::detail {

class CachingAllocator {
 public:
  static constexpr std::size_t kRoundTo = 512;
  static constexpr std::size_t kSmallLimit = std::size_t{1} << 20;    // 1 MiB
  static constexpr std::size_t kSmallSegment = std::size_t{2} << 20;  // 2 MiB
  static constexpr std::size_t kMediumLimit = std::size_t{10} << 20;  // 10 MiB
  static constexpr std::size_t kMediumSegment = std::size_t{20} << 20;
  static constexpr std::size_t kLargeRound = std::size_t{2} << 20;

  /// `events` may be null when every user stays on one stream (host pools).
  CachingAllocator(std::unique_ptr<Upstream> upstream, std::shared_ptr<EventSource> events);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// `bytes` for use on `stream`. @throws OutOfMemory after the retry.
  Allocation allocate(std::size_t bytes, StreamKey stream = 0);
  /// Returns an allocation. Never throws (a failed marker record waits for
  /// the streams instead of losing the block). Empty allocations are ignored.
  void deallocate(const Allocation& allocation) noexcept;
  /// The allocation is (also) used on `stream`: its memory is reused only
  /// after that stream's work at free time has completed.
  void record_stream(const Allocation& allocation, StreamKey stream);

  /// Gives every wholly free segment back to the upstream; returns the bytes released.
  std::size_t release_cached();
  /// Moves every block, live, free or pending, to `keep` and forgets the
  /// other streams recorded for them: call only when every stream is idle
  /// and all but `keep` may be destroyed (runtime shutdown), so that a block
  /// freed or reused later never names a stream that no longer exists.
  void forget_streams(StreamKey keep) noexcept;

  PoolStatistics statistics() const;
  /// The upstream's name: "device 0", "pinned host", "host".
  std::string name() const;
  /// The rounded size a request of `bytes` occupies.
  static std::size_t rounded_size(std::size_t bytes) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::detail
