// Attention on the CPU backend: the reference against attention computed the
// plain way (whole score matrices), causal both ways with Sq != Sk, rows that
// keep no key, strided [B, S, H, D] views, two halves of the keys merged
// exactly by their log-sum-exps (what ring attention relies on), a compiled
// graph, and rejections at submit naming the task.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/attention.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "attention/attention.hpp"
#include "attention/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::test::cpu;
using loom::test::attention::plain_attention;
using loom::test::attention::plain_attention_gradients;
using loom::test::attention::random_halves;
using loom::test::attention::widen;

struct Problem {
  std::int64_t b, h, sq, sk, d;
  bool causal = false;
  loom::ops::CausalAlignment alignment = loom::ops::CausalAlignment::top_left;
};

// Runs the op on the CPU backend over fresh random inputs and checks every
// head against plain_attention: outputs within the output type's rounding,
// lse within 1e-5.
void check(const Problem& p, DType dtype) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const auto q_bits = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  const auto k_bits = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto v_bits = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto tensor = [&](const std::vector<std::uint16_t>& bits, std::int64_t s) {
    auto t = rt.tensor(dtype, {p.b, p.h, s, p.d});
    std::memcpy(t.data(), bits.data(), bits.size() * 2);
    return t;
  };
  auto q = tensor(q_bits, p.sq);
  auto k = tensor(k_bits, p.sk);
  auto v = tensor(v_bits, p.sk);
  auto out = rt.tensor(dtype, {p.b, p.h, p.sq, p.d});
  auto lse = rt.tensor<float>({p.b, p.h, p.sq});
  loom::Graph g;
  g.add(loom::ops::flash_attention(q, k, v, out, lse,
                                   {.causal = p.causal, .alignment = p.alignment}));
  rt.submit(g).wait();
  const std::int64_t offset =
      p.alignment == loom::ops::CausalAlignment::bottom_right ? p.sk - p.sq : 0;
  const auto* out_bits = static_cast<const std::uint16_t*>(out.data());
  const auto* lse_values = lse.data_as<float>();
  const auto head = [&](const std::vector<std::uint16_t>& bits, std::int64_t s, std::int64_t bh) {
    std::vector<float> x(static_cast<std::size_t>(s * p.d));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = widen(dtype, bits[bh * s * p.d + i]);
    return x;
  };
  for (std::int64_t bh = 0; bh < p.b * p.h; ++bh) {
    const auto want =
        plain_attention(head(q_bits, p.sq, bh), head(k_bits, p.sk, bh), head(v_bits, p.sk, bh),
                        p.sq, p.sk, p.d, 1.0 / std::sqrt(double(p.d)), p.causal, offset);
    for (std::int64_t i = 0; i < p.sq; ++i) {
      const float got_lse = lse_values[bh * p.sq + i];
      if (std::isinf(want.lse[i])) {
        ASSERT_TRUE(std::isinf(got_lse) && got_lse < 0) << "row " << i << " keeps no key";
      } else {
        ASSERT_NEAR(got_lse, want.lse[i], 1e-5) << "head " << bh << " row " << i;
      }
      for (std::int64_t e = 0; e < p.d; ++e) {
        const float got = widen(dtype, out_bits[(bh * p.sq + i) * p.d + e]);
        const double w = want.out[i * p.d + e];
        ASSERT_NEAR(got, w, (dtype == DType::bf16 ? 4e-3 : 5e-4) * (std::fabs(w) + 1e-2))
            << "head " << bh << " row " << i << " col " << e;
      }
    }
  }
}

TEST(AttentionCpu, MatchesPlainAttention) {
  check({.b = 2, .h = 2, .sq = 37, .sk = 37, .d = 64}, DType::bf16);
  check({.b = 1, .h = 3, .sq = 20, .sk = 45, .d = 128}, DType::f16);
}

TEST(AttentionCpu, CausalAlignedTopLeftAndBottomRight) {
  for (auto align :
       {loom::ops::CausalAlignment::top_left, loom::ops::CausalAlignment::bottom_right}) {
    check({.b = 1, .h = 2, .sq = 33, .sk = 33, .d = 64, .causal = true, .alignment = align},
          DType::bf16);
    check({.b = 1, .h = 2, .sq = 17, .sk = 40, .d = 64, .causal = true, .alignment = align},
          DType::bf16);
    // Bottom right with more queries than keys: the first rows keep no key.
    check({.b = 1, .h = 1, .sq = 40, .sk = 17, .d = 64, .causal = true, .alignment = align},
          DType::f16);
  }
}

// Attention over all keys equals the two halves' results merged by their
// log-sum-exps: out = sum_i exp(lse_i - lse) out_i, lse = log sum_i exp(lse_i).
TEST(AttentionCpu, HalvesOfTheKeysMergeByTheirLogSumExps) {
  loom::Runtime rt(cpu(2));
  constexpr std::int64_t kB = 1, kH = 2, kS = 24, kKeys = 50, kD = 64;
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const auto make = [&](std::int64_t s) {
    auto t = rt.tensor(DType::bf16, {kB, kH, s, kD});
    const auto bits = random_halves(static_cast<std::size_t>(t.numel()), DType::bf16, rng);
    std::memcpy(t.data(), bits.data(), bits.size() * 2);
    return t;
  };
  auto q = make(kS);
  auto k = make(kKeys);
  auto v = make(kKeys);
  const auto run = [&](const loom::Tensor& keys, const loom::Tensor& values) {
    auto out = rt.tensor(DType::bf16, {kB, kH, kS, kD});
    auto lse = rt.tensor<float>({kB, kH, kS});
    loom::Graph g;
    g.add(loom::ops::flash_attention(q, keys, values, out, lse));
    rt.submit(g).wait();
    return std::pair(out, lse);
  };
  const auto [all, all_lse] = run(k, v);
  const auto [first, first_lse] = run(k.slice(2, 0, 20), v.slice(2, 0, 20));
  const auto [second, second_lse] = run(k.slice(2, 20, kKeys), v.slice(2, 20, kKeys));
  const auto* l0 = first_lse.data_as<float>();
  const auto* l1 = second_lse.data_as<float>();
  const auto* l = all_lse.data_as<float>();
  const auto bits = [](const loom::Tensor& t) {
    return static_cast<const std::uint16_t*>(t.data());
  };
  for (std::int64_t r = 0; r < kB * kH * kS; ++r) {
    const double merged = std::log(std::exp(double(l0[r])) + std::exp(double(l1[r])));
    ASSERT_NEAR(merged, l[r], 1e-5) << r;
    for (std::int64_t e = 0; e < kD; ++e) {
      const double o = std::exp(l0[r] - merged) * widen(DType::bf16, bits(first)[r * kD + e]) +
                       std::exp(l1[r] - merged) * widen(DType::bf16, bits(second)[r * kD + e]);
      ASSERT_NEAR(o, widen(DType::bf16, bits(all)[r * kD + e]), 1e-2) << r << " " << e;
    }
  }
}

// q, k and v as [B, S, H, D] tensors viewed [B, H, S, D]: the same result as
// contiguous copies; and a compiled graph replays it.
TEST(AttentionCpu, StridedViewsAndACompiledGraph) {
  loom::Runtime rt(cpu(2));
  constexpr std::int64_t kB = 2, kS = 19, kH = 3, kD = 64;
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  auto bshd = rt.tensor(DType::bf16, {3, kB, kS, kH, kD});  // q, k, v stacked
  const auto bits = random_halves(bshd.numel(), DType::bf16, rng);
  std::memcpy(bshd.data(), bits.data(), bits.size() * 2);
  const auto part = [&](std::int64_t i) {
    return bshd.slice(0, i, i + 1).reshape({kB, kS, kH, kD}).transpose(1, 2);
  };
  auto strided_out = rt.tensor(DType::bf16, {kB, kH, kS, kD});
  auto dense_out = rt.tensor(DType::bf16, {kB, kH, kS, kD});
  loom::Graph g;
  g.add(loom::ops::flash_attention(part(0), part(1), part(2), strided_out));
  auto exe = rt.compile(g);
  exe.run().wait();
  loom::Graph dense;
  auto q = rt.tensor(DType::bf16, {kB, kH, kS, kD});
  auto k = rt.tensor(DType::bf16, {kB, kH, kS, kD});
  auto v = rt.tensor(DType::bf16, {kB, kH, kS, kD});
  dense.copy(part(0), q);
  dense.copy(part(1), k);
  dense.copy(part(2), v);
  dense.add(loom::ops::flash_attention(q, k, v, dense_out));
  rt.submit(dense).wait();
  EXPECT_EQ(std::memcmp(strided_out.data(), dense_out.data(), dense_out.nbytes()), 0);
}

TEST(AttentionCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto q = rt.tensor(DType::bf16, {1, 2, 16, 64});
  auto k = rt.tensor(DType::bf16, {1, 2, 24, 64});
  auto v = rt.tensor(DType::bf16, {1, 2, 24, 64});
  auto out = rt.tensor(DType::bf16, {1, 2, 16, 64});
  auto lse = rt.tensor<float>({1, 2, 16});
  const auto rejected = [&](const loom::OpPtr& op, const std::string& words) {
    loom::test::expect_rejected(rt, op, words, "suspect");
  };
  using loom::ops::flash_attention;
  rejected(flash_attention(rt.tensor<float>({1, 2, 16, 64}), k, v, out), "q");
  rejected(flash_attention(q, rt.tensor(DType::f16, {1, 2, 24, 64}), v, out), "k");
  rejected(flash_attention(
               rt.tensor(DType::bf16, {1, 2, 16, 96}), rt.tensor(DType::bf16, {1, 2, 24, 96}),
               rt.tensor(DType::bf16, {1, 2, 24, 96}), rt.tensor(DType::bf16, {1, 2, 16, 96})),
           "64 or 128");
  rejected(flash_attention(q, k, rt.tensor(DType::bf16, {1, 2, 20, 64}), out), "k and v");
  rejected(flash_attention(q, k, v, rt.tensor(DType::bf16, {1, 2, 24, 64})), "out must have");
  rejected(flash_attention(q, k, v, out, rt.tensor<float>({1, 2, 17})), "lse must be");
  rejected(flash_attention(q, k, v, q), "must not share storage");
  rejected(flash_attention(q.transpose(2, 3), k, v, out), "contiguous");
  rejected(flash_attention(q, k, v, out, lse, {.scale = -1.0F}), "scale");
  rejected(
      flash_attention(q, k, v, out, lse, {.variant = static_cast<loom::ops::AttentionVariant>(7)}),
      "unknown variant 7 (one of: automatic, mma_sync, wgmma)");
}

// An empty problem, or one without keys, is FA2's launch whatever the
// variant (TMA takes no empty dimension): nothing is refused, nothing asks
// the device.
TEST(AttentionCpu, EmptyProblemsAreNeverRefused) {
  loom::kernels::AttentionArgs p;
  p.batch = 1;
  p.heads = 2;
  p.q_len = 16;
  p.head_dim = 64;
  p.variant = loom::ops::AttentionVariant::wgmma;
  EXPECT_EQ(loom::kernels::flash_fwd_variant_refusal(p), "");  // no keys
  p.k_len = 16;
  p.q_len = 0;
  EXPECT_EQ(loom::kernels::flash_fwd_variant_refusal(p), "");  // no queries
  p.q_len = 16;
  p.heads = 0;
  EXPECT_EQ(loom::kernels::flash_fwd_variant_refusal(p), "");  // no heads
  p.heads = 2;
  p.variant = static_cast<loom::ops::AttentionVariant>(9);
  EXPECT_EQ(loom::kernels::flash_fwd_variant_refusal(p), "unknown variant 9");
}

// The forward's variants by their one table (loom/ops/variant.hpp); the CPU
// backend runs its reference whatever the variant.
TEST(AttentionCpu, VariantsAreNamedByTheirTableAndEachRunsOnTheCpu) {
  using loom::ops::AttentionVariant;
  EXPECT_EQ(loom::ops::to_string(AttentionVariant::mma_sync), "mma_sync");
  EXPECT_EQ(loom::ops::parse_variant<AttentionVariant>("wgmma"), AttentionVariant::wgmma);
  EXPECT_EQ(loom::ops::parse_variant<AttentionVariant>("fa3"), std::nullopt);
  const Problem p{.b = 1, .h = 1, .sq = 40, .sk = 70, .d = 64};
  for (auto variant :
       {AttentionVariant::automatic, AttentionVariant::mma_sync, AttentionVariant::wgmma}) {
    loom::Runtime rt(cpu(1));
    auto q = rt.tensor(DType::bf16, {p.b, p.h, p.sq, p.d});
    auto k = rt.tensor(DType::bf16, {p.b, p.h, p.sk, p.d});
    auto v = rt.tensor(DType::bf16, {p.b, p.h, p.sk, p.d});
    auto out = rt.tensor(DType::bf16, {p.b, p.h, p.sq, p.d});
    for (auto* t : {&q, &k, &v}) {
      auto* bits = static_cast<std::uint16_t*>(t->data());
      for (std::int64_t i = 0; i < t->numel(); ++i) bits[i] = 0x3F80;  // 1.0
    }
    loom::Graph g;
    g.add(loom::ops::flash_attention(q, k, v, out, {}, {.variant = variant}));
    rt.submit(g).wait();
    EXPECT_EQ(static_cast<const std::uint16_t*>(out.data())[0], 0x3F80) << to_string(variant);
  }
}

// The backward on the CPU backend against gradients computed the plain way:
// forward then backward in one graph, fresh random q, k, v and dout. The
// reference takes out (rounded to the operand type) and lse as given, so the
// tolerance is a few of that type's ulps of each gradient's largest magnitude.
void check_backward(const Problem& p, DType dtype) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const auto q_bits = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  const auto k_bits = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto v_bits = random_halves(p.b * p.h * p.sk * p.d, dtype, rng);
  const auto do_bits = random_halves(p.b * p.h * p.sq * p.d, dtype, rng);
  const auto tensor = [&](const std::vector<std::uint16_t>& bits, std::int64_t s) {
    auto t = rt.tensor(dtype, {p.b, p.h, s, p.d});
    std::memcpy(t.data(), bits.data(), bits.size() * 2);
    return t;
  };
  const auto poisoned = [&](std::int64_t s) {
    return tensor(std::vector<std::uint16_t>(static_cast<std::size_t>(p.b * p.h * s * p.d), 0xFFFF),
                  s);
  };
  auto q = tensor(q_bits, p.sq);
  auto k = tensor(k_bits, p.sk);
  auto v = tensor(v_bits, p.sk);
  auto dout = tensor(do_bits, p.sq);
  auto out = rt.tensor(dtype, {p.b, p.h, p.sq, p.d});
  auto lse = rt.tensor<float>({p.b, p.h, p.sq});
  auto dq = poisoned(p.sq);
  auto dk = poisoned(p.sk);
  auto dv = poisoned(p.sk);
  const loom::ops::AttentionOptions options{.causal = p.causal, .alignment = p.alignment};
  loom::Graph g;
  g.add(loom::ops::flash_attention(q, k, v, out, lse, options));
  g.add(loom::ops::flash_attention_backward(q, k, v, out, lse, dout, {.dq = dq, .dk = dk, .dv = dv},
                                            options));
  rt.submit(g).wait();
  const std::int64_t offset =
      p.alignment == loom::ops::CausalAlignment::bottom_right ? p.sk - p.sq : 0;
  const auto head = [&](const std::vector<std::uint16_t>& bits, std::int64_t s, std::int64_t bh) {
    std::vector<float> x(static_cast<std::size_t>(s * p.d));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = widen(dtype, bits[bh * s * p.d + i]);
    return x;
  };
  const double ulps = dtype == DType::bf16 ? 2e-2 : 4e-3;
  const auto expect_close = [&](const char* name, const loom::Tensor& got_tensor,
                                const std::vector<double>& want, std::int64_t bh) {
    double largest = 1e-3;
    for (double w : want) largest = std::max(largest, std::fabs(w));
    const auto* got = static_cast<const std::uint16_t*>(got_tensor.data()) + bh * want.size();
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(widen(dtype, got[i]), want[i], ulps * largest)
          << name << " head " << bh << " element " << i;
    }
  };
  for (std::int64_t bh = 0; bh < p.b * p.h; ++bh) {
    const auto want = plain_attention_gradients(
        head(q_bits, p.sq, bh), head(k_bits, p.sk, bh), head(v_bits, p.sk, bh),
        head(do_bits, p.sq, bh), p.sq, p.sk, p.d, 1.0 / std::sqrt(double(p.d)), p.causal, offset);
    expect_close("dq", dq, want.dq, bh);
    expect_close("dk", dk, want.dk, bh);
    expect_close("dv", dv, want.dv, bh);
  }
}

TEST(AttentionCpu, BackwardMatchesPlainGradients) {
  check_backward({.b = 2, .h = 2, .sq = 37, .sk = 29, .d = 64}, DType::bf16);
  check_backward({.b = 1, .h = 2, .sq = 20, .sk = 45, .d = 128}, DType::f16);
  for (auto align :
       {loom::ops::CausalAlignment::top_left, loom::ops::CausalAlignment::bottom_right}) {
    check_backward(
        {.b = 1, .h = 2, .sq = 33, .sk = 33, .d = 64, .causal = true, .alignment = align},
        DType::bf16);
    // Bottom right with more queries than keys: rows with no key, and their
    // gradients 0; top left with fewer: keys no query keeps, dk and dv 0.
    check_backward(
        {.b = 1, .h = 1, .sq = 40, .sk = 17, .d = 64, .causal = true, .alignment = align},
        DType::f16);
    check_backward(
        {.b = 1, .h = 1, .sq = 12, .sk = 30, .d = 64, .causal = true, .alignment = align},
        DType::bf16);
  }
}

// As the README promises for empty tensors: no queries write nothing; no
// keys give zeros and a log-sum-exp of -inf; the backward's gradients are
// zeros where no query keeps a key, and for queries that keep none.
TEST(AttentionCpu, NoQueriesWriteNothingAndNoKeysGiveZerosAndMinusInfinity) {
  loom::Runtime rt(cpu(2));
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const auto filled = [&](std::int64_t s) {
    auto t = rt.tensor(DType::bf16, {1, 2, s, 64});
    const auto bits = random_halves(static_cast<std::size_t>(t.numel()), DType::bf16, rng);
    if (!bits.empty()) std::memcpy(t.data(), bits.data(), bits.size() * 2);
    return t;
  };
  const auto poisoned = [&](loom::DType dtype, const loom::Shape& shape) {
    auto t = rt.tensor(dtype, shape);
    std::memset(t.data(), 0x7F, t.nbytes());  // a NaN in either width
    return t;
  };
  {  // no keys
    auto q = filled(5);
    auto k = filled(0);
    auto v = filled(0);
    auto out = poisoned(DType::bf16, {1, 2, 5, 64});
    auto lse = poisoned(DType::f32, {1, 2, 5});
    loom::Graph g;
    g.add(loom::ops::flash_attention(q, k, v, out, lse));
    rt.submit(g).wait();
    const auto* o = static_cast<const std::uint16_t*>(out.data());
    for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(o[i], 0U) << "out element " << i;
    for (std::int64_t i = 0; i < lse.numel(); ++i) {
      const float x = lse.data_as<float>()[i];
      ASSERT_TRUE(std::isinf(x) && x < 0) << "lse " << i << " is " << x;
    }
    // The backward: no key, so dq is zero (dk and dv have no elements).
    auto dout = filled(5);
    auto dq = poisoned(DType::bf16, {1, 2, 5, 64});
    loom::Graph b;
    b.add(loom::ops::flash_attention_backward(q, k, v, out, lse, dout,
                                              {.dq = dq, .dk = filled(0), .dv = filled(0)}));
    rt.submit(b).wait();
    const auto* d = static_cast<const std::uint16_t*>(dq.data());
    for (std::int64_t i = 0; i < dq.numel(); ++i) ASSERT_EQ(d[i], 0U) << "dq element " << i;
  }
  {  // no queries: nothing written, and the backward's dk and dv are zero
    auto q = filled(0);
    auto k = filled(7);
    auto v = filled(7);
    loom::Graph g;
    g.add(loom::ops::flash_attention(q, k, v, filled(0), rt.tensor<float>({1, 2, 0})));
    EXPECT_NO_THROW(rt.submit(g).wait());
    auto dk = poisoned(DType::bf16, {1, 2, 7, 64});
    auto dv = poisoned(DType::bf16, {1, 2, 7, 64});
    loom::Graph b;
    b.add(loom::ops::flash_attention_backward(q, k, v, filled(0), rt.tensor<float>({1, 2, 0}),
                                              filled(0), {.dq = filled(0), .dk = dk, .dv = dv}));
    rt.submit(b).wait();
    for (const auto& t : {dk, dv}) {
      const auto* x = static_cast<const std::uint16_t*>(t.data());
      for (std::int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(x[i], 0U) << "element " << i;
    }
  }
}

TEST(AttentionCpu, BackwardBadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  const auto t = [&](std::int64_t s) { return rt.tensor(DType::bf16, {1, 2, s, 64}); };
  auto q = t(16);
  auto k = t(24);
  auto v = t(24);
  auto out = t(16);
  auto dout = t(16);
  auto lse = rt.tensor<float>({1, 2, 16});
  auto dq = t(16);
  auto dk = t(24);
  auto dv = t(24);
  const auto rejected = [&](const loom::OpPtr& op, const std::string& words) {
    loom::test::expect_rejected(rt, op, words, "suspect");
  };
  using loom::ops::flash_attention_backward;
  rejected(flash_attention_backward(q, k, v, out, loom::Tensor{}, dout, {dq, dk, dv}), "lse");
  rejected(flash_attention_backward(q, k, v, out, lse, loom::Tensor{}, {dq, dk, dv}), "dout");
  rejected(flash_attention_backward(q, k, v, out, lse, dout, {loom::Tensor{}, dk, dv}), "dq");
  rejected(flash_attention_backward(q, k, v, out, lse, dout, {dq, t(16), dv}), "dk");
  rejected(flash_attention_backward(q, k, v, out, lse, dout,
                                    {dq, dk, rt.tensor(DType::f16, {1, 2, 24, 64})}),
           "dv");
  rejected(flash_attention_backward(q, k, v, out, lse, t(17), {dq, dk, dv}), "dout");
  rejected(flash_attention_backward(q, k, v, out, lse, dout, {dq, dk, dk}), "share storage");
  rejected(flash_attention_backward(q, k, v, out, lse, dout, {q, dk, dv}), "share storage");
  rejected(
      flash_attention_backward(q, k, v, out, lse, dout,
                               {rt.tensor(DType::bf16, {1, 2, 64, 16}).transpose(2, 3), dk, dv}),
      "contiguous");
  // The wgmma backward has no kernel at head dim 64: said at submit, on
  // either backend, where the forward's wgmma would run.
  rejected(flash_attention_backward(q, k, v, out, lse, dout, {dq, dk, dv},
                                    {.variant = loom::ops::AttentionVariant::wgmma}),
           "head dim 128 only");
}

}  // namespace
