#pragma once
// What the index kernels and their CPU references share, host and device:
// the offsets of a walk's element and argmax's rule for a winner, so that
// both backends give the same answer by construction.

#include "index/index.hpp"

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_INDEX_FN __host__ __device__ __forceinline__
#else
#define LOOM_INDEX_FN inline
#endif

namespace loom::kernels::index_detail {

/// q = n / d and r = n % d for n >= 0, d > 0: in 32 bits where both fit,
/// which is several times cheaper than a 64-bit division on a GPU.
LOOM_INDEX_FN void divide(std::int64_t n, std::int64_t d, std::int64_t& q, std::int64_t& r) {
  if (((n | d) >> 32) == 0) {
    const auto n32 = static_cast<std::uint32_t>(n);
    const auto d32 = static_cast<std::uint32_t>(d);
    q = n32 / d32;
    r = n32 - static_cast<std::uint32_t>(q) * d32;
  } else {
    q = n / d;
    r = n - q * d;
  }
}

/// The offset of element i of the walk in each operand. The loop is
/// unrolled over kIndexMaxRank so that the extents and strides stay in
/// registers and parameter space (no local-memory copy of the arrays).
LOOM_INDEX_FN void walk_offsets(const IndexWalk& w, std::int64_t i,
                                std::int64_t (&offset)[kWalkOperands]) {
  for (int k = 0; k < kWalkOperands; ++k) offset[k] = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int d = kIndexMaxRank - 1; d >= 0; --d) {
    if (d < w.rank) {
      // The outermost extent needs no division: what is left is its coordinate.
      std::int64_t c = i;
      if (d != 0) divide(i, w.extent[d], i, c);
      for (int k = 0; k < kWalkOperands; ++k) offset[k] += c * w.stride[k][d];
    }
  }
}

/// A candidate of argmax/argmin: its value (f32; f16 and bf16 widen exactly)
/// and its index along the reduced dimension.
struct Candidate {
  float value;
  std::int64_t index;
};

LOOM_INDEX_FN bool is_nan(float v) { return v != v; }

/// Whether `a` beats `b`: a NaN beats every number; between numbers the
/// larger (max) or smaller (min) wins; otherwise (equal numbers, or two
/// NaNs) the lower index. A total order on distinct indices, so the winner
/// of a set does not depend on the order it is folded in.
template <bool kMax>
LOOM_INDEX_FN bool beats(const Candidate& a, const Candidate& b) {
  const bool a_nan = is_nan(a.value);
  const bool b_nan = is_nan(b.value);
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a.value != b.value) return kMax ? a.value > b.value : a.value < b.value;
  return a.index < b.index;
}

/// The 32-bit pattern NaN units repeat: every 2- or 4-byte lane of it is the
/// canonical NaN of an element of that size (f16 and bf16 share 0x7FFF).
inline constexpr std::uint32_t kNanWord4 = 0x7FFFFFFFU;
inline constexpr std::uint32_t kNanWord2 = 0x7FFF7FFFU;

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The walk in 16-byte units when the innermost dimension allows it: out and
// x contiguous along it, index constant along it, and every offset a
// multiple of 16 bytes. Returns false (walk untouched) otherwise.
inline bool widen_to_16_bytes(const void* x, const void* out, int element_bytes, IndexedWalk& w) {
  const int r = w.walk.rank;
  const std::int64_t per = 16 / element_bytes;
  if (r == 0 || !aligned16(x) || !aligned16(out)) return false;
  const int last = r - 1;
  if (w.walk.stride[kGatherOut][last] != 1 || w.walk.stride[kGatherX][last] != 1 ||
      w.walk.stride[kGatherIndex][last] != 0 || w.walk.extent[last] % per != 0 ||
      w.indexed_stride % per != 0) {
    return false;
  }
  for (int d = 0; d < last; ++d) {
    if (w.walk.stride[kGatherOut][d] % per != 0 || w.walk.stride[kGatherX][d] % per != 0) {
      return false;
    }
  }
  for (int d = 0; d < last; ++d) {
    w.walk.stride[kGatherOut][d] /= per;
    w.walk.stride[kGatherX][d] /= per;
  }
  w.walk.extent[last] /= per;
  w.walk.count /= per;
  w.indexed_stride /= per;
  return true;
}

}  // namespace loom::kernels::index_detail

#undef LOOM_INDEX_FN
