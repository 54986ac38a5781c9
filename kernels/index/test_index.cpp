// The index ops on the CPU backend, through graphs: hand-checked argmax and
// argmin (ties, NaN, infinities, negative dim, kept and dropped dims, size-1
// and empty dimensions, a transpose, a middle dimension against a loop),
// gather, index_select, scatter_add and one_hot (out-of-range indices,
// i32 and i64, every dtype, strided inputs, empty tensors), every op over
// expanded inputs (stride 0) against hand-checked values, and bad inputs
// rejected at submit naming the task; the GPU's 16-byte walk of
// index_select checked against the element walk, byte for byte.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops/index.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "index/index.hpp"
#include "index/test_support.hpp"
#include "index/walk.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::Tensor;
using loom::test::cpu;
using loom::test::index::download;
using loom::test::index::HostArray;
using loom::test::index::kFloatTypes;
using loom::test::index::upload;
using loom::test::index::upload_index;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr DType kIndexTypes[] = {DType::i32, DType::i64};

void run(loom::Runtime& rt, const loom::OpPtr& op) {
  loom::Graph g;
  g.add(op);
  rt.submit(g).wait();
}

Tensor floats(loom::Runtime& rt, DType d, const std::vector<float>& v, const loom::Shape& s) {
  return upload(rt, HostArray(d, v), s);
}

std::vector<std::int64_t> indices_of(loom::Runtime& rt, const Tensor& t) {
  return rt.download<std::int64_t>(t);
}

std::vector<float> values_of(loom::Runtime& rt, const Tensor& t) {
  const HostArray a = download(rt, t);
  std::vector<float> v(a.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = a.get(i);
  return v;
}

// Equal as floats, NaN equal to NaN.
void expect_same(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
}

// --- argmax / argmin -------------------------------------------------------

TEST(IndexArgReduceCpu, HandCheckedRowsColumnsAndTiesInEveryDtype) {
  loom::Runtime rt(cpu(2));
  // [[1, 5, 5], [7, -1, 7]]: ties go to the first index.
  const std::vector<float> data = {1, 5, 5, 7, -1, 7};
  for (DType d : kFloatTypes) {
    const auto x = floats(rt, d, data, {2, 3});
    auto rows = rt.tensor<std::int64_t>({2});
    auto row_values = rt.tensor(d, {2});
    auto columns = rt.tensor<std::int64_t>({3});
    auto row_min = rt.tensor<std::int64_t>({2, 1});  // dim kept at extent 1
    auto column_min = rt.tensor<std::int64_t>({1, 3});
    auto column_min_values = rt.tensor(d, {1, 3});
    loom::Graph g;
    g.add(loom::ops::argmax(x, 1, rows, row_values));
    g.add(loom::ops::argmax(x, 0, columns));
    g.add(loom::ops::argmin(x, -1, row_min));
    g.add(loom::ops::argmin(x, -2, column_min, column_min_values));
    rt.submit(g).wait();
    const std::string what(loom::to_string(d));
    EXPECT_EQ(indices_of(rt, rows), (std::vector<std::int64_t>{1, 0})) << what;
    expect_same(values_of(rt, row_values), {5, 7}, what);
    EXPECT_EQ(indices_of(rt, columns), (std::vector<std::int64_t>{1, 0, 1})) << what;
    EXPECT_EQ(indices_of(rt, row_min), (std::vector<std::int64_t>{0, 1})) << what;
    EXPECT_EQ(indices_of(rt, column_min), (std::vector<std::int64_t>{0, 1, 0})) << what;
    expect_same(values_of(rt, column_min_values), {1, -1, 5}, what);
  }
}

TEST(IndexArgReduceCpu, ANaNWinsForMaxAndMinAndItsFirstOccurrenceAtThat) {
  loom::Runtime rt(cpu(1));
  const std::vector<float> data = {
      1,     kNaN,  3,     kNaN,   // NaN at 1 (and 3)
      -kInf, -kInf, -kInf, -kInf,  // all equal: index 0 for both
      kInf,  2,     kNaN,  -kInf,  // the NaN beats +inf and -inf
      -0.0F, 0.0F,  -2,    2,      // -0 and +0 tie
  };
  for (DType d : kFloatTypes) {
    const auto x = floats(rt, d, data, {4, 4});
    auto imax = rt.tensor<std::int64_t>({4});
    auto vmax = rt.tensor(d, {4});
    auto imin = rt.tensor<std::int64_t>({4});
    auto vmin = rt.tensor(d, {4});
    loom::Graph g;
    g.add(loom::ops::argmax(x, 1, imax, vmax));
    g.add(loom::ops::argmin(x, 1, imin, vmin));
    rt.submit(g).wait();
    const std::string what(loom::to_string(d));
    EXPECT_EQ(indices_of(rt, imax), (std::vector<std::int64_t>{1, 0, 2, 3})) << what;
    EXPECT_EQ(indices_of(rt, imin), (std::vector<std::int64_t>{1, 0, 2, 2})) << what;
    expect_same(values_of(rt, vmax), {kNaN, -kInf, kNaN, 2}, what);
    expect_same(values_of(rt, vmin), {kNaN, -kInf, kNaN, -2}, what);
  }
}

TEST(IndexArgReduceCpu, ATransposeSizeOneDimensionsAndEmptyOutputs) {
  loom::Runtime rt(cpu(1));
  // x [3, 2] transposed is [[1, 9, 4], [8, 2, 6]].
  const auto x = floats(rt, DType::f32, {1, 8, 9, 2, 4, 6}, {3, 2});
  auto t_rows = rt.tensor<std::int64_t>({2});
  auto t_values = rt.tensor<float>({2});
  run(rt, loom::ops::argmax(x.transpose(0, 1), 1, t_rows, t_values));
  EXPECT_EQ(indices_of(rt, t_rows), (std::vector<std::int64_t>{1, 0}));
  expect_same(values_of(rt, t_values), {9, 8}, "transpose");

  // [2, 1, 3]: along the extent-1 dimension every index is 0 and the values are x.
  const std::vector<float> data = {3, -1, 2, 0.5F, 7, 7};
  const auto y = floats(rt, DType::bf16, data, {2, 1, 3});
  auto along_one = rt.tensor<std::int64_t>({2, 3});
  auto along_one_values = rt.tensor(DType::bf16, {2, 1, 3});
  auto along_last = rt.tensor<std::int64_t>({2, 1});
  run(rt, loom::ops::argmin(y, 1, along_one, along_one_values));
  run(rt, loom::ops::argmax(y, 2, along_last));
  EXPECT_EQ(indices_of(rt, along_one), std::vector<std::int64_t>(6, 0));
  expect_same(values_of(rt, along_one_values), data, "extent 1");
  EXPECT_EQ(indices_of(rt, along_last), (std::vector<std::int64_t>{0, 1}));

  // No outputs (another dimension is empty): nothing to write, nothing fails.
  auto none = rt.tensor<std::int64_t>({0});
  run(rt, loom::ops::argmax(rt.tensor<float>({0, 4}), 1, none));
  EXPECT_EQ(none.numel(), 0);
}

TEST(IndexArgReduceCpu, AMiddleDimensionOfARank4TensorMatchesALoop) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  constexpr std::int64_t A = 3, B = 5, C = 4, D = 6;
  const auto data = loom::test::index::random_values(A * B * C * D, rng);
  const auto x = floats(rt, DType::f32, data, {A, B, C, D});
  auto got = rt.tensor<std::int64_t>({A, C, D});
  run(rt, loom::ops::argmax(x, 1, got));
  const auto indices = indices_of(rt, got);
  for (std::int64_t a = 0; a < A; ++a) {
    for (std::int64_t c = 0; c < C; ++c) {
      for (std::int64_t e = 0; e < D; ++e) {
        std::int64_t best = 0;
        for (std::int64_t b = 1; b < B; ++b) {
          if (data[((a * B + b) * C + c) * D + e] > data[((a * B + best) * C + c) * D + e]) {
            best = b;
          }
        }
        EXPECT_EQ(indices[(a * C + c) * D + e], best) << a << "," << c << "," << e;
      }
    }
  }
}

// --- gather ----------------------------------------------------------------

TEST(IndexGatherCpu, HandCheckedAlongEachDimensionInEveryDtypeAndIndexType) {
  loom::Runtime rt(cpu(1));
  // x [[1, 2, 3], [4, 5, 6]]
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      const auto x = floats(rt, d, {1, 2, 3, 4, 5, 6}, {2, 3});
      auto along1 = rt.tensor(d, {2, 2});
      auto along0 = rt.tensor(d, {1, 3});
      auto smaller = rt.tensor(d, {1, 4});  // index extent 1 <= 2 in dim 0
      loom::Graph g;
      g.add(loom::ops::gather(x, 1, upload_index(rt, it, {2, 0, 1, 1}, {2, 2}), along1));
      g.add(loom::ops::gather(x, 0, upload_index(rt, it, {1, 0, 1}, {1, 3}), along0));
      g.add(loom::ops::gather(x, -1, upload_index(rt, it, {0, 2, 2, 1}, {1, 4}), smaller));
      rt.submit(g).wait();
      const std::string what =
          std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it));
      expect_same(values_of(rt, along1), {3, 1, 5, 5}, what);
      expect_same(values_of(rt, along0), {4, 2, 6}, what);
      expect_same(values_of(rt, smaller), {1, 3, 3, 2}, what);
    }
  }
}

TEST(IndexGatherCpu, OutOfRangeIndicesGiveNaNInThoseElementsOnly) {
  loom::Runtime rt(cpu(1));
  for (DType d : kFloatTypes) {
    const auto x = floats(rt, d, {1, 2, 3, 4, 5, 6}, {2, 3});
    auto out = rt.tensor(d, {2, 3});
    run(rt,
        loom::ops::gather(x, 1, upload_index(rt, DType::i64, {3, 0, -1, 2, 2, 1}, {2, 3}), out));
    expect_same(values_of(rt, out), {kNaN, 1, kNaN, 6, 6, 5}, std::string(loom::to_string(d)));
    // The dtype's canonical NaN, as the GPU writes it.
    const HostArray bits = download(rt, out);
    EXPECT_EQ(bits.bits(0), d == DType::f32 ? 0x7FFFFFFFU : 0x7FFFU);
  }
}

TEST(IndexGatherCpu, StridedInputsAndEmptyIndex) {
  loom::Runtime rt(cpu(1));
  // x [3, 2] transposed: [[1, 3, 5], [2, 4, 6]]; index transposed too.
  const auto x = floats(rt, DType::f32, {1, 2, 3, 4, 5, 6}, {3, 2});
  const auto index =
      upload_index(rt, DType::i32, {2, 0, 1, 1, 0, 2}, {3, 2});  // [[2,1,0],[0,1,2]]^T
  auto out = rt.tensor<float>({2, 3});
  run(rt, loom::ops::gather(x.transpose(0, 1), 1, index.transpose(0, 1), out));
  expect_same(values_of(rt, out), {5, 3, 1, 2, 4, 6}, "transposed");
  auto empty = rt.tensor<float>({2, 0});
  run(rt, loom::ops::gather(x.transpose(0, 1), 1, rt.tensor<std::int64_t>({2, 0}), empty));
  EXPECT_EQ(empty.numel(), 0);
}

// --- index_select ----------------------------------------------------------

TEST(IndexSelectCpu, RowsColumnsOutOfRangeAndEveryDtype) {
  loom::Runtime rt(cpu(1));
  // x [4, 3]: row r is {10r, 10r + 1, 10r + 2}.
  std::vector<float> data;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) data.push_back(static_cast<float>(10 * r + c));
  }
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      const auto x = floats(rt, d, data, {4, 3});
      auto rows = rt.tensor(d, {3, 3});
      auto columns = rt.tensor(d, {4, 2});
      auto bad = rt.tensor(d, {2, 3});
      loom::Graph g;
      g.add(loom::ops::index_select(x, 0, upload_index(rt, it, {3, 0, 3}, {3}), rows));
      g.add(loom::ops::index_select(x, -1, upload_index(rt, it, {2, 0}, {2}), columns));
      g.add(loom::ops::index_select(x, 0, upload_index(rt, it, {1, 4}, {2}), bad));
      rt.submit(g).wait();
      const std::string what =
          std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it));
      expect_same(values_of(rt, rows), {30, 31, 32, 0, 1, 2, 30, 31, 32}, what);
      expect_same(values_of(rt, columns), {2, 0, 12, 10, 22, 20, 32, 30}, what);
      expect_same(values_of(rt, bad), {10, 11, 12, kNaN, kNaN, kNaN}, what);
    }
  }
}

TEST(IndexSelectCpu, ATransposedTableAStridedIndexAndNoIndices) {
  loom::Runtime rt(cpu(1));
  const auto x = floats(rt, DType::f16, {1, 2, 3, 4, 5, 6}, {2, 3});  // x^T: [[1,4],[2,5],[3,6]]
  const auto index = upload_index(rt, DType::i64, {2, 9, 0, 9}, {4});
  auto out = rt.tensor(DType::f16, {2, 2});
  run(rt, loom::ops::index_select(x.transpose(0, 1), 0, index.slice(0, 0, 4, 2), out));
  expect_same(values_of(rt, out), {3, 6, 1, 4}, "transposed table, every other index");
  auto none = rt.tensor(DType::f16, {0, 2});
  run(rt, loom::ops::index_select(x.transpose(0, 1), 0, rt.tensor<std::int32_t>({0}), none));
  EXPECT_EQ(none.numel(), 0);
}

// --- scatter_add -----------------------------------------------------------

TEST(IndexScatterAddCpu, HandCheckedAlongEachDimensionSkippingOutOfRange) {
  loom::Runtime rt(cpu(1));
  for (DType it : kIndexTypes) {
    auto dst = floats(rt, DType::f32, {1, 1, 1, 1, 1, 1}, {2, 3});
    const auto src = floats(rt, DType::f32, {1, 2, 3, 4}, {2, 2});
    // Row 0: cols 0, 0 get 1 + 2; row 1: col 2 gets 3, col 1 gets 4.
    run(rt, loom::ops::scatter_add(dst, 1, upload_index(rt, it, {0, 0, 2, 1}, {2, 2}), src));
    expect_same(values_of(rt, dst), {4, 1, 1, 1, 5, 4}, "dim 1");
    // Along dim 0 (as -2): [[1, 0]] sends src[0][0] to row 1 and src[0][1] to row 0; 7 and -1 are
    // out of range and skipped.
    const auto src2 = floats(rt, DType::f32, {10, 20, 30, 40}, {2, 2});
    run(rt, loom::ops::scatter_add(dst, -2, upload_index(rt, it, {1, 0, 7, -1}, {2, 2}), src2));
    expect_same(values_of(rt, dst), {4, 21, 1, 11, 5, 4}, "dim 0");
  }
}

TEST(IndexScatterAddCpu, AStridedDestinationAndEmptySource) {
  loom::Runtime rt(cpu(1));
  auto table = floats(rt, DType::f32, {0, 0, 0, 0, 0, 0}, {3, 2});
  const auto src = floats(rt, DType::f32, {1, 2, 3}, {1, 3});
  // dst = table^T [2, 3]; index [1, 3] along dim 0 -> rows 1, 0, 1 of the transpose.
  run(rt, loom::ops::scatter_add(table.transpose(0, 1), 0,
                                 upload_index(rt, DType::i64, {1, 0, 1}, {1, 3}), src));
  expect_same(values_of(rt, table), {0, 1, 2, 0, 0, 3}, "transposed dst");
  run(rt,
      loom::ops::scatter_add(table, 0, rt.tensor<std::int32_t>({0, 2}), rt.tensor<float>({0, 2})));
  expect_same(values_of(rt, table), {0, 1, 2, 0, 0, 3}, "empty src");
}

// --- one_hot ---------------------------------------------------------------

TEST(IndexOneHotCpu, OnesZerosAndNaNRowsInEveryDtype) {
  loom::Runtime rt(cpu(1));
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      auto out = rt.tensor(d, {4, 3});
      const auto labels = upload_index(rt, it, {2, 0, 3, -1}, {4});
      run(rt, loom::ops::one_hot(labels, out));
      expect_same(values_of(rt, out), {0, 0, 1, 1, 0, 0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN},
                  std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it)));
    }
  }
  // Strided labels, and no rows.
  const auto labels = upload_index(rt, DType::i32, {1, 7, 0, 7}, {4});
  auto out = rt.tensor<float>({2, 2});
  run(rt, loom::ops::one_hot(labels.slice(0, 0, 4, 2), out));
  expect_same(values_of(rt, out), {0, 1, 1, 0}, "strided labels");
  auto none = rt.tensor<float>({0, 5});
  run(rt, loom::ops::one_hot(rt.tensor<std::int64_t>({0}), none));
  EXPECT_EQ(none.numel(), 0);
}

// --- expanded inputs (stride 0) ----------------------------------------------

TEST(IndexGatherCpu, ExpandedTablesAndIndicesReadTheirBroadcastElements) {
  loom::Runtime rt(cpu(1));
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      // The row [1, 2, 3] expanded to [2, 3]: stride 0 along dim 0.
      const auto rows = floats(rt, d, {1, 2, 3}, {3}).expand({2, 3});
      // x [[1, 2, 3], [4, 5, 6]], whole.
      const auto x = floats(rt, d, {1, 2, 3, 4, 5, 6}, {2, 3});
      auto along_row = rt.tensor(d, {2, 2});
      auto along_expanded = rt.tensor(d, {1, 3});
      auto one_column = rt.tensor(d, {2, 3});
      auto one_row = rt.tensor(d, {2, 3});
      loom::Graph g;
      g.add(loom::ops::gather(rows, 1, upload_index(rt, it, {2, 0, 1, 1}, {2, 2}), along_row));
      // Along the expanded dimension itself (index times stride 0); 2 is out of range.
      g.add(loom::ops::gather(rows, 0, upload_index(rt, it, {1, 0, 2}, {1, 3}), along_expanded));
      // index [[2], [0]] expanded along dim 1: each row gathers one column of x three times.
      g.add(
          loom::ops::gather(x, 1, upload_index(rt, it, {2, 0}, {2, 1}).expand({2, 3}), one_column));
      // index [[1, 0, 1]] expanded along dim 0: both rows gather x[1][0], x[0][1], x[1][2].
      g.add(
          loom::ops::gather(x, 0, upload_index(rt, it, {1, 0, 1}, {1, 3}).expand({2, 3}), one_row));
      rt.submit(g).wait();
      const std::string what =
          std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it));
      expect_same(values_of(rt, along_row), {3, 1, 2, 2}, what);
      expect_same(values_of(rt, along_expanded), {1, 2, kNaN}, what);
      expect_same(values_of(rt, one_column), {3, 3, 3, 4, 4, 4}, what);
      expect_same(values_of(rt, one_row), {4, 2, 6, 4, 2, 6}, what);
    }
  }
}

TEST(IndexSelectCpu, AnExpandedTableOrIndexSelectsTheBroadcastSlices) {
  loom::Runtime rt(cpu(1));
  for (DType d : kFloatTypes) {
    for (DType it : kIndexTypes) {
      // The column [10, 20, 30] expanded to [3, 4]: x[i][j] = 10 (i + 1), stride 0 along dim 1.
      const auto columns = floats(rt, d, {10, 20, 30}, {3, 1}).expand({3, 4});
      const auto x = floats(rt, d, {1, 2, 3, 4, 5, 6}, {2, 3});
      auto rows = rt.tensor(d, {3, 4});
      auto along_expanded = rt.tensor(d, {3, 3});
      auto same_row = rt.tensor(d, {3, 3});
      auto same_column = rt.tensor(d, {2, 2});
      loom::Graph g;
      g.add(loom::ops::index_select(columns, 0, upload_index(rt, it, {2, 0, 2}, {3}), rows));
      // Along the expanded dimension (index times stride 0); 4 is out of range.
      g.add(loom::ops::index_select(columns, 1, upload_index(rt, it, {3, 0, 4}, {3}),
                                    along_expanded));
      // One index expanded to several: the same slice again and again.
      g.add(loom::ops::index_select(x, 0, upload_index(rt, it, {1}, {1}).expand({3}), same_row));
      g.add(loom::ops::index_select(x, 1, upload_index(rt, it, {2}, {1}).expand({2}), same_column));
      rt.submit(g).wait();
      const std::string what =
          std::string(loom::to_string(d)) + " " + std::string(loom::to_string(it));
      expect_same(values_of(rt, rows), {30, 30, 30, 30, 10, 10, 10, 10, 30, 30, 30, 30}, what);
      expect_same(values_of(rt, along_expanded), {10, 10, kNaN, 20, 20, kNaN, 30, 30, kNaN}, what);
      expect_same(values_of(rt, same_row), {4, 5, 6, 4, 5, 6, 4, 5, 6}, what);
      expect_same(values_of(rt, same_column), {3, 3, 6, 6}, what);
    }
  }
}

TEST(IndexArgReduceCpu, AnExpandedInputTiesAlongTheBroadcastDimensionAndMatchesALoop) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  for (DType d : kFloatTypes) {
    const std::string what(loom::to_string(d));
    // The row [1, 5, -2, 5] expanded to [3, 4].
    const auto rows = floats(rt, d, {1, 5, -2, 5}, {4}).expand({3, 4});
    // The column [3, 7, -1] expanded to [3, 40].
    const auto columns = floats(rt, d, {3, 7, -1}, {3, 1}).expand({3, 40});
    auto row_max = rt.tensor<std::int64_t>({3});
    auto row_max_values = rt.tensor(d, {3});
    auto row_min = rt.tensor<std::int64_t>({3, 1});
    auto row_min_values = rt.tensor(d, {3, 1});
    auto down_rows = rt.tensor<std::int64_t>({4});  // along the expanded dimension: all tie
    auto down_rows_values = rt.tensor(d, {4});
    auto column_max = rt.tensor<std::int64_t>({40});
    auto column_min = rt.tensor<std::int64_t>({1, 40});
    auto column_min_values = rt.tensor(d, {1, 40});
    auto across_columns = rt.tensor<std::int64_t>({3});  // along the expanded dimension
    auto across_columns_values = rt.tensor(d, {3});
    loom::Graph g;
    g.add(loom::ops::argmax(rows, 1, row_max, row_max_values));
    g.add(loom::ops::argmin(rows, -1, row_min, row_min_values));
    g.add(loom::ops::argmax(rows, 0, down_rows, down_rows_values));
    g.add(loom::ops::argmax(columns, 0, column_max));
    g.add(loom::ops::argmin(columns, 0, column_min, column_min_values));
    g.add(loom::ops::argmax(columns, 1, across_columns, across_columns_values));
    rt.submit(g).wait();
    EXPECT_EQ(indices_of(rt, row_max), (std::vector<std::int64_t>{1, 1, 1})) << what;
    expect_same(values_of(rt, row_max_values), {5, 5, 5}, what);
    EXPECT_EQ(indices_of(rt, row_min), (std::vector<std::int64_t>{2, 2, 2})) << what;
    expect_same(values_of(rt, row_min_values), {-2, -2, -2}, what);
    EXPECT_EQ(indices_of(rt, down_rows), std::vector<std::int64_t>(4, 0)) << what;
    expect_same(values_of(rt, down_rows_values), {1, 5, -2, 5}, what);
    EXPECT_EQ(indices_of(rt, column_max), std::vector<std::int64_t>(40, 1)) << what;
    EXPECT_EQ(indices_of(rt, column_min), std::vector<std::int64_t>(40, 2)) << what;
    expect_same(values_of(rt, column_min_values), std::vector<float>(40, -1), what);
    EXPECT_EQ(indices_of(rt, across_columns), std::vector<std::int64_t>(3, 0)) << what;
    expect_same(values_of(rt, across_columns_values), {3, 7, -1}, what);
  }

  // Random [A, 1, C] expanded to [A, B, C]: along C each (a, b) has its row a's
  // winner; along A each (b, c) has column c's.
  constexpr std::int64_t A = 5, B = 7, C = 9;
  const auto data = loom::test::index::random_values(A * C, rng);
  const auto x = floats(rt, DType::f32, data, {A, 1, C}).expand({A, B, C});
  auto along_c = rt.tensor<std::int64_t>({A, B});
  auto along_a = rt.tensor<std::int64_t>({B, C});
  loom::Graph g;
  g.add(loom::ops::argmax(x, 2, along_c));
  g.add(loom::ops::argmin(x, 0, along_a));
  rt.submit(g).wait();
  const auto got_c = indices_of(rt, along_c);
  const auto got_a = indices_of(rt, along_a);
  for (std::int64_t a = 0; a < A; ++a) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < C; ++c) {
      if (data[a * C + c] > data[a * C + best]) best = c;
    }
    for (std::int64_t b = 0; b < B; ++b) EXPECT_EQ(got_c[a * B + b], best) << a << "," << b;
  }
  for (std::int64_t c = 0; c < C; ++c) {
    std::int64_t best = 0;
    for (std::int64_t a = 1; a < A; ++a) {
      if (data[a * C + c] < data[best * C + c]) best = a;
    }
    for (std::int64_t b = 0; b < B; ++b) EXPECT_EQ(got_a[b * C + c], best) << b << "," << c;
  }
}

TEST(IndexScatterAddCpu, AnExpandedSourceAddsItsOneValueAtEveryIndex) {
  loom::Runtime rt(cpu(1));
  for (DType it : kIndexTypes) {
    const std::string what(loom::to_string(it));
    // 2.5 expanded to [2, 3]: row 0 adds it to columns 0, 0, 3; row 1 to 1, 2, 1.
    auto dst = floats(rt, DType::f32, std::vector<float>(8, 0), {2, 4});
    const auto scalar = floats(rt, DType::f32, {2.5F}, {1}).expand({2, 3});
    run(rt,
        loom::ops::scatter_add(dst, 1, upload_index(rt, it, {0, 0, 3, 1, 2, 1}, {2, 3}), scalar));
    expect_same(values_of(rt, dst), {5, 0, 0, 2.5F, 0, 5, 2.5F, 0}, what + " a scalar");
    // The row [1, 10, 100] expanded to [2, 3], along dim 0; 5 is out of range and skipped.
    auto down = floats(rt, DType::f32, std::vector<float>(6, 0), {2, 3});
    const auto row = floats(rt, DType::f32, {1, 10, 100}, {3}).expand({2, 3});
    run(rt, loom::ops::scatter_add(down, 0, upload_index(rt, it, {1, 0, 1, 1, 1, 5}, {2, 3}), row));
    expect_same(values_of(rt, down), {0, 10, 0, 2, 10, 100}, what + " a row");
    // Index and source both expanded along the row: row 0 sums 1 + 2 + 4 into column 3, row 1
    // into column 0.
    auto sums = floats(rt, DType::f32, std::vector<float>(8, 0), {2, 4});
    const auto index = upload_index(rt, it, {3, 0}, {2, 1}).expand({2, 3});
    run(rt, loom::ops::scatter_add(sums, 1, index,
                                   floats(rt, DType::f32, {1, 2, 4}, {3}).expand({2, 3})));
    expect_same(values_of(rt, sums), {0, 0, 0, 7, 7, 0, 0, 0}, what + " both");
  }
}

TEST(IndexOneHotCpu, AnExpandedLabelFillsEveryRowAlike) {
  loom::Runtime rt(cpu(1));
  for (DType it : kIndexTypes) {
    auto out = rt.tensor<float>({3, 4});
    auto bad = rt.tensor<float>({2, 2});
    loom::Graph g;
    g.add(loom::ops::one_hot(upload_index(rt, it, {2}, {1}).expand({3}), out));
    g.add(loom::ops::one_hot(upload_index(rt, it, {5}, {1}).expand({2}), bad));
    rt.submit(g).wait();
    const std::string what(loom::to_string(it));
    expect_same(values_of(rt, out), {0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0}, what);
    expect_same(values_of(rt, bad), {kNaN, kNaN, kNaN, kNaN}, what);
  }
}

// --- rejections ------------------------------------------------------------

TEST(IndexOpsCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  using loom::test::expect_rejected;
  namespace ops = loom::ops;
  loom::Runtime rt(cpu(1));
  auto x = rt.tensor<float>({4, 6});
  auto i4 = rt.tensor<std::int64_t>({4});
  // argmax / argmin
  expect_rejected(rt, ops::argmax(rt.tensor<std::int32_t>({4, 6}), 1, i4), "x must be one of");
  expect_rejected(rt, ops::argmax(x, 1, rt.tensor<std::int32_t>({4})), "indices must be i64");
  expect_rejected(rt, ops::argmin(x, 2, i4), "dim 2 is out of range");
  expect_rejected(rt, ops::argmin(x, -3, i4), "dim -3 is out of range");
  expect_rejected(rt, ops::argmax(x, 1, rt.tensor<std::int64_t>({6})), "x's shape without dim");
  expect_rejected(rt, ops::argmax(x, 1, rt.tensor<std::int64_t>({4, 2})), "x's shape without dim");
  expect_rejected(rt, ops::argmax(x, 1, i4, rt.tensor(DType::f16, {4})), "values must be f32");
  expect_rejected(rt, ops::argmax(x, 1, i4, rt.tensor<float>({4, 2})), "x's shape without dim");
  expect_rejected(rt, ops::argmax(rt.tensor<float>({4, 0}), 1, i4), "has no elements");
  expect_rejected(rt, ops::argmin(rt.tensor<float>({4, 0}), -1, i4), "no smallest one");
  // indices and values over one buffer.
  std::vector<std::int64_t> shared(4);
  auto as_indices = rt.provide(shared.data(), DType::i64, {4}, x.memory());
  auto as_values = rt.provide(shared.data(), DType::f32, {4}, x.memory());
  expect_rejected(rt, ops::argmax(x, 1, as_indices, as_values),
                  "values and indices must not share storage");
  expect_rejected(rt, ops::argmax(x, 1, i4, x.slice(1, 0, 1)),
                  "values and x must not share storage");
  // gather
  auto ix = rt.tensor<std::int64_t>({4, 2});
  auto out = rt.tensor<float>({4, 2});
  expect_rejected(rt, ops::gather(x, 1, rt.tensor<float>({4, 2}), out), "index must be one of");
  expect_rejected(rt, ops::gather(x, 1, ix, rt.tensor(DType::bf16, {4, 2})), "out must be f32");
  expect_rejected(rt, ops::gather(x, 1, rt.tensor<std::int64_t>({8}), rt.tensor<float>({8})),
                  "index must have x's rank");
  expect_rejected(rt, ops::gather(x, 1, rt.tensor<std::int64_t>({5, 2}), rt.tensor<float>({5, 2})),
                  "an extent at most x's");
  expect_rejected(rt, ops::gather(x, 1, ix, rt.tensor<float>({2, 4})), "one shape");
  expect_rejected(rt, ops::gather(x, 5, ix, out), "dim 5 is out of range");
  expect_rejected(rt, ops::gather(x, 1, ix, x.slice(1, 0, 2)), "must not share storage");
  // index_select
  expect_rejected(rt, ops::index_select(x, 0, rt.tensor<std::int64_t>({2, 1}), out), "rank 1");
  expect_rejected(rt, ops::index_select(x, 0, i4, rt.tensor<float>({4, 5})),
                  "out must have shape [4, 6]");
  expect_rejected(rt, ops::index_select(x, 0, rt.tensor<std::int8_t>({4}), x),
                  "index must be one of");
  // scatter_add
  auto src = rt.tensor<float>({4, 2});
  expect_rejected(rt, ops::scatter_add(rt.tensor(DType::f16, {4, 6}), 1, ix, src.slice(0, 0, 4)),
                  "dst must be f32");
  expect_rejected(rt, ops::scatter_add(x, 1, ix, rt.tensor(DType::bf16, {4, 2})),
                  "src must be f32");
  expect_rejected(rt, ops::scatter_add(x, 1, ix, rt.tensor<float>({4, 3})), "one shape");
  expect_rejected(rt,
                  ops::scatter_add(x, 1, rt.tensor<std::int64_t>({5, 2}), rt.tensor<float>({5, 2})),
                  "an extent at most dst's");
  expect_rejected(rt, ops::scatter_add(x, -3, ix, src), "dim -3 is out of range");
  expect_rejected(rt, ops::scatter_add(x, 1, ix, x.slice(1, 0, 2)), "must not share storage");
  // one_hot
  expect_rejected(rt, ops::one_hot(rt.tensor<float>({4}), out), "labels must be one of");
  expect_rejected(rt, ops::one_hot(i4, rt.tensor<std::int32_t>({4, 3})), "out must be one of");
  expect_rejected(rt, ops::one_hot(rt.tensor<std::int64_t>({4, 1}), out), "rank 1");
  expect_rejected(rt, ops::one_hot(i4, rt.tensor<float>({4})), "rank 2");
  expect_rejected(rt, ops::one_hot(i4, rt.tensor<float>({5, 3})), "one row a label");
  expect_rejected(rt, ops::one_hot(i4, rt.tensor<float>({3, 4}).transpose(0, 1)),
                  "must be contiguous");
}

}  // namespace

// --- the 16-byte path, checked on the CPU ------------------------------------

namespace {

using loom::kernels::IndexedWalk;

// The walk the op builds for index_select of contiguous rows: x [rows, width].
IndexedWalk rows_walk(std::int64_t count, std::int64_t rows, std::int64_t width) {
  IndexedWalk w;
  w.walk.rank = 2;
  w.walk.count = count * width;
  w.walk.extent[0] = count;
  w.walk.extent[1] = width;
  w.walk.stride[loom::kernels::kGatherOut][0] = width;
  w.walk.stride[loom::kernels::kGatherOut][1] = 1;
  w.walk.stride[loom::kernels::kGatherX][1] = 1;
  w.walk.stride[loom::kernels::kGatherIndex][0] = 1;
  w.indexed_extent = rows;
  w.indexed_stride = width;
  return w;
}

TEST(IndexGatherWalk, SixteenByteUnitsMoveTheBytesElementsDo) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  constexpr std::int64_t kRows = 37, kCount = 53;
  for (int size : {2, 4}) {
    for (std::int64_t width : {8, 24, 64}) {
      // 16-byte aligned buffers of random bytes.
      std::vector<std::uint64_t> x(static_cast<std::size_t>(kRows * width * size / 8 + 2));
      for (auto& v : x) v = rng();
      std::vector<std::int64_t> picks(kCount);
      for (std::size_t i = 0; i < picks.size(); ++i) {
        picks[i] = i % 7 == 3 ? kRows : static_cast<std::int64_t>(rng() % kRows);
      }
      const std::size_t out_words = static_cast<std::size_t>(kCount * width * size / 8 + 2);
      std::vector<std::uint64_t> by_element(out_words, 0), by_unit(out_words, 1);
      const std::uint32_t nan_word = size == 4 ? 0x7FFFFFFFU : 0x7FFF7FFFU;
      IndexedWalk w = rows_walk(kCount, kRows, width);
      loom::kernels::gather_reference(x.data(), picks.data(), DType::i64, by_element.data(), size,
                                      nan_word, w);
      ASSERT_TRUE(loom::kernels::index_detail::widen_to_16_bytes(x.data(), by_unit.data(), size, w))
          << size << " " << width;
      EXPECT_EQ(w.walk.extent[1], width * size / 16);
      loom::kernels::gather_reference(x.data(), picks.data(), DType::i64, by_unit.data(), 16,
                                      nan_word, w);
      const std::size_t bytes = static_cast<std::size_t>(kCount * width * size);
      EXPECT_EQ(std::memcmp(by_element.data(), by_unit.data(), bytes), 0) << size << " " << width;
    }
  }
}

TEST(IndexGatherWalk, SixteenByteUnitsOnlyWhereEveryOffsetAllowsThem) {
  using loom::kernels::index_detail::widen_to_16_bytes;
  alignas(16) static unsigned char buffer[4096];
  IndexedWalk w = rows_walk(3, 10, 8);
  EXPECT_FALSE(widen_to_16_bytes(buffer + 4, buffer, 4, w));  // x misaligned
  EXPECT_FALSE(widen_to_16_bytes(buffer, buffer + 8, 4, w));  // out misaligned
  w = rows_walk(3, 10, 6);                                    // 24-byte rows
  EXPECT_FALSE(widen_to_16_bytes(buffer, buffer + 1024, 4, w));
  IndexedWalk columns = rows_walk(3, 10, 8);
  columns.walk.stride[loom::kernels::kGatherIndex][1] = 1;  // index varies along the row
  EXPECT_FALSE(widen_to_16_bytes(buffer, buffer + 1024, 4, columns));
  IndexedWalk fine = rows_walk(3, 10, 8);
  EXPECT_TRUE(widen_to_16_bytes(buffer, buffer + 1024, 2, fine));  // 16-byte rows of f16
  EXPECT_EQ(fine.walk.extent[1], 1);
  EXPECT_EQ(fine.indexed_stride, 1);
}

}  // namespace
