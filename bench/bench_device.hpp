#pragma once
// What the kernel benchmarks share on the device: an owning device buffer and
// event timing of repeated launches on one stream.

#include "bench_support.hpp"
#include "common/convert.hpp"
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace loom::bench {

/// n bytes of device memory (none for n = 0), freed with the object.
struct DeviceBytes {
  explicit DeviceBytes(std::size_t n) {
    if (n > 0) LOOM_CUDA_CHECK(cudaMalloc(&p, n));
  }
  ~DeviceBytes() {
    if (p != nullptr) LOOM_CUDA_ASSERT(cudaFree(p));
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::uint8_t* get() const { return static_cast<std::uint8_t*>(p); }
  void* p = nullptr;
};

/// Fills `elements` bf16 values at `dst` with standard normal values, as
/// torch.randn fills a Python anchor's inputs: 2^20 values drawn once from
/// `seed`, repeated. Constant inputs (a memset) would let the tensor cores
/// draw less power, and the clocks run higher, than they do on real data or
/// on the anchor's.
inline void fill_normal_bf16(void* dst, std::size_t elements, std::uint32_t seed) {
  constexpr std::size_t kTile = std::size_t{1} << 20;
  std::vector<std::uint16_t> tile(std::min(elements, kTile));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  for (auto& v : tile) v = loom::kernels::f32_to_bf16_bits(normal(rng));
  auto* out = static_cast<std::uint16_t*>(dst);
  for (std::size_t at = 0; at < elements; at += tile.size()) {
    const std::size_t n = std::min(tile.size(), elements - at);
    LOOM_CUDA_CHECK(
        cudaMemcpy(out + at, tile.data(), n * sizeof(std::uint16_t), cudaMemcpyHostToDevice));
  }
}

/// Median over `batches` batches of the mean time of one launch, in
/// milliseconds, timed with events on `stream`; launch(i) runs the i-th
/// repetition (so that a benchmark can rotate buffers), launch(0) warms up.
template <class Launch>
double time_launches_ms(loom::detail::Stream& stream, Launch&& launch, int batches, int reps) {
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  launch(0);
  std::vector<double> ms;
  for (int b = 0; b < batches; ++b) {
    start.record(stream.view());
    for (int i = 0; i < reps; ++i) launch(i + 1);
    stop.record(stream.view());
    stop.synchronize();
    ms.push_back(stop.elapsed_ms_since(start) / reps);
  }
  return median(ms);
}

}  // namespace loom::bench
