// flash_attention and flash_attention_backward on the GPU against the CPU
// backend (the reference) on the same random inputs: head dims 64 and 128,
// bf16 and f16, tails in both lengths, Sq != Sk, causal aligned both ways,
// rows that keep no key, a strided [B, S, H, D] view, eager and compiled,
// the forward on each kernel the device runs (FA2's everywhere, the wgmma
// one on compute capability 9.0); outputs poisoned first.
#include "support/gpu.hpp"

#include <loom/graph.hpp>
#include <loom/ops/attention.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "attention/attention.hpp"
#include "attention/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::ops::AttentionVariant;
using loom::ops::CausalAlignment;
using loom::test::attention::random_halves;
using loom::test::attention::widen;

struct Problem {
  std::int64_t b, h, sq, sk, d;
  bool causal = false;
  CausalAlignment alignment = CausalAlignment::top_left;
  bool strided = false;  // q, k, v as [B, S, H, D] viewed [B, H, S, D]
};

// The forward's kernels this device runs: FA2's always, the wgmma one
// where the device and the build allow it (flash_fwd_variant_refusal on
// tensors that suit it).
std::vector<AttentionVariant> forward_variants() {
  std::vector<AttentionVariant> variants{AttentionVariant::mma_sync};
  loom::kernels::AttentionArgs probe;
  probe.batch = probe.heads = probe.q_len = probe.k_len = 1;
  probe.head_dim = 64;
  probe.q = probe.k = probe.v = probe.out = {nullptr, 64, 64, 64};
  probe.variant = AttentionVariant::wgmma;
  const std::string why = loom::kernels::flash_fwd_variant_refusal(probe);
  if (why.empty()) {
    variants.push_back(AttentionVariant::wgmma);
  } else {
    std::printf("[ INFO     ] the wgmma forward is not tested here: %s\n", why.c_str());
  }
  return variants;
}

std::string describe(const Problem& p, DType dtype) {
  return std::string(loom::to_string(dtype)) + " " + std::to_string(p.b) + "x" +
         std::to_string(p.h) + " sq " + std::to_string(p.sq) + " sk " + std::to_string(p.sk) +
         " d " + std::to_string(p.d) + (p.causal ? " causal" : "") +
         (p.alignment == CausalAlignment::bottom_right ? " bottom-right" : "") +
         (p.strided ? " strided" : "");
}

// 16-bit patterns as a tensor of `dtype` ([rows..., d] of `shape`).
loom::Tensor upload_bits(loom::Runtime& rt, DType dtype, const std::vector<std::uint16_t>& bits,
                         const loom::Shape& shape) {
  if (dtype == DType::bf16) {
    return rt.upload(std::span<const loom::bfloat16>(
                         reinterpret_cast<const loom::bfloat16*>(bits.data()), bits.size()),
                     shape);
  }
  return rt.upload(
      std::span<const loom::half>(reinterpret_cast<const loom::half*>(bits.data()), bits.size()),
      shape);
}

std::vector<std::uint16_t> download_bits(loom::Runtime& rt, const loom::Tensor& t) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::bf16) {
    rt.download_into(
          t, std::span<loom::bfloat16>(reinterpret_cast<loom::bfloat16*>(bits.data()), bits.size()))
        .wait();
  } else {
    rt.download_into(t,
                     std::span<loom::half>(reinterpret_cast<loom::half*>(bits.data()), bits.size()))
        .wait();
  }
  return bits;
}

// An input of `s` rows: [B, H, S, D], or (p.strided) the same values laid
// out [B, S, H, D] and viewed [B, H, S, D].
loom::Tensor input_tensor(loom::Runtime& rt, const Problem& p, DType dtype,
                          const std::vector<std::uint16_t>& bits, std::int64_t s) {
  if (!p.strided) return upload_bits(rt, dtype, bits, {p.b, p.h, s, p.d});
  std::vector<std::uint16_t> bshd(bits.size());
  for (std::int64_t b = 0; b < p.b; ++b)
    for (std::int64_t h = 0; h < p.h; ++h)
      for (std::int64_t i = 0; i < s; ++i)
        for (std::int64_t e = 0; e < p.d; ++e)
          bshd[((b * s + i) * p.h + h) * p.d + e] = bits[((b * p.h + h) * s + i) * p.d + e];
  return upload_bits(rt, dtype, bshd, {p.b, s, p.h, p.d}).transpose(1, 2);
}

struct Result {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

Result run(loom::Runtime& rt, const Problem& p, DType dtype, const std::vector<std::uint16_t>& q,
           const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v, bool compiled,
           AttentionVariant variant) {
  auto tq = input_tensor(rt, p, dtype, q, p.sq);
  auto tk = input_tensor(rt, p, dtype, k, p.sk);
  auto tv = input_tensor(rt, p, dtype, v, p.sk);
  // Poisoned: NaN patterns everywhere, so an element not written fails.
  auto out = upload_bits(
      rt, dtype,
      std::vector<std::uint16_t>(static_cast<std::size_t>(p.b * p.h * p.sq * p.d), 0xFFFF),
      {p.b, p.h, p.sq, p.d});
  auto lse = rt.upload(
      std::span<const float>(std::vector<float>(static_cast<std::size_t>(p.b * p.h * p.sq),
                                                std::numeric_limits<float>::quiet_NaN())),
      {p.b, p.h, p.sq});
  loom::Graph g;
  g.add(loom::ops::flash_attention(
      tq, tk, tv, out, lse, {.causal = p.causal, .alignment = p.alignment, .variant = variant}));
  if (compiled) {
    auto exe = rt.compile(g);
    exe.run().wait();
  } else {
    rt.submit(g).wait();
  }
  return {download_bits(rt, out), rt.download<float>(lse)};
}

// "" where got matches want within the type's tolerance, else the first mismatch.
std::string compare(const Problem& p, DType dtype, const Result& got, const Result& want) {
  // Outputs are averages of values in [-1, 1]; P is rounded to the operand
  // type before P V, so the error is a few of its ulps of 1.
  const double tol = dtype == DType::bf16 ? 1e-2 : 5e-3;
  for (std::size_t i = 0; i < want.out.size(); ++i) {
    const float g = widen(dtype, got.out[i]);
    const float w = widen(dtype, want.out[i]);
    if (!(std::fabs(g - w) <= tol)) {
      return describe(p, dtype) + ": out[" + std::to_string(i) + "] = " + std::to_string(g) +
             ", want " + std::to_string(w);
    }
  }
  for (std::size_t i = 0; i < want.lse.size(); ++i) {
    const float g = got.lse[i];
    const float w = want.lse[i];
    const bool both_empty = std::isinf(w) && w < 0 && std::isinf(g) && g < 0;
    if (!both_empty && !(std::fabs(g - w) <= 1e-3F * (1.0F + std::fabs(w)))) {
      return describe(p, dtype) + ": lse[" + std::to_string(i) + "] = " + std::to_string(g) +
             ", want " + std::to_string(w);
    }
  }
  return "";
}

// "" where every forward kernel of this device matches the reference, else
// the first mismatch (naming the kernel).
std::string check(const Problem& p, DType dtype, bool compiled = false) {
  auto rng = loom::test::random_engine();
  const auto q = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  const auto k = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto v = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const Result want = run(cpu, p, dtype, q, k, v, false, AttentionVariant::automatic);
  static const std::vector<AttentionVariant> variants = forward_variants();
  for (const AttentionVariant variant : variants) {
    const Result got = run(gpu, p, dtype, q, k, v, compiled, variant);
    if (std::string why = compare(p, dtype, got, want); !why.empty()) {
      return std::string(loom::ops::to_string(variant)) + " " + why;
    }
  }
  return "";
}

class AttentionGpu : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionGpu, HeadDimsAndTails) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t d : {64, 128}) {
    EXPECT_EQ(check({.b = 2, .h = 3, .sq = 256, .sk = 256, .d = d}, GetParam()), "");
    EXPECT_EQ(check({.b = 1, .h = 2, .sq = 200, .sk = 333, .d = d}, GetParam()), "");
    EXPECT_EQ(check({.b = 1, .h = 1, .sq = 1, .sk = 70, .d = d}, GetParam()), "");
    EXPECT_EQ(check({.b = 1, .h = 2, .sq = 130, .sk = 1, .d = d}, GetParam()), "");
  }
}

TEST_P(AttentionGpu, CausalAlignedBothWays) {
  LOOM_REQUIRE_GPU();
  for (auto align : {CausalAlignment::top_left, CausalAlignment::bottom_right}) {
    for (std::int64_t d : {64, 128}) {
      EXPECT_EQ(
          check({.b = 1, .h = 2, .sq = 300, .sk = 300, .d = d, .causal = true, .alignment = align},
                GetParam()),
          "");
      EXPECT_EQ(
          check({.b = 1, .h = 2, .sq = 100, .sk = 260, .d = d, .causal = true, .alignment = align},
                GetParam()),
          "");
      // More queries than keys: bottom right leaves the first rows no key.
      EXPECT_EQ(
          check({.b = 1, .h = 1, .sq = 260, .sk = 100, .d = d, .causal = true, .alignment = align},
                GetParam()),
          "");
    }
  }
}

// Several times the stages' depth of key blocks (the wgmma kernel's
// barriers change phase every two blocks), tails in both lengths.
TEST_P(AttentionGpu, LongSequencesWrapTheStages) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(check({.b = 1, .h = 2, .sq = 700, .sk = 1100, .d = 128}, GetParam()), "");
  EXPECT_EQ(check({.b = 2, .h = 1, .sq = 1030, .sk = 1030, .d = 64, .causal = true}, GetParam()),
            "");
  EXPECT_EQ(check({.b = 1,
                   .h = 1,
                   .sq = 500,
                   .sk = 900,
                   .d = 128,
                   .causal = true,
                   .alignment = CausalAlignment::bottom_right},
                  GetParam()),
            "");
}

TEST_P(AttentionGpu, StridedViewsAndACompiledGraph) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(check({.b = 2, .h = 4, .sq = 150, .sk = 150, .d = 64, .strided = true}, GetParam()),
            "");
  EXPECT_EQ(
      check({.b = 1, .h = 2, .sq = 129, .sk = 200, .d = 128, .causal = true}, GetParam(), true),
      "");
}

// Backward: forward then backward in one graph on each backend from the same
// q, k, v and dout; dq, dk and dv poisoned first. Gradients are sums over
// many rows, so the error is measured against each gradient's largest
// magnitude: the worst |got - want| / max |want| must stay under a few of the
// operand type's ulps (P and dS are rounded to it before their products).
struct Gradients {
  std::vector<std::uint16_t> dq, dk, dv;
};

Gradients run_backward(loom::Runtime& rt, const Problem& p, DType dtype,
                       const std::vector<std::uint16_t>& q, const std::vector<std::uint16_t>& k,
                       const std::vector<std::uint16_t>& v, const std::vector<std::uint16_t>& dout,
                       bool compiled, AttentionVariant variant) {
  auto tq = input_tensor(rt, p, dtype, q, p.sq);
  auto tk = input_tensor(rt, p, dtype, k, p.sk);
  auto tv = input_tensor(rt, p, dtype, v, p.sk);
  auto tdout = input_tensor(rt, p, dtype, dout, p.sq);
  const auto poisoned = [&](std::int64_t s) {
    return upload_bits(
        rt, dtype,
        std::vector<std::uint16_t>(static_cast<std::size_t>(p.b * p.h * s * p.d), 0xFFFF),
        {p.b, p.h, s, p.d});
  };
  auto out = poisoned(p.sq);
  auto lse = rt.tensor<float>({p.b, p.h, p.sq});
  auto dq = poisoned(p.sq);
  auto dk = poisoned(p.sk);
  auto dv = poisoned(p.sk);
  const loom::ops::AttentionOptions options{
      .causal = p.causal, .alignment = p.alignment, .variant = variant};
  loom::Graph g;
  g.add(loom::ops::flash_attention(tq, tk, tv, out, lse, options));
  g.add(loom::ops::flash_attention_backward(tq, tk, tv, out, lse, tdout,
                                            {.dq = dq, .dk = dk, .dv = dv}, options));
  if (compiled) {
    auto exe = rt.compile(g);
    exe.run().wait();
    exe.run().wait();  // a replay writes the same gradients again (dq's sums start from zero)
  } else {
    rt.submit(g).wait();
  }
  return {download_bits(rt, dq), download_bits(rt, dk), download_bits(rt, dv)};
}

std::string compare_gradient(const char* name, const Problem& p, DType dtype,
                             const std::vector<std::uint16_t>& got,
                             const std::vector<std::uint16_t>& want) {
  double largest = 0.0;
  for (auto w : want) largest = std::max<double>(largest, std::fabs(widen(dtype, w)));
  const double tol = (dtype == DType::bf16 ? 2e-2 : 5e-3) * std::max(largest, 1e-3);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float g = widen(dtype, got[i]);
    const float w = widen(dtype, want[i]);
    if (!(std::fabs(g - w) <= tol)) {
      return describe(p, dtype) + ": " + name + "[" + std::to_string(i) +
             "] = " + std::to_string(g) + ", want " + std::to_string(w) + " (largest " +
             std::to_string(largest) + ")";
    }
  }
  return "";
}

std::string check_backward(const Problem& p, DType dtype, bool compiled = false) {
  auto rng = loom::test::random_engine();
  const auto q = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  const auto k = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto v = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto dout = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const Gradients want =
      run_backward(cpu, p, dtype, q, k, v, dout, false, AttentionVariant::automatic);
  // The wgmma backward takes head dim 128 only.
  static const std::vector<AttentionVariant> variants = forward_variants();
  for (const AttentionVariant variant : variants) {
    if (variant == AttentionVariant::wgmma && p.d != 128) continue;
    const Gradients got = run_backward(gpu, p, dtype, q, k, v, dout, compiled, variant);
    for (auto message : {compare_gradient("dq", p, dtype, got.dq, want.dq),
                         compare_gradient("dk", p, dtype, got.dk, want.dk),
                         compare_gradient("dv", p, dtype, got.dv, want.dv)}) {
      if (!message.empty()) return std::string(loom::ops::to_string(variant)) + " " + message;
    }
  }
  return "";
}

TEST_P(AttentionGpu, BackwardHeadDimsTailsAndCausal) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t d : {64, 128}) {
    EXPECT_EQ(check_backward({.b = 2, .h = 2, .sq = 256, .sk = 256, .d = d}, GetParam()), "");
    EXPECT_EQ(check_backward({.b = 1, .h = 2, .sq = 200, .sk = 333, .d = d}, GetParam()), "");
    EXPECT_EQ(check_backward({.b = 1, .h = 1, .sq = 1, .sk = 70, .d = d}, GetParam()), "");
    for (auto align : {CausalAlignment::top_left, CausalAlignment::bottom_right}) {
      EXPECT_EQ(
          check_backward(
              {.b = 1, .h = 2, .sq = 300, .sk = 300, .d = d, .causal = true, .alignment = align},
              GetParam()),
          "");
      // Bottom right with more queries than keys: the first rows keep no key.
      EXPECT_EQ(
          check_backward(
              {.b = 1, .h = 1, .sq = 260, .sk = 100, .d = d, .causal = true, .alignment = align},
              GetParam()),
          "");
    }
  }
}

TEST_P(AttentionGpu, BackwardInACompiledGraphReplaysTheSame) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(check_backward({.b = 1, .h = 3, .sq = 129, .sk = 200, .d = 64, .causal = true},
                           GetParam(), true),
            "");
  EXPECT_EQ(check_backward({.b = 2, .h = 1, .sq = 150, .sk = 260, .d = 128}, GetParam(), true), "");
}

// Key blocks that no query sees (a top-left mask with keys past every
// query's diagonal: their dk and dv are zeros), one key, and strided
// [B, S, H, D] views of q, k, v and dout.
TEST_P(AttentionGpu, BackwardUnseenKeysOneKeyAndStridedViews) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t d : {64, 128}) {
    EXPECT_EQ(
        check_backward({.b = 1, .h = 2, .sq = 100, .sk = 400, .d = d, .causal = true}, GetParam()),
        "");
    EXPECT_EQ(check_backward({.b = 2, .h = 1, .sq = 70, .sk = 1, .d = d}, GetParam()), "");
    EXPECT_EQ(
        check_backward({.b = 2, .h = 3, .sq = 150, .sk = 200, .d = d, .strided = true}, GetParam()),
        "");
  }
}

// Many query blocks a key block (the wgmma kernel's Q and dO stages wrap
// several times), several key blocks, tails, both masks.
TEST_P(AttentionGpu, BackwardLongSequences) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(check_backward({.b = 1, .h = 2, .sq = 700, .sk = 300, .d = 128}, GetParam()), "");
  EXPECT_EQ(
      check_backward({.b = 1, .h = 1, .sq = 520, .sk = 520, .d = 128, .causal = true}, GetParam()),
      "");
  EXPECT_EQ(check_backward({.b = 1,
                            .h = 1,
                            .sq = 300,
                            .sk = 650,
                            .d = 128,
                            .causal = true,
                            .alignment = CausalAlignment::bottom_right},
                           GetParam()),
            "");
}

// automatic takes the wgmma kernel wherever it runs, and FA2's where the
// tensors do not suit TMA (a zero head stride: heads sharing k), where an
// explicit wgmma is refused with the reason.
TEST(AttentionGpuVariants, AutomaticTakesTheWgmmaKernelWhereItRuns) {
  LOOM_REQUIRE_GPU();
  const bool wgmma_here = forward_variants().size() == 2;
  loom::kernels::AttentionArgs p;
  p.batch = 2;
  p.heads = 2;
  p.q_len = p.k_len = 256;
  p.head_dim = 64;
  p.q = p.k = p.v = p.out = {nullptr, 2 * 256 * 64, 256 * 64, 64};
  EXPECT_EQ(loom::kernels::flash_fwd_kernel_for(p),
            wgmma_here ? AttentionVariant::wgmma : AttentionVariant::mma_sync);
  p.k.head_stride = 0;
  EXPECT_EQ(loom::kernels::flash_fwd_kernel_for(p), AttentionVariant::mma_sync);
  p.variant = AttentionVariant::wgmma;
  EXPECT_NE(loom::kernels::flash_fwd_variant_refusal(p), "");
  p.variant = AttentionVariant::mma_sync;
  EXPECT_EQ(loom::kernels::flash_fwd_variant_refusal(p), "");

  // The backward: wgmma at head dim 128 only.
  loom::kernels::AttentionBackwardArgs b;
  b.batch = 1;
  b.heads = 2;
  b.q_len = b.k_len = 256;
  b.head_dim = 128;
  b.q = b.k = b.v = b.out = b.dout = b.dq = b.dk = b.dv = {nullptr, 2 * 256 * 128, 256 * 128, 128};
  EXPECT_EQ(loom::kernels::flash_bwd_kernel_for(b),
            wgmma_here ? AttentionVariant::wgmma : AttentionVariant::mma_sync);
  b.head_dim = 64;
  EXPECT_EQ(loom::kernels::flash_bwd_kernel_for(b), AttentionVariant::mma_sync);
  b.variant = AttentionVariant::wgmma;
  EXPECT_NE(loom::kernels::flash_bwd_variant_refusal(b).find("head dim 128 only"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Types, AttentionGpu, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& p) { return std::string(loom::to_string(p.param)); });

}  // namespace
