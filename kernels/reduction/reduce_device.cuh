#pragma once
// Device building blocks shared by the reduction kernels: the fold of each
// operation, conversions to f32, 16-byte vectors, warp and block trees, and
// the host's dispatch from runtime dtypes and ops to template instances.

#include "common/convert.hpp"
#include "reduction/reduce.hpp"

#include <loom/error.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace loom::kernels::reduce_detail {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFU;
constexpr int kVectorBytes = 16;

template <ReduceOp kOp>
struct Fold;

template <>
struct Fold<ReduceOp::sum> {
  __device__ __forceinline__ static float identity() { return 0.0F; }
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
};

// a != a only for NaN: whichever side holds a NaN wins, so NaN propagates.
template <>
struct Fold<ReduceOp::max> {
  __device__ __forceinline__ static float identity() { return __int_as_float(0xFF800000); }
  __device__ __forceinline__ static float apply(float a, float b) {
    return (a > b || a != a) ? a : b;
  }
};

template <>
struct Fold<ReduceOp::min> {
  __device__ __forceinline__ static float identity() { return __int_as_float(0x7F800000); }
  __device__ __forceinline__ static float apply(float a, float b) {
    return (a < b || a != a) ? a : b;
  }
};

// Conversions as common/convert.hpp defines them: __half2float and the
// __float2*_rn stores (below) are the instructions that header names as
// giving its bits; bf16 is widened by the header itself (__bfloat162float
// keeps a NaN's payload before sm_90).
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
  return bf16_bits_to_f32(__bfloat16_as_ushort(v));
}

template <class T>
__device__ __forceinline__ T from_bits(unsigned short bits);
template <>
__device__ __forceinline__ __half from_bits<__half>(unsigned short bits) {
  return __ushort_as_half(bits);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_bits<__nv_bfloat16>(unsigned short bits) {
  return __ushort_as_bfloat16(bits);
}

template <class T>
constexpr int kPerVector = kVectorBytes / static_cast<int>(sizeof(T));

/// Elements before the first 16-byte boundary at or after p (at most n).
template <class T>
__device__ __forceinline__ std::size_t head_elements(const T* p, std::size_t n) {
  const auto misaligned = reinterpret_cast<std::uintptr_t>(p) % kVectorBytes;
  const std::size_t head = misaligned == 0 ? 0 : (kVectorBytes - misaligned) / sizeof(T);
  return head < n ? head : n;
}

__device__ __forceinline__ uint4 load_vector(const uint4* p) { return __ldg(p); }

/// Folds the elements of one 16-byte vector into acc, in memory order.
template <class T, ReduceOp kOp>
__device__ __forceinline__ float fold_vector(float acc, const uint4& raw) {
  using F = Fold<kOp>;
  if constexpr (std::is_same_v<T, float>) {
    acc = F::apply(acc, __uint_as_float(raw.x));
    acc = F::apply(acc, __uint_as_float(raw.y));
    acc = F::apply(acc, __uint_as_float(raw.z));
    acc = F::apply(acc, __uint_as_float(raw.w));
  } else {
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      acc = F::apply(acc, to_f32(from_bits<T>(static_cast<unsigned short>(words[w] & 0xFFFFU))));
      acc = F::apply(acc, to_f32(from_bits<T>(static_cast<unsigned short>(words[w] >> 16))));
    }
  }
  return acc;
}

/// Element e of a 16-byte vector, as f32 (e a compile-time constant after unrolling).
template <class T>
__device__ __forceinline__ float vector_element(const uint4& raw, int e) {
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(words[e]);
  } else {
    const unsigned word = words[e / 2];
    const auto bits = static_cast<unsigned short>(e % 2 == 0 ? word & 0xFFFFU : word >> 16);
    return to_f32(from_bits<T>(bits));
  }
}

/// The warp's combined value, in every lane (a butterfly: a fixed order).
template <ReduceOp kOp>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = Fold<kOp>::apply(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

/// The block's combined value, valid in thread 0. Warps reduce by shuffles;
/// one value a warp goes through shared memory.
template <ReduceOp kOp, int kBlock>
__device__ __forceinline__ float block_reduce(float v) {
  static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp, "one warp folds the warps");
  constexpr int kWarps = kBlock / kWarp;
  __shared__ float sWarp[kWarps];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  v = warp_reduce<kOp>(v);
  if (lane == 0) sWarp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? sWarp[lane] : Fold<kOp>::identity();
    v = warp_reduce<kOp>(v);
  }
  return v;
}

/// Writes v as element i of an f32, f16 or bf16 array.
__device__ __forceinline__ void store(void* out, DType dtype, std::int64_t i, float v) {
  switch (dtype) {
    case DType::f16: static_cast<__half*>(out)[i] = __float2half_rn(v); break;
    case DType::bf16: static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(out)[i] = v; break;
  }
}

template <class T>
struct TypeTag {
  using type = T;
};
template <ReduceOp kOp>
struct OpTag {
  static constexpr ReduceOp value = kOp;
};

template <class T, class F>
void dispatch_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum: f(TypeTag<T>{}, OpTag<ReduceOp::sum>{}); return;
    case ReduceOp::max: f(TypeTag<T>{}, OpTag<ReduceOp::max>{}); return;
    case ReduceOp::min: f(TypeTag<T>{}, OpTag<ReduceOp::min>{}); return;
  }
  throw InvalidArgument("reduce: unknown operation");
}

/// Calls f(TypeTag<T>, OpTag<op>) for the element type of `dtype`: the one
/// place where the instances are chosen (3 dtypes x 3 operations).
template <class F>
void dispatch(DType dtype, ReduceOp op, F&& f) {
  switch (dtype) {
    case DType::f32: dispatch_op<float>(op, f); return;
    case DType::f16: dispatch_op<__half>(op, f); return;
    case DType::bf16: dispatch_op<__nv_bfloat16>(op, f); return;
    default: break;
  }
  throw InvalidArgument("reduce: the input must be f32, f16 or bf16, got " +
                        std::string(to_string(dtype)));
}

inline void require_output_dtype(DType dtype) {
  if (!reducible(dtype)) {
    throw InvalidArgument("reduce: the output must be f32, f16 or bf16, got " +
                          std::string(to_string(dtype)));
  }
}

inline std::size_t align_up(std::size_t bytes, std::size_t to = 256) {
  return (bytes + to - 1) / to * to;
}

}  // namespace loom::kernels::reduce_detail
