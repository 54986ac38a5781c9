#pragma once
// Helpers for GPU tests: skip with the reason where there is no GPU, device
// buffers, fresh random inputs and poisoned outputs.

#include "cuda/check.hpp"
#include "support/seed.hpp"

#include <loom/device.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

/// Skips the current test, saying why, where CUDA is unavailable.
#define LOOM_REQUIRE_GPU()                                              \
  do {                                                                  \
    if (!::loom::cuda_availability().available) {                       \
      GTEST_SKIP() << "no GPU: " << ::loom::cuda_availability().reason; \
    }                                                                   \
  } while (0)

namespace loom::test {

/// An owning device allocation for tests (the runtime's pools come later).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0)
      LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) LOOM_CUDA_ASSERT(cudaFree(data_));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }

  void upload(const std::vector<T>& host) {
    if (count_ > 0) {
      LOOM_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
      // From pageable memory cudaMemcpy may return before the DMA is done,
      // and loom's streams do not wait for the legacy stream.
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) {
      LOOM_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    }
    return host;
  }
  /// Fills every byte with 0xFF: NaN for floats, so unwritten elements fail.
  void poison() {
    if (count_ > 0) LOOM_CUDA_CHECK(cudaMemset(data_, 0xFF, count_ * sizeof(T)));
    // A device memset may return before it is done, and loom's streams do not
    // wait for the legacy stream: finish it before a kernel writes the buffer.
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

/// A fresh random engine per call site; its seed is printed (see seed.hpp).
inline std::mt19937_64 random_engine() { return std::mt19937_64(fresh_seed()); }

inline std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng, float lo = -1.0F,
                                        float hi = 1.0F) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// A tensor's floats, read back through pinned memory with the runtime's copy.
inline std::vector<float> read_back(loom::Runtime& rt, const loom::Tensor& t) {
  auto host = rt.tensor<float>({t.numel()}, loom::Memory::pinned);
  rt.copy(t, host).wait();
  const float* p = host.data_as<float>();
  return {p, p + t.numel()};
}

}  // namespace loom::test
