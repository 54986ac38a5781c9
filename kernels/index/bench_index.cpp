// The index kernels at a training step's shapes, against a device-to-device
// copy of the same bytes timed in the same run:
//   index_select  an embedding lookup: 8192 random rows of a [50000, 512]
//                 f32 table (16 MiB gathered), f32 and bf16;
//   argmax        [8192, 32000] (a batch of logits over a vocabulary) along
//                 the last dimension, f32 and bf16 (argmin too);
//   gather        torch.gather's form along the last dimension, f32;
//   scatter_add   its inverse, with atomics;
//   one_hot       labels into f32 rows (its anchor a memset of the output).
// PyTorch's figures for the same shapes: bench/torch_anchors.py's `index`.
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
  const bool min = state.range(3) == 1;
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
      loom::kernels::arg_reduce(min ? loom::kernels::ArgReduce::min : loom::kernels::ArgReduce::max,
                                x.get(), dtype, reinterpret_cast<std::int64_t*>(indices.get()),
                                nullptr, shape, stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double copy_ms = time_ms(stream, [&](int) {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(copy.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, stream.view()));
  });
  const double moved = static_cast<double>(bytes);
  report(state, ms, copy_ms, moved, 2.0 * moved,
         std::string(min ? "argmin " : "argmax ") + std::string(loom::to_string(dtype)) + " [" +
             std::to_string(rows) + ", " + std::to_string(cols) + "] along the last dimension");
}
BENCHMARK(BM_Argmax)
    ->ArgNames({"bf16", "rows", "cols", "min"})
    ->Args({0, 8192, 32000, 0})
    ->Args({1, 8192, 32000, 0})
    ->Args({0, 8192, 32000, 1})
    ->Args({1, 8192, 32000, 1})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

// torch.gather along the last dimension: out[r, k] = x[r, index[r, k]], f32
// rows of 4096 (16 KiB, a row's reads stay in L1 and L2), i64 indices.
// Bytes: the index and the output, plus the x elements read.
void BM_Gather(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t rows = state.range(0), cols = state.range(1), picks = state.range(2);
  std::mt19937_64 rng(11);
  const std::size_t x_bytes = static_cast<std::size_t>(rows * cols) * sizeof(float);
  const std::size_t out_bytes = static_cast<std::size_t>(rows * picks) * sizeof(float);
  DeviceBytes x(x_bytes);
  fill_random(x, x_bytes, rng);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(rows * picks));
  std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
  for (auto& i : ids) i = pick(rng);
  DeviceBytes index(ids.size() * sizeof(std::int64_t));
  LOOM_CUDA_CHECK(cudaMemcpy(index.get(), ids.data(), ids.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice));
  DeviceBytes out(out_bytes);
  loom::kernels::IndexedWalk walk;
  walk.walk.rank = 2;
  walk.walk.count = rows * picks;
  walk.walk.extent[0] = rows;
  walk.walk.extent[1] = picks;
  walk.walk.stride[loom::kernels::kGatherOut][0] = picks;
  walk.walk.stride[loom::kernels::kGatherOut][1] = 1;
  walk.walk.stride[loom::kernels::kGatherX][0] = cols;
  walk.walk.stride[loom::kernels::kGatherIndex][0] = picks;
  walk.walk.stride[loom::kernels::kGatherIndex][1] = 1;
  walk.indexed_extent = cols;
  walk.indexed_stride = 1;
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int) {
      loom::kernels::gather(x.get(), index.get(), DType::i64, out.get(), 4, 0x7FFFFFFFU, walk,
                            stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double moved = static_cast<double>(ids.size()) * (8 + 4 + 4);
  const auto half = static_cast<std::size_t>(moved / 2);
  DeviceBytes src(half), dst(half);
  const double copy_ms = time_ms(stream, [&](int) {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice, stream.view()));
  });
  report(state, ms, copy_ms, moved, 2.0 * static_cast<double>(half),
         "gather f32 [" + std::to_string(rows) + ", " + std::to_string(cols) + "] picking " +
             std::to_string(picks) + " a row (i64 indices)");
}
BENCHMARK(BM_Gather)
    ->ArgNames({"rows", "cols", "picks"})
    ->Args({8192, 4096, 4096})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

// scatter_add along the last dimension: dst[r, index[r, k]] += src[r, k],
// f32 with atomics. Bytes: src and index read, dst's elements read and
// written once each (the atomics' traffic stays in L2 for rows this short).
void BM_ScatterAdd(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t rows = state.range(0), cols = state.range(1), adds = state.range(2);
  std::mt19937_64 rng(13);
  const std::size_t dst_bytes = static_cast<std::size_t>(rows * cols) * sizeof(float);
  const std::size_t src_bytes = static_cast<std::size_t>(rows * adds) * sizeof(float);
  DeviceBytes dst(dst_bytes);
  fill_random(dst, dst_bytes, rng);
  DeviceBytes src(src_bytes);
  fill_random(src, src_bytes, rng);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(rows * adds));
  std::uniform_int_distribution<std::int64_t> pick(0, cols - 1);
  for (auto& i : ids) i = pick(rng);
  DeviceBytes index(ids.size() * sizeof(std::int64_t));
  LOOM_CUDA_CHECK(cudaMemcpy(index.get(), ids.data(), ids.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice));
  loom::kernels::IndexedWalk walk;
  walk.walk.rank = 2;
  walk.walk.count = rows * adds;
  walk.walk.extent[0] = rows;
  walk.walk.extent[1] = adds;
  walk.walk.stride[loom::kernels::kScatterDst][0] = cols;
  walk.walk.stride[loom::kernels::kScatterSrc][0] = adds;
  walk.walk.stride[loom::kernels::kScatterSrc][1] = 1;
  walk.walk.stride[loom::kernels::kScatterIndex][0] = adds;
  walk.walk.stride[loom::kernels::kScatterIndex][1] = 1;
  walk.indexed_extent = cols;
  walk.indexed_stride = 1;
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int) {
      loom::kernels::scatter_add(reinterpret_cast<float*>(dst.get()), index.get(), DType::i64,
                                 reinterpret_cast<const float*>(src.get()), walk, stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double moved = static_cast<double>(ids.size()) * (4 + 8) + 2.0 * dst_bytes;
  const auto half = static_cast<std::size_t>(moved / 2);
  DeviceBytes a(half), b(half);
  const double copy_ms = time_ms(stream, [&](int) {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(b.get(), a.get(), half, cudaMemcpyDeviceToDevice, stream.view()));
  });
  report(state, ms, copy_ms, moved, 2.0 * static_cast<double>(half),
         "scatter_add f32 into [" + std::to_string(rows) + ", " + std::to_string(cols) + "], " +
             std::to_string(adds) + " a row");
}
BENCHMARK(BM_ScatterAdd)
    ->ArgNames({"rows", "cols", "adds"})
    ->Args({8192, 4096, 4096})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

// one_hot of i64 labels into f32 [rows, classes]: a write of the output.
void BM_OneHot(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t rows = state.range(0), classes = state.range(1);
  std::mt19937_64 rng(17);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
  std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
  for (auto& l : labels) l = pick(rng);
  DeviceBytes dev_labels(labels.size() * sizeof(std::int64_t));
  LOOM_CUDA_CHECK(cudaMemcpy(dev_labels.get(), labels.data(), labels.size() * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice));
  const std::size_t out_bytes = static_cast<std::size_t>(rows * classes) * sizeof(float);
  DeviceBytes out(out_bytes);
  loom::kernels::OneHotShape shape;
  shape.rows = rows;
  shape.classes = classes;
  shape.one_bits = 0x3F800000U;
  shape.nan_bits = 0x7FFFFFFFU;
  shape.element_bytes = 4;
  loom::detail::Stream stream(0, 0);
  double ms = 0;
  for (auto _ : state) {
    ms = time_ms(stream, [&](int) {
      loom::kernels::one_hot(dev_labels.get(), DType::i64, out.get(), shape, stream.view());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  // The anchor writes the same bytes: a memset, the floor of a pure write.
  const double copy_ms = time_ms(stream, [&](int) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, out_bytes, stream.view()));
  });
  const double moved = static_cast<double>(out_bytes);
  report(state, ms, copy_ms, moved, moved,
         "one_hot f32 [" + std::to_string(rows) + ", " + std::to_string(classes) +
             "] (anchor: a memset of the output)");
}
BENCHMARK(BM_OneHot)
    ->ArgNames({"rows", "classes"})
    ->Args({65536, 1000})
    ->Args({256, 10})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
