// The activity log on the CUDA backend: kernels, copies (on a stream and
// staged), host tasks and a compiled graph's segments, timed while the log is
// open, land on the log's clock, inside the log, on their tracks; the device
// is busy some of the time.

#include "support/gpu.hpp"
#include "testing/spin_op.hpp"

#include <loom/activity.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using loom::Memory;

double end_of(const loom::ActivitySpan& s) { return s.start_us + s.duration_us; }

// CUDA events resolve about 0.5 µs, and each device time is a float sum: two
// spans of one stream may seem to overlap by that much.
constexpr double kEventResolutionUs = 1.0;

const loom::ActivitySpan* find_span(const loom::ActivityLog& log, const std::string& task,
                                    std::uint64_t run) {
  for (const auto& s : log.spans) {
    if (s.task == task && s.run == run) return &s;
  }
  return nullptr;
}

TEST(ActivityLogGpu, DeviceSpansLieInsideTheLogAndKeepTheDeviceBusy) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const std::int64_t n = 1 << 20;
  auto a = rt.tensor<float>({n});
  auto b = rt.tensor<float>({n});
  auto c = rt.tensor<float>({n});
  auto pinned = rt.tensor<float>({n}, Memory::pinned);
  auto pageable = rt.tensor<float>({n}, Memory::pageable);
  loom::Graph g;
  g.add(loom::ops::fill(a, 1), {.name = "fill a"});
  g.add(loom::ops::fill(b, 2), {.name = "fill b"});
  g.add(loom::testing::spin(a, 200), {.name = "spin a"});
  g.add(loom::ops::vector_add(a, b, c), {.name = "add"});
  g.copy(c, pinned, {.name = "download"});
  g.host("look", [] {}, {pinned}, {});
  rt.submit(g).wait();  // before the log: absent

  rt.start_activity_log();
  rt.submit(g).wait();
  rt.submit(g).wait();
  rt.copy(pinned, a).wait();    // a run of one copy on a stream
  rt.copy(pageable, b).wait();  // a staged copy: a host span
  const loom::ActivityLog log = rt.stop_activity_log();
  rt.submit(g).wait();  // after the log: absent

  std::set<std::uint64_t> runs;
  for (const auto& s : log.spans) runs.insert(s.run);
  EXPECT_EQ(runs, (std::set<std::uint64_t>{2, 3, 4, 5}));

  std::size_t device_spans = 0;
  for (const auto& s : log.spans) {
    EXPECT_GE(s.start_us, 0.0) << s.task;
    EXPECT_LE(end_of(s), log.duration_us) << s.task;
    EXPECT_GE(s.duration_us, 0.0) << s.task;
    if (s.device) {
      ++device_spans;
      EXPECT_EQ(s.track.rfind("stream ", 0), 0U) << s.task << " on " << s.track;
    }
  }
  EXPECT_GE(device_spans, 2U * 5U + 1U) << "five device tasks a run, and the copy";

  for (const std::uint64_t run : {2U, 3U}) {
    for (const char* name : {"fill a", "fill b", "spin a", "add", "download"}) {
      const auto* s = find_span(log, name, run);
      ASSERT_NE(s, nullptr) << name << " of run " << run;
      EXPECT_TRUE(s->device) << name;
    }
    const auto* look = find_span(log, "look", run);
    ASSERT_NE(look, nullptr);
    EXPECT_FALSE(look->device);
    EXPECT_EQ(look->track.rfind("host worker ", 0), 0U) << look->track;
    // Dependencies hold on the device clock. (A host task after the device
    // work it reads is not compared: the two clocks are tied only to within
    // the few microseconds it took to wait for the log's base event.)
    const auto* spin = find_span(log, "spin a", run);
    const auto* add = find_span(log, "add", run);
    const auto* download = find_span(log, "download", run);
    EXPECT_GE(add->start_us, end_of(*spin) - kEventResolutionUs);
    EXPECT_GE(download->start_us, end_of(*add) - kEventResolutionUs);
  }
  // The second run follows the first (same data).
  EXPECT_GE(find_span(log, "fill a", 3)->start_us,
            end_of(*find_span(log, "download", 2)) - kEventResolutionUs);

  const auto* copy = find_span(log, "Runtime::copy", 4);
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(copy->device);
  const auto* staged = find_span(log, "Runtime::copy", 5);
  ASSERT_NE(staged, nullptr);
  EXPECT_FALSE(staged->device);
  EXPECT_EQ(staged->track, "staged copies");

  const double busy = loom::device_busy_fraction(log, 0, log.duration_us);
  EXPECT_GT(busy, 0.0);
  EXPECT_LE(busy, 1.0);

  const std::string path = ::testing::TempDir() + "loom_activity_gpu.json";
  EXPECT_NO_THROW(loom::write_chrome_trace(log, path));
  std::remove(path.c_str());
}

TEST(ActivityLogGpu, CompiledSegmentsAreDeviceSpans) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({1 << 16});
  auto y = rt.tensor<float>({1 << 16});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1), {.name = "fill"});
  g.add(loom::ops::scale_copy(x, y, 2), {.name = "scale"});
  g.add(loom::testing::spin(y, 100), {.name = "spin"});
  const loom::Executable exe = rt.compile(g);
  ASSERT_EQ(exe.segments(), 1U);
  rt.start_activity_log();
  for (int i = 0; i < 3; ++i) exe.run();
  const loom::ActivityLog log = rt.stop_activity_log();  // waits for the replays
  ASSERT_EQ(log.spans.size(), 3U);
  for (const auto& s : log.spans) {
    EXPECT_TRUE(s.device);
    EXPECT_EQ(s.task.rfind("segment 0 [fill .. spin", 0), 0U) << s.task;
    EXPECT_GE(s.start_us, 0.0);
    EXPECT_LE(end_of(s), log.duration_us);
  }
  // Replays of one executable follow each other.
  for (std::size_t i = 1; i < log.spans.size(); ++i) {
    EXPECT_GE(log.spans[i].start_us, end_of(log.spans[i - 1]) - kEventResolutionUs);
  }
  const double busy = loom::device_busy_fraction(log, 0, log.duration_us);
  EXPECT_GT(busy, 0.0);
  EXPECT_LE(busy, 1.0);
}

}  // namespace
