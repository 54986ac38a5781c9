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
//   wgmma      Hopper's warpgroup MMA fed by TMA (sm_90a, compute
//              capability 9.0 only; hgemm_wgmma.cuh): persistent blocks of
//              a TMA producer warpgroup and two consumer warpgroups on
//              128 x 256 x 64 tiles, four shared-memory stages on mbarriers.
//              Tails in M, N and K are TMA's zero fill. Needs each operand
//              contiguous along one dimension, its leading dimension and
//              batch stride multiples of 8 elements (16 bytes) and 16-byte
//              aligned data; any extents (hgemm_wgmma_fits), and a device
//              of compute capability 9.0 (hgemm_wgmma_available). What
//              automatic runs where it can (kHgemmAutomaticUsesWgmma).
//   wgmma_cluster  wgmma in clusters of two blocks along M that share each
//              B tile: each block loads half of it and TMA multicasts it to
//              both, so L2 serves B once a pair (a third less traffic a
//              tile). For A K-contiguous and B N-contiguous (both row-major,
//              or both column-major); other layouts run wgmma. Takes what
//              wgmma takes; not yet what automatic picks (to be measured).
//   simple     any layout, any alignment: 32 x 32 tiles through shared
//              memory, f32 math, one element of C a thread. What runs where
//              mma_sync does not fit.
//
// The epilogue, as each element is stored: beta == 0 never reads C; bias is
// f32 or C's type, broadcast by zero strides; act is none, relu or gelu_tanh.
#include "gemm/sgemm.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/ops/variant.hpp>

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

enum class HgemmVariant { automatic, mma_sync, simple, wgmma, wgmma_cluster };

}  // namespace loom::kernels

// Named by the table every variant family uses (loom/ops/variant.hpp).
namespace loom::ops {
template <>
struct VariantNames<kernels::HgemmVariant> {
  static constexpr std::array<std::string_view, 5> names = {"automatic", "mma_sync", "simple",
                                                            "wgmma", "wgmma_cluster"};
};
// A value added to the enum needs its name in the table: the last one must match.
static_assert(to_string(kernels::HgemmVariant::wgmma_cluster) == "wgmma_cluster");
}  // namespace loom::ops

namespace loom::kernels {

// So that to_string(variant) resolves here and by argument-dependent lookup.
using loom::ops::to_string;

/// Whether automatic picks wgmma (on a 9.0 device, where it fits) before
/// mma_sync: on since its GPU tests (HgemmGpu.Wgmma*, MatmulHalfGpu.Wgmma*)
/// passed on an H100 (2026-12-05), where it ran 2.7x mma_sync at 8192^3.
inline constexpr bool kHgemmAutomaticUsesWgmma = true;

/// Whether mma_sync takes these operands (layouts and alignment above).
bool hgemm_mma_sync_fits(const HgemmArgs& args) noexcept;

/// Whether wgmma takes these operands (layouts and alignment above), and
/// it was built (the library was compiled for sm_90a). Says nothing of the
/// device: see hgemm_wgmma_available.
bool hgemm_wgmma_fits(const HgemmArgs& args) noexcept;

/// Whether wgmma can run on the calling thread's current device: built,
/// the device's compute capability is exactly 9.0 (wgmma, setmaxnreg and
/// the sm_90a image run nowhere else), and the driver loaded the kernel's
/// sm_90a image. Cached per device.
/// @throws CudaError when the device cannot be queried.
bool hgemm_wgmma_available();

/// Enqueues the product on `stream`. automatic runs mma_sync where it fits
/// (wgmma first, once kHgemmAutomaticUsesWgmma is on), else simple;
/// mma_sync or wgmma where it does not fit (wgmma: or on a device other
/// than 9.0) throws InvalidArgument saying why.
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

/// wgmma for one operand type (hgemm_wgmma_bf16.cu, hgemm_wgmma_f16.cu), on
/// a grid of at most `sm_count` blocks; `cluster`: wgmma_cluster's clusters
/// of two where the layout allows. Throws InvalidArgument where not built.
void launch_wgmma_bf16(const HgemmArgs& args, StreamView stream, int sm_count, bool cluster);
void launch_wgmma_f16(const HgemmArgs& args, StreamView stream, int sm_count, bool cluster);
/// Whether the wgmma kernels were compiled for sm_90a (hgemm_wgmma_bf16.cu).
bool wgmma_built() noexcept;
/// The registers a thread of the wgmma kernel (bf16, A K- and B N-major)
/// takes in the image the driver loaded for the current device
/// (cudaFuncGetAttributes); 0 where not built. Tells the sm_90a image from
/// the plain sm_90 stub beside it. @throws CudaError.
int wgmma_kernel_registers();

/// Which dimension of a matrix wgmma's TMA reads contiguously: its columns
/// (unit column stride, row stride a positive multiple of 8 elements), its
/// rows (unit row stride, column stride a positive multiple of 8), or
/// neither. A is K-contiguous when its columns are, B when its rows are.
enum class WgmmaContiguous { none, rows, cols };
WgmmaContiguous wgmma_contiguous(const BatchedMatrix& m) noexcept;

/// Test hook: makes automatic pick wgmma (where it fits and is available)
/// whatever kHgemmAutomaticUsesWgmma says, for its scope. Not for
/// production code; the GPU tests use it to run loom::ops::matmul through
/// wgmma in compiled graphs.
class AutomaticUsesWgmmaForTests {
 public:
  AutomaticUsesWgmmaForTests();
  ~AutomaticUsesWgmmaForTests();
  AutomaticUsesWgmmaForTests(const AutomaticUsesWgmmaForTests&) = delete;
  AutomaticUsesWgmmaForTests& operator=(const AutomaticUsesWgmmaForTests&) = delete;
};
}  // namespace hgemm_detail

}  // namespace loom::kernels
