// The small and skinny shapes of a training step, one op at a time, through
// the public API as a user writes them: a compiled graph of kRepeats copies
// of the op (each one after the last, as an in-place update or a rewrite of
// one output orders them), replayed; the figure is device-bound time an op.
//
// The anchor is PyTorch on the same shapes, measured in the same device call
// by bench/torch_small_shapes.py (the best form a PyTorch user has: the op
// repeated inside a captured CUDA graph), which reads this program's JSON
// and prints the two side by side. The names below are the cases it knows.
//
//   bench_small_shapes --benchmark_out=small.json --benchmark_out_format=json
//   python3 bench/torch_small_shapes.py small.json
#include "bench_support.hpp"

#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

namespace ops = loom::ops;
using loom::Shape;
using loom::Tensor;

// Copies of the op a replay runs, and replays a timing: enough that the
// replay's own start (a few microseconds) is under 0.1 µs an op.
constexpr int kRepeats = 64;
constexpr int kRuns = 10;

loom::Runtime& runtime() {
  static loom::Runtime rt;
  return rt;
}

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  return n;
}

// Values in [-1, 1), fresh for every tensor.
Tensor random_tensor(const Shape& shape) {
  static std::mt19937 rng(2026);
  std::uniform_real_distribution<float> u(-1.0F, 1.0F);
  std::vector<float> v(static_cast<std::size_t>(elements(shape)));
  for (auto& x : v) x = u(rng);
  return runtime().upload(std::span<const float>(v), shape);
}

Tensor random_labels(std::int64_t rows, std::int64_t classes) {
  static std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(classes) - 1);
  std::vector<std::int32_t> v(static_cast<std::size_t>(rows));
  for (auto& x : v) x = pick(rng);
  return runtime().upload(std::span<const std::int32_t>(v), {rows});
}

// Adds the op kRepeats times to a graph: `add_one` returns one copy.
using OpMaker = std::function<loom::OpPtr()>;

void time_op(benchmark::State& state, const OpMaker& add_one) {
  if (loom::bench::skip_without_gpu(state)) return;
  auto& rt = runtime();
  if (loom::bench::skip_without_cuda_backend(state, rt)) return;
  loom::Graph g;
  for (int i = 0; i < kRepeats; ++i) g.add(add_one(), {.name = "op " + std::to_string(i)});
  auto exe = rt.compile(g);
  loom::bench::warm_up([&] { exe.run().wait(); });
  double us = 0;
  for (auto _ : state) {
    const auto t0 = loom::bench::Clock::now();
    exe.run_n(kRuns).wait();
    us = loom::bench::us_since(t0) / (kRuns * kRepeats);
    state.SetIterationTime(us * 1e-6);
  }
  state.counters["loom_us"] = us;
}

// ---- matmul: the step's products, and skinny ones up to 64 wide -----------

// c[m, n] = a[m, k] b[k, n]; a_t / b_t: the operand is the transpose of a
// stored [k, m] / [n, k] (the backward's products).
void matmul_case(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, bool a_t,
                 bool b_t) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor a = a_t ? random_tensor({k, m}).transpose(0, 1) : random_tensor({m, k});
  const Tensor b = b_t ? random_tensor({n, k}).transpose(0, 1) : random_tensor({k, n});
  const Tensor c = runtime().tensor<float>({m, n});
  time_op(state, [&] { return ops::matmul(a, b, c); });
}

// A linear layer: c = activation(a w + bias), the epilogue fused.
void linear_case(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k,
                 bool relu) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor a = random_tensor({m, k});
  const Tensor w = random_tensor({k, n});
  const Tensor bias = random_tensor({n});
  const Tensor c = runtime().tensor<float>({m, n});
  const auto activation = relu ? ops::Activation::relu : ops::Activation::none;
  time_op(state, [&] { return ops::matmul(a, w, c, {.bias = bias, .activation = activation}); });
}

void BM_Linear_fc1(benchmark::State& s) { linear_case(s, 256, 1024, 512, true); }
void BM_Linear_fc2(benchmark::State& s) { linear_case(s, 256, 10, 1024, false); }
void BM_Matmul_dW2(benchmark::State& s) { matmul_case(s, 1024, 10, 256, true, false); }
void BM_Matmul_dh(benchmark::State& s) { matmul_case(s, 256, 1024, 10, false, true); }
void BM_Matmul_dW1(benchmark::State& s) { matmul_case(s, 512, 1024, 256, true, false); }
void BM_Matmul_n48(benchmark::State& s) { matmul_case(s, 256, 48, 1024, false, false); }
void BM_Matmul_n64(benchmark::State& s) { matmul_case(s, 256, 64, 1024, false, false); }
void BM_Matmul_m64(benchmark::State& s) { matmul_case(s, 64, 1024, 1024, false, false); }
void BM_Matmul_splitk_64(benchmark::State& s) { matmul_case(s, 64, 64, 8192, false, false); }
void BM_Matmul_splitk_128(benchmark::State& s) { matmul_case(s, 128, 128, 16384, false, false); }

// ---- reductions over short columns, and short rows --------------------------

void sum_case(benchmark::State& state, std::int64_t rows, std::int64_t cols, int dim) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor x = random_tensor({rows, cols});
  const Tensor out = runtime().tensor<float>({dim == 0 ? cols : rows});
  time_op(state, [&] { return ops::sum(x, dim, out); });
}

void BM_ColumnSum_256x10(benchmark::State& s) { sum_case(s, 256, 10, 0); }
void BM_ColumnSum_256x1024(benchmark::State& s) { sum_case(s, 256, 1024, 0); }
void BM_ColumnSum_16384x64(benchmark::State& s) { sum_case(s, 16384, 64, 0); }
void BM_RowSum_16384x64(benchmark::State& s) { sum_case(s, 16384, 64, 1); }

// ---- the loss, its backward, the activation's backward ----------------------

void BM_CrossEntropy_256x10(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor logits = random_tensor({256, 10});
  const Tensor labels = random_labels(256, 10);
  const Tensor loss = runtime().tensor<float>({1});
  const Tensor lse = runtime().tensor<float>({256});
  time_op(state, [&] { return ops::cross_entropy(logits, labels, loss, lse); });
}

void BM_CrossEntropyBackward_256x10(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor logits = random_tensor({256, 10});
  const Tensor labels = random_labels(256, 10);
  const Tensor lse = random_tensor({256});
  const Tensor grad = runtime().tensor<float>({256, 10});
  time_op(state, [&] { return ops::cross_entropy_backward(logits, labels, lse, {}, grad); });
}

void BM_ReluBackward_256x1024(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor grad = random_tensor({256, 1024});
  const Tensor x = random_tensor({256, 1024});
  const Tensor out = runtime().tensor<float>({256, 1024});
  time_op(state, [&] { return ops::relu_backward(grad, x, out); });
}

// ---- maps on small tensors: a broadcast bias, SGD updates -------------------

void BM_BiasAdd_256x1024(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor h = random_tensor({256, 1024});
  const Tensor bias = random_tensor({1024});
  const Tensor out = runtime().tensor<float>({256, 1024});
  time_op(state, [&] { return ops::add(h, bias.expand(h.shape()), out); });
}

// p -= lr * g, the learning rate a one-element tensor (as the sample has it).
void sgd_case(benchmark::State& state, const Shape& shape) {
  if (loom::bench::skip_without_gpu(state)) return;
  const Tensor p = random_tensor(shape);
  const Tensor g = random_tensor(shape);
  const Tensor lr = runtime().upload(std::span<const float>(std::vector<float>{1e-6F}), {1});
  using ops::MapExpr;
  const auto sgd = MapExpr::input(0) - MapExpr::input(2) * MapExpr::input(1);
  time_op(state, [&] { return ops::fused_map({p, g, lr}, p, sgd); });
}

void BM_Sgd_512x1024(benchmark::State& s) { sgd_case(s, {512, 1024}); }
void BM_Sgd_1024x10(benchmark::State& s) { sgd_case(s, {1024, 10}); }
void BM_Sgd_1024(benchmark::State& s) { sgd_case(s, {1024}); }

#define LOOM_SMALL_SHAPE(fn) \
  BENCHMARK(fn)->UseManualTime()->Iterations(5)->Unit(benchmark::kMicrosecond)

LOOM_SMALL_SHAPE(BM_Linear_fc1);
LOOM_SMALL_SHAPE(BM_Linear_fc2);
LOOM_SMALL_SHAPE(BM_Matmul_dW2);
LOOM_SMALL_SHAPE(BM_Matmul_dh);
LOOM_SMALL_SHAPE(BM_Matmul_dW1);
LOOM_SMALL_SHAPE(BM_Matmul_n48);
LOOM_SMALL_SHAPE(BM_Matmul_n64);
LOOM_SMALL_SHAPE(BM_Matmul_m64);
LOOM_SMALL_SHAPE(BM_Matmul_splitk_64);
LOOM_SMALL_SHAPE(BM_Matmul_splitk_128);
LOOM_SMALL_SHAPE(BM_ColumnSum_256x10);
LOOM_SMALL_SHAPE(BM_ColumnSum_256x1024);
LOOM_SMALL_SHAPE(BM_ColumnSum_16384x64);
LOOM_SMALL_SHAPE(BM_RowSum_16384x64);
LOOM_SMALL_SHAPE(BM_CrossEntropy_256x10);
LOOM_SMALL_SHAPE(BM_CrossEntropyBackward_256x10);
LOOM_SMALL_SHAPE(BM_ReluBackward_256x1024);
LOOM_SMALL_SHAPE(BM_BiasAdd_256x1024);
LOOM_SMALL_SHAPE(BM_Sgd_512x1024);
LOOM_SMALL_SHAPE(BM_Sgd_1024x10);
LOOM_SMALL_SHAPE(BM_Sgd_1024);

}  // namespace

BENCHMARK_MAIN();
