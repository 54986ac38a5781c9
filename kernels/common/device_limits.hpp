#pragma once
// What a launch asks of the current device once and remembers: its
// multiprocessor count, and the opt-in a kernel needs for more than 48 KiB
// of dynamic shared memory.
#include "common/check.hpp"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace loom::kernels {

/// The current device's multiprocessors, read once a device (the first 64).
inline int device_multiprocessors() {
  static std::array<std::atomic<int>, 64> cache{};
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < static_cast<int>(cache.size());
  if (cached) {
    const int known = cache[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int sms = 0;
  LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cached) cache[static_cast<std::size_t>(device)].store(sms, std::memory_order_relaxed);
  return sms;
}

/// Above 48 KiB of dynamic shared memory a kernel must opt in, once a
/// device: `devices` (one per kernel) remembers where it has.
template <class Kernel>
void opt_in_shared_memory(Kernel kernel, std::size_t bytes, std::atomic<std::uint64_t>& devices) {
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const std::uint64_t bit = device < 64 ? std::uint64_t{1} << device : 0;
  if (bit != 0 && (devices.load(std::memory_order_acquire) & bit) != 0) return;
  LOOM_KERNEL_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  devices.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace loom::kernels
