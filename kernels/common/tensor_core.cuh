#pragma once
// What loom's tensor-core kernels share: the m16n8k16 atom for an operand
// type, and (from common/device_limits.hpp) the opt-in a kernel needs for
// more than 48 KiB of dynamic shared memory.
#include "common/check.hpp"
#include "common/device_limits.hpp"

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

/// The opt-in for more than 48 KiB of dynamic shared memory (common/device_limits.hpp).
using loom::kernels::opt_in_shared_memory;

}  // namespace loom::kernels::tensor_core
