// The caching allocator's logic over a plain host upstream: size classes,
// splitting and merging, per-stream free lists, cross-stream reuse gated by
// (fake) events, the out-of-memory retry and its message, statistics, and
// eight threads at once. Over an upstream whose calls block until a test
// lets them through: no lock is held across an upstream allocate or free
// (a miss, a trim, the out-of-memory retry, release_cached()), misses of
// several threads proceed at once, and an upstream that throws leaves the
// pool consistent.
#include "memory/caching_allocator.hpp"

#include <loom/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
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
    if (destroyed_.count(stream) > 0) ++touched_destroyed_;
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
    if (destroyed_.count(stream) > 0) ++touched_destroyed_;
    return finished_.count(stream) > 0;
  }
  /// The stream is gone: any later use of it is counted.
  void destroy(StreamKey stream) {
    std::lock_guard lock(mutex_);
    destroyed_.insert(stream);
  }
  int touched_destroyed() const { return touched_destroyed_; }
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
  std::set<StreamKey> destroyed_;
  int touched_destroyed_ = 0;
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
  pool->forget_streams(1);
  pool->deallocate(a);
  EXPECT_EQ(events->recorded(), 0) << "no marker on a forgotten stream";
  EXPECT_EQ(pool->statistics().pending_reuse, 0U);
}

// A runtime's streams go away at shutdown while tensors (and so the pool)
// live on: no block may name one of them afterwards.
TEST_F(CachingAllocatorTest, AfterForgettingStreamsNoBlockNamesADestroyedStream) {
  constexpr std::size_t kLarge = std::size_t{12} << 20;
  const Allocation kept = pool->allocate(kLarge, 1);  // a tensor on the owner's stream
  pool->record_stream(kept, 7);                       // used by a run's stream
  const Allocation scratch = pool->allocate(kLarge, 7);
  pool->deallocate(scratch);  // cached, free, for stream 7
  pool->forget_streams(1);
  events->destroy(7);
  const Allocation again = pool->allocate(kLarge, 1);  // finds the block stream 7 had
  pool->deallocate(kept);                              // no marker on stream 7
  EXPECT_EQ(events->touched_destroyed(), 0) << "a destroyed stream was queried or recorded on";
  EXPECT_EQ(upstream->allocations(), 2) << "the cached block is reused, not a new segment";
  pool->deallocate(again);
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

// ---------------------------------------------------------------------------
// No lock across the upstream. A Gate holds upstream calls until the test
// opens it; it outlives the pool, so a test can check after the pool's
// destruction that every segment went back. Every wait has a deadline, so a
// pool that holds its lock across the upstream fails these tests instead of
// hanging them.

constexpr auto kPatience = std::chrono::seconds(3);

/// The state behind a GatedUpstream: the gate, counters, and an injected failure.
class Gate {
 public:
  explicit Gate(std::size_t cap) : cap_(cap) {}

  void* allocate(std::size_t bytes) {
    wait_if(allocations_closed_);
    std::lock_guard lock(mutex_);
    if (throw_countdown_ >= 0 && throw_countdown_-- == 0) {
      throw loom::Error("injected upstream failure");
    }
    if (held_ + bytes > cap_) return nullptr;
    void* p = inner_->allocate(bytes);
    held_ += bytes;
    ++allocations_;
    ++live_;
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept {
    wait_if(frees_closed_);
    std::lock_guard lock(mutex_);
    held_ -= bytes;
    ++frees_;
    --live_;
    inner_->deallocate(p, bytes);
  }

  void close_allocations() { set(allocations_closed_, true); }
  void close_frees() { set(frees_closed_, true); }
  void open() {
    {
      std::lock_guard lock(gate_mutex_);
      allocations_closed_ = frees_closed_ = false;
    }
    gate_cv_.notify_all();
  }
  /// True once `calls` upstream calls wait at the gate at the same time.
  bool wait_until_waiting(int calls) {
    std::unique_lock lock(gate_mutex_);
    return gate_cv_.wait_for(lock, kPatience, [&] { return waiting_ >= calls; });
  }
  /// The allocate() after the next `calls` ones throws loom::Error.
  void throw_after(int calls) {
    std::lock_guard lock(mutex_);
    throw_countdown_ = calls;
  }

  std::size_t held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }
  int live() const {
    std::lock_guard lock(mutex_);
    return live_;
  }
  int allocations() const {
    std::lock_guard lock(mutex_);
    return allocations_;
  }
  int frees() const {
    std::lock_guard lock(mutex_);
    return frees_;
  }

 private:
  void set(bool& flag, bool value) {
    std::lock_guard lock(gate_mutex_);
    flag = value;
  }
  void wait_if(const bool& closed) {
    std::unique_lock lock(gate_mutex_);
    if (!closed) return;
    ++waiting_;
    gate_cv_.notify_all();
    gate_cv_.wait(lock, [&] { return !closed; });
    --waiting_;
  }

  std::unique_ptr<Upstream> inner_ = loom::detail::make_host_upstream();
  std::mutex gate_mutex_;
  std::condition_variable gate_cv_;
  bool allocations_closed_ = false;
  bool frees_closed_ = false;
  int waiting_ = 0;
  mutable std::mutex mutex_;
  std::size_t cap_;
  std::size_t held_ = 0;
  int allocations_ = 0;
  int frees_ = 0;
  int live_ = 0;  // segments handed out and not yet given back
  int throw_countdown_ = -1;
};

class GatedUpstream final : public Upstream {
 public:
  explicit GatedUpstream(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  void* allocate(std::size_t bytes) override { return gate_->allocate(bytes); }
  void deallocate(void* p, std::size_t bytes) noexcept override { gate_->deallocate(p, bytes); }
  std::string name() const override { return "gated host"; }

 private:
  std::shared_ptr<Gate> gate_;
};

/// Opens the gate when a test leaves, early or not, before its background
/// tasks (declared before it) are joined.
struct OpenAtExit {
  Gate& gate;
  ~OpenAtExit() { gate.open(); }
};

struct GatedFixture : ::testing::Test {
  std::shared_ptr<Gate> gate;
  std::shared_ptr<FakeEvents> events = std::make_shared<FakeEvents>();
  std::unique_ptr<CachingAllocator> pool;

  void make_pool(std::size_t cap = ~std::size_t{0}) {
    pool.reset();
    gate = std::make_shared<Gate>(cap);
    pool = std::make_unique<CachingAllocator>(std::make_unique<GatedUpstream>(gate), events);
  }
  void SetUp() override { make_pool(); }
  void TearDown() override {
    gate->open();
    pool.reset();
    EXPECT_EQ(gate->live(), 0) << "segments not given back when the pool was destroyed";
    EXPECT_EQ(gate->held(), 0U);
  }

  /// While some call of the pool waits inside the upstream, other threads
  /// each run one of: a deallocate(), a record_stream(), a statistics(), a
  /// cache-hit allocate() of the small size class and (with `miss_bytes`)
  /// an allocate() that misses. Returns those that did not complete in
  /// time; they finish once the gate opens (`tasks` holds them).
  std::vector<std::string> stalled_calls(const Allocation& to_free, const Allocation& to_record,
                                         std::vector<std::future<void>>& tasks,
                                         std::size_t miss_bytes = 0) {
    std::vector<std::pair<std::string, std::future<void>*>> probes;
    tasks.reserve(tasks.size() + 5);  // `probes` points into it
    auto probe = [&](std::string name, auto body) {
      tasks.push_back(std::async(std::launch::async, body));
      probes.emplace_back(std::move(name), &tasks.back());
    };
    probe("deallocate", [this, to_free] { pool->deallocate(to_free); });
    probe("record_stream", [this, to_record] { pool->record_stream(to_record, 3); });
    probe("statistics", [this] { (void)pool->statistics(); });
    probe("cache-hit allocate", [this] {
      const Allocation a = pool->allocate(1000);
      std::memset(a.ptr, 0x5A, a.size);
      pool->deallocate(a);
    });
    if (miss_bytes > 0) {
      probe("missing allocate", [this, miss_bytes] {
        const Allocation a = pool->allocate(miss_bytes);
        std::memset(a.ptr, 0x5B, a.size);
        pool->deallocate(a);
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    std::vector<std::string> stalled;
    for (auto& [name, future] : probes) {
      if (future->wait_until(deadline) != std::future_status::ready) stalled.push_back(name);
    }
    return stalled;
  }
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

using CachingAllocatorUpstreamTest = GatedFixture;

TEST_F(CachingAllocatorUpstreamTest, AMissWaitingInTheUpstreamBlocksNoOtherCall) {
  const Allocation to_free = pool->allocate(4096);
  const Allocation to_record = pool->allocate(4096);
  std::vector<std::future<void>> tasks;
  std::future<Allocation> miss;
  OpenAtExit open_at_exit{*gate};

  gate->close_allocations();
  miss = std::async(std::launch::async, [this] { return pool->allocate(40 * kMiB); });
  ASSERT_TRUE(gate->wait_until_waiting(1)) << "the miss never reached the upstream";
  const auto stalled = stalled_calls(to_free, to_record, tasks);
  gate->open();
  EXPECT_TRUE(stalled.empty()) << "waited for the upstream allocate: " << joined(stalled);

  const Allocation big = miss.get();
  for (auto& t : tasks) t.get();
  ASSERT_NE(big.ptr, nullptr);
  std::memset(big.ptr, 0xC3, big.size);
  const auto s = pool->statistics();
  EXPECT_EQ(s.upstream_allocations, 2U);
  EXPECT_EQ(s.allocations, 4U);
  EXPECT_EQ(s.cache_hits, 2U);
  EXPECT_EQ(s.reserved_bytes, 42 * kMiB);
  EXPECT_EQ(s.in_use_bytes, 40 * kMiB + 4096);
  EXPECT_EQ(gate->held(), 42 * kMiB);
  pool->deallocate(big);
  pool->deallocate(to_record);
  EXPECT_EQ(pool->statistics().pending_reuse, 1U) << "recorded on stream 3 while the miss waited";
}

TEST_F(CachingAllocatorUpstreamTest, ReleaseCachedWaitingInTheUpstreamBlocksNoOtherCall) {
  const Allocation to_free = pool->allocate(4096);
  const Allocation to_record = pool->allocate(4096);
  pool->deallocate(pool->allocate(40 * kMiB));  // cached
  std::vector<std::future<void>> tasks;
  std::future<std::size_t> release;
  OpenAtExit open_at_exit{*gate};

  gate->close_frees();
  release = std::async(std::launch::async, [this] { return pool->release_cached(); });
  ASSERT_TRUE(gate->wait_until_waiting(1)) << "release_cached() never reached the upstream";
  const auto stalled = stalled_calls(to_free, to_record, tasks, /*miss_bytes=*/12 * kMiB);
  gate->open();
  EXPECT_TRUE(stalled.empty()) << "waited for the upstream free: " << joined(stalled);

  EXPECT_EQ(release.get(), 40 * kMiB);
  for (auto& t : tasks) t.get();
  const auto s = pool->statistics();
  EXPECT_EQ(s.cache_releases, 1U);
  EXPECT_EQ(s.upstream_frees, 1U);
  EXPECT_EQ(s.upstream_allocations, 3U) << "small, 40 MiB and the 12 MiB miss";
  EXPECT_EQ(s.reserved_bytes, 14 * kMiB);
  EXPECT_EQ(gate->held(), 14 * kMiB);
  EXPECT_EQ(s.in_use_bytes, 4096U);
  pool->deallocate(to_record);
}

TEST_F(CachingAllocatorUpstreamTest, ATrimWaitingInTheUpstreamBlocksNoOtherCall) {
  const Allocation to_free = pool->allocate(4096);
  const Allocation to_record = pool->allocate(4096);
  pool->deallocate(pool->allocate(40 * kMiB));  // cached; growing by 50 MiB trims it
  std::vector<std::future<void>> tasks;
  std::future<Allocation> miss;
  OpenAtExit open_at_exit{*gate};

  gate->close_frees();
  miss = std::async(std::launch::async, [this] { return pool->allocate(50 * kMiB); });
  ASSERT_TRUE(gate->wait_until_waiting(1)) << "the trim never reached the upstream";
  const auto stalled = stalled_calls(to_free, to_record, tasks);
  gate->open();
  EXPECT_TRUE(stalled.empty()) << "waited for the trim's upstream free: " << joined(stalled);

  const Allocation big = miss.get();
  for (auto& t : tasks) t.get();
  ASSERT_NE(big.ptr, nullptr);
  std::memset(big.ptr, 0xC3, big.size);
  const auto s = pool->statistics();
  EXPECT_EQ(s.cache_trims, 1U);
  EXPECT_EQ(s.upstream_frees, 1U);
  EXPECT_EQ(s.reserved_bytes, 52 * kMiB);
  EXPECT_EQ(gate->held(), 52 * kMiB);
  EXPECT_EQ(s.in_use_bytes, 50 * kMiB + 4096);
  pool->deallocate(big);
  pool->deallocate(to_record);
}

TEST_F(CachingAllocatorUpstreamTest, AnOutOfMemoryReleaseWaitingInTheUpstreamBlocksNoOtherCall) {
  make_pool(/*cap=*/64 * kMiB);
  const Allocation to_free = pool->allocate(4096);
  const Allocation to_record = pool->allocate(4096);
  const Allocation live = pool->allocate(48 * kMiB);
  pool->deallocate(pool->allocate(12 * kMiB));  // cached: 62 MiB held
  std::vector<std::future<void>> tasks;
  std::future<Allocation> miss;
  OpenAtExit open_at_exit{*gate};

  gate->close_frees();
  // 76 MiB is within 1.25 x in use (no trim) but over the cap: the cached
  // 12 MiB go back, then the retry fits.
  miss = std::async(std::launch::async, [this] { return pool->allocate(14 * kMiB); });
  ASSERT_TRUE(gate->wait_until_waiting(1))
      << "the out-of-memory release never reached the upstream";
  const auto stalled = stalled_calls(to_free, to_record, tasks);
  gate->open();
  EXPECT_TRUE(stalled.empty()) << "waited for the upstream free: " << joined(stalled);

  const Allocation b = miss.get();
  for (auto& t : tasks) t.get();
  ASSERT_NE(b.ptr, nullptr);
  std::memset(b.ptr, 0xC3, b.size);
  const auto s = pool->statistics();
  EXPECT_EQ(s.cache_releases, 1U);
  EXPECT_EQ(s.cache_trims, 0U);
  EXPECT_EQ(s.upstream_frees, 1U);
  EXPECT_EQ(s.reserved_bytes, 64 * kMiB);
  EXPECT_EQ(gate->held(), 64 * kMiB);
  pool->deallocate(b);
  pool->deallocate(live);
  pool->deallocate(to_record);
}

TEST_F(CachingAllocatorUpstreamTest, MissesOfSeveralThreadsWaitInTheUpstreamAtOnce) {
  constexpr int kThreads = 6;
  std::vector<std::future<Allocation>> misses;
  OpenAtExit open_at_exit{*gate};

  gate->close_allocations();
  std::size_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    const std::size_t bytes = (12 + 2 * static_cast<std::size_t>(t)) * kMiB;  // a segment each
    total += bytes;
    misses.push_back(std::async(std::launch::async, [this, bytes, t] {
      return pool->allocate(bytes, static_cast<StreamKey>(t % 2));
    }));
  }
  EXPECT_TRUE(gate->wait_until_waiting(kThreads)) << "the misses reached the upstream one by one";
  gate->open();

  std::vector<Allocation> got;
  for (auto& m : misses) got.push_back(m.get());
  std::sort(got.begin(), got.end(),
            [](const Allocation& a, const Allocation& b) { return a.ptr < b.ptr; });
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NE(got[i].ptr, nullptr);
    std::memset(got[i].ptr, static_cast<int>(i + 1), got[i].size);
    if (i > 0) {
      EXPECT_LE(static_cast<char*>(got[i - 1].ptr) + got[i - 1].size,
                static_cast<char*>(got[i].ptr))
          << "two allocations overlap";
    }
  }
  const auto s = pool->statistics();
  EXPECT_EQ(s.allocations, static_cast<std::uint64_t>(kThreads));
  EXPECT_EQ(s.upstream_allocations, static_cast<std::uint64_t>(kThreads));
  EXPECT_EQ(s.cache_hits, 0U);
  EXPECT_EQ(s.reserved_bytes, total);
  EXPECT_EQ(s.peak_reserved_bytes, total);
  EXPECT_EQ(s.in_use_bytes, total);
  EXPECT_EQ(s.peak_in_use_bytes, total);
  EXPECT_EQ(gate->live(), kThreads);
  EXPECT_EQ(gate->held(), total);
  for (const auto& a : got) pool->deallocate(a);
  EXPECT_EQ(pool->release_cached(), total);
  EXPECT_EQ(gate->live(), 0);
}

TEST_F(CachingAllocatorUpstreamTest, MissesTrimsAndReleasesFromManyThreadsKeepTheBooks) {
  constexpr int kThreads = 4;
  std::atomic<bool> overlap{false};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(100 + t));
      std::uniform_int_distribution<std::size_t> small(1, 512 * 1024);
      std::uniform_int_distribution<std::size_t> large(kMiB, 48 * kMiB);
      const auto stamp = static_cast<unsigned char>(t + 1);
      std::vector<Allocation> live;
      for (int i = 0; i < 600; ++i) {
        if (live.size() < 6 && (rng() & 1U) != 0) {
          const std::size_t bytes = (rng() % 4 == 0) ? large(rng) : small(rng);
          const Allocation a = pool->allocate(bytes, static_cast<StreamKey>(t % 2));
          auto* p = static_cast<unsigned char*>(a.ptr);
          p[0] = p[a.size / 2] = p[a.size - 1] = stamp;
          live.push_back(a);
        } else if (!live.empty()) {
          const Allocation a = live[rng() % live.size()];
          live.erase(std::find_if(live.begin(), live.end(),
                                  [&](const Allocation& x) { return x.ptr == a.ptr; }));
          const auto* p = static_cast<const unsigned char*>(a.ptr);
          if (p[0] != stamp || p[a.size / 2] != stamp || p[a.size - 1] != stamp) overlap = true;
          pool->deallocate(a);
        }
      }
      for (const auto& a : live) pool->deallocate(a);
    });
  }
  std::thread releaser([&] {
    while (!stop) {
      (void)pool->release_cached();
      (void)pool->statistics();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  releaser.join();

  EXPECT_FALSE(overlap.load()) << "two live allocations shared memory";
  const auto s = pool->statistics();
  EXPECT_EQ(s.in_use_bytes, 0U);
  EXPECT_EQ(s.reserved_bytes, gate->held());
  EXPECT_EQ(s.upstream_allocations, static_cast<std::uint64_t>(gate->allocations()));
  EXPECT_EQ(s.upstream_frees, static_cast<std::uint64_t>(gate->frees()));
  EXPECT_EQ(static_cast<int>(s.upstream_allocations - s.upstream_frees), gate->live());
  EXPECT_LE(s.reserved_bytes, s.peak_reserved_bytes);
  EXPECT_LE(pool->release_cached(), s.reserved_bytes);
  EXPECT_EQ(pool->statistics().reserved_bytes, gate->held());
}

TEST_F(CachingAllocatorUpstreamTest, AnUpstreamThatThrowsLeavesThePoolConsistent) {
  const Allocation small = pool->allocate(4096);
  pool->deallocate(pool->allocate(40 * kMiB));  // cached; growing by 50 MiB trims it
  gate->throw_after(0);
  EXPECT_THROW((void)pool->allocate(50 * kMiB), loom::Error);
  auto s = pool->statistics();
  EXPECT_EQ(s.cache_trims, 1U) << "the trim happened before the upstream failed";
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(gate->held(), 2 * kMiB);
  EXPECT_EQ(s.allocations, 2U);
  EXPECT_EQ(s.in_use_bytes, 4096U);

  // Out of memory, then the retry throws: the released segment stays released.
  const std::shared_ptr<Gate> first = gate;
  make_pool(/*cap=*/64 * kMiB);
  EXPECT_EQ(first->live(), 0) << "destroyed with a block in use: every segment given back";
  const Allocation live = pool->allocate(48 * kMiB);
  pool->deallocate(pool->allocate(12 * kMiB));
  gate->throw_after(1);  // the first try runs out of memory; the retry throws
  EXPECT_THROW((void)pool->allocate(14 * kMiB), loom::Error);
  s = pool->statistics();
  EXPECT_EQ(s.cache_releases, 1U);
  EXPECT_EQ(s.reserved_bytes, 48 * kMiB);
  EXPECT_EQ(gate->held(), 48 * kMiB);
  EXPECT_EQ(s.in_use_bytes, 48 * kMiB);

  // Still usable, and steady again.
  const Allocation b = pool->allocate(14 * kMiB);
  std::memset(b.ptr, 0x11, b.size);
  pool->deallocate(b);
  EXPECT_EQ(pool->allocate(14 * kMiB).ptr, b.ptr);
  EXPECT_EQ(gate->allocations(), 3);
  pool->deallocate(live);
  (void)small;
}

TEST_F(CachingAllocatorUpstreamTest, DestroyingThePoolGivesEverySegmentBack) {
  const Allocation a = pool->allocate(4096, 1);
  const Allocation b = pool->allocate(3 * kMiB, 1);
  const Allocation c = pool->allocate(30 * kMiB, 2);
  pool->deallocate(pool->allocate(16 * kMiB, 2));  // cached
  pool->record_stream(b, 4);
  pool->deallocate(b);  // pending on stream 4's marker
  EXPECT_EQ(gate->live(), 4);
  pool.reset();  // with a and c still in use
  EXPECT_EQ(gate->live(), 0);
  EXPECT_EQ(gate->held(), 0U);
  EXPECT_EQ(events->recorded(), events->released()) << "the pending block's marker is released";
  (void)a;
  (void)c;
}

}  // namespace
