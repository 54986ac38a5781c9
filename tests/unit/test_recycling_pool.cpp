// The pool logic behind the stream and event pools, with a fake factory that
// counts what it makes, so that the steady state can be seen to create nothing.
#include "core/recycling_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using loom::detail::RecyclingPool;

struct FakeHandle {
  int id = -1;
  std::shared_ptr<std::atomic<int>> destroyed;
  FakeHandle(int i, std::shared_ptr<std::atomic<int>> d) : id(i), destroyed(std::move(d)) {}
  FakeHandle(FakeHandle&& o) noexcept : id(std::exchange(o.id, -1)), destroyed(o.destroyed) {}
  FakeHandle& operator=(FakeHandle&& o) noexcept {
    id = std::exchange(o.id, -1);
    destroyed = o.destroyed;
    return *this;
  }
  ~FakeHandle() {
    if (id >= 0) ++*destroyed;
  }
};

struct Counting {
  std::atomic<int> made{0};
  std::shared_ptr<std::atomic<int>> destroyed = std::make_shared<std::atomic<int>>(0);
  RecyclingPool<FakeHandle>::Factory factory() {
    return [this] { return FakeHandle(made++, destroyed); };
  }
};

TEST(RecyclingPool, ReleasedObjectIsHandedOutAgain) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  int first = -1;
  {
    auto lease = pool.acquire();
    first = lease->id;
    EXPECT_EQ(pool.in_use(), 1U);
  }
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(pool.cached(), 1U);
  auto again = pool.acquire();
  EXPECT_EQ(again->id, first);
  EXPECT_EQ(pool.created(), 1U);
}

TEST(RecyclingPool, ConcurrentLeasesAreDistinct) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  std::vector<RecyclingPool<FakeHandle>::Lease> leases;
  std::set<int> ids;
  for (int i = 0; i < 5; ++i) {
    leases.push_back(pool.acquire());
    ids.insert(leases.back()->id);
  }
  EXPECT_EQ(ids.size(), 5U);
  EXPECT_EQ(pool.created(), 5U);
  EXPECT_EQ(pool.in_use(), 5U);
}

TEST(RecyclingPool, SteadyStateCreatesNothing) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  pool.reserve(4);
  EXPECT_EQ(pool.created(), 4U);
  EXPECT_EQ(pool.cached(), 4U);
  for (int iteration = 0; iteration < 1000; ++iteration) {
    auto a = pool.acquire();
    auto b = pool.acquire();
    auto d = pool.acquire();
    auto e = pool.acquire();
  }
  EXPECT_EQ(pool.created(), 4U);
  EXPECT_EQ(c.made.load(), 4);
  EXPECT_EQ(c.destroyed->load(), 0);
}

TEST(RecyclingPool, ReserveCountsWhatIsAlreadyCached) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  pool.reserve(2);
  pool.reserve(3);
  pool.reserve(1);
  EXPECT_EQ(pool.created(), 3U);
  EXPECT_EQ(pool.cached(), 3U);
}

TEST(RecyclingPool, MovedLeaseReturnsOnce) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  auto a = pool.acquire();
  auto b = std::move(a);
  EXPECT_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_TRUE(static_cast<bool>(b));
  b.release();
  b.release();
  EXPECT_EQ(pool.cached(), 1U);
  EXPECT_EQ(pool.in_use(), 0U);
}

TEST(RecyclingPool, FactoryFailureLeavesPoolUnchanged) {
  bool fail = true;
  RecyclingPool<int> pool([&fail] {
    if (fail) throw std::runtime_error("no more handles");
    return 7;
  });
  EXPECT_THROW((void)pool.acquire(), std::runtime_error);
  EXPECT_EQ(pool.created(), 0U);
  EXPECT_EQ(pool.in_use(), 0U);
  fail = false;
  EXPECT_EQ(*pool.acquire(), 7);
}

TEST(RecyclingPool, PoolDestructionDestroysCachedObjects) {
  Counting c;
  {
    RecyclingPool<FakeHandle> pool(c.factory());
    pool.reserve(3);
  }
  EXPECT_EQ(c.destroyed->load(), 3);
}

TEST(RecyclingPool, EightThreadsNeverShareAnObject) {
  Counting c;
  RecyclingPool<FakeHandle> pool(c.factory());
  constexpr int kThreads = 8;
  std::vector<std::atomic<int>> holders(64);
  std::atomic<bool> shared{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        auto lease = pool.acquire();
        const int id = lease->id;
        ASSERT_LT(id, 64);
        if (holders[static_cast<std::size_t>(id)].fetch_add(1) != 0) shared = true;
        holders[static_cast<std::size_t>(id)].fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(shared.load());
  EXPECT_LE(pool.created(), static_cast<std::size_t>(kThreads));
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(pool.cached(), pool.created());
}

}  // namespace
