#pragma once
// Softmax's device code (softmax.hpp describes the variants), launched from
// softmax.cu and run on the CPU by test_softmax_emulated.cpp under the
// emulation of CUDA threads. The includer provides `cg` (CUDA's
// cooperative_groups, or the emulation's) in this namespace.
#include "common/convert.hpp"
#include "softmax/softmax.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

// The cluster path: device code for compute capability 9.0 and later, and
// the CPU emulation; elsewhere the cluster kernel only traps (the host never
// picks it there) and carries no cluster size, which older targets reject.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(LOOM_EMULATED_CUDA)
#define LOOM_SOFTMAX_CLUSTERS 1
#else
#define LOOM_SOFTMAX_CLUSTERS 0
#endif
#if !defined(LOOM_EMULATED_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#define LOOM_SOFTMAX_CLUSTER_DIMS __cluster_dims__(kClusterBlocks, 1, 1)
#else
#define LOOM_SOFTMAX_CLUSTER_DIMS
#endif
// One block's shared object, the same for the blocks of a cluster.
#ifndef LOOM_CLUSTER_BLOCK_SHARED
#define LOOM_CLUSTER_BLOCK_SHARED(type, name) __shared__ type name
#endif

// Internal linkage: each translation unit that includes this gets its own.
namespace loom::kernels::softmax_detail {
namespace {

using bf16_bits = std::uint16_t;

constexpr float kLog2e = 1.4426950408889634F;
constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
constexpr int kVectorBytes = 16;
// fused: rows up to kWarpRowMax take a warp each, up to kRegisterRowMax a block.
constexpr std::int64_t kWarpRowMax = 32 * kWarp;
constexpr std::int64_t kRegisterRowMax = 32 * kMaxThreads;
constexpr int kWarpRowsPerBlock = 4;
// fused, rows longer than kRegisterRowMax up to kClusterBlocks times it, on
// compute capability 9.0 and later: a cluster of kClusterBlocks blocks a
// row, when there are at least kClusterMinRows rows (fewer split, on more
// blocks).
constexpr int kClusterBlocks = 8;
constexpr std::int64_t kClusterMinRows = 32;
// fused, rows longer than kRegisterRowMax: fewer rows than this split each
// row into chunks across blocks; more take a block a row.
constexpr std::int64_t kSplitBelowRows = 256;
constexpr std::int64_t kChunk = 8192;
constexpr int kChunkThreads = 256;
constexpr int kPassThreads = 512;  // naive and online

// A row's virtual length (RowPacks) is at most this much past its length:
// the widest shift, of 16-bit elements.
constexpr std::int64_t kMaxShift = kVectorBytes / 2 - 1;

// Chunks of the split path: enough for a row of any shift. Host code.
inline std::int64_t split_chunks(const SoftmaxShape& s) {
  return (s.cols + kMaxShift + kChunk - 1) / kChunk;
}

// The cluster's slice of a row of `span` virtual elements: a multiple of the
// pack. Host code.
inline std::int64_t cluster_slice(std::int64_t span, int vec) {
  const std::int64_t per_block = (span + kClusterBlocks - 1) / kClusterBlocks;
  return (per_block + vec - 1) / vec * vec;
}

// --- element access ----------------------------------------------------------

// bf16 widens by a bare shift, as bf16_of below says why: a NaN's bits
// never reach an output, which is narrowed canonically.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16_bits v) {
  return __uint_as_float(static_cast<unsigned>(v) << 16);
}
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16_bits from_float<bf16_bits>(float v) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));  // as bf16_pair_bits below
#else
  return f32_to_bf16_bits(v);
#endif
}

// Two values narrowed to bf16, the first in the word's low half. On the
// device one cvt.rn.bf16x2.f32 (__floats2bfloat162_rn, which
// common/convert.hpp allows: the shared function's bits for every input),
// where the shared integer rounding took seven instructions a value, the
// most of a bf16 row's work; the shared function itself in the emulation.
__device__ __forceinline__ unsigned bf16_pair_bits(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return static_cast<unsigned>(__bfloat16_as_ushort(pair.x)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(pair.y)) << 16);
#else
  return static_cast<unsigned>(f32_to_bf16_bits(lo)) |
         (static_cast<unsigned>(f32_to_bf16_bits(hi)) << 16);
#endif
}

// VEC consecutive elements, as one 16-byte access when VEC * sizeof(T) is
// 16 (the pointer then aligned to 16), else one element at a time. The
// 16-byte store goes through the __stwb intrinsic: as a plain uint4 store,
// the compiler splits some of them into four scalar stores.
template <class T, int VEC>
__device__ __forceinline__ void load(const T* p, float (&out)[VEC]) {
  if constexpr (sizeof(T) * VEC == kVectorBytes) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        out[i] = __uint_as_float(w[i]);
      } else {
        out[2 * i] = to_float(static_cast<bf16_bits>(w[i] & 0xFFFFU));
        out[2 * i + 1] = to_float(static_cast<bf16_bits>(w[i] >> 16));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = to_float(p[i]);
  }
}

template <class T, int VEC>
__device__ __forceinline__ void store(T* p, const float (&in)[VEC]) {
  if constexpr (sizeof(T) * VEC == kVectorBytes) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        w[i] = __float_as_uint(in[i]);
      } else {
        w[i] = bf16_pair_bits(in[2 * i], in[2 * i + 1]);
      }
    }
    __stwb(reinterpret_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) p[i] = from_float<T>(in[i]);
  }
}

constexpr unsigned kBf16NegInfBits = 0xFF80U;

// Element i of a pack of eight bf16 values held two to a word. A bare shift,
// not bf16_bits_to_f32 (common/convert.hpp): a NaN's sign and payload
// survive the widening, but a row holding a NaN comes out all NaN whatever
// its bits, and every output is narrowed through the canonical conversion
// (0x7FFF for bf16), so the bits a user sees are the header's; the
// canonicalizing compare would cost an instruction an element here.
__device__ __forceinline__ float bf16_of(const uint4& w, int i) {
  const unsigned word = i < 2 ? w.x : i < 4 ? w.y : i < 6 ? w.z : w.w;
  return __uint_as_float(i % 2 == 0 ? word << 16 : word & 0xFFFF0000U);
}

// Makes the compiler forget what it derived from w (the floats unpacked
// from it, their exponentials): it would rather keep those live across a
// reduction than unpack again, which spills the registers packing saves.
__device__ __forceinline__ void forget_derived(uint4& w) {
#if defined(__CUDA_ARCH__)
  asm volatile("" : "+r"(w.x), "+r"(w.y), "+r"(w.z), "+r"(w.w));
#else
  (void)w;
#endif
}

// One row (x and y alike) seen as packs of VEC elements that start on a
// 16-byte boundary at or before the row's start: virtual element v is the
// row's element v - shift, where shift is how far the row starts past that
// boundary (x and y start equally far past one: the host checks it). A pack
// wholly inside the row is one 16-byte access; a pack across either end (the
// peeled head and tail) goes element by element, reading -inf past the row
// (it adds exp(-inf) = 0) and writing nothing there. So rows at any offset,
// of any length, take the wide accesses for all but two packs.
template <class T, int VEC>
struct RowPacks {
  const T* x;
  T* y;
  int shift;
  std::int64_t end;  // virtual end: cols + shift

  __device__ __forceinline__ RowPacks(const T* xr, T* yr, std::int64_t cols) {
    shift = VEC == 1
                ? 0
                : static_cast<int>(reinterpret_cast<std::uintptr_t>(xr) % kVectorBytes / sizeof(T));
    x = xr - shift;
    y = yr != nullptr ? yr - shift : nullptr;  // null: a row only read
    end = cols + shift;
  }
  // Callers never ask for a one-element pack outside the row.
  __device__ __forceinline__ bool whole(std::int64_t v) const {
    if constexpr (VEC == 1) return true;
    return v >= shift && v + VEC <= end;
  }
  __device__ __forceinline__ void read(std::int64_t v, float (&p)[VEC]) const {
    if (whole(v)) {
      load<T, VEC>(x + v, p);
      return;
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      p[i] = v + i >= shift && v + i < end ? to_float(x[v + i]) : -INFINITY;
    }
  }
  // The pack's 16-bit values as they lie in memory, two to a word (VEC = 8,
  // T 16 bits wide), -inf past either end of the row.
  __device__ __forceinline__ uint4 read_bits(std::int64_t v) const {
    static_assert(sizeof(T) == 2 && VEC == 8, "eight 16-bit values a pack");
    if (whole(v)) return *reinterpret_cast<const uint4*>(x + v);
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::int64_t lo = v + 2 * i;
      const unsigned a = lo >= shift && lo < end ? x[lo] : kBf16NegInfBits;
      const unsigned b = lo + 1 >= shift && lo + 1 < end ? x[lo + 1] : kBf16NegInfBits;
      w[i] = a | (b << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
  __device__ __forceinline__ void write(std::int64_t v, const float (&p)[VEC]) const {
    if (whole(v)) {
      store<T, VEC>(y + v, p);
      return;
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      if (v + i >= shift && v + i < end) y[v + i] = from_float<T>(p[i]);
    }
  }
};

// An element's exponential, exp(v - m), computed 2^kExpBias times too
// large: every sum of them is too, by the same power of two, so that the
// outputs e / S are unchanged. The bias lets the exponential be one
// MUFU.EX2 that flushes subnormal results (ex2.approx.ftz), where exp2f
// spends three more instructions an element on the subnormal range
// (bf16 rows are bound by instructions, not bytes): 2^(t + 24) is normal
// for every t >= -150, below which the true exponential rounds to 0 in
// f32 anyway, and the output's multiply by 1 / S, which does not flush,
// still rounds to a subnormal where the result is one. Sums stay far below
// the f32 range (a row of 2^31 elements sums to at most 2^55).
constexpr int kExpBiasBits = 24;
constexpr float kExpBias = kExpBiasBits;
constexpr float kExpUnbias = 1.0F / static_cast<float>(1 << kExpBiasBits);  // exact

__device__ __forceinline__ float exp2_flushing(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  // The CPU emulation flushes as the instruction does, so that its tests
  // see what the bias must keep.
  const float y = exp2f(x);
  return y < 0x1p-126F ? 0.0F : y;
#endif
}

/// exp(v - m) * 2^kExpBias, with m_log2e = m log2(e).
__device__ __forceinline__ float exp_shifted(float v, float m_log2e) {
  return exp2_flushing(fmaf(v, kLog2e, kExpBias - m_log2e));
}

// --- reductions --------------------------------------------------------------

struct Max {
  __device__ static float apply(float a, float b) { return fmaxf(a, b); }
  __device__ static float identity() { return -INFINITY; }
};
struct Sum {
  __device__ static float apply(float a, float b) { return a + b; }
  __device__ static float identity() { return 0.0F; }
};

template <class Op>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = Op::apply(v, __shfl_xor_sync(0xFFFFFFFFU, v, offset));
  }
  return v;
}

// Every thread gets the result. sPartial: kWarp floats, not in use by another
// reduction that can still be reading it.
template <class Op>
__device__ float block_reduce(float v, float* sPartial) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  v = warp_reduce<Op>(v);
  if (lane == 0) sPartial[warp] = v;
  __syncthreads();
  v = lane < warps ? sPartial[lane] : Op::identity();
  return warp_reduce<Op>(v);
}

// A running (max, sum of exp(x - max)) pair. An empty pair is (-inf, 0).
struct MaxSum {
  float m;
  float s;
};

// exp(from - to), exactly 1 when the maximum did not move: exp(m - m)
// computed is 1 only to within an ulp, and a running sum rescaled by it pack
// after pack would drift by that ulp each time. Unbiased (it scales sums,
// biased alike, and a cluster block's factor), and exp2f: it runs once a
// pack or a block, not an element.
__device__ __forceinline__ float rescale(float from, float to) {
  return from == to ? 1.0F : exp2f(fmaf(from, kLog2e, -to * kLog2e));
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  // Both empty (every value -inf): exp(-inf - -inf) would be NaN. Their sums
  // are 0, or NaN where a NaN was folded in (fmaxf passes over NaN, so such
  // a part can have m = -inf): the NaN must reach the row's sum.
  if (m == -INFINITY) return {m, a.s + b.s};
  return {m, a.s * rescale(a.m, m) + b.s * rescale(b.m, m)};
}

// Folds VEC values into the pair: one rescale a pack, not one an element.
template <int VEC>
__device__ __forceinline__ MaxSum fold(MaxSum acc, const float (&v)[VEC]) {
  float m = acc.m;
#pragma unroll
  for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
  if (m == -INFINITY) {
    // Nothing above -inf yet: each value adds exp(v) = 0, or NaN for a NaN
    // (which fmaxf passed over), so that the row still comes out NaN.
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc.s += exp2f(v[i] * kLog2e);
    return acc;
  }
  const float m_log2e = m * kLog2e;
  float s = acc.s * rescale(acc.m, m);
#pragma unroll
  for (int i = 0; i < VEC; ++i) s += exp_shifted(v[i], m_log2e);
  return {m, s};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum p) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const MaxSum q{__shfl_xor_sync(0xFFFFFFFFU, p.m, offset),
                   __shfl_xor_sync(0xFFFFFFFFU, p.s, offset)};
    p = merge(p, q);
  }
  return p;
}

__device__ MaxSum block_merge(MaxSum p, MaxSum* sPartial) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  p = warp_merge(p);
  if (lane == 0) sPartial[warp] = p;
  __syncthreads();
  p = lane < warps ? sPartial[lane] : MaxSum{-INFINITY, 0.0F};
  return warp_merge(p);
}

// 1 / sum, or NaN for a row of -inf only (m == -inf: no distribution).
__device__ __forceinline__ float reciprocal_or_nan(float m, float s) {
  return m == -INFINITY ? __int_as_float(0x7FC00000) : 1.0F / s;
}

// Packs a thread has in flight in the streaming loops: one at a time, a
// thread waits a whole memory latency for each (and x may alias y, so the
// compiler cannot hoist the next load above this store).
constexpr int kUnroll = 4;

// Calls f(pack) for the packs at begin, begin + step, ... below end, loading
// kUnroll packs before using any.
// Calls f(v, pack) for the packs at virtual elements begin, begin + step, ...
// below end, reading kUnroll packs before using any.
template <class T, int VEC, class F>
__device__ __forceinline__ void for_each_pack(const RowPacks<T, VEC>& row, std::int64_t begin,
                                              std::int64_t end, std::int64_t step, F&& f) {
  std::int64_t e = begin;
  for (; e + (kUnroll - 1) * step < end; e += kUnroll * step) {
    float v[kUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) row.read(e + u * step, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f(e + u * step, v[u]);
  }
  for (; e < end; e += step) {
    float v[VEC];
    row.read(e, v);
    f(e, v);
  }
}

// Writes exp(x - m) * inv over virtual elements [begin, end) of one row, VEC
// at a time, with `step` between one thread's packs. Each element is read
// before it is written, by the same thread: y may be x.
template <class T, int VEC>
__device__ __forceinline__ void normalize_range(const RowPacks<T, VEC>& row, std::int64_t begin,
                                                std::int64_t end, std::int64_t step, float m,
                                                float inv) {
  const float m_log2e = m * kLog2e;
  for_each_pack<T, VEC>(row, begin, end, step, [&](std::int64_t e, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = m == -INFINITY ? inv : exp_shifted(v[i], m_log2e) * inv;
    row.write(e, v);
  });
}

// --- naive: three passes -----------------------------------------------------

template <class T, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_naive(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                  std::int64_t y_stride) {
  __shared__ float sMax[kWarp];
  __shared__ float sSum[kWarp];
  const RowPacks<T, VEC> row(gX + static_cast<std::int64_t>(blockIdx.x) * x_stride,
                             gY + static_cast<std::int64_t>(blockIdx.x) * y_stride, cols);
  const std::int64_t begin = static_cast<std::int64_t>(threadIdx.x) * VEC;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * VEC;

  float m = -INFINITY;
  for_each_pack<T, VEC>(row, begin, row.end, step, [&](std::int64_t, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
  });
  m = block_reduce<Max>(m, sMax);

  const float m_log2e = m * kLog2e;
  float s = 0.0F;
  for_each_pack<T, VEC>(row, begin, row.end, step, [&](std::int64_t, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += exp_shifted(v[i], m_log2e);
  });
  s = block_reduce<Sum>(s, sSum);

  normalize_range<T, VEC>(row, begin, row.end, step, m, reciprocal_or_nan(m, s));
}

// --- online: max and sum in one pass -----------------------------------------

template <class T, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_online(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                   std::int64_t y_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const RowPacks<T, VEC> row(gX + static_cast<std::int64_t>(blockIdx.x) * x_stride,
                             gY + static_cast<std::int64_t>(blockIdx.x) * y_stride, cols);
  const std::int64_t begin = static_cast<std::int64_t>(threadIdx.x) * VEC;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * VEC;

  MaxSum acc{-INFINITY, 0.0F};
  for_each_pack<T, VEC>(row, begin, row.end, step,
                        [&](std::int64_t, float(&v)[VEC]) { acc = fold<VEC>(acc, v); });
  acc = block_merge(acc, sPartial);
  normalize_range<T, VEC>(row, begin, row.end, step, acc.m, reciprocal_or_nan(acc.m, acc.s));
}

// --- fused: the row in registers ---------------------------------------------

// How the threads that hold one row combine their values: a warp's
// shuffles, a block's shared memory, or (on compute capability 9.0 and
// later) a cluster's distributed shared memory.
struct WarpScope {
  static constexpr bool kMergesOnce = false;
  __device__ float max(float v) const { return warp_reduce<Max>(v); }
  __device__ float sum(float v) const { return warp_reduce<Sum>(v); }
};

struct BlockScope {
  static constexpr bool kMergesOnce = false;
  float* sMax;  // kWarp floats each
  float* sSum;
  __device__ float max(float v) const { return block_reduce<Max>(v, sMax); }
  __device__ float sum(float v) const { return block_reduce<Sum>(v, sSum); }
};

#if LOOM_SOFTMAX_CLUSTERS
// A cluster merges once (kMergesOnce): each block takes its own maximum m
// and its sum s of exp(x - m), then the blocks' (m, s) pairs are merged
// into the row's (M, S), and a block scales its exponentials by
// exp(m - M) / S. One exchange through distributed shared memory and two
// cluster barrier phases, the first split (arrived on at the kernel's
// start, waited for after the loads), where a maximum then a sum across
// the cluster took three whole barriers (the third kept a block alive
// until the others had read its part). Each block writes its pair into
// every block's shared memory, so that after the barrier each reads only
// its own: it may leave at once. Every block merges the pairs in rank
// order, so the row's (M, S) has the same bits in all.
struct ClusterScope {
  static constexpr bool kMergesOnce = true;
  BlockScope block;
  MaxSum* sParts;  // kClusterBlocks pairs, one a block of the cluster, by rank
  __device__ float max(float v) const { return block.max(v); }
  __device__ float sum(float v) const { return block.sum(v); }

  /// exp(m - M) / S for this block's (m, s), S unbiased (the sums' 2^24
  /// taken out, exactly): the block's exponentials are unbiased by a
  /// separate multiply (output_of), since exp(m - M) / S can be subnormal
  /// where a block's maximum lies far below the row's, and 2^-24 of it
  /// would flush outputs that are not. NaN where the whole row is -inf (as
  /// a block row gives). The kernel arrived on the cluster's barrier at its
  /// start: the wait here means every block of the cluster runs, so that
  /// its shared memory may be written.
  __device__ float scale(float m, float s) const {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.barrier_wait();
    if (threadIdx.x == 0) {
      const unsigned rank = cluster.block_rank();
      for (unsigned b = 0; b < cluster.num_blocks(); ++b) {
        cluster.map_shared_rank(sParts, b)[rank] = MaxSum{m, s};
      }
    }
    cluster.sync();
    MaxSum row{-INFINITY, 0.0F};
    for (unsigned b = 0; b < cluster.num_blocks(); ++b) row = merge(row, sParts[b]);
    if (row.m == -INFINITY) return __int_as_float(0x7FC00000);
    return rescale(m, row.m) / (row.s * kExpUnbias);
  }
};
#endif

// The exponentials' shift, m log2(e). Where a cluster's block holds only
// -inf its exponentials must be 0 (the row's maximum lies elsewhere), not
// exp(-inf - -inf): shifted by 0 instead.
template <class Scope>
__device__ __forceinline__ float shift_of(float m) {
  if constexpr (Scope::kMergesOnce) return m == -INFINITY ? 0.0F : m * kLog2e;
  return m * kLog2e;
}

// What the held exponentials are multiplied by: 1 / S, or (merging once)
// the cluster's scale.
template <class Scope>
__device__ __forceinline__ float factor_of(const Scope& scope, float m, float s) {
  if constexpr (Scope::kMergesOnce) {
    return scope.scale(m, s);
  } else {
    return reciprocal_or_nan(m, s);
  }
}

// An output from its (biased) exponential: a row of -inf gives NaN (the
// factor); merging once, its exponentials are 0 and the factor NaN already,
// and the factor unbiased (ClusterScope::scale): the exponential is
// unbiased first, exactly but where it is subnormal.
template <class Scope>
__device__ __forceinline__ float output_of(float e, float m, float factor) {
  if constexpr (Scope::kMergesOnce) return e * kExpUnbias * factor;
  return m == -INFINITY ? factor : e * factor;
}

// Virtual elements [first, last) of one row (RowPacks), held in registers by
// `lanes` threads, N elements a thread in packs of VEC: thread t holds the
// packs at first + (t, t + lanes, ...) * VEC. Elements outside the row are
// -inf (they add exp(-inf) = 0) and are not stored. `first` is a multiple
// of VEC.
template <class T, int N, int VEC, class Scope>
__device__ __forceinline__ void row_in_registers(const RowPacks<T, VEC>& row, std::int64_t first,
                                                 std::int64_t last, int lane, int lanes,
                                                 const Scope& scope) {
  static_assert(N % VEC == 0, "a thread holds whole packs");
  constexpr int kPacks = N / VEC;
  float v[N];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const std::int64_t e = first + (static_cast<std::int64_t>(k) * lanes + lane) * VEC;
    float p[VEC];
    if (e < last) {
      row.read(e, p);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) p[i] = -INFINITY;
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[k * VEC + i] = p[i];
  }
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < N; ++j) m = fmaxf(m, v[j]);
  m = scope.max(m);
  const float m_log2e = shift_of<Scope>(m);
  float s = 0.0F;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    v[j] = exp_shifted(v[j], m_log2e);
    s += v[j];
  }
  s = scope.sum(s);
  const float factor = factor_of(scope, m, s);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const std::int64_t e = first + (static_cast<std::int64_t>(k) * lanes + lane) * VEC;
    if (e < last) {
      float p[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) p[i] = output_of<Scope>(v[k * VEC + i], m, factor);
      row.write(e, p);
    }
  }
}

// row_in_registers for bf16 rows in packs of eight, kept as their 16-bit
// values, two to a register: half the registers of floats, so a thread holds
// twice the row and an SM twice the loads in flight. The exponential is
// computed twice (for the sum, then for the output), the same function of
// the same values, so the output is bit for bit the float path's.
template <int N, class Scope>
__device__ __forceinline__ void row_in_packed_registers(const RowPacks<bf16_bits, 8>& row,
                                                        std::int64_t first, std::int64_t last,
                                                        int lane, int lanes, const Scope& scope) {
  constexpr int kVec = 8;
  static_assert(N % kVec == 0, "a thread holds whole packs");
  constexpr int kPacks = N / kVec;
  constexpr unsigned kNegInfPair = kBf16NegInfBits | (kBf16NegInfBits << 16);
  // Offsets within the row fit 32 bits (a block or cluster row is at most
  // kClusterBlocks * kRegisterRowMax long): 64-bit ones, kept from the loads
  // to the stores, cost the registers that packing saves.
  const int base = static_cast<int>(first) + lane * kVec;
  const int step = lanes * kVec;
  const int stop = static_cast<int>(last);
  // Most threads hold only whole packs inside the row: plain 16-byte
  // accesses, no test a pack. The threads at the row's ends (its peeled head
  // and tail, or past it) take the general path.
  const bool inside = base >= row.shift && base + (kPacks - 1) * step + kVec <= stop;
  uint4 w[kPacks];
  if (inside) {
    const uint4* x = reinterpret_cast<const uint4*>(row.x + base);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) w[k] = x[k * lanes];
  } else {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int e = base + k * step;
      w[k] = e < stop ? row.read_bits(e)
                      : make_uint4(kNegInfPair, kNegInfPair, kNegInfPair, kNegInfPair);
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) m = fmaxf(m, bf16_of(w[k], i));
  }
  m = scope.max(m);
  const float m_log2e = shift_of<Scope>(m);
  float s = 0.0F;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    forget_derived(w[k]);
#pragma unroll
    for (int i = 0; i < kVec; ++i) s += exp_shifted(bf16_of(w[k], i), m_log2e);
  }
  s = scope.sum(s);
  const float factor = factor_of(scope, m, s);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) forget_derived(w[k]);
  const auto output = [&](int k, float(&p)[kVec]) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      p[i] = output_of<Scope>(exp_shifted(bf16_of(w[k], i), m_log2e), m, factor);
    }
  };
  if (inside) {
    bf16_bits* y = row.y + base;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      float p[kVec];
      output(k, p);
      store<bf16_bits, kVec>(y + k * step, p);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int e = base + k * step;
      if (e < stop) {
        float p[kVec];
        output(k, p);
        row.write(e, p);
      }
    }
  }
}

// The row held as floats, or (PACKED: bf16 in packs of eight) as bf16 pairs.
template <class T, int N, int VEC, bool PACKED, class Scope>
__device__ __forceinline__ void row_held(const RowPacks<T, VEC>& row, std::int64_t first,
                                         std::int64_t last, int lane, int lanes,
                                         const Scope& scope) {
  if constexpr (PACKED) {
    static_assert(std::is_same_v<T, bf16_bits> && VEC == 8, "packed rows are bf16 in packs of 8");
    row_in_packed_registers<N>(row, first, last, lane, lanes, scope);
  } else {
    row_in_registers<T, N, VEC>(row, first, last, lane, lanes, scope);
  }
}

template <class T, int N, int VEC>
__global__ void __launch_bounds__(kWarp* kWarpRowsPerBlock)
    softmax_warp_row(const T* gX, T* gY, std::int64_t rows, std::int64_t cols,
                     std::int64_t x_stride, std::int64_t y_stride) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpRowsPerBlock +
                         static_cast<int>(threadIdx.x) / kWarp;
  if (r >= rows) return;  // whole warps leave: the shuffles see full warps
  const RowPacks<T, VEC> row(gX + r * x_stride, gY + r * y_stride, cols);
  row_in_registers<T, N, VEC>(row, 0, row.end, static_cast<int>(threadIdx.x) % kWarp, kWarp,
                              WarpScope{});
}

template <class T, int N, int VEC, bool PACKED = false>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_block_row(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                      std::int64_t y_stride) {
  __shared__ float sMax[kWarp];
  __shared__ float sSum[kWarp];
  const std::int64_t r = blockIdx.x;
  const RowPacks<T, VEC> row(gX + r * x_stride, gY + r * y_stride, cols);
  row_held<T, N, VEC, PACKED>(row, 0, row.end, static_cast<int>(threadIdx.x),
                              static_cast<int>(blockDim.x), BlockScope{sMax, sSum});
}

// --- fused, long rows: a cluster of blocks a row ------------------------------

// Rows too long for one block's registers, held by a cluster of
// kClusterBlocks blocks: block b of a row's cluster holds its virtual
// elements [b * slice, (b + 1) * slice) (slice a multiple of VEC), and the
// row's maximum and sum are combined through distributed shared memory. The
// row is read once, as a block row is.

// A cluster block's shared memory, in one object so that the CPU emulation
// can give each block of a cluster its own (LOOM_CLUSTER_BLOCK_SHARED).
struct ClusterBlockShared {
  float max[kWarp];
  float sum[kWarp];
  MaxSum parts[kClusterBlocks];  // ClusterScope's: written by every block of the cluster
};

template <class T, int N, int VEC, bool PACKED = false>
__global__ void LOOM_SOFTMAX_CLUSTER_DIMS __launch_bounds__(kMaxThreads)
    softmax_cluster_row(const T* gX, T* gY, std::int64_t cols, std::int64_t slice,
                        std::int64_t x_stride, std::int64_t y_stride) {
#if LOOM_SOFTMAX_CLUSTERS
  LOOM_CLUSTER_BLOCK_SHARED(ClusterBlockShared, shared);
  cg::cluster_group cluster = cg::this_cluster();
  // Waited for in ClusterScope::scale, after the loads: by then every block
  // of the cluster runs and its shared memory may be written.
  (void)cluster.barrier_arrive();
  const std::int64_t r = blockIdx.x / kClusterBlocks;
  const RowPacks<T, VEC> row(gX + r * x_stride, gY + r * y_stride, cols);
  const std::int64_t first = static_cast<std::int64_t>(cluster.block_rank()) * slice;
  const std::int64_t last = first + slice < row.end ? first + slice : row.end;
  row_held<T, N, VEC, PACKED>(row, first, last, static_cast<int>(threadIdx.x),
                              static_cast<int>(blockDim.x),
                              ClusterScope{BlockScope{shared.max, shared.sum}, shared.parts});
  // Nothing to wait for at the end: after ClusterScope's barrier no block
  // touches another's shared memory.
#else
  __trap();  // never launched: the host picks this kernel on 9.0 and later only
#endif
}

// --- fused, a few long rows: split across blocks ------------------------------

// Block (c, r) folds chunk c of row r into one (max, sum) pair.
template <class T, int VEC>
__global__ void __launch_bounds__(kChunkThreads)
    softmax_split_partial(const T* gX, MaxSum* gPartial, std::int64_t cols, std::int64_t x_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const std::int64_t r = blockIdx.y;
  // Only read: the row's y is not used.
  const RowPacks<T, VEC> row(gX + r * x_stride, nullptr, cols);
  const std::int64_t chunk_begin = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t chunk_end = chunk_begin + kChunk < row.end ? chunk_begin + kChunk : row.end;
  MaxSum acc{-INFINITY, 0.0F};
  for_each_pack<T, VEC>(row, chunk_begin + static_cast<std::int64_t>(threadIdx.x) * VEC, chunk_end,
                        static_cast<std::int64_t>(blockDim.x) * VEC,
                        [&](std::int64_t, float(&v)[VEC]) { acc = fold<VEC>(acc, v); });
  acc = block_merge(acc, sPartial);
  if (threadIdx.x == 0) gPartial[r * gridDim.x + blockIdx.x] = acc;
}

// Block (c, r) merges row r's pairs, then writes chunk c.
template <class T, int VEC>
__global__ void __launch_bounds__(kChunkThreads)
    softmax_split_normalize(const T* gX, T* gY, const MaxSum* gPartial, std::int64_t cols,
                            std::int64_t x_stride, std::int64_t y_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const std::int64_t r = blockIdx.y;
  const unsigned chunks = gridDim.x;
  MaxSum acc{-INFINITY, 0.0F};
  for (unsigned c = threadIdx.x; c < chunks; c += blockDim.x) {
    acc = merge(acc, gPartial[r * chunks + c]);
  }
  acc = block_merge(acc, sPartial);
  const RowPacks<T, VEC> row(gX + r * x_stride, gY + r * y_stride, cols);
  const std::int64_t chunk_begin = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t chunk_end = chunk_begin + kChunk < row.end ? chunk_begin + kChunk : row.end;
  normalize_range<T, VEC>(row, chunk_begin + static_cast<std::int64_t>(threadIdx.x) * VEC,
                          chunk_end, static_cast<std::int64_t>(blockDim.x) * VEC, acc.m,
                          reciprocal_or_nan(acc.m, acc.s));
}

}  // namespace
}  // namespace loom::kernels::softmax_detail
