// The SGEMM kernels' own code, run on the CPU under a small emulation of
// CUDA's execution model: every thread of a block is a fiber, blocks
// run one after another (so a kernel's __shared__ arrays, made static, are
// its block's), and __syncthreads is a barrier. It checks what a GPU run
// would, the CuTe partitions, predicates and double buffering included, at
// small shapes and without a GPU; timing and memory-model effects are not
// emulated (the GPU tests cover those).
#include "gemm/test_sgemm_emulated.hpp"  // first: it brings CUDA's headers and the emulation

#include <gtest/gtest.h>

#include "gemm/test_support.hpp"
#include "support/seed.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace emu = loom::kernels::sgemm_detail;
using loom::kernels::SgemmArgs;
using loom::kernels::SgemmVariant;
using loom::kernels::SgemmWarpTile;
using loom::test::gemm::HostMatrix;
using loom::test::gemm::Order;

using loom::emulated::run_grid;
using loom::test::sgemm_emulated::tiles;

// sgemm()'s skinny launches, emulated: the same plan, one slice or several.
void run_skinny(const SgemmArgs& p, bool with_workspace) {
  const emu::SkinnyPlan plan = emu::plan_skinny(p, with_workspace);
  const SgemmArgs& q = plan.q;
  std::vector<float> partial(static_cast<std::size_t>(plan.slices * q.m * q.n), std::nanf(""));
  const dim3 grid(tiles(q.m, emu::kSkinnyRows), static_cast<unsigned>(plan.slices));
  const auto launch = [&](auto kernel) {
    run_grid(grid, dim3(emu::kSkinnyLanes), [&] { kernel(q, partial.data(), plan.k_slice); });
  };
  if (q.n <= 8) {
    launch(emu::sgemm_skinny_n<8>);
  } else if (q.n <= 16) {
    launch(emu::sgemm_skinny_n<16>);
  } else {
    launch(emu::sgemm_skinny_n<emu::kSkinnyMaxN>);
  }
  if (plan.slices > 1) {
    run_grid(dim3(tiles(q.m * q.n, 256)), dim3(256),
             [&] { emu::sgemm_skinny_reduce(q, partial.data(), plan.slices); });
  }
}

// The launches of sgemm(), emulated.
void run(const SgemmArgs& p, SgemmVariant variant, SgemmWarpTile tile) {
  switch (variant) {
    case SgemmVariant::skinny: run_skinny(p, true); break;
    case SgemmVariant::naive:
      run_grid(dim3(tiles(p.n, emu::kNaiveX), tiles(p.m, emu::kNaiveY)),
               dim3(emu::kNaiveX, emu::kNaiveY), [&] { emu::sgemm_naive(p); });
      break;
    case SgemmVariant::tiled_manual:
      run_grid(dim3(tiles(p.n, emu::kTile), tiles(p.m, emu::kTile)), dim3(emu::kTile, emu::kTile),
               [&] { emu::sgemm_tiled_manual(p); });
      break;
    case SgemmVariant::tiled_cute:
      run_grid(dim3(tiles(p.n, emu::kTile), tiles(p.m, emu::kTile)), dim3(emu::kTile * emu::kTile),
               [&] { emu::sgemm_tiled_cute(p); });
      break;
    case SgemmVariant::register_tiled:
      run_grid(dim3(tiles(p.n, emu::kRegBlock), tiles(p.m, emu::kRegBlock)), dim3(emu::kRegThreads),
               [&] { emu::sgemm_register_tiled(p); });
      break;
    case SgemmVariant::warp_tiled:
      switch (tile) {
        case SgemmWarpTile::t128x128x8:
        case SgemmWarpTile::t128x128x16:
          loom::test::sgemm_emulated::run_warp_tiled_wide(p, tile);
          break;
        case SgemmWarpTile::t128x64x8:
        case SgemmWarpTile::t64x64x8:
          loom::test::sgemm_emulated::run_warp_tiled_narrow(p, tile);
          break;
      }
      break;
  }
}

struct Case {
  std::int64_t m, n, k;
  Order a, b, c;
  std::int64_t pad = 0;
  std::int64_t offset = 0;  // misaligns A and B: the scalar residue path everywhere
  float alpha = 1.5F, beta = -0.5F;
  bool bias_relu = false;  // a bias a column and relu: the general warp_tiled kernel
};

void check(const Case& t, SgemmVariant variant, SgemmWarpTile tile, std::mt19937_64& rng) {
  HostMatrix a(t.m, t.k, t.a, t.pad), b(t.k, t.n, t.b, t.pad), c0(t.m, t.n, t.c, t.pad);
  a.randomize(rng);
  b.randomize(rng);
  c0.randomize(rng);
  if (t.beta == 0.0F) {
    for (auto& x : c0.data) x = std::nanf("");
  }
  // Operands at `offset` elements into their buffers.
  std::vector<float> abuf(static_cast<std::size_t>(t.offset), 0.0F), bbuf = abuf;
  abuf.insert(abuf.end(), a.data.begin(), a.data.end());
  bbuf.insert(bbuf.end(), b.data.begin(), b.data.end());
  HostMatrix got = c0, expected = c0;
  SgemmArgs p;
  p.m = t.m;
  p.n = t.n;
  p.k = t.k;
  p.alpha = t.alpha;
  p.beta = t.beta;
  p.a = a.ref<const float>(abuf.data() + t.offset);
  p.b = b.ref<const float>(bbuf.data() + t.offset);
  p.c = got.ref<float>(got.data.data());
  std::vector<float> bias(static_cast<std::size_t>(t.n));
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25F * static_cast<float>(j % 7) - 0.75F;
  if (t.bias_relu) {
    p.bias = {bias.data(), 0, 1};
    p.activation = loom::kernels::SgemmActivation::relu;
  }
  run(p, variant, tile);
  p.a = a.ref<const float>(a.data.data());
  p.b = b.ref<const float>(b.data.data());
  p.c = expected.ref<float>(expected.data.data());
  loom::kernels::sgemm_reference(p);
  HostMatrix mag = loom::test::gemm::magnitudes(a, b, c0, t.alpha, t.beta == 0.0F ? 0.0F : t.beta);
  if (t.bias_relu) {
    for (std::int64_t i = 0; i < t.m; ++i) {
      for (std::int64_t j = 0; j < t.n; ++j)
        mag.at(i, j) += std::fabs(bias[static_cast<std::size_t>(j)]);
    }
  }
  std::string first;
  EXPECT_EQ(loom::test::gemm::count_mismatches(got, expected, mag, t.k, &first), 0)
      << to_string(variant) << " " << to_string(tile) << " " << t.m << "x" << t.n << "x" << t.k
      << " A " << to_string(t.a) << " B " << to_string(t.b) << " C " << to_string(t.c) << " pad "
      << t.pad << " offset " << t.offset << " beta " << t.beta << (t.bias_relu ? " bias, relu" : "")
      << "; first " << first;
}

// Shapes that cross tile edges in every dimension, kept small: the
// emulation starts a thread per CUDA thread.
void check_layouts(SgemmVariant variant, SgemmWarpTile tile, std::int64_t m, std::int64_t n,
                   std::int64_t k, bool bias_relu = false) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  std::vector<Case> cases;
  for (Order oa : {Order::row_major, Order::col_major}) {
    for (Order ob : {Order::row_major, Order::col_major}) {
      cases.push_back({m, n, k, oa, ob, Order::row_major});
    }
  }
  cases.push_back(
      {m, n, k, Order::col_major, Order::row_major, Order::col_major, 3, 0, 1.0F, 0.0F});
  cases.push_back(
      {m, n, k, Order::row_major, Order::col_major, Order::row_major, 4, 1, -2.0F, 1.0F});
  for (Case c : cases) {
    c.bias_relu = bias_relu;
    check(c, variant, tile, rng);
  }
}

TEST(SgemmEmulated, Naive) {
  check_layouts(SgemmVariant::naive, SgemmWarpTile::t128x128x8, 37, 41, 19);
}

TEST(SgemmEmulated, TiledManual) {
  check_layouts(SgemmVariant::tiled_manual, SgemmWarpTile::t128x128x8, 33, 31, 40);
}

TEST(SgemmEmulated, TiledCute) {
  check_layouts(SgemmVariant::tiled_cute, SgemmWarpTile::t128x128x8, 33, 31, 40);
}

TEST(SgemmEmulated, RegisterTiled) {
  check_layouts(SgemmVariant::register_tiled, SgemmWarpTile::t128x128x8, 130, 129, 21);
}

TEST(SgemmEmulated, WarpTiled128x128x8) {
  // Whole tiles (the vector path) beside edge tiles, and a partial last k tile.
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x8, 136, 132, 28);
  // Whole blocks only, through many turns of the double buffer.
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x8, 128, 256, 203);
}

TEST(SgemmEmulated, WarpTiled128x128x16) {
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x16, 129, 128, 40);
}

// The 128 x 128 tiles run a kernel of their own for plain products
// (alpha A B + beta C): the general one, with its fused epilogue, for the
// rest, here in every layout, with beta 0 over a NaN C, a column-major or
// padded C, and misaligned operands.
TEST(SgemmEmulated, WarpTiled128x128GeneralKernelWithABiasAndRelu) {
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x8, 136, 130, 37, true);
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x128x16, 129, 128, 40, true);
}

TEST(SgemmEmulated, WarpTiled128x64x8) {
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t128x64x8, 131, 130, 17);
}

// Skinny: C with few columns (as is, N = 10, 16 and 32: each instantiation)
// or few rows (the transposed problem), K cut into several slices, and one
// slice when there is no workspace; the epilogue with a bias and gelu.
TEST(SgemmEmulated, Skinny) {
  check_layouts(SgemmVariant::skinny, SgemmWarpTile::t128x128x8, 37, 10, 300);
  check_layouts(SgemmVariant::skinny, SgemmWarpTile::t128x128x8, 9, 16, 260);
  check_layouts(SgemmVariant::skinny, SgemmWarpTile::t128x128x8, 21, 32, 129);
  check_layouts(SgemmVariant::skinny, SgemmWarpTile::t128x128x8, 7, 45, 77);  // few rows
  const auto shape = [](std::int64_t m, std::int64_t n, std::int64_t k) {
    SgemmArgs p;
    p.m = m;
    p.n = n;
    p.k = k;
    return p;
  };
  EXPECT_GT(emu::plan_skinny(shape(37, 10, 300), true).slices, 1);
  EXPECT_EQ(emu::plan_skinny(shape(37, 10, 300), false).slices, 1);
  EXPECT_EQ(emu::plan_skinny(shape(7, 45, 77), true).q.n, 7);
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t m = 13, n = 10, k = 200;
  HostMatrix a(m, k, Order::row_major), b(k, n, Order::col_major);
  a.randomize(rng);
  b.randomize(rng);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = 0.1F * static_cast<float>(j) - 0.4F;
  for (bool workspace : {true, false}) {
    HostMatrix got(m, n, Order::row_major), want(m, n, Order::row_major);
    SgemmArgs p = shape(m, n, k);
    p.a = a.ref<const float>(a.data.data());
    p.b = b.ref<const float>(b.data.data());
    p.bias = {bias.data(), 0, 1};
    p.activation = loom::kernels::SgemmActivation::gelu_tanh;
    p.c = got.ref<float>(got.data.data());
    run_skinny(p, workspace);
    p.c = want.ref<float>(want.data.data());
    loom::kernels::sgemm_reference(p);
    for (std::size_t i = 0; i < got.data.size(); ++i) {
      EXPECT_NEAR(got.data[i], want.data[i], 1e-4) << i << " workspace " << workspace;
    }
  }
}

// Split-K: the grid's z slices of K into partial sums, then the ordered
// reduction with the epilogue (the plan sgemm() makes for a long K).
TEST(SgemmEmulated, WarpTiledSplitAlongK) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t m = 70, n = 40, k = 1100;
  for (Order oa : {Order::row_major, Order::col_major}) {
    HostMatrix a(m, k, oa), b(k, n, Order::row_major), got(m, n, Order::row_major),
        want(m, n, Order::row_major);
    a.randomize(rng);
    b.randomize(rng);
    got.randomize(rng);
    want.data = got.data;
    std::vector<float> bias(static_cast<std::size_t>(m), 0.25F);
    SgemmArgs p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.alpha = 1.5F;
    p.beta = -0.5F;
    p.a = a.ref<const float>(a.data.data());
    p.b = b.ref<const float>(b.data.data());
    p.bias = {bias.data(), 1, 0};
    p.activation = loom::kernels::SgemmActivation::relu;
    const std::int64_t slice = emu::split_k_slice(p, 1);
    ASSERT_GT(slice, 0);
    ASSERT_EQ(slice % 16, 0);
    const std::int64_t slices = (k + slice - 1) / slice;
    ASSERT_GE(slices, 2);
    std::vector<float> partial(static_cast<std::size_t>(slices * m * n), std::nanf(""));
    SgemmArgs split = p;
    split.c = got.ref<float>(got.data.data());
    split.k_slice = slice;
    split.partial = partial.data();
    p.c = want.ref<float>(want.data.data());
    loom::kernels::sgemm_reference(p);
    const std::vector<float> c0 = got.data;
    // A small tile and a 128 x 128 one (whose split runs its general kernel).
    for (SgemmWarpTile tile : {SgemmWarpTile::t64x64x8, SgemmWarpTile::t128x128x16}) {
      got.data = c0;
      std::fill(partial.begin(), partial.end(), std::nanf(""));
      if (tile == SgemmWarpTile::t64x64x8) {
        loom::test::sgemm_emulated::run_warp_tiled_narrow(split, tile);
      } else {
        loom::test::sgemm_emulated::run_warp_tiled_wide(split, tile);
      }
      run_grid(dim3(tiles(m * n, 256)), dim3(256),
               [&] { emu::sgemm_skinny_reduce(split, partial.data(), slices); });
      for (std::size_t i = 0; i < got.data.size(); ++i) {
        ASSERT_NEAR(got.data[i], want.data[i], 1e-3)
            << i << " A " << to_string(oa) << " tile " << to_string(tile);
      }
    }
  }
}

// Both operands K-major at N >= 1024: the copy of A M-major, launched as
// sgemm() launches it (every element lands, into a NaN-poisoned copy with a
// padded leading dimension, from a padded A), and the 128 x 128 kernels on
// the copy, plain and with an epilogue: a whole tile in M (the copy read as
// 16-byte vectors) and an edge tile.
TEST(SgemmEmulated, BothOperandsKMajorThroughAnMMajorCopyOfA) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const std::int64_t m = 130, n = 1030, k = 45, pad = 3;
  HostMatrix a(m, k, Order::row_major, pad), b(k, n, Order::col_major),
      want(m, n, Order::row_major);
  a.randomize(rng);
  b.randomize(rng);
  want.randomize(rng);
  HostMatrix unused(m, n, Order::row_major);
  SgemmArgs p = loom::test::gemm::product_args(a, b, unused, 1.5F, -0.5F);
  ASSERT_TRUE(emu::copies_a_m_major(p, true, 0));
  EXPECT_FALSE(emu::copies_a_m_major(p, false, 0));  // a smaller tile
  EXPECT_FALSE(emu::copies_a_m_major(p, true, 64));  // split along K
  SgemmArgs narrow = p;
  narrow.n = 1023;
  EXPECT_FALSE(emu::copies_a_m_major(narrow, true, 0));
  SgemmArgs b_n_major = p;
  b_n_major.b = {b.data.data(), n, 1};
  EXPECT_FALSE(emu::copies_a_m_major(b_n_major, true, 0));

  const std::int64_t ld = emu::m_major_ld(m);
  ASSERT_EQ(ld, 132);
  std::vector<float> copy(static_cast<std::size_t>(ld * k), std::nanf(""));
  run_grid(emu::copy_a_grid(m, k), emu::copy_a_block(), [&] {
    emu::sgemm_copy_a_m_major(p.a.data, p.a.row_stride, copy.data(), ld, static_cast<int>(m),
                              static_cast<int>(k));
  });
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t kk = 0; kk < k; ++kk) {
      ASSERT_EQ(copy[static_cast<std::size_t>(kk * ld + i)], a.at(i, kk)) << i << ", " << kk;
    }
  }
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25F * static_cast<float>(j % 7) - 0.75F;
  for (bool epilogue : {false, true}) {
    for (SgemmWarpTile tile : {SgemmWarpTile::t128x128x8, SgemmWarpTile::t128x128x16}) {
      HostMatrix got = want, expected = want;
      SgemmArgs q = p;
      if (epilogue) {
        q.bias = {bias.data(), 0, 1};
        q.activation = loom::kernels::SgemmActivation::relu;
      }
      q.c = expected.ref<float>(expected.data.data());
      loom::kernels::sgemm_reference(q);
      q.a = {copy.data(), 1, ld};
      q.c = got.ref<float>(got.data.data());
      loom::test::sgemm_emulated::run_warp_tiled_wide(q, tile);
      for (std::size_t i = 0; i < got.data.size(); ++i) {
        ASSERT_NEAR(got.data[i], expected.data[i], 1e-3)
            << i << " tile " << to_string(tile) << (epilogue ? " bias, relu" : "");
      }
    }
  }
}

TEST(SgemmEmulated, WarpTiled64x64x8) {
  check_layouts(SgemmVariant::warp_tiled, SgemmWarpTile::t64x64x8, 100, 70, 27);
}

}  // namespace
