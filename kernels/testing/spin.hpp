#pragma once
// A kernel of known duration: one thread busy-waits on the global timer,
// then adds 1 to t[0]. For scheduling tests and benchmarks.

#include <loom/cuda_interop.hpp>

#include <cstdint>

namespace loom::kernels {

void spin(float* t, std::int64_t microseconds, StreamView stream);
/// The CPU reference sleeps instead of spinning.
void spin_reference(float* t, std::int64_t microseconds);

}  // namespace loom::kernels
