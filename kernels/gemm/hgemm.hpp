#pragma once
// Half-precision GEMM on tensor cores: bf16 or f16 operands, f32
// accumulation, C in the operands' type or f32.
//
//   C[b] = act(alpha * A[b] B[b] + beta * C[b] + bias)      b < batch
//
// A is M x K, B is K x N, C is M x N, each given by two strides and a batch
// stride in elements (a batch stride of 0 shares one matrix across the
// batch: a weight applied to every sample).
//
// Variants:
//   mma_sync   Ampere's mma.sync.m16n8k16 over CuTe (sm_80 and up): a
//              128 x 128 x 64 block tile, four warps of 64 x 64, three
//              stages of cp.async 16-byte copies into swizzled shared tiles
//              that ldmatrix reads without bank conflicts (transposed for an
//              operand whose contiguous dimension is M or N). Blocks walk C
//              in groups of 8 tile rows, so that a group's B panel stays in L2.
//              Tails in M, N and K are predicated copies that fill zeros.
//              Needs both operands' contiguous dimension a multiple of 8
//              elements, leading dimensions and batch strides multiples of 8,
//              and 16-byte aligned data (hgemm_mma_sync_fits).
//   simple     any layout, any alignment: 32 x 32 tiles through shared
//              memory, f32 math, one element of C a thread. What runs where
//              mma_sync does not fit.
//
// The epilogue, as each element is stored: beta == 0 never reads C; bias is
// f32 or C's type, broadcast by zero strides; act is none, relu or gelu_tanh.
#include "gemm/sgemm.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::kernels {

/// A matrix of a batch: element (i, j) of matrix b at
/// data + b * batch_stride + i * row_stride + j * col_stride (elements of `dtype`).
struct BatchedMatrix {
  const void* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;
  std::int64_t batch_stride = 0;
  DType dtype = DType::f32;
};

struct HgemmArgs {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0F;
  float beta = 0.0F;
  BatchedMatrix a;     ///< f16 or bf16
  BatchedMatrix b;     ///< a's dtype
  BatchedMatrix c;     ///< written: a's dtype or f32 (data is writable memory)
  BatchedMatrix bias;  ///< null data: none; f32 or c's dtype
  SgemmActivation activation = SgemmActivation::none;
  /// Where its pointers are: a compiled graph re-points a launch that takes it.
  static constexpr std::array<std::size_t, 4> loom_pointer_offsets();
};

constexpr std::array<std::size_t, 4> HgemmArgs::loom_pointer_offsets() {
  return {offsetof(HgemmArgs, a) + offsetof(BatchedMatrix, data),
          offsetof(HgemmArgs, b) + offsetof(BatchedMatrix, data),
          offsetof(HgemmArgs, c) + offsetof(BatchedMatrix, data),
          offsetof(HgemmArgs, bias) + offsetof(BatchedMatrix, data)};
}
static_assert(std::is_standard_layout_v<HgemmArgs>, "offsetof needs a standard layout");

enum class HgemmVariant { automatic, mma_sync, simple };

std::string_view to_string(HgemmVariant variant) noexcept;

/// Whether mma_sync takes these operands (layouts and alignment above).
bool hgemm_mma_sync_fits(const HgemmArgs& args) noexcept;

/// Enqueues the product on `stream`. automatic runs mma_sync where it fits,
/// else simple; mma_sync where it does not fit throws InvalidArgument.
/// m, n or batch of 0 launches nothing; k of 0 applies the epilogue to a
/// zero product. Extents must fit in int; batch at most 65535.
void hgemm(const HgemmArgs& args, StreamView stream,
           HgemmVariant variant = HgemmVariant::automatic);

/// The CPU reference on host pointers: products of the operands' exact
/// values summed in double, the epilogue in f32, rounded once to C's type.
void hgemm_reference(const HgemmArgs& args);

namespace hgemm_detail {
/// mma_sync for one operand type (hgemm_bf16.cu, hgemm_f16.cu).
void launch_mma_sync_bf16(const HgemmArgs& args, StreamView stream);
void launch_mma_sync_f16(const HgemmArgs& args, StreamView stream);
}  // namespace hgemm_detail

}  // namespace loom::kernels
