// Softmax on the CPU: the reference against hand-checked rows (large
// magnitudes, -inf entries, a row of -inf only, NaN), bf16 rounding and NaN, the op
// through a graph on the CPU backend (plain, strided rows, in place, bf16),
// and bad inputs rejected at submit naming the task.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "common/convert.hpp"
#include "softmax/softmax.hpp"
#include "softmax/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::kernels::SoftmaxShape;
using loom::test::cpu;
using loom::test::softmax::random_row_data;
using loom::test::softmax::reference;

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SoftmaxReference, HandCheckedRows) {
  const std::vector<float> x = {1, 1, 0, std::log(3.0F), 80, -80, -kInf, 0};
  const auto y = reference(x, 4, 2);
  EXPECT_FLOAT_EQ(y[0], 0.5F);
  EXPECT_FLOAT_EQ(y[1], 0.5F);
  EXPECT_FLOAT_EQ(y[2], 0.25F);
  EXPECT_FLOAT_EQ(y[3], 0.75F);
  EXPECT_FLOAT_EQ(y[4], 1.0F);  // e^-160 vanishes, nothing overflows
  EXPECT_EQ(y[5], 0.0F);
  EXPECT_EQ(y[6], 0.0F);  // -inf contributes nothing
  EXPECT_FLOAT_EQ(y[7], 1.0F);
}

TEST(SoftmaxReference, ARowOfMinusInfinityOrWithANaNIsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-kInf, -kInf, -kInf, 1, nan, 2, 1, kInf, 2, 5, 6, 7};
  const auto y = reference(x, 4, 3);
  for (int j = 0; j < 9; ++j) EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(j)])) << j;
  float sum = 0;
  for (int j = 9; j < 12; ++j) {
    EXPECT_FALSE(std::isnan(y[static_cast<std::size_t>(j)]));
    sum += y[static_cast<std::size_t>(j)];
  }
  EXPECT_NEAR(sum, 1.0F, 1e-6F);
}

// bf16 rows: the output rounded by common/convert.hpp (to nearest even), and
// a NaN row stored as its canonical NaN, 0x7FFF, as the GPU stores it (the
// kernel once wrote 0x7FC0 there).
TEST(SoftmaxReference, Bf16RoundsAsTheSharedConversionAndNaNIsCanonical) {
  using loom::kernels::bf16_bits_to_f32;
  using loom::kernels::f32_to_bf16_bits;
  const float values[] = {-kInf, -kInf, 1, std::numeric_limits<float>::quiet_NaN(), 0, 1};
  std::vector<std::uint16_t> x;
  for (float v : values) x.push_back(f32_to_bf16_bits(v));
  std::vector<std::uint16_t> y(x.size(), 0);
  loom::kernels::softmax_reference(x.data(), y.data(), loom::DType::bf16, SoftmaxShape{3, 2, 2, 2});
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[static_cast<std::size_t>(j)], 0x7FFF) << j;
  const double e = std::exp(1.0);
  EXPECT_EQ(y[4], f32_to_bf16_bits(static_cast<float>(1.0 / (1.0 + e))));
  EXPECT_EQ(y[5], f32_to_bf16_bits(static_cast<float>(e / (1.0 + e))));
  EXPECT_NEAR(bf16_bits_to_f32(y[4]) + bf16_bits_to_f32(y[5]), 1.0F, 0x1p-8F);
}

TEST(SoftmaxKernel, OnlyAFewLongRowsNeedAWorkspace) {
  using loom::kernels::softmax_workspace_bytes;
  using loom::kernels::SoftmaxVariant;
  const auto bytes = [](std::int64_t rows, std::int64_t cols, SoftmaxVariant v) {
    return softmax_workspace_bytes(SoftmaxShape{rows, cols, cols, cols}, v);
  };
  EXPECT_EQ(bytes(8192, 16384, SoftmaxVariant::fused), 0U);  // a block a row, in registers
  EXPECT_EQ(bytes(1024, 65536, SoftmaxVariant::fused), 0U);  // many long rows: a block a row
  EXPECT_EQ(bytes(1, 1000003, SoftmaxVariant::online), 0U);  // online never splits
  EXPECT_EQ(bytes(0, 1000003, SoftmaxVariant::fused), 0U);
  // A few long rows split into 8192-element chunks, a (max, sum) pair each.
  EXPECT_EQ(bytes(1, 1000003, SoftmaxVariant::fused), 123U * 8U);
  EXPECT_EQ(bytes(3, 40000, SoftmaxVariant::fused), 3U * 5U * 8U);
}

TEST(SoftmaxOpCpu, ThroughAGraphPlainStridedAndInPlace) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  const std::int64_t rows = 7;
  const std::int64_t cols = 33;
  auto wide = rt.tensor<float>({rows, cols + 5});
  const auto data = random_row_data(static_cast<std::size_t>(rows * (cols + 5)), rng);
  std::memcpy(wide.data(), data.data(), data.size() * sizeof(float));
  auto x = wide.slice(1, 2, 2 + cols);  // rows with a stride of cols + 5
  auto y = rt.tensor<float>({rows, cols});
  auto y2 = rt.tensor<float>({rows, cols});
  auto inplace = rt.tensor<float>({rows, cols});
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(inplace.data_as<float>() + r * cols, data.data() + r * (cols + 5) + 2,
                static_cast<std::size_t>(cols) * sizeof(float));
  }
  loom::Graph g;
  g.add(loom::ops::softmax(x, y));
  g.add(loom::ops::softmax(x, y2, loom::ops::SoftmaxVariant::online));
  g.add(loom::ops::softmax(inplace, inplace, loom::ops::SoftmaxVariant::naive));
  rt.submit(g).wait();
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -1e30;
    for (std::int64_t j = 0; j < cols; ++j) {
      m = std::max<double>(m, data[static_cast<std::size_t>(r * (cols + 5) + 2 + j)]);
    }
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      sum += std::exp(data[static_cast<std::size_t>(r * (cols + 5) + 2 + j)] - m);
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      const double want =
          std::exp(data[static_cast<std::size_t>(r * (cols + 5) + 2 + j)] - m) / sum;
      const auto i = static_cast<std::size_t>(r * cols + j);
      EXPECT_NEAR(y.data_as<float>()[i], want, 1e-6) << r << "," << j;
      EXPECT_EQ(y2.data_as<float>()[i], y.data_as<float>()[i]);
      EXPECT_EQ(inplace.data_as<float>()[i], y.data_as<float>()[i]);
    }
  }
}

TEST(SoftmaxOpCpu, Bf16ThroughAGraph) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(1));
  const std::int64_t rows = 5;
  const std::int64_t cols = 31;
  auto x = rt.tensor<loom::bfloat16>({rows, cols});
  auto y = rt.tensor<loom::bfloat16>({rows, cols});
  const auto data = random_row_data(static_cast<std::size_t>(rows * cols), rng);
  auto* xb = x.data_as<loom::bfloat16>();
  for (std::size_t i = 0; i < data.size(); ++i)
    xb[i].bits = loom::kernels::f32_to_bf16_bits(data[i]);
  loom::Graph g;
  g.add(loom::ops::softmax(x, y));
  rt.submit(g).wait();
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float v =
          loom::kernels::bf16_bits_to_f32(y.data_as<loom::bfloat16>()[r * cols + j].bits);
      EXPECT_GE(v, 0.0F);
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 2e-2) << "row " << r;
  }
}

// The task is named "attention probs" in these rejections.
void expect_rejected(loom::Runtime& rt, const loom::OpPtr& op, const std::string& words) {
  loom::test::expect_rejected(rt, op, words, "attention probs");
}

TEST(SoftmaxOpCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto x = rt.tensor<float>({4, 6});
  auto y = rt.tensor<float>({4, 6});
  using loom::ops::softmax;
  expect_rejected(rt, softmax(rt.tensor<std::int32_t>({4, 6}), y), "must be one of f32, bf16");
  expect_rejected(rt, softmax(x, rt.tensor<loom::bfloat16>({4, 6})), "y must be f32");
  expect_rejected(rt, softmax(rt.tensor<float>({24}), rt.tensor<float>({24})), "rank 2");
  expect_rejected(rt, softmax(rt.tensor<float>({2, 3, 4}), rt.tensor<float>({2, 3, 4})), "rank 2");
  expect_rejected(rt, softmax(x, rt.tensor<float>({6, 4})), "one shape");
  expect_rejected(rt, softmax(rt.tensor<float>({6, 4}).transpose(0, 1), y),
                  "must have contiguous rows");
  expect_rejected(rt, softmax(rt.tensor<float>({4, 12}).slice(1, 0, 12, 2), y),
                  "must have contiguous rows");
  expect_rejected(
      rt, softmax(x, y.transpose(0, 1).transpose(0, 1), static_cast<loom::ops::SoftmaxVariant>(4)),
      "unknown variant 4 (automatic, naive, online, fused)");
  auto both = rt.tensor<float>({4, 12});
  expect_rejected(rt, softmax(both.slice(1, 0, 6), both.slice(1, 3, 9)), "must be x itself");
}

}  // namespace
