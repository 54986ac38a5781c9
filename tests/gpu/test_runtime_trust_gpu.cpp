// The runtime's promises on the CUDA backend: ordering follows the data
// across runs and copies (through events, on the device); every op launch is
// checked and fails its own task; work a failing task left on its stream is
// still watched; a kernel fault poisons the runtime, which then fails fast
// and shuts down cleanly (in a child process); waiting on the scheduling
// thread is refused; finished copies hold no tensor and their completions
// outlive the runtime.
#include "support/empty_tensors.hpp"
#include "support/gpu.hpp"
#include "support/idle_cpu.hpp"
#include "testing/spin_op.hpp"

#include "testing/spin.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <unistd.h>

namespace loom::test {
void launch_with_too_many_threads(void* stream);
}

namespace {

using Clock = std::chrono::steady_clock;
using loom::Memory;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

float first_element(loom::Runtime& rt, const loom::Tensor& t) {
  auto host = rt.tensor<float>({t.numel()}, Memory::pinned);
  rt.copy(t, host).wait();
  return host.data_as<float>()[0];
}

class BadConfigOp final : public loom::Op {
 public:
  explicit BadConfigOp(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "oversized_block"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override {}
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    loom::test::launch_with_too_many_threads(ctx.native_stream());
  }

 private:
  loom::Tensor t_;
};

TEST(TrustGpu, ABadLaunchFailsItsOwnTaskNotTheNext) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto a = rt.tensor<float>({64});
  auto b = rt.tensor<float>({64});
  loom::Graph g;
  g.add(std::make_shared<BadConfigOp>(a), {.name = "bad launch"});
  g.add(loom::ops::scale_copy(a, a, 2.0F), {.name = "next"});
  g.add(loom::ops::fill(b, 3.0F), {.name = "independent"});
  auto run = rt.submit(g);
  try {
    run.wait();
    FAIL() << "a launch with 4096 threads a block was reported completed";
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "bad launch") << e.what();
  }
  const auto report = run.report();
  EXPECT_EQ(report[0].status, loom::TaskStatus::failed);
  EXPECT_EQ(report[1].status, loom::TaskStatus::cancelled) << report[1].error;
  EXPECT_EQ(report[2].status, loom::TaskStatus::completed);
  loom::Graph next;
  next.add(loom::ops::fill(a, 1.0F), {.name = "after"});
  EXPECT_NO_THROW(rt.submit(next).wait()) << "no leftover error is blamed on later work";
}

// Enqueues a long kernel, then throws: the run must not end (and free its
// memory) before that kernel has finished.
class EnqueueThenThrowOp final : public loom::Op {
 public:
  explicit EnqueueThenThrowOp(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "half_done"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override {}
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    loom::kernels::spin(t_.data_as<float>(), 50000, loom::StreamView(loom::cuda_stream(ctx)));
    throw std::runtime_error("second launch refused");
  }

 private:
  loom::Tensor t_;
};

TEST(TrustGpu, WorkLeftByAFailingTaskIsWatchedToItsEnd) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({4});
  loom::Graph warm;  // the spin kernel's module loads before the timing
  warm.add(loom::testing::spin(t, 1));
  rt.submit(warm).wait();
  loom::Graph g;
  g.add(std::make_shared<EnqueueThenThrowOp>(t), {.name = "half"});
  const auto t0 = Clock::now();
  auto run = rt.submit(g);
  EXPECT_THROW(run.wait(), loom::Error);
  const double ms = ms_since(t0);
  EXPECT_GE(ms, 45.0) << "the run ended while the failed task's kernel still ran";
}

TEST(TrustGpu, CopiesFollowTheRunsThatWriteTheirSource) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({4});
  loom::Graph init;
  init.add(loom::ops::fill(x, 0.0F));
  rt.submit(init).wait();
  loom::Graph g;
  g.add(loom::testing::spin(x, 30000));  // x[0] += 1 after 30 ms
  auto host = rt.tensor<float>({4}, Memory::pinned);
  host.data_as<float>()[0] = -1;
  (void)rt.submit(g);
  rt.copy(x, host).wait();  // issued after the submit, without waiting for it
  EXPECT_EQ(host.data_as<float>()[0], 1.0F) << "the copy overtook the run that writes x";
}

TEST(TrustGpu, RunsFollowEarlierRunsAcrossStreams) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  auto z = rt.tensor<float>({4});
  for (int round = 0; round < 5; ++round) {
    loom::Graph init;
    init.add(loom::ops::fill(x, 0.0F));
    init.add(loom::ops::fill(y, 0.0F));
    rt.submit(init).wait();
    loom::Graph a;  // two independent kernels: two streams
    a.add(loom::testing::spin(x, 500));
    a.add(loom::testing::spin(y, 20000));
    loom::Graph b;  // one stream, which must wait for both of a's
    b.add(loom::ops::vector_add(x, y, z));
    (void)rt.submit(a);
    rt.submit(b).wait();
    EXPECT_EQ(first_element(rt, z), 2.0F) << "round " << round;
  }
  // An in-place graph submitted again and again without waiting.
  loom::Graph init;
  init.add(loom::ops::fill(x, 1.0F));
  rt.submit(init).wait();
  loom::Graph twice;
  twice.add(loom::ops::scale_copy(x, x, 2.0F));
  for (int i = 0; i < 20; ++i) (void)rt.submit(twice);
  rt.synchronize();
  EXPECT_EQ(first_element(rt, x), 1048576.0F);
}

TEST(TrustGpu, RunsOverDisjointDataOverlap) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  loom::Graph gx, gy;
  gx.add(loom::testing::spin(x, 20000));
  gy.add(loom::testing::spin(y, 20000));
  rt.submit(gx).wait();  // warm-up
  const auto t0 = Clock::now();
  auto r1 = rt.submit(gx);
  auto r2 = rt.submit(gy);
  r1.wait();
  r2.wait();
  const double ms = ms_since(t0);
  std::printf("two 20 ms kernels of independent runs: %.1f ms\n", ms);
  EXPECT_LT(ms, 35.0) << "runs over disjoint data were serialized";
}

TEST(TrustGpu, AFinishedStagedCopyHoldsNoTensor) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto dev = rt.tensor<float>({1 << 20});
  {
    loom::Graph g;  // a graph holds its tensors: let it go first
    g.add(loom::ops::fill(dev, 4.0F));
    rt.submit(g).wait();
  }
  auto host = rt.tensor<float>({1 << 20}, Memory::pageable);
  rt.copy(dev, host).wait();
  EXPECT_EQ(host.data_as<float>()[12345], 4.0F);
  EXPECT_NO_THROW((void)dev.take()) << "a finished staged copy still holds its source";
}

TEST(TrustGpu, ACompletionOutlivesItsRuntime) {
  LOOM_REQUIRE_GPU();
  loom::Completion c;
  {
    loom::Runtime rt;
    auto pinned = rt.tensor<float>({1 << 16}, Memory::pinned);
    auto dev = rt.tensor<float>({1 << 16});
    c = rt.copy(pinned, dev);
  }
  EXPECT_TRUE(c.ready());
  EXPECT_NO_THROW(c.wait());
}

class WaitingOp final : public loom::Op {
 public:
  WaitingOp(loom::Runtime& rt, loom::Tensor t) : rt_(rt), t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "waits_inside"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override {}
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext&) const override {
    loom::Graph inner;
    inner.add(loom::ops::fill(rt_.tensor<float>({4}), 1.0F));
    rt_.submit(inner).wait();
  }

 private:
  loom::Runtime& rt_;
  loom::Tensor t_;
};

TEST(TrustGpu, WaitingOnTheSchedulingThreadIsRefusedAtOnce) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  loom::Graph g;
  g.add(std::make_shared<WaitingOp>(rt, rt.tensor<float>({4})), {.name = "impatient"});
  auto run = rt.submit(g);
  ASSERT_TRUE(run.wait_for(std::chrono::seconds(10))) << "deadlocked";
  try {
    run.wait();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "impatient");
  }
}

// In the child: fault a kernel (an illegal address), then check that the
// runtime is poisoned and shuts down. Exits 0 when every promise held.
[[noreturn]] void poisoned_runtime_child() {
  alarm(120);  // a hang in here fails the test (SIGALRM) instead of hanging it
  int step = 0;
  const auto expect = [&](bool ok, const char* what) {
    ++step;
    if (!ok) {
      std::fprintf(stderr, "poisoned runtime: step %d failed: %s\n", step, what);
      std::fflush(stderr);
      std::_Exit(10 + step);
    }
  };
  {
    loom::Tensor survivor;
    {
      loom::Runtime rt;
      survivor = rt.tensor<float>({1024});
      auto pinned = rt.tensor<float>({1024}, Memory::pinned);
      auto bogus = rt.provide(reinterpret_cast<void*>(std::uintptr_t{0x10}), loom::DType::f32, {4},
                              Memory::on_device(0));
      loom::Graph g;
      g.add(loom::testing::spin(bogus, 1), {.name = "faulty kernel"});
      auto run = rt.submit(g);
      std::string original;
      try {
        run.wait();
        expect(false, "the faulting run succeeded");
      } catch (const loom::CudaError& e) {
        expect(e.task() == "faulty kernel", "the fault names its task");
        original = e.what();
      }
      const auto same_error = [&](const std::exception& e) { return original == e.what(); };
      loom::Graph later;
      later.add(loom::ops::fill(survivor, 1.0F));
      try {
        (void)rt.submit(later);
        expect(false, "submit after the fault was accepted");
      } catch (const loom::CudaError& e) {
        expect(same_error(e), "submit fails with the original error");
      }
      try {
        (void)rt.copy(survivor, pinned);
        expect(false, "copy after the fault was accepted");
      } catch (const loom::CudaError& e) {
        expect(same_error(e), "copy fails with the original error");
      }
      try {
        (void)rt.tensor<float>({16});
        expect(false, "allocation after the fault was accepted");
      } catch (const loom::CudaError& e) {
        expect(same_error(e), "allocation fails with the original error");
      }
    }  // the runtime goes; `survivor` outlives it
    std::fprintf(stderr, "runtime destroyed\n");
  }  // and now the survivor
  std::fprintf(stderr, "poisoned runtime: all promises held\n");
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(TrustGpu, AKernelFaultPoisonsTheRuntimeWhichStillShutsDownCleanly) {
  LOOM_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(poisoned_runtime_child(), ::testing::ExitedWithCode(0), "all promises held");
}

// The README's promise for tensors with no elements holds on the GPU too:
// the launchers return before a kernel with nothing to do, and each op does
// what it defines (the same checks as the CPU backend's).
TEST(EmptyTensorsGpu, EveryOpTakesThemAndDoesWhatItDefines) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_TRUE(rt.has_gpu());
  loom::test::expect_empty_tensors_work(rt);
}

// The README: loom's threads spin about 2 ms after device work's last
// progress, then sleep, "and an idle runtime takes next to no CPU time":
// after eager runs and compiled replays. One thread left spinning would take
// a whole core: the bound is a quarter of one.
TEST(TrustGpu, AnIdleRuntimeTakesNextToNoCpuTimeAfterDeviceWork) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::testing::spin(x, 200));
  const auto exe = rt.compile(g);
  for (int i = 0; i < 10; ++i) {
    rt.submit(g).wait();
    exe.run().wait();
  }
  exe.run_n(5).wait();
  const double share = loom::test::idle_cpu_share();
  EXPECT_LT(share, 0.25) << "an idle runtime took " << share << " of a core";
}

}  // namespace
