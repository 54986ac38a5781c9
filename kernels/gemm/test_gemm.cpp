// SGEMM on the CPU: the reference against hand-checked products and a plain
// triple loop in every layout, and loom::ops::matmul through graphs on the CPU
// backend (row- and column-major operands as transposed views, alpha and
// beta, a NaN-poisoned C with beta = 0) and its rejections at submit.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops/gemm.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "common/convert.hpp"
#include "gemm/hgemm.hpp"
#include "gemm/sgemm.hpp"
#include "gemm/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace {

using loom::kernels::SgemmArgs;
using loom::test::cpu;
using loom::test::gemm::HostMatrix;
using loom::test::gemm::Order;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The definition, one element at a time, in double.
HostMatrix triple_loop(const HostMatrix& a, const HostMatrix& b, const HostMatrix& c0, float alpha,
                       float beta) {
  HostMatrix c = c0;
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (std::int64_t j = 0; j < b.cols; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < a.cols; ++k) sum += double(a.at(i, k)) * b.at(k, j);
      c.at(i, j) =
          static_cast<float>(beta == 0.0F ? alpha * sum : alpha * sum + beta * c0.at(i, j));
    }
  }
  return c;
}

TEST(SgemmReference, HandCheckedProduct) {
  // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154]
  HostMatrix a(2, 3, Order::row_major), b(3, 2, Order::col_major), c(2, 2, Order::row_major);
  a.data = {1, 2, 3, 4, 5, 6};
  b.data = {7, 9, 11, 8, 10, 12};  // column-major
  c.data = {1, 1, 1, 1};
  loom::kernels::sgemm_reference(loom::test::gemm::product_args(a, b, c, 2.0F, -1.0F));
  EXPECT_EQ(c.data, (std::vector<float>{115, 127, 277, 307}));
}

TEST(SgemmReference, BetaZeroIgnoresNaNInC) {
  HostMatrix a(3, 4, Order::row_major), b(4, 5, Order::row_major), c(3, 5, Order::row_major);
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  a.randomize(rng);
  b.randomize(rng);
  for (auto& x : c.data) x = kNaN;
  loom::kernels::sgemm_reference(loom::test::gemm::product_args(a, b, c, 1.0F, 0.0F));
  for (float x : c.data) EXPECT_FALSE(std::isnan(x));
}

TEST(SgemmReference, EmptyKScalesCByBeta) {
  HostMatrix a(3, 0, Order::row_major), b(0, 2, Order::row_major), c(3, 2, Order::row_major);
  c.data = {1, 2, 3, 4, 5, 6};
  loom::kernels::sgemm_reference(loom::test::gemm::product_args(a, b, c, 1.0F, 0.5F));
  EXPECT_EQ(c.data, (std::vector<float>{0.5F, 1, 1.5F, 2, 2.5F, 3}));
}

TEST(SgemmReference, MatchesTheTripleLoopInEveryLayout) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  for (Order oa : {Order::row_major, Order::col_major}) {
    for (Order ob : {Order::row_major, Order::col_major}) {
      for (Order oc : {Order::row_major, Order::col_major}) {
        // Blocks of the reference are 256 x 128: cross both.
        HostMatrix a(37, 300, oa, 3), b(300, 261, ob, 1), c(37, 261, oc, 2);
        a.randomize(rng);
        b.randomize(rng);
        c.randomize(rng);
        const HostMatrix expected = triple_loop(a, b, c, 0.75F, -1.5F);
        loom::kernels::sgemm_reference(loom::test::gemm::product_args(a, b, c, 0.75F, -1.5F));
        std::string first;
        // Both accumulate in double: only the final rounding may differ.
        HostMatrix mag = loom::test::gemm::magnitudes(a, b, expected, 0.75F, 1.5F);
        EXPECT_EQ(loom::test::gemm::count_mismatches(c, expected, mag, 1, &first), 0)
            << to_string(oa) << to_string(ob) << to_string(oc) << " first: " << first;
      }
    }
  }
}

TEST(SgemmDispatch, DefaultTileFillsTheSms) {
  using loom::kernels::default_warp_tile;
  using loom::kernels::SgemmWarpTile;
  EXPECT_EQ(default_warp_tile(4096, 4096, 132), SgemmWarpTile::t128x128x16);
  EXPECT_EQ(default_warp_tile(4096, 4096, 132, true), SgemmWarpTile::t128x128x8);  // fused epilogue
  EXPECT_EQ(default_warp_tile(1024, 1024, 132), SgemmWarpTile::t64x64x8);  // 64 blocks of 128
  EXPECT_EQ(default_warp_tile(256, 256, 132), SgemmWarpTile::t64x64x8);
  EXPECT_EQ(default_warp_tile(1, 1, 132), SgemmWarpTile::t64x64x8);
}

// The chooser's rules by shape (bench_gemm's small-shape rows measured them):
// at most 32 columns or rows go to skinny, a K of at most 16 to the
// one-thread-an-element kernel, the rest to warp_tiled.
TEST(SgemmDispatch, TheChooserFollowsTheShape) {
  using loom::kernels::SgemmVariant;
  const auto pick = [](std::int64_t m, std::int64_t n, std::int64_t k) {
    loom::kernels::SgemmArgs p;
    p.m = m;
    p.n = n;
    p.k = k;
    return loom::kernels::choose_sgemm_variant(p);
  };
  EXPECT_EQ(pick(256, 10, 1024), SgemmVariant::skinny);
  EXPECT_EQ(pick(10, 1024, 256), SgemmVariant::skinny);
  EXPECT_EQ(pick(256, 1024, 10), SgemmVariant::naive);
  EXPECT_EQ(pick(256, 1024, 16), SgemmVariant::naive);
  EXPECT_EQ(pick(256, 1024, 17), SgemmVariant::warp_tiled);
  EXPECT_EQ(pick(256, 64, 1024), SgemmVariant::warp_tiled);
  EXPECT_EQ(pick(4096, 4096, 4096), SgemmVariant::warp_tiled);
}

// Empty products plan nothing: the workspace query and the chooser take every
// empty shape in every variant and tile (a zero M once divided a count of
// row blocks on the GPU path: the EmptyTensorsGpu test died of SIGFPE).
TEST(SgemmDispatch, EmptyShapesPlanNoWorkspaceInEveryVariant) {
  using loom::kernels::SgemmVariant;
  using loom::kernels::SgemmWarpTile;
  const std::int64_t shapes[][3] = {{0, 3, 4}, {2, 0, 4},  {2, 3, 0},    {0, 0, 0},
                                    {0, 3, 0}, {0, 40, 4}, {40, 0, 300}, {0, 4096, 4096}};
  for (const auto& s : shapes) {
    loom::kernels::SgemmArgs p;
    p.m = s[0];
    p.n = s[1];
    p.k = s[2];
    p.a = {nullptr, p.k, 1};
    p.b = {nullptr, p.n, 1};
    p.c = {nullptr, p.n, 1};
    (void)loom::kernels::choose_sgemm_variant(p);
    for (std::size_t v = 0; v < loom::ops::VariantNames<SgemmVariant>::names.size(); ++v) {
      for (std::size_t t = 0; t < loom::ops::VariantNames<SgemmWarpTile>::names.size(); ++t) {
        const auto variant = static_cast<SgemmVariant>(v);
        const auto tile = static_cast<SgemmWarpTile>(t);
        const std::size_t bytes = loom::kernels::sgemm_workspace_bytes(p, variant, tile);
        if (p.m == 0 || p.n == 0 || p.k == 0) {
          EXPECT_EQ(bytes, 0U) << s[0] << "x" << s[1] << "x" << s[2] << " " << to_string(variant);
        }
      }
    }
  }
}

// The names bench_gemm prints in its labels (loom/ops/variant.hpp's tables),
// read back by parse_variant.
TEST(SgemmDispatch, VariantsAndTilesAreNamedByTheirTables) {
  using loom::kernels::SgemmVariant;
  using loom::kernels::SgemmWarpTile;
  EXPECT_EQ(to_string(SgemmVariant::register_tiled), "register_tiled");
  EXPECT_EQ(to_string(SgemmWarpTile::t128x64x8), "128x64x8");
  EXPECT_EQ(loom::ops::parse_variant<SgemmWarpTile>("128x128x16"), SgemmWarpTile::t128x128x16);
  EXPECT_EQ(to_string(static_cast<SgemmVariant>(6)), "unknown");
  EXPECT_EQ(loom::ops::variant_list<SgemmVariant>(),
            "naive, tiled_manual, tiled_cute, register_tiled, warp_tiled, skinny");
}

// What hgemm's wgmma variant takes (hgemm_wgmma_fits looks at the operands
// only, never at the memory: fake addresses do). TMA wants each operand
// contiguous along one dimension, 16-byte aligned data, and leading
// dimensions and batch strides that are multiples of 16 bytes; extents are
// free (TMA fills what lies outside with zeros).
TEST(HgemmDispatch, WgmmaFitsWhatTmaTakes) {
  using loom::DType;
  using loom::kernels::hgemm_wgmma_fits;
  using loom::kernels::HgemmArgs;
  using loom::kernels::hgemm_detail::wgmma_contiguous;
  using loom::kernels::hgemm_detail::WgmmaContiguous;
  EXPECT_EQ(to_string(loom::kernels::HgemmVariant::wgmma), "wgmma");
  const auto at = [](std::uintptr_t address) { return reinterpret_cast<const void*>(address); };
  // 131 x 41 by 41 x 67, leading dimensions padded to 48 and 72, bf16.
  HgemmArgs p;
  p.m = 131;
  p.n = 67;
  p.k = 41;
  p.a = {at(0x10000), 48, 1, 0, DType::bf16};
  p.b = {at(0x20000), 72, 1, 0, DType::bf16};
  p.c = {at(0x30002), 67, 1, 0, DType::f32};  // C: any layout, any alignment
  EXPECT_EQ(wgmma_contiguous(p.a), WgmmaContiguous::cols);
  EXPECT_EQ(wgmma_contiguous(p.b), WgmmaContiguous::cols);
  if (!loom::kernels::hgemm_detail::wgmma_built()) {
    EXPECT_FALSE(hgemm_wgmma_fits(p)) << "not built for sm_90a: never fits";
    return;
  }
  EXPECT_TRUE(hgemm_wgmma_fits(p));
  HgemmArgs t = p;
  t.a = {at(0x10000), 1, 136, 0, DType::bf16};  // A column-major, B column-major
  t.b = {at(0x20000), 1, 48, 0, DType::bf16};
  EXPECT_EQ(wgmma_contiguous(t.a), WgmmaContiguous::rows);
  EXPECT_TRUE(hgemm_wgmma_fits(t));
  t.batch = 4;  // batched, B shared
  t.a.batch_stride = 136 * 41;
  EXPECT_TRUE(hgemm_wgmma_fits(t));
  t.a.batch_stride = 136 * 41 + 4;  // 8 bytes
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t.a.batch_stride = -136 * 41;
  EXPECT_FALSE(hgemm_wgmma_fits(t));

  t = p;
  t.a.row_stride = 41;  // rows 82 bytes apart
  EXPECT_EQ(wgmma_contiguous(t.a), WgmmaContiguous::none);
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.b.data = at(0x20008);  // 8 bytes off 16
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.a.col_stride = 2;  // strided: contiguous along neither
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.b.dtype = DType::f16;  // mixed types
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.a.dtype = t.b.dtype = DType::f32;
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.k = 0;  // the epilogue alone: another variant's job
  EXPECT_FALSE(hgemm_wgmma_fits(t));
  t = p;
  t.a.row_stride = std::int64_t{1} << 40;  // beyond TMA's 2^40-byte strides
  EXPECT_FALSE(hgemm_wgmma_fits(t));
}

// ---------------------------------------------------------------- the op, CPU backend

void fill_random(const loom::Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  float* p = t.data_as<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
}

// Element (i, j) of a 2-D f32 tensor, through its strides.
float element(const loom::Tensor& t, std::int64_t i, std::int64_t j) {
  return t.data_as<float>()[i * t.strides()[0] + j * t.strides()[1]];
}

HostMatrix to_host(const loom::Tensor& t) {
  HostMatrix h(t.size(0), t.size(1), Order::row_major);
  for (std::int64_t i = 0; i < t.size(0); ++i) {
    for (std::int64_t j = 0; j < t.size(1); ++j) h.at(i, j) = element(t, i, j);
  }
  return h;
}

// An M x K operand, row-major or as the transposed view of a K x M tensor.
loom::Tensor operand(loom::Runtime& rt, std::int64_t rows, std::int64_t cols, Order order,
                     std::mt19937_64& rng) {
  if (order == Order::row_major) {
    auto t = rt.tensor<float>({rows, cols});
    fill_random(t, rng);
    return t;
  }
  auto t = rt.tensor<float>({cols, rows});
  fill_random(t, rng);
  return t.transpose(0, 1);
}

TEST(MatmulCpu, EveryLayoutThroughAGraph) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t m = 31, n = 17, k = 45;
  for (Order oa : {Order::row_major, Order::col_major}) {
    for (Order ob : {Order::row_major, Order::col_major}) {
      for (Order oc : {Order::row_major, Order::col_major}) {
        auto a = operand(rt, m, k, oa, rng);
        auto b = operand(rt, k, n, ob, rng);
        auto c = operand(rt, m, n, oc, rng);
        const HostMatrix ha = to_host(a), hb = to_host(b), hc0 = to_host(c);
        loom::Graph g;
        g.add(loom::ops::matmul(a, b, c, 1.25F, -0.5F));
        rt.submit(g).wait();
        const HostMatrix expected = triple_loop(ha, hb, hc0, 1.25F, -0.5F);
        const HostMatrix mag = loom::test::gemm::magnitudes(ha, hb, hc0, 1.25F, -0.5F);
        std::string first;
        EXPECT_EQ(loom::test::gemm::count_mismatches(to_host(c), expected, mag, k, &first), 0)
            << to_string(oa) << to_string(ob) << to_string(oc) << " first: " << first;
      }
    }
  }
}

TEST(MatmulCpu, BetaZeroIgnoresAPoisonedC) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  auto a = operand(rt, 1, 1, Order::row_major, rng);
  auto b = operand(rt, 1, 1, Order::row_major, rng);
  auto c = rt.tensor<float>({1, 1});
  c.data_as<float>()[0] = kNaN;
  loom::Graph g;
  g.add(loom::ops::matmul(a, b, c, 2.0F));
  rt.submit(g).wait();
  EXPECT_FLOAT_EQ(c.data_as<float>()[0], 2.0F * a.data_as<float>()[0] * b.data_as<float>()[0]);
}

TEST(MatmulCpu, ChainedProductsFollowTheData) {
  // d = (a b) c: the second matmul reads what the first writes.
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  auto a = operand(rt, 20, 30, Order::row_major, rng);
  auto b = operand(rt, 30, 40, Order::col_major, rng);
  auto c = operand(rt, 40, 10, Order::row_major, rng);
  auto ab = rt.tensor<float>({20, 40});
  auto d = rt.tensor<float>({20, 10});
  loom::Graph g;
  g.add(loom::ops::matmul(a, b, ab));
  g.add(loom::ops::matmul(ab, c, d));
  rt.submit(g).wait();
  const HostMatrix zero_ab(20, 40, Order::row_major), zero_d(20, 10, Order::row_major);
  const HostMatrix hab = triple_loop(to_host(a), to_host(b), zero_ab, 1.0F, 0.0F);
  const HostMatrix expected = triple_loop(hab, to_host(c), zero_d, 1.0F, 0.0F);
  const HostMatrix mag = loom::test::gemm::magnitudes(hab, to_host(c), zero_d, 1.0F, 0.0F);
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(to_host(d), expected, mag, 40, &first), 0) << first;
}

// Submits matmul(a, b, c) as task "product" and expects a rejection naming it
// whose message holds `words`.
void expect_rejected(loom::Runtime& rt, const loom::Tensor& a, const loom::Tensor& b,
                     const loom::Tensor& c, const std::string& words) {
  loom::Graph g;
  g.add(loom::ops::matmul(a, b, c), {.name = "product"});
  try {
    (void)rt.submit(g);
    ADD_FAILURE() << "accepted; expected a rejection mentioning '" << words << "'";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "product");
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// The public variant: a kernel of the operands' family is taken (the CPU
// backend runs its reference whatever it names), one of the other family's,
// or an unknown value, is rejected at submit naming the task.
TEST(MatmulCpu, AVariantOfTheOtherDtypeOrUnknownIsRejectedAtSubmitNamingTheTask) {
  using loom::ops::MatmulVariant;
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  auto a = operand(rt, 9, 7, Order::row_major, rng);
  auto b = operand(rt, 7, 5, Order::row_major, rng);
  const HostMatrix zero(9, 5, Order::row_major);
  const HostMatrix expected = triple_loop(to_host(a), to_host(b), zero, 1.0F, 0.0F);
  const HostMatrix mag = loom::test::gemm::magnitudes(to_host(a), to_host(b), zero, 1.0F, 0.0F);
  for (auto v : {MatmulVariant::automatic, MatmulVariant::naive, MatmulVariant::tiled_cute,
                 MatmulVariant::warp_tiled, MatmulVariant::skinny}) {
    auto c = rt.tensor<float>({9, 5});
    loom::Graph g;
    g.add(loom::ops::matmul(a, b, c, {}, v));
    rt.submit(g).wait();
    std::string first;
    EXPECT_EQ(loom::test::gemm::count_mismatches(to_host(c), expected, mag, 7, &first), 0)
        << loom::ops::to_string(v) << ": " << first;
  }
  auto c = rt.tensor<float>({9, 5});
  loom::test::expect_rejected(rt, loom::ops::matmul(a, b, c, {}, MatmulVariant::wgmma),
                              "the variant wgmma is for f16 and bf16 operands, and a is f32",
                              "product");
  auto ha = rt.tensor(loom::DType::bf16, {9, 7});
  auto hb = rt.tensor(loom::DType::bf16, {7, 5});
  loom::test::expect_rejected(rt, loom::ops::matmul(ha, hb, c, {}, MatmulVariant::tiled_cute),
                              "the variant tiled_cute is for f32 operands, and a is bf16",
                              "product");
  loom::test::expect_rejected(
      rt, loom::ops::matmul(a, b, c, {}, static_cast<MatmulVariant>(11)),
      "unknown variant 11 (automatic, naive, tiled_manual, tiled_cute, register_tiled", "product");
}

TEST(MatmulCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(2));
  auto a = rt.tensor<float>({4, 6});
  auto b = rt.tensor<float>({6, 5});
  auto c = rt.tensor<float>({4, 5});
  expect_rejected(rt, rt.tensor<std::int32_t>({4, 6}), b, c, "a must be one of f32, f16, bf16");
  expect_rejected(rt, a, b, rt.tensor<float>({4, 5, 1}), "c must be [4, 5]");
  expect_rejected(rt, a, rt.tensor<float>({7, 5}), c, "inner dimensions differ");
  expect_rejected(rt, a, b, rt.tensor<float>({5, 4}), "c must be [4, 5]");
  expect_rejected(rt, rt.tensor<float>({6}), b, c, "must be a matrix");
  // Half precision: b in a's type, c in a's type or f32, a batch that agrees.
  auto ha = rt.tensor(loom::DType::bf16, {4, 6});
  auto hb = rt.tensor(loom::DType::bf16, {6, 5});
  expect_rejected(rt, ha, rt.tensor(loom::DType::f16, {6, 5}), c, "b must be bf16");
  expect_rejected(rt, ha, hb, rt.tensor(loom::DType::f16, {4, 5}), "c must be one of bf16, f32");
  expect_rejected(rt, rt.tensor(loom::DType::bf16, {2, 4, 6}),
                  rt.tensor(loom::DType::bf16, {3, 6, 5}), rt.tensor<float>({3, 4, 5}),
                  "different batches");
  expect_rejected(rt, rt.tensor(loom::DType::bf16, {2, 4, 6}), hb, rt.tensor<float>({4, 5}),
                  "c must be [2, 4, 5]");
  // Every other column: neither row- nor column-major.
  expect_rejected(rt, rt.tensor<float>({4, 12}).slice(1, 0, 12, 2), b, c,
                  "must be row-major or column-major");
  expect_rejected(rt, a, b, rt.tensor<float>({4, 10}).slice(1, 0, 10, 2),
                  "must be row-major or column-major");
  auto square = rt.tensor<float>({6, 6});
  expect_rejected(rt, square, square, square, "must not share storage");
  expect_rejected(rt, loom::Tensor(), b, c, "undefined");
}

// bf16 and f16 products on the CPU backend (the reference): against a triple
// loop over the operands' exact values, with C in their type and in f32, a
// batch with a shared B, a transposed operand and a bias in C's type.
TEST(MatmulCpu, HalfPrecisionBatchesThroughAGraph) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  constexpr std::int64_t kB = 3, kM = 5, kN = 7, kK = 9;
  for (loom::DType dtype : {loom::DType::bf16, loom::DType::f16}) {
    const auto round = [&](float v) {
      return dtype == loom::DType::bf16
                 ? loom::kernels::bf16_bits_to_f32(loom::kernels::f32_to_bf16_bits(v))
                 : loom::kernels::f16_bits_to_f32(loom::kernels::f32_to_f16_bits(v));
    };
    const auto fill = [&](const loom::Tensor& t, std::vector<float>& values) {
      auto* bits = static_cast<std::uint16_t*>(t.data());
      values.resize(static_cast<std::size_t>(t.numel()));
      for (std::size_t i = 0; i < values.size(); ++i) {
        const float v = dist(rng);
        bits[i] = dtype == loom::DType::bf16 ? loom::kernels::f32_to_bf16_bits(v)
                                             : loom::kernels::f32_to_f16_bits(v);
        values[i] = round(v);
      }
    };
    auto a = rt.tensor(dtype, {kB, kM, kK});
    auto bt = rt.tensor(dtype, {kN, kK});  // B^T, stored [N, K]: b is its transposed view
    auto bias = rt.tensor(dtype, {kN});
    std::vector<float> av, bv, biasv;
    fill(a, av);
    fill(bt, bv);
    fill(bias, biasv);
    auto c32 = rt.tensor<float>({kB, kM, kN});
    auto c16 = rt.tensor(dtype, {kB, kM, kN});
    loom::Graph g;
    g.add(loom::ops::matmul(a, bt.transpose(0, 1), c32));
    g.add(loom::ops::matmul(a, bt.transpose(0, 1), c16, {.alpha = 2.0F, .bias = bias}));
    rt.submit(g).wait();
    const auto* got16 = static_cast<const std::uint16_t*>(c16.data());
    for (std::int64_t e = 0; e < kB; ++e) {
      for (std::int64_t i = 0; i < kM; ++i) {
        for (std::int64_t j = 0; j < kN; ++j) {
          double want = 0.0;
          for (std::int64_t kk = 0; kk < kK; ++kk) {
            want += double(av[(e * kM + i) * kK + kk]) * bv[j * kK + kk];
          }
          const std::int64_t at = (e * kM + i) * kN + j;
          EXPECT_NEAR(c32.data_as<float>()[at], want, 1e-6) << at;
          const float got = dtype == loom::DType::bf16 ? loom::kernels::bf16_bits_to_f32(got16[at])
                                                       : loom::kernels::f16_bits_to_f32(got16[at]);
          EXPECT_EQ(got, round(static_cast<float>(2.0 * want + biasv[j]))) << at;
        }
      }
    }
  }
}

// c = act(alpha a b + beta c + bias), the bias broadcast along rows ([N],
// [1, N]) or columns ([M, 1]), through a graph on the CPU backend.
TEST(MatmulCpu, TheEpilogueAddsABiasAndActivates) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t m = 13, n = 7, k = 21;
  using loom::ops::Activation;
  for (int kind = 0; kind < 4; ++kind) {  // none, [N], [1, N], [M, 1]
    for (Activation act : {Activation::none, Activation::relu, Activation::gelu_tanh}) {
      auto a = operand(rt, m, k, Order::row_major, rng);
      auto b = operand(rt, k, n, Order::col_major, rng);
      auto c = operand(rt, m, n, Order::row_major, rng);
      const loom::Shape shapes[] = {{}, {n}, {1, n}, {m, 1}};
      loom::Tensor bias;
      if (kind > 0) {
        bias = rt.tensor<float>(shapes[kind]);
        fill_random(bias, rng);
      }
      const HostMatrix ha = to_host(a), hb = to_host(b), hc0 = to_host(c);
      loom::Graph g;
      g.add(loom::ops::matmul(a, b, c,
                              {.alpha = 1.25F, .beta = -0.5F, .bias = bias, .activation = act}));
      rt.submit(g).wait();
      const HostMatrix plain = triple_loop(ha, hb, hc0, 1.25F, -0.5F);
      const HostMatrix got = to_host(c);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double v = plain.at(i, j);
          if (kind > 0) v += bias.data_as<float>()[kind == 3 ? i : j];
          if (act == Activation::relu) v = std::max(v, 0.0);
          if (act == Activation::gelu_tanh) {
            v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          }
          EXPECT_NEAR(got.at(i, j), v, 1e-4) << "bias " << kind << " activation "
                                             << static_cast<int>(act) << " at " << i << "," << j;
        }
      }
    }
  }
  auto a = rt.tensor<float>({4, 6});
  auto b = rt.tensor<float>({6, 5});
  auto c = rt.tensor<float>({4, 5});
  const auto rejected = [&](loom::ops::MatmulEpilogue e, const std::string& words) {
    loom::test::expect_rejected(rt, loom::ops::matmul(a, b, c, e), words, "product");
  };
  rejected({.bias = rt.tensor<float>({4})}, "bias [4] does not broadcast to out's shape [4, 5]");
  rejected({.bias = rt.tensor<std::int32_t>({5})}, "bias must be f32");
  rejected({.bias = c.slice(0, 0, 1)}, "bias must not share storage with c");
  rejected({.activation = static_cast<Activation>(7)}, "unknown activation 7");
}

TEST(MatmulCpu, SlicesOfWiderMatricesKeepTheirLeadingDimension) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  auto wide_a = operand(rt, 9, 20, Order::row_major, rng);
  auto wide_b = operand(rt, 30, 7, Order::col_major, rng);
  auto a = wide_a.slice(1, 3, 14);  // 9 x 11, leading dimension 20
  auto b = wide_b.slice(0, 2, 13);  // 11 x 7, column-major, leading dimension 30
  auto c = rt.tensor<float>({9, 7});
  loom::Graph g;
  g.add(loom::ops::matmul(a, b, c));
  rt.submit(g).wait();
  const HostMatrix zero(9, 7, Order::row_major);
  const HostMatrix expected = triple_loop(to_host(a), to_host(b), zero, 1.0F, 0.0F);
  const HostMatrix mag = loom::test::gemm::magnitudes(to_host(a), to_host(b), zero, 1.0F, 0.0F);
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(to_host(c), expected, mag, 11, &first), 0) << first;
}

}  // namespace
