#pragma once
// Device helpers shared by the SGEMM variants: the operands as CuTe tensors,
// predicated tile loads, and the epilogue that honours beta == 0.

#include "elementwise/functors.hpp"
#include "gemm/sgemm.hpp"

#include <cute/tensor.hpp>

namespace loom::kernels::sgemm_detail {

/// A (M,K): element (m, k) at a[m * row_stride + k * col_stride].
__device__ inline auto tensor_a(const SgemmArgs& p) {
  using namespace cute;
  return make_tensor(make_gmem_ptr(p.a.data), make_shape(int(p.m), int(p.k)),
                     make_stride(p.a.row_stride, p.a.col_stride));
}

/// B as CuTe's (N,K): element (n, k) is B's (k, n).
__device__ inline auto tensor_b(const SgemmArgs& p) {
  using namespace cute;
  return make_tensor(make_gmem_ptr(p.b.data), make_shape(int(p.n), int(p.k)),
                     make_stride(p.b.col_stride, p.b.row_stride));
}

/// C (M,N).
__device__ inline auto tensor_c(const SgemmArgs& p) {
  using namespace cute;
  return make_tensor(make_gmem_ptr(p.c.data), make_shape(int(p.m), int(p.n)),
                     make_stride(p.c.row_stride, p.c.col_stride));
}

/// alpha * acc + beta * c, where beta == 0 leaves c unread (it may be NaN).
__device__ __forceinline__ float scaled(float acc, const float& c, float alpha, float beta) {
  return beta == 0.0F ? alpha * acc : fmaf(beta, c, alpha * acc);
}

/// c = act(alpha * acc + beta * c + bias(m, n)), where beta == 0 leaves c
/// unread (it may be NaN). The branches are on values every thread shares.
__device__ __forceinline__ void store_epilogue(float& c, float acc, std::int64_t m, std::int64_t n,
                                               const SgemmArgs& p) {
  float v = scaled(acc, c, p.alpha, p.beta);
  if (p.bias.data != nullptr) v += p.bias.data[m * p.bias.row_stride + n * p.bias.col_stride];
  switch (p.activation) {
    case SgemmActivation::relu: v = map_fn::loom_map_relu(v); break;
    case SgemmActivation::gelu_tanh: v = map_fn::loom_map_gelu_tanh(v); break;
    default: break;
  }
  c = v;
}

/// s(i) = g(i) where the coordinate cg(i) lies inside `bounds`, else 0: the
/// residue path of every tile load. g, cg and s are one thread's partitions
/// of a global tile, its identity tile and the shared (or register) tile.
template <class TG, class TC, class TS, class Bounds>
__device__ __forceinline__ void load_predicated(const TG& g, const TC& cg, TS&& s,
                                                const Bounds& bounds) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(s); ++i) s(i) = elem_less(cg(i), bounds) ? g(i) : 0.0F;
}

/// Stores one thread's accumulators to its partition of C, masked to
/// `bounds`, through the epilogue (cg(i) is element i's (m, n)); Plain: a
/// plain product's (alpha and beta only, no bias or activation).
template <bool Plain = false, class TR, class TG, class TC, class Bounds>
__device__ __forceinline__ void store_predicated(const TR& r, TG&& g, const TC& cg,
                                                 const Bounds& bounds, const SgemmArgs& p) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(r); ++i) {
    if (!elem_less(cg(i), bounds)) continue;
    if constexpr (Plain) {
      g(i) = scaled(r(i), g(i), p.alpha, p.beta);
    } else {
      store_epilogue(g(i), r(i), get<0>(cg(i)), get<1>(cg(i)), p);
    }
  }
}

}  // namespace loom::kernels::sgemm_detail
