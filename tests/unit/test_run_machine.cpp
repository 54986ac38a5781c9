// The run state machine alone, driven through fake launchers: which tasks
// become ready and when, what a failure and a cancel do to the rest of the
// run, the ordering of runs over the same data, and the run's end, published
// once. No backend: the fakes record what the machine asks of them, and the
// test reports outcomes as a launcher would.
#include "sched/prepare.hpp"
#include "sched/run_machine.hpp"

#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "support/counting_new.hpp"
#include "support/cpu.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using loom::TaskStatus;
using loom::detail::Launcher;
using loom::detail::Placement;
using TaskRun = loom::detail::Run;  // (gtest's Test::Run hides the plain name)
using loom::detail::RunList;
using loom::detail::RunMachine;

// Records what the machine hands it; the test plays the launcher's part.
class FakeLauncher final : public Launcher {
 public:
  bool orders = false;         // orders runs itself (as stream order does)
  bool fail_on_start = false;  // its setup of a run throws
  std::vector<std::pair<const TaskRun*, std::uint32_t>> readied;
  std::vector<const TaskRun*> started;
  int busy = 0;  // work handed out and not yet seen to end (keeps runs alive)

  bool orders_runs() const noexcept override { return orders; }
  void start(TaskRun& run) override {
    started.push_back(&run);
    if (fail_on_start) throw std::runtime_error("no event to wait with");
  }
  void ready(RunMachine&, TaskRun& run, std::uint32_t t) override { readied.emplace_back(&run, t); }
  bool advance(RunMachine&, TaskRun&) override { return false; }
  bool idle(const TaskRun&) const override { return busy == 0; }

  std::vector<std::uint32_t> ready_of(const TaskRun& run) const {
    std::vector<std::uint32_t> out;
    for (const auto& [r, t] : readied) {
      if (r == &run) out.push_back(t);
    }
    return out;
  }
  bool has_started(const TaskRun& run) const {
    return std::find(started.begin(), started.end(), &run) != started.end();
  }
};

using Tasks = std::vector<std::uint32_t>;

class RunMachineTest : public ::testing::Test {
 protected:
  loom::Runtime rt{loom::test::cpu(1)};  // for tensors only
  loom::detail::Poison poison;
  FakeLauncher host;
  FakeLauncher device;
  std::shared_ptr<loom::detail::WorkerPool> workers = std::make_shared<loom::detail::WorkerPool>(1);
  RunMachine machine{host, &device, poison, workers, ""};

  ~RunMachineTest() override { workers->shutdown(); }

  struct Submitted {
    TaskRun* run;
    loom::Future future;
  };

  // Admits a run of `graph` with the given placements (host for all when empty).
  Submitted admit(const loom::Graph& graph, std::vector<Placement> placement = {},
                  std::shared_ptr<loom::detail::CompletionState> completion = nullptr) {
    if (placement.empty()) placement.assign(graph.size(), Placement::host);
    auto run =
        machine.make_run(loom::detail::make_prepared(graph, placement, 2), std::move(completion));
    TaskRun* raw = run.get();
    loom::Future future = loom::detail::FutureAccess::make(run->state);
    machine.admit(std::move(run));
    return {raw, future};
  }

  static TaskStatus status(const TaskRun& run, std::uint32_t t) {
    return run.tasks_state[t].status;
  }

  // A device run writing x, then a run reading x placed at `reader`, admitted
  // on a device that orders runs; the writer's task is enqueued, and each
  // run started once it may.
  std::pair<Submitted, Submitted> device_writer_then_reader(Placement reader) {
    device.orders = true;
    auto x = rt.tensor<float>({16});
    loom::Graph first;
    first.host("w", [] {}, {}, {x});
    loom::Graph second;
    second.host("r", [] {}, {x});
    Submitted writer = admit(first, {Placement::device});
    Submitted read = admit(second, {reader});
    machine.start_ready_runs();
    machine.enqueued(*writer.run, 0);
    machine.start_ready_runs();
    return {writer, read};
  }

  // Ends the finished runs; their outcome is published on the worker.
  void finish_and_wait(const loom::Future& future) {
    ASSERT_TRUE(machine.finish_runs());
    future.wait_for(std::chrono::seconds(10));
    ASSERT_TRUE(future.ready());
  }
};

TEST_F(RunMachineTest, ReadyOrderFollowsThePlansEdges) {
  loom::Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  auto c = g.host("c", [] {});
  auto d = g.host("d", [] {});
  a.precede(b, c);
  d.succeed(b, c);
  auto [run, future] = admit(g);
  EXPECT_TRUE(host.ready_of(*run).empty()) << "nothing is ready before the run starts";
  machine.start_ready_runs();
  EXPECT_EQ(host.ready_of(*run), (Tasks{0})) << "only the root";
  machine.running(*run, 0);
  machine.complete(*run, 0);
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 1, 2}));
  machine.complete(*run, 2);
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 1, 2})) << "d waits for b too";
  EXPECT_FALSE(machine.finish_runs());
  machine.complete(*run, 1);
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 1, 2, 3}));
  EXPECT_FALSE(machine.finish_runs()) << "d has not ended";
  machine.complete(*run, 3);
  EXPECT_TRUE(device.readied.empty());
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  EXPECT_EQ(future.error(), nullptr);
  for (const auto& r : future.report()) EXPECT_EQ(r.status, TaskStatus::completed) << r.name;
}

TEST_F(RunMachineTest, AFailureNamesItsTaskCancelsDependantsAndSparesIndependentTasks) {
  loom::Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  auto c = g.host("c", [] {});
  g.host("x", [] {});
  a.precede(b);
  b.precede(c);
  auto [run, future] = admit(g);
  machine.start_ready_runs();
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 3}));
  machine.fail(*run, 0, std::make_exception_ptr(std::runtime_error("boom")));
  EXPECT_EQ(status(*run, 0), TaskStatus::failed);
  EXPECT_EQ(status(*run, 1), TaskStatus::cancelled);
  EXPECT_EQ(status(*run, 2), TaskStatus::cancelled);
  EXPECT_EQ(status(*run, 3), TaskStatus::pending) << "independent work is not lost";
  EXPECT_FALSE(machine.finish_runs()) << "x has not run";
  machine.complete(*run, 3);
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 3})) << "no dependant of a became ready";
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  try {
    future.wait();
    FAIL() << "the run's error was not rethrown";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "a");
    EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
  }
  const auto report = future.report();
  EXPECT_EQ(report[0].status, TaskStatus::failed);
  EXPECT_NE(report[0].error.find("boom"), std::string::npos);
  EXPECT_EQ(report[1].status, TaskStatus::cancelled);
  EXPECT_EQ(report[1].error, "cancelled: task 'a' failed");
  EXPECT_EQ(report[2].status, TaskStatus::cancelled);
  EXPECT_EQ(report[3].status, TaskStatus::completed);
}

TEST_F(RunMachineTest, CancelTakesPendingTasksAndWaitsForRunningOnes) {
  loom::Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  g.host("c", [] {});
  a.precede(b);
  auto [run, future] = admit(g);
  machine.start_ready_runs();
  machine.running(*run, 0);  // a was handed to a worker; c waits for its round
  future.cancel();
  EXPECT_TRUE(machine.advance(*run));
  EXPECT_EQ(status(*run, 0), TaskStatus::running);
  EXPECT_EQ(status(*run, 1), TaskStatus::cancelled);
  EXPECT_EQ(status(*run, 2), TaskStatus::cancelled) << "ready, not yet running: taken";
  EXPECT_FALSE(machine.finish_runs()) << "a still runs: the run outlives it";
  machine.complete(*run, 0);
  EXPECT_EQ(host.ready_of(*run), (Tasks{0, 2})) << "b never became ready";
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  EXPECT_THROW(future.wait(), loom::Cancelled);
  EXPECT_EQ(future.report()[0].status, TaskStatus::completed);
  EXPECT_EQ(future.report()[1].error, "cancelled: the run was cancelled by the user");
}

TEST_F(RunMachineTest, ACancelThatStopsNothingLeavesTheResult) {
  loom::Graph g;
  g.host("a", [] {});
  g.host("b", [] {});
  auto [run, future] = admit(g);
  machine.start_ready_runs();
  machine.running(*run, 0);
  machine.running(*run, 1);  // both handed to workers: nothing left to stop
  future.cancel();
  EXPECT_TRUE(machine.advance(*run));
  machine.complete(*run, 0);
  machine.complete(*run, 1);
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  EXPECT_NO_THROW(future.wait()) << "every task completed: the run did";
  EXPECT_EQ(future.report()[1].status, TaskStatus::completed);
}

TEST_F(RunMachineTest, ATaskSkippedOnAWorkerCancelsItsDependants) {
  loom::Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  a.precede(b);
  auto [run, future] = admit(g);
  machine.start_ready_runs();
  machine.running(*run, 0);
  machine.skipped(*run, 0);
  EXPECT_EQ(status(*run, 1), TaskStatus::cancelled);
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  EXPECT_EQ(future.report()[1].error, "cancelled: task 'a' was cancelled");
}

TEST_F(RunMachineTest, DeviceSuccessorsAreReadyAtEnqueueHostSuccessorsAtCompletion) {
  loom::Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  auto h = g.host("h", [] {});
  a.precede(b, h);
  auto [run, future] = admit(g, {Placement::device, Placement::device, Placement::host});
  machine.start_ready_runs();
  EXPECT_EQ(device.ready_of(*run), (Tasks{0}));
  machine.enqueued(*run, 0);
  EXPECT_EQ(status(*run, 0), TaskStatus::running);
  EXPECT_EQ(device.ready_of(*run), (Tasks{0, 1})) << "the device orders a -> b itself";
  EXPECT_TRUE(host.ready_of(*run).empty()) << "h waits until a has ended";
  machine.complete(*run, 0);
  EXPECT_EQ(host.ready_of(*run), (Tasks{2}));
  EXPECT_EQ(device.ready_of(*run), (Tasks{0, 1})) << "b is not made ready twice";
  machine.enqueued(*run, 1);
  machine.complete(*run, 1);
  machine.running(*run, 2);
  machine.complete(*run, 2);
  device.busy = 1;  // the launcher still watches work of the run
  EXPECT_FALSE(machine.finish_runs());
  device.busy = 0;
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  EXPECT_EQ(future.error(), nullptr);
}

TEST_F(RunMachineTest, RunsOverTheSameDataFollowRunsOverDisjointDataDoNot) {
  auto x = rt.tensor<float>({16});
  auto y = rt.tensor<float>({16});
  loom::Graph first;
  first.host("write x", [] {}, {}, {x});
  loom::Graph second;
  second.host("read x", [] {}, {x});
  loom::Graph other;
  other.host("write y", [] {}, {}, {y});
  auto [r1, f1] = admit(first);
  auto [r2, f2] = admit(second);
  auto [r3, f3] = admit(other);
  machine.start_ready_runs();
  EXPECT_TRUE(host.has_started(*r1));
  EXPECT_FALSE(host.has_started(*r2)) << "it reads what the first run writes";
  EXPECT_TRUE(host.has_started(*r3)) << "disjoint data: the runs overlap";
  machine.complete(*r1, 0);
  EXPECT_FALSE(host.has_started(*r2));
  ASSERT_TRUE(machine.finish_runs());
  machine.start_ready_runs();
  EXPECT_TRUE(host.has_started(*r2)) << "the first run is over";
  EXPECT_EQ(host.ready_of(*r2), (Tasks{0}));
  machine.complete(*r2, 0);
  machine.complete(*r3, 0);
  ASSERT_TRUE(machine.finish_runs());
  f1.wait();
  f2.wait();
  f3.wait();
}

TEST_F(RunMachineTest, DeviceRunsFollowOnceTheEarlierRunIsWhollyEnqueued) {
  device.orders = true;
  auto x = rt.tensor<float>({16});
  loom::Graph first;
  auto w1 = first.host("w1", [] {}, {}, {x});
  auto w2 = first.host("w2", [] {}, {}, {x});
  (void)w1, (void)w2;
  loom::Graph second;
  second.host("r", [] {}, {x});
  auto [r1, f1] = admit(first, {Placement::device, Placement::device});
  auto [r2, f2] = admit(second, {Placement::device});
  machine.start_ready_runs();
  EXPECT_FALSE(device.has_started(*r2));
  machine.enqueued(*r1, 0);
  machine.start_ready_runs();
  EXPECT_FALSE(device.has_started(*r2)) << "w2 is not enqueued yet";
  machine.enqueued(*r1, 1);
  machine.start_ready_runs();
  EXPECT_TRUE(device.has_started(*r2)) << "the device orders it after the first run's work";
  EXPECT_FALSE(f1.ready());
  machine.complete(*r1, 0);
  machine.complete(*r1, 1);
  machine.enqueued(*r2, 0);
  machine.complete(*r2, 0);
  ASSERT_TRUE(machine.finish_runs());
  f1.wait();
  f2.wait();
}

TEST_F(RunMachineTest, ARunWithHostTasksFollowsOnlyOnceTheEarlierRunIsOver) {
  auto [first, second] = device_writer_then_reader(Placement::host);
  auto [r1, f1] = first;
  auto [r2, f2] = second;
  EXPECT_FALSE(host.has_started(*r2)) << "host work cannot be ordered on a stream";
  machine.complete(*r1, 0);
  ASSERT_TRUE(machine.finish_runs());
  machine.start_ready_runs();
  EXPECT_TRUE(host.has_started(*r2));
  machine.complete(*r2, 0);
  ASSERT_TRUE(machine.finish_runs());
  f2.wait();
}

TEST_F(RunMachineTest, ADeviceFollowerSeenDoneFirstFinishesAfterItsLeader) {
  auto [first, second] = device_writer_then_reader(Placement::device);
  auto [r1, f1] = first;
  auto [r2, f2] = second;
  ASSERT_TRUE(device.has_started(*r2));
  // The follower's completion is seen before its leader's (events polled in
  // that order): it still finishes, and is published, after its leader.
  machine.enqueued(*r2, 0);
  machine.complete(*r2, 0);
  EXPECT_FALSE(machine.finish_runs()) << "the follower finished before the run it follows";
  machine.complete(*r1, 0);
  ASSERT_TRUE(machine.finish_runs());
  f2.wait();
  EXPECT_TRUE(f1.ready()) << "a follower's Future turned ready before its leader's";
  f1.wait();
}

TEST_F(RunMachineTest, ALauncherThatCannotStartARunFailsItsTasksByName) {
  device.fail_on_start = true;
  loom::Graph g;
  auto a = g.host("first", [] {});
  auto b = g.host("second", [] {});
  a.precede(b);
  auto [run, future] = admit(g, {Placement::device, Placement::device});
  machine.start_ready_runs();
  EXPECT_TRUE(device.readied.empty());
  EXPECT_EQ(status(*run, 0), TaskStatus::failed);
  EXPECT_NE(status(*run, 1), TaskStatus::pending);
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  try {
    future.wait();
    FAIL() << "the run's error was not rethrown";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "first");
    EXPECT_NE(std::string(e.what()).find("no event to wait with"), std::string::npos);
  }
}

// One error that fails several tasks (a launcher's setup, an event poll):
// each task's report names that task, and the error itself is not changed.
TEST_F(RunMachineTest, OneErrorFailingSeveralTasksNamesEachItsOwn) {
  loom::Graph g;
  g.host("first", [] {});
  g.host("second", [] {});
  auto [run, future] = admit(g);
  machine.start_ready_runs();
  const loom::CudaError original(2, "no event", {"cudaEventRecord", "x.cpp", 1, ""});
  const auto error = std::make_exception_ptr(original);
  machine.fail(*run, 0, error);
  machine.fail(*run, 1, error);
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
  const auto report = future.report();
  EXPECT_EQ(report[0].error.rfind("loom: task 'first': ", 0), 0U) << report[0].error;
  EXPECT_EQ(report[1].error.rfind("loom: task 'second': ", 0), 0U) << report[1].error;
  try {
    std::rethrow_exception(error);
  } catch (const loom::CudaError& e) {
    EXPECT_TRUE(e.task().empty()) << "the error passed in was renamed: " << e.what();
  }
  try {
    future.wait();
    FAIL();
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "first");
    EXPECT_EQ(e.code(), 2);
  }
}

TEST_F(RunMachineTest, TheEndIsPublishedOnceWithContinuationsAndTheCompletion) {
  loom::Graph g;
  g.host("only", [] {});
  auto completion = std::make_shared<loom::detail::CompletionState>();
  auto [run, future] = admit(g, {}, completion);
  std::atomic<int> continued{0};
  std::promise<void> ran;
  future.then([&](const loom::Future&) {
    if (++continued == 1) ran.set_value();
  });
  machine.start_ready_runs();
  machine.complete(*run, 0);
  machine.complete(*run, 0);  // a repeated report ends nothing twice
  ASSERT_TRUE(machine.finish_runs());
  EXPECT_FALSE(machine.finish_runs()) << "the run is gone";
  machine.wait_idle();
  EXPECT_TRUE(future.ready());
  EXPECT_TRUE(completion->done);
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  workers->shutdown();
  EXPECT_EQ(continued.load(), 1);
}

TEST_F(RunMachineTest, AStickyCudaFaultPoisons) {
  loom::Graph g;
  g.host("kernel", [] {});
  g.host("other", [] {});
  auto [run, future] = admit(g, {Placement::device, Placement::device});
  machine.start_ready_runs();
  machine.fail(*run, 0, std::make_exception_ptr(loom::CudaError(2, "out of memory")));
  EXPECT_FALSE(poison.poisoned()) << "an ordinary CUDA error leaves the device usable";
  machine.fail(*run, 1, std::make_exception_ptr(loom::CudaError(700, "illegal address")));
  ASSERT_TRUE(poison.poisoned());
  try {
    poison.throw_if_poisoned();
    FAIL();
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "other") << "the poisoning error names its task";
  }
  ASSERT_NO_FATAL_FAILURE(finish_and_wait(future));
}

// A thread spinning in wait() takes the run's end itself: with the only
// worker held, the run still turns ready. (The waiter spins 2 ms on a run
// with device work; a slow machine may miss that window, so a few tries.)
TEST_F(RunMachineTest, AWaiterSpinningOnARunEndsItWhenEveryWorkerIsBusy) {
  bool handed = false;
  for (int attempt = 0; attempt < 20 && !handed; ++attempt) {
    loom::Graph g;
    g.host("only", [] {});
    auto run = machine.make_run(loom::detail::make_prepared(g, {Placement::host}, 2), nullptr);
    TaskRun* raw = run.get();
    run->state->waits_on_device = true;  // the long spin
    loom::detail::RunState* state = run->state.get();
    const loom::Future future = loom::detail::FutureAccess::make(run->state);
    machine.admit(std::move(run));
    machine.start_ready_runs();
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    workers->post(loom::Priority::high, [released](int) { released.wait(); });
    std::thread waiter([&] { future.wait(); });
    const auto offer_by = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (state->end_handoff.load() == loom::detail::RunState::kNoEndWaiter &&
           std::chrono::steady_clock::now() < offer_by) {
      std::this_thread::yield();
    }
    machine.complete(*raw, 0);
    ASSERT_TRUE(machine.finish_runs());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!future.ready() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    handed = future.ready();
    release.set_value();  // a missed window: the worker ends it now
    waiter.join();
    EXPECT_TRUE(future.ready());
  }
  EXPECT_TRUE(handed) << "the run's end never reached the thread spinning in wait()";
  machine.wait_idle();
}

// A host-only machine on `n` workers, for runs whose ends race, and the
// one tensor every run writes (each follows the one before).
struct HostMachineOnWorkers {
  explicit HostMachineOnWorkers(int n)
      : workers(std::make_shared<loom::detail::WorkerPool>(n)),
        machine(host, nullptr, poison, workers, "") {}
  ~HostMachineOnWorkers() { workers->shutdown(); }
  HostMachineOnWorkers(const HostMachineOnWorkers&) = delete;
  HostMachineOnWorkers& operator=(const HostMachineOnWorkers&) = delete;

  loom::Runtime rt{loom::test::cpu(1)};  // for tensors only
  loom::detail::Poison poison;
  FakeLauncher host;
  std::shared_ptr<loom::detail::WorkerPool> workers;
  RunMachine machine;
  loom::Tensor x = rt.tensor<float>({4});
};

// Runs end while their waiters spin, stop spinning or have not come yet,
// on several workers, with runs parked behind the runs they follow: every
// Future turns ready, in order, and none twice.
TEST(RunMachinePublication, EndsHandedToWaitersAndToWorkersRaceSafely) {
  HostMachineOnWorkers m(3);
  auto& [rt, poison, host, workers, machine, x] = m;
  std::atomic<int> continued{0};
  constexpr int kRuns = 300;
  std::vector<loom::Future> futures;
  std::deque<std::thread> waiters;
  for (int i = 0; i < kRuns; ++i) {
    loom::Graph g;
    g.host("t", [] {}, {}, {x});  // each follows the one before
    auto run = machine.make_run(loom::detail::make_prepared(g, {Placement::host}, 2), nullptr);
    run->state->waits_on_device = i % 2 == 0;
    TaskRun* raw = run.get();
    loom::Future future = loom::detail::FutureAccess::make(run->state);
    future.then([&](const loom::Future&) { ++continued; });
    machine.admit(std::move(run));
    machine.start_ready_runs();
    ASSERT_TRUE(host.has_started(*raw));
    futures.push_back(future);
    waiters.emplace_back([future] { future.wait(); });
    // 0 to ~60 µs: before the waiter spins, while it does, or after.
    const auto lag = std::chrono::microseconds((i * 7) % 61);
    const auto until = std::chrono::steady_clock::now() + lag;
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
    machine.complete(*raw, 0);
    ASSERT_TRUE(machine.finish_runs());
    // Up to three ends in flight: a run may end before the one it follows
    // is published (its end is parked behind it).
    if (waiters.size() > 3) {
      waiters.front().join();
      waiters.pop_front();
      for (std::size_t j = 0; j + 3 < futures.size(); ++j) {
        ASSERT_TRUE(futures[j].ready()) << "run " << j << " of " << i;
      }
    }
  }
  for (auto& w : waiters) w.join();
  for (std::size_t j = 0; j < futures.size(); ++j) ASSERT_TRUE(futures[j].ready()) << "run " << j;
  machine.wait_idle();
  workers->shutdown();
  EXPECT_EQ(continued.load(), kRuns);
}

// Launches nothing and records nothing: the test plays the launcher's part,
// so that what it counts is the machine's own.
class QuietLauncher final : public Launcher {
 public:
  void ready(RunMachine&, TaskRun&, std::uint32_t) override {}
  bool advance(RunMachine&, TaskRun&) override { return false; }
  bool idle(const TaskRun&) const override { return true; }
};

// Runs over the same data finish one after another, and their ends race on
// several workers: each still turns ready only after the runs before it.
TEST(RunMachinePublication, ARunTurnsReadyOnlyAfterTheRunsItFollows) {
  HostMachineOnWorkers m(4);
  auto& [rt, poison, host, workers, machine, x] = m;
  for (int round = 0; round < 50; ++round) {
    std::vector<loom::Future> futures;
    std::vector<TaskRun*> runs;
    for (int i = 0; i < 16; ++i) {
      loom::Graph g;
      g.host("t", [] {}, {}, {x});  // each writes x: each follows the one before
      auto run = machine.make_run(loom::detail::make_prepared(g, {Placement::host}, 2), nullptr);
      runs.push_back(run.get());
      futures.push_back(loom::detail::FutureAccess::make(run->state));
      machine.admit(std::move(run));
    }
    for (TaskRun* r : runs) {
      machine.start_ready_runs();
      ASSERT_TRUE(host.has_started(*r));
      machine.complete(*r, 0);
      ASSERT_TRUE(machine.finish_runs());
    }
    for (std::size_t i = futures.size(); i-- > 0;) {
      futures[i].wait();
      for (std::size_t j = 0; j < i; ++j) {
        ASSERT_TRUE(futures[j].ready())
            << "round " << round << ": run " << i << " turned ready before run " << j;
      }
    }
  }
  machine.wait_idle();
  workers->shutdown();
}

TEST(RunMachineSteadyState, ARunAllocatesNothingOnceWarm) {
  // A run made, admitted (ordered after the previous one over the same
  // data), started, its tasks completed, ended and published on a worker,
  // its Future waited for and dropped: once the pools are warm (spare runs,
  // recycled states and their control blocks, the workers' queue, the
  // ordering's nodes), nothing of it allocates, on any thread.
  if (!loom::test::kCountsAllocations) {
    GTEST_SKIP() << "AddressSanitizer replaces operator new: allocations are not counted";
  }
  loom::Runtime rt{loom::test::cpu(1)};
  auto x = rt.tensor<float>({16});
  auto y = rt.tensor<float>({16});
  loom::Graph g;
  g.host("a", [] {}, {x}, {y});
  g.host("b", [] {}, {y}, {x});
  g.host("c", [] {}, {x}, {});
  const auto prepared =
      loom::detail::make_prepared(g, std::vector<Placement>(g.size(), Placement::host), 2);
  loom::detail::Poison poison;
  QuietLauncher host;
  auto workers = std::make_shared<loom::detail::WorkerPool>(1);
  {
    RunMachine machine{host, nullptr, poison, workers, ""};
    const auto one_run = [&](std::vector<loom::Future>* keep = nullptr) {
      auto run = machine.make_run(prepared, nullptr);
      TaskRun* raw = run.get();
      loom::Future future = loom::detail::FutureAccess::make(run->state);
      machine.admit(std::move(run));
      machine.start_ready_runs();
      for (std::uint32_t t = 0; t < 3; ++t) {
        machine.running(*raw, t);
        machine.complete(*raw, t);
      }
      if (!machine.finish_runs()) return false;
      if (keep != nullptr) keep->push_back(future);
      return future.wait_for(std::chrono::seconds(10)) && future.error() == nullptr;
    };
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(one_run());
    // A state comes back to its pool when its last reference goes, which
    // may be the worker's, just after the next run was made: a few states
    // in reserve, as a real steady state has.
    {
      std::vector<loom::Future> held;
      held.reserve(8);
      for (int i = 0; i < 8; ++i) ASSERT_TRUE(one_run(&held));
    }
    // The worker drops its last references just after publishing: let it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long long before = loom::test::allocations();
    {
      auto probe = std::make_unique<int>(1);  // the counter counts
      ASSERT_EQ(loom::test::allocations(), before + 1);
    }
    constexpr int kRuns = 200;
    for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(one_run());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long long allocations = loom::test::allocations() - before - 1;
    EXPECT_EQ(allocations, 0) << "allocations in " << kRuns << " runs";
  }
  workers->shutdown();
}

TEST(RunMachineSteadyState, TwoRunsInFlightOverOneTensorAllocateNothingOnceWarm) {
  // As above, with the second run admitted while the first is still in
  // flight: it follows the first (leaders, followers, the gate), which the
  // run-at-a-time test never exercises. Their lists keep their capacity with
  // the spare runs.
  if (!loom::test::kCountsAllocations) {
    GTEST_SKIP() << "AddressSanitizer replaces operator new: allocations are not counted";
  }
  loom::Runtime rt{loom::test::cpu(1)};
  auto x = rt.tensor<float>({16});
  loom::Graph g;
  g.host("write x", [] {}, {}, {x});
  g.host("read x", [] {}, {x}, {});
  const auto prepared =
      loom::detail::make_prepared(g, std::vector<Placement>(g.size(), Placement::host), 2);
  loom::detail::Poison poison;
  QuietLauncher host;
  auto workers = std::make_shared<loom::detail::WorkerPool>(1);
  {
    RunMachine machine{host, nullptr, poison, workers, ""};
    const auto complete_all = [&](TaskRun& run) {
      for (std::uint32_t t = 0; t < 2; ++t) {
        machine.running(run, t);
        machine.complete(run, t);
      }
    };
    const auto two_runs = [&](std::vector<loom::Future>* keep) {
      auto first = machine.make_run(prepared, nullptr);
      auto second = machine.make_run(prepared, nullptr);
      TaskRun* a = first.get();
      TaskRun* b = second.get();
      loom::Future fa = loom::detail::FutureAccess::make(first->state);
      loom::Future fb = loom::detail::FutureAccess::make(second->state);
      machine.admit(std::move(first));
      machine.admit(std::move(second));
      machine.start_ready_runs();
      if (b->started || b->leaders.size() != 1) return false;  // it waits for the first
      complete_all(*a);
      if (!machine.finish_runs()) return false;
      machine.start_ready_runs();
      if (!b->started) return false;
      complete_all(*b);
      if (!machine.finish_runs()) return false;
      if (keep != nullptr) keep->insert(keep->end(), {fa, fb});
      return fa.wait_for(std::chrono::seconds(10)) && fb.wait_for(std::chrono::seconds(10)) &&
             fa.error() == nullptr && fb.error() == nullptr;
    };
    {
      // States in reserve first (as above), then the warm-up: every state
      // and spare run the measured pairs meet has played both parts by then.
      std::vector<loom::Future> held;
      held.reserve(16);
      for (int i = 0; i < 8; ++i) ASSERT_TRUE(two_runs(&held));
    }
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(two_runs(nullptr));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long long before = loom::test::allocations();
    constexpr int kPairs = 200;
    for (int i = 0; i < kPairs; ++i) ASSERT_TRUE(two_runs(nullptr));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(loom::test::allocations() - before, 0) << "allocations in " << kPairs << " pairs";
  }
  workers->shutdown();
}

// The local backend's collectives, once warm, allocate nothing either: a
// round's bookkeeping is recycled, and each rank's lists and scratch reused.
TEST(LocalCollectivesSteadyState, AllReduceRingAndGatherAllocateNothingOnceWarm) {
  if (!loom::test::kCountsAllocations) {
    GTEST_SKIP() << "AddressSanitizer replaces operator new: allocations are not counted";
  }
  constexpr int kRanks = 3;
  constexpr std::int64_t kN = 1000;
  auto comms = loom::local_communicators(kRanks);
  loom::Runtime rt{loom::test::cpu(1)};
  std::vector<std::vector<loom::CollectivePtr>> ops(kRanks);
  std::vector<loom::Tensor> keep;
  for (int r = 0; r < kRanks; ++r) {
    auto in = rt.tensor<float>({kN});
    for (std::int64_t i = 0; i < kN; ++i) in.data_as<float>()[i] = static_cast<float>(r + i);
    auto sum = rt.tensor<float>({kN});
    auto ring = rt.tensor<float>({kN});
    auto gathered = rt.tensor<float>({kN * kRanks});
    ops[static_cast<std::size_t>(r)] = {
        comms[static_cast<std::size_t>(r)]->all_reduce(in, sum),
        comms[static_cast<std::size_t>(r)]->ring_exchange(in, ring),
        comms[static_cast<std::size_t>(r)]->all_gather(in, gathered),
        comms[static_cast<std::size_t>(r)]->all_reduce(in, in)};
    keep.insert(keep.end(), {in, sum, ring, gathered});
  }
  std::barrier<> phase(kRanks + 1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      const auto& mine = ops[static_cast<std::size_t>(r)];
      for (int i = 0; i < 20; ++i) {
        for (const auto& op : mine) op->run_cpu();
      }
      phase.arrive_and_wait();  // warm: the count starts
      phase.arrive_and_wait();
      for (int i = 0; i < 100; ++i) {
        for (const auto& op : mine) op->run_cpu();
      }
      phase.arrive_and_wait();  // the count ends
    });
  }
  phase.arrive_and_wait();
  const long long before = loom::test::allocations();
  phase.arrive_and_wait();
  phase.arrive_and_wait();
  const long long allocations = loom::test::allocations() - before;
  for (auto& t : ranks) t.join();
  EXPECT_EQ(allocations, 0) << "allocations in 400 collectives on each of " << kRanks << " ranks";
}

}  // namespace
