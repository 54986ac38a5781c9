// loom/cute.hpp: a loom tensor as a CuTe tensor. Its layout carries the
// tensor's shape and strides (a transposed, sliced view included), rank and
// dtype are checked, and a user's CuTe kernel over a strided view, run as a
// kernel task, writes exactly the elements the view names.
#include <loom/cute.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/kernel_task.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "support/cpu.hpp"
#include "support/gpu.hpp"

#include <cute/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using loom::test::cpu;

// y(i) = a * x(i) + 1 in the tensors' shared logical order.
template <class TX, class TY>
__global__ void axpb(TX x, TY y, float a) {
  const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < cute::size(x)) y(idx) = a * x(idx) + 1.0F;
}

TEST(CuteTensor, CarriesShapeAndStridesOfAView) {
  loom::Runtime rt(cpu(1));
  auto t = rt.tensor<float>({6, 10});
  auto view = t.slice(1, 1, 9, 2).transpose(0, 1);  // 4 x 6, strides (2, 10), offset 1
  auto c = loom::cute_tensor<float, 2>(view);
  EXPECT_EQ(cute::get<0>(cute::shape(c)), 4);
  EXPECT_EQ(cute::get<1>(cute::shape(c)), 6);
  EXPECT_EQ(cute::get<0>(cute::stride(c)), 2);
  EXPECT_EQ(cute::get<1>(cute::stride(c)), 10);
  for (int i = 0; i < 60; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  // view(i, j) = t(j, 1 + 2 i) = 10 j + 1 + 2 i
  EXPECT_EQ(c(3, 5), 57.0F);
  EXPECT_EQ(c(0, 0), 1.0F);
}

TEST(CuteTensor, RejectsAnotherRankOrDtype) {
  loom::Runtime rt(cpu(1));
  auto t = rt.tensor<float>({2, 3, 4});
  // (Each call in a lambda: the template arguments' comma would split a macro argument.)
  const auto rank2 = [&] { (void)loom::cute_tensor<float, 2>(t); };
  const auto as_int = [&] { (void)loom::cute_tensor<std::int32_t, 3>(t); };
  const auto undefined = [] { (void)loom::cute_tensor<float, 1>(loom::Tensor()); };
  EXPECT_THROW(rank2(), loom::InvalidArgument);
  EXPECT_THROW(as_int(), loom::InvalidArgument);
  EXPECT_THROW(undefined(), loom::InvalidArgument);
  auto h = rt.tensor<loom::half>({8});
  const auto as_half = [&] { (void)loom::cute_tensor<cute::half_t, 1>(h); };
  const auto read_only = [&] { (void)loom::cute_tensor<const float, 3>(t); };
  EXPECT_NO_THROW(as_half());
  EXPECT_NO_THROW(read_only());
}

TEST(CuteTensorGpu, AKernelTaskWritesThroughAStridedView) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  const std::int64_t rows = 37, cols = 91;
  auto host_x = rt.tensor<float>({rows, cols}, loom::Memory::pageable);
  const auto values = loom::test::random_floats(static_cast<std::size_t>(rows * cols), rng);
  std::copy(values.begin(), values.end(), host_x.data_as<float>());
  auto x = rt.tensor<float>({rows, cols});
  // y holds every other column of a wider matrix, transposed: y_view(i, j)
  // is wide(j, 2 i + 1); the other columns must stay poisoned.
  auto wide = rt.tensor<float>({cols, 2 * rows + 1});
  auto host_wide = rt.tensor<float>({cols, 2 * rows + 1}, loom::Memory::pageable);
  for (std::int64_t i = 0; i < host_wide.numel(); ++i) {
    host_wide.data_as<float>()[i] = std::nanf("");
  }
  auto y_view = wide.slice(1, 1, 2 * rows + 1, 2).transpose(0, 1);  // rows x cols
  loom::Graph g;
  g.copy(host_x, x);
  g.copy(host_wide, wide);
  g.add(loom::kernel_task("axpb", {x}, {wide}, [=](loom::KernelContext& k) {
    auto cx = loom::cute_tensor<const float, 2>(x);
    auto cy = loom::cute_tensor<float, 2>(y_view);
    const auto blocks = static_cast<unsigned>((rows * cols + 127) / 128);
    loom::launch(k, axpb<decltype(cx), decltype(cy)>, dim3(blocks), dim3(128), 0, cx, cy, 3.0F);
  }));
  auto out = rt.tensor<float>({cols, 2 * rows + 1}, loom::Memory::pageable);
  g.copy(wide, out);
  rt.submit(g).wait();
  const float* o = out.data_as<float>();
  int bad = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    for (std::int64_t c = 0; c < 2 * rows + 1; ++c) {
      const float got = o[j * (2 * rows + 1) + c];
      if (c % 2 == 1) {
        const std::int64_t i = (c - 1) / 2;
        const float expected = 3.0F * values[static_cast<std::size_t>(i * cols + j)] + 1.0F;
        if (!(std::fabs(got - expected) <= 1e-6F * (1.0F + std::fabs(expected)))) ++bad;
      } else if (!std::isnan(got)) {
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
