#pragma once
// Makes a device current for a scope and restores the previous one.

#include "cuda/check.hpp"

namespace loom::detail {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    LOOM_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) LOOM_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = previous_;
    if (LOOM_CUDA_ASSERT(cudaGetDevice(&now)) && now != previous_) {
      LOOM_CUDA_ASSERT(cudaSetDevice(previous_));
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace loom::detail
