#pragma once
// What the flash attention kernels share: the swizzled shared-memory row
// atom, the accumulator's views by rows and columns, row-predicated tile
// loads, a quad's row max and sum, and the SFU's 2^x.
#include <cute/tensor.hpp>

namespace loom::kernels::attention_detail::flash {

constexpr float kLog2e = 1.4426950408889634F;

// Rows of 64 elements (128 bytes) swizzled so that 16-byte stores and
// ldmatrix's row reads each cover all banks.
using SmemRowAtom = decltype(cute::composition(
    cute::Swizzle<3, 3, 3>{},
    cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));

/// A (Rows, Cols) row-major shared tile of SmemRowAtom, and its transpose
/// (Cols, Rows) over the same memory (for operands read with ldmatrix.trans).
template <int Rows, int Cols>
using SmemTile =
    decltype(cute::tile_to_shape(SmemRowAtom{}, cute::Shape<cute::Int<Rows>, cute::Int<Cols>>{}));
template <int Rows, int Cols>
using SmemTileTransposed = decltype(cute::composition(
    SmemTile<Rows, Cols>{},
    cute::make_layout(cute::Shape<cute::Int<Cols>, cute::Int<Rows>>{}, cute::GenRowMajor{})));

/// An accumulator ((2, 2), MMA_M, MMA_N) viewed as (rows, cols): ((2, MMA_M), (2, MMA_N)).
template <class L>
__device__ __forceinline__ auto rows_by_cols(L layout) {
  using namespace cute;
  auto l = logical_divide(layout, cute::Shape<_2>{});
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}

/// The accumulator's layout as the A operand of an m16n8k16 product:
/// ((2, 2, 2), MMA_M, MMA_N / 2).
template <class L>
__device__ __forceinline__ auto as_a_operand(L layout) {
  using namespace cute;
  auto l = logical_divide(layout, cute::Shape<Underscore, Underscore, _2>{});
  return make_layout(make_layout(get<0>(l), get<2, 0>(l)), get<1>(l), get<2, 1>(l));
}

/// dst = src for rows inside `rows_left`, zeros elsewhere (a row's vectors
/// all lie inside the head dim).
template <class Copy, class TS, class TD, class TC>
__device__ __forceinline__ void copy_rows(const Copy& copy_op, const TS& src, TD&& dst,
                                          const TC& coords, int rows_left) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size<1>(dst); ++i) {
    const bool inside = get<0>(coords(0, i, 0)) < rows_left;
    CUTE_UNROLL
    for (int j = 0; j < size<2>(dst); ++j) {
      if (inside) {
        copy(copy_op, src(_, i, j), dst(_, i, j));
      } else {
        clear(dst(_, i, j));
      }
    }
  }
}

/// 2^x by the SFU's approximation (2 ulp; 2^-inf = 0), as FA2 computes it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// A row's max and sum over the quad of lanes that holds it (an MMA
/// accumulator row lies in four neighbouring lanes).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFU, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xFFFFFFFFU, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xFFFFFFFFU, v, 1);
  return v + __shfl_xor_sync(0xFFFFFFFFU, v, 2);
}

/// The cp.async tile copy of (rows, HeadDim) tiles by `Threads` threads,
/// 16 bytes each, a row's vectors on neighbouring threads.
template <class T, int HeadDim, int Threads>
using GmemRowsCopy = decltype(cute::make_tiled_copy(
    cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, T>{},
    cute::Layout<cute::Shape<cute::Int<Threads / (HeadDim / 8)>, cute::Int<HeadDim / 8>>,
                 cute::Stride<cute::Int<HeadDim / 8>, cute::_1>>{},
    cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));

}  // namespace loom::kernels::attention_detail::flash
