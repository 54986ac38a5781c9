// Ring attention on the local backend (P ranks as threads, a CPU Runtime
// each): every rank's result equals attention over the whole sequence
// computed the plain way, forward (out, lse) and backward (dq, dk, dv), for
// P = 1..4, causal or not, in both layouts and both 16-bit types; the
// sequence laid out and back by ring_shard / ring_unshard (positions of other
// ranks left as they were); blocks that cannot form a ring rejected when the
// graph is built, ranks whose blocks differ failing by name, and repeated
// runs allocating nothing.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/ring_attention.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "attention/test_support.hpp"
#include "support/cpu.hpp"
#include "support/ranks.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::DType;
using loom::ops::RingLayout;
using loom::test::attention::random_halves;
using loom::test::attention::widen;

constexpr std::uint16_t kPoison = 0x7FFF;  // a NaN in both 16-bit types

struct Case {
  int ranks = 2;
  std::int64_t b = 1, h = 2, block = 8, d = 64;
  bool causal = false;
  RingLayout layout = RingLayout::zigzag;
  DType dtype = DType::bf16;
};

std::string describe(const Case& c) {
  return std::to_string(c.ranks) + " ranks, block " + std::to_string(c.block) +
         (c.causal ? ", causal" : "") +
         (c.layout == RingLayout::zigzag ? ", zigzag" : ", contiguous") +
         (c.dtype == DType::bf16 ? ", bf16" : ", f16");
}

// The whole sequence's inputs, and what attention over it gives, head by head.
struct Whole {
  std::int64_t s = 0;
  std::vector<std::uint16_t> q, k, v, dout;
  std::vector<double> out, lse, dq, dk, dv;
};

Whole whole_problem(const Case& c) {
  Whole w;
  w.s = c.ranks * c.block;
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  const auto n = static_cast<std::size_t>(c.b * c.h * w.s * c.d);
  w.q = random_halves(n, c.dtype, rng);
  w.k = random_halves(n, c.dtype, rng);
  w.v = random_halves(n, c.dtype, rng);
  w.dout = random_halves(n, c.dtype, rng);
  const auto widened = [&](const std::vector<std::uint16_t>& bits) {
    std::vector<float> x(bits.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = widen(c.dtype, bits[i]);
    return x;
  };
  auto ref = loom::test::attention::whole_reference(widened(w.q), widened(w.k), widened(w.v),
                                                    widened(w.dout), c.b * c.h, w.s, c.d, c.causal);
  w.out = std::move(ref.out);
  w.lse = std::move(ref.lse);
  w.dq = std::move(ref.dq);
  w.dk = std::move(ref.dk);
  w.dv = std::move(ref.dv);
  return w;
}

loom::Tensor tensor_of(loom::Runtime& rt, const std::vector<std::uint16_t>& bits, DType dtype,
                       const loom::Shape& shape) {
  auto t = rt.tensor(dtype, shape);
  std::memcpy(t.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  return t;
}

loom::Tensor poisoned(loom::Runtime& rt, DType dtype, const loom::Shape& shape) {
  auto t = rt.tensor(dtype, shape);
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(t.numel()), kPoison);
  std::memcpy(t.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  return t;
}

bool mine(const std::vector<loom::ops::SequenceRange>& ranges, std::int64_t i) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const auto& r) { return r.start <= i && i < r.stop; });
}

double max_abs(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// Elements of `got` (whole-sequence layout, 16-bit) at this rank's positions
// against `want`, within tol * max|want|; the other positions still poison.
void expect_rows(const loom::Tensor& got, const std::vector<double>& want, const Case& c,
                 std::int64_t s, const std::vector<loom::ops::SequenceRange>& ranges, double tol,
                 const char* what, int rank) {
  const auto* bits = static_cast<const std::uint16_t*>(got.data());
  const double bound = tol * std::max(max_abs(want), 1e-3);
  for (std::int64_t bh = 0; bh < c.b * c.h; ++bh) {
    for (std::int64_t i = 0; i < s; ++i) {
      for (std::int64_t e = 0; e < c.d; ++e) {
        const auto at = static_cast<std::size_t>((bh * s + i) * c.d + e);
        if (!mine(ranges, i)) {
          ASSERT_EQ(bits[at], kPoison) << what << ": rank " << rank << " wrote position " << i;
          continue;
        }
        ASSERT_NEAR(widen(c.dtype, bits[at]), want[at], bound)
            << what << ", " << describe(c) << ": rank " << rank << " head " << bh << " position "
            << i << " element " << e;
      }
    }
  }
}

void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  const Whole w = whole_problem(c);
  const loom::Shape whole_shape{c.b, c.h, w.s, c.d};
  const loom::Shape block_shape{c.b, c.h, c.block, c.d};
  const double tol = c.dtype == DType::bf16 ? 1e-2 : 2e-3;
  loom::RuntimeOptions options = loom::test::cpu(2);
  loom::test::on_ranks(
      loom::local_communicators(c.ranks), options,
      [&](int rank, loom::Communicator& comm, loom::Runtime& rt) {
        const auto q_all = tensor_of(rt, w.q, c.dtype, whole_shape);
        const auto k_all = tensor_of(rt, w.k, c.dtype, whole_shape);
        const auto v_all = tensor_of(rt, w.v, c.dtype, whole_shape);
        const auto dout_all = tensor_of(rt, w.dout, c.dtype, whole_shape);
        auto out_all = poisoned(rt, c.dtype, whole_shape);
        auto dq_all = poisoned(rt, c.dtype, whole_shape);
        auto dk_all = poisoned(rt, c.dtype, whole_shape);
        auto dv_all = poisoned(rt, c.dtype, whole_shape);
        auto lse_all = rt.tensor<float>({c.b, c.h, w.s});
        std::fill_n(lse_all.data_as<float>(), lse_all.numel(), std::nanf(""));

        auto q = rt.tensor(c.dtype, block_shape);
        auto k = rt.tensor(c.dtype, block_shape);
        auto v = rt.tensor(c.dtype, block_shape);
        auto dout = rt.tensor(c.dtype, block_shape);
        auto out = poisoned(rt, c.dtype, block_shape);
        auto dq = poisoned(rt, c.dtype, block_shape);
        auto dk = poisoned(rt, c.dtype, block_shape);
        auto dv = poisoned(rt, c.dtype, block_shape);
        auto lse = rt.tensor<float>({c.b, c.h, c.block});

        const int p = comm.size();
        const loom::ops::RingAttentionOptions o{.causal = c.causal, .layout = c.layout};
        loom::Graph g;
        for (const auto& [from, to] : {std::pair{q_all, q}, std::pair{k_all, k},
                                       std::pair{v_all, v}, std::pair{dout_all, dout}}) {
          loom::ops::ring_shard(g, from, to, rank, p, c.layout);
        }
        loom::ops::ring_attention(g, comm, q, k, v, out, lse, o);
        loom::ops::ring_attention_backward(g, comm, q, k, v, out, lse, dout,
                                           {.dq = dq, .dk = dk, .dv = dv}, o);
        for (const auto& [from, to] : {std::pair{out, out_all}, std::pair{dq, dq_all},
                                       std::pair{dk, dk_all}, std::pair{dv, dv_all}}) {
          loom::ops::ring_unshard(g, from, to, rank, p, c.layout);
        }
        loom::ops::ring_unshard(g, lse, lse_all, rank, p, c.layout);
        rt.submit(g).wait();

        const auto ranges = loom::ops::ring_ranges(w.s, rank, p, c.layout);
        expect_rows(out_all, w.out, c, w.s, ranges, tol, "out", rank);
        expect_rows(dq_all, w.dq, c, w.s, ranges, tol, "dq", rank);
        expect_rows(dk_all, w.dk, c, w.s, ranges, tol, "dk", rank);
        expect_rows(dv_all, w.dv, c, w.s, ranges, tol, "dv", rank);
        const float* got_lse = lse_all.data_as<float>();
        for (std::int64_t bh = 0; bh < c.b * c.h; ++bh) {
          for (std::int64_t i = 0; i < w.s; ++i) {
            const auto at = static_cast<std::size_t>(bh * w.s + i);
            if (!mine(ranges, i)) {
              ASSERT_TRUE(std::isnan(got_lse[at])) << "rank " << rank << " wrote lse " << i;
            } else {
              ASSERT_NEAR(got_lse[at], w.lse[at], 1e-4) << "rank " << rank << " lse " << i;
            }
          }
        }
      });
}

TEST(RingAttentionCpu, EqualsAttentionOverTheWholeSequence) {
  for (int p = 1; p <= 4; ++p) {
    check({.ranks = p, .block = 8});
    check({.ranks = p, .block = 6, .d = 128, .dtype = DType::f16});
  }
}

TEST(RingAttentionCpu, CausalInBothLayouts) {
  for (int p = 1; p <= 4; ++p) {
    for (auto layout : {RingLayout::zigzag, RingLayout::contiguous}) {
      check({.ranks = p, .block = 8, .causal = true, .layout = layout});
    }
  }
  check({.ranks = 3, .b = 2, .h = 1, .block = 10, .causal = true, .dtype = DType::f16});
}

TEST(RingAttentionCpu, RangesOfEachLayout) {
  using loom::ops::ring_ranges;
  const auto z = ring_ranges(16, 1, 4, RingLayout::zigzag);
  ASSERT_EQ(z.size(), 2U);
  EXPECT_EQ(z[0].start, 2);
  EXPECT_EQ(z[0].stop, 4);
  EXPECT_EQ(z[1].start, 12);
  EXPECT_EQ(z[1].stop, 14);
  const auto c = ring_ranges(16, 3, 4, RingLayout::contiguous);
  ASSERT_EQ(c.size(), 1U);
  EXPECT_EQ(c[0].start, 12);
  EXPECT_EQ(c[0].stop, 16);
  EXPECT_THROW((void)ring_ranges(12, 0, 4, RingLayout::zigzag), loom::InvalidArgument);
  EXPECT_THROW((void)ring_ranges(16, 4, 4, RingLayout::zigzag), loom::InvalidArgument);
}

TEST(RingAttentionCpu, BlocksThatCannotFormARingAreRejectedWhenBuilt) {
  loom::Runtime rt(loom::test::cpu(1));
  const auto comms = loom::local_communicators(2);
  const auto q = rt.tensor(DType::bf16, {1, 1, 7, 64});
  const auto out = rt.tensor(DType::bf16, {1, 1, 7, 64});
  const auto k8 = rt.tensor(DType::bf16, {1, 1, 8, 64});
  loom::Graph g;
  try {
    loom::ops::ring_attention(g, *comms[0], q, q, q, out, {}, {.causal = true});
    ADD_FAILURE() << "an odd block under zigzag was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("even"), std::string::npos) << e.what();
  }
  try {
    loom::ops::ring_attention(g, *comms[0], q, k8, k8, out);
    ADD_FAILURE() << "keys of another length were accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("one length"), std::string::npos) << e.what();
  }
  const auto v16 = rt.tensor(DType::f16, {1, 1, 8, 64});
  try {
    loom::ops::ring_attention(g, *comms[0], k8, k8, v16, k8);
    ADD_FAILURE() << "values of another dtype were accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("one dtype"), std::string::npos) << e.what();
  }
  try {
    loom::ops::ring_attention_backward(g, *comms[0], k8, k8, k8, k8, {}, k8, {});
    ADD_FAILURE() << "a backward without lse was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("lse"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.size(), 0U) << "a rejected call left tasks behind";
}

// A rank whose block is longer than its neighbour's: the ring exchange sees
// the sizes differ and fails on the ranks it joins, naming the step.
TEST(RingAttentionCpu, RanksWithBlocksOfDifferentLengthsFailNamingTheExchange) {
  const auto comms = loom::local_communicators(2, {.timeout = std::chrono::milliseconds(3000)});
  std::vector<std::string> errors(2);
  loom::test::on_ranks(
      comms, loom::test::cpu(2), [&](int rank, loom::Communicator& comm, loom::Runtime& rt) {
        const std::int64_t block = rank == 0 ? 8 : 10;
        const loom::Shape shape{1, 1, block, 64};
        auto rng = std::mt19937_64(loom::test::fresh_seed() + rank);
        const auto bits = random_halves(static_cast<std::size_t>(block * 64), DType::bf16, rng);
        const auto q = tensor_of(rt, bits, DType::bf16, shape);
        const auto out = rt.tensor(DType::bf16, shape);
        loom::Graph g;
        loom::ops::ring_attention(g, comm, q, q, q, out);
        try {
          rt.submit(g).wait();
        } catch (const loom::Error& e) {
          errors[static_cast<std::size_t>(rank)] = e.what();
        }
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ring_attention.step0.send_"), std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

// Run after run, a ring allocates nothing: its scratch (three key/value
// buffers, partial results, the f32 sums: graph intermediates) is the
// submitted graph's from its first run on, and nothing else grows.
TEST(RingAttentionCpu, RepeatedRunsAllocateNothing) {
  const Case c{.ranks = 3, .block = 8, .causal = true};
  loom::test::on_ranks(
      loom::local_communicators(c.ranks), loom::test::cpu(2),
      [&](int rank, loom::Communicator& comm, loom::Runtime& rt) {
        const loom::Shape shape{c.b, c.h, c.block, c.d};
        auto rng = std::mt19937_64(loom::test::fresh_seed() + static_cast<unsigned>(rank));
        const auto n = static_cast<std::size_t>(shape.product());
        const auto q = tensor_of(rt, random_halves(n, c.dtype, rng), c.dtype, shape);
        const auto k = tensor_of(rt, random_halves(n, c.dtype, rng), c.dtype, shape);
        const auto v = tensor_of(rt, random_halves(n, c.dtype, rng), c.dtype, shape);
        const auto dout = tensor_of(rt, random_halves(n, c.dtype, rng), c.dtype, shape);
        auto out = rt.tensor(c.dtype, shape);
        auto dq = rt.tensor(c.dtype, shape);
        auto dk = rt.tensor(c.dtype, shape);
        auto dv = rt.tensor(c.dtype, shape);
        auto lse = rt.tensor<float>({c.b, c.h, c.block});
        const loom::ops::RingAttentionOptions o{.causal = true};
        loom::Graph g;
        loom::ops::ring_attention(g, comm, q, k, v, out, lse, o);
        loom::ops::ring_attention_backward(g, comm, q, k, v, out, lse, dout,
                                           {.dq = dq, .dk = dk, .dv = dv}, o);
        rt.submit(g).wait();
        const auto before = rt.statistics(loom::Memory::pageable);
        for (int i = 0; i < 5; ++i) rt.submit(g).wait();
        const auto after = rt.statistics(loom::Memory::pageable);
        EXPECT_GT(before.allocations, 0U) << "rank " << rank;
        EXPECT_EQ(after.allocations, before.allocations) << "rank " << rank;
        EXPECT_EQ(after.upstream_allocations, before.upstream_allocations) << "rank " << rank;
        EXPECT_EQ(after.in_use_bytes, before.in_use_bytes) << "rank " << rank;
      });
}

}  // namespace
