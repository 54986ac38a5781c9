// The activity log on the CPU: device_busy_fraction on hand-made logs, the
// log of a CPU-backend runtime (which runs are in it, the spans' names,
// tracks and order), its refusals, and its Chrome-trace file.

#include "support/cpu.hpp"
#include "support/json.hpp"

#include <loom/activity.hpp>
#include <loom/error.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::test::cpu;
using namespace std::chrono_literals;

loom::ActivitySpan span(double start, double duration, bool device = true,
                        std::string track = "stream 0 (low)") {
  loom::ActivitySpan s;
  s.task = "t";
  s.track = std::move(track);
  s.device = device;
  s.run = 1;
  s.start_us = start;
  s.duration_us = duration;
  return s;
}

loom::ActivityLog log_of(std::vector<loom::ActivitySpan> spans, double duration = 100) {
  loom::ActivityLog log;
  log.spans = std::move(spans);
  log.duration_us = duration;
  return log;
}

// --- device_busy_fraction on hand-made logs ---------------------------------

TEST(ActivityBusyFraction, EmptyLogIsIdle) {
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(loom::ActivityLog{}, 0, 100), 0.0);
}

TEST(ActivityBusyFraction, DisjointSpansAdd) {
  const auto log = log_of({span(0, 10), span(20, 10)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 40), 0.5);
}

TEST(ActivityBusyFraction, OverlappingSpansCountOnce) {
  // [0,10) and [5,15) on two streams: busy 15 of 20, not 20.
  const auto log = log_of({span(0, 10), span(5, 10, true, "stream 1 (low)")});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 20), 0.75);
}

TEST(ActivityBusyFraction, NestedSpansCountOnce) {
  const auto log = log_of({span(0, 20), span(5, 5), span(12, 2)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 20), 1.0);
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 40), 0.5);
}

TEST(ActivityBusyFraction, SpansAreClippedToTheWindow) {
  // [-5,5) and [15,25) seen through [0,20): 5 + 5 of 20.
  const auto log = log_of({span(-5, 10), span(15, 10)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 20), 0.5);
  // A span covering the whole window.
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log_of({span(0, 100)}), 10, 20), 1.0);
  // Spans wholly outside.
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 30, 40), 0.0);
}

TEST(ActivityBusyFraction, UnsortedSpansAndChains) {
  // Out of order, touching end to start, and a gap: [0,30) busy, [30,40) idle.
  const auto log = log_of({span(20, 10), span(0, 10), span(10, 10), span(40, 0)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 40), 0.75);
}

TEST(ActivityBusyFraction, HostSpansDoNotCount) {
  const auto log = log_of({span(0, 100, false, "host worker 0"), span(0, 25)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, 100), 0.25);
}

TEST(ActivityBusyFraction, EmptyWindowIsIdleAndAReversedOneIsRefused) {
  const auto log = log_of({span(0, 10)});
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 5, 5), 0.0);
  EXPECT_THROW((void)loom::device_busy_fraction(log, 10, 5), loom::InvalidArgument);
}

// --- a CPU-backend runtime --------------------------------------------------

// a -> {b, c} -> d, each sleeping about 2 ms; dependencies come from the data.
loom::Graph diamond(loom::Runtime& rt) {
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  auto z = rt.tensor<float>({4});
  const auto nap = [] { std::this_thread::sleep_for(2ms); };
  loom::Graph g;
  g.host("a", nap, {}, {x});
  g.host("b", nap, {x}, {y});
  g.host("c", nap, {x}, {z});
  g.host("d", nap, {y, z}, {});
  return g;
}

std::map<std::string, const loom::ActivitySpan*> by_task(const loom::ActivityLog& log,
                                                         std::uint64_t run) {
  std::map<std::string, const loom::ActivitySpan*> spans;
  for (const auto& s : log.spans) {
    if (s.run == run) spans[s.task] = &s;
  }
  return spans;
}

double end_of(const loom::ActivitySpan& s) { return s.start_us + s.duration_us; }

// Rounding of the shift onto the log's clock, not time.
constexpr double kRounding = 1e-6;

TEST(ActivityLogCpu, HasEveryTaskOfTheRunsSubmittedWhileOpen) {
  loom::Runtime rt(cpu(2));
  const loom::Graph g = diamond(rt);
  // Submitted before the log opens, still running after: not in the log.
  auto before = rt.submit(g);
  rt.start_activity_log();
  rt.submit(g).wait();
  rt.submit(g).wait();
  before.wait();
  const loom::ActivityLog log = rt.stop_activity_log();
  rt.submit(g).wait();  // after: not in the log

  std::set<std::uint64_t> runs;
  for (const auto& s : log.spans) runs.insert(s.run);
  EXPECT_EQ(runs, (std::set<std::uint64_t>{2, 3}));
  ASSERT_EQ(log.spans.size(), 8U);
  EXPECT_TRUE(std::is_sorted(log.spans.begin(), log.spans.end(),
                             [](const loom::ActivitySpan& a, const loom::ActivitySpan& b) {
                               return a.start_us < b.start_us;
                             }));
  for (const auto& s : log.spans) {
    EXPECT_FALSE(s.device) << s.task;
    EXPECT_EQ(s.track.rfind("host worker ", 0), 0U) << s.track;
    EXPECT_GE(s.start_us, 0.0) << s.task;
    EXPECT_GT(s.duration_us, 0.0) << s.task;
    EXPECT_LE(end_of(s), log.duration_us) << s.task;
  }
  EXPECT_DOUBLE_EQ(loom::device_busy_fraction(log, 0, log.duration_us), 0.0);

  for (const std::uint64_t run : runs) {
    const auto t = by_task(log, run);
    ASSERT_EQ(t.size(), 4U) << "run " << run;
    for (const char* name : {"a", "b", "c", "d"}) ASSERT_TRUE(t.count(name)) << name;
    // A task starts after the tasks it depends on end.
    EXPECT_GE(t.at("b")->start_us, end_of(*t.at("a")) - kRounding);
    EXPECT_GE(t.at("c")->start_us, end_of(*t.at("a")) - kRounding);
    EXPECT_GE(t.at("d")->start_us, end_of(*t.at("b")) - kRounding);
    EXPECT_GE(t.at("d")->start_us, end_of(*t.at("c")) - kRounding);
  }
  // The second run reads and writes what the first did: it follows it.
  EXPECT_GE(by_task(log, 3).at("a")->start_us, end_of(*by_task(log, 2).at("d")) - kRounding);
}

TEST(ActivityLogCpu, StopWaitsForTheRunsThatJoined) {
  loom::Runtime rt(cpu(2));
  const loom::Graph g = diamond(rt);
  rt.start_activity_log();
  auto run = rt.submit(g);
  const loom::ActivityLog log = rt.stop_activity_log();  // without waiting for the run first
  EXPECT_TRUE(run.ready());
  EXPECT_EQ(log.spans.size(), 4U);
}

TEST(ActivityLogCpu, ACompiledGraphAndACopyAreRuns) {
  loom::Runtime rt(cpu(2));
  const loom::Graph g = diamond(rt);
  const loom::Executable exe = rt.compile(g);
  auto src = rt.tensor<float>({16});
  auto dst = rt.tensor<float>({16});
  rt.start_activity_log();
  exe.run().wait();
  rt.copy(src, dst).wait();
  const loom::ActivityLog log = rt.stop_activity_log();
  std::multiset<std::string> names;
  for (const auto& s : log.spans) names.insert(s.task);
  EXPECT_EQ(names, (std::multiset<std::string>{"a", "b", "c", "d", "Runtime::copy"}));
}

TEST(ActivityLogCpu, AnEmptyLogHasNoSpans) {
  loom::Runtime rt(cpu(1));
  rt.start_activity_log();
  const loom::ActivityLog log = rt.stop_activity_log();
  EXPECT_TRUE(log.spans.empty());
  EXPECT_GE(log.duration_us, 0.0);
}

TEST(ActivityLogCpu, StartTwiceOrStopWithoutStartIsRefused) {
  loom::Runtime rt(cpu(1));
  EXPECT_THROW((void)rt.stop_activity_log(), loom::InvalidArgument);
  rt.start_activity_log();
  EXPECT_THROW(rt.start_activity_log(), loom::InvalidArgument);
  EXPECT_NO_THROW((void)rt.stop_activity_log());  // the first log stayed open
  EXPECT_THROW((void)rt.stop_activity_log(), loom::InvalidArgument);
  // And it opens again.
  rt.start_activity_log();
  EXPECT_NO_THROW((void)rt.stop_activity_log());
}

TEST(ActivityLogCpu, StopInsideAContinuationIsRefused) {
  loom::Runtime rt(cpu(2));
  rt.start_activity_log();
  std::promise<bool> refused;
  rt.submit(loom::Graph()).then([&](const loom::Future&) {
    try {
      (void)rt.stop_activity_log();
      refused.set_value(false);
    } catch (const loom::InvalidArgument&) {
      refused.set_value(true);
    }
  });
  EXPECT_TRUE(refused.get_future().get());
  EXPECT_NO_THROW((void)rt.stop_activity_log());
}

// --- the Chrome trace -------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

using loom::test::balanced_json;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(ActivityChromeTrace, HasEverySpanOnItsTrack) {
  loom::Runtime rt(cpu(2));
  const loom::Graph g = diamond(rt);
  rt.start_activity_log();
  rt.submit(g).wait();
  rt.submit(g).wait();
  loom::ActivityLog log = rt.stop_activity_log();
  // A device span and a name that needs escaping, as a GPU log would have.
  auto device = span(1, 2, true, "stream 5 (normal)");
  device.task = "segment 0 [\"k\" .. z, 3 tasks]";
  device.run = 7;
  log.spans.push_back(device);

  const std::string path = ::testing::TempDir() + "loom_activity_test.json";
  loom::write_chrome_trace(log, path);
  const std::string json = read_file(path);
  std::remove(path.c_str());
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\"", 0), 0U);
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_TRUE(balanced_json(json));
  EXPECT_EQ(count_of(json, "\"ph\":\"X\""), log.spans.size());
  for (const char* name : {"a", "b", "c", "d"}) {
    EXPECT_EQ(count_of(json, "\"name\":\"" + std::string(name) + "\""), 2U) << name;
  }
  EXPECT_EQ(count_of(json, R"("name":"segment 0 [\"k\" .. z, 3 tasks]")"), 1U);
  EXPECT_EQ(count_of(json, "\"args\":{\"run\":1}"), 4U);  // runs 1 and 2 of the runtime
  EXPECT_EQ(count_of(json, "\"args\":{\"run\":2}"), 4U);
  EXPECT_EQ(count_of(json, "\"args\":{\"run\":7}"), 1U);
  // One track a distinct span track.
  std::set<std::string> tracks;
  for (const auto& s : log.spans) tracks.insert(s.track);
  EXPECT_EQ(count_of(json, "\"thread_name\""), tracks.size());
  for (const auto& t : tracks) EXPECT_NE(json.find("\"name\":\"" + t + "\""), std::string::npos);
}

TEST(ActivityChromeTrace, AnUnwritablePathIsNamed) {
  const std::string path = ::testing::TempDir() + "no_such_folder/activity.json";
  try {
    loom::write_chrome_trace(log_of({span(0, 1)}), path);
    FAIL() << "expected loom::Error";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
