// Broadcasting: Tensor::expand makes a view with stride 0 where it grows,
// which the maps take as an input, a graph orders as the tensor's own data,
// and an op refuses as an output.
#include "support/cpu.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(Expand, GrowsDimensionsOfOneAndAddsLeadingOnesWithStrideZero) {
  loom::Runtime rt(loom::test::cpu(1));
  auto bias = rt.tensor<float>({1, 5});
  auto rows = bias.expand({4, 5});
  EXPECT_EQ(rows.shape(), loom::Shape({4, 5}));
  EXPECT_EQ(rows.strides(), loom::Strides({0, 1}));
  EXPECT_TRUE(rows.shares_storage_with(bias));
  EXPECT_EQ(rows.data(), bias.data());
  auto vec = rt.tensor<float>({5});
  EXPECT_EQ(vec.expand({2, 3, 5}).strides(), loom::Strides({0, 0, 1}));
  auto column = rt.tensor<float>({4, 1});
  EXPECT_EQ(column.expand({4, 6}).strides(), loom::Strides({1, 0}));
  EXPECT_EQ(bias.expand({1, 5}).strides(), bias.strides()) << "nothing to grow";
  try {
    (void)rt.tensor<float>({3, 5}).expand({4, 5});
    FAIL() << "3 rows expanded to 4";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("neither 1 nor the 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)bias.expand({5}), loom::InvalidArgument);
  EXPECT_THROW((void)loom::Tensor().expand({1}), loom::InvalidArgument);
}

TEST(Expand, ABiasAddReadsTheExpandedViewAfterTheTaskThatWritesTheBias) {
  loom::Runtime rt(loom::test::cpu(4));
  constexpr std::int64_t kRows = 64, kCols = 33;
  auto h = rt.tensor<float>({kRows, kCols});
  for (std::int64_t i = 0; i < kRows * kCols; ++i) h.data_as<float>()[i] = static_cast<float>(i);
  auto bias = rt.tensor<float>({kCols});
  for (std::int64_t j = 0; j < kCols; ++j) bias.data_as<float>()[j] = -1000.0F;  // stale
  auto out = rt.tensor<float>({kRows, kCols});
  for (int round = 0; round < 20; ++round) {
    loom::Graph g;
    g.add(loom::ops::fill(bias, static_cast<float>(round)));  // writes the bias
    g.add(loom::ops::add(h, bias.expand({kRows, kCols}), out), {.name = "bias add"});
    rt.submit(g).wait();
    for (std::int64_t i = 0; i < kRows * kCols; ++i) {
      ASSERT_EQ(out.data_as<float>()[i], static_cast<float>(i) + static_cast<float>(round))
          << "round " << round << " element " << i << ": the add ran before the fill";
    }
  }
}

TEST(Expand, AnExpandedViewIsRefusedAsAnOutputNamingTheTask) {
  loom::Runtime rt(loom::test::cpu(1));
  auto x = rt.tensor<float>({4, 5});
  auto bias = rt.tensor<float>({1, 5});
  loom::Graph g;
  g.add(loom::ops::relu(x, bias.expand({4, 5})), {.name = "into the bias"});
  try {
    rt.submit(g).wait();
    FAIL() << "an output whose elements share memory was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "into the bias");
    EXPECT_NE(std::string(e.what()).find("share memory"), std::string::npos) << e.what();
  }
}

TEST(Expand, ReductionsAndCastsTakeAnExpandedInput) {
  loom::Runtime rt(loom::test::cpu(2));
  auto bias = rt.tensor<float>({5});
  for (int j = 0; j < 5; ++j) bias.data_as<float>()[j] = static_cast<float>(j + 1);  // sum 15
  auto total = rt.tensor<float>({1});
  auto per_row = rt.tensor<float>({4});
  auto per_column = rt.tensor<float>({5});
  auto copied = rt.tensor<float>({4, 5});
  loom::Graph g;
  g.add(loom::ops::sum(bias.expand({4, 5}), total));
  g.add(loom::ops::sum(bias.expand({4, 5}), 1, per_row));
  g.add(loom::ops::sum(bias.expand({4, 5}), 0, per_column));
  g.add(loom::ops::cast(bias.expand({4, 5}), copied));
  rt.submit(g).wait();
  EXPECT_EQ(total.data_as<float>()[0], 60.0F);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(per_row.data_as<float>()[i], 15.0F) << i;
  for (int j = 0; j < 5; ++j) EXPECT_EQ(per_column.data_as<float>()[j], 4.0F * (j + 1)) << j;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(copied.data_as<float>()[i], static_cast<float>(i % 5 + 1));
}

}  // namespace
