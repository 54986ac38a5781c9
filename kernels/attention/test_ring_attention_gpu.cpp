// Ring attention on one GPU: P local ranks (threads, a CUDA Runtime each)
// run the ring forward and backward on the GPU kernels; each rank's rows
// against attention over the whole sequence computed the plain way on the
// host (fresh random inputs, outputs poisoned first), causal or not, in both
// layouts and both 16-bit types, with blocks long enough for several of the
// kernels' tiles and tails.
#include <loom/comm.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/ring_attention.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "attention/test_support.hpp"
#include "support/gpu.hpp"
#include "support/ranks.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::ops::RingLayout;
using loom::test::attention::ring_local_rows;

struct Case {
  int ranks = 2;
  std::int64_t b = 1, h = 2, block = 96, d = 64;
  bool causal = false;
  RingLayout layout = RingLayout::zigzag;
  DType dtype = DType::bf16;
};

std::string describe(const Case& c) {
  return std::to_string(c.ranks) + " ranks, block " + std::to_string(c.block) + ", d " +
         std::to_string(c.d) + (c.causal ? ", causal" : "") +
         (c.layout == RingLayout::zigzag ? ", zigzag" : ", contiguous") +
         (c.dtype == DType::bf16 ? ", bf16" : ", f16");
}

float rounded(float x, DType dtype) {
  using namespace loom::kernels;
  return dtype == DType::bf16 ? bf16_bits_to_f32(f32_to_bf16_bits(x))
                              : f16_bits_to_f32(f32_to_f16_bits(x));
}

void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  const std::int64_t s = c.block * c.ranks;
  const std::int64_t heads = c.b * c.h;
  const auto n = static_cast<std::size_t>(heads * s * c.d);
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  const auto values = [&] {
    std::vector<float> v(n);
    for (auto& x : v) x = rounded(dist(rng), c.dtype);
    return v;
  };
  const auto q = values(), k = values(), v = values(), dout = values();
  const auto ref = loom::test::attention::whole_reference(q, k, v, dout, heads, s, c.d, c.causal);
  const double tol = c.dtype == DType::bf16 ? 1e-2 : 5e-3;
  loom::test::on_ranks(
      loom::local_communicators(c.ranks), loom::RuntimeOptions{},
      [&](int rank, loom::Communicator& comm, loom::Runtime& rt) {
        const auto ranges = loom::ops::ring_ranges(s, rank, c.ranks, c.layout);
        const loom::Shape shape{c.b, c.h, c.block, c.d};
        loom::Graph g;
        const auto typed = [&](const std::vector<float>& whole) {
          const auto mine = ring_local_rows(whole, heads, s, ranges, c.d);
          const auto f32 = rt.upload(std::span<const float>(mine), shape);
          auto t = rt.tensor(c.dtype, shape);
          g.add(loom::ops::cast(f32, t));
          return t;
        };
        const auto qt = typed(q), kt = typed(k), vt = typed(v), doutt = typed(dout);
        // Poisoned: NaN everywhere the ring must write.
        const std::vector<float> nan(static_cast<std::size_t>(shape.product()), std::nanf(""));
        const auto poisoned = [&] {
          auto t = rt.tensor(c.dtype, shape);
          g.add(loom::ops::cast(rt.upload(std::span<const float>(nan), shape), t));
          return t;
        };
        const auto out = poisoned(), dq = poisoned(), dk = poisoned(), dv = poisoned();
        const auto lse = rt.upload(
            std::span<const float>(nan.data(), static_cast<std::size_t>(c.b * c.h * c.block)),
            {c.b, c.h, c.block});
        const loom::ops::RingAttentionOptions o{.causal = c.causal, .layout = c.layout};
        loom::ops::ring_attention(g, comm, qt, kt, vt, out, lse, o);
        loom::ops::ring_attention_backward(g, comm, qt, kt, vt, out, lse, doutt,
                                           {.dq = dq, .dk = dk, .dv = dv}, o);
        const auto widened = [&](const loom::Tensor& x) {
          auto t = rt.tensor<float>(shape);
          g.add(loom::ops::cast(x, t));
          return t;
        };
        const auto out32 = widened(out), dq32 = widened(dq), dk32 = widened(dk), dv32 = widened(dv);
        rt.submit(g).wait();
        const auto expect = [&](const loom::Tensor& got_t, const std::vector<double>& whole_ref,
                                const char* what) {
          const auto got = rt.download<float>(got_t);
          const auto want = ring_local_rows(whole_ref, heads, s, ranges, c.d);
          double max = 1e-3;
          for (float w : want) max = std::max(max, static_cast<double>(std::fabs(w)));
          for (std::size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], tol * max)
                << what << ", rank " << rank << ", element " << i << " (row "
                << i / static_cast<std::size_t>(c.d) << ")";
          }
        };
        expect(out32, ref.out, "out");
        expect(dq32, ref.dq, "dq");
        expect(dk32, ref.dk, "dk");
        expect(dv32, ref.dv, "dv");
        const auto got_lse = rt.download<float>(lse);
        const auto want_lse = ring_local_rows(ref.lse, heads, s, ranges, 1);
        for (std::size_t i = 0; i < want_lse.size(); ++i) {
          ASSERT_NEAR(got_lse[i], want_lse[i], 1e-3) << "lse, rank " << rank << ", row " << i;
        }
      });
}

class RingAttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override { LOOM_REQUIRE_GPU(); }
};

TEST_F(RingAttentionGpu, EqualsAttentionOverTheWholeSequence) {
  for (int p : {2, 3, 4}) {
    check({.ranks = p, .block = 96});
    check({.ranks = p, .block = 72, .d = 128, .dtype = DType::f16});
  }
}

TEST_F(RingAttentionGpu, CausalInBothLayouts) {
  for (int p : {2, 4}) {
    for (auto layout : {RingLayout::zigzag, RingLayout::contiguous}) {
      check({.ranks = p, .block = 144, .causal = true, .layout = layout});
    }
  }
  check({.ranks = 3, .b = 2, .h = 1, .block = 80, .d = 128, .causal = true, .dtype = DType::f16});
}

}  // namespace
