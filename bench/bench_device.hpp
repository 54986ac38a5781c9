#pragma once
// What the kernel benchmarks share on the device: an owning device buffer and
// event timing of repeated launches on one stream.

#include "bench_support.hpp"
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"

#include <cstddef>
#include <cstdint>
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
