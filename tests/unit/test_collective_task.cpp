// A collective is an op of a communicator (Op::communicator): its task reads
// and writes tensors like any other, runs on the communication stream, fails
// by name, and compiles only when its backend captures collectives, on every
// backend.
#include "sched/plan.hpp"

#include <loom/collective.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int communicator_a = 0;

// dst = src on the CPU: the smallest collective there is (one rank's
// all-gather), enough to see the task model carry it.
class CopyCollective final : public loom::Collective {
 public:
  CopyCollective(loom::Tensor src, loom::Tensor dst, bool fails = false, bool captures = false)
      : src_(std::move(src)), dst_(std::move(dst)), fails_(fails), captures_(captures) {}
  std::string_view name() const noexcept override { return "one_rank_gather"; }
  std::vector<loom::Tensor> reads() const override { return {src_}; }
  std::vector<loom::Tensor> writes() const override { return {dst_}; }
  void validate() const override {
    // Not a loom error: the graph wraps it, naming the task and its kind.
    if (src_.nbytes() != dst_.nbytes()) throw std::length_error("sizes differ");
  }
  const void* communicator() const noexcept override { return &communicator_a; }
  // As the local and mpi backends: no capture; the nccl backend's do.
  bool capturable() const noexcept override { return captures_; }
  void run_cpu() const override {
    if (fails_) throw std::runtime_error("the peer went away");
    std::memcpy(dst_.data(), src_.data(), src_.nbytes());
  }
  void run_cuda(const loom::ExecutionContext&) const override {
    throw loom::InvalidArgument("not on a device in this test");
  }

 private:
  loom::Tensor src_;
  loom::Tensor dst_;
  bool fails_;
  bool captures_;
};

loom::Runtime cpu_runtime() {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  return loom::Runtime(o);
}

TEST(CollectiveTask, IsAnOpThatRunsOrderedByItsTensors) {
  auto rt = cpu_runtime();
  auto a = rt.tensor<float>({256});
  auto b = rt.tensor<float>({256});
  auto c = rt.tensor<float>({256});
  loom::Graph g;
  const auto fill = g.add(loom::ops::fill(a, 3.0F));
  const auto gather = g.collective(std::make_shared<CopyCollective>(a, b), {.name = "gather"});
  const auto scale = g.add(loom::ops::scale_copy(b, c, 2.0F));
  EXPECT_EQ(g.task(gather).kind, loom::TaskKind::op);
  EXPECT_TRUE(g.has_edge(fill, gather));
  EXPECT_TRUE(g.has_edge(gather, scale));
  rt.submit(g).wait();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(c.data_as<float>()[i], 6.0F);
}

TEST(CollectiveTask, RunsOnTheCommunicationStreamInSubmissionOrder) {
  auto rt = cpu_runtime();
  loom::Graph g;
  std::vector<loom::TaskId> collectives;
  for (int i = 0; i < 3; ++i) {
    g.add(loom::ops::fill(rt.tensor<float>({1 << 20}), 1.0F));
    collectives.push_back(g.collective(
        std::make_shared<CopyCollective>(rt.tensor<float>({64}), rt.tensor<float>({64}))));
  }
  const auto plan = loom::detail::make_plan(
      g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), 2);
  std::vector<std::size_t> position;
  for (auto id : collectives) {
    EXPECT_EQ(plan.tasks[id.index].stream, plan.collective_stream());
    EXPECT_FALSE(plan.tasks[id.index].small) << "a collective's time is not its bytes'";
    position.push_back(static_cast<std::size_t>(
        std::find(plan.order.begin(), plan.order.end(), id.index) - plan.order.begin()));
  }
  EXPECT_TRUE(std::is_sorted(position.begin(), position.end()));
  for (std::size_t t = 0; t < plan.tasks.size(); ++t) {
    if (t % 2 == 0) {
      EXPECT_NE(plan.tasks[t].stream, plan.collective_stream()) << t;
    }
  }
}

TEST(CollectiveTask, AFailureNamesTheTaskAndTheCollective) {
  auto rt = cpu_runtime();
  auto a = rt.tensor<float>({16});
  auto b = rt.tensor<float>({16});
  loom::Graph g;
  g.collective(std::make_shared<CopyCollective>(a, b, true), {.name = "grad all-reduce"});
  try {
    rt.submit(g).wait();
    FAIL() << "the collective's failure was lost";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.task(), "grad all-reduce") << e.what();
    EXPECT_NE(std::string(e.what()).find("collective 'one_rank_gather'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the peer went away"), std::string::npos) << e.what();
  }
}

TEST(CollectiveTask, ValidationAndCompileNameIt) {
  auto rt = cpu_runtime();
  auto a = rt.tensor<float>({16});
  auto b = rt.tensor<float>({8});
  loom::Graph bad;
  bad.collective(std::make_shared<CopyCollective>(a, b), {.name = "mismatch"});
  try {
    rt.submit(bad).wait();
    FAIL() << "a size mismatch was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "mismatch") << e.what();
    EXPECT_NE(std::string(e.what()).find("collective mismatch"), std::string::npos)
        << "named as a collective, not an op: " << e.what();
  }
  auto c = rt.tensor<float>({16});
  loom::Graph g;
  g.collective(std::make_shared<CopyCollective>(a, c), {.name = "step all-reduce"});
  try {
    (void)rt.compile(g);
    FAIL() << "compile accepted a collective";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "step all-reduce") << e.what();
    EXPECT_NE(std::string(e.what()).find("does not capture collectives"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.collective(nullptr), loom::InvalidArgument);
}

TEST(CollectiveTask, ACapturableCollectiveCompilesAndReplays) {
  auto rt = cpu_runtime();
  auto a = rt.tensor<float>({64});
  auto b = rt.tensor<float>({64});
  loom::Graph g;
  g.collective(std::make_shared<CopyCollective>(a, b, false, true), {.name = "gather"});
  auto exe = rt.compile(g);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 64; ++i) a.data_as<float>()[i] = static_cast<float>(round * 100 + i);
    std::fill_n(b.data_as<float>(), 64, -1.0F);
    exe.run().wait();
    for (int i = 0; i < 64; ++i)
      ASSERT_EQ(b.data_as<float>()[i], static_cast<float>(round * 100 + i));
  }
}

}  // namespace
