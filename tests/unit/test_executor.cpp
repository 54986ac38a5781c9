// The executor on the CPU backend: results, futures and continuations,
// errors and cancellation, priorities, a 10,000-task random DAG against
// sequential execution, and the trace file.
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/log.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "support/cpu.hpp"
#include "support/json.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

using loom::test::cpu;

TEST(ExecutorCpu, RunsOpsInDependencyOrder) {
  loom::Runtime rt(cpu());
  EXPECT_EQ(rt.backend(), loom::Backend::cpu);
  auto a = rt.tensor<float>({1000});
  auto b = rt.tensor<float>({1000});
  auto c = rt.tensor<float>({1000});
  loom::Graph g;
  g.add(loom::ops::fill(a, 2.0F));
  g.add(loom::ops::fill(b, 3.0F));
  g.add(loom::ops::vector_add(a, b, c));
  g.add(loom::ops::scale_copy(c, c, 10.0F));
  float seen = 0;
  g.host("read", [&] { seen = c.data_as<float>()[999]; }, {c});
  auto run = rt.submit(g);
  EXPECT_TRUE(run.valid());
  run.wait();
  EXPECT_TRUE(run.ready());
  EXPECT_EQ(run.error(), nullptr);
  EXPECT_EQ(seen, 50.0F);
  for (const auto& r : run.report()) EXPECT_EQ(r.status, loom::TaskStatus::completed) << r.name;
}

TEST(ExecutorCpu, SubmitReturnsAtOnceAndThenRunsContinuations) {
  loom::Runtime rt(cpu());
  std::atomic<bool> release{false};
  loom::Graph g;
  g.host("gate", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  auto run = rt.submit(g);
  EXPECT_FALSE(run.ready());
  EXPECT_FALSE(run.wait_for(5ms));
  std::promise<bool> continued;
  run.then([&](const loom::Future& f) { continued.set_value(f.ready()); });
  release = true;
  auto fut = continued.get_future();
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(fut.get());
  std::promise<void> late;
  run.then([&](const loom::Future&) { late.set_value(); });  // after the end: still runs
  EXPECT_EQ(late.get_future().wait_for(5s), std::future_status::ready);
}

TEST(ExecutorCpu, AFailureNamesItsTaskCancelsDependantsAndSparesTheRest) {
  loom::Runtime rt(cpu());
  auto x = rt.tensor<float>({16});
  auto y = rt.tensor<float>({16});
  std::atomic<int> independent{0};
  std::atomic<int> dependant{0};
  loom::Graph g;
  g.host("load", [] { throw std::runtime_error("disk on fire"); }, {}, {x});
  g.host("use", [&] { ++dependant; }, {x}, {});
  g.host("use more", [&] { ++dependant; }, {x}, {y});
  g.host("after use", [&] { ++dependant; }, {y}, {});
  for (int i = 0; i < 5; ++i) g.host("independent", [&] { ++independent; });
  auto run = rt.submit(g);
  try {
    run.wait();
    FAIL() << "expected the failure";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "load");
    EXPECT_NE(std::string(e.what()).find("disk on fire"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dependant.load(), 0);
  EXPECT_EQ(independent.load(), 5);
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::failed);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(report[static_cast<std::size_t>(i)].status, loom::TaskStatus::cancelled);
    EXPECT_NE(report[static_cast<std::size_t>(i)].error.find("'load' failed"), std::string::npos);
  }
  for (std::size_t i = 4; i < report.size(); ++i)
    EXPECT_EQ(report[i].status, loom::TaskStatus::completed);

  // The runtime is usable for the next run.
  loom::Graph ok;
  ok.add(loom::ops::fill(x, 4.0F));
  rt.submit(ok).wait();
  EXPECT_EQ(x.data_as<float>()[3], 4.0F);
}

TEST(ExecutorCpu, LoomErrorsKeepTheirTypeAndGetTheTaskName) {
  loom::Runtime rt(cpu());
  loom::Graph g;
  g.host("strict", [] { throw loom::InvalidArgument("expected 3 channels"); });
  try {
    rt.submit(g).wait();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "strict");
  }
}

TEST(ExecutorCpu, CancelStopsWhatHasNotStarted) {
  loom::Runtime rt(cpu(2));
  std::atomic<bool> started{false};
  std::atomic<int> later{0};
  loom::Graph g;
  auto first = g.host("slow", [&] {
    started = true;
    std::this_thread::sleep_for(50ms);
  });
  for (int i = 0; i < 10; ++i) {
    auto t = g.host("later", [&] { ++later; });
    g.precede(first, t);
  }
  auto run = rt.submit(g);
  while (!started) std::this_thread::sleep_for(1ms);
  run.cancel();
  EXPECT_THROW(run.wait(), loom::Cancelled);
  EXPECT_EQ(later.load(), 0);
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::completed);
  for (std::size_t i = 1; i < report.size(); ++i)
    EXPECT_EQ(report[i].status, loom::TaskStatus::cancelled);
}

// The README: "a cancel that stopped nothing (every task had already
// started, or the run was over) leaves the run's result as its tasks made
// it"; and "wait() then throws loom::Cancelled (or the failure of a task that
// failed first)".
TEST(ExecutorCpu, ACancelAfterTheRunIsOverLeavesItsResult) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::ops::fill(x, 3.0F));
  auto run = rt.submit(g);
  run.wait();
  run.cancel();
  EXPECT_NO_THROW(run.wait());
  EXPECT_EQ(run.error(), nullptr);
  for (const auto& r : run.report()) EXPECT_EQ(r.status, loom::TaskStatus::completed) << r.name;
  EXPECT_EQ(x.data_as<float>()[3], 3.0F);

  // A run that failed: cancelled afterwards, it still throws its failure.
  loom::Graph bad;
  bad.host("boom", [] { throw std::runtime_error("boom went the task"); });
  auto failed = rt.submit(bad);
  EXPECT_TRUE(failed.wait_for(5s));
  failed.cancel();
  try {
    failed.wait();
    FAIL() << "expected the task's failure";
  } catch (const loom::Cancelled& e) {
    FAIL() << "a cancel after the run was over replaced its failure: " << e.what();
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "boom");
  }
}

// Every task has started when the cancel comes, one of them failing: the
// cancel stops nothing, so wait() throws the task's failure, not Cancelled.
TEST(ExecutorCpu, ACancelThatStopsNothingLeavesAFailureAsItIs) {
  loom::Runtime rt(cpu(2));
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  loom::Graph g;
  g.host("boom", [&] {
    ++started;
    throw std::runtime_error("the first failure");
  });
  g.host("gate", [&] {
    ++started;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  auto run = rt.submit(g);
  while (started.load() < 2) std::this_thread::sleep_for(1ms);
  run.cancel();
  release = true;
  try {
    run.wait();
    FAIL() << "expected the failure";
  } catch (const loom::Cancelled& e) {
    FAIL() << "a cancel that stopped nothing replaced the failure: " << e.what();
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "boom");
    EXPECT_NE(std::string(e.what()).find("the first failure"), std::string::npos) << e.what();
  }
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::failed);
  EXPECT_EQ(report[1].status, loom::TaskStatus::completed);
}

TEST(ExecutorCpu, HighPriorityHostTasksGoFirst) {
  loom::Runtime rt(cpu(1));
  std::mutex m;
  std::vector<loom::Priority> order;
  loom::Graph g;
  auto gate = g.host("gate", [] { std::this_thread::sleep_for(20ms); });
  for (int i = 0; i < 6; ++i) {
    const auto p = i % 2 == 0 ? loom::Priority::low : loom::Priority::high;
    auto t = g.host(
        "work",
        [&, p] {
          std::lock_guard lock(m);
          order.push_back(p);
        },
        {}, {}, p);
    g.precede(gate, t);
  }
  rt.submit(g).wait();
  ASSERT_EQ(order.size(), 6U);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], loom::Priority::high);
  for (int i = 3; i < 6; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], loom::Priority::low);
}

TEST(ExecutorCpu, IndependentHostTasksRunConcurrently) {
  loom::Runtime rt(cpu(4));
  loom::Graph g;
  for (int i = 0; i < 4; ++i) g.host("sleep", [] { std::this_thread::sleep_for(100ms); });
  const auto t0 = std::chrono::steady_clock::now();
  rt.submit(g).wait();
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, 350ms) << "four 100 ms tasks on four workers ran one after another";
}

// Random DAGs of in-place ops over a few tensors: the executor must give
// exactly what running the tasks one by one in submission order gives.
TEST(ExecutorCpu, TenThousandTaskRandomDagMatchesSequentialExecution) {
  loom::Runtime rt(cpu());
  constexpr int kTensors = 24;
  constexpr int kTasks = 10000;
  std::mt19937 rng(static_cast<std::uint32_t>(loom::test::fresh_seed()));
  std::vector<loom::Tensor> live;
  std::vector<loom::Tensor> shadow;
  std::uniform_real_distribution<float> init(-1, 1);
  for (int i = 0; i < kTensors; ++i) {
    live.push_back(rt.tensor<float>({37}));
    shadow.push_back(rt.tensor<float>({37}));
    for (int k = 0; k < 37; ++k) {
      shadow.back().data_as<float>()[k] = live.back().data_as<float>()[k] = init(rng);
    }
  }
  loom::Graph g;
  std::vector<loom::OpPtr> sequential;
  std::uniform_int_distribution<int> pick(0, kTensors - 1);
  std::uniform_int_distribution<int> kind(0, 2);
  for (int i = 0; i < kTasks; ++i) {
    const int a = pick(rng);
    const int b = pick(rng);
    const int c = pick(rng);
    const float alpha = 0.5F + static_cast<float>(i % 7) * 0.25F;
    switch (kind(rng)) {
      case 0:
        g.add(loom::ops::vector_add(live[a], live[b], live[c]));
        sequential.push_back(loom::ops::vector_add(shadow[a], shadow[b], shadow[c]));
        break;
      case 1:
        g.add(loom::ops::scale_copy(live[a], live[c], alpha));
        sequential.push_back(loom::ops::scale_copy(shadow[a], shadow[c], alpha));
        break;
      default:
        g.add(loom::ops::scale_copy(live[a], live[a], 1.0F / alpha));
        sequential.push_back(loom::ops::scale_copy(shadow[a], shadow[a], 1.0F / alpha));
        break;
    }
  }
  rt.submit(g).wait();
  for (const auto& op : sequential) op->run_cpu();
  for (int i = 0; i < kTensors; ++i) {
    ASSERT_EQ(std::memcmp(live[i].data(), shadow[i].data(), live[i].nbytes()), 0) << "tensor " << i;
  }
}

// Checks the Chrome trace of one run of the graph the trace tests submit (a
// fill whose name, as a JSON string, is `fill_name_json`, and a host task
// "inspect"): there, well formed, both tasks' complete events on their
// tracks. Removes the file.
void expect_trace_of_a_run(const std::string& path, const std::string& fill_name_json) {
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no trace at " << path;
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  const std::string json = text.str();
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\"", 0), 0U);
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":" + fill_name_json), std::string::npos) << "the fill's name";
  EXPECT_NE(json.find("\"name\":\"inspect\""), std::string::npos);
  EXPECT_NE(json.find("host worker"), std::string::npos);
  std::size_t complete_events = 0;
  for (auto pos = json.find("\"ph\":\"X\""); pos != std::string::npos;
       pos = json.find("\"ph\":\"X\"", pos + 1)) {
    ++complete_events;
  }
  EXPECT_EQ(complete_events, 2U);
  EXPECT_TRUE(loom::test::balanced_json(json));
  std::remove(path.c_str());
}

TEST(ExecutorCpu, WritesAValidChromeTracePerRun) {
  const std::string base = ::testing::TempDir() + "loom_trace_test.json";
  auto options = cpu(2);
  options.trace_path = base;
  loom::Runtime rt(options);
  auto x = rt.tensor<float>({64});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1), {.name = "fill \"x\""});
  g.host("inspect", [] { std::this_thread::sleep_for(1ms); }, {x});
  rt.submit(g).wait();
  rt.submit(g).wait();
  for (int run = 1; run <= 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    expect_trace_of_a_run(::testing::TempDir() + "loom_trace_test." + std::to_string(run) + ".json",
                          "\"fill \\\"x\\\"\"");  // the name escaped
  }
}

// The README: LOOM_TRACE=t.json writes a Chrome trace of run N to t.N.json,
// as RuntimeOptions::trace_path does. ctest runs this with LOOM_TRACE naming
// a file in the build tree and LOOM_EXPECT_TRACE=1 (tests/CMakeLists.txt);
// elsewhere it skips.
TEST(ExecutorCpu, WritesAChromeTracePerRunWhereLoomTraceSays) {
  if (std::getenv("LOOM_EXPECT_TRACE") == nullptr) {
    GTEST_SKIP() << "run through ctest, which sets LOOM_TRACE and LOOM_EXPECT_TRACE";
  }
  const char* env = std::getenv("LOOM_TRACE");
  ASSERT_NE(env, nullptr) << "LOOM_EXPECT_TRACE without LOOM_TRACE";
  const std::string base = env;
  const std::string suffix = ".json";
  ASSERT_TRUE(base.size() > suffix.size() &&
              base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)
      << "LOOM_TRACE should name a .json file: " << base;
  const std::string stem = base.substr(0, base.size() - suffix.size());
  const auto path_of = [&](int run) { return stem + "." + std::to_string(run) + suffix; };
  // What an earlier ctest left must not pass for this one's traces.
  std::remove(base.c_str());
  for (int run = 1; run <= 3; ++run) std::remove(path_of(run).c_str());
  {
    loom::Runtime rt(cpu(2));  // no trace_path: the environment's
    auto x = rt.tensor<float>({64});
    loom::Graph g;
    g.add(loom::ops::fill(x, 1), {.name = "env fill"});
    g.host("inspect", [] { std::this_thread::sleep_for(1ms); }, {x});
    rt.submit(g).wait();
    rt.submit(g).wait();
    // A run's trace is written before its Future turns ready.
    for (int run = 1; run <= 2; ++run) {
      SCOPED_TRACE("run " + std::to_string(run));
      expect_trace_of_a_run(path_of(run), "\"env fill\"");
    }
  }
  EXPECT_FALSE(std::ifstream(path_of(3)).good()) << "a trace of a run that never was";
  EXPECT_FALSE(std::ifstream(base).good())
      << "the runs' traces went to " << base << " itself, not one file a run";
}

TEST(ExecutorCpu, EmptyGraphIsReadyAtOnce) {
  loom::Runtime rt(cpu());
  auto run = rt.submit(loom::Graph());
  EXPECT_TRUE(run.wait_for(1s));
  EXPECT_NO_THROW(run.wait());
}

TEST(ExecutorCpu, BackendFromTheEnvironment) {
  const char* expected = std::getenv("LOOM_EXPECT");
  if (expected == nullptr) GTEST_SKIP() << "run through ctest, which sets LOOM_EXPECT";
  const std::string expect = expected;
  {
    // An explicit backend wins over LOOM_DEVICE, whatever it holds.
    loom::RuntimeOptions options;
    options.backend = loom::Backend::cpu;
    options.workers = 1;
    loom::Runtime rt(options);
    EXPECT_EQ(rt.backend(), loom::Backend::cpu);
  }
  if (expect == "automatic") {  // LOOM_DEVICE unset: CUDA where a GPU is visible, else the CPU
    ASSERT_EQ(std::getenv("LOOM_DEVICE"), nullptr);
    loom::Runtime rt;
    EXPECT_EQ(rt.backend(),
              loom::cuda_availability().available ? loom::Backend::cuda : loom::Backend::cpu);
  } else if (expect == "cpu") {
    loom::Runtime rt;
    EXPECT_EQ(rt.backend(), loom::Backend::cpu);
  } else if (expect == "cuda") {  // the CUDA backend, or NoDevice without a GPU
    if (loom::cuda_availability().available) {
      loom::Runtime rt;
      EXPECT_EQ(rt.backend(), loom::Backend::cuda);
    } else {
      EXPECT_THROW(loom::Runtime rt, loom::NoDevice);
    }
  } else if (expect == "no-device") {
    EXPECT_THROW(loom::Runtime rt, loom::NoDevice);
  } else if (expect == "invalid") {
    EXPECT_THROW(loom::Runtime rt, loom::InvalidArgument);
  }
}

}  // namespace

namespace {

// Adds one to every element of a tensor, and counts how often it is validated.
class CountingIncrement final : public loom::Op {
 public:
  CountingIncrement(loom::Tensor t, std::atomic<int>& validations)
      : t_(std::move(t)), validations_(validations) {}
  std::string_view name() const noexcept override { return "increment"; }
  std::vector<loom::Tensor> reads() const override { return {t_}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override { ++validations_; }
  void run_cpu() const override {
    auto* p = t_.data_as<float>();
    for (std::int64_t i = 0; i < t_.numel(); ++i) p[i] += 1.0F;
  }
  void run_cuda(const loom::ExecutionContext&) const override {
    throw loom::InvalidArgument("increment: CPU only");
  }

 private:
  loom::Tensor t_;
  std::atomic<int>& validations_;
};

}  // namespace

TEST(ExecutorCpu, ResubmittingAnUnchangedGraphValidatesAndPlansItOnce) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({64});
  std::atomic<int> validations{0};
  loom::Graph g;
  g.add(loom::ops::fill(t, 0.0F));
  g.add(std::make_shared<CountingIncrement>(t, validations));
  for (int i = 0; i < 5; ++i) rt.submit(g).wait();
  EXPECT_EQ(validations.load(), 1);
  EXPECT_EQ(t.data_as<float>()[63], 1.0F);

  // A change makes the next submit validate (and plan) the new graph.
  g.add(std::make_shared<CountingIncrement>(t, validations));
  rt.submit(g).wait();
  EXPECT_EQ(validations.load(), 3);  // both increments, once each
  EXPECT_EQ(t.data_as<float>()[0], 2.0F);
  rt.submit(g).wait();
  EXPECT_EQ(validations.load(), 3);
}

TEST(ExecutorCpu, AChangedCopyNeverAltersTheOriginalOrARunInFlight) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({16});
  std::atomic<int> validations{0};
  loom::Graph g;
  g.add(loom::ops::fill(t, 10.0F));
  rt.submit(g).wait();

  loom::Graph longer = g;  // shares what the runtime derived, until it changes
  longer.add(std::make_shared<CountingIncrement>(t, validations));
  rt.submit(longer).wait();
  EXPECT_EQ(t.data_as<float>()[5], 11.0F);
  rt.submit(g).wait();  // the original still only fills
  EXPECT_EQ(t.data_as<float>()[5], 10.0F);
  auto again = rt.submit(g);
  again.wait();
  EXPECT_EQ(again.report().size(), 1U);

  // A run keeps the graph as it was at submit, whatever happens to it later.
  std::atomic<bool> release{false};
  loom::Graph gated;
  gated.host("gate", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  gated.add(loom::ops::fill(t, 3.0F));
  auto run = rt.submit(gated);
  gated.add(std::make_shared<CountingIncrement>(t, validations));
  release = true;
  run.wait();
  EXPECT_EQ(run.report().size(), 2U);
  EXPECT_EQ(t.data_as<float>()[0], 3.0F);
}

TEST(ExecutorCpu, OneGraphRunsOnTwoRuntimes) {
  loom::Runtime first(cpu());
  loom::Runtime second(cpu());
  auto t = first.tensor<float>({8});
  std::fill_n(t.data_as<float>(), 8, 0.0F);
  std::atomic<int> validations{0};
  loom::Graph g;
  g.add(std::make_shared<CountingIncrement>(t, validations));
  for (int i = 0; i < 3; ++i) {
    first.submit(g).wait();
    second.submit(g).wait();
  }
  EXPECT_EQ(t.data_as<float>()[7], 6.0F);
  // Each runtime's backend checks the graph itself (memory spaces differ by backend).
  EXPECT_GE(validations.load(), 2);
}

TEST(ExecutorCpu, AnInvalidGraphIsRejectedOnEverySubmit) {
  loom::Runtime rt(cpu());
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({9});
  loom::Graph g;
  g.add(loom::ops::vector_add(a, a, b), {"mismatched"});
  for (int i = 0; i < 2; ++i) {
    try {
      rt.submit(g);
      FAIL() << "an invalid graph was accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("mismatched"), std::string::npos) << e.what();
    }
  }
}

namespace {

// Errors are values (issue 16, item 5): an error rethrown into a task of
// another run is named there as a new error; the run it came from still
// reports it as it was.
TEST(ErrorsAreValues, ACancelledRunsErrorRethrownInAnotherRunsTaskIsNotRenamed) {
  loom::Runtime rt(cpu(2));
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  loom::Graph a;
  auto gate = a.host("gate", [&] {
    started = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  a.host("after gate", [] {}).succeed(gate);
  auto first = rt.submit(a);
  while (!started) std::this_thread::sleep_for(1ms);
  first.cancel();
  release = true;
  EXPECT_THROW(first.wait(), loom::Cancelled);

  loom::Graph b;
  b.host("waiter", [&] { first.wait(); });
  try {
    rt.submit(b).wait();
    FAIL() << "the waiter's run did not fail";
  } catch (const loom::Cancelled& e) {
    EXPECT_EQ(e.task(), "waiter") << e.what();
  }
  try {
    first.wait();
    FAIL();
  } catch (const loom::Cancelled& e) {
    EXPECT_TRUE(e.task().empty()) << "the cancelled run's error was renamed: " << e.what();
  }
}

TEST(ErrorsAreValues, AFailedRunsErrorRethrownInAnotherRunsTaskNamesBoth) {
  loom::Runtime rt(cpu(2));
  loom::Graph a;
  a.host("load", [] { throw std::runtime_error("disk on fire"); });
  auto first = rt.submit(a);
  EXPECT_THROW(first.wait(), loom::Error);

  loom::Graph b;
  b.host("waiter", [&] { first.wait(); });
  auto second = rt.submit(b);
  try {
    second.wait();
    FAIL() << "the waiter's run did not fail";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "waiter") << e.what();
    EXPECT_EQ(e.origin_task(), "load") << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("loom: task 'waiter': because of task 'load': ", 0), 0U) << what;
    EXPECT_NE(what.find("disk on fire"), std::string::npos) << what;
  }
  EXPECT_NE(second.report()[0].error.find("task 'waiter'"), std::string::npos)
      << second.report()[0].error;
  try {
    first.wait();
    FAIL();
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "load") << "the first run's error was renamed: " << e.what();
    EXPECT_TRUE(e.origin_task().empty());
  }
}

// The README: rt.synchronize() inside a task fails at once with
// InvalidArgument naming the task, where it is thrown (not only once the
// run reports it).
TEST(ErrorsAreValues, SynchronizeInsideAHostTaskNamesTheTaskWhereItThrows) {
  loom::Runtime rt(cpu(1));
  std::string named = "(not thrown)";
  loom::Graph g;
  g.host("impatient", [&] {
    try {
      rt.synchronize();
    } catch (const loom::InvalidArgument& e) {
      named = e.task();
    }
  });
  rt.submit(g).wait();
  EXPECT_EQ(named, "impatient");
}

// then() on a finished run whose runtime is gone runs the continuation on
// the caller's thread; what it throws is logged, never propagated (issue
// 16, item 8).
TEST(Continuations, ThenOnAFinishedRunOfADestroyedRuntimeLogsWhatItThrows) {
  loom::Future run;
  {
    loom::Runtime rt(cpu(1));
    loom::Graph g;
    g.host("only", [] {});
    run = rt.submit(g);
    run.wait();
  }
  int ran = 0;
  // The README: "Logging uses one spdlog logger named loom on standard
  // error", and what such a continuation throws "is logged".
  const auto before = loom::log_level();
  loom::set_log_level(loom::LogLevel::warn);
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(run.then([&](const loom::Future&) {
    ++ran;
    throw std::runtime_error("a continuation's bug");
  }));
  EXPECT_NO_THROW(run.then([&](const loom::Future&) {
    ++ran;
    throw 42;  // not even a std::exception
  }));
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(ran, 2) << "the continuations ran on the caller's thread";
  EXPECT_NE(logged.find("[loom]"), std::string::npos) << logged;
  EXPECT_NE(logged.find("a continuation's bug"), std::string::npos) << logged;
  // Off: the same goes unsaid.
  loom::set_log_level(loom::LogLevel::off);
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(run.then([&](const loom::Future&) { throw std::runtime_error("unsaid"); }));
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("unsaid"), std::string::npos);
  loom::set_log_level(before);
}

}  // namespace
