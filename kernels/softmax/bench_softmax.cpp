// Softmax over rows, every variant, fp32 and bf16, on 8192 x 16384 (the
// target shape), 65536 x 1024 (short rows), 1024 x 65536 (long rows) and
// 4096 x 4097 (an odd length), against a device-to-device copy that moves
// the same bytes, timed in the same run.
//
// Bytes moved: one read and one write of the tensor (what a softmax must
// move; naive and online read more, and their GB/s says so).
//
// Counters: loom_GBps, copy_GBps, ratio = loom_GBps / copy_GBps, loom_us.
// Target on an H200: fused fp32 8192 x 16384 >= 3100 GB/s (torch), aim 3600.
#include "softmax/softmax.hpp"

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::DType;
using loom::bench::skip_without_gpu;
using loom::kernels::SoftmaxVariant;

// Buffer sets rotate so that consecutive launches miss in L2 (60 MB).
constexpr std::size_t kRotateBytes = std::size_t{512} << 20;

using loom::bench::DeviceBytes;

// The median launch time in milliseconds (5 batches of 10 launches).
template <class Launch>
double time_ms(loom::detail::Stream& stream, Launch&& launch) {
  return loom::bench::time_launches_ms(stream, std::forward<Launch>(launch), 5, 10);
}

void BM_Softmax(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto variant = static_cast<SoftmaxVariant>(state.range(0));
  const DType dtype = state.range(1) == 0 ? DType::f32 : DType::bf16;
  const std::int64_t rows = state.range(2);
  const std::int64_t cols = state.range(3);
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * (dtype == DType::f32 ? 4 : 2);
  const std::size_t sets = std::max<std::size_t>(1, kRotateBytes / (2 * bytes));
  DeviceBytes x(sets * bytes);
  DeviceBytes y(sets * bytes);
  // Values in a sane range: 0x3C bytes are 0.0117f (fp32) and 0.0114 (bf16).
  LOOM_CUDA_CHECK(cudaMemset(x.get(), 0x3C, sets * bytes));
  const loom::kernels::SoftmaxShape shape{rows, cols, cols, cols};
  DeviceBytes workspace(loom::kernels::softmax_workspace_bytes(shape, variant));
  loom::detail::Stream stream(0, 0);
  const auto in = [&](int i) { return x.get() + (static_cast<std::size_t>(i) % sets) * bytes; };
  const auto out = [&](int i) { return y.get() + (static_cast<std::size_t>(i) % sets) * bytes; };
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      loom::kernels::softmax(in(i), out(i), dtype, shape, workspace.get(), stream.view(), variant);
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double copy_ms = time_ms(stream, [&](int i) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(out(i), in(i), bytes, cudaMemcpyDeviceToDevice, stream.view()));
  });
  const double moved = 2.0 * static_cast<double>(bytes);
  const double loom_gbs = moved / (ms * 1e-3) / 1e9;
  const double copy_gbs = moved / (copy_ms * 1e-3) / 1e9;
  state.counters["loom_us"] = ms * 1e3;
  state.counters["loom_GBps"] = loom_gbs;
  state.counters["copy_GBps"] = copy_gbs;
  state.counters["ratio"] = loom_gbs / copy_gbs;
  state.SetLabel(std::string(to_string(variant)) + " " + std::string(loom::to_string(dtype)) + " " +
                 std::to_string(rows) + "x" + std::to_string(cols));
}
BENCHMARK(BM_Softmax)
    ->ArgNames({"variant", "bf16", "rows", "cols"})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::naive),
                    static_cast<int>(SoftmaxVariant::online),
                    static_cast<int>(SoftmaxVariant::fused)},
                   {0, 1},
                   {8192},
                   {16384}})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::naive),
                    static_cast<int>(SoftmaxVariant::online),
                    static_cast<int>(SoftmaxVariant::fused)},
                   {0, 1},
                   {65536},
                   {1024}})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::naive),
                    static_cast<int>(SoftmaxVariant::online),
                    static_cast<int>(SoftmaxVariant::fused)},
                   {0, 1},
                   {1024},
                   {65536}})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::naive),
                    static_cast<int>(SoftmaxVariant::online),
                    static_cast<int>(SoftmaxVariant::fused)},
                   {0, 1},
                   {4096},
                   {4097}})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::fused)}, {0, 1}, {1}, {1000003}})
    ->ArgsProduct({{static_cast<int>(SoftmaxVariant::fused)}, {0, 1}, {64}, {262144}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
