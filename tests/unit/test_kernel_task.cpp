// Kernel tasks and the Op defaults on the CPU backend: the CPU version runs,
// a task without one is rejected at submit naming it, bad arguments are
// refused, and an Op that overrides only what it must compiles and runs.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/kernel_task.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "support/cpu.hpp"

#include <string>

namespace {

using loom::test::cpu;

TEST(KernelTask, RunsItsCpuVersionOnTheCpuBackend) {
  loom::Runtime rt(cpu());
  auto y = rt.tensor<float>({8});
  loom::Graph g;
  g.add(loom::kernel_task(
      "twice", {}, {y}, [](loom::KernelContext&) { FAIL() << "the CUDA launcher ran on the CPU"; },
      [y] {
        for (int i = 0; i < 8; ++i) y.data_as<float>()[i] = 2.0F * static_cast<float>(i);
      }));
  rt.submit(g).wait();
  EXPECT_EQ(y.data_as<float>()[7], 14.0F);
}

TEST(KernelTask, WithoutACpuVersionTheCpuBackendRejectsItAtSubmit) {
  loom::Runtime rt(cpu());
  loom::Graph g;
  g.add(loom::kernel_task("gpu only", {}, {rt.tensor<float>({8})}, [](loom::KernelContext&) {}),
        {.name = "stage 2"});
  try {
    (void)rt.submit(g);
    FAIL() << "a kernel task without a CPU version was accepted by the CPU backend";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "stage 2");
    EXPECT_NE(std::string(e.what()).find("no CPU implementation"), std::string::npos) << e.what();
  }
}

TEST(KernelTask, BadArgumentsAreRefused) {
  loom::Runtime rt(cpu());
  EXPECT_THROW((void)loom::kernel_task("", {}, {}, [](loom::KernelContext&) {}),
               loom::InvalidArgument);
  EXPECT_THROW((void)loom::kernel_task("empty", {}, {}, nullptr), loom::InvalidArgument);
  loom::Graph g;
  g.add(loom::kernel_task(
      "careless", {loom::Tensor()}, {}, [](loom::KernelContext&) {}, [] {}));
  try {
    (void)rt.submit(g);
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "careless");
    EXPECT_NE(std::string(e.what()).find("undefined"), std::string::npos) << e.what();
  }
}

// Only the pure virtuals: validation accepts, there is no CPU version.
class MinimalOp final : public loom::Op {
 public:
  explicit MinimalOp(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "minimal"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void run_cuda(const loom::ExecutionContext&) const override {}

 private:
  loom::Tensor t_;
};

TEST(OpDefaults, AnOpWithOnlyItsPureVirtualsFailsOnTheCpuBackendByName) {
  loom::Runtime rt(cpu());
  loom::Graph g;
  g.add(std::make_shared<MinimalOp>(rt.tensor<float>({4})), {.name = "bare"});
  EXPECT_NO_THROW(g.validate());
  try {
    rt.submit(g).wait();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "bare");
    EXPECT_NE(std::string(e.what()).find("no CPU implementation"), std::string::npos) << e.what();
  }
}

TEST(OpDefaults, WorkspaceOutsideARunningTaskIsRefused) {
  const loom::ExecutionContext ctx(0, nullptr);
  EXPECT_THROW((void)ctx.workspace(64), loom::InvalidArgument);
}

}  // namespace
