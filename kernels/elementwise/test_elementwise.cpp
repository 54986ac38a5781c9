// The elementwise family on the CPU: the maps' references on hand-checked
// cases, the strided path against the contiguous one, every op through a
// graph on the CPU backend, rejections at submit naming the task, fused
// chains equal to the unfused ones, and the generated fused kernels compiled
// by NVRTC (no GPU needed). The f16/bf16 conversions are common/convert.hpp's,
// tested in common/test_convert.cpp.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "elementwise/fusion.hpp"
#include "elementwise/maps.hpp"
#include "elementwise/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"
#include "testing/spin_op.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::DType;
using loom::kernels::MapKind;
using loom::ops::MapExpr;
using loom::test::cpu;
using loom::test::HostArray;

constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const auto kKinds = loom::kernels::all_map_kinds();

// ---- the references -------------------------------------------------------------

std::vector<float> run_reference(MapKind kind, const std::vector<float>& x,
                                 const std::vector<float>& y,
                                 loom::kernels::MapScalars scalars = {}) {
  std::vector<float> out(x.size(), -7.0F);
  loom::kernels::map_reference(kind, DType::f32, DType::f32,
                               {x.data(), y.empty() ? nullptr : y.data(), out.data()}, x.size(),
                               scalars);
  return out;
}

TEST(ElementwiseReference, HandCheckedCases) {
  const std::vector<float> x{1.0F, -2.0F, 0.5F, -0.0F};
  const std::vector<float> y{3.0F, 4.0F, -0.25F, 2.0F};
  EXPECT_EQ(run_reference(MapKind::add, x, y), (std::vector<float>{4.0F, 2.0F, 0.25F, 2.0F}));
  EXPECT_EQ(run_reference(MapKind::mul, x, y), (std::vector<float>{3.0F, -8.0F, -0.125F, -0.0F}));
  EXPECT_EQ(run_reference(MapKind::axpby, x, y, {2.0F, -1.0F}),
            (std::vector<float>{-1.0F, -8.0F, 1.25F, -2.0F}));
  EXPECT_EQ(run_reference(MapKind::relu, x, {}), (std::vector<float>{1.0F, 0.0F, 0.5F, -0.0F}));
  const auto nan = run_reference(MapKind::relu, {std::nanf("")}, {});
  EXPECT_TRUE(std::isnan(nan[0])) << "relu lets NaN through";
  const auto g = run_reference(MapKind::gelu_tanh, {1.0F, -1.0F, 0.0F, 3.0F}, {});
  EXPECT_NEAR(g[0], 0.8411920F, 1e-6);  // 0.5 (1 + tanh(sqrt(2/pi) 1.044715))
  EXPECT_NEAR(g[1], -0.1588080F, 1e-6);
  EXPECT_EQ(g[2], 0.0F);
  EXPECT_NEAR(g[3], 2.9963627F, 1e-6);
}

// gelu is computed as x / (1 + exp(-2u)): the same function as the textbook
// 0.5 x (1 + tanh(u)), checked here against that form in double, with the
// textbook's values at the ends of the range.
TEST(ElementwiseReference, GeluTanhIsTheTanhFormEvenAtTheEnds) {
  std::vector<float> x;
  for (int k = -8 * 64; k <= 8 * 64; ++k) x.push_back(static_cast<float>(k) / 64.0F);
  const auto g = run_reference(MapKind::gelu_tanh, x, {});
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    const auto want = static_cast<float>(0.5 * v * (1.0 + std::tanh(u)));
    EXPECT_TRUE(loom::test::close(g[i], want, DType::f32, false))
        << "gelu(" << x[i] << ") = " << g[i] << ", want " << want;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const auto e = run_reference(MapKind::gelu_tanh,
                               {inf, -inf, std::nanf(""), -20.0F, 20.0F, 1e-30F, -1e-30F}, {});
  EXPECT_EQ(e[0], inf);
  EXPECT_TRUE(std::isnan(e[1])) << "-inf (1 + tanh(-inf)) is -inf * 0";
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 0.0F);
  EXPECT_TRUE(std::signbit(e[3])) << "gelu(-20) is a negative zero, as -10 (1 - 1) is";
  EXPECT_EQ(e[4], 20.0F);
  EXPECT_EQ(e[5], 0.5e-30F);
  EXPECT_EQ(e[6], -0.5e-30F);
}

TEST(ElementwiseReference, CastRoundsOnceToTheOutputDtype) {
  const std::vector<float> x{1.0F + 0x1p-11F, 1.0F + 3 * 0x1p-11F, 70000.0F};
  HostArray h(DType::f16, 3);
  loom::kernels::map_reference(MapKind::cast, DType::f32, DType::f16, {x.data(), nullptr, h.data()},
                               3);
  EXPECT_EQ(h.get(0), 1.0F);
  EXPECT_EQ(h.get(1), 1.0F + 4 * 0x1p-11F);
  EXPECT_TRUE(std::isinf(h.get(2)));
  HostArray b(DType::bf16, 3);
  loom::kernels::map_reference(MapKind::cast, DType::f16, DType::bf16,
                               {h.data(), nullptr, b.data()}, 3);
  EXPECT_EQ(b.get(0), 1.0F);
  EXPECT_EQ(b.get(1), 1.0F);  // 1 + 2^-9 is below bf16's half unit (2^-8)
}

TEST(ElementwiseReference, SupportedCombinationsAndRejections) {
  for (MapKind k : kKinds) {
    for (DType in : kFloatTypes) {
      for (DType out : kFloatTypes) {
        EXPECT_EQ(loom::kernels::map_supports(k, in, out), k == MapKind::cast || in == out);
      }
    }
    EXPECT_FALSE(loom::kernels::map_supports(k, DType::i32, DType::i32));
  }
  float a = 1.0F;
  EXPECT_THROW(loom::kernels::map_reference(MapKind::add, DType::f32, DType::f16, {&a, &a, &a}, 1),
               loom::InvalidArgument);
  using loom::ops::MapVariant;
  EXPECT_EQ(loom::ops::parse_variant<MapVariant>("vectorized"), MapVariant::vectorized);
  EXPECT_EQ(loom::ops::parse_variant<MapVariant>("grid_stride"), MapVariant::grid_stride);
  EXPECT_FALSE(loom::ops::parse_variant<MapVariant>("fast").has_value());
  EXPECT_EQ(to_string(MapVariant::automatic), "automatic");
}

TEST(ElementwiseReference, CoalesceMergesContiguousDimensions) {
  loom::kernels::MapGeometry g;
  g.rank = 3;
  g.shape = {2, 3, 4};
  g.out_strides = {12, 4, 1};
  g.x_strides = {12, 4, 1};
  g.y_strides = {12, 4, 1};
  auto c = loom::kernels::coalesce(g);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.shape[0], 24);
  g.x_strides = {12, 1, 3};  // x transposed in its last two dimensions
  c = loom::kernels::coalesce(g);
  EXPECT_EQ(c.rank, 3);
  g.x_strides = {24, 4, 1};  // rows of a wider tensor: the last two still merge
  c = loom::kernels::coalesce(g);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.shape[1], 12);
  g.shape = {1, 3, 1};
  c = loom::kernels::coalesce(g);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.numel(), 3);
}

TEST(ElementwiseReference, StridedEqualsContiguousOnATranspose) {
  auto rng = loom::test::seeded_engine();
  const std::size_t rows = 37;
  const std::size_t cols = 29;
  const HostArray x = loom::test::random_array(DType::f32, rows * cols, rng);
  const HostArray y = loom::test::random_array(DType::f32, rows * cols, rng);
  // out[c][r] = x[r][c] * y[c][r]: x read through its transpose.
  loom::kernels::MapGeometry g;
  g.rank = 2;
  g.shape = {static_cast<std::int64_t>(cols), static_cast<std::int64_t>(rows)};
  g.out_strides = {static_cast<std::int64_t>(rows), 1};
  g.x_strides = {1, static_cast<std::int64_t>(cols)};
  g.y_strides = {static_cast<std::int64_t>(rows), 1};
  HostArray out(DType::f32, rows * cols);
  loom::kernels::map_strided_reference(MapKind::mul, DType::f32, DType::f32,
                                       {x.data(), y.data(), out.data()}, g);
  for (std::size_t c = 0; c < cols; ++c) {
    for (std::size_t r = 0; r < rows; ++r) {
      ASSERT_EQ(out.get(c * rows + r), x.get(r * cols + c) * y.get(c * rows + r));
    }
  }
}

// ---- ops through a graph on the CPU backend -------------------------------------

loom::Tensor host_tensor(loom::Runtime& rt, const HostArray& a, const loom::Shape& shape) {
  auto t = rt.tensor(a.dtype, shape);
  std::memcpy(t.data(), a.data(), a.bytes.size());
  return t;
}

HostArray read_back(const loom::Tensor& t) {
  HostArray a(t.dtype(), static_cast<std::size_t>(t.numel()));
  std::memcpy(a.data(), t.data(), a.bytes.size());
  return a;
}

loom::OpPtr make_op(MapKind kind, const loom::Tensor& x, const loom::Tensor& y,
                    const loom::Tensor& out, loom::kernels::MapScalars s,
                    const loom::Tensor& z = {}) {
  return loom::test::make_map_op(kind, x, y, z, out, s);
}

TEST(ElementwiseOps, EveryMapAndDtypeThroughAGraphOnTheCpuBackend) {
  loom::Runtime rt(cpu(2));
  auto rng = loom::test::seeded_engine();
  const std::size_t n = 4097;
  const loom::kernels::MapScalars s{1.5F, -0.75F};
  for (MapKind kind : kKinds) {
    for (DType in : kFloatTypes) {
      for (DType out_dtype : kFloatTypes) {
        if (!loom::kernels::map_supports(kind, in, out_dtype)) continue;
        const auto [x, y, z] = loom::test::map_inputs(kind, in, n, rng);
        HostArray want(out_dtype, n);
        loom::kernels::map_reference(kind, in, out_dtype,
                                     {x.data(), y.data(), want.data(), z.data()}, n, s);
        auto tx = host_tensor(rt, x, {static_cast<std::int64_t>(n)});
        auto ty = host_tensor(rt, y, {static_cast<std::int64_t>(n)});
        auto tz = host_tensor(rt, z, {static_cast<std::int64_t>(n)});
        auto tout = rt.tensor(out_dtype, {static_cast<std::int64_t>(n)});
        std::memset(tout.data(), 0xFF, tout.nbytes());
        loom::Graph g;
        g.add(make_op(kind, tx, ty, tout, s, tz));
        rt.submit(g).wait();
        EXPECT_EQ(loom::test::compare(read_back(tout), want, true), "")
            << to_string(kind) << " " << to_string(in) << " -> " << to_string(out_dtype);
      }
    }
  }
}

TEST(ElementwiseOps, StridedViewsTakeTheStridedPath) {
  loom::Runtime rt(cpu(2));
  auto rng = loom::test::seeded_engine();
  const HostArray x = loom::test::random_array(DType::bf16, 6 * 10, rng);
  const HostArray y = loom::test::random_array(DType::bf16, 10 * 6, rng);
  auto tx = host_tensor(rt, x, {6, 10});
  auto ty = host_tensor(rt, y, {10, 6});
  auto out = rt.tensor(DType::bf16, {10, 3});
  // x transposed, y's even columns: both views; out contiguous.
  const auto xv = tx.transpose(0, 1).slice(1, 0, 3);  // [10, 3], strides [1, 10]
  const auto yv = ty.slice(1, 0, 6, 2);               // [10, 3], strides [6, 2]
  loom::Graph g;
  g.add(loom::ops::add(xv, yv, out));
  auto out_t = rt.tensor(DType::f32, {3, 10});
  g.add(loom::ops::cast(out.transpose(0, 1), out_t));  // a transposed input to a cast
  rt.submit(g).wait();
  const HostArray got = read_back(out);
  const HostArray got_t = read_back(out_t);
  for (std::size_t r = 0; r < 10; ++r) {
    for (std::size_t c = 0; c < 3; ++c) {
      HostArray want(DType::bf16, 1);
      want.set(0, x.get(c * 10 + r) + y.get(r * 6 + 2 * c));
      ASSERT_EQ(got.get(r * 3 + c), want.get(0)) << r << "," << c;
      ASSERT_EQ(got_t.get(c * 10 + r), want.get(0)) << r << "," << c;
    }
  }
}

TEST(ElementwiseOps, InPlaceOnTheSameView) {
  loom::Runtime rt(cpu(2));
  auto t = rt.tensor<float>({5});
  const float in[5] = {-1.0F, 2.0F, -3.0F, 4.0F, 0.5F};
  std::memcpy(t.data(), in, sizeof in);
  loom::Graph g;
  g.add(loom::ops::relu(t, t));
  g.add(loom::ops::axpby(2.0F, t, 1.0F, t, t));
  rt.submit(g).wait();
  const float* got = t.data_as<float>();
  EXPECT_EQ(got[0], 0.0F);
  EXPECT_EQ(got[1], 6.0F);
  EXPECT_EQ(got[3], 12.0F);
}

// The task is named "suspect" in these rejections.
void expect_rejected(loom::Runtime& rt, const loom::OpPtr& op, const std::string& words) {
  loom::test::expect_rejected(rt, op, words, "suspect");
}

TEST(ElementwiseOps, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({8});
  auto h = rt.tensor(DType::f16, {8});
  auto i = rt.tensor<std::int32_t>({8});
  auto short_one = rt.tensor<float>({7});
  auto matrix = rt.tensor<float>({4, 4});
  expect_rejected(rt, loom::ops::add(a, i, b), "must be one of f32, f16, bf16");
  expect_rejected(rt, loom::ops::add(a, h, b), "one dtype");
  expect_rejected(rt, loom::ops::relu(a, h), "cast converts");
  expect_rejected(rt, loom::ops::mul(a, short_one, b),
                  "mul: b [7] does not broadcast to out's shape [8]");
  expect_rejected(rt, loom::ops::add(matrix, a.slice(0, 0, 4), a.slice(0, 0, 4)),
                  "does not broadcast");
  expect_rejected(rt, loom::ops::cast(a.slice(0, 0, 1), b),
                  "one shape");  // a cast does not broadcast
  expect_rejected(rt, loom::ops::gelu_tanh(a, loom::Tensor()), "undefined");
  expect_rejected(rt, loom::ops::cast(i, a), "must be one of");
  // out overlapping an input without being the same view
  expect_rejected(rt, loom::ops::relu(matrix.slice(0, 0, 3), matrix.slice(0, 1, 4)), "overlaps");
  expect_rejected(rt, loom::ops::relu(matrix, matrix.transpose(0, 1)), "overlaps");
  // out whose elements share memory (a zero stride)
  std::vector<float> one(1);
  auto expanded = rt.provide(one.data(), DType::f32, {8}, loom::Memory::pageable, loom::Strides{0});
  expect_rejected(rt, loom::ops::relu(a, expanded), "share memory");
  // (Two memory spaces cannot meet on the CPU backend, which has no pinned
  // memory: the GPU test checks that rejection.)
  // vector_add keeps its contract: f32, contiguous
  expect_rejected(rt, loom::ops::vector_add(h, h, h), "must be f32");
  expect_rejected(rt, loom::ops::vector_add(matrix.transpose(0, 1), matrix, matrix), "contiguous");
  // a variant that is not one of the family's (a cast of another number)
  const auto bogus = static_cast<loom::ops::MapVariant>(9);
  expect_rejected(rt, loom::ops::add(a, b, b, bogus),
                  "add: unknown variant 9 (automatic, naive, grid_stride, vectorized)");
  expect_rejected(rt, loom::ops::relu(a, b, bogus), "relu: unknown variant 9");
  expect_rejected(rt, loom::ops::vector_add(a, b, b, bogus), "vector_add: unknown variant 9");
}

// Every map takes the family's variant; the CPU backend runs its reference
// whichever is named (the GPU test checks each kernel against it).
TEST(ElementwiseOps, EveryVariantIsAcceptedAndGivesTheReference) {
  loom::Runtime rt(cpu(1));
  using loom::ops::MapVariant;
  auto x = rt.tensor<float>({5});
  auto y = rt.tensor<float>({5});
  const float in[5] = {-1.0F, 2.0F, -3.0F, 4.0F, 0.5F};
  std::memcpy(x.data(), in, sizeof in);
  for (const auto name : loom::ops::VariantNames<MapVariant>::names) {
    const MapVariant v = *loom::ops::parse_variant<MapVariant>(name);
    loom::Graph g;
    g.add(loom::ops::relu(x, y, v));
    g.add(loom::ops::vector_add(y, x, y, v));
    rt.submit(g).wait();
    const float* got = y.data_as<float>();
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i], std::max(in[i], 0.0F) + in[i]) << name;
  }
}

// The README: "vector_add, fill, scale_copy, spin take contiguous tensors
// only: a view that is itself contiguous (a slice along the first dimension,
// a reshape) is fine; a strided one (a transpose, a slice along a later
// dimension, a step) is rejected at submit with a message naming the task
// and saying "must be contiguous"". Every operand of each, each kind of
// strided view; then the contiguous views run and write where they point.
TEST(ElementwiseOps, ContiguousOnlyOpsRefuseStridedViewsAndTakeContiguousOnes) {
  loom::Runtime rt(cpu(1));
  auto matrix = rt.tensor<float>({4, 4});
  auto other = rt.tensor<float>({4, 4});
  auto row = rt.tensor<float>({8});
  const std::vector<std::pair<const char*, loom::Tensor>> strided = {
      {"a transpose", matrix.transpose(0, 1)},
      {"a slice along a later dimension", matrix.slice(1, 0, 2)},
      {"a step", row.slice(0, 0, 8, 2)},
  };
  const auto twin = [&](const loom::Tensor& view) { return rt.tensor<float>(view.shape()); };
  for (const auto& [what, view] : strided) {
    SCOPED_TRACE(what);
    ASSERT_FALSE(view.is_contiguous());
    expect_rejected(rt, loom::ops::fill(view, 1.0F), "must be contiguous");
    expect_rejected(rt, loom::ops::scale_copy(view, twin(view), 2.0F), "must be contiguous");
    expect_rejected(rt, loom::ops::scale_copy(twin(view), view, 2.0F), "must be contiguous");
    expect_rejected(rt, loom::ops::vector_add(view, twin(view), twin(view)), "must be contiguous");
    expect_rejected(rt, loom::ops::vector_add(twin(view), view, twin(view)), "must be contiguous");
    expect_rejected(rt, loom::ops::vector_add(twin(view), twin(view), view), "must be contiguous");
    expect_rejected(rt, loom::testing::spin(view, 1), "must be contiguous");
  }

  // Contiguous views: rows 1..2 of a matrix (a slice along the first
  // dimension, at an offset) and reshapes. Each is accepted and touches only
  // its own elements.
  const auto values = [](const loom::Tensor& t) {
    const float* p = t.data_as<float>();
    return std::vector<float>(p, p + t.numel());
  };
  std::fill_n(matrix.data_as<float>(), 16, 0.0F);
  std::fill_n(other.data_as<float>(), 16, 0.0F);
  const auto middle = matrix.slice(0, 1, 3);  // rows 1 and 2
  ASSERT_TRUE(middle.is_contiguous());
  const auto flat = other.reshape({16});
  const auto flat_middle = middle.reshape({8});
  loom::Graph g;
  g.add(loom::ops::fill(middle, 2.0F), {.name = "fill a slice"});
  g.add(loom::ops::scale_copy(flat_middle, flat.slice(0, 4, 12), 3.0F),
        {.name = "scale_copy a reshape"});
  g.add(loom::ops::vector_add(flat.slice(0, 4, 12).reshape({2, 4}), middle, middle),
        {.name = "vector_add reshapes"});
  g.add(loom::testing::spin(flat_middle, 1), {.name = "spin a reshape"});
  ASSERT_NO_THROW(rt.submit(g).wait());
  std::vector<float> want_matrix(16, 0.0F);
  std::vector<float> want_other(16, 0.0F);
  for (int i = 4; i < 12; ++i) {
    want_other[i] = 6.0F;   // 3 * 2
    want_matrix[i] = 8.0F;  // 6 + 2
  }
  want_matrix[4] += 1.0F;  // spin adds one to its first element
  EXPECT_EQ(values(matrix), want_matrix);
  EXPECT_EQ(values(other), want_other);
}

TEST(ElementwiseOps, AZeroStrideInputIsABroadcast) {
  loom::Runtime rt(cpu(1));
  float scalar = 3.0F;
  auto s = rt.provide(&scalar, DType::f32, {4}, loom::Memory::pageable, loom::Strides{0});
  auto x = rt.tensor<float>({4});
  auto out = rt.tensor<float>({4});
  for (int k = 0; k < 4; ++k) x.data_as<float>()[k] = static_cast<float>(k);
  loom::Graph g;
  g.add(loom::ops::mul(x, s, out));
  rt.submit(g).wait();
  EXPECT_EQ(out.data_as<float>()[3], 9.0F);
}

// ---- fusion -----------------------------------------------------------------------

// relu(axpby(a, x, b, y)) * x, then gelu and a round to bf16: five maps, one kernel.
MapExpr sample_chain(float alpha, float beta) {
  const auto x = MapExpr::input(0);
  const auto y = MapExpr::input(1);
  using namespace loom::ops;
  return gelu_tanh(cast(relu(axpby(alpha, x, beta, y)) * x, DType::bf16)) + 0.5F * y;
}

TEST(ElementwiseFusion, AFusedChainEqualsTheUnfusedChainOnTheCpuBackend) {
  loom::Runtime rt(cpu(2));
  auto rng = loom::test::seeded_engine();
  const std::int64_t n = 4097;
  for (DType d : kFloatTypes) {
    const HostArray x = loom::test::random_array(d, static_cast<std::size_t>(n), rng);
    const HostArray y = loom::test::random_array(d, static_cast<std::size_t>(n), rng);
    auto tx = host_tensor(rt, x, {n});
    auto ty = host_tensor(rt, y, {n});
    auto fused = rt.tensor(d, {n});
    std::memset(fused.data(), 0xFF, fused.nbytes());
    // The unfused chain, f32 intermediates: the same roundings as the fused one.
    auto xf = rt.tensor(DType::f32, {n});
    auto yf = rt.tensor(DType::f32, {n});
    auto t1 = rt.tensor(DType::f32, {n});
    auto tb = rt.tensor(DType::bf16, {n});
    auto t2 = rt.tensor(DType::f32, {n});
    auto unfused = rt.tensor(d, {n});
    loom::Graph g;
    g.add(loom::ops::fused_map({tx, ty}, fused, sample_chain(1.5F, -0.5F)));
    g.add(loom::ops::cast(tx, xf));
    g.add(loom::ops::cast(ty, yf));
    g.add(loom::ops::axpby(1.5F, xf, -0.5F, yf, t1));
    g.add(loom::ops::relu(t1, t1));
    g.add(loom::ops::mul(t1, xf, t1));
    g.add(loom::ops::cast(t1, tb));
    g.add(loom::ops::cast(tb, t2));
    g.add(loom::ops::gelu_tanh(t2, t2));
    g.add(loom::ops::axpby(1.0F, t2, 0.5F, yf, t2));  // + 0.5 y
    g.add(loom::ops::cast(t2, unfused));
    rt.submit(g).wait();
    EXPECT_EQ(loom::test::compare(read_back(fused), read_back(unfused), true), "") << to_string(d);
  }
}

TEST(ElementwiseFusion, SharedSubexpressionsAreComputedOnceAndConstantsAreArguments) {
  {
    loom::kernels::FusedProgram p;
    p.inputs = {DType::f32};
    p.output = DType::f32;
    p.code = {{loom::kernels::FusedOpcode::input, -1, -1, 0},
              {loom::kernels::FusedOpcode::relu, 0}};
    const std::string source = loom::kernels::fused_source(p);
    p.constants = {2.0F};  // an unused constant changes nothing of the source
    EXPECT_EQ(loom::kernels::fused_source(p), source);
  }
  const auto x = MapExpr::input(0);
  const auto r = loom::ops::relu(x);
  EXPECT_EQ((r * r).to_string(), "mul(relu(in0), relu(in0))");
  loom::Runtime rt(cpu(1));
  auto t = rt.tensor<float>({3});
  auto out = rt.tensor<float>({3});
  const float in[3] = {-1.0F, 2.0F, 3.0F};
  std::memcpy(t.data(), in, sizeof in);
  loom::Graph g;
  g.add(loom::ops::fused_map({t}, out, r * r + 2.0F * x));
  rt.submit(g).wait();
  EXPECT_EQ(out.data_as<float>()[0], -2.0F);
  EXPECT_EQ(out.data_as<float>()[1], 8.0F);
  EXPECT_EQ(out.data_as<float>()[2], 15.0F);
}

TEST(ElementwiseFusion, BadChainsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({8});
  auto m = rt.tensor<float>({2, 4});
  const auto x = MapExpr::input(0);
  expect_rejected(rt, loom::ops::fused_map({a}, b, MapExpr::input(1)), "malformed");
  expect_rejected(rt, loom::ops::fused_map({a}, b, MapExpr(nullptr)), "empty MapExpr");
  expect_rejected(rt, loom::ops::fused_map({}, b, x), "at least one input");
  expect_rejected(rt, loom::ops::fused_map({m.transpose(0, 1)}, b, x), "does not broadcast");
  expect_rejected(rt, loom::ops::fused_map({rt.tensor<std::int32_t>({8})}, b, x), "must be one of");
  expect_rejected(rt, loom::ops::fused_map({a}, rt.tensor<float>({9}), x), "does not broadcast");
  expect_rejected(rt, loom::ops::fused_map({a}, {b, rt.tensor<float>({2, 4})}, {x, x}),
                  "one shape");
  expect_rejected(rt, loom::ops::fused_map({a}, {b, b}, {x, x}), "overlaps output 0");
  expect_rejected(rt, loom::ops::fused_map({a}, {b}, {x, x}),
                  "one expression an output; got 1 outs and 2 exprs");
  expect_rejected(
      rt, loom::ops::fused_map({a}, std::vector<loom::Tensor>(5, b), std::vector<MapExpr>(5, x)),
      "at most 4 outputs");
  std::vector<loom::Tensor> nine(9, a);
  expect_rejected(rt, loom::ops::fused_map(nine, b, x), "at most 8 inputs");
  MapExpr e = x;
  for (int k = 0; k < 40; ++k) e = 1.5F * e;
  expect_rejected(rt, loom::ops::fused_map({a}, b, e), "scalars");
}

// A malformed program says what exactly is wrong: which operand, which
// input, which opcode.
TEST(ElementwiseFusion, AMalformedChainSaysWhatIsWrong) {
  loom::Runtime rt(cpu(1));
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({8});
  expect_rejected(rt, loom::ops::fused_map({a}, b, MapExpr::input(1)),
                  "reads input 1, but the chain has 1 input");
  expect_rejected(rt, loom::ops::fused_map({a}, b, MapExpr::input(-2)),
                  "reads input -2, but the chain has 1 input");
  using loom::kernels::FusedOpcode;
  const auto refusal = [](const loom::kernels::FusedProgram& p) -> std::string {
    try {
      loom::kernels::check_program(p);
    } catch (const loom::InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  loom::kernels::FusedProgram p;
  p.inputs = {DType::f32};
  p.code = {{FusedOpcode::input, -1, -1, 0}, {FusedOpcode::add, 0, 1, 0}};
  EXPECT_NE(refusal(p).find("instruction 1 (add): operand b is register 1"), std::string::npos)
      << refusal(p);
  p.code = {{FusedOpcode::input, -1, -1, 0}, {FusedOpcode::axpby, 0, 0, 0}};
  EXPECT_NE(refusal(p).find("scalar slot 0"), std::string::npos) << refusal(p);
  p.code = {{FusedOpcode::input, -1, -1, 0}, {static_cast<FusedOpcode>(99), 0, -1, 0}};
  EXPECT_NE(refusal(p).find("unknown opcode 99"), std::string::npos) << refusal(p);
  p.code = {{FusedOpcode::input, -1, -1, 0}, {FusedOpcode::round, 0, -1, 0, DType::i32}};
  EXPECT_NE(refusal(p).find("rounds to i32"), std::string::npos) << refusal(p);
}

// The documented limit is 256 maps: 256 are accepted, 257 refused.
TEST(ElementwiseFusion, AChainOfExactly256MapsIsAccepted) {
  loom::Runtime rt(cpu(1));
  auto a = rt.tensor<float>({8});
  auto b = rt.tensor<float>({8});
  for (int i = 0; i < 8; ++i) a.data_as<float>()[i] = static_cast<float>(i) - 4.0F;
  MapExpr e = MapExpr::input(0);
  for (int k = 0; k < 256; ++k) e = loom::ops::relu(e);
  loom::Graph g;
  g.add(loom::ops::fused_map({a}, b, e), {.name = "deep"});
  EXPECT_NO_THROW(rt.submit(g).wait());
  EXPECT_EQ(b.data_as<float>()[7], 3.0F);
  EXPECT_EQ(b.data_as<float>()[0], 0.0F);
  expect_rejected(rt, loom::ops::fused_map({a}, b, loom::ops::relu(e)),
                  "at most 256 maps in one chain, got 257");
}

// The generated source compiles for the architectures loom targets, for
// every dtype of input and output: NVRTC needs no GPU.
TEST(ElementwiseFusion, GeneratedKernelsCompileWithNvrtc) {
  std::string why;
  if (!loom::kernels::nvrtc_available(&why)) GTEST_SKIP() << why;
  for (DType in : kFloatTypes) {
    for (DType out : kFloatTypes) {
      loom::kernels::FusedProgram p;
      p.inputs = {in, DType::f32};
      p.output = out;
      p.constants = {2.0F, -1.0F, 0.5F};
      using Op = loom::kernels::FusedOpcode;
      p.code = {{Op::input, -1, -1, 0},
                {Op::input, -1, -1, 1},
                {Op::axpby, 0, 1, 0},
                {Op::relu, 2},
                {Op::gelu_tanh, 3},
                {Op::constant, -1, -1, 2},
                {Op::mul, 4, 5},
                {Op::round, 6, -1, 0, DType::f16},
                {Op::round, 7, -1, 0, DType::bf16},
                {Op::add, 8, 0}};
      // sm_90 (the target); for 16-bit outputs also sm_75, which lacks the
      // hardware bf16 and paired 16-bit conversions (the fallbacks compile).
      for (const auto& [major, minor] : {std::pair{9, 0}, std::pair{7, 5}}) {
        if (major == 7 && out == DType::f32) continue;
        const auto cubin =
            loom::kernels::nvrtc_compile(loom::kernels::fused_source(p), major, minor);
        EXPECT_GT(cubin.size(), 0U)
            << to_string(in) << " -> " << to_string(out) << " sm_" << major << minor;
      }
    }
  }
}

// Every whole vector moves as 16 bytes of the output (one store a warp
// instruction covering whole sectors), the inputs as 8, 16 or 32 bytes, and
// 16-bit outputs are rounded a pair at a time.
TEST(ElementwiseFusion, GeneratedKernelsMoveWholeVectors) {
  using Op = loom::kernels::FusedOpcode;
  const auto source = [](DType in, DType out) {
    loom::kernels::FusedProgram p;
    p.inputs = {in, in};
    p.output = out;
    p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::add, 0, 1}, {Op::gelu_tanh, 2}};
    return loom::kernels::fused_source(p);
  };
  const auto has = [](const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
  };
  const std::string bf16 = source(DType::bf16, DType::bf16);
  EXPECT_TRUE(has(bf16, "#define LOOM_V 8\n#define LOOM_U 2\n")) << bf16;
  EXPECT_TRUE(has(bf16, "loom_v16 raw0[LOOM_U][1];")) << bf16;
  EXPECT_TRUE(has(bf16, "raw[w / 4].w[w % 4] = loom_f2bf2(")) << bf16;
  EXPECT_TRUE(has(bf16, "= loom_map_gelu_tanh(r2);")) << bf16;  // map_math.inc's, as the maps'
  const std::string f16 = source(DType::f16, DType::f16);
  EXPECT_TRUE(has(f16, "raw[w / 4].w[w % 4] = loom_f2h2(")) << f16;
  const std::string widening = source(DType::f16, DType::f32);  // 8-byte input vectors, 4 a thread
  EXPECT_TRUE(has(widening, "#define LOOM_V 4\n#define LOOM_U 4\n")) << widening;
  EXPECT_TRUE(has(widening, "loom_v8 raw0[LOOM_U][1];")) << widening;
  const std::string narrowing = source(DType::f32, DType::bf16);  // 32-byte input vectors
  EXPECT_TRUE(has(narrowing, "#define LOOM_V 8\n#define LOOM_U 2\n")) << narrowing;
  EXPECT_TRUE(has(narrowing, "loom_v16 raw0[LOOM_U][2];")) << narrowing;
  const std::string f32 = source(DType::f32, DType::f32);
  EXPECT_TRUE(has(f32, "#define LOOM_V 4\n#define LOOM_U 2\n")) << f32;
}

TEST(ElementwiseFusion, ACompileErrorCarriesTheLog) {
  std::string why;
  if (!loom::kernels::nvrtc_available(&why)) GTEST_SKIP() << why;
  try {
    (void)loom::kernels::nvrtc_compile("this is not CUDA", 9, 0);
    FAIL();
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not compile"), std::string::npos) << e.what();
  }
}

// ---- the maps added for a training step ------------------------------------------

float one(MapKind kind, float x, float y = 0.0F, float z = 0.0F) {
  float out = -7.0F;
  loom::kernels::map_reference(kind, DType::f32, DType::f32, {&x, &y, &out, &z}, 1);
  return out;
}

TEST(ElementwiseReference, TheNewMapsOnHandCheckedCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::nanf("");
  EXPECT_EQ(one(MapKind::exp, 0.0F), 1.0F);
  EXPECT_NEAR(one(MapKind::exp, 1.0F), 2.7182817F, 1e-6);
  EXPECT_EQ(one(MapKind::exp, -inf), 0.0F);
  EXPECT_EQ(one(MapKind::log, 1.0F), 0.0F);
  EXPECT_EQ(one(MapKind::log, 0.0F), -inf);
  EXPECT_TRUE(std::isnan(one(MapKind::log, -1.0F)));
  EXPECT_EQ(one(MapKind::sqrt, 4.0F), 2.0F);
  EXPECT_EQ(one(MapKind::rsqrt, 4.0F), 0.5F);
  EXPECT_EQ(one(MapKind::rsqrt, 0.0F), inf);
  EXPECT_EQ(one(MapKind::tanh, 0.0F), 0.0F);
  EXPECT_EQ(one(MapKind::tanh, 30.0F), 1.0F);
  EXPECT_EQ(one(MapKind::sigmoid, 0.0F), 0.5F);
  EXPECT_EQ(one(MapKind::sigmoid, 100.0F), 1.0F);
  EXPECT_LT(one(MapKind::sigmoid, -100.0F), 1e-40F);
  EXPECT_EQ(one(MapKind::abs, -2.5F), 2.5F);
  EXPECT_EQ(one(MapKind::neg, 2.5F), -2.5F);
  EXPECT_EQ(one(MapKind::sub, 3.0F, 4.5F), -1.5F);
  EXPECT_EQ(one(MapKind::div, 1.0F, 4.0F), 0.25F);
  EXPECT_EQ(one(MapKind::div, 1.0F, 0.0F), inf);
  EXPECT_EQ(one(MapKind::minimum, 1.0F, 2.0F), 1.0F);
  EXPECT_EQ(one(MapKind::maximum, 1.0F, 2.0F), 2.0F);
  EXPECT_TRUE(std::isnan(one(MapKind::minimum, 1.0F, nan))) << "NaN propagates, as torch's";
  EXPECT_TRUE(std::isnan(one(MapKind::minimum, nan, 1.0F)));
  EXPECT_TRUE(std::isnan(one(MapKind::maximum, 1.0F, nan)));
  EXPECT_TRUE(std::isnan(one(MapKind::maximum, nan, 1.0F)));
  EXPECT_EQ(one(MapKind::pow, 2.0F, 3.0F), 8.0F);
  EXPECT_EQ(one(MapKind::pow, 4.0F, 0.5F), 2.0F);
  EXPECT_EQ(one(MapKind::gt, 1.0F, 1.0F), 0.0F);
  EXPECT_EQ(one(MapKind::ge, 1.0F, 1.0F), 1.0F);
  EXPECT_EQ(one(MapKind::lt, 0.5F, 1.0F), 1.0F);
  EXPECT_EQ(one(MapKind::le, 2.0F, 1.0F), 0.0F);
  EXPECT_EQ(one(MapKind::eq, 2.0F, 2.0F), 1.0F);
  EXPECT_EQ(one(MapKind::eq, nan, nan), 0.0F);
  EXPECT_EQ(one(MapKind::gt, nan, 0.0F), 0.0F);
  EXPECT_EQ(one(MapKind::where, 0.0F, 5.0F, 6.0F), 6.0F);
  EXPECT_EQ(one(MapKind::where, 1.0F, 5.0F, 6.0F), 5.0F);
  EXPECT_EQ(one(MapKind::where, -0.0F, 5.0F, 6.0F), 6.0F);
  EXPECT_EQ(one(MapKind::relu_backward, 3.0F, 0.5F), 3.0F);
  EXPECT_EQ(one(MapKind::relu_backward, 3.0F, 0.0F), 0.0F);
  EXPECT_EQ(one(MapKind::relu_backward, 3.0F, -1.0F), 0.0F);
  EXPECT_EQ(one(MapKind::gelu_tanh_backward, 1.0F, 0.0F), 0.5F);
  EXPECT_EQ(one(MapKind::gelu_tanh_backward, 2.0F, 0.0F), 1.0F);
}

// gelu_tanh_backward is the derivative of gelu_tanh: against a central
// difference of the forward map in double over [-6, 6].
TEST(ElementwiseReference, GeluBackwardIsTheForwardsDerivative) {
  const auto gelu = [](double v) {
    return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  };
  for (int k = -6 * 32; k <= 6 * 32; ++k) {
    const double v = k / 32.0;
    const double h = 1e-5;
    const double want = (gelu(v + h) - gelu(v - h)) / (2 * h);
    EXPECT_NEAR(one(MapKind::gelu_tanh_backward, 1.0F, static_cast<float>(v)), want, 2e-6) << v;
    EXPECT_NEAR(one(MapKind::gelu_tanh_backward, -3.0F, static_cast<float>(v)), -3.0 * want, 6e-6)
        << v;
  }
}

// Inputs broadcast to out's shape by NumPy's rule: a row [N] over [B, N], a
// column [B, 1], a scalar of shape [] or [1], on every map kind's arity.
TEST(ElementwiseOps, InputsBroadcastToTheOutputsShape) {
  loom::Runtime rt(cpu(2));
  const std::int64_t rows = 3;
  const std::int64_t cols = 5;
  auto h = rt.tensor<float>({rows, cols});
  auto row = rt.tensor<float>({cols});
  auto column = rt.tensor<float>({rows, 1});
  auto scalar = rt.tensor<float>({});
  auto one_element = rt.tensor<float>({1});
  for (std::int64_t i = 0; i < rows * cols; ++i) h.data_as<float>()[i] = static_cast<float>(i) - 7;
  for (std::int64_t j = 0; j < cols; ++j) row.data_as<float>()[j] = 0.5F * static_cast<float>(j);
  for (std::int64_t i = 0; i < rows; ++i) column.data_as<float>()[i] = static_cast<float>(i % 2);
  scalar.data_as<float>()[0] = 3.0F;
  one_element.data_as<float>()[0] = -2.0F;
  auto biased = rt.tensor<float>({rows, cols});
  auto scaled = rt.tensor<float>({rows, cols});
  auto shifted = rt.tensor<float>({rows, cols});
  auto picked = rt.tensor<float>({rows, cols});
  auto outer = rt.tensor<float>({rows, cols});
  loom::Graph g;
  g.add(loom::ops::add(h, row, biased));
  g.add(loom::ops::mul(h, scalar, scaled));
  g.add(loom::ops::sub(one_element, h, shifted));
  g.add(loom::ops::where(column, h, row, picked));
  g.add(loom::ops::mul(column, row, outer));  // [3, 1] x [5] -> [3, 5]
  rt.submit(g).wait();
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const float x = h.data_as<float>()[i * cols + j];
      const float r = row.data_as<float>()[j];
      const float c = column.data_as<float>()[i];
      const auto at = i * cols + j;
      EXPECT_EQ(biased.data_as<float>()[at], x + r);
      EXPECT_EQ(scaled.data_as<float>()[at], x * 3.0F);
      EXPECT_EQ(shifted.data_as<float>()[at], -2.0F - x);
      EXPECT_EQ(picked.data_as<float>()[at], c != 0.0F ? x : r);
      EXPECT_EQ(outer.data_as<float>()[at], c * r);
    }
  }
}

// Empty tensors and dimensions of extent 1 on every path.
TEST(ElementwiseOps, EmptyAndSizeOneDimensions) {
  loom::Runtime rt(cpu(1));
  auto empty = rt.tensor<float>({0, 4});
  auto empty_out = rt.tensor<float>({0, 4});
  auto row = rt.tensor<float>({4});
  auto ones = rt.tensor<float>({1, 1, 3});
  auto ones_out = rt.tensor<float>({1, 1, 3});
  for (int k = 0; k < 3; ++k) ones.data_as<float>()[k] = static_cast<float>(k) + 1;
  loom::Graph g;
  g.add(loom::ops::exp(empty, empty_out));
  g.add(loom::ops::add(empty, row, empty_out));
  g.add(loom::ops::fused_map({empty, row}, empty_out, MapExpr::input(0) - MapExpr::input(1)));
  g.add(loom::ops::div(ones, ones.transpose(0, 1), ones_out));
  rt.submit(g).wait();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(ones_out.data_as<float>()[k], 1.0F);
}

// A hyperparameter in a tensor: a compiled graph replays with the value the
// tensor holds at each replay, recompiling nothing.
TEST(ElementwiseOps, AScalarTensorIsReadAtEveryReplay) {
  loom::Runtime rt(cpu(1));
  auto w = rt.tensor<float>({4});
  auto grad = rt.tensor<float>({4});
  auto lr = rt.tensor<float>({1});
  for (int k = 0; k < 4; ++k) {
    w.data_as<float>()[k] = 1.0F;
    grad.data_as<float>()[k] = static_cast<float>(k);
  }
  const auto in = [](int i) { return MapExpr::input(i); };
  loom::Graph g;
  g.add(loom::ops::fused_map({w, grad, lr}, w, in(0) - in(2) * in(1)), {.name = "sgd"});
  auto exe = rt.compile(g);
  lr.data_as<float>()[0] = 0.5F;
  exe.run().wait();
  EXPECT_EQ(w.data_as<float>()[3], 1.0F - 1.5F);
  lr.data_as<float>()[0] = 0.25F;
  exe.run().wait();
  EXPECT_EQ(w.data_as<float>()[3], 1.0F - 1.5F - 0.75F);
}

// ---- fusion of the new maps -------------------------------------------------------

// Every map in a fused chain equals the map alone, on the CPU backend (the
// same functions; the GPU test checks the generated kernel).
TEST(ElementwiseFusion, EveryMapFusedEqualsTheMapAlone) {
  loom::Runtime rt(cpu(2));
  auto rng = loom::test::seeded_engine();
  const std::int64_t n = 1000;
  const auto x = MapExpr::input(0);
  const auto y = MapExpr::input(1);
  const auto z = MapExpr::input(2);
  for (MapKind kind : kKinds) {
    if (kind == MapKind::cast) continue;  // a chain's cast rounds inside: tested above
    for (DType d : kFloatTypes) {
      const auto [hx, hy, hz] = loom::test::map_inputs(kind, d, static_cast<std::size_t>(n), rng);
      auto tx = host_tensor(rt, hx, {n});
      auto ty = host_tensor(rt, hy, {n});
      auto tz = host_tensor(rt, hz, {n});
      auto alone = rt.tensor(d, {n});
      auto fused = rt.tensor(d, {n});
      const loom::kernels::MapScalars s{1.5F, -0.75F};
      MapExpr e = x;
      switch (kind) {
        case MapKind::add: e = x + y; break;
        case MapKind::mul: e = x * y; break;
        case MapKind::axpby: e = loom::ops::axpby(s.alpha, x, s.beta, y); break;
        case MapKind::relu: e = loom::ops::relu(x); break;
        case MapKind::gelu_tanh: e = loom::ops::gelu_tanh(x); break;
        case MapKind::where: e = loom::ops::where(x, y, z); break;
#define LOOM_TEST_UNARY(name) \
  case MapKind::name: e = loom::ops::name(x); break;
          LOOM_UNARY_MATH_MAPS(LOOM_TEST_UNARY)
#undef LOOM_TEST_UNARY
#define LOOM_TEST_BINARY(name) \
  case MapKind::name: e = loom::ops::name(x, y); break;
          LOOM_BINARY_MATH_MAPS(LOOM_TEST_BINARY)
#undef LOOM_TEST_BINARY
        default: break;
      }
      loom::Graph g;
      g.add(make_op(kind, tx, ty, alone, s, tz));
      g.add(loom::ops::fused_map({tx, ty, tz}, fused, e));
      rt.submit(g).wait();
      EXPECT_EQ(loom::test::compare(read_back(fused), read_back(alone), true), "")
          << to_string(kind) << " " << to_string(d) << ": " << e.to_string();
    }
  }
}

// Several outputs from one pass; broadcast, scalar and strided inputs; a
// transposed output.
TEST(ElementwiseFusion, SeveralOutputsAndAnyLayout) {
  loom::Runtime rt(cpu(2));
  const std::int64_t rows = 4;
  const std::int64_t cols = 6;
  auto a = rt.tensor<float>({rows, cols});
  auto bias = rt.tensor<float>({cols});
  auto s = rt.tensor<float>({1});
  for (std::int64_t i = 0; i < rows * cols; ++i)
    a.data_as<float>()[i] = static_cast<float>(i % 7) - 3;
  for (std::int64_t j = 0; j < cols; ++j) bias.data_as<float>()[j] = static_cast<float>(j) / 4;
  s.data_as<float>()[0] = 2.0F;
  const auto in = [](int i) { return MapExpr::input(i); };
  const auto pre = in(0) + in(1);  // shared: computed once
  auto act = rt.tensor<float>({rows, cols});
  auto mask = rt.tensor(DType::bf16, {rows, cols});
  auto scaled_t = rt.tensor<float>({cols, rows});
  loom::Graph g;
  g.add(loom::ops::fused_map({a, bias, s}, {act, mask},
                             {loom::ops::relu(pre), loom::ops::gt(pre, MapExpr::constant(0.0F))}));
  // A transposed input and a transposed output: the strided form.
  g.add(loom::ops::fused_map({a.transpose(0, 1), s}, scaled_t, in(0) * in(1)));
  rt.submit(g).wait();
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const float p = a.data_as<float>()[i * cols + j] + bias.data_as<float>()[j];
      EXPECT_EQ(act.data_as<float>()[i * cols + j], p < 0 ? 0.0F : p);
      const auto bits = static_cast<const std::uint16_t*>(mask.data())[i * cols + j];
      EXPECT_EQ(bits, p > 0 ? 0x3F80 : 0x0000) << i << "," << j;
      EXPECT_EQ(scaled_t.data_as<float>()[j * rows + i], 2.0F * a.data_as<float>()[i * cols + j]);
    }
  }
  loom::Graph t;
  auto out_t = rt.tensor<float>({cols, rows});
  t.add(loom::ops::fused_map({a, s}, out_t.transpose(0, 1), in(0) - in(1)));  // a strided output
  rt.submit(t).wait();
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      EXPECT_EQ(out_t.data_as<float>()[j * rows + i], a.data_as<float>()[i * cols + j] - 2.0F);
    }
  }
  EXPECT_EQ(MapExpr(loom::ops::where(in(0), -in(1), in(2) / in(0))).to_string(),
            "where(in0, neg(in1), div(in2, in0))");
}

// The generated source of every opcode, the strided form and several outputs
// compile with NVRTC (no GPU needed).
TEST(ElementwiseFusion, EveryOpcodeAndFormCompilesWithNvrtc) {
  std::string why;
  if (!loom::kernels::nvrtc_available(&why)) GTEST_SKIP() << why;
  using Op = loom::kernels::FusedOpcode;
  loom::kernels::FusedProgram p;
  p.inputs = {DType::bf16, DType::f32, DType::f16};
  p.scalar_inputs = {false, true, false};
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::input, -1, -1, 2}};
  for (MapKind kind : kKinds) {
    if (kind == MapKind::cast || kind == MapKind::axpby) continue;
    loom::kernels::FusedInstr i{loom::kernels::opcode_of(kind), 0, 1, 0, DType::f32, 2};
    const int last = static_cast<int>(p.code.size()) - 1;
    i.a = last;  // a chain: each map reads the previous one's value
    p.code.push_back(i);
  }
  const int last = static_cast<int>(p.code.size()) - 1;
  p.outputs = {{last, DType::f32}, {last - 1, DType::bf16}, {0, DType::f16}};
  for (bool strided : {false, true}) {
    p.strided = strided;
    const std::string source = loom::kernels::fused_source(p);
    EXPECT_GT(loom::kernels::nvrtc_compile(source, 9, 0).size(), 0U) << source;
  }
}

// Several outputs over one DAG: the CPU interpretation of the program against
// its maps run one by one.
TEST(ElementwiseFusion, TheInterpreterWalksAnyGeometry) {
  using Op = loom::kernels::FusedOpcode;
  loom::kernels::FusedProgram p;
  p.inputs = {DType::f32, DType::f32};
  p.strided = true;
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::sub, 0, 1}, {Op::exp, 2}};
  p.outputs = {{2, DType::f32}, {3, DType::f32}};
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  const float y = 0.5F;
  std::vector<float> diff(6, -1.0F);
  std::vector<float> e(6, -1.0F);
  loom::kernels::FusedGeometry g;
  g.rank = 2;
  g.shape[0] = 2;
  g.shape[1] = 3;
  g.strides[0][0] = 1;  // x read transposed: x is [3, 2]
  g.strides[0][1] = 2;
  g.strides[1][0] = 0;  // y a scalar
  g.strides[1][1] = 0;
  g.strides[2][0] = 3;
  g.strides[2][1] = 1;
  g.strides[3][0] = 3;
  g.strides[3][1] = 1;
  loom::kernels::fused_map_reference(p, {x.data(), &y}, {diff.data(), e.data()}, g);
  EXPECT_EQ(diff, (std::vector<float>{0.5F, 2.5F, 4.5F, 1.5F, 3.5F, 5.5F}));
  EXPECT_EQ(e[1], std::exp(2.5F));
  const auto merged = loom::kernels::coalesce(g, 4);
  EXPECT_EQ(merged.rank, 2);
}

}  // namespace
