// Promises of the runtime a user relies on without thinking about them, on
// the CPU backend: ordering follows the data across runs and copies, waiting
// inside a task never deadlocks, an op's CPU failure is named as the op's,
// and a finished run or copy holds no tensor.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "core/completion_state.hpp"
#include "core/thread_role.hpp"
#include "support/cpu.hpp"
#include "support/empty_tensors.hpp"
#include "support/idle_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;

using loom::test::cpu;

// Runs `body` on its own thread; false if it did not return within `limit`
// (a deadlock). The thread is then left behind: the test has failed anyway.
bool finishes_within(std::chrono::milliseconds limit, std::function<void()> body) {
  auto done = std::make_shared<std::promise<void>>();
  auto f = done->get_future();
  std::thread([body = std::move(body), done] {
    try {
      body();
    } catch (...) {
      done->set_exception(std::current_exception());
      return;
    }
    done->set_value();
  }).detach();
  if (f.wait_for(limit) != std::future_status::ready) return false;
  f.get();  // rethrows what the body threw
  return true;
}

// An in-place read-modify-write that takes a while: two of them at once
// lose an update.
void slow_increment(const loom::Tensor& x) {
  float* p = x.data_as<float>();
  const float v = p[0];
  std::this_thread::sleep_for(2ms);
  p[0] = v + 1.0F;
}

TEST(RunOrdering, RunsOverTheSameDataFollowEachOther) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({4});
  x.data_as<float>()[0] = 0;
  loom::Graph g;
  g.host("increment", [x] { slow_increment(x); }, {x}, {x});
  std::vector<loom::Future> runs;
  for (int i = 0; i < 20; ++i) runs.push_back(rt.submit(g));  // no wait between them
  for (auto& r : runs) r.wait();
  EXPECT_EQ(x.data_as<float>()[0], 20.0F) << "runs over the same tensor ran concurrently";
}

TEST(RunOrdering, ReadersOfOneRunWaitForTheWriterOfAnEarlierOne) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({256});
  auto y = rt.tensor<float>({256});
  loom::Graph write;
  write.host("slow writer",
             [x] {
               std::this_thread::sleep_for(30ms);
               for (int i = 0; i < 256; ++i) x.data_as<float>()[i] = 7.0F;
             },
             {}, {x});
  loom::Graph read;
  read.add(loom::ops::scale_copy(x, y, 2.0F));
  for (int i = 0; i < 256; ++i) x.data_as<float>()[i] = 1.0F;
  auto w = rt.submit(write);
  auto r = rt.submit(read);
  r.wait();
  EXPECT_EQ(y.data_as<float>()[255], 14.0F) << "the reader ran before the earlier writer";
  w.wait();
}

TEST(RunOrdering, AWriterWaitsForTheReadersOfEarlierRuns) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({8});
  x.data_as<float>()[0] = 1.0F;
  std::atomic<float> seen{0};
  loom::Graph read;
  read.host("slow reader",
            [x, &seen] {
              std::this_thread::sleep_for(30ms);
              seen = x.data_as<float>()[0];
            },
            {x}, {});
  loom::Graph write;
  write.add(loom::ops::fill(x, 5.0F));
  auto r = rt.submit(read);
  rt.submit(write).wait();
  r.wait();
  EXPECT_EQ(seen.load(), 1.0F) << "the later write overtook an earlier read";
}

// Whether two runs, each one host task over its own reads and writes, run
// at once: each task waits (up to 2 s) for the other to have started, so
// only concurrent runs both see the other.
bool runs_meet(loom::Runtime& rt, std::vector<loom::Tensor> reads1,
               std::vector<loom::Tensor> writes1, std::vector<loom::Tensor> reads2,
               std::vector<loom::Tensor> writes2) {
  const auto rendezvous = [](std::atomic<bool>& mine, std::atomic<bool>& other,
                             std::atomic<bool>& met) {
    mine = true;
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (!other && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    met = other.load();
  };
  std::atomic<bool> first{false}, second{false}, met1{false}, met2{false};
  loom::Graph g1, g2;
  g1.host(
      "one", [&] { rendezvous(first, second, met1); }, std::move(reads1), std::move(writes1));
  g2.host(
      "two", [&] { rendezvous(second, first, met2); }, std::move(reads2), std::move(writes2));
  auto r1 = rt.submit(g1);
  auto r2 = rt.submit(g2);
  r1.wait();
  r2.wait();
  return met1 && met2;
}

TEST(RunOrdering, RunsOverDisjointDataStillOverlap) {
  loom::Runtime rt(cpu(4));
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({8});
  auto whole = rt.tensor<float>({16});
  for (auto [x, y] : {std::pair{a, b}, std::pair{whole.slice(0, 0, 8), whole.slice(0, 8, 16)}}) {
    EXPECT_TRUE(runs_meet(rt, {}, {x}, {}, {y})) << "runs over disjoint data were serialized";
  }
}

// The README: "Runs that only read the same data are not ordered": two runs
// whose tasks read one tensor (a whole one, and overlapping views) meet.
TEST(RunOrdering, RunsThatOnlyReadTheSameDataOverlap) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({16});
  for (auto [p, q] : {std::pair{x, x}, std::pair{x.slice(0, 0, 12), x.slice(0, 4, 16)}}) {
    EXPECT_TRUE(runs_meet(rt, {p}, {}, {q}, {}))
        << "runs that only read the same data were serialized";
  }
}

TEST(RunOrdering, CopiesFollowRunsAndRunsFollowCopies) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({64});
  auto y = rt.tensor<float>({64});
  for (int i = 0; i < 64; ++i) x.data_as<float>()[i] = 1.0F;
  loom::Graph g;
  g.host("slow writer",
         [x] {
           std::this_thread::sleep_for(30ms);
           for (int i = 0; i < 64; ++i) x.data_as<float>()[i] = 9.0F;
         },
         {}, {x});
  (void)rt.submit(g);
  rt.copy(x, y).wait();  // issued after the submit: sees its result
  EXPECT_EQ(y.data_as<float>()[63], 9.0F) << "a copy overtook the run that writes its source";

  // A copy issued before a run that overwrites its source reads the data
  // of the runs before it, and the run after it does not overtake it. The
  // copy itself waits behind a slow writer, so an unordered overwrite would
  // land first.
  auto src = rt.tensor<float>({1024});
  auto dst = rt.tensor<float>({1024});
  loom::Graph slow;
  slow.host("slow writer",
            [src] {
              std::this_thread::sleep_for(30ms);
              for (int i = 0; i < 1024; ++i) src.data_as<float>()[i] = 3.0F;
            },
            {}, {src});
  (void)rt.submit(slow);
  auto copied = rt.copy(src, dst);
  loom::Graph overwrite;
  overwrite.add(loom::ops::fill(src, -1.0F));
  rt.submit(overwrite).wait();
  copied.wait();
  EXPECT_EQ(dst.data_as<float>()[0], 3.0F) << "a copy and the runs around it were reordered";
  EXPECT_EQ(src.data_as<float>()[0], -1.0F);
}

// A run cancelled while it waits for an earlier one must not let later runs
// overtake that earlier one (they follow the cancelled run in its place).
TEST(RunOrdering, ACancelledWaitingRunStillOrdersWhatComesAfterIt) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({16});
  auto y = rt.tensor<float>({16});
  x.data_as<float>()[0] = 0;
  loom::Graph a;
  a.host("slow writer",
         [x] {
           std::this_thread::sleep_for(40ms);
           x.data_as<float>()[0] = 5.0F;
         },
         {}, {x});
  loom::Graph n;
  n.host("overwrite", [x] { x.data_as<float>()[0] = -1.0F; }, {}, {x});
  auto first = rt.submit(a);
  auto cancelled = rt.submit(n);
  cancelled.cancel();
  rt.copy(x, y).wait();
  EXPECT_EQ(y.data_as<float>()[0], 5.0F) << "the copy overtook the first run";
  EXPECT_THROW(cancelled.wait(), loom::Cancelled);
  first.wait();
}

TEST(RunOrdering, SynchronizeWaitsForRuns) {
  loom::Runtime rt(cpu(2));
  std::atomic<bool> done{false};
  loom::Graph g;
  g.host("slow", [&] {
    std::this_thread::sleep_for(50ms);
    done = true;
  });
  (void)rt.submit(g);
  rt.synchronize();
  EXPECT_TRUE(done.load());
}

// The README: synchronize() returns at the first moment no run or copy is in
// flight, "so runs that other threads submit while it waits are waited for
// too". A gated first run keeps it waiting; another thread submits a slow
// second run, then opens the gate: runs were in flight all along, so
// synchronize must return after the second run, not at the first's end.
TEST(RunOrdering, SynchronizeWaitsForRunsOtherThreadsSubmitWhileItWaits) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(2));
    std::promise<void> gate;
    std::shared_future<void> opened = gate.get_future().share();
    loom::Graph a;
    a.host("gated", [opened] { opened.wait(); });
    std::atomic<bool> second_finished{false};
    loom::Graph b;
    b.host("slow second", [&] {
      std::this_thread::sleep_for(100ms);
      second_finished = true;
    });
    const auto first = rt.submit(a);
    loom::Future second;
    std::atomic<bool> submitted{false};  // publishes `second` to this thread
    std::thread other([&] {
      // Long enough for this thread to be inside synchronize() (were it
      // not, the checks below would still hold, only prove less).
      std::this_thread::sleep_for(100ms);
      second = rt.submit(b);
      submitted.store(true, std::memory_order_release);
      gate.set_value();
    });
    rt.synchronize();
    // Read before joining: what synchronize promised must hold at its return.
    const bool first_ready = first.ready();
    const bool second_over = second_finished.load();
    const bool second_ready =
        submitted.load(std::memory_order_acquire) && second.valid() && second.ready();
    other.join();
    EXPECT_TRUE(first_ready) << "synchronize returned with the first run in flight";
    EXPECT_TRUE(second_over && second_ready)
        << "synchronize returned before the run another thread submitted while it waited";
    EXPECT_NO_THROW(first.wait());
    EXPECT_NO_THROW(second.wait());
  })) << "synchronize did not return";
}

// The same for copies: one issued before synchronize() and one another thread
// issues while it waits, both ordered after a gated run that writes their
// source, so both are in flight (not started) when synchronize is called.
TEST(RunOrdering, SynchronizeWaitsForCopiesInFlight) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(2));
    constexpr std::int64_t n = 1 << 18;
    auto src = rt.tensor<float>({n});
    auto dst1 = rt.tensor<float>({n});
    auto dst2 = rt.tensor<float>({n});
    std::fill_n(src.data_as<float>(), n, 0.0F);
    std::fill_n(dst1.data_as<float>(), n, -1.0F);
    std::fill_n(dst2.data_as<float>(), n, -1.0F);
    std::promise<void> gate;
    std::shared_future<void> opened = gate.get_future().share();
    loom::Graph a;
    a.host("gated writer",
           [opened, src] {
             opened.wait();
             std::fill_n(src.data_as<float>(), src.numel(), 7.0F);
           },
           {}, {src});
    const auto writer = rt.submit(a);
    const auto copy1 = rt.copy(src, dst1);  // in flight: it waits for the writer
    loom::Completion copy2;
    std::atomic<bool> issued{false};  // publishes `copy2` to this thread
    std::thread other([&] {
      std::this_thread::sleep_for(100ms);  // this thread is inside synchronize() by now
      copy2 = rt.copy(src, dst2);
      issued.store(true, std::memory_order_release);
      gate.set_value();
    });
    rt.synchronize();
    const bool writer_ready = writer.ready();
    const bool copy1_ready = copy1.ready();
    const bool copy2_ready = issued.load(std::memory_order_acquire) && copy2.ready();
    other.join();
    EXPECT_TRUE(writer_ready);
    EXPECT_TRUE(copy1_ready) << "synchronize returned with a copy in flight";
    EXPECT_TRUE(copy2_ready)
        << "synchronize returned before a copy another thread issued while it waited";
    copy1.wait();
    copy2.wait();
    EXPECT_EQ(dst1.data_as<float>()[0], 7.0F);
    EXPECT_EQ(dst1.data_as<float>()[n - 1], 7.0F);
    EXPECT_EQ(dst2.data_as<float>()[0], 7.0F);
    EXPECT_EQ(dst2.data_as<float>()[n - 1], 7.0F);
  })) << "synchronize did not return";
}

// The README: a nested wait for a run ordered after the task's own run
// fails "(Future::wait, directly or through other runs ordered between
// them) ... instead of waiting forever, within tens of milliseconds". Both
// shapes, with one worker and with two, each timed: a failure that took a
// long timeout to come would be a hang in all but name. The bound (2 s) is
// generous for a noisy machine; the promise is tens of milliseconds.
constexpr auto kNestedWaitFailsWithin = 2s;

// Runs `task` (which submits nested runs and waits for the last one) as the
// one task, named `name`, of a run that reads `t`; expects the run to fail
// with InvalidArgument naming the task, the wait to have taken `took`.
void expect_nested_wait_refused(loom::Runtime& rt, const loom::Tensor& t, const std::string& name,
                                const std::function<void()>& task) {
  loom::Graph g;
  g.host(name, task, {t}, {});
  try {
    rt.submit(g).wait();
    ADD_FAILURE() << name << ": the wait that could never end did not fail";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), name) << e.what();
    EXPECT_NE(std::string(e.what()).find("never end"), std::string::npos) << e.what();
  }
}

// Waits for `f` inside a task, storing in `took` how long the wait took to
// throw; the exception goes on, to fail the task.
void wait_timed(const loom::Future& f, std::chrono::steady_clock::duration& took) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f.wait();
  } catch (...) {
    took = std::chrono::steady_clock::now() - start;
    throw;
  }
}

TEST(NestedWaits, ADirectWaitForARunOrderedAfterTheTasksOwnRunFailsWithinTensOfMilliseconds) {
  for (const int workers : {1, 2}) {
    SCOPED_TRACE("workers: " + std::to_string(workers));
    ASSERT_TRUE(finishes_within(20s, [workers] {
      loom::Runtime rt(cpu(workers));
      auto t = rt.tensor<float>({16});
      std::fill_n(t.data_as<float>(), 16, 1.0F);
      loom::Future nested;
      std::chrono::steady_clock::duration took = std::chrono::hours(1);
      expect_nested_wait_refused(rt, t, "waits directly", [&] {
        loom::Graph h;
        h.add(loom::ops::fill(t, 5.0F));  // writes what the task's run reads: ordered after it
        nested = rt.submit(h);
        wait_timed(nested, took);
      });
      EXPECT_LT(took, kNestedWaitFailsWithin)
          << "the refusal took " << std::chrono::duration<double>(took).count() << " s";
      ASSERT_TRUE(nested.valid());
      EXPECT_NO_THROW(nested.wait()) << "the nested run runs once the task's run is over";
      EXPECT_EQ(t.data_as<float>()[15], 5.0F);
    })) << "the nested wait hung";
  }
}

// Run B writes what the task's run reads (ordered after it); run C reads only
// what B writes, so it is ordered after the task's run through B alone. The
// task waits for C.
TEST(NestedWaits, AWaitThroughARunOrderedInBetweenFailsNamingTheTaskWithinTensOfMilliseconds) {
  for (const int workers : {1, 2}) {
    SCOPED_TRACE("workers: " + std::to_string(workers));
    ASSERT_TRUE(finishes_within(20s, [workers] {
      loom::Runtime rt(cpu(workers));
      auto t = rt.tensor<float>({16});
      auto u = rt.tensor<float>({16});
      auto v = rt.tensor<float>({16});
      std::fill_n(t.data_as<float>(), 16, 1.0F);
      std::fill_n(u.data_as<float>(), 16, 0.0F);
      std::fill_n(v.data_as<float>(), 16, 0.0F);
      loom::Future b_run;
      loom::Future c_run;
      std::chrono::steady_clock::duration took = std::chrono::hours(1);
      expect_nested_wait_refused(rt, t, "waits through another run", [&] {
        loom::Graph b;
        b.add(loom::ops::fill(t, 5.0F));  // ordered after the task's run (it reads t)
        b.add(loom::ops::fill(u, 3.0F));
        b_run = rt.submit(b);
        loom::Graph c;
        c.add(loom::ops::scale_copy(u, v, 2.0F));  // touches nothing of the task's run
        c_run = rt.submit(c);
        wait_timed(c_run, took);
      });
      EXPECT_LT(took, kNestedWaitFailsWithin)
          << "the refusal took " << std::chrono::duration<double>(took).count() << " s";
      ASSERT_TRUE(b_run.valid() && c_run.valid());
      EXPECT_NO_THROW(b_run.wait());
      EXPECT_NO_THROW(c_run.wait()) << "the nested runs run once the task's run is over";
      EXPECT_EQ(t.data_as<float>()[15], 5.0F);
      EXPECT_EQ(v.data_as<float>()[15], 6.0F) << "C ran before B";
    })) << "the nested wait hung";
  }
}

TEST(WaitingInsideTasks, AHostTaskMayWaitForAnotherRunWithOneWorker) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(1));
    auto x = rt.tensor<float>({4});
    loom::Graph inner;
    inner.host("inner", [] {});
    inner.add(loom::ops::fill(x, 2.0F));
    loom::Graph outer;
    outer.host("outer", [&] { rt.submit(inner).wait(); });
    rt.submit(outer).wait();
    EXPECT_EQ(x.data_as<float>()[0], 2.0F);
  })) << "a host task waiting for another run deadlocked the worker pool";
}

TEST(WaitingInsideTasks, TwoWaitingTasksWithTheDefaultWorkers) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(2));
    std::atomic<int> ran{0};
    loom::Graph inner;
    inner.host("inner", [&] { ++ran; });
    loom::Graph outer;
    for (int i = 0; i < 2; ++i) outer.host("outer", [&] { rt.submit(inner).wait(); });
    rt.submit(outer).wait();
    EXPECT_EQ(ran.load(), 2);
  }));
}

TEST(WaitingInsideTasks, AContinuationMayWait) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(1));
    std::promise<int> result;
    loom::Graph first;
    first.host("first", [] {});
    loom::Graph second;
    std::atomic<int> ran{0};
    second.host("second", [&] { ++ran; });
    rt.submit(first).then([&](const loom::Future&) {
      rt.submit(second).wait();
      result.set_value(ran.load());
    });
    auto f = result.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(f.get(), 1);
  }));
}

// Waits nested across runs on one worker: T1 (run A) waits for run B while
// T2 (run C) waits for run A. A worker that ran T2 on top of T1's stack
// would deadlock; the pool must put another thread in the waiter's place.
TEST(WaitingInsideTasks, NestedWaitsAcrossRunsOnOneWorker) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(1));
    std::atomic<int> b_ran{0};
    loom::Graph b;
    b.host("b", [&] { ++b_ran; });
    loom::Future fa;
    std::atomic<bool> fa_set{false};
    loom::Graph a;
    a.host("t1", [&] {
      std::this_thread::sleep_for(20ms);  // t2 is queued by now
      rt.submit(b).wait();
    });
    loom::Graph c;
    c.host("t2", [&] {
      while (!fa_set) std::this_thread::yield();
      fa.wait();
    });
    fa = rt.submit(a);
    fa_set = true;
    auto fc = rt.submit(c);
    fc.wait();
    fa.wait();
    EXPECT_EQ(b_ran.load(), 1);
  })) << "nested waits deadlocked the pool";
}

TEST(WaitingInsideTasks, AHostTaskMayWaitForACopyWithOneWorker) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(1));
    auto src = rt.tensor<float>({1024});
    auto dst = rt.tensor<float>({1024});
    src.data_as<float>()[1023] = 5.0F;
    loom::Graph g;
    g.host("waits for a copy", [&] { rt.copy(src, dst).wait(); });
    rt.submit(g).wait();
    EXPECT_EQ(dst.data_as<float>()[1023], 5.0F);
  })) << "a host task waiting for rt.copy deadlocked the worker pool";
}

// A role that counts what it is told.
struct CountingRole final : loom::detail::ThreadRole {
  std::atomic<int> began{0}, ended{0};
  void begin_blocking() override { ++began; }
  void end_blocking() noexcept override { ++ended; }
  const char* cannot_wait() const noexcept override { return nullptr; }
};

// A completion finished by a blocking call (an event's synchronize, for
// copies between devices) tells the worker's pool around that call too, so
// that the pool puts another thread in the waiter's place.
TEST(WaitingInsideTasks, ACompletionsBlockingWaitTellsThePool) {
  auto state = std::make_shared<loom::detail::CompletionState>();
  std::atomic<bool> blocked{false};
  state->poll = [] { return false; };
  state->block = [&] {
    blocked = true;
    std::this_thread::sleep_for(5ms);
  };
  const loom::Completion c = loom::detail::CompletionAccess::make(state);
  CountingRole role;
  {
    const loom::detail::ThreadRoleScope scope(&role);
    c.wait();
  }
  EXPECT_TRUE(blocked.load());
  EXPECT_EQ(role.began.load(), 1);
  EXPECT_EQ(role.ended.load(), 1);
}

TEST(WaitingInsideTasks, SynchronizeInsideATaskIsRefusedNotADeadlock) {
  ASSERT_TRUE(finishes_within(20s, [] {
    loom::Runtime rt(cpu(1));
    loom::Graph g;
    g.host("impatient", [&] { rt.synchronize(); });
    try {
      rt.submit(g).wait();
      ADD_FAILURE() << "synchronize() inside a task was accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "impatient");
      EXPECT_NE(std::string(e.what()).find("synchronize"), std::string::npos) << e.what();
    }
  }));
}

TEST(WaitingInsideTasks, DestroyingARuntimeWithRunsInFlightLetsThemFinish) {
  std::atomic<int> ran{0};
  ASSERT_TRUE(finishes_within(20s, [&] {
    loom::Runtime rt(cpu(2));
    loom::Graph g;
    g.host("slow", [&] {
      std::this_thread::sleep_for(20ms);
      ++ran;
    });
    for (int i = 0; i < 4; ++i) (void)rt.submit(g);
  }));
  EXPECT_EQ(ran.load(), 4);
}

class ThrowingOp final : public loom::Op {
 public:
  explicit ThrowingOp(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "picky_op"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override {}
  void run_cpu() const override { throw std::runtime_error("the CPU path is unhappy"); }
  void run_cuda(const loom::ExecutionContext&) const override {}

 private:
  loom::Tensor t_;
};

TEST(OpFailures, AnExceptionFromRunCpuIsNamedAsTheOpsFailure) {
  loom::Runtime rt(cpu());
  loom::Graph g;
  g.add(std::make_shared<ThrowingOp>(rt.tensor<float>({4})), {.name = "stage 3"});
  try {
    rt.submit(g).wait();
    FAIL();
  } catch (const loom::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.task(), "stage 3");
    EXPECT_NE(what.find("op 'picky_op'"), std::string::npos) << what;
    EXPECT_NE(what.find("the CPU path is unhappy"), std::string::npos) << what;
    EXPECT_EQ(what.find("host function"), std::string::npos) << what;
  }
}

TEST(MemoryGivenBack, AFinishedRunHoldsNoTensor) {
  loom::Runtime rt(cpu());
  auto x = rt.tensor<float>({16});
  loom::Future run;
  {
    loom::Graph g;
    g.add(loom::ops::fill(x, 1.0F));
    run = rt.submit(g);
  }
  run.wait();
  EXPECT_NO_THROW((void)x.take()) << "a finished run's Future still holds the tensor";
  EXPECT_EQ(run.report().size(), 1U);
  EXPECT_EQ(run.report()[0].name, "fill");
}

TEST(MemoryGivenBack, AFinishedCopyHoldsNoTensor) {
  loom::Runtime rt(cpu());
  auto a = rt.tensor<float>({1024});
  auto b = rt.tensor<float>({1024});
  rt.copy(a, b).wait();
  EXPECT_NO_THROW((void)b.take());
  EXPECT_NO_THROW((void)a.take());
}

TEST(MemoryGivenBack, ACompletionMayOutliveItsRuntime) {
  loom::Completion c;
  std::vector<float> host(1 << 16, 1.0F);
  {
    loom::Runtime rt(cpu());
    auto src = rt.provide(host.data(), loom::DType::f32, {1 << 16}, loom::Memory::pageable);
    c = rt.copy(src, rt.tensor<float>({1 << 16}));
  }
  EXPECT_TRUE(c.ready());
  EXPECT_NO_THROW(c.wait());
}

}  // namespace

namespace {

// A copy task is checked at submit like an op's inputs, not at its launch.
TEST(CopyTasks, ALayoutNoPathTakesIsRefusedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu());
  auto src = rt.tensor<float>({4, 4});
  auto dst = rt.tensor<float>({4, 4}).transpose(0, 1);
  loom::Graph g;
  g.copy(src, dst, {.name = "to a transpose"});
  try {
    (void)rt.submit(g);
    FAIL() << "a copy into a strided destination was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "to a transpose");
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
}

// Every op on tensors with no elements, on the CPU backend (the GPU
// launchers return before a launch with no element, as README says per
// op): nothing fails, and what an op defines for them holds: a histogram's
// counts are zeroed, a reduction of nothing is its identity, a matmul with
// k = 0 is beta C.
TEST(EmptyTensors, EveryOpTakesThemAndDoesWhatItDefines) {
  loom::Runtime rt(cpu(2));
  loom::test::expect_empty_tensors_work(rt);
}

// The README: loom's threads spin only briefly after work (about 2 ms),
// then sleep, "and an idle runtime takes next to no CPU time". One thread
// left spinning would take a whole core: the bound is a quarter of one.
TEST(RuntimeIdle, AnIdleRuntimeTakesNextToNoCpuTime) {
  loom::Runtime rt(cpu(4));
  loom::Graph g;
  for (int i = 0; i < 8; ++i) g.host("work " + std::to_string(i), [] {});
  for (int i = 0; i < 20; ++i) rt.submit(g).wait();
  const double share = loom::test::idle_cpu_share();
  EXPECT_LT(share, 0.25) << "an idle runtime took " << share << " of a core";
}

}  // namespace
