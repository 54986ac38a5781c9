// Kernel tasks and the Op defaults on the CPU backend: the CPU version runs
// (on every replay of a compiled graph), a task without one is rejected at
// submit naming it, one marked not capturable is refused by compile naming
// it, bad arguments are refused, and an Op that overrides only what it must
// compiles and runs.
#include <loom/error.hpp>
#include <loom/executable.hpp>
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

// A kernel task's own checks (KernelTaskOptions::validate) run at submit and
// at compile, before anything runs: the error names the task, and the graph
// runs nothing.
TEST(KernelTask, ItsValidateHookRefusesABadShapeAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu());
  auto x = rt.tensor<float>({4, 3});
  auto y = rt.tensor<float>({3, 4});
  bool ran = false;
  const auto same_shape = [x, y] {
    if (!(x.shape() == y.shape())) {
      throw loom::InvalidArgument("y must have x's shape " + x.describe() + ", got " +
                                  y.describe());
    }
  };
  loom::Graph g;
  g.add(loom::kernel_task(
            "copy", {x}, {y}, [](loom::KernelContext&) {}, [&ran] { ran = true; },
            {.validate = same_shape}),
        {.name = "layer 1"});
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (attempt == 0) {
        (void)rt.submit(g);
      } else {
        (void)rt.compile(g);
      }
      FAIL() << "a shape the task's validate refuses was accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "layer 1");
      EXPECT_NE(std::string(e.what()).find("y must have x's shape"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(ran);
  // A good shape passes the same hook.
  auto z = rt.tensor<float>({4, 3});
  loom::Graph ok;
  ok.add(loom::kernel_task(
      "copy", {x}, {z}, [](loom::KernelContext&) {}, [&ran] { ran = true; }, {.validate = [x, z] {
        if (!(x.shape() == z.shape())) throw loom::InvalidArgument("shapes differ");
      }}));
  rt.submit(ok).wait();
  EXPECT_TRUE(ran);
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

TEST(KernelTask, CompileRefusesATaskMarkedNotCapturableNamingIt) {
  loom::Runtime rt(cpu());
  auto y = rt.tensor<float>({8});
  int calls = 0;
  loom::Graph g;
  g.add(loom::kernel_task(
            "stamp", {}, {y}, [](loom::KernelContext&) {},
            [y, &calls] { y.data_as<float>()[0] = static_cast<float>(++calls); },
            {.capturable = false}),
        {.name = "stamp the frame"});
  try {
    (void)rt.compile(g);
    FAIL() << "a kernel task marked not capturable was compiled";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "stamp the frame");
    EXPECT_NE(std::string(e.what()).find("cannot be captured"), std::string::npos) << e.what();
  }
  rt.submit(g).wait();  // eagerly it runs as usual
  EXPECT_EQ(y.data_as<float>()[0], 1.0F);
}

TEST(KernelTask, ACompiledTasksCpuVersionRunsOnEveryReplay) {
  loom::Runtime rt(cpu());
  auto y = rt.tensor<float>({8});
  int calls = 0;
  loom::Graph g;
  g.add(loom::kernel_task(
      "count", {}, {y}, [](loom::KernelContext&) {},
      [y, &calls] { y.data_as<float>()[0] = static_cast<float>(++calls); }));
  const loom::Executable exe = rt.compile(g);
  exe.run().wait();
  exe.run().wait();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(y.data_as<float>()[0], 2.0F);
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
