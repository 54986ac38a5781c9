// Ring attention's efficiency on one GPU: P local ranks (a Runtime each, the
// local backend's communicators) run loom::ops::ring_attention over a 16k
// sequence split P ways; the anchor, measured in the same benchmark, is what a
// user with one GPU would run instead: one flash_attention call over the
// whole sequence, through a Runtime as well. efficiency = anchor / ring
// (issue target: >= 0.9 at P = 2, 4, 8, causal and not). bf16, D = 128,
// 8 heads, zigzag layout; the backward adds ring_attention_backward (and
// flash_attention_backward to the anchor).
//
// BM_RingDeviceWork is the ring's device work alone, without a runtime or an
// exchange: its P^2 flash calls (non-causal) on one stream, with or without
// the P^2 merges, against one flash call over the whole sequence on the same
// stream. What it reports bounds BM_RingAttention's efficiency from above:
// the rest of the gap is the exchanges and the host.
#include "attention/attention.hpp"
#include "attention/ring.hpp"

#include <loom/comm.hpp>
#include <loom/loom.hpp>
#include <loom/ops/attention.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/ring_attention.hpp>

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <chrono>
#include <cmath>
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

void BM_RingDeviceWork(benchmark::State& state) {
  using loom::bench::DeviceBytes;
  using loom::kernels::AttentionTensor;
  if (loom::bench::skip_without_gpu(state)) return;
  const int ranks = static_cast<int>(state.range(0));
  const bool merges = state.range(1) != 0;
  const std::int64_t block = kSeq / ranks;
  const auto bytes = [](std::int64_t rows, std::size_t element) {
    return static_cast<std::size_t>(kHeads * rows * kDim) * element;
  };
  DeviceBytes q(bytes(kSeq, 2)), k(bytes(kSeq, 2)), v(bytes(kSeq, 2)), out(bytes(kSeq, 2));
  DeviceBytes lse(static_cast<std::size_t>(kHeads * kSeq) * sizeof(float));
  DeviceBytes part(bytes(block, 2)), part_lse(static_cast<std::size_t>(kHeads * block) * 4);
  DeviceBytes acc(bytes(kSeq, 4)), acc_lse(static_cast<std::size_t>(kHeads * kSeq) * 4);
  std::uint32_t seed = 1;
  for (DeviceBytes* x : {&q, &k, &v}) {
    loom::bench::fill_normal_bf16(x->get(), bytes(kSeq, 2) / 2, seed++);
  }
  // Rows [first, first + rows) of a [1, H, S, D] tensor of `element` bytes.
  const auto rows_of = [](const DeviceBytes& t, std::int64_t first, std::int64_t length,
                          std::size_t element, std::int64_t width) {
    return AttentionTensor{t.get() + static_cast<std::size_t>(first * width) * element,
                           kHeads * length * width, length * width, width};
  };
  const auto flash = [&](std::int64_t q0, std::int64_t k0, std::int64_t length, bool whole) {
    loom::kernels::AttentionArgs p;
    p.batch = 1;
    p.heads = kHeads;
    p.q_len = p.k_len = length;
    p.head_dim = kDim;
    p.dtype = DType::bf16;
    // Head stride kSeq * D: a block's rows inside the whole tensors.
    p.q = {q.get() + static_cast<std::size_t>(q0 * kDim) * 2, kHeads * kSeq * kDim, kSeq * kDim,
           kDim};
    p.k = {k.get() + static_cast<std::size_t>(k0 * kDim) * 2, kHeads * kSeq * kDim, kSeq * kDim,
           kDim};
    p.v = {v.get() + static_cast<std::size_t>(k0 * kDim) * 2, kHeads * kSeq * kDim, kSeq * kDim,
           kDim};
    p.out = whole ? rows_of(out, 0, kSeq, 2, kDim) : rows_of(part, 0, length, 2, kDim);
    p.lse = whole ? rows_of(lse, 0, kSeq, 4, 1) : rows_of(part_lse, 0, length, 4, 1);
    p.scale = 1.0F / std::sqrt(static_cast<float>(kDim));
    return p;
  };
  loom::detail::Stream stream(0, 0);
  const double whole_ms = loom::bench::time_launches_ms(
      stream,
      [&](int) { loom::kernels::flash_attention_forward(flash(0, 0, kSeq, true), stream.view()); },
      3, 3);
  double ring_ms = 0;
  for (auto _ : state) {
    ring_ms = loom::bench::time_launches_ms(
        stream,
        [&](int) {
          for (int r = 0; r < ranks; ++r) {
            for (int s = 0; s < ranks; ++s) {
              const int holder = (r - s + ranks) % ranks;
              loom::kernels::flash_attention_forward(flash(r * block, holder * block, block, false),
                                                     stream.view());
              if (!merges) continue;
              loom::kernels::AttentionMergeArgs m;
              m.batch = 1;
              m.heads = kHeads;
              m.rows = block;
              m.head_dim = kDim;
              m.dtype = DType::bf16;
              m.acc = {acc.get() + static_cast<std::size_t>(r * block * kDim) * 4,
                       kHeads * kSeq * kDim, kSeq * kDim, kDim};
              m.acc_lse = {acc_lse.get() + static_cast<std::size_t>(r * block) * 4, kHeads * kSeq,
                           kSeq, 1};
              m.part = rows_of(part, 0, block, 2, kDim);
              m.part_lse = rows_of(part_lse, 0, block, 4, 1);
              m.first = s == 0;
              loom::kernels::attention_merge(m, stream.view());
            }
          }
        },
        3, 3);
    state.SetIterationTime(ring_ms * 1e-3);
  }
  state.counters["ring_work_ms"] = ring_ms;
  state.counters["one_flash_ms"] = whole_ms;
  state.counters["ceiling"] = whole_ms / ring_ms;
  state.SetLabel(std::string("bf16 seq=16384 d=128 heads=8, P^2 flash calls") +
                 (merges ? " and merges" : "") + " on one stream");
}

BENCHMARK(BM_RingDeviceWork)
    ->ArgNames({"P", "merges"})
    ->ArgsProduct({{2, 4, 8}, {0, 1}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
