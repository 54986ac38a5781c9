// Ring attention under mpirun (world_communicator): each rank takes its
// block of a whole sequence every rank draws from one job seed, runs the
// ring forward and backward, and checks its rows against attention over the
// whole sequence computed the plain way, causal or not, in both layouts. On
// the CPU backend (the mpi backend over host tensors) and on a GPU (nccl
// with one rank, ranks sharing a GPU over mpi).
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/ring_attention.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "attention/test_support.hpp"

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

loom::Runtime& runtime() {
  static loom::Runtime rt;
  return rt;
}

std::uint64_t job_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = std::random_device{}();
    MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return s;
  }();
  return seed;
}

// Values a bf16 holds exactly, the same on every rank.
std::vector<float> whole_values(std::size_t n, int salt) {
  std::mt19937_64 rng(job_seed() * 31 + static_cast<std::uint64_t>(salt));
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  std::vector<float> v(n);
  for (auto& x : v) x = loom::kernels::bf16_bits_to_f32(loom::kernels::f32_to_bf16_bits(dist(rng)));
  return v;
}

struct Case {
  std::int64_t b = 1, h = 2, block = 8, d = 64;
  bool causal = false;
  RingLayout layout = RingLayout::zigzag;
};

std::vector<float> local_rows(const auto& whole, const Case& c, std::int64_t s,
                              const std::vector<loom::ops::SequenceRange>& ranges,
                              std::int64_t width) {
  return loom::test::attention::ring_local_rows(whole, c.b * c.h, s, ranges, width);
}

double max_abs(const std::vector<float>& x) {
  double m = 1e-3;
  for (float v : x) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

void check(const Case& c) {
  auto& rt = runtime();
  const auto world = loom::world_communicator(rt);
  const int ranks = world->size();
  const int rank = world->rank();
  const std::int64_t s = c.block * ranks;
  const auto n = static_cast<std::size_t>(c.b * c.h * s * c.d);
  const auto q = whole_values(n, 1);
  const auto k = whole_values(n, 2);
  const auto v = whole_values(n, 3);
  const auto dout = whole_values(n, 4);
  const auto ref =
      loom::test::attention::whole_reference(q, k, v, dout, c.b * c.h, s, c.d, c.causal);

  const auto ranges = loom::ops::ring_ranges(s, rank, ranks, c.layout);
  const loom::Shape shape{c.b, c.h, c.block, c.d};
  const auto upload = [&](const std::vector<float>& whole) {
    const auto mine = local_rows(whole, c, s, ranges, c.d);
    return rt.upload(std::span<const float>(mine), shape);
  };
  const auto q32 = upload(q);
  const auto k32 = upload(k);
  const auto v32 = upload(v);
  const auto dout32 = upload(dout);
  loom::Graph g;
  const auto bf16 = [&](const loom::Tensor& x) {
    auto t = rt.tensor(DType::bf16, shape);
    g.add(loom::ops::cast(x, t));
    return t;
  };
  const auto qb = bf16(q32), kb = bf16(k32), vb = bf16(v32), doutb = bf16(dout32);
  const auto out = rt.tensor(DType::bf16, shape);
  const auto dq = rt.tensor(DType::bf16, shape);
  const auto dk = rt.tensor(DType::bf16, shape);
  const auto dv = rt.tensor(DType::bf16, shape);
  const auto lse = rt.tensor<float>({c.b, c.h, c.block});
  const loom::ops::RingAttentionOptions o{.causal = c.causal, .layout = c.layout};
  loom::ops::ring_attention(g, *world, qb, kb, vb, out, lse, o);
  loom::ops::ring_attention_backward(g, *world, qb, kb, vb, out, lse, doutb,
                                     {.dq = dq, .dk = dk, .dv = dv}, o);
  const auto f32 = [&](const loom::Tensor& x) {
    auto t = rt.tensor<float>(shape);
    g.add(loom::ops::cast(x, t));
    return t;
  };
  const auto out32 = f32(out), dq32 = f32(dq), dk32 = f32(dk), dv32 = f32(dv);
  rt.submit(g).wait();

  const std::string where = "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                            (c.causal ? ", causal" : "") +
                            (c.layout == RingLayout::zigzag ? ", zigzag" : ", contiguous");
  const auto expect = [&](const loom::Tensor& got_t, const std::vector<double>& whole_ref,
                          const char* what) {
    const auto got = rt.download<float>(got_t);
    const auto want = local_rows(whole_ref, c, s, ranges, c.d);
    const double bound = 1e-2 * max_abs(want);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], bound) << what << ", " << where << ", element " << i;
    }
  };
  expect(out32, ref.out, "out");
  expect(dq32, ref.dq, "dq");
  expect(dk32, ref.dk, "dk");
  expect(dv32, ref.dv, "dv");
  const auto got_lse = rt.download<float>(lse);
  const auto want_lse = local_rows(ref.lse, c, s, ranges, 1);
  for (std::size_t i = 0; i < want_lse.size(); ++i) {
    ASSERT_NEAR(got_lse[i], want_lse[i], 1e-3) << "lse, " << where << ", row " << i;
  }
}

TEST(MpiRingAttention, EqualsAttentionOverTheWholeSequence) { check({}); }

TEST(MpiRingAttention, CausalZigzag) { check({.block = 8, .causal = true}); }

TEST(MpiRingAttention, CausalContiguous) {
  check({.b = 2, .h = 1, .block = 6, .causal = true, .layout = RingLayout::contiguous});
}

}  // namespace
