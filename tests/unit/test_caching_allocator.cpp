// The caching allocator's logic over a plain host upstream: size classes,
// splitting and merging, per-stream free lists, cross-stream reuse gated by
// (fake) events, the out-of-memory retry and its message, statistics, and
// eight threads at once.
#include "memory/caching_allocator.hpp"

#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

using loom::detail::Allocation;
using loom::detail::CachingAllocator;
using loom::detail::EventSource;
using loom::detail::StreamKey;
using loom::detail::Upstream;

constexpr std::size_t kMiB = std::size_t{1} << 20;

/// Host memory with a cap and counters, so tests can run it out.
class TestUpstream final : public Upstream {
 public:
  explicit TestUpstream(std::size_t cap = ~std::size_t{0}) : cap_(cap) {}
  void* allocate(std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    if (held_ + bytes > cap_) return nullptr;
    held_ += bytes;
    ++allocations_;
    return inner_->allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    std::lock_guard lock(mutex_);
    held_ -= bytes;
    ++frees_;
    inner_->deallocate(p, bytes);
  }
  std::string name() const override { return "test host"; }

  std::size_t held() const { return held_; }
  int allocations() const { return allocations_; }
  int frees() const { return frees_; }

 private:
  std::unique_ptr<Upstream> inner_ = loom::detail::make_host_upstream();
  std::mutex mutex_;
  std::size_t cap_;
  std::size_t held_ = 0;
  int allocations_ = 0;
  int frees_ = 0;
};

/// Markers that complete only when the test says their stream has finished.
class FakeEvents final : public EventSource {
 public:
  Marker record(StreamKey stream) override {
    std::lock_guard lock(mutex_);
    const Marker m = next_++;
    stream_of_[m] = stream;
    ++recorded_;
    return m;
  }
  bool completed(Marker m) override {
    std::lock_guard lock(mutex_);
    return finished_.count(stream_of_.at(m)) > 0;
  }
  void release(Marker m) noexcept override {
    std::lock_guard lock(mutex_);
    stream_of_.erase(m);
    ++released_;
  }
  bool stream_idle(StreamKey stream) override {
    std::lock_guard lock(mutex_);
    return finished_.count(stream) > 0;
  }
  void finish(StreamKey stream) {
    std::lock_guard lock(mutex_);
    finished_.insert(stream);
  }
  int recorded() const { return recorded_; }
  int released() const { return released_; }

 private:
  std::mutex mutex_;
  Marker next_ = 1;
  std::map<Marker, StreamKey> stream_of_;
  std::set<StreamKey> finished_;
  int recorded_ = 0;
  int released_ = 0;
};

struct Fixture : ::testing::Test {
  TestUpstream* upstream = nullptr;
  std::shared_ptr<FakeEvents> events = std::make_shared<FakeEvents>();
  std::unique_ptr<CachingAllocator> pool;

  void make_pool(std::size_t cap = ~std::size_t{0}) {
    auto up = std::make_unique<TestUpstream>(cap);
    upstream = up.get();
    pool = std::make_unique<CachingAllocator>(std::move(up), events);
  }
  void SetUp() override { make_pool(); }
};

using CachingAllocatorTest = Fixture;

TEST_F(CachingAllocatorTest, ZeroBytesIsAnEmptyAllocation) {
  const Allocation a = pool->allocate(0);
  EXPECT_EQ(a.ptr, nullptr);
  EXPECT_EQ(a.size, 0U);
  pool->deallocate(a);
  EXPECT_EQ(pool->statistics().allocations, 0U);
  EXPECT_EQ(upstream->allocations(), 0);
}

TEST_F(CachingAllocatorTest, SizesRoundTo512AndSegmentsFollowTheSizeClass) {
  EXPECT_EQ(CachingAllocator::rounded_size(1), 512U);
  EXPECT_EQ(CachingAllocator::rounded_size(512), 512U);
  EXPECT_EQ(CachingAllocator::rounded_size(513), 1024U);
  const Allocation small = pool->allocate(100);
  EXPECT_EQ(upstream->held(), CachingAllocator::kSmallSegment);
  const Allocation medium = pool->allocate(3 * kMiB);
  EXPECT_EQ(upstream->held(), CachingAllocator::kSmallSegment + CachingAllocator::kMediumSegment);
  const Allocation large = pool->allocate(33 * kMiB + 1);
  EXPECT_EQ(upstream->held(),
            CachingAllocator::kSmallSegment + CachingAllocator::kMediumSegment + 34 * kMiB);
  for (const auto& a : {small, medium, large}) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.ptr) % 256, 0U);
    std::memset(a.ptr, 0xAB, a.size);  // the memory is really there
    pool->deallocate(a);
  }
}

TEST_F(CachingAllocatorTest, SmallBlocksSplitOneSegmentAndMergeBack) {
  std::vector<Allocation> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool->allocate(1000));  // 1024 each
  EXPECT_EQ(upstream->allocations(), 1) << "all from one 2 MiB segment";
  for (int i = 1; i < 8; ++i) {
    EXPECT_EQ(static_cast<char*>(blocks[i].ptr) - static_cast<char*>(blocks[i - 1].ptr), 1024);
  }
  // Free in a scrambled order; the neighbours merge back into one segment.
  for (int i : {3, 1, 7, 0, 5, 2, 6, 4}) pool->deallocate(blocks[static_cast<std::size_t>(i)]);
  const Allocation whole = pool->allocate(CachingAllocator::kSmallLimit);
  EXPECT_EQ(whole.ptr, blocks[0].ptr) << "the merged segment serves a 1 MiB request at its start";
  EXPECT_EQ(upstream->allocations(), 1);
  pool->deallocate(whole);
  EXPECT_EQ(pool->release_cached(), CachingAllocator::kSmallSegment)
      << "fully merged: the whole segment is releasable";
  EXPECT_EQ(upstream->held(), 0U);
}

TEST_F(CachingAllocatorTest, LargeBlocksSplitOnlyForRemaindersOverOneMiB) {
  const Allocation big = pool->allocate(40 * kMiB);
  void* base = big.ptr;
  pool->deallocate(big);
  const Allocation a = pool->allocate(39 * kMiB + 512);  // remainder < 1 MiB: no split
  EXPECT_EQ(a.ptr, base);
  EXPECT_EQ(pool->statistics().in_use_bytes, 40 * kMiB);
  pool->deallocate(a);
  const Allocation b = pool->allocate(16 * kMiB);  // remainder 24 MiB: split
  EXPECT_EQ(b.ptr, base);
  EXPECT_EQ(pool->statistics().in_use_bytes, 16 * kMiB);
  const Allocation c = pool->allocate(24 * kMiB);
  EXPECT_EQ(static_cast<char*>(c.ptr), static_cast<char*>(base) + 16 * kMiB);
  EXPECT_EQ(upstream->allocations(), 1);
  pool->deallocate(b);
  pool->deallocate(c);
}

TEST_F(CachingAllocatorTest, BestFitPicksTheSmallestAdequateBlock) {
  const Allocation a = pool->allocate(12 * kMiB);
  const Allocation b = pool->allocate(30 * kMiB);
  const Allocation c = pool->allocate(14 * kMiB);
  void* ca = a.ptr;
  void* cc = c.ptr;
  pool->deallocate(a);
  pool->deallocate(b);
  pool->deallocate(c);
  EXPECT_EQ(pool->allocate(13 * kMiB + 512).ptr, cc) << "14 MiB beats 30 MiB";
  EXPECT_EQ(pool->allocate(11 * kMiB).ptr, ca);
}

TEST_F(CachingAllocatorTest, FreeListsArePerStream) {
  const Allocation keep = pool->allocate(64 * kMiB);  // enough in use that nothing is trimmed
  const Allocation a = pool->allocate(4096, /*stream=*/1);
  void* p = a.ptr;
  pool->deallocate(a);
  const Allocation other = pool->allocate(4096, /*stream=*/2);
  EXPECT_NE(other.ptr, p) << "stream 2 must not get stream 1's block without an event";
  const Allocation same = pool->allocate(4096, /*stream=*/1);
  EXPECT_EQ(same.ptr, p) << "stream 1 reuses its own block at once, in stream order";
  pool->deallocate(other);
  pool->deallocate(same);
  pool->deallocate(keep);
}

TEST_F(CachingAllocatorTest, AnIdleStreamsCachedBlocksServeAnotherStreamInsteadOfGrowing) {
  const Allocation a = pool->allocate(4096, /*stream=*/1);
  void* p = a.ptr;
  pool->deallocate(a);
  events->finish(1);  // stream 1 has no work left
  const Allocation b = pool->allocate(4096, /*stream=*/2);
  EXPECT_EQ(b.ptr, p);
  EXPECT_EQ(upstream->allocations(), 1) << "no new segment";
  EXPECT_EQ(pool->statistics().cross_stream_reuses, 1U);
  // The handed-over block is stream 2's now: stream 1 does not get it back
  // while it is in use, and once freed it is stream 2's to reuse at once.
  pool->deallocate(b);
  const Allocation c = pool->allocate(4096, /*stream=*/2);
  EXPECT_EQ(c.ptr, p);
  pool->deallocate(c);
}

TEST_F(CachingAllocatorTest, BlocksOfDifferentStreamsNeverMerge) {
  events->finish(1);
  const Allocation a = pool->allocate(1024, 1);
  const Allocation b = pool->allocate(1024, 1);
  pool->deallocate(a);                            // stream 1, free
  const Allocation a2 = pool->allocate(1024, 2);  // taken over by stream 2
  EXPECT_EQ(a2.ptr, a.ptr);
  pool->deallocate(a2);  // stream 2's block next to stream 1's allocated b
  pool->deallocate(b);   // stream 1's: must not merge with stream 2's neighbour
  EXPECT_EQ(pool->release_cached(), 0U) << "the segment holds blocks of two streams";
}

TEST_F(CachingAllocatorTest, ForgettingOtherStreamsMakesFreesImmediate) {
  const Allocation a = pool->allocate(4096, 1);
  pool->record_stream(a, 5);
  pool->forget_other_streams();
  pool->deallocate(a);
  EXPECT_EQ(events->recorded(), 0) << "no marker on a forgotten stream";
  EXPECT_EQ(pool->statistics().pending_reuse, 0U);
}

TEST_F(CachingAllocatorTest, CrossStreamUseDelaysReuseUntilTheEventCompletes) {
  const Allocation a = pool->allocate(4096, 1);
  void* p = a.ptr;
  pool->record_stream(a, 7);
  pool->record_stream(a, 7);  // once is enough
  pool->record_stream(a, 1);  // its own stream: nothing to wait for
  pool->deallocate(a);
  EXPECT_EQ(events->recorded(), 1);
  EXPECT_EQ(pool->statistics().pending_reuse, 1U);
  const Allocation b = pool->allocate(4096, 1);
  EXPECT_NE(b.ptr, p) << "stream 7 may still be using the block";
  events->finish(7);
  const Allocation c = pool->allocate(4096, 1);
  EXPECT_EQ(c.ptr, p) << "reused once stream 7's marker completed";
  EXPECT_EQ(events->released(), 1);
  EXPECT_EQ(pool->statistics().pending_reuse, 0U);
  pool->deallocate(b);
  pool->deallocate(c);
}

TEST_F(CachingAllocatorTest, PendingBlocksDoNotMergeUntilReleased) {
  const Allocation a = pool->allocate(1024, 1);
  const Allocation b = pool->allocate(1024, 1);
  pool->record_stream(a, 9);
  pool->deallocate(a);
  pool->deallocate(b);
  EXPECT_EQ(pool->release_cached(), 0U) << "segment still has a pending block";
  events->finish(9);
  EXPECT_EQ(pool->release_cached(), CachingAllocator::kSmallSegment);
}

TEST_F(CachingAllocatorTest, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  make_pool(/*cap=*/64 * kMiB);
  const Allocation live = pool->allocate(40 * kMiB);
  const Allocation a = pool->allocate(12 * kMiB);
  pool->deallocate(a);  // cached, not returned: 52 MiB held
  EXPECT_EQ(upstream->held(), 52 * kMiB);
  const Allocation b = pool->allocate(14 * kMiB);  // 66 MiB would exceed the cap
  EXPECT_NE(b.ptr, nullptr);
  EXPECT_EQ(upstream->frees(), 1);
  const auto s = pool->statistics();
  EXPECT_EQ(s.cache_releases, 1U);
  EXPECT_EQ(s.cache_trims, 0U) << "this was the out-of-memory path, not a trim";
  EXPECT_EQ(s.reserved_bytes, 54 * kMiB);
  pool->deallocate(b);
  pool->deallocate(live);
}

TEST_F(CachingAllocatorTest, GrowingFarPastTheMemoryInUseTrimsFreeSegmentsFirst) {
  const Allocation a = pool->allocate(40 * kMiB);
  pool->deallocate(a);                             // 40 MiB cached, nothing in use
  const Allocation b = pool->allocate(50 * kMiB);  // does not fit: growing to 90 MiB is too much
  const auto s = pool->statistics();
  EXPECT_EQ(s.cache_trims, 1U);
  EXPECT_EQ(s.reserved_bytes, 50 * kMiB);
  EXPECT_EQ(upstream->held(), 50 * kMiB);
  pool->deallocate(b);
}

TEST_F(CachingAllocatorTest, OutOfMemoryMessageCarriesRequestAndStatistics) {
  make_pool(/*cap=*/64 * kMiB);
  const Allocation held = pool->allocate(48 * kMiB);
  try {
    (void)pool->allocate(32 * kMiB);
    FAIL() << "expected OutOfMemory";
  } catch (const loom::OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 32 * kMiB);
    const std::string what = e.what();
    EXPECT_NE(what.find("test host pool"), std::string::npos) << what;
    EXPECT_NE(what.find("32.00 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("in use 48.00 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("reserved 48.00 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("retrying once"), std::string::npos) << what;
  }
  pool->deallocate(held);
  EXPECT_NO_THROW(pool->deallocate(pool->allocate(32 * kMiB))) << "usable after the failure";
}

TEST_F(CachingAllocatorTest, ImpossibleRequestIsOutOfMemoryNotACrash) {
  EXPECT_THROW((void)pool->allocate(std::size_t{1} << 50), loom::OutOfMemory);  // 1 PiB
  EXPECT_THROW((void)pool->allocate(~std::size_t{0} - 10), loom::Error);
}

TEST_F(CachingAllocatorTest, StatisticsTrackUseHitsPeakAndFragmentation) {
  EXPECT_EQ(pool->statistics().fragmentation(), 1.0);
  std::vector<Allocation> live;
  for (int i = 0; i < 4; ++i) live.push_back(pool->allocate(256 * 1024));
  auto s = pool->statistics();
  EXPECT_EQ(s.allocations, 4U);
  EXPECT_EQ(s.cache_hits, 3U) << "the first allocation made the segment";
  EXPECT_EQ(s.in_use_bytes, 1 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 2.0);
  for (auto& a : live) pool->deallocate(a);
  s = pool->statistics();
  EXPECT_EQ(s.in_use_bytes, 0U);
  EXPECT_EQ(s.peak_in_use_bytes, 1 * kMiB);
  EXPECT_DOUBLE_EQ(s.cache_hit_rate(), 0.75);
  EXPECT_NE(loom::to_string(s).find("75.0% cache hits"), std::string::npos) << loom::to_string(s);
}

TEST_F(CachingAllocatorTest, SteadyStateNeverCallsTheUpstream) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::size_t> size(1, 3 * kMiB);
  std::vector<std::size_t> sizes(64);
  for (auto& s : sizes) s = size(rng);
  for (int warm = 0; warm < 2; ++warm) {
    std::vector<Allocation> live;
    for (auto s : sizes) live.push_back(pool->allocate(s));
    for (auto& a : live) pool->deallocate(a);
  }
  const int upstream_calls = upstream->allocations();
  for (int round = 0; round < 100; ++round) {
    std::vector<Allocation> live;
    for (auto s : sizes) live.push_back(pool->allocate(s));
    for (auto& a : live) pool->deallocate(a);
  }
  EXPECT_EQ(upstream->allocations(), upstream_calls);
}

TEST_F(CachingAllocatorTest, EightThreadsHammeringNeverOverlap) {
  constexpr int kThreads = 8;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> size(1, 64 * 1024);
      std::vector<Allocation> live;
      const auto stamp = static_cast<unsigned char>(t + 1);
      for (int i = 0; i < 4000; ++i) {
        if (live.size() < 16 && (rng() & 1U) != 0) {
          live.push_back(pool->allocate(size(rng), static_cast<StreamKey>(t % 3)));
          std::memset(live.back().ptr, stamp, live.back().size);
        } else if (!live.empty()) {
          const Allocation a = live.back();
          live.pop_back();
          const auto* bytes = static_cast<const unsigned char*>(a.ptr);
          for (std::size_t k = 0; k < a.size; k += 97) {
            if (bytes[k] != stamp) overlap = true;
          }
          pool->deallocate(a);
        }
      }
      for (auto& a : live) pool->deallocate(a);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlap.load()) << "two live allocations shared memory";
  const auto s = pool->statistics();
  EXPECT_EQ(s.in_use_bytes, 0U);
  EXPECT_GT(s.cache_hit_rate(), 0.9);
}

TEST(CachingAllocatorNoEvents, CrossStreamUseIsRefusedWithoutAnEventSource) {
  CachingAllocator pool(loom::detail::make_host_upstream(), nullptr);
  const Allocation a = pool.allocate(64);
  EXPECT_THROW(pool.record_stream(a, 3), loom::InvalidArgument);
  pool.deallocate(a);
}

}  // namespace
