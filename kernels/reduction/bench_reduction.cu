// Reductions at 2^30 elements: every whole-array variant (and warp_shuffle in
// deterministic mode) for sum, max and min over f32, f16 and bf16, against
// cub::DeviceReduce in the same run (Sum/Max/Min for f32; TransformReduce
// widening to f32 for f16 and bf16, so both accumulate in f32). Row sums
// against cub::DeviceSegmentedReduce::Sum; column sums, which CUB cannot
// take strided, against cub::DeviceReduce::Sum over the same bytes.
//
// Counters: loom_GBps and cub_GBps (bytes read / median time), ratio =
// loom_GBps / cub_GBps (>= 1: loom at least as fast), rel_diff between the
// two results (a sanity check, not a test).
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "reduction/reduce.hpp"

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda/functional>

#include "bench_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::bench::median;
using loom::bench::skip_without_gpu;
using loom::kernels::ReduceConfig;
using loom::kernels::ReduceOp;
using loom::kernels::ReduceVariant;

constexpr std::size_t kElements = std::size_t{1} << 30;
constexpr int kReps = 10;
constexpr int kRounds = 5;
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};

std::size_t element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

// Values in [-1, 1) from a hash of the index: no host transfer of gigabytes.
template <class T>
__global__ void fill_pseudo_random(T* gX, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    const float v = static_cast<float>(h & 0xFFFFFFU) / 8388608.0F - 1.0F;
    if constexpr (std::is_same_v<T, float>) {
      gX[i] = v;
    } else if constexpr (std::is_same_v<T, __half>) {
      gX[i] = __float2half_rn(v);
    } else {
      gX[i] = __float2bfloat16_rn(v);
    }
  }
}

using DeviceMemory = loom::bench::DeviceBytes;

// One 2^30-element input per dtype, made once and kept for the whole run.
const void* input(DType dtype) {
  static std::map<DType, std::unique_ptr<DeviceMemory>> inputs;
  auto& slot = inputs[dtype];
  if (!slot) {
    slot = std::make_unique<DeviceMemory>(kElements * element_bytes(dtype));
    switch (dtype) {
      case DType::f32:
        fill_pseudo_random<<<4096, 256>>>(static_cast<float*>(slot->p), kElements);
        break;
      case DType::f16:
        fill_pseudo_random<<<4096, 256>>>(static_cast<__half*>(slot->p), kElements);
        break;
      default:
        fill_pseudo_random<<<4096, 256>>>(static_cast<__nv_bfloat16*>(slot->p), kElements);
        break;
    }
    LOOM_CUDA_CHECK(cudaGetLastError());
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return slot->p;
}

// Median over kRounds of the mean time of kReps back-to-back calls, in ms.
template <class F>
double median_ms(loom::detail::Stream& stream, F&& launch) {
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  launch();  // warm-up
  std::vector<double> rounds;
  for (int r = 0; r < kRounds; ++r) {
    start.record(stream.view());
    for (int i = 0; i < kReps; ++i) launch();
    stop.record(stream.view());
    stop.synchronize();
    rounds.push_back(stop.elapsed_ms_since(start) / kReps);
  }
  return median(rounds);
}

float read_result(const void* out) {
  float v = 0;
  LOOM_CUDA_CHECK(cudaMemcpy(&v, out, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

template <class T>
struct ToFloat {
  __device__ float operator()(T v) const { return static_cast<float>(v); }
};

// The anchor: CUB's reduction of the same input into an f32 result.
template <class T>
class CubReduce {
 public:
  CubReduce(ReduceOp op, const T* x, std::size_t n, float* out, cudaStream_t stream)
      : op_(op), x_(x), n_(n), out_(out), stream_(stream) {
    std::size_t bytes = 0;
    run(nullptr, bytes);
    temp_ = std::make_unique<DeviceMemory>(bytes);
    bytes_ = bytes;
  }
  void operator()() { run(temp_->p, bytes_); }

 private:
  void run(void* temp, std::size_t& bytes) {
    if constexpr (std::is_same_v<T, float>) {
      switch (op_) {
        case ReduceOp::sum:
          LOOM_CUDA_CHECK(cub::DeviceReduce::Sum(temp, bytes, x_, out_, n_, stream_));
          return;
        case ReduceOp::max:
          LOOM_CUDA_CHECK(cub::DeviceReduce::Max(temp, bytes, x_, out_, n_, stream_));
          return;
        case ReduceOp::min:
          LOOM_CUDA_CHECK(cub::DeviceReduce::Min(temp, bytes, x_, out_, n_, stream_));
          return;
      }
    } else {
      switch (op_) {
        case ReduceOp::sum:
          LOOM_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
              temp, bytes, x_, out_, n_, cuda::std::plus<float>{}, ToFloat<T>{}, 0.0F, stream_));
          return;
        case ReduceOp::max:
          LOOM_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
              temp, bytes, x_, out_, n_, cuda::maximum<float>{}, ToFloat<T>{}, -INFINITY, stream_));
          return;
        case ReduceOp::min:
          LOOM_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
              temp, bytes, x_, out_, n_, cuda::minimum<float>{}, ToFloat<T>{}, INFINITY, stream_));
          return;
      }
    }
  }

  ReduceOp op_;
  const T* x_;
  std::size_t n_;
  float* out_;
  cudaStream_t stream_;
  std::unique_ptr<DeviceMemory> temp_;
  std::size_t bytes_ = 0;
};

template <class T>
double cub_ms(ReduceOp op, const void* x, std::size_t n, float* out, loom::detail::Stream& stream) {
  CubReduce<T> cub(op, static_cast<const T*>(x), n, out, stream.view());
  return median_ms(stream, [&] { cub(); });
}

double anchor_ms(DType dtype, ReduceOp op, const void* x, std::size_t n, float* out,
                 loom::detail::Stream& stream) {
  switch (dtype) {
    case DType::f16: return cub_ms<__half>(op, x, n, out, stream);
    case DType::bf16: return cub_ms<__nv_bfloat16>(op, x, n, out, stream);
    default: return cub_ms<float>(op, x, n, out, stream);
  }
}

void report(benchmark::State& state, double bytes, double loom_ms, double cub_ms, float loom_value,
            float cub_value) {
  const double loom_gbps = bytes / (loom_ms * 1e-3) / 1e9;
  const double cub_gbps = bytes / (cub_ms * 1e-3) / 1e9;
  state.counters["loom_GBps"] = loom_gbps;
  state.counters["cub_GBps"] = cub_gbps;
  state.counters["ratio"] = loom_gbps / cub_gbps;
  state.counters["rel_diff"] = std::fabs(static_cast<double>(loom_value) - cub_value) /
                               std::max(1e-30, std::fabs(static_cast<double>(cub_value)));
}

// Arguments: variant (1-5 as ReduceVariant: interleaved to warp_shuffle; 6:
// warp_shuffle deterministic), dtype (0 f32, 1 f16, 2 bf16), op (0 sum, 1
// max, 2 min).
constexpr int kDeterministicArg = 6;

void BM_Reduce(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool deterministic = state.range(0) == kDeterministicArg;
  ReduceConfig config;
  config.variant =
      deterministic ? ReduceVariant::warp_shuffle : static_cast<ReduceVariant>(state.range(0));
  config.deterministic = deterministic;
  const DType dtype = kDtypes[state.range(1)];
  const ReduceOp op = kOps[state.range(2)];
  const void* x = input(dtype);
  DeviceMemory out(2 * sizeof(float));
  DeviceMemory workspace(loom::kernels::reduce_workspace_bytes(kElements, config));
  loom::detail::Stream stream(0, 0);
  auto* result = static_cast<float*>(out.p);
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = median_ms(stream, [&] {
      loom::kernels::reduce(op, x, dtype, kElements, result, DType::f32, workspace.p, stream.view(),
                            config);
    });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  const float loom_value = read_result(result);
  const double anchor = anchor_ms(dtype, op, x, kElements, result + 1, stream);
  report(state, static_cast<double>(kElements * element_bytes(dtype)), loom_ms, anchor, loom_value,
         read_result(result + 1));
  state.SetLabel(std::string(to_string(config.variant)) + (deterministic ? "_deterministic" : "") +
                 " " + std::string(to_string(op)) + " " + std::string(to_string(dtype)));
}

void reduce_args(benchmark::internal::Benchmark* b) {
  for (int op = 0; op < 3; ++op) {
    for (int dtype = 0; dtype < 3; ++dtype) {
      for (int variant = 1; variant <= kDeterministicArg; ++variant) b->Args({variant, dtype, op});
    }
  }
}
BENCHMARK(BM_Reduce)
    ->Apply(reduce_args)
    ->ArgNames({"variant", "dtype", "op"})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// warp_shuffle's tuning, sums: 16-byte loads in flight per thread (2, 4, 8;
// the default is kDefaultUnroll) and the grid: blocks a multiprocessor (0:
// the fixed grid of kDeterministicBlocks, the default; -1: the same grid in
// deterministic mode). Arguments: unroll, blocks a multiprocessor, dtype.
void BM_ReduceTuning(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  ReduceConfig config;
  config.unroll = static_cast<int>(state.range(0));
  config.deterministic = state.range(1) < 0;
  config.blocks_per_sm = static_cast<int>(std::max<std::int64_t>(state.range(1), 0));
  const DType dtype = kDtypes[state.range(2)];
  const void* x = input(dtype);
  DeviceMemory out(2 * sizeof(float));
  DeviceMemory workspace(loom::kernels::reduce_workspace_bytes(kElements, config));
  loom::detail::Stream stream(0, 0);
  auto* result = static_cast<float*>(out.p);
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = median_ms(stream, [&] {
      loom::kernels::reduce(ReduceOp::sum, x, dtype, kElements, result, DType::f32, workspace.p,
                            stream.view(), config);
    });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  const float loom_value = read_result(result);
  const double anchor = anchor_ms(dtype, ReduceOp::sum, x, kElements, result + 1, stream);
  report(state, static_cast<double>(kElements * element_bytes(dtype)), loom_ms, anchor, loom_value,
         read_result(result + 1));
  state.SetLabel("warp_shuffle unroll " + std::to_string(config.unroll) +
                 (config.deterministic ? std::string(" deterministic")
                                       : " blocks/SM " + std::to_string(config.blocks_per_sm)) +
                 " sum " + std::string(to_string(dtype)));
}
BENCHMARK(BM_ReduceTuning)
    ->ArgsProduct({{2, 4, 8}, {0, 2, 4, 8, 16}, {0, 1}})
    ->ArgNames({"unroll", "blocks_per_sm", "dtype"})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Row sums (dim 1) or column sums (dim 0) of an f32 [rows, 2^30 / rows]
// matrix. Argument 0: log2(rows); argument 1: the dimension.
void BM_ReduceRows(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t rows = std::int64_t{1} << state.range(0);
  const auto cols = static_cast<std::int64_t>(kElements) / rows;
  const int dim = static_cast<int>(state.range(1));
  const loom::kernels::Segments segments = dim == 1 ? loom::kernels::Segments{rows, cols, cols, 1}
                                                    : loom::kernels::Segments{cols, rows, 1, cols};
  const auto* x = static_cast<const float*>(input(DType::f32));
  DeviceMemory out(static_cast<std::size_t>(segments.count) * sizeof(float));
  DeviceMemory workspace(loom::kernels::reduce_segments_workspace_bytes(segments));
  loom::detail::Stream stream(0, 0);
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = median_ms(stream, [&] {
      loom::kernels::reduce_segments(ReduceOp::sum, x, DType::f32, segments, out.p, DType::f32, 1,
                                     workspace.p, stream.view());
    });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  double anchor = 0;
  if (dim == 1) {
    std::vector<int> offsets(static_cast<std::size_t>(rows) + 1);
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      offsets[i] = static_cast<int>(static_cast<std::int64_t>(i) * cols);
    }
    DeviceMemory d_offsets(offsets.size() * sizeof(int));
    LOOM_CUDA_CHECK(cudaMemcpy(d_offsets.p, offsets.data(), offsets.size() * sizeof(int),
                               cudaMemcpyHostToDevice));
    DeviceMemory cub_out(static_cast<std::size_t>(rows) * sizeof(float));
    const auto* begin = static_cast<const int*>(d_offsets.p);
    std::size_t bytes = 0;
    LOOM_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(
        nullptr, bytes, x, static_cast<float*>(cub_out.p), rows, begin, begin + 1, stream.view()));
    DeviceMemory temp(bytes);
    anchor = median_ms(stream, [&] {
      LOOM_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(
          temp.p, bytes, x, static_cast<float*>(cub_out.p), rows, begin, begin + 1, stream.view()));
    });
    state.SetLabel("rows of [" + std::to_string(rows) + ", " + std::to_string(cols) +
                   "] vs cub::DeviceSegmentedReduce::Sum");
  } else {
    DeviceMemory cub_out(sizeof(float));
    anchor = cub_ms<float>(ReduceOp::sum, x, kElements, static_cast<float*>(cub_out.p), stream);
    state.SetLabel("columns of [" + std::to_string(rows) + ", " + std::to_string(cols) +
                   "] vs cub::DeviceReduce::Sum of the same bytes");
  }
  report(state, static_cast<double>(kElements * sizeof(float)), loom_ms, anchor, 0.0F, 0.0F);
  state.counters.erase("rel_diff");
}
BENCHMARK(BM_ReduceRows)
    ->ArgsProduct({{4, 10, 15, 20}, {1, 0}})
    ->ArgNames({"log2_rows", "dim"})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
