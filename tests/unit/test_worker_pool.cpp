// The worker pool's warm worker (WorkerPool::keep_one_warm): the scheduling
// thread keeps one idle worker spinning while it watches device work, so
// that a device run's end starts without a wake-up. Timing is not asserted
// (the machine is noisy); what must hold is that every job still runs once,
// that the mechanism never stops waking a worker, and that shutdown does
// not wait for the warm deadline.
#include "sched/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Waits (bounded) until `count` reaches `want`.
bool reaches(const std::atomic<int>& count, int want) {
  const auto give_up = Clock::now() + 30s;
  while (count.load() < want) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(WorkerPoolWarm, JobsPostedWhileAWorkerIsKeptWarmEachRunOnce) {
  loom::detail::WorkerPool pool(2);
  std::atomic<int> ran{0};
  std::atomic<bool> posting{true};
  // The scheduling thread's part: keep_one_warm again and again, short
  // deadlines, while jobs arrive from another thread.
  std::thread keeper([&] {
    while (posting.load()) {
      pool.keep_one_warm(Clock::now() + 200us);
      std::this_thread::yield();
    }
  });
  constexpr int kJobs = 2000;
  for (int i = 0; i < kJobs; ++i) {
    pool.post(loom::Priority::normal, [&](int) { ran.fetch_add(1); });
    if (i % 100 == 0) std::this_thread::sleep_for(300us);  // let workers idle and sleep
  }
  EXPECT_TRUE(reaches(ran, kJobs));
  posting.store(false);
  keeper.join();
  pool.shutdown();
  EXPECT_EQ(ran.load(), kJobs);
}

TEST(WorkerPoolWarm, AWorkerKeptWarmAfterSleepingTakesTheNextJob) {
  loom::detail::WorkerPool pool(1);
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(1ms);  // past the idle spin: the worker sleeps
    pool.keep_one_warm(Clock::now() + 50ms);
    std::this_thread::sleep_for(200us);
    pool.post(loom::Priority::high, [&](int) { ran.fetch_add(1); });
    ASSERT_TRUE(reaches(ran, round + 1)) << "round " << round;
  }
}

// Waits (bounded) until a worker spins for keep_one_warm.
bool gets_warm(const loom::detail::WorkerPool& pool) {
  const auto give_up = Clock::now() + 5s;
  while (!pool.has_warm_worker()) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(50us);
  }
  return true;
}

// Waits (bounded) until no worker spins for keep_one_warm.
bool cools_down(const loom::detail::WorkerPool& pool) {
  const auto give_up = Clock::now() + 5s;
  while (pool.has_warm_worker()) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(50us);
  }
  return true;
}

TEST(WorkerPoolWarm, ASleepingWorkerIsWokenToStayWarm) {
  loom::detail::WorkerPool pool(2);
  std::this_thread::sleep_for(2ms);  // past the idle spin: both sleep
  pool.keep_one_warm(Clock::now() + 1s);
  EXPECT_TRUE(gets_warm(pool));
}

TEST(WorkerPoolWarm, AWorkerWokenToStayWarmThatFoundAJobDoesNotStopTheNextWake) {
  // Woken for keep_one_warm, the worker finds a job first and runs it; it
  // then idles past the first deadline and sleeps. The next keep_one_warm
  // must wake it again (a wake still counted as pending would not).
  loom::detail::WorkerPool pool(1);
  std::atomic<int> ran{0};
  std::this_thread::sleep_for(2ms);
  pool.keep_one_warm(Clock::now() + 1ms);
  pool.post(loom::Priority::normal, [&](int) { ran.fetch_add(1); });
  ASSERT_TRUE(reaches(ran, 1));
  std::this_thread::sleep_for(10ms);  // the deadline and the idle spin pass: asleep
  ASSERT_TRUE(cools_down(pool));
  pool.keep_one_warm(Clock::now() + 10s);
  EXPECT_TRUE(gets_warm(pool));
}

TEST(WorkerPoolWarm, AWakeSentWhileEveryWorkerWasBusyDoesNotStopTheNextWake) {
  // The wake finds no one asleep (the only worker runs a job) and the
  // deadline passes before the job ends; the worker then sleeps. The next
  // keep_one_warm must wake it (a wake still counted as sent would not).
  loom::detail::WorkerPool pool(1);
  std::atomic<int> ran{0};
  pool.post(loom::Priority::normal, [&](int) {
    std::this_thread::sleep_for(5ms);
    ran.fetch_add(1);
  });
  std::this_thread::sleep_for(1ms);  // the job runs
  pool.keep_one_warm(Clock::now() + 1ms);
  ASSERT_TRUE(reaches(ran, 1));
  std::this_thread::sleep_for(10ms);  // the idle spin passes: asleep
  ASSERT_TRUE(cools_down(pool));
  pool.keep_one_warm(Clock::now() + 10s);
  EXPECT_TRUE(gets_warm(pool));
}

// The deadline only moves later: a device launch's shorter one (asked while
// the scheduling thread spins toward a later one) must not end the spin
// early, or the spinning scheduler would wake the worker again and again.
TEST(WorkerPoolWarm, AnEarlierDeadlineDoesNotShortenTheSpin) {
  loom::detail::WorkerPool pool(1);
  std::this_thread::sleep_for(2ms);  // past the idle spin: asleep
  pool.keep_one_warm(Clock::now() + 10s);
  ASSERT_TRUE(gets_warm(pool));
  pool.keep_one_warm(Clock::now() + 1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(pool.has_warm_worker()) << "the later deadline still holds";
  pool.shutdown();
}

TEST(WorkerPoolWarm, ShutdownDoesNotWaitForTheWarmDeadline) {
  loom::detail::WorkerPool pool(2);
  std::this_thread::sleep_for(1ms);
  pool.keep_one_warm(Clock::now() + std::chrono::hours(1));
  std::this_thread::sleep_for(1ms);  // a worker spins for the hour
  pool.shutdown();  // returns: the spin stops at shutdown (a hang fails the test by its timeout)
  SUCCEED();
}

}  // namespace
