// The runtime under abuse, on the CPU backend: a cancelled run keeps its
// place in the order; ordering and overlap go by memory, not by the handle;
// the shutdown protocol (work in flight finishes, submits during shutdown
// run, a runtime destroyed on its own worker is handed off). The stress test
// that mixes all of it is in test_stress.cpp.
#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "core/completion_state.hpp"
#include "sched/lifecycle.hpp"
#include "sched/worker_pool.hpp"
#include "support/cpu.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using loom::DType;
using loom::Graph;
using loom::Memory;
using loom::test::cpu;

std::vector<float> values_of(const loom::Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.numel());
}

bool all_equal(const std::vector<float>& v, float x) {
  return std::all_of(v.begin(), v.end(), [x](float y) { return y == x; });
}

// --- 1. A cancelled run keeps its place in the order ------------------------

// Runs C (a slow host task), D (fill 2) and E (fill 3) over one tensor,
// submitted in that order, then a follower; E is cancelled after the follower
// is queued, while E still waits for D. The follower must see D's 2.
TEST(CancelledRunKeepsItsPlace, DeviceAndHostFollowersSeeTheWorkBeforeIt) {
  loom::Runtime rt(cpu(4));
  constexpr std::int64_t n = 1024;
  auto t = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  Graph init;
  init.add(loom::ops::fill(t, -1.0F));
  init.add(loom::ops::fill(out, -5.0F));
  rt.submit(init).wait();

  Graph c, d, e, f, h;
  c.host("C slow", [] { std::this_thread::sleep_for(150ms); }, {}, {t});
  d.add(loom::ops::fill(t, 2.0F), {.name = "D"});
  e.add(loom::ops::fill(t, 3.0F), {.name = "E"});
  f.add(loom::ops::scale_copy(t, out, 1.0F), {.name = "F"});
  std::vector<float> seen_by_host;
  h.host("H reads t", [&] { seen_by_host = values_of(t); }, {t}, {});

  auto rc = rt.submit(c);
  auto rd = rt.submit(d);
  auto re = rt.submit(e);
  auto rf = rt.submit(f);
  auto rh = rt.submit(h);
  re.cancel();
  rf.wait();
  rh.wait();
  EXPECT_THROW(re.wait(), loom::Cancelled);
  // The Futures keep the work's order (README): C and D are ready once a
  // run after them is.
  EXPECT_TRUE(rc.ready() && rd.ready())
      << "a follower of the cancelled run turned ready before C and D";
  EXPECT_NO_THROW(rc.wait());
  EXPECT_NO_THROW(rd.wait());
  EXPECT_TRUE(all_equal(values_of(out), 2.0F))
      << "F overtook C and D: out[0] = " << values_of(out)[0];
  EXPECT_TRUE(all_equal(seen_by_host, 2.0F)) << "the host follower overtook C and D";
}

// A run cancelled before it starts must not end before the runs it waited
// for: one submitted after it has ended must still follow them.
TEST(CancelledRunKeepsItsPlace, ALaterRunStillFollowsTheWorkBeforeIt) {
  loom::Runtime rt(cpu(4));
  auto t = rt.tensor<float>({256});
  Graph init, c, e, later;
  init.add(loom::ops::fill(t, 0.0F));
  rt.submit(init).wait();
  c.host("C slow",
         [&] {
           std::this_thread::sleep_for(150ms);
           std::fill_n(t.data_as<float>(), t.numel(), 7.0F);
         },
         {}, {t});
  e.add(loom::ops::fill(t, 3.0F), {.name = "E"});
  std::vector<float> seen;
  later.host("later", [&] { seen = values_of(t); }, {t}, {});
  auto rc = rt.submit(c);
  auto re = rt.submit(e);
  re.cancel();
  EXPECT_THROW(re.wait(), loom::Cancelled);
  EXPECT_TRUE(rc.ready()) << "the cancelled run turned ready before the run it waited for";
  EXPECT_NO_THROW(rc.wait());
  rt.submit(later).wait();
  EXPECT_TRUE(all_equal(seen, 7.0F));
}

// A task that waits for a run ordered after its own run (the nested run
// touches its run's data) would wait forever: the wait fails instead,
// naming the task, and the nested run still runs once the task's run ends.
TEST(NestedWaits, AWaitForARunOrderedAfterTheTasksOwnRunFailsNamingTheTask) {
  loom::Runtime rt(cpu(2));
  auto t = rt.tensor<float>({16});
  Graph init;
  init.add(loom::ops::fill(t, 1.0F));
  rt.submit(init).wait();
  loom::Future nested;
  Graph g;
  g.host("waits for its own data",
         [&] {
           Graph h;
           h.add(loom::ops::fill(t, 5.0F));  // writes what this run reads: ordered after it
           nested = rt.submit(h);
           nested.wait();
         },
         {t}, {});
  try {
    rt.submit(g).wait();
    ADD_FAILURE() << "the self-deadlocking wait did not fail";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "waits for its own data") << e.what();
    EXPECT_NE(std::string(e.what()).find("never end"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(nested.valid());
  EXPECT_NO_THROW(nested.wait()) << "the nested run runs once the outer run is over";
  EXPECT_TRUE(all_equal(values_of(t), 5.0F));
}

// Every waiter gets an error of its own: a stored error's last reference may
// be dropped on any worker, and a waiter still reading the very object would
// race with it (thread checkers cannot see exception_ptr's count).
std::exception_ptr caught(const std::function<void()>& fn) {
  try {
    fn();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

TEST(ErrorsNeverShared, EachWaitAndEachErrorCallGetsItsOwnCopyOfTheRunsError) {
  loom::Runtime rt(cpu(2));
  Graph g;
  g.host("fails", [] { throw std::runtime_error("boom"); });
  const auto f = rt.submit(g);
  const auto first = caught([&] { f.wait(); });
  const auto second = caught([&] { f.wait(); });
  ASSERT_TRUE(first && second);
  EXPECT_NE(first, second) << "two waiters were handed the same exception object";
  EXPECT_NE(f.error(), f.error());
  for (const auto& e : {first, second, f.error()}) {
    try {
      std::rethrow_exception(e);
    } catch (const loom::Error& err) {
      EXPECT_EQ(err.task(), "fails");
      EXPECT_NE(std::string(err.what()).find("boom"), std::string::npos) << err.what();
    }
  }
}

TEST(ErrorsNeverShared, ACompletionsWaitAndErrorGetTheirOwnCopyWithTheirType) {
  auto state = std::make_shared<loom::detail::CompletionState>();
  state->finish(std::make_exception_ptr(loom::OutOfMemory(64, "no room")));
  const auto c = loom::detail::CompletionAccess::make(state);
  const auto first = caught([&] { c.wait(); });
  EXPECT_NE(first, c.error());
  EXPECT_NE(c.error(), c.error());
  try {
    std::rethrow_exception(first);
  } catch (const loom::OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 64U);
  } catch (...) {
    ADD_FAILURE() << "the copy lost the error's type";
  }
}

// Under a thread checker: a continuation on a worker holds the failed run
// until after the submitting thread has left its catch block, and this
// thread touches nothing of loom's meanwhile, so the stored error is freed on
// the worker with nothing ordering it after the reads in the catch block.
TEST(ErrorsNeverShared, ErrorsCaughtWhileTheRunIsFreedElsewhereAreNoRace) {
  loom::Runtime rt(cpu(2));
  for (int i = 0; i < 20; ++i) {
    Graph g;
    g.host("fails " + std::to_string(i), [] {
      std::this_thread::sleep_for(1ms);  // then() below comes first
      throw loom::InvalidArgument("bad");
    });
    try {
      auto f = rt.submit(g);
      f.then([](const loom::Future&) { std::this_thread::sleep_for(2ms); });
      f.wait();
      ADD_FAILURE() << "the run did not fail";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "fails " + std::to_string(i)) << e.what();  // what() is virtual
      EXPECT_EQ(e.message(), "bad");
    }
    std::this_thread::sleep_for(5ms);  // the continuation ends and frees the run
  }
}

// --- 2. Order by memory, not by the handle -----------------------------------

TEST(OrderByMemory, TwoWrappersOfOneBufferGetAnEdgeInAGraph) {
  loom::Runtime rt(cpu());
  std::vector<float> buffer(100, 0.0F);
  auto a = rt.provide(buffer.data(), DType::f32, {100}, Memory::pageable);
  auto b = rt.provide(buffer.data(), DType::f32, {100}, Memory::pageable);
  auto tail = rt.provide(buffer.data() + 60, DType::f32, {40}, Memory::pageable);
  auto out = rt.tensor<float>({40});
  Graph g;
  const auto write = g.add(loom::ops::fill(a, 1.0F));
  const auto read_whole = g.add(loom::ops::scale_copy(b.slice(0, 60, 100), out, 1.0F));
  const auto read_tail = g.add(loom::ops::scale_copy(tail, out, 2.0F));
  const auto& tasks = g.tasks();
  EXPECT_EQ(tasks[read_whole.index].predecessors, std::vector<std::uint32_t>{write.index})
      << "a second provide() of the same pointer is the same data";
  const auto& preds = tasks[read_tail.index].predecessors;
  EXPECT_TRUE(std::find(preds.begin(), preds.end(), write.index) != preds.end())
      << "a partial overlap between two provided ranges is ordered too";
  rt.submit(g).wait();
  EXPECT_TRUE(all_equal(values_of(out), 2.0F));
}

// The graph keys loom's own tensors by storage until it meets provided
// memory in their space: the histories gathered so far must carry over.
TEST(OrderByMemory, AWrapperMetAfterLoomsOwnTensorStillGetsItsEdges) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({64});
  auto other = rt.tensor<float>({64});
  Graph g;
  const auto write = g.add(loom::ops::fill(t, 1.0F));
  const auto unrelated = g.add(loom::ops::fill(other, 2.0F));
  auto alias = rt.provide(static_cast<float*>(t.data()) + 8, DType::f32, {8}, Memory::pageable);
  const auto read_alias = g.add(loom::ops::scale_copy(alias, other.slice(0, 0, 8), 1.0F));
  const auto read_t = g.add(loom::ops::scale_copy(t.slice(0, 32, 40), other.slice(0, 8, 16), 1.0F));
  const auto preds = [&](loom::TaskId id) { return g.tasks()[id.index].predecessors; };
  EXPECT_EQ(preds(read_alias), (std::vector<std::uint32_t>{write.index, unrelated.index}));
  EXPECT_EQ(preds(read_t), (std::vector<std::uint32_t>{write.index, unrelated.index}))
      << "t and other keep their histories once their space is keyed by address";
  rt.submit(g).wait();
  const auto out = values_of(other);
  EXPECT_EQ(out[0], 1.0F);
  EXPECT_EQ(out[8], 1.0F);
  EXPECT_EQ(out[16], 2.0F);
}

TEST(OrderByMemory, RunsOverTwoWrappersOfOneBufferAreOrdered) {
  loom::Runtime rt(cpu(4));
  std::vector<float> buffer(64, 0.0F);
  auto a = rt.provide(buffer.data(), DType::f32, {64}, Memory::pageable);
  auto b = rt.provide(buffer.data() + 32, DType::f32, {32}, Memory::pageable);  // a's upper half
  Graph writer, reader;
  writer.host("slow writer",
              [&] {
                std::this_thread::sleep_for(100ms);
                std::fill(buffer.begin(), buffer.end(), 4.0F);
              },
              {}, {a});
  std::vector<float> seen;
  reader.host("reader", [&] { seen = values_of(b); }, {b}, {});
  auto w = rt.submit(writer);
  rt.submit(reader).wait();
  EXPECT_TRUE(w.ready()) << "the reader of the second wrapper turned ready before the writer";
  EXPECT_NO_THROW(w.wait());
  EXPECT_TRUE(all_equal(seen, 4.0F))
      << "the reader of the second wrapper did not wait for the writer";
}

TEST(OrderByMemory, OverlapChecksSeeThroughWrappers) {
  loom::Runtime rt(cpu());
  std::vector<float> buffer(100, 1.0F);
  auto a = rt.provide(buffer.data(), DType::f32, {50}, Memory::pageable);
  auto shifted = rt.provide(buffer.data() + 25, DType::f32, {50}, Memory::pageable);
  auto same = rt.provide(buffer.data(), DType::f32, {50}, Memory::pageable);
  EXPECT_TRUE(a.shares_storage_with(shifted));
  EXPECT_TRUE(a.shares_storage_with(same));
  EXPECT_FALSE(a.shares_storage_with(rt.tensor<float>({50})));
  try {
    rt.copy(a, shifted).wait();
    ADD_FAILURE() << "a copy between overlapping wrappers was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  rt.copy(a, same).wait();  // the very same memory: nothing to do
  auto y = rt.tensor<float>({50});
  Graph g;
  g.add(loom::ops::add(a, y, shifted), {.name = "overlapping add"});
  try {
    rt.submit(g).wait();
    ADD_FAILURE() << "an elementwise output partly overlapping an input's memory was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("overlapping add"), std::string::npos) << e.what();
  }
}

// --- 3. The shutdown protocol -----------------------------------------------

TEST(ShutdownProtocol, WorkInFlightFinishesWithEverythingAlive) {
  std::atomic<int> ran{0};
  std::vector<loom::Future> runs;
  {
    loom::Runtime rt(cpu(2));
    auto t = rt.tensor<float>({16});
    for (int i = 0; i < 50; ++i) {
      Graph g;
      g.host("step",
             [&] {
               std::this_thread::sleep_for(1ms);
               ++ran;
             },
             {}, {t});
      g.add(loom::ops::fill(t, static_cast<float>(i)));
      runs.push_back(rt.submit(g));
    }
  }
  EXPECT_EQ(ran.load(), 50);
  for (auto& r : runs) {
    EXPECT_TRUE(r.ready());
    EXPECT_NO_THROW(r.wait());
  }
}

// The README: "tensors that outlive it stay valid and are freed safely
// later". A pooled tensor, a view of it, and a graph's intermediate (its
// arena) keep their values past the runtime and take new ones; the
// sanitizer builds check that freeing them later is clean.
TEST(ShutdownProtocol, TensorsThatOutliveTheRuntimeStayValid) {
  loom::Tensor pooled;
  loom::Tensor view;
  loom::Tensor middle;
  loom::Graph g;
  {
    loom::Runtime rt(cpu(2));
    pooled = rt.tensor<float>({64});
    view = pooled.slice(0, 8, 24);
    middle = g.intermediate(loom::DType::f32, {32});
    g.add(loom::ops::fill(pooled, 1.5F));
    g.add(loom::ops::fill(middle, 2.5F));
    rt.submit(g).wait();
  }
  for (std::int64_t i = 0; i < 64; ++i) ASSERT_EQ(pooled.data_as<float>()[i], 1.5F) << i;
  for (std::int64_t i = 0; i < 32; ++i) ASSERT_EQ(middle.data_as<float>()[i], 2.5F) << i;
  std::fill_n(view.data_as<float>(), view.numel(), -3.0F);
  std::fill_n(middle.data_as<float>(), middle.numel(), 4.0F);
  EXPECT_EQ(pooled.data_as<float>()[8], -3.0F);
  EXPECT_EQ(pooled.data_as<float>()[7], 1.5F);
  EXPECT_EQ(middle.data_as<float>()[31], 4.0F);
  g = loom::Graph();  // the graph goes first, its intermediate stays
  EXPECT_EQ(middle.data_as<float>()[0], 4.0F);
  pooled = loom::Tensor();
  EXPECT_EQ(view.data_as<float>()[0], -3.0F);  // the view keeps the storage
  view = loom::Tensor();
  middle = loom::Tensor();
}

TEST(ShutdownProtocol, TasksAndContinuationsMaySubmitWhileTheRuntimeIsDestroyed) {
  std::atomic<int> nested{0};
  loom::Future outer;
  {
    auto rt = std::make_unique<loom::Runtime>(cpu(1));
    loom::Runtime* p = rt.get();
    const auto nested_graph = [&] {
      Graph h;
      h.host("nested", [&] { ++nested; });
      return h;
    };
    Graph g;
    g.host("submits during shutdown", [&, p] {
      std::this_thread::sleep_for(100ms);  // the destructor has begun by now
      p->submit(nested_graph()).wait();
    });
    outer = rt->submit(g);
    outer.then([&, p](const loom::Future&) {
      std::this_thread::sleep_for(20ms);
      p->submit(nested_graph()).wait();
      p->submit(nested_graph()).then([&, p](const loom::Future&) {
        p->submit(nested_graph()).wait();  // a continuation of a continuation's run
      });
    });
    rt.reset();
  }
  EXPECT_NO_THROW(outer.wait());
  EXPECT_EQ(nested.load(), 4) << "every submit made during shutdown runs";
}

TEST(ShutdownProtocol, ARuntimeWhoseLastReferenceAContinuationHoldsIsHandedOff) {
  auto rt = std::make_shared<loom::Runtime>(cpu(2));
  std::weak_ptr<loom::Runtime> watch = rt;
  std::promise<void> continued;
  std::promise<void> released;
  auto main_released = released.get_future().share();
  Graph g;
  g.host("work", [] {});
  auto run = rt->submit(g);
  run.then([rt, &continued, main_released](const loom::Future&) mutable {
    Graph h;
    h.host("more", [] {});
    rt->submit(h).wait();
    main_released.wait();  // from here on this continuation holds the last reference
    continued.set_value();
  });  // dropping the continuation on a worker destroys the runtime there
  rt.reset();
  released.set_value();
  continued.get_future().wait();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired()) << "the runtime was never destroyed";
  // Its teardown was handed to a thread of its own: a new runtime works meanwhile.
  loom::Runtime other(cpu(1));
  other.submit(g).wait();
}

TEST(ShutdownProtocol, ARuntimeDestroyedInsideItsOwnTaskIsHandedOff) {
  auto rt = std::make_shared<loom::Runtime>(cpu(1));
  std::weak_ptr<loom::Runtime> watch = rt;
  std::promise<void> dropped;
  std::promise<void> released;
  auto main_released = released.get_future().share();
  auto holder = std::make_shared<std::shared_ptr<loom::Runtime>>(rt);
  Graph g;
  g.host("drops the last reference", [holder, &dropped, main_released] {
    main_released.wait();
    holder->reset();  // ~Runtime on its own worker
    dropped.set_value();
  });
  auto run = rt->submit(g);
  rt.reset();
  released.set_value();
  dropped.get_future().wait();
  EXPECT_NO_THROW(run.wait());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired());
}

TEST(ShutdownProtocol, AClosedLifecycleRefusesRunsClearly) {
  auto workers = std::make_shared<loom::detail::WorkerPool>(1);
  auto life = std::make_shared<loom::detail::Lifecycle>(workers);
  life->run_made();
  std::atomic<int> continued{0};
  life->run_published({[&] { ++continued; }});
  life->drain_and_close();
  EXPECT_EQ(continued.load(), 1) << "the drain waits for continuations";
  try {
    life->run_made();
    ADD_FAILURE() << "a closed lifecycle accepted a run";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("being destroyed"), std::string::npos) << e.what();
  }
  try {
    life->compile_begun();
    ADD_FAILURE() << "a closed lifecycle accepted a compile";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("being destroyed"), std::string::npos) << e.what();
  }
  // A continuation added once closed runs here, and what it throws is logged.
  bool here = false;
  life->post_continuation([&] {
    here = true;
    throw std::runtime_error("logged, not propagated");
  });
  EXPECT_TRUE(here);
  workers->shutdown();
}

// A compile uses the runtime's streams, pools and arena: the drain waits for
// one in flight as for a run, and only then closes.
TEST(ShutdownProtocol, TheDrainWaitsForACompileInFlight) {
  auto workers = std::make_shared<loom::detail::WorkerPool>(1);
  auto life = std::make_shared<loom::detail::Lifecycle>(workers);
  std::promise<void> begun;
  std::atomic<bool> done{false};
  std::thread compiling([&] {
    life->compile_begun();
    begun.set_value();
    std::this_thread::sleep_for(100ms);
    done = true;
    life->compile_done();
  });
  begun.get_future().wait();
  life->drain_and_close();
  EXPECT_TRUE(done.load()) << "the lifecycle closed while a compile was in flight";
  compiling.join();
  workers->shutdown();
}

TEST(ShutdownProtocol, TasksMayCompileAndReplayWhileTheRuntimeIsDestroyed) {
  std::atomic<int> replayed{0};
  loom::Future outer;
  {
    auto rt = std::make_unique<loom::Runtime>(cpu(1));
    loom::Runtime* p = rt.get();
    Graph g;
    g.host("compiles during shutdown", [&, p] {
      std::this_thread::sleep_for(100ms);  // the destructor has begun by now
      Graph h;
      h.host("replayed", [&] { ++replayed; });
      const auto exe = p->compile(h);
      exe.run().wait();
      exe.run().wait();
    });
    outer = rt->submit(g);
    rt.reset();
  }
  EXPECT_NO_THROW(outer.wait());
  EXPECT_EQ(replayed.load(), 2) << "a compile made during shutdown runs";
}

TEST(ShutdownProtocol, ThenOnAFinishedRunOfAGoneRuntimeNeverThrows) {
  loom::Future run;
  {
    loom::Runtime rt(cpu(1));
    Graph g;
    g.host("work", [] {});
    run = rt.submit(g);
    run.wait();
  }
  bool ran = false;
  EXPECT_NO_THROW(run.then([&](const loom::Future&) {
    ran = true;
    throw 42;  // not even a std::exception
  }));
  EXPECT_TRUE(ran);
}

}  // namespace
