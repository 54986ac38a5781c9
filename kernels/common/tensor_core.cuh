#pragma once
// What loom's tensor-core kernels share: the m16n8k16 atom for an operand
// type, and the opt-in a kernel needs for more than 48 KiB of dynamic
// shared memory.
#include "common/check.hpp"

#include <cute/tensor.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace loom::kernels::tensor_core {

/// Ampere's m16n8k16 MMA with f32 accumulation for bf16 or f16 operands.
template <class T>
struct MmaAtomFor;
template <>
struct MmaAtomFor<cute::bfloat16_t> {
  using type = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct MmaAtomFor<cute::half_t> {
  using type = cute::SM80_16x8x16_F32F16F16F32_TN;
};

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

}  // namespace loom::kernels::tensor_core
