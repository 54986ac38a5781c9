// Kernel tasks on the GPU: a user's saxpy through loom::launch matches its
// CPU reference on random input; scratch memory works and is ordered with
// the task; the cached properties are the device's; a bad launch fails its
// own task by name; a kernel task costs what an op task does (printed).
#include "support/gpu.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/kernel_task.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <cstdio>
#include <cstring>

namespace {

__global__ void saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void scale_into(int n, float a, const float* x, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}

__global__ void nothing() {}

std::vector<float> download(loom::Runtime& rt, const loom::Tensor& t) {
  auto host = rt.tensor<float>({t.numel()}, loom::Memory::pinned);
  rt.copy(t, host).wait();
  return std::vector<float>(host.data_as<float>(), host.data_as<float>() + t.numel());
}

loom::Tensor upload(loom::Runtime& rt, const std::vector<float>& v) {
  auto host = rt.tensor<float>({static_cast<std::int64_t>(v.size())}, loom::Memory::pinned);
  std::memcpy(host.data(), v.data(), v.size() * sizeof(float));
  auto dev = rt.tensor<float>({static_cast<std::int64_t>(v.size())});
  rt.copy(host, dev).wait();
  return dev;
}

TEST(KernelTaskGpu, SaxpyMatchesTheReferenceAtAwkwardSizes) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  for (int n : {1, 31, 4097, 1000003}) {
    const auto hx = loom::test::random_floats(static_cast<std::size_t>(n), rng);
    const auto hy = loom::test::random_floats(static_cast<std::size_t>(n), rng);
    auto x = upload(rt, hx);
    auto y = upload(rt, hy);
    loom::Graph g;
    g.add(loom::kernel_task("saxpy", {x, y}, {y}, [=](loom::KernelContext& k) {
      loom::launch(k, saxpy, dim3((n + 255) / 256), dim3(256), 0, n, 1.5F, x.data_as<float>(),
                   y.data_as<float>());
    }));
    rt.submit(g).wait();
    const auto got = download(rt, y);
    for (int i = 0; i < n; ++i) {
      const float want = 1.5F * hx[static_cast<std::size_t>(i)] + hy[static_cast<std::size_t>(i)];
      ASSERT_NEAR(got[static_cast<std::size_t>(i)], want, 1e-6F) << "n " << n << " at " << i;
    }
  }
}

TEST(KernelTaskGpu, WorkspaceAndPropertiesAreThere) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const int n = 1 << 16;
  auto rng = loom::test::random_engine();
  const auto hx = loom::test::random_floats(static_cast<std::size_t>(n), rng);
  auto x = upload(rt, hx);
  auto y = rt.tensor<float>({n});
  int sms = 0;
  loom::Graph g;
  g.add(loom::kernel_task("two passes", {x}, {y}, [=, &sms](loom::KernelContext& k) {
    sms = k.properties().sm_count;
    auto* scratch = static_cast<float*>(k.workspace(n * sizeof(float)));
    const dim3 grid((n + 255) / 256);
    loom::launch(k, scale_into, grid, dim3(256), 0, n, 2.0F, x.data_as<float>(), scratch);
    loom::launch(k, scale_into, grid, dim3(256), 0, n, 3.0F, scratch, y.data_as<float>());
  }));
  for (int round = 0; round < 3; ++round) rt.submit(g).wait();  // the workspace comes back
  EXPECT_EQ(sms, loom::device_properties(0).sm_count);
  const auto got = download(rt, y);
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(got[static_cast<std::size_t>(i)], 6.0F * hx[static_cast<std::size_t>(i)], 1e-5F);
  }
}

TEST(KernelTaskGpu, ABadLaunchFailsItsTaskByName) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::kernel_task("oversized", {}, {t}, [](loom::KernelContext& k) {
    loom::launch(k, nothing, dim3(1), dim3(4096), 0);
  }));
  g.add(loom::ops::fill(t, 1.0F), {.name = "after"});
  auto run = rt.submit(g);
  try {
    run.wait();
    FAIL() << "a launch of 4096 threads a block succeeded";
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "oversized") << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaLaunchKernelEx"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run.report()[1].status, loom::TaskStatus::cancelled);
}

}  // namespace
