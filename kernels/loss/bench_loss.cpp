// Cross-entropy forward, backward and both, and log_softmax, f32 and bf16,
// on 8192 x 32000 (the target shape: a language model's vocabulary) and
// 256 x 10 (a small classifier's step), against a device-to-device copy of
// the logits timed in the same run. bench/torch_anchors.py's cross_entropy
// times PyTorch's log_softmax + nll_loss and their backward at 8192 x 32000,
// for the target's ratio (>= 2x PyTorch for forward + backward), and
// bench/torch_small_shapes.py both at 256 x 10.
//
// Passes over the logits: forward 1 read; backward 1 read + 1 write;
// log_softmax 2 reads + 1 write. A copy is 1 read + 1 write, so
// loom_passes = loom_us / (copy_us / 2) says how many passes of the logits
// loom's time is worth (the ideal is the count above).
#include "loss/loss.hpp"

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace {

using loom::DType;
using loom::bench::DeviceBytes;
using loom::bench::skip_without_gpu;

constexpr std::size_t kRotateBytes = std::size_t{512} << 20;  // misses in L2 (60 MB)

template <class Launch>
double time_ms(loom::detail::Stream& stream, Launch&& launch) {
  return loom::bench::time_launches_ms(stream, std::forward<Launch>(launch), 5, 10);
}

enum class Which { forward, backward, both, log_softmax };

const char* name_of(Which w) {
  switch (w) {
    case Which::forward: return "cross_entropy";
    case Which::backward: return "cross_entropy_backward";
    case Which::both: return "cross_entropy+backward";
    case Which::log_softmax: return "log_softmax";
  }
  return "?";
}

void BM_Loss(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto which = static_cast<Which>(state.range(0));
  const DType dtype = state.range(1) == 0 ? DType::f32 : DType::bf16;
  const std::int64_t rows = state.range(2);
  const std::int64_t cols = state.range(3);
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * (dtype == DType::f32 ? 4 : 2);
  const std::size_t sets = std::max<std::size_t>(1, kRotateBytes / (2 * bytes));
  DeviceBytes x(sets * bytes);
  DeviceBytes y(sets * bytes);
  LOOM_CUDA_CHECK(cudaMemset(x.get(), 0x3C, sets * bytes));  // 0.0117 (f32), 0.0114 (bf16)
  DeviceBytes labels(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
  LOOM_CUDA_CHECK(
      cudaMemset(labels.get(), 0,
                 static_cast<std::size_t>(rows) * sizeof(std::int32_t)));  // class 0 every row
  DeviceBytes lse(static_cast<std::size_t>(rows) * sizeof(float));
  DeviceBytes loss(sizeof(float));
  loom::kernels::CrossEntropyArgs a;
  a.dtype = dtype;
  a.shape = {rows, cols, cols, cols};
  a.labels = labels.get();
  a.lse = reinterpret_cast<float*>(lse.get());
  a.loss = reinterpret_cast<float*>(loss.get());
  DeviceBytes workspace(loom::kernels::cross_entropy_workspace_bytes(a));
  loom::detail::Stream stream(0, 0);
  const auto in = [&](int i) { return x.get() + (static_cast<std::size_t>(i) % sets) * bytes; };
  const auto out = [&](int i) { return y.get() + (static_cast<std::size_t>(i) % sets) * bytes; };
  const auto launch = [&](int i) {
    a.logits = in(i);
    a.grad = out(i);
    switch (which) {
      case Which::forward: loom::kernels::cross_entropy(a, workspace.get(), stream.view()); break;
      case Which::backward:
        loom::kernels::cross_entropy_backward(a, workspace.get(), stream.view());
        break;
      case Which::both:
        loom::kernels::cross_entropy(a, workspace.get(), stream.view());
        loom::kernels::cross_entropy_backward(a, workspace.get(), stream.view());
        break;
      case Which::log_softmax:
        loom::kernels::log_softmax(in(i), out(i), dtype, a.shape, stream.view());
        break;
    }
  };
  launch(0);  // lse for the backward
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, launch);
    state.SetIterationTime(ms * 1e-3);
  }
  const double copy_ms = time_ms(stream, [&](int i) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(out(i), in(i), bytes, cudaMemcpyDeviceToDevice, stream.view()));
  });
  state.counters["loom_us"] = ms * 1e3;
  state.counters["copy_us"] = copy_ms * 1e3;
  state.counters["loom_passes"] = ms / (copy_ms / 2);
  state.SetLabel(std::string(name_of(which)) + " " + std::string(loom::to_string(dtype)) + " " +
                 std::to_string(rows) + "x" + std::to_string(cols));
}
BENCHMARK(BM_Loss)
    ->ArgNames({"op", "bf16", "rows", "cols"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}, {8192}, {32000}})
    ->ArgsProduct({{0, 1, 2, 3}, {0}, {256}, {10}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
