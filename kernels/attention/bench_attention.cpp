// Attention forward and backward, TFLOP/s: flash_attention at head dims 64 and 128
// (the forward on each of its kernels),
// sequences 512 to 16k with 16k tokens in all (batch = 16384 / seq) and
// 2048 / d heads, causal and not; against, in the same run, the attention a
// user would assemble from loom's own catalogue: S = scale Q K^T (batched
// bf16 matmul), P = softmax(S), O = P V, with S and P in memory (non-causal
// only: the catalogue has no mask). bench/torch_attention.py times
// PyTorch's scaled_dot_product_attention (flash and cuDNN backends) on the
// same shapes. FLOPs: 4 B H Sq Sk D, halved when causal.
#include "attention/attention.hpp"
#include "gemm/hgemm.hpp"
#include "softmax/softmax.hpp"

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace {

using loom::DType;
using loom::bench::DeviceBytes;
using loom::bench::skip_without_gpu;

constexpr std::int64_t kTokens = 16384;
constexpr std::int64_t kModelDim = 2048;

void BM_FlashAttention(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t d = state.range(0);
  const std::int64_t seq = state.range(1);
  const bool causal = state.range(2) != 0;
  const bool anchor = state.range(3) != 0 && !causal;
  const auto variant = static_cast<loom::ops::AttentionVariant>(state.range(4));
  const std::int64_t batch = kTokens / seq;
  const std::int64_t heads = kModelDim / d;
  const std::size_t bytes = static_cast<std::size_t>(batch * heads * seq * d) * 2;
  DeviceBytes q(bytes), k(bytes), v(bytes), out(bytes);
  DeviceBytes lse(static_cast<std::size_t>(batch * heads * seq) * sizeof(float));
  std::uint32_t seed = 1;
  for (DeviceBytes* x : {&q, &k, &v}) loom::bench::fill_normal_bf16(x->get(), bytes / 2, seed++);
  loom::kernels::AttentionArgs p;
  p.batch = batch;
  p.heads = heads;
  p.q_len = seq;
  p.k_len = seq;
  p.head_dim = d;
  p.dtype = DType::bf16;
  const auto bhsd = [&](const DeviceBytes& t) {
    return loom::kernels::AttentionTensor{t.get(), heads * seq * d, seq * d, d};
  };
  p.q = bhsd(q);
  p.k = bhsd(k);
  p.v = bhsd(v);
  p.out = bhsd(out);
  p.lse = {lse.get(), heads * seq, seq, 1};
  p.scale = 1.0F / std::sqrt(static_cast<float>(d));
  p.causal = causal;
  p.variant = variant;
  if (const std::string why = loom::kernels::flash_fwd_variant_refusal(p); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = loom::bench::time_launches_ms(
        stream, [&](int) { loom::kernels::flash_attention_forward(p, stream.view()); }, 3, 5);
    state.SetIterationTime(ms * 1e-3);
  }
  const double flops =
      4.0 * double(batch * heads) * double(seq) * double(seq) * double(d) * (causal ? 0.5 : 1.0);
  state.counters["loom_TFLOPs"] = flops / (ms * 1e-3) / 1e12;
  if (anchor) {
    // Three kernels of loom's catalogue: S and P ([B H, seq, seq]) in memory.
    const std::size_t s_bytes = static_cast<std::size_t>(batch * heads * seq * seq) * 2;
    DeviceBytes s(s_bytes), probs(s_bytes);
    loom::kernels::HgemmArgs qk;
    qk.m = seq;
    qk.n = seq;
    qk.k = d;
    qk.batch = batch * heads;
    qk.alpha = p.scale;
    qk.a = {q.get(), d, 1, seq * d, DType::bf16};
    qk.b = {k.get(), 1, d, seq * d, DType::bf16};  // K^T: column-major
    qk.c = {s.get(), seq, 1, seq * seq, DType::bf16};
    loom::kernels::HgemmArgs pv;
    pv.m = seq;
    pv.n = d;
    pv.k = seq;
    pv.batch = batch * heads;
    pv.a = {probs.get(), seq, 1, seq * seq, DType::bf16};
    pv.b = {v.get(), d, 1, seq * d, DType::bf16};
    pv.c = {out.get(), d, 1, seq * d, DType::bf16};
    const loom::kernels::SoftmaxShape rows{batch * heads * seq, seq, seq, seq};
    DeviceBytes workspace(
        loom::kernels::softmax_workspace_bytes(rows, loom::kernels::kSoftmaxDefault) + 1);
    const double three_ms = loom::bench::time_launches_ms(
        stream,
        [&](int) {
          loom::kernels::hgemm(qk, stream.view());
          loom::kernels::softmax(s.get(), probs.get(), DType::bf16, rows, workspace.get(),
                                 stream.view());
          loom::kernels::hgemm(pv, stream.view());
        },
        3, 3);
    state.counters["three_kernel_TFLOPs"] = flops / (three_ms * 1e-3) / 1e12;
    state.counters["vs_three_kernel"] = three_ms / ms;
  }
  state.SetLabel("bf16 d=" + std::to_string(d) + " seq=" + std::to_string(seq) +
                 " batch=" + std::to_string(batch) + " heads=" + std::to_string(heads) +
                 (causal ? " causal " : " ") + std::string(loom::ops::to_string(variant)));
}

// Each forward kernel (kernel: 1 mma_sync, 2 wgmma; automatic is one of
// them); the three-kernel anchor once a shape, beside mma_sync.
void attention_arguments(benchmark::internal::Benchmark* b) {
  for (std::int64_t d : {64, 128}) {
    for (std::int64_t seq : {512, 1024, 2048, 4096, 8192, 16384}) {
      for (int causal : {0, 1}) {
        for (int kernel : {1, 2})
          b->Args({d, seq, causal, seq <= 4096 && kernel == 1 ? 1 : 0, kernel});
      }
    }
  }
}

BENCHMARK(BM_FlashAttention)
    ->ArgNames({"d", "seq", "causal", "anchor", "kernel"})
    ->Apply(attention_arguments)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The backward pass on the same shapes: FLOPs 2.5 times the forward's (five
// products of the forward's size against two), FlashAttention's convention.
// lse comes from a forward run first, so P is the real softmax.
void BM_FlashAttentionBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t d = state.range(0);
  const std::int64_t seq = state.range(1);
  const bool causal = state.range(2) != 0;
  const auto variant = static_cast<loom::ops::AttentionVariant>(state.range(3));
  const std::int64_t batch = kTokens / seq;
  const std::int64_t heads = kModelDim / d;
  const std::size_t bytes = static_cast<std::size_t>(batch * heads * seq * d) * 2;
  DeviceBytes q(bytes), k(bytes), v(bytes), out(bytes), dout(bytes), dq(bytes), dk(bytes),
      dv(bytes);
  DeviceBytes lse(static_cast<std::size_t>(batch * heads * seq) * sizeof(float));
  std::uint32_t seed = 1;
  for (DeviceBytes* x : {&q, &k, &v, &dout}) {
    loom::bench::fill_normal_bf16(x->get(), bytes / 2, seed++);
  }
  const auto bhsd = [&](const DeviceBytes& t) {
    return loom::kernels::AttentionTensor{t.get(), heads * seq * d, seq * d, d};
  };
  const loom::kernels::AttentionTensor lse_rows{lse.get(), heads * seq, seq, 1};
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  // What the forward's and the backward's arguments share.
  const auto fill = [&](auto& a) {
    a.batch = batch;
    a.heads = heads;
    a.q_len = seq;
    a.k_len = seq;
    a.head_dim = d;
    a.dtype = DType::bf16;
    a.q = bhsd(q);
    a.k = bhsd(k);
    a.v = bhsd(v);
    a.out = bhsd(out);
    a.lse = lse_rows;
    a.scale = scale;
    a.causal = causal;
  };
  loom::kernels::AttentionArgs f;
  fill(f);
  loom::kernels::AttentionBackwardArgs p;
  fill(p);
  p.dout = bhsd(dout);
  p.dq = bhsd(dq);
  p.dk = bhsd(dk);
  p.dv = bhsd(dv);
  p.variant = variant;
  if (const std::string why = loom::kernels::flash_bwd_variant_refusal(p); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  DeviceBytes workspace(loom::kernels::attention_backward_workspace_bytes(p));
  loom::kernels::place_attention_backward_workspace(p, workspace.get());
  loom::detail::Stream stream(0, 0);
  loom::kernels::flash_attention_forward(f, stream.view());
  double ms = 0;
  for (auto _ : state) {
    ms = loom::bench::time_launches_ms(
        stream, [&](int) { loom::kernels::flash_attention_backward(p, stream.view()); }, 2, 3);
    state.SetIterationTime(ms * 1e-3);
  }
  const double flops = 2.5 * 4.0 * double(batch * heads) * double(seq) * double(seq) * double(d) *
                       (causal ? 0.5 : 1.0);
  state.counters["TFLOPs"] = flops / (ms * 1e-3) / 1e12;
  state.SetLabel("bf16 backward d=" + std::to_string(d) + " seq=" + std::to_string(seq) +
                 " batch=" + std::to_string(batch) + " heads=" + std::to_string(heads) +
                 (causal ? " causal " : " ") + std::string(loom::ops::to_string(variant)));
}

// kernel: 1 mma_sync, 2 wgmma (head dim 128 only).
BENCHMARK(BM_FlashAttentionBackward)
    ->ArgNames({"d", "seq", "causal", "kernel"})
    ->ArgsProduct({{64, 128}, {1024, 4096, 16384}, {0, 1}, {1, 2}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
