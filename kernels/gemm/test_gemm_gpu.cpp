// SGEMM on the GPU: every variant (and every warp-tiled tile) against the CPU
// reference at awkward shapes, in every layout of A, B and C, with padded and
// misaligned leading dimensions, alpha and beta not 1 and 0, and C poisoned
// with NaN where beta = 0; loom::ops::matmul through a graph on the CUDA
// backend, and its rejection of host memory there.
#include "support/gpu.hpp"

#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/gemm.hpp>
#include <loom/runtime.hpp>

#include "cuda/stream.hpp"
#include "gemm/hgemm.hpp"
#include "gemm/sgemm.hpp"
#include "gemm/test_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace loom::kernels {
// Names the parameter in test names and failure messages.
void PrintTo(SgemmVariant variant, std::ostream* os) { *os << to_string(variant); }
}  // namespace loom::kernels

namespace {

using loom::kernels::SgemmArgs;
using loom::kernels::SgemmVariant;
using loom::kernels::SgemmWarpTile;
using loom::test::gemm::HostMatrix;
using loom::test::gemm::Order;

struct Shape3 {
  std::int64_t m, n, k;
};

struct Case {
  Shape3 shape;
  Order a = Order::row_major, b = Order::row_major, c = Order::row_major;
  std::int64_t pad = 0;     // extra elements a row (column) of every operand
  std::int64_t offset = 0;  // elements before each operand: misaligns it
  float alpha = 1.0F, beta = 0.0F;
  int bias = 0;  // the epilogue's bias: 0 none, 1 a value a column (n), 2 a value a row (m)
  loom::kernels::SgemmActivation activation = loom::kernels::SgemmActivation::none;
  // The workspace must hold A M-major afterwards (sgemm_transpose.cuh: column
  // stride M rounded up to 4): the product took the copy's path.
  bool m_major_copy = false;
};

std::string describe(const Case& c, SgemmVariant v, SgemmWarpTile tile) {
  return std::string(to_string(v)) +
         (v == SgemmVariant::warp_tiled ? std::string(" ") + std::string(to_string(tile)) : "") +
         " " + std::to_string(c.shape.m) + "x" + std::to_string(c.shape.n) + "x" +
         std::to_string(c.shape.k) + " A " + to_string(c.a) + " B " + to_string(c.b) + " C " +
         to_string(c.c) + " pad " + std::to_string(c.pad) + " offset " + std::to_string(c.offset) +
         " alpha " + std::to_string(c.alpha) + " beta " + std::to_string(c.beta) + " bias " +
         std::to_string(c.bias) + " activation " + std::to_string(static_cast<int>(c.activation));
}

std::size_t buffer_size(const HostMatrix& h, std::int64_t offset) {
  return h.data.size() + static_cast<std::size_t>(offset);
}

// The host matrix into the device buffer at `offset` elements (NaN before
// it), or NaN everywhere when `poison`.
void upload(loom::test::DeviceBuffer<float>& d, const HostMatrix& h, std::int64_t offset,
            bool poison) {
  if (poison) {
    d.poison();
    return;
  }
  std::vector<float> staged(d.size(), std::numeric_limits<float>::quiet_NaN());
  std::copy(h.data.begin(), h.data.end(), staged.begin() + offset);
  d.upload(staged);
}

void check_case(const Case& t, SgemmVariant variant, SgemmWarpTile tile) {
  auto rng = loom::test::random_engine();
  const auto [m, n, k] = t.shape;
  HostMatrix a(m, k, t.a, t.pad), b(k, n, t.b, t.pad), c0(m, n, t.c, t.pad);
  a.randomize(rng);
  b.randomize(rng);
  c0.randomize(rng);
  const bool poison_c = t.beta == 0.0F;  // then C's NaNs must not reach the result
  loom::test::DeviceBuffer<float> da(buffer_size(a, t.offset));
  loom::test::DeviceBuffer<float> db(buffer_size(b, t.offset));
  loom::test::DeviceBuffer<float> dc(buffer_size(c0, t.offset));
  upload(da, a, t.offset, false);
  upload(db, b, t.offset, false);
  upload(dc, c0, t.offset, poison_c);

  SgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.alpha = t.alpha;
  p.beta = t.beta;
  p.a = a.ref<const float>(da.data() + t.offset);
  p.b = b.ref<const float>(db.data() + t.offset);
  p.c = c0.ref<float>(dc.data() + t.offset);
  // The bias: a value a column (row stride 0) or a row (column stride 0).
  std::vector<float> bias(static_cast<std::size_t>(t.bias == 2 ? m : n));
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  for (auto& v : bias) v = dist(rng);
  loom::test::DeviceBuffer<float> dbias(bias.size());
  dbias.upload(bias);
  const auto bias_ref = [&](const float* data) -> loom::kernels::MatrixRef<const float> {
    if (t.bias == 0) return {};
    return {data, t.bias == 2 ? 1 : 0, t.bias == 1 ? 1 : 0};
  };
  p.bias = bias_ref(dbias.data());
  p.activation = t.activation;
  // Skinny sums slices of K in a workspace when given one (else one slice).
  const std::size_t workspace_bytes = loom::kernels::sgemm_workspace_bytes(p, variant, tile);
  loom::test::DeviceBuffer<float> workspace(workspace_bytes / sizeof(float) + 1);
  workspace.poison();
  loom::detail::Stream stream(0, 0);
  loom::kernels::sgemm(p, stream.view(), variant, tile,
                       workspace_bytes > 0 ? workspace.data() : nullptr);
  stream.synchronize();
  const auto raw = dc.download();
  if (t.m_major_copy) {
    ASSERT_GT(workspace_bytes, 0U) << describe(t, variant, tile);
    const auto copy = workspace.download();
    const std::int64_t ld = (m + 3) / 4 * 4;
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t kk = 0; kk < k; ++kk) {
        wrong += copy[static_cast<std::size_t>(kk * ld + i)] == a.at(i, kk) ? 0 : 1;
      }
    }
    EXPECT_EQ(wrong, 0) << describe(t, variant, tile) << ": the workspace does not hold A M-major";
  }

  HostMatrix got = c0;
  std::copy(raw.begin() + t.offset, raw.end(), got.data.begin());
  HostMatrix expected = c0;
  SgemmArgs h = p;
  h.a = a.ref<const float>(a.data.data());
  h.b = b.ref<const float>(b.data.data());
  h.c = expected.ref<float>(expected.data.data());
  h.bias = bias_ref(bias.data());
  loom::kernels::sgemm_reference(h);
  HostMatrix mag = loom::test::gemm::magnitudes(a, b, c0, t.alpha, poison_c ? 0.0F : t.beta);
  if (t.bias != 0) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        mag.at(i, j) += std::fabs(bias[static_cast<std::size_t>(t.bias == 2 ? i : j)]);
      }
    }
  }
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(got, expected, mag, k, &first), 0)
      << describe(t, variant, tile) << "; first: " << first;
  // Nothing written outside C: the padding and the bytes before it.
  std::int64_t stray = 0;
  for (std::int64_t i = 0; i < t.offset; ++i)
    stray += std::isnan(raw[static_cast<std::size_t>(i)]) ? 0 : 1;
  for (std::int64_t line = 0; line < (t.c == Order::row_major ? m : n); ++line) {
    const std::int64_t extent = t.c == Order::row_major ? n : m;
    for (std::int64_t j = extent; j < c0.ld; ++j) {
      const auto at = static_cast<std::size_t>(t.offset + line * c0.ld + j);
      stray +=
          poison_c ? (std::isnan(raw[at]) ? 0 : 1) : (raw[at] == c0.data[at - t.offset] ? 0 : 1);
    }
  }
  EXPECT_EQ(stray, 0) << describe(t, variant, tile) << ": wrote outside C";
}

const std::vector<Shape3>& awkward_shapes() {
  static const std::vector<Shape3> shapes = {{1, 1, 1},       {31, 17, 45},  {127, 129, 65},
                                             {128, 128, 128}, {64, 192, 24}, {130, 260, 33},
                                             {513, 257, 300}, {5, 300, 3},   {200, 3, 517}};
  return shapes;
}

class SgemmGpu : public ::testing::TestWithParam<SgemmVariant> {
 protected:
  // Every tile for warp_tiled; the one launch shape for the others.
  std::vector<SgemmWarpTile> tiles() const {
    if (GetParam() != SgemmVariant::warp_tiled) return {SgemmWarpTile::t128x128x8};
    return {SgemmWarpTile::t128x128x8, SgemmWarpTile::t128x128x16, SgemmWarpTile::t128x64x8,
            SgemmWarpTile::t64x64x8};
  }
};

TEST_P(SgemmGpu, EveryLayoutAtAwkwardShapes) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    for (const Shape3& s : awkward_shapes()) {
      for (Order oa : {Order::row_major, Order::col_major}) {
        for (Order ob : {Order::row_major, Order::col_major}) {
          check_case({.shape = s, .a = oa, .b = ob, .alpha = 1.5F, .beta = -0.75F}, GetParam(),
                     tile);
        }
      }
    }
  }
}

// The epilogue (a bias a column or a row, relu, gelu_tanh, with and without
// beta) in every variant and tile, at awkward shapes.
TEST_P(SgemmGpu, TheEpilogueInEveryVariant) {
  LOOM_REQUIRE_GPU();
  using loom::kernels::SgemmActivation;
  for (SgemmWarpTile tile : tiles()) {
    for (const Shape3& s : {Shape3{1, 1, 1}, Shape3{33, 65, 17}, Shape3{130, 129, 64}}) {
      for (int bias : {0, 1, 2}) {
        for (SgemmActivation act :
             {SgemmActivation::none, SgemmActivation::relu, SgemmActivation::gelu_tanh}) {
          for (float beta : {0.0F, -0.5F}) {
            check_case({.shape = s,
                        .a = Order::row_major,
                        .b = Order::col_major,
                        .alpha = 1.5F,
                        .beta = beta,
                        .bias = bias,
                        .activation = act},
                       GetParam(), tile);
          }
        }
      }
    }
  }
}

// The small shapes of a classifier's step (logits N = 10, their weight
// gradient, the transposed problem M = 10) and the edges of skinny's
// instantiations, every variant (wide ones run the default).
TEST_P(SgemmGpu, SkinnyShapes) {
  LOOM_REQUIRE_GPU();
  using loom::kernels::SgemmActivation;
  for (const Shape3& s :
       {Shape3{256, 10, 1024}, Shape3{1024, 10, 256}, Shape3{10, 1024, 256}, Shape3{1, 1, 5000},
        Shape3{33, 32, 4097}, Shape3{31, 33, 64}, Shape3{300, 8, 7}}) {
    for (Order oa : {Order::row_major, Order::col_major}) {
      check_case({.shape = s,
                  .a = oa,
                  .b = Order::row_major,
                  .alpha = 1.0F,
                  .beta = 0.0F,
                  .bias = 1,
                  .activation = SgemmActivation::relu},
                 GetParam(), tiles().front());
      check_case({.shape = s,
                  .a = oa,
                  .b = Order::col_major,
                  .c = Order::col_major,
                  .alpha = 0.5F,
                  .beta = 1.0F},
                 GetParam(), tiles().front());
    }
  }
}

// K dominates: too few output tiles to fill the GPU, a long K: warp_tiled
// splits K into slices (given a workspace) and sums them in order.
TEST_P(SgemmGpu, LongKSplitsIntoSlices) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    for (const Shape3& s : {Shape3{64, 64, 8192}, Shape3{100, 70, 5000}, Shape3{130, 129, 1031}}) {
      check_case({.shape = s,
                  .a = Order::row_major,
                  .b = Order::col_major,
                  .alpha = 1.5F,
                  .beta = -0.5F,
                  .bias = 2,
                  .activation = loom::kernels::SgemmActivation::gelu_tanh},
                 GetParam(), tile);
      check_case({.shape = s, .a = Order::col_major, .b = Order::row_major, .pad = 3, .offset = 1},
                 GetParam(), tile);
    }
  }
}

TEST_P(SgemmGpu, ColumnMajorC) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    for (const Shape3& s : {Shape3{31, 17, 45}, Shape3{257, 130, 70}}) {
      check_case({.shape = s,
                  .a = Order::col_major,
                  .b = Order::row_major,
                  .c = Order::col_major,
                  .alpha = -1.0F,
                  .beta = 0.5F},
                 GetParam(), tile);
    }
  }
}

TEST_P(SgemmGpu, BetaZeroIgnoresANaNPoisonedC) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    for (const Shape3& s : {Shape3{1, 1, 1}, Shape3{127, 129, 65}, Shape3{256, 256, 64}}) {
      check_case({.shape = s, .alpha = 0.5F, .beta = 0.0F}, GetParam(), tile);
      check_case(
          {.shape = s, .a = Order::col_major, .b = Order::col_major, .alpha = 1.0F, .beta = 0.0F},
          GetParam(), tile);
    }
  }
}

TEST_P(SgemmGpu, PaddedAndMisalignedLeadingDimensions) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    for (std::int64_t pad : {1, 4}) {
      for (std::int64_t offset : {0, 1}) {
        for (Order o : {Order::row_major, Order::col_major}) {
          check_case({.shape = {257, 255, 129},
                      .a = o,
                      .b = o,
                      .c = o,
                      .pad = pad,
                      .offset = offset,
                      .alpha = 2.0F,
                      .beta = 1.0F},
                     GetParam(), tile);
        }
      }
    }
  }
}

TEST_P(SgemmGpu, EmptyKScalesCAndEmptyMLaunchesNothing) {
  LOOM_REQUIRE_GPU();
  for (SgemmWarpTile tile : tiles()) {
    check_case({.shape = {33, 65, 0}, .alpha = 1.0F, .beta = 0.25F}, GetParam(), tile);
    check_case({.shape = {33, 65, 0}, .alpha = 1.0F, .beta = 0.0F}, GetParam(), tile);
    check_case({.shape = {0, 65, 10}, .alpha = 1.0F, .beta = 0.25F}, GetParam(), tile);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SgemmGpu,
                         ::testing::Values(SgemmVariant::naive, SgemmVariant::tiled_manual,
                                           SgemmVariant::tiled_cute, SgemmVariant::register_tiled,
                                           SgemmVariant::warp_tiled, SgemmVariant::skinny),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// A large square product in the default configuration: many whole tiles,
// the vectorized path throughout.
TEST(SgemmGpuLarge, DefaultVariantAt1024) {
  LOOM_REQUIRE_GPU();
  check_case({.shape = {1024, 1024, 1024}, .alpha = 1.0F, .beta = 0.0F}, SgemmVariant::warp_tiled,
             SgemmWarpTile::t128x128x8);
  check_case({.shape = {1000, 1000, 1000}, .a = Order::col_major, .alpha = 1.0F, .beta = 1.0F},
             SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x8);
}

// Both operands K-major (A row-major, B column-major) with N of 1024 or more:
// at 128 x 128 tiles, given a workspace, warp_tiled copies A M-major into it
// and runs on the copy (a poisoned workspace, so a copy that missed an
// element shows). Edge tiles in M and K, an M that is not a whole vector (the
// copy's padded leading dimension), padded and misaligned operands, and the
// general kernel's epilogue beside the plain one.
TEST(SgemmGpuLarge, BothOperandsKMajorThroughAnMMajorCopyOfA) {
  LOOM_REQUIRE_GPU();
  const auto workspace_of = [](Shape3 s, SgemmWarpTile tile) {
    SgemmArgs p;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.a = {nullptr, s.k, 1};
    p.b = {nullptr, 1, s.k};
    return loom::kernels::sgemm_workspace_bytes(p, SgemmVariant::warp_tiled, tile);
  };
  using loom::kernels::SgemmActivation;
  for (SgemmWarpTile tile : {SgemmWarpTile::t128x128x8, SgemmWarpTile::t128x128x16}) {
    // K under 128 does not split; neither do 100 tiles or more (the first).
    for (Shape3 s : {Shape3{1300, 1300, 263}, Shape3{301, 1100, 97}, Shape3{130, 1024, 72},
                     Shape3{2, 1030, 9}}) {
      Case plain{.shape = s, .a = Order::row_major, .b = Order::col_major, .alpha = 1.5F};
      plain.beta = -0.75F;
      plain.m_major_copy = true;
      Case padded = plain;
      padded.pad = 3;
      padded.offset = 1;
      Case fused = plain;
      fused.c = Order::col_major;
      fused.beta = 0.0F;
      fused.bias = 2;
      fused.activation = SgemmActivation::relu;
      for (const Case& c : {plain, padded, fused}) check_case(c, SgemmVariant::warp_tiled, tile);
    }
  }
  // Below N = 1024, and at the smaller tiles, the operands are read as they are.
  EXPECT_EQ(workspace_of({301, 1023, 97}, SgemmWarpTile::t128x128x16), 0U);
  EXPECT_EQ(workspace_of({301, 1100, 97}, SgemmWarpTile::t64x64x8), 0U);
}

// ---------------------------------------------------------------- the op, CUDA backend

// Host data of a rows x cols tensor's elements, through its strides.
std::vector<float> host_values(const loom::Tensor& t) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < t.size(0); ++i) {
    for (std::int64_t j = 0; j < t.size(1); ++j) {
      v.push_back(t.data_as<float>()[i * t.strides()[0] + j * t.strides()[1]]);
    }
  }
  return v;
}

TEST(MatmulGpu, ThroughAGraphWithATransposedOperand) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_TRUE(rt.has_gpu());
  auto rng = loom::test::random_engine();
  const std::int64_t m = 300, n = 200, k = 150;
  // A arrives column-major: the transposed view of a K x M tensor.
  auto host_at = rt.tensor<float>({k, m}, loom::Memory::pageable);
  auto host_b = rt.tensor<float>({k, n}, loom::Memory::pageable);
  auto host_c = rt.tensor<float>({m, n}, loom::Memory::pageable);
  for (auto* t : {&host_at, &host_b, &host_c}) {
    const auto values = loom::test::random_floats(static_cast<std::size_t>(t->numel()), rng);
    std::copy(values.begin(), values.end(), t->data_as<float>());
  }
  auto at = rt.tensor<float>({k, m});
  auto b = rt.tensor<float>({k, n});
  auto c = rt.tensor<float>({m, n});
  auto out = rt.tensor<float>({m, n}, loom::Memory::pageable);
  loom::Graph g;
  g.copy(host_at, at);
  g.copy(host_b, b);
  g.copy(host_c, c);
  g.add(loom::ops::matmul(at.transpose(0, 1), b, c, 0.5F, 2.0F));
  g.copy(c, out);
  rt.submit(g).wait();

  HostMatrix ha(m, k, Order::col_major), hb(k, n, Order::row_major), hc(m, n, Order::row_major);
  ha.data = std::vector<float>(host_at.data_as<float>(), host_at.data_as<float>() + k * m);
  hb.data = host_values(host_b);
  hc.data = host_values(host_c);
  HostMatrix expected = hc;
  SgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.alpha = 0.5F;
  p.beta = 2.0F;
  p.a = ha.ref<const float>(ha.data.data());
  p.b = hb.ref<const float>(hb.data.data());
  p.c = expected.ref<float>(expected.data.data());
  loom::kernels::sgemm_reference(p);
  HostMatrix got(m, n, Order::row_major);
  got.data = host_values(out);
  const HostMatrix mag = loom::test::gemm::magnitudes(ha, hb, hc, 0.5F, 2.0F);
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(got, expected, mag, k, &first), 0) << first;
}

// Both operands K-major at a size where the op's workspace takes an M-major
// copy of A (a wave of 128 x 128 tiles on this GPU, N >= 1024), eager,
// replayed from a compiled graph (whose workspace is given once and kept),
// and replayed on another A, which re-points the copy kernel's A pointer.
TEST(MatmulGpu, BothOperandsKMajorEagerCompiledAndRebound) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_TRUE(rt.has_gpu());
  auto rng = loom::test::random_engine();
  const std::int64_t m = 2048, n = 2048, k = 96;
  const int sms = loom::device_properties(0).sm_count;
  const SgemmWarpTile tile = loom::kernels::default_warp_tile(m, n, sms);
  ASSERT_TRUE(tile == SgemmWarpTile::t128x128x16 || tile == SgemmWarpTile::t128x128x8)
      << sms << " SMs: a larger shape is needed for 128 x 128 tiles";
  HostMatrix ha(m, k, Order::row_major), ha2(m, k, Order::row_major), hb(k, n, Order::col_major),
      zero(m, n, Order::row_major);
  ha.randomize(rng);
  ha2.randomize(rng);
  hb.randomize(rng);
  // B column-major: the transposed view of an N x K tensor.
  auto a = rt.upload(std::span<const float>(ha.data), {m, k});
  auto a2 = rt.upload(std::span<const float>(ha2.data), {m, k});
  auto bt = rt.upload(std::span<const float>(hb.data), {n, k});
  auto c = rt.tensor<float>({m, n});
  HostMatrix want = zero, want2 = zero;
  const SgemmArgs p = loom::test::gemm::product_args(ha, hb, want);
  ASSERT_GT(loom::kernels::sgemm_workspace_bytes(p, SgemmVariant::warp_tiled, tile), 0U);
  loom::kernels::sgemm_reference(p);
  loom::kernels::sgemm_reference(loom::test::gemm::product_args(ha2, hb, want2));
  const HostMatrix mag = loom::test::gemm::magnitudes(ha, hb, zero, 1.0F, 0.0F);
  const HostMatrix mag2 = loom::test::gemm::magnitudes(ha2, hb, zero, 1.0F, 0.0F);

  // C poisoned before each run: beta = 0 never reads it, so every element
  // must be written again.
  const std::vector<float> nans(static_cast<std::size_t>(m * n), std::nanf(""));
  const auto poison_c = [&] { rt.upload_into(c, std::span<const float>(nans)).wait(); };
  const auto check = [&](const char* how, const HostMatrix& expected, const HostMatrix& scale) {
    HostMatrix got(m, n, Order::row_major);
    got.data = rt.download<float>(c);
    std::string first;
    EXPECT_EQ(loom::test::gemm::count_mismatches(got, expected, scale, k, &first), 0)
        << how << ": " << first;
    poison_c();
  };
  loom::Graph g;
  g.add(loom::ops::matmul(a, bt.transpose(0, 1), c));
  poison_c();
  rt.submit(g).wait();
  check("eager", want, mag);
  auto exe = rt.compile(g);
  exe.run().wait();
  check("compiled, first replay", want, mag);
  exe.run().wait();
  check("compiled, second replay", want, mag);
  // Re-pointed, where no other pointer of the launches lies just past A's
  // storage (the pool may put the workspace there: then it is copied, as
  // explain_bindings says); right either way.
  const std::vector<loom::Binding> bindings = {{a, a2}};
  const auto reasons = loom::detail::explain_bindings(exe, bindings);
  ASSERT_EQ(reasons.size(), 1U);
  if (reasons[0] != "re-pointed") std::cout << "A is bound by a copy: " << reasons[0] << "\n";
  exe.run(bindings).wait();
  check("rebound to another A", want2, mag2);
  exe.run().wait();
  check("compiled, back on A", want, mag);
}

// The README: split-K slices are summed in a fixed order, the same bits
// every run. A product with few output tiles and a long K splits (and a
// skinny one takes the skinny kernel's slices): each run's C is compared
// bit for bit with the first's.
TEST(MatmulGpu, SlicesAlongKGiveTheSameBitsEveryRun) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_TRUE(rt.has_gpu());
  auto rng = loom::test::random_engine();
  for (const auto& [m, n, k] :
       {std::array<std::int64_t, 3>{64, 64, 8192}, std::array<std::int64_t, 3>{256, 10, 4096},
        std::array<std::int64_t, 3>{300, 200, 20000}}) {
    auto host_a = rt.tensor<float>({m, k}, loom::Memory::pageable);
    auto host_b = rt.tensor<float>({k, n}, loom::Memory::pageable);
    for (auto* t : {&host_a, &host_b}) {
      const auto values = loom::test::random_floats(static_cast<std::size_t>(t->numel()), rng);
      std::copy(values.begin(), values.end(), t->data_as<float>());
    }
    auto a = rt.tensor<float>({m, k});
    auto b = rt.tensor<float>({k, n});
    auto c = rt.tensor<float>({m, n});
    auto out = rt.tensor<float>({m, n}, loom::Memory::pageable);
    loom::Graph upload;
    upload.copy(host_a, a);
    upload.copy(host_b, b);
    rt.submit(upload).wait();
    loom::Graph g;
    g.add(loom::ops::matmul(a, b, c));
    g.copy(c, out);
    std::vector<float> first;
    for (int run = 0; run < 5; ++run) {
      std::fill_n(out.data_as<float>(), out.numel(), std::nanf(""));
      rt.submit(g).wait();
      const std::vector<float> got(out.data_as<float>(), out.data_as<float>() + out.numel());
      if (run == 0) {
        first = got;
        continue;
      }
      ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
          << m << "x" << n << "x" << k << ": run " << run << " differs from the first";
    }
  }
}

// Every public variant through the op, against the CPU backend's result on
// the same inputs: f32 at an awkward shape, bf16 (C in f32) at an aligned
// one; the Hopper kernels where the device has them.
TEST(MatmulGpu, EveryVariantThroughTheOpMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  using loom::ops::MatmulVariant;
  loom::Runtime gpu;
  loom::Runtime cpu_rt(loom::RuntimeOptions{.backend = loom::Backend::cpu});
  auto rng = loom::test::random_engine();
  const auto check = [&](loom::DType dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                         MatmulVariant variant) {
    const auto values = [&](std::int64_t count) {
      return loom::test::random_floats(static_cast<std::size_t>(count), rng);
    };
    const std::vector<float> av = values(m * k), bv = values(k * n);
    const auto make = [&](loom::Runtime& rt, const std::vector<float>& v, std::int64_t r,
                          std::int64_t c) {
      auto host = rt.tensor<float>({r, c}, loom::Memory::pageable);
      std::copy(v.begin(), v.end(), host.data_as<float>());
      auto wide = rt.tensor<float>({r, c});
      auto t = rt.tensor(dtype, {r, c});
      loom::Graph g;
      g.copy(host, wide);
      g.add(loom::ops::cast(wide, t));  // the same rounding on both backends
      rt.submit(g).wait();
      return t;
    };
    std::vector<std::vector<float>> results;
    for (loom::Runtime* rt : {&gpu, &cpu_rt}) {
      auto a = make(*rt, av, m, k);
      auto b = make(*rt, bv, k, n);
      auto c = rt->tensor<float>({m, n});
      auto out = rt->tensor<float>({m, n}, loom::Memory::pageable);
      loom::Graph g;
      g.add(loom::ops::matmul(a, b, c, {}, variant), {.name = "product"});
      g.copy(c, out);
      rt->submit(g).wait();
      results.emplace_back(out.data_as<float>(), out.data_as<float>() + m * n);
    }
    for (std::int64_t i = 0; i < m * n; ++i) {
      const float got = results[0][static_cast<std::size_t>(i)];
      const float want = results[1][static_cast<std::size_t>(i)];
      ASSERT_LE(std::fabs(got - want), 1e-4F * static_cast<float>(k))
          << loom::ops::to_string(variant) << " " << loom::to_string(dtype) << ": element " << i;
    }
  };
  for (auto v : {MatmulVariant::automatic, MatmulVariant::naive, MatmulVariant::tiled_manual,
                 MatmulVariant::tiled_cute, MatmulVariant::register_tiled,
                 MatmulVariant::warp_tiled, MatmulVariant::skinny}) {
    check(loom::DType::f32, 131, 97, 203, v);
  }
  std::vector<MatmulVariant> half{MatmulVariant::automatic, MatmulVariant::mma_sync,
                                  MatmulVariant::simple};
  if (loom::kernels::hgemm_wgmma_available()) {
    half.push_back(MatmulVariant::wgmma);
    half.push_back(MatmulVariant::wgmma_cluster);
  }
  for (auto v : half) check(loom::DType::bf16, 136, 264, 72, v);
}

TEST(MatmulGpu, BetaZeroThroughAGraphIgnoresANaNC) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  const std::int64_t m = 70, n = 130, k = 33;
  auto host_a = rt.tensor<float>({m, k}, loom::Memory::pageable);
  auto host_bt = rt.tensor<float>({n, k}, loom::Memory::pageable);  // B column-major
  auto host_c = rt.tensor<float>({m, n}, loom::Memory::pageable);
  for (auto* t : {&host_a, &host_bt}) {
    const auto values = loom::test::random_floats(static_cast<std::size_t>(t->numel()), rng);
    std::copy(values.begin(), values.end(), t->data_as<float>());
  }
  std::fill(host_c.data_as<float>(), host_c.data_as<float>() + m * n, std::nanf(""));
  auto a = rt.tensor<float>({m, k});
  auto bt = rt.tensor<float>({n, k});
  auto c = rt.tensor<float>({m, n});
  auto out = rt.tensor<float>({m, n}, loom::Memory::pageable);
  loom::Graph g;
  g.copy(host_a, a);
  g.copy(host_bt, bt);
  g.copy(host_c, c);
  g.add(loom::ops::matmul(a, bt.transpose(0, 1), c, 1.0F, 0.0F));
  g.copy(c, out);
  rt.submit(g).wait();

  HostMatrix ha(m, k, Order::row_major), hb(k, n, Order::col_major), zero(m, n, Order::row_major);
  ha.data = host_values(host_a);
  hb.data = host_values(host_bt);  // B^T row-major is B column-major
  HostMatrix expected = zero;
  SgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = ha.ref<const float>(ha.data.data());
  p.b = hb.ref<const float>(hb.data.data());
  p.c = expected.ref<float>(expected.data.data());
  loom::kernels::sgemm_reference(p);
  HostMatrix got(m, n, Order::row_major);
  got.data = host_values(out);
  const HostMatrix mag = loom::test::gemm::magnitudes(ha, hb, zero, 1.0F, 0.0F);
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(got, expected, mag, k, &first), 0) << first;
}

TEST(MatmulGpu, HostMemoryIsRejectedAtSubmitNamingTheTask) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  // One memory space (so the op's own checks pass), but not the device's.
  auto a = rt.tensor<float>({8, 8}, loom::Memory::pinned);
  auto b = rt.tensor<float>({8, 8}, loom::Memory::pinned);
  auto c = rt.tensor<float>({8, 8}, loom::Memory::pinned);
  loom::Graph g;
  g.add(loom::ops::matmul(a, b, c), {.name = "product"});
  try {
    (void)rt.submit(g);
    FAIL() << "a pinned host operand was accepted by the CUDA backend";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "product");
    EXPECT_NE(std::string(e.what()).find("is not on"), std::string::npos) << e.what();
  }
}

}  // namespace
