// argmax and argmin along a dimension on the GPU. With the reduced
// dimension contiguous (and 32 long at least), a warp takes a row: its lanes read consecutive
// elements (coalesced), several loads in flight each, and fold their
// candidates through shuffles. Elsewhere a thread takes an output and walks
// its row; neighbouring outputs are neighbouring elements of x when an
// outer dimension is contiguous, so a warp's loads coalesce across them.
#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "index/index.hpp"
#include "index/walk.hpp"

#include <loom/error.hpp>

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace loom::kernels {
namespace {

using index_detail::beats;
using index_detail::Candidate;
using index_detail::walk_offsets;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerBlock = kThreads / 32;
constexpr std::int64_t kMaxBlocks = 16384;
constexpr int kUnroll = 4;  // loads in flight per lane in the warp kernel
constexpr unsigned kFullMask = 0xFFFFFFFFU;

// How each dtype is read (widened exactly to f32) and written back.
struct F32 {
  using Bits = float;
  static constexpr int kPerWord = 1;
  static __device__ __forceinline__ float widen(float v) { return v; }
  static __device__ __forceinline__ float narrow(float v) { return v; }
  // The better of two words' elements, a NaN winning (max.NaN / min.NaN).
  template <bool kMax>
  static __device__ __forceinline__ std::uint32_t best(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    if constexpr (kMax) {
      asm("max.NaN.f32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.f32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
    return r;
  }
  static __device__ __forceinline__ float widen_word(std::uint32_t w) { return __uint_as_float(w); }
};
struct F16 {
  using Bits = std::uint16_t;
  static constexpr int kPerWord = 2;
  static __device__ __forceinline__ float widen(std::uint16_t b) {
    return __half2float(__ushort_as_half(b));  // one instruction, the same bits as convert.hpp
  }
  static __device__ __forceinline__ std::uint16_t narrow(float v) { return f32_to_f16_bits(v); }
  // Both halves at once: the better of a's and b's low halves, and of their high ones.
  template <bool kMax>
  static __device__ __forceinline__ std::uint32_t best(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    if constexpr (kMax) {
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
    return r;
  }
};
struct Bf16 {
  using Bits = std::uint16_t;
  static constexpr int kPerWord = 2;
  static __device__ __forceinline__ float widen(std::uint16_t b) { return bf16_bits_to_f32(b); }
  static __device__ __forceinline__ std::uint16_t narrow(float v) { return f32_to_bf16_bits(v); }
  template <bool kMax>
  static __device__ __forceinline__ std::uint32_t best(std::uint32_t a, std::uint32_t b) {
    std::uint32_t r;
    if constexpr (kMax) {
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
    return r;
  }
};

template <class Load, bool kMax>
__global__ void arg_reduce_threads(const typename Load::Bits* __restrict__ x,
                                   std::int64_t* __restrict__ indices,
                                   typename Load::Bits* __restrict__ values, ArgReduceShape s) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       o < s.outputs.count; o += step) {
    std::int64_t off[kWalkOperands];
    walk_offsets(s.outputs, o, off);
    const typename Load::Bits* row = x + off[kArgX];
    Candidate best{Load::widen(row[0]), 0};
    for (std::int64_t k = 1; k < s.reduced; ++k) {
      const Candidate c{Load::widen(row[k * s.reduced_stride]), k};
      if (beats<kMax>(c, best)) best = c;
    }
    indices[off[kArgIndices]] = best.index;
    if (values != nullptr) values[off[kArgValues]] = Load::narrow(best.value);
  }
}

// Loses to every real candidate (a real one ties its value at worst, and
// has the lower index), so lanes past the row's end can fold it freely.
template <bool kMax>
__device__ __forceinline__ Candidate no_candidate() {
  const float worst = kMax ? -INFINITY : INFINITY;
  return Candidate{worst, std::numeric_limits<std::int64_t>::max()};
}

template <bool kMax>
__device__ __forceinline__ Candidate warp_winner(Candidate best) {
#pragma unroll
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
    const Candidate other{__shfl_xor_sync(kFullMask, best.value, lane_mask),
                          __shfl_xor_sync(kFullMask, best.index, lane_mask)};
    if (beats<kMax>(other, best)) best = other;
  }
  return best;
}

// The best element of a 16-byte vector, widened: the four words folded
// pairwise, then (16-bit types) the pair's two halves.
template <class Load, bool kMax>
__device__ __forceinline__ float vector_best(const uint4& v) {
  const std::uint32_t w = Load::template best<kMax>(Load::template best<kMax>(v.x, v.y),
                                                    Load::template best<kMax>(v.z, v.w));
  if constexpr (Load::kPerWord == 1) {
    return Load::widen_word(w);
  } else {
    const std::uint32_t halves = Load::template best<kMax>(w, __funnelshift_l(w, w, 16));
    return Load::widen(static_cast<typename Load::Bits>(halves & 0xFFFFU));
  }
}

// Whether `v`, at a later index than `best`, beats it (beats() for a later
// index: a strictly better value, or the first NaN).
template <bool kMax>
__device__ __forceinline__ bool later_beats(float v, float best) {
  const bool better = kMax ? v > best : v < best;
  return better || (v != v && best == best);
}

// A contiguous row's winner among its whole 16-byte vectors, for one lane
// (lane l takes vectors l, l + 32, ...; kUnroll loads in flight): the lane
// keeps the best vector value (a NaN-propagating max or min, two 16-bit
// elements an instruction) and the first vector that reached it, and finds
// the element inside that vector once, at the end. An element-by-element
// fold costs several instructions an element, more than memory leaves at
// 2 bytes an element (bf16 argmax ran at 0.30 of a copy, f32 at 0.62).
template <class Load, bool kMax>
__device__ __forceinline__ Candidate lane_best_of_vectors(const uint4* vectors, std::int64_t count,
                                                          std::int64_t first_index, unsigned lane) {
  constexpr int kV = 16 / static_cast<int>(sizeof(typename Load::Bits));
  float run = kMax ? -INFINITY : INFINITY;
  std::int64_t run_vector = -1;
  for (std::int64_t j0 = lane; j0 < count; j0 += 32 * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t j = j0 + u * 32;
      if (j < count) v[u] = vectors[j];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t j = j0 + u * 32;
      if (j < count) {
        const float m = vector_best<Load, kMax>(v[u]);
        if (run_vector < 0 || later_beats<kMax>(m, run)) {
          run = m;
          run_vector = j;
        }
      }
    }
  }
  if (run_vector < 0) return no_candidate<kMax>();
  // The first element of the winning vector that equals its best (or is a NaN).
  const uint4 w = vectors[run_vector];
  typename Load::Bits elements[kV];
  static_assert(sizeof(elements) == sizeof(w), "a vector is 16 bytes");
  memcpy(elements, &w, sizeof(w));
  int at = kV - 1;
#pragma unroll
  for (int e = kV - 1; e >= 0; --e) {
    const float x = Load::widen(elements[e]);
    if (x == run || (x != x && run != run)) at = e;
  }
  // The element's own value: a NaN keeps its bits (the packed max gives the canonical NaN).
  return Candidate{Load::widen(elements[at]), first_index + run_vector * kV + at};
}

// One row a warp; the row loop is warp-uniform, so every lane shuffles.
// Rows with the reduced dimension contiguous take whole 16-byte vectors
// (elements before the first aligned one and after the last whole one one
// at a time); others, one element a lane at a time.
template <class Load, bool kMax>
__global__ void arg_reduce_warps(const typename Load::Bits* __restrict__ x,
                                 std::int64_t* __restrict__ indices,
                                 typename Load::Bits* __restrict__ values, ArgReduceShape s) {
  using Bits = typename Load::Bits;
  constexpr int kV = 16 / static_cast<int>(sizeof(Bits));
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t warp =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t o = warp; o < s.outputs.count; o += warps) {
    std::int64_t off[kWalkOperands];
    walk_offsets(s.outputs, o, off);
    const Bits* row = x + off[kArgX];
    Candidate best = no_candidate<kMax>();
    const auto fold = [&](std::int64_t k) {
      const Candidate c{Load::widen(row[k * s.reduced_stride]), k};
      if (beats<kMax>(c, best)) best = c;
    };
    if (s.reduced_stride == 1) {
      const auto address = reinterpret_cast<std::uintptr_t>(row);
      const std::int64_t head =
          std::min<std::int64_t>(s.reduced, static_cast<std::int64_t>((16 - address % 16) % 16) /
                                                static_cast<std::int64_t>(sizeof(Bits)));
      const std::int64_t count = (s.reduced - head) / kV;
      const std::int64_t tail = head + count * kV;
      if (static_cast<std::int64_t>(lane) < head) fold(lane);
      if (tail + lane < s.reduced) fold(tail + lane);
      const Candidate c = lane_best_of_vectors<Load, kMax>(
          reinterpret_cast<const uint4*>(row + head), count, head, lane);
      if (beats<kMax>(c, best)) best = c;
    } else {
      for (std::int64_t k0 = lane; k0 < s.reduced; k0 += 32 * kUnroll) {
        Bits bits[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const std::int64_t k = k0 + u * 32;
          if (k < s.reduced) bits[u] = row[k * s.reduced_stride];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const std::int64_t k = k0 + u * 32;
          if (k < s.reduced) {
            const Candidate c{Load::widen(bits[u]), k};
            if (beats<kMax>(c, best)) best = c;
          }
        }
      }
    }
    best = warp_winner<kMax>(best);
    if (lane == 0) {
      indices[off[kArgIndices]] = best.index;
      if (values != nullptr) values[off[kArgValues]] = Load::narrow(best.value);
    }
  }
}

// A warp a row pays off where its lanes read neighbours (the reduced
// dimension contiguous) and a row fills them, or where no layout coalesces
// and rows are long; a thread an output otherwise (short contiguous rows
// too: a warp's threads then read neighbouring rows, a span of memory).
bool warp_per_row(const ArgReduceShape& s) {
  if (s.reduced_stride == 1 && s.reduced >= 32) return true;
  const int r = s.outputs.rank;
  const bool outputs_coalesce = r > 0 && s.outputs.stride[kArgX][r - 1] == 1;
  return !outputs_coalesce && s.reduced >= 256;
}

unsigned blocks_for(std::int64_t threads) {
  return static_cast<unsigned>(std::min(kMaxBlocks, (threads + kThreads - 1) / kThreads));
}

template <class Load, bool kMax>
void launch_arg_reduce(const void* x, std::int64_t* indices, void* values, const ArgReduceShape& s,
                       StreamView stream) {
  using Bits = typename Load::Bits;
  const auto* in = static_cast<const Bits*>(x);
  auto* out = static_cast<Bits*>(values);
  if (warp_per_row(s)) {
    detail::launch_on_stream(stream.native(), arg_reduce_warps<Load, kMax>,
                             dim3(blocks_for(s.outputs.count * 32)), dim3(kThreads), 0, in, indices,
                             out, s);
  } else {
    detail::launch_on_stream(stream.native(), arg_reduce_threads<Load, kMax>,
                             dim3(blocks_for(s.outputs.count)), dim3(kThreads), 0, in, indices, out,
                             s);
  }
}

template <class Load>
void launch_for_op(ArgReduce op, const void* x, std::int64_t* indices, void* values,
                   const ArgReduceShape& s, StreamView stream) {
  if (op == ArgReduce::max) {
    launch_arg_reduce<Load, true>(x, indices, values, s, stream);
  } else {
    launch_arg_reduce<Load, false>(x, indices, values, s, stream);
  }
}

}  // namespace

void arg_reduce(ArgReduce op, const void* x, DType dtype, std::int64_t* indices, void* values,
                const ArgReduceShape& shape, StreamView stream) {
  if (shape.outputs.count == 0) return;
  if (shape.reduced < 1) throw InvalidArgument("arg_reduce: a row of no elements has no winner");
  switch (dtype) {
    case DType::f32: launch_for_op<F32>(op, x, indices, values, shape, stream); break;
    case DType::f16: launch_for_op<F16>(op, x, indices, values, shape, stream); break;
    case DType::bf16: launch_for_op<Bf16>(op, x, indices, values, shape, stream); break;
    default:
      throw InvalidArgument("arg_reduce: dtype must be f32, f16 or bf16, got " +
                            std::string(to_string(dtype)));
  }
  LOOM_KERNEL_CHECK_LAUNCH(op == ArgReduce::max ? "argmax" : "argmin");
}

}  // namespace loom::kernels
