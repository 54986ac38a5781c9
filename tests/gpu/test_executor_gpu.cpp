// The executor on the CUDA backend: independent kernels overlap, dependent
// in-place kernels never race, host tasks wait for device work, errors and
// bad memory spaces name their task, the steady state creates no stream or
// event, and device tasks appear on stream tracks in the trace.
#include "support/gpu.hpp"
#include "testing/spin_op.hpp"

#include "cuda/object_counts.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
using loom::Memory;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TEST(ExecutorGpu, IndependentKernelsOverlapAndChainsDoNot) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_EQ(rt.backend(), loom::Backend::cuda);
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 4; ++i) ts.push_back(rt.tensor<float>({4}));
  loom::Graph warm;
  for (auto& t : ts) warm.add(loom::ops::fill(t, 0));
  rt.submit(warm).wait();

  loom::Graph wide;
  for (auto& t : ts) wide.add(loom::testing::spin(t, 1000));
  auto t0 = Clock::now();
  rt.submit(wide).wait();
  const double wide_ms = ms_since(t0);

  loom::Graph chain;
  for (int i = 0; i < 4; ++i) chain.add(loom::testing::spin(ts[0], 1000));
  t0 = Clock::now();
  rt.submit(chain).wait();
  const double chain_ms = ms_since(t0);
  std::printf("4 x 1 ms kernels: independent %.2f ms, chained %.2f ms\n", wide_ms, chain_ms);
  EXPECT_GE(chain_ms, 4.0) << "a chain must run one kernel after another";
  EXPECT_LT(wide_ms, 0.6 * chain_ms) << "independent kernels did not overlap";
  auto host = rt.tensor<float>({4}, Memory::pinned);
  rt.copy(ts[0], host).wait();
  EXPECT_EQ(host.data_as<float>()[0], 5.0F) << "1 (wide) + 4 (chain) increments";
}

TEST(ExecutorGpu, RandomDagOfInPlaceKernelsMatchesSequentialExecution) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr int kTensors = 12;
  constexpr int kTasks = 2000;
  constexpr std::int64_t kN = 4099;
  auto rng = loom::test::random_engine();
  std::vector<loom::Tensor> dev;
  std::vector<loom::Tensor> host;
  for (int i = 0; i < kTensors; ++i) {
    host.push_back(rt.tensor<float>({kN}, Memory::pinned));
    const auto values = loom::test::random_floats(kN, rng);
    std::memcpy(host.back().data(), values.data(), values.size() * sizeof(float));
    dev.push_back(rt.tensor<float>({kN}));
    rt.copy(host.back(), dev.back()).wait();
  }
  loom::Graph g;
  std::vector<loom::OpPtr> sequential;
  std::uniform_int_distribution<int> pick(0, kTensors - 1);
  for (int i = 0; i < kTasks; ++i) {
    const int a = pick(rng);
    const int b = pick(rng);
    const int c = pick(rng);
    const float alpha = 0.75F + static_cast<float>(i % 5) * 0.125F;
    if (rng() % 2 == 0) {
      g.add(loom::ops::vector_add(dev[a], dev[b], dev[c]));
      sequential.push_back(loom::ops::vector_add(host[a], host[b], host[c]));
    } else {
      g.add(loom::ops::scale_copy(dev[a], dev[c], alpha));
      sequential.push_back(loom::ops::scale_copy(host[a], host[c], alpha));
    }
  }
  rt.submit(g).wait();
  for (const auto& op : sequential) op->run_cpu();
  for (int i = 0; i < kTensors; ++i) {
    auto back = rt.tensor<float>({kN}, Memory::pinned);
    rt.copy(dev[i], back).wait();
    ASSERT_EQ(std::memcmp(back.data(), host[i].data(), back.nbytes()), 0) << "tensor " << i;
  }
}

TEST(ExecutorGpu, HostTasksRunOnlyAfterTheirDeviceWork) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto dev = rt.tensor<float>({1 << 20});
  auto pinned = rt.tensor<float>({1 << 20}, Memory::pinned);
  std::memset(pinned.data(), 0, pinned.nbytes());
  float seen_first = -1;
  float seen_last = -1;
  loom::Graph g;
  g.add(loom::ops::fill(dev, 7.0F));
  g.add(loom::testing::spin(dev, 2000));  // dev[0] becomes 8 after 2 ms
  g.copy(dev, pinned);
  g.host("check",
         [&] {
           seen_first = pinned.data_as<float>()[0];
           seen_last = pinned.data_as<float>()[(1 << 20) - 1];
         },
         {pinned});
  rt.submit(g).wait();
  EXPECT_EQ(seen_first, 8.0F);
  EXPECT_EQ(seen_last, 7.0F);
}

TEST(ExecutorGpu, PageableCopiesAreTasksToo) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  const auto values = loom::test::random_floats(3 << 20, rng);
  std::vector<float> in = values;
  std::vector<float> out(values.size(), 0.0F);
  const loom::Shape shape{static_cast<std::int64_t>(values.size())};
  auto src = rt.provide(in.data(), loom::DType::f32, shape, Memory::pageable);
  auto dst = rt.provide(out.data(), loom::DType::f32, shape, Memory::pageable);
  auto dev = rt.tensor<float>(shape);
  loom::Graph g;
  g.copy(src, dev);
  g.add(loom::ops::scale_copy(dev, dev, 2.0F));
  g.copy(dev, dst);
  rt.submit(g).wait();
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(out[i], 2.0F * values[i]) << i;
}

TEST(ExecutorGpu, OpsOnTheWrongMemorySpaceAreRejectedBeforeLaunch) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto host = rt.tensor<float>({16}, Memory::pageable);
  loom::Graph g;
  g.add(loom::ops::fill(host, 1.0F), {.name = "fill on host"});
  try {
    (void)rt.submit(g);
    FAIL() << "expected InvalidArgument";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "fill on host");
    EXPECT_NE(std::string(e.what()).find("device 0"), std::string::npos) << e.what();
  }
}

class ThrowingOp final : public loom::Op {
 public:
  explicit ThrowingOp(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "throwing"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override {}
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    // A real CUDA failure: writing through a null device pointer is refused.
    LOOM_CUDA_CHECK(cudaMemsetAsync(nullptr, 0, 16, loom::cuda_stream(ctx)));
  }

 private:
  loom::Tensor t_;
};

TEST(ExecutorGpu, ADeviceFailureNamesItsTaskAndSparesIndependentWork) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto a = rt.tensor<float>({64});
  auto b = rt.tensor<float>({64});
  loom::Graph g;
  g.add(std::make_shared<ThrowingOp>(a), {.name = "broken kernel"});
  g.add(loom::ops::scale_copy(a, a, 2.0F), {.name = "dependant"});
  g.add(loom::ops::fill(b, 3.0F), {.name = "independent"});
  auto run = rt.submit(g);
  try {
    run.wait();
    FAIL();
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "broken kernel");
  }
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::failed);
  EXPECT_EQ(report[1].status, loom::TaskStatus::cancelled);
  EXPECT_EQ(report[2].status, loom::TaskStatus::completed);
  loom::Graph next;
  next.add(loom::ops::fill(a, 1.0F));
  EXPECT_NO_THROW(rt.submit(next).wait()) << "the runtime is usable afterwards";
}

// The planned tail of a stream is cancelled: the work launched before it on
// that stream must still be seen to finish, and the run must end.
TEST(ExecutorGpu, RunsEndWhenAStreamTailIsCancelled) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({4});
  loom::Graph g;
  auto x = g.add(loom::testing::spin(t, 200), {.name = "x"});
  auto h = g.host("h", [] { throw std::runtime_error("host failure"); });
  auto y = g.add(loom::testing::spin(t, 200), {.name = "y"});
  g.precede(h, y);
  (void)x;
  auto run = rt.submit(g);
  ASSERT_TRUE(run.wait_for(std::chrono::seconds(10))) << "the run never ended";
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::completed);
  EXPECT_EQ(report[1].status, loom::TaskStatus::failed);
  EXPECT_EQ(report[2].status, loom::TaskStatus::cancelled);
}

// A device task behind a host task shares a stream with later independent
// kernels: they must not overtake it on its stream, and the run must end.
TEST(ExecutorGpu, DeviceTasksKeepPlanOrderOnTheirStream) {
  LOOM_REQUIRE_GPU();
  loom::RuntimeOptions options;
  options.streams_per_priority = 2;
  loom::Runtime rt(options);
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 6; ++i) ts.push_back(rt.tensor<float>({4}));
  loom::Graph g;
  auto h = g.host("slow host", [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  auto x = g.add(loom::ops::fill(ts[0], 1.0F), {.name = "after host"});
  g.precede(h, x);
  for (int i = 1; i < 6; ++i) g.add(loom::ops::fill(ts[static_cast<std::size_t>(i)], 2.0F));
  for (int i = 0; i < 20; ++i) {
    auto run = rt.submit(g);
    ASSERT_TRUE(run.wait_for(std::chrono::seconds(10))) << "the run never ended";
    EXPECT_NO_THROW(run.wait());
  }
}

TEST(ExecutorGpu, CancelWhileKernelsRunEndsTheRun) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({4});
  loom::Graph g;
  for (int i = 0; i < 50; ++i) g.add(loom::testing::spin(t, 1000));
  auto gate = g.host("gate", [] {}, {t});
  for (int i = 0; i < 10; ++i) {
    auto later = g.add(loom::testing::spin(t, 1000));
    g.precede(gate, later);
  }
  auto run = rt.submit(g);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  run.cancel();
  ASSERT_TRUE(run.wait_for(std::chrono::seconds(20)));
  EXPECT_THROW(run.wait(), loom::Cancelled);
  const auto report = run.report();
  EXPECT_EQ(report.back().status, loom::TaskStatus::cancelled);
}

TEST(ExecutorGpu, SteadyStateCreatesNoStreamOrEvent) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 6; ++i) ts.push_back(rt.tensor<float>({1024}));
  loom::Graph g;
  for (int i = 0; i < 6; ++i) g.add(loom::ops::fill(ts[static_cast<std::size_t>(i)], 1.0F));
  for (int i = 0; i < 5; ++i) {
    g.add(loom::ops::vector_add(ts[static_cast<std::size_t>(i)],
                                ts[static_cast<std::size_t>(i + 1)],
                                ts[static_cast<std::size_t>(i)]));
  }
  g.host("observe", [] {}, {ts[0]});
  for (int i = 0; i < 3; ++i) rt.submit(g).wait();
  const auto before = loom::detail::cuda_object_counts();
  for (int i = 0; i < 50; ++i) rt.submit(g).wait();
  const auto after = loom::detail::cuda_object_counts();
  EXPECT_EQ(after.streams_created, before.streams_created);
  EXPECT_EQ(after.events_created, before.events_created);
}

TEST(ExecutorGpu, TraceHasStreamTracksWithDeviceTimes) {
  LOOM_REQUIRE_GPU();
  loom::RuntimeOptions options;
  options.trace_path = ::testing::TempDir() + "loom_gpu_trace.json";
  loom::Runtime rt(options);
  auto a = rt.tensor<float>({4});
  auto b = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::testing::spin(a, 500), {.name = "spin a"});
  g.add(loom::testing::spin(b, 500), {.name = "spin b"});
  rt.submit(g).wait();
  std::ifstream in(::testing::TempDir() + "loom_gpu_trace.1.json");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  EXPECT_NE(json.find("\"spin a\""), std::string::npos);
  EXPECT_NE(json.find("\"spin b\""), std::string::npos);
  EXPECT_NE(json.find("stream 4 (normal)"), std::string::npos) << json.substr(0, 600);
  // A 500 us spin lasts about 500 us on the device timeline.
  const auto at = json.find("\"spin a\"");
  const auto dur = json.find("\"dur\":", at);
  ASSERT_NE(dur, std::string::npos);
  const double us = std::stod(json.substr(dur + 6));
  EXPECT_GT(us, 400.0) << json.substr(at, 200);
}

}  // namespace
