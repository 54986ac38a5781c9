// The index kernels at a training step's shapes, against a device-to-device
// copy of the same bytes timed in the same run:
//   index_select  an embedding lookup: 8192 random rows of a [50000, 512]
//                 f32 table (16 MiB gathered), f32 and bf16;
//   argmax        [8192, 32000] (a batch of logits over a vocabulary) along
//                 the last dimension, f32 and bf16.
//
// Bytes moved: index_select reads and writes the gathered rows (the indices
// are noise); argmax reads x once (its outputs are noise). The anchor copies
// the same bytes (the gathered rows; all of x), counted twice: a read and a
// write.
//
// Counters: loom_GBps, copy_GBps, ratio = loom_GBps / copy_GBps, loom_us.
#include "index/index.hpp"

#include <benchmark/benchmark.h>

#include "bench_device.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using loom::DType;
using loom::bench::DeviceBytes;
using loom::bench::skip_without_gpu;

// Buffer sets rotate so that consecutive launches miss in L2 (60 MB).
constexpr std::size_t kRotateBytes = std::size_t{512} << 20;

template <class Launch>
double time_ms(loom::detail::Stream& stream, Launch&& launch) {
  return loom::bench::time_launches_ms(stream, std::forward<Launch>(launch), 5, 10);
}

std::size_t element_size(DType d) { return d == DType::f32 ? 4 : 2; }

// `bytes` of random 16-bit words, none of them a NaN or infinity pattern
// in f32 or bf16 (exponent bits never all set), uploaded.
void fill_random(DeviceBytes& buffer, std::size_t bytes, std::mt19937_64& rng) {
  std::vector<std::uint16_t> host(std::min<std::size_t>(bytes, std::size_t{1} << 24) / 2);
  std::uniform_int_distribution<int> word(0, 0x7EFF);
  for (auto& w : host) w = static_cast<std::uint16_t>(word(rng));
  const std::size_t chunk = host.size() * 2;
  for (std::size_t at = 0; at < bytes; at += chunk) {
    LOOM_CUDA_CHECK(cudaMemcpy(buffer.get() + at, host.data(), std::min(chunk, bytes - at),
                               cudaMemcpyHostToDevice));
  }
}

void report(benchmark::State& state, double ms, double copy_ms, double moved, double copied,
            std::string label) {
  const double loom_gbs = moved / (ms * 1e-3) / 1e9;
  const double copy_gbs = copied / (copy_ms * 1e-3) / 1e9;
  state.counters["loom_us"] = ms * 1e3;
  state.counters["loom_GBps"] = loom_gbs;
  state.counters["copy_GBps"] = copy_gbs;
  state.counters["ratio"] = loom_gbs / copy_gbs;
  state.SetLabel(std::move(label));
}

void BM_IndexSelect(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = state.range(0) == 0 ? DType::f32 : DType::bf16;
  const std::int64_t vocab = state.range(1), width = state.range(2), tokens = state.range(3);
  const std::size_t row_bytes = static_cast<std::size_t>(width) * element_size(dtype);
  const std::size_t out_bytes = static_cast<std::size_t>(tokens) * row_bytes;
  const std::size_t sets = std::max<std::size_t>(1, kRotateBytes / (2 * out_bytes));
  std::mt19937_64 rng(42);
  DeviceBytes table(static_cast<std::size_t>(vocab) * row_bytes);
  fill_random(table, static_cast<std::size_t>(vocab) * row_bytes, rng);
  DeviceBytes out(sets * out_bytes);
  std::vector<std::int64_t> ids(sets * static_cast<std::size_t>(tokens));
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  for (auto& i : ids) i = pick(rng);
  DeviceBytes index(ids.size() * sizeof(std::int64_t));
  LOOM_CUDA_CHECK(cudaMemcpy(index.get(), ids.data(), ids.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice));
  // out[t, j] = table[ids[t], j]: the walk the op builds for a contiguous table.
  loom::kernels::IndexedWalk walk;
  walk.walk.rank = 2;
  walk.walk.count = tokens * width;
  walk.walk.extent[0] = tokens;
  walk.walk.extent[1] = width;
  walk.walk.stride[loom::kernels::kGatherOut][0] = width;
  walk.walk.stride[loom::kernels::kGatherOut][1] = 1;
  walk.walk.stride[loom::kernels::kGatherX][1] = 1;
  walk.walk.stride[loom::kernels::kGatherIndex][0] = 1;
  walk.indexed_extent = vocab;
  walk.indexed_stride = width;
  const std::uint32_t nan_word = dtype == DType::f32 ? 0x7FFFFFFFU : 0x7FFF7FFFU;
  const auto set = [&](int i) { return static_cast<std::size_t>(i) % sets; };
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int i) {
      loom::kernels::gather(
          table.get(),
          index.get() + set(i) * static_cast<std::size_t>(tokens) * sizeof(std::int64_t),
          DType::i64, out.get() + set(i) * out_bytes, static_cast<int>(element_size(dtype)),
          nan_word, walk, stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  // The anchor copies the output's bytes from a buffer of their size (the
  // table may hold fewer rows than are gathered).
  const DeviceBytes copy_source(out_bytes);
  const double copy_ms = time_ms(stream, [&](int i) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(out.get() + set(i) * out_bytes, copy_source.get(), out_bytes,
                                    cudaMemcpyDeviceToDevice, stream.view()));
  });
  const double moved = 2.0 * static_cast<double>(out_bytes);
  report(state, ms, copy_ms, moved, moved,
         "index_select " + std::string(loom::to_string(dtype)) + " [" + std::to_string(vocab) +
             ", " + std::to_string(width) + "] x " + std::to_string(tokens));
}
BENCHMARK(BM_IndexSelect)
    ->ArgNames({"bf16", "vocab", "width", "tokens"})
    ->Args({0, 50000, 512, 8192})
    ->Args({1, 50000, 512, 8192})
    // A large shape (256 MiB of f32 rows gathered), where launch and tail weigh nothing.
    ->Args({0, 50000, 1024, 65536})
    ->Args({1, 50000, 1024, 65536})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

void BM_Argmax(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const DType dtype = state.range(0) == 0 ? DType::f32 : DType::bf16;
  const std::int64_t rows = state.range(1), cols = state.range(2);
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * element_size(dtype);
  std::mt19937_64 rng(7);
  DeviceBytes x(bytes);
  fill_random(x, bytes, rng);
  DeviceBytes copy(bytes);
  DeviceBytes indices(static_cast<std::size_t>(rows) * sizeof(std::int64_t));
  loom::kernels::ArgReduceShape shape;
  shape.outputs.rank = 1;
  shape.outputs.count = rows;
  shape.outputs.extent[0] = rows;
  shape.outputs.stride[loom::kernels::kArgX][0] = cols;
  shape.outputs.stride[loom::kernels::kArgIndices][0] = 1;
  shape.reduced = cols;
  shape.reduced_stride = 1;
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int) {
      loom::kernels::arg_reduce(loom::kernels::ArgReduce::max, x.get(), dtype,
                                reinterpret_cast<std::int64_t*>(indices.get()), nullptr, shape,
                                stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double copy_ms = time_ms(stream, [&](int) {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(copy.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, stream.view()));
  });
  const double moved = static_cast<double>(bytes);
  report(state, ms, copy_ms, moved, 2.0 * moved,
         "argmax " + std::string(loom::to_string(dtype)) + " [" + std::to_string(rows) + ", " +
             std::to_string(cols) + "] along the last dimension");
}
BENCHMARK(BM_Argmax)
    ->ArgNames({"bf16", "rows", "cols"})
    ->Args({0, 8192, 32000})
    ->Args({1, 8192, 32000})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
