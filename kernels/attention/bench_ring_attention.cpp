// Ring attention's efficiency on one GPU: P local ranks (a Runtime each, the
// local backend's communicators) run loom::ops::ring_attention over a 16k
// sequence split P ways; the anchor, measured in the same benchmark, is what a
// user with one GPU would run instead: one flash_attention call over the
// whole sequence, through a Runtime as well. efficiency = anchor / ring
// (issue target: >= 0.9 at P = 2, 4, 8, causal and not). bf16, D = 128,
// 8 heads, zigzag layout; the backward adds ring_attention_backward (and
// flash_attention_backward to the anchor).
#include <loom/comm.hpp>
#include <loom/loom.hpp>
#include <loom/ops/attention.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/ring_attention.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::Shape;
using loom::Tensor;

constexpr std::int64_t kSeq = 16384;
constexpr std::int64_t kHeads = 8;
constexpr std::int64_t kDim = 128;
constexpr int kWarmup = 2;
constexpr int kTimed = 9;

// A bf16 tensor of `shape` with values in [-1, 1) from a small generator.
Tensor random_bf16(loom::Runtime& rt, const Shape& shape, std::uint64_t seed) {
  std::vector<float> host(static_cast<std::size_t>(shape.product()));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (float& h : host) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    h = static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0F;
  }
  const Tensor f32 = rt.upload(std::span<const float>(host), shape);
  Tensor t = rt.tensor(DType::bf16, shape);
  loom::Graph g;
  g.add(loom::ops::cast(f32, t));
  rt.submit(g).wait();
  return t;
}

// Attention's tensors for `length` positions of the sequence.
struct Block {
  Tensor q, k, v, dout, out, lse, dq, dk, dv;
  Block(loom::Runtime& rt, std::int64_t length, std::uint64_t seed) {
    const Shape shape{1, kHeads, length, kDim};
    q = random_bf16(rt, shape, seed);
    k = random_bf16(rt, shape, seed + 1);
    v = random_bf16(rt, shape, seed + 2);
    dout = random_bf16(rt, shape, seed + 3);
    out = rt.tensor(DType::bf16, shape);
    lse = rt.tensor<float>({1, kHeads, length});
    dq = rt.tensor(DType::bf16, shape);
    dk = rt.tensor(DType::bf16, shape);
    dv = rt.tensor(DType::bf16, shape);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall time of one round, after warm-up, in which every runtime
// submits its graph and all are waited for (the runs meet in the ring's
// collectives, on the runtimes' own threads). The median: a round now and
// then pays for the host (eight runtimes' threads on one machine).
double time_rounds(std::vector<std::unique_ptr<loom::Runtime>>& runtimes,
                   std::vector<loom::Graph>& graphs) {
  const auto round = [&] {
    std::vector<loom::Future> runs;
    runs.reserve(runtimes.size());
    for (std::size_t r = 0; r < runtimes.size(); ++r)
      runs.push_back(runtimes[r]->submit(graphs[r]));
    for (auto& run : runs) run.wait();
  };
  for (int i = 0; i < kWarmup; ++i) round();
  std::vector<double> seconds;
  for (int i = 0; i < kTimed; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    round();
    seconds.push_back(seconds_since(t0));
  }
  return loom::bench::median(seconds);
}

void BM_RingAttention(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const int ranks = static_cast<int>(state.range(0));
  const bool causal = state.range(1) != 0;
  const bool backward = state.range(2) != 0;
  const loom::ops::RingAttentionOptions ro{.causal = causal};
  const loom::ops::AttentionOptions ao{.causal = causal};

  // The ring: rank r's runtime, blocks and graph.
  const auto comms = loom::local_communicators(ranks);
  std::vector<std::unique_ptr<loom::Runtime>> runtimes;
  std::vector<Block> blocks;
  std::vector<loom::Graph> rings(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    runtimes.push_back(std::make_unique<loom::Runtime>());
    blocks.emplace_back(*runtimes.back(), kSeq / ranks, 10 * static_cast<std::uint64_t>(r + 1));
  }
  for (int r = 0; r < ranks; ++r) {
    const Block& b = blocks[static_cast<std::size_t>(r)];
    loom::Graph& g = rings[static_cast<std::size_t>(r)];
    loom::ops::ring_attention(g, *comms[static_cast<std::size_t>(r)], b.q, b.k, b.v, b.out, b.lse,
                              ro);
    if (backward) {
      loom::ops::ring_attention_backward(g, *comms[static_cast<std::size_t>(r)], b.q, b.k, b.v,
                                         b.out, b.lse, b.dout, {.dq = b.dq, .dk = b.dk, .dv = b.dv},
                                         ro);
    }
  }

  // The anchor: one call over the whole sequence, on a runtime of its own.
  std::vector<std::unique_ptr<loom::Runtime>> whole_rt;
  whole_rt.push_back(std::make_unique<loom::Runtime>());
  const Block w(*whole_rt.back(), kSeq, 7);
  std::vector<loom::Graph> whole(1);
  whole[0].add(loom::ops::flash_attention(w.q, w.k, w.v, w.out, w.lse, ao));
  if (backward) {
    whole[0].add(loom::ops::flash_attention_backward(w.q, w.k, w.v, w.out, w.lse, w.dout,
                                                     {.dq = w.dq, .dk = w.dk, .dv = w.dv}, ao));
  }

  double ring_s = 0;
  double whole_s = 0;
  for (auto _ : state) {
    whole_s = time_rounds(whole_rt, whole);
    ring_s = time_rounds(runtimes, rings);
    state.SetIterationTime(ring_s);
  }
  const double flops = 4.0 * double(kHeads) * double(kSeq) * double(kSeq) * double(kDim) *
                       (causal ? 0.5 : 1.0) * (backward ? 3.5 : 1.0);
  state.counters["ring_ms"] = ring_s * 1e3;
  state.counters["one_flash_ms"] = whole_s * 1e3;
  state.counters["ring_TFLOPs"] = flops / ring_s / 1e12;
  state.counters["efficiency"] = whole_s / ring_s;
  state.SetLabel("bf16 seq=16384 d=128 heads=8 zigzag" + std::string(causal ? " causal" : "") +
                 (backward ? " fwd+bwd" : " fwd"));
}

BENCHMARK(BM_RingAttention)
    ->ArgNames({"P", "causal", "backward"})
    ->ArgsProduct({{2, 4, 8}, {0, 1}, {0, 1}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
