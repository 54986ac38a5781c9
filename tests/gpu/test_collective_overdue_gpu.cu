// A collective whose device work waits on other processes (NCCL's kernels
// do) must not hang a run: the scheduling thread asks its op (Op::overdue)
// while the work is in flight, and an op that gives up, having made its
// work end, fails its task with a CommError by name, in bounded time. Here
// a kernel stands for the collective, spinning on a host flag that only the
// op's overdue() raises.
#include "support/gpu.hpp"

#include <loom/collective.hpp>
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

namespace {

__global__ void wait_for_flag(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

int fake_communicator = 0;

class StuckCollective final : public loom::Collective {
 public:
  StuckCollective(loom::Tensor data, int* host_flag, int* device_flag)
      : data_(std::move(data)), host_flag_(host_flag), device_flag_(device_flag) {}
  std::string_view name() const noexcept override { return "stuck_all_reduce"; }
  std::vector<loom::Tensor> reads() const override { return {data_}; }
  std::vector<loom::Tensor> writes() const override { return {data_}; }
  const void* communicator() const noexcept override { return &fake_communicator; }
  bool has_cpu() const noexcept override { return false; }
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    wait_for_flag<<<1, 1, 0, loom::cuda_stream(ctx)>>>(device_flag_);
  }
  std::string overdue(std::chrono::nanoseconds waited) const override {
    ++asked;
    if (waited < std::chrono::milliseconds(300)) return {};
    *reinterpret_cast<volatile int*>(host_flag_) = 1;  // the "abort": the kernel ends
    return "rank 1 never came (test)";
  }
  mutable std::atomic<int> asked{0};

 private:
  loom::Tensor data_;
  int* host_flag_;
  int* device_flag_;
};

// A host int the kernel reads through its mapped device address; freed
// however the test ends.
class MappedFlag {
 public:
  MappedFlag() {
    LOOM_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(int), cudaHostAllocMapped));
    *host_ = 0;
    LOOM_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~MappedFlag() { (void)cudaFreeHost(host_); }
  MappedFlag(const MappedFlag&) = delete;
  MappedFlag& operator=(const MappedFlag&) = delete;
  void set(int v) { *reinterpret_cast<volatile int*>(host_) = v; }
  int* host() const { return host_; }
  int* device() const { return device_; }

 private:
  int* host_ = nullptr;
  int* device_ = nullptr;
};

// A training step's shape: gradients, their all-reduce (stuck), the update.
loom::Graph step_with(const std::shared_ptr<StuckCollective>& stuck, const loom::Tensor& x,
                      const loom::Tensor& y) {
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.0F), {.name = "grads"});
  g.collective(stuck, {.name = "grad all-reduce"});
  g.add(loom::ops::scale_copy(x, y, 0.5F), {.name = "sgd"});
  return g;
}

TEST(CollectiveOverdue, AStuckCollectiveFailsByNameInBoundedTime) {
  LOOM_REQUIRE_GPU();
  MappedFlag flag;
  {
    loom::Runtime rt;
    auto x = rt.tensor<float>({1024});
    auto y = rt.tensor<float>({1024});
    auto stuck = std::make_shared<StuckCollective>(x, flag.host(), flag.device());
    loom::Graph g = step_with(stuck, x, y);
    const auto start = std::chrono::steady_clock::now();
    auto run = rt.submit(g);
    try {
      run.wait();
      FAIL() << "a stuck collective's run succeeded";
    } catch (const loom::CommError& e) {
      EXPECT_EQ(e.task(), "grad all-reduce");
      EXPECT_NE(std::string(e.what()).find("never came"), std::string::npos) << e.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(seconds, 0.3);
    EXPECT_LT(seconds, 10.0) << "bounded: the op gave up after 300 ms";
    EXPECT_GT(stuck->asked.load(), 0);
    // The runtime stays usable.
    loom::Graph next;
    next.add(loom::ops::fill(y, 2.0F));
    EXPECT_NO_THROW(rt.submit(next).wait());
  }
}

// The same inside a compiled graph: the collective is captured into the
// segment's CUDA graph, and the segment is watched as the collective would
// be, counting from the graph's start; under run_n the first replay is the
// stuck one, and the run fails as bounded.
TEST(CollectiveOverdue, AStuckCollectiveInACompiledGraphFailsByNameInBoundedTime) {
  LOOM_REQUIRE_GPU();
  MappedFlag flag;
  {
    loom::Runtime rt;
    auto x = rt.tensor<float>({1024});
    auto y = rt.tensor<float>({1024});
    auto stuck = std::make_shared<StuckCollective>(x, flag.host(), flag.device());
    auto exe = rt.compile(step_with(stuck, x, y));
    ASSERT_EQ(exe.segments(), 1U);
    ASSERT_EQ(exe.captured_tasks(), 3U) << "the collective was not captured";

    // A collective that completes: the replay succeeds.
    flag.set(1);
    EXPECT_NO_THROW(exe.run().wait());

    const auto expect_bounded_failure = [&](const char* what, auto&& start_run) {
      flag.set(0);
      const int asked_before = stuck->asked.load();
      const auto start = std::chrono::steady_clock::now();
      auto run = start_run();
      try {
        run.wait();
        ADD_FAILURE() << what << ": a stuck collective's replay succeeded";
      } catch (const loom::CommError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("never came"), std::string::npos) << what << ": " << message;
        EXPECT_NE(message.find("grad all-reduce"), std::string::npos)
            << what << ": the collective's task is not named: " << message;
        EXPECT_NE(e.task().find("segment"), std::string::npos)
            << what << ": the error is not the graph's task's: " << e.task();
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_GE(seconds, 0.3) << what;
      EXPECT_LT(seconds, 10.0) << what << ": bounded: the op gave up after 300 ms";
      EXPECT_GT(stuck->asked.load(), asked_before) << what;
    };
    expect_bounded_failure("run", [&] { return exe.run(); });
    expect_bounded_failure("run_n", [&] { return exe.run_n(3); });

    // The runtime and the executable stay usable once the work has ended.
    flag.set(1);
    EXPECT_NO_THROW(exe.run().wait());
    loom::Graph next;
    next.add(loom::ops::fill(y, 2.0F));
    EXPECT_NO_THROW(rt.submit(next).wait());
  }
}

}  // namespace
