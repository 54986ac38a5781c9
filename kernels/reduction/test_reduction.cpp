// Reductions on the CPU: the references against hand-checked cases, the
// 16-bit conversions, and every op through a graph on the CPU backend
// (whole tensors and along a dimension, strided views, every dtype), with
// bad inputs rejected at submit naming the task.
#include "common/convert.hpp"
#include "reduction/reduce.hpp"
#include "reduction/test_support.hpp"
#include "support/cpu.hpp"
#include "support/seed.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::kernels::ReduceOp;
using loom::kernels::Segments;
using loom::test::cpu;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(ReduceReference, HandCheckedValues) {
  const std::vector<float> x = {1.0F, -2.5F, 3.5F, 0.25F};
  EXPECT_EQ(reduce_reference(ReduceOp::sum, x.data(), DType::f32, x.size()), 2.25);
  EXPECT_EQ(reduce_reference(ReduceOp::max, x.data(), DType::f32, x.size()), 3.5);
  EXPECT_EQ(reduce_reference(ReduceOp::min, x.data(), DType::f32, x.size()), -2.5);
}

TEST(ReduceReference, EmptyInputGivesTheIdentity) {
  EXPECT_EQ(reduce_reference(ReduceOp::sum, nullptr, DType::f32, 0), 0.0);
  EXPECT_EQ(reduce_reference(ReduceOp::max, nullptr, DType::f32, 0), -kInf);
  EXPECT_EQ(reduce_reference(ReduceOp::min, nullptr, DType::f32, 0), kInf);
}

TEST(ReduceReference, NanPropagatesWhereverItIs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int at = 0; at < 3; ++at) {
    std::vector<float> x = {1.0F, -2.0F, 3.0F};
    x[static_cast<std::size_t>(at)] = nan;
    for (ReduceOp op : kOps) {
      EXPECT_TRUE(std::isnan(reduce_reference(op, x.data(), DType::f32, 3)))
          << to_string(op) << " with NaN at " << at;
    }
  }
}

TEST(ReduceReference, SixteenBitInputsAreWidenedExactly) {
  const std::vector<loom::half> h = {loom::kernels::to_half(1.5F), loom::kernels::to_half(-0.25F)};
  const std::vector<loom::bfloat16> b = {loom::kernels::to_bfloat16(2.0F),
                                         loom::kernels::to_bfloat16(-3.0F)};
  EXPECT_EQ(reduce_reference(ReduceOp::sum, h.data(), DType::f16, 2), 1.25);
  EXPECT_EQ(reduce_reference(ReduceOp::min, b.data(), DType::bf16, 2), -3.0);
  EXPECT_THROW((void)reduce_reference(ReduceOp::sum, h.data(), DType::i32, 2),
               loom::InvalidArgument);
}

TEST(ReduceReference, SegmentsOfRowsAndColumns) {
  // [[1, 2, 3], [4, -5, 6]]
  const std::vector<float> x = {1, 2, 3, 4, -5, 6};
  std::vector<double> rows(2);
  std::vector<double> columns(3);
  reduce_segments_reference(ReduceOp::sum, x.data(), DType::f32, Segments{2, 3, 3, 1}, rows.data());
  reduce_segments_reference(ReduceOp::min, x.data(), DType::f32, Segments{3, 2, 1, 3},
                            columns.data());
  EXPECT_EQ(rows, (std::vector<double>{6, 5}));
  EXPECT_EQ(columns, (std::vector<double>{1, -5, 3}));
}

// The typed conversions are common/convert.hpp's (tested in
// common/test_convert.cpp), NaN rule included.
TEST(ReductionConversions, AreTheSharedOnes) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float h = loom::kernels::f16_bits_to_f32(bits);
    const float bf = loom::kernels::bf16_bits_to_f32(bits);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(loom::kernels::to_float(loom::half{bits})),
              std::bit_cast<std::uint32_t>(h))
        << b;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(loom::kernels::to_float(loom::bfloat16{bits})),
              std::bit_cast<std::uint32_t>(bf))
        << b;
    ASSERT_EQ(loom::kernels::to_half(h).bits, loom::kernels::f32_to_f16_bits(h)) << b;
    ASSERT_EQ(loom::kernels::to_bfloat16(bf).bits, loom::kernels::f32_to_bf16_bits(bf)) << b;
  }
  EXPECT_EQ(loom::kernels::to_half(std::nanf("")).bits, 0x7FFF);
  EXPECT_EQ(loom::kernels::to_bfloat16(-std::nanf("")).bits, 0x7FFF);
}

// A host tensor of random elements of `dtype`.
loom::Tensor random_tensor(loom::Runtime& rt, DType dtype, const loom::Shape& shape,
                           std::mt19937_64& rng) {
  auto t = rt.tensor(dtype, shape);
  const auto bytes = loom::test::random_elements(dtype, static_cast<std::size_t>(t.numel()), rng);
  std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

// Every element of a (possibly strided) host tensor, as f32, in index order.
std::vector<float> elements_of(const loom::Tensor& t) {
  std::vector<float> out;
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.rank()), 0);
  for (std::int64_t k = 0; k < t.numel(); ++k) {
    std::int64_t offset = 0;
    for (int d = 0; d < t.rank(); ++d)
      offset += index[static_cast<std::size_t>(d)] * t.strides()[d];
    out.push_back(loom::test::element_at(t.data(), t.dtype(), offset));
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++index[static_cast<std::size_t>(d)] < t.size(d)) break;
      index[static_cast<std::size_t>(d)] = 0;
    }
  }
  return out;
}

double fold_all(ReduceOp op, const std::vector<float>& v) {
  return reduce_reference(op, v.data(), DType::f32, v.size());
}

double mean_abs(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += std::fabs(x);
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

loom::OpPtr whole_op(ReduceOp op, const loom::Tensor& x, const loom::Tensor& out) {
  switch (op) {
    case ReduceOp::max: return loom::ops::max(x, out);
    case ReduceOp::min: return loom::ops::min(x, out);
    default: return loom::ops::sum(x, out);
  }
}

loom::OpPtr along_op(ReduceOp op, const loom::Tensor& x, int dim, const loom::Tensor& out) {
  switch (op) {
    case ReduceOp::max: return loom::ops::max(x, dim, out);
    case ReduceOp::min: return loom::ops::min(x, dim, out);
    default: return loom::ops::sum(x, dim, out);
  }
}

void expect_whole(loom::Runtime& rt, ReduceOp op, const loom::Tensor& x, DType out_dtype) {
  auto out = rt.tensor(out_dtype, {1});
  std::memset(out.data(), 0xFF, out.nbytes());
  loom::Graph g;
  g.add(whole_op(op, x, out));
  rt.submit(g).wait();
  const auto values = elements_of(x);
  const float got = loom::test::element_at(out.data(), out_dtype, 0);
  EXPECT_TRUE(loom::test::close_enough(op, got, fold_all(op, values), x.numel(), mean_abs(values),
                                       out_dtype))
      << to_string(op) << " of " << x.describe() << " into " << to_string(out_dtype) << ": got "
      << got << ", expected " << fold_all(op, values);
}

TEST(ReductionOpsCpu, WholeTensorsOfEveryDtypeAndSize) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  for (DType dtype : kDtypes) {
    for (std::int64_t n : {1, 31, 4097, 100003}) {
      const auto x = random_tensor(rt, dtype, {n}, rng);
      for (ReduceOp op : kOps) {
        expect_whole(rt, op, x, DType::f32);
        expect_whole(rt, op, x, dtype);
      }
    }
  }
}

TEST(ReductionOpsCpu, EmptyTensorsGiveTheIdentity) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({0});
  auto out = rt.tensor<float>({3});
  loom::Graph g;
  g.add(loom::ops::sum(x, out.slice(0, 0, 1)));
  g.add(loom::ops::max(x, out.slice(0, 1, 2)));
  g.add(loom::ops::min(x, out.slice(0, 2, 3)));
  rt.submit(g).wait();
  EXPECT_EQ(out.data_as<float>()[0], 0.0F);
  EXPECT_EQ(out.data_as<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.data_as<float>()[2], std::numeric_limits<float>::infinity());
}

TEST(ReductionOpsCpu, WholeTensorsThroughStridedViews) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  const auto m = random_tensor(rt, DType::f32, {37, 101}, rng);
  const auto cube = random_tensor(rt, DType::bf16, {6, 7, 8}, rng);
  for (ReduceOp op : kOps) {
    expect_whole(rt, op, m.transpose(0, 1), DType::f32);     // one run, reordered
    expect_whole(rt, op, m.slice(1, 3, 90, 2), DType::f32);  // two runs
    expect_whole(rt, op, m.slice(0, 1, 30), DType::f32);     // one contiguous run
    expect_whole(rt, op, cube.transpose(0, 2), DType::f32);  // a permutation
    expect_whole(rt, op, cube.slice(2, 0, 4), DType::bf16);  // two runs
    expect_whole(rt, op, m.reshape({37 * 101}), DType::f16);
  }
}

void expect_along(loom::Runtime& rt, ReduceOp op, const loom::Tensor& x, int dim,
                  const loom::Tensor& out) {
  std::memset(out.data(), 0xFF, out.nbytes());
  loom::Graph g;
  g.add(along_op(op, x, dim, out));
  rt.submit(g).wait();
  ASSERT_EQ(x.rank(), 2) << "the check below walks 2-D inputs";
  const int keep = dim == 1 || dim == -1 ? 0 : 1;
  dim = 1 - keep;
  const auto got = elements_of(out);
  ASSERT_EQ(static_cast<std::int64_t>(got.size()), x.size(keep));
  for (std::int64_t i = 0; i < x.size(keep); ++i) {
    const auto segment = elements_of(x.slice(keep, i, i + 1));
    EXPECT_TRUE(loom::test::close_enough(op, got[static_cast<std::size_t>(i)],
                                         fold_all(op, segment), x.size(dim), mean_abs(segment),
                                         out.dtype()))
        << to_string(op) << " along " << dim << " of " << x.describe() << ", segment " << i;
  }
}

TEST(ReductionOpsCpu, AlongEitherDimensionOfAwkwardShapes) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  const std::vector<loom::Shape> shapes = {{1, 1}, {3, 10007}, {4097, 31}, {300, 300}};
  for (DType dtype : kDtypes) {
    for (const auto& shape : shapes) {
      const auto x = random_tensor(rt, dtype, shape, rng);
      for (ReduceOp op : kOps) {
        expect_along(rt, op, x, 1, rt.tensor<float>({shape[0]}));
        expect_along(rt, op, x, 0, rt.tensor(dtype, {shape[1]}));
        expect_along(rt, op, x, -1, rt.tensor<float>({shape[0], 1}));  // keeps the dimension
      }
    }
  }
}

TEST(ReductionOpsCpu, AlongADimensionOfStridedViewsIntoStridedOutputs) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  const auto m = random_tensor(rt, DType::f16, {64, 129}, rng);
  const auto wide = rt.tensor<float>({129, 3});
  for (ReduceOp op : kOps) {
    expect_along(rt, op, m.transpose(0, 1), 1, rt.tensor<float>({129}));
    expect_along(rt, op, m.slice(1, 1, 128, 3), 0, rt.tensor<float>({43}));
    expect_along(rt, op, m.slice(0, 0, 64, 2), 1, rt.tensor<float>({32}));
    expect_along(rt, op, m, 0, wide.transpose(0, 1).slice(0, 1, 2));  // every third float
  }
}

// Submits g and expects a rejection naming task `name` with `fragment` in it.
void expect_rejected(loom::Runtime& rt, loom::Graph& g, const std::string& name,
                     const std::string& fragment) {
  try {
    (void)rt.submit(g);
    ADD_FAILURE() << "accepted; expected a rejection about '" << fragment << "'";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), name);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

void expect_op_rejected(const loom::OpPtr& op, const std::string& fragment) {
  loom::Runtime rt(cpu(1));
  loom::Graph g;
  g.add(op, {.name = "the reduction"});
  expect_rejected(rt, g, "the reduction", fragment);
}

TEST(ReductionOpsCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  const auto x = rt.tensor<float>({8, 6});
  const auto one = rt.tensor<float>({1});
  expect_op_rejected(loom::ops::sum(rt.tensor<std::int32_t>({8}), one), "must be one of f32");
  expect_op_rejected(loom::ops::max(x, rt.tensor<std::int32_t>({1})), "must be one of f32");
  expect_op_rejected(loom::ops::min(x, rt.tensor<float>({2})), "one element");
  expect_op_rejected(loom::ops::sum(loom::Tensor(), one), "undefined");
  expect_op_rejected(loom::ops::sum(x, x.slice(0, 0, 1).slice(1, 0, 1)), "share storage");
  expect_op_rejected(loom::ops::sum(x, 2, rt.tensor<float>({8})), "out of range");
  expect_op_rejected(loom::ops::sum(x, -3, rt.tensor<float>({8})), "out of range");
  expect_op_rejected(loom::ops::max(x, 1, rt.tensor<float>({6})), "shape without dim 1");
  expect_op_rejected(loom::ops::max(x, 1, rt.tensor<float>({8, 2})), "shape without dim 1");
  expect_op_rejected(loom::ops::min(x, 0, rt.tensor<loom::half>({6, 1})), "shape without dim 0");
  expect_op_rejected(loom::ops::sum(x, 0, rt.tensor<std::uint8_t>({6})), "must be one of f32");
  expect_op_rejected(loom::ops::sum(rt.tensor<float>({}), 0, one), "at least one dimension");
}

// An output along a dimension whose elements share memory (a zero stride):
// every row would write the same float. Refused, as for every op.
TEST(ReductionOpsCpu, AnOutputWhoseElementsShareMemoryIsRefused) {
  loom::Runtime rt(cpu(1));
  const auto x = rt.tensor<float>({8, 6});
  std::vector<float> one(1);
  const auto expanded =
      rt.provide(one.data(), DType::f32, {8}, loom::Memory::pageable, loom::Strides{0});
  expect_op_rejected(loom::ops::sum(x, 1, expanded), "share memory");
  expect_op_rejected(loom::ops::max(x.transpose(0, 1), 0, expanded), "share memory");
}

TEST(ReductionOpsCpu, ViewsTheKernelsCannotTakeAreRejectedSayingSo) {
  loom::Runtime rt(cpu(1));
  const auto t = rt.tensor<float>({3, 4, 5, 6});
  // Four irregular runs: every dimension sliced.
  const auto ragged = t.slice(0, 0, 2).slice(1, 0, 3).slice(2, 0, 4).slice(3, 0, 5);
  expect_op_rejected(loom::ops::sum(ragged, rt.tensor<float>({1})), "call contiguous() first");
  // Along dim 1, dims 0, 2 and 3 of a view sliced on the last make three runs.
  expect_op_rejected(loom::ops::max(t.slice(3, 0, 5), 1, rt.tensor<float>({3, 5, 5})),
                     "call contiguous() first");
  // An output whose dimensions do not merge where x's do.
  const auto cube = rt.tensor<float>({6, 7, 8});
  auto big = rt.tensor<float>({7, 16});
  expect_op_rejected(loom::ops::min(cube, 0, big.slice(1, 0, 8)), "does not run evenly");
  // The same output along the middle of the cube, where x runs twice too: accepted.
  loom::Graph g;
  g.add(loom::ops::max(cube, 1, rt.tensor<float>({6, 16}).slice(1, 0, 8)));
  EXPECT_NO_THROW(g.validate());
}

// x[a, :, c] (or the middle element of every rank-3 index) for each (a, c).
void expect_middle(loom::Runtime& rt, ReduceOp op, const loom::Tensor& x, const loom::Tensor& out) {
  std::memset(out.data(), 0xFF, out.nbytes());
  loom::Graph g;
  g.add(along_op(op, x, 1, out));
  rt.submit(g).wait();
  for (std::int64_t a = 0; a < x.size(0); ++a) {
    for (std::int64_t c = 0; c < x.size(2); ++c) {
      const auto segment = elements_of(x.slice(0, a, a + 1).slice(2, c, c + 1));
      const auto got = elements_of(out.slice(0, a, a + 1).slice(1, c, c + 1));
      EXPECT_TRUE(loom::test::close_enough(op, got[0], fold_all(op, segment), x.size(1),
                                           mean_abs(segment), out.dtype()))
          << to_string(op) << " along the middle of " << x.describe() << " at " << a << ", " << c;
    }
  }
}

TEST(ReductionOpsCpu, AlongTheMiddleDimensionOfRankThreeViews) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  const auto cube = random_tensor(rt, DType::f32, {5, 40, 7}, rng);
  const auto halves = random_tensor(rt, DType::f16, {3, 30, 9}, rng);
  for (ReduceOp op : kOps) {
    expect_middle(rt, op, cube, rt.tensor<float>({5, 7}));
    expect_middle(rt, op, cube.slice(2, 1, 6), rt.tensor<float>({5, 5}));
    expect_middle(rt, op, halves, rt.tensor<float>({3, 12}).slice(1, 2, 11));
  }
  // Whole reductions of three runs.
  expect_whole(rt, ReduceOp::sum, cube.slice(0, 0, 4).slice(1, 0, 30).slice(2, 0, 5), DType::f32);
  expect_whole(rt, ReduceOp::min, halves.slice(1, 2, 20).slice(2, 0, 8), DType::f16);
}

TEST(ReductionOpsCpu, HigherRanksAlongADimensionWhenTheOthersMerge) {
  loom::Runtime rt(cpu(2));
  std::mt19937_64 rng(loom::test::fresh_seed());
  const auto cube = random_tensor(rt, DType::f32, {5, 9, 4}, rng);
  loom::Graph g;
  // Reduce along 0 of [5, 36]: dims 1 and 2 merge into one run of 36.
  auto flat = rt.tensor<float>({36});
  g.add(loom::ops::sum(cube, 0, flat.reshape({9, 4})));
  rt.submit(g).wait();
  const auto m = cube.reshape({5, 36});
  for (std::int64_t c = 0; c < 36; ++c) {
    const auto column = elements_of(m.slice(1, c, c + 1));
    EXPECT_NEAR(flat.data_as<float>()[c], fold_all(ReduceOp::sum, column), 1e-5);
  }
}

}  // namespace
