#include "softmax/softmax.hpp"

#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::kernels {
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
// fused, rows longer than kRegisterRowMax: fewer rows than this split each
// row into chunks across blocks; more take a block a row.
constexpr std::int64_t kSplitBelowRows = 256;
constexpr std::int64_t kChunk = 8192;
constexpr int kChunkThreads = 256;
constexpr int kPassThreads = 512;  // naive and online

// --- element access ----------------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16_bits v) { return bf16_bits_to_f32(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16_bits from_float<bf16_bits>(float v) {
  return f32_to_bf16_bits(v);
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
        w[i] = static_cast<unsigned>(from_float<bf16_bits>(in[2 * i])) |
               (static_cast<unsigned>(from_float<bf16_bits>(in[2 * i + 1])) << 16);
      }
    }
    __stwb(reinterpret_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) p[i] = from_float<T>(in[i]);
  }
}

__device__ __forceinline__ float exp_shifted(float v, float m_log2e) {
  return exp2f(fmaf(v, kLog2e, -m_log2e));
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

// exp(from - to), exactly 1 when the maximum did not move: exp_shifted(m, m)
// is 1 only to within an ulp, and a running sum rescaled by it pack after
// pack would drift by that ulp each time.
__device__ __forceinline__ float rescale(float from, float to) {
  return from == to ? 1.0F : exp_shifted(from, to * kLog2e);
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0F};  // both empty: exp(-inf - -inf) would be NaN
  return {m, a.s * rescale(a.m, m) + b.s * rescale(b.m, m)};
}

// Folds VEC values into the pair: one rescale a pack, not one an element.
template <int VEC>
__device__ __forceinline__ MaxSum fold(MaxSum acc, const float (&v)[VEC]) {
  float m = acc.m;
#pragma unroll
  for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
  if (m == -INFINITY) return acc;
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
template <class T, int VEC, class F>
__device__ __forceinline__ void for_each_pack(const T* xr, std::int64_t begin, std::int64_t end,
                                              std::int64_t step, F&& f) {
  std::int64_t e = begin;
  for (; e + (kUnroll - 1) * step < end; e += kUnroll * step) {
    float v[kUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load<T, VEC>(xr + e + u * step, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f(e + u * step, v[u]);
  }
  for (; e < end; e += step) {
    float v[VEC];
    load<T, VEC>(xr + e, v);
    f(e, v);
  }
}

// Writes exp(x - m) * inv over [begin, end) of one row, VEC at a time, with
// `step` between one thread's packs. Each element is read before it is
// written, by the same thread: y may be x.
template <class T, int VEC>
__device__ __forceinline__ void normalize_range(const T* xr, T* yr, std::int64_t begin,
                                                std::int64_t end, std::int64_t step, float m,
                                                float inv) {
  const float m_log2e = m * kLog2e;
  for_each_pack<T, VEC>(xr, begin, end, step, [&](std::int64_t e, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = m == -INFINITY ? inv : exp_shifted(v[i], m_log2e) * inv;
    store<T, VEC>(yr + e, v);
  });
}

// --- naive: three passes -----------------------------------------------------

template <class T, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_naive(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                  std::int64_t y_stride) {
  __shared__ float sMax[kWarp];
  __shared__ float sSum[kWarp];
  const T* xr = gX + static_cast<std::int64_t>(blockIdx.x) * x_stride;
  T* yr = gY + static_cast<std::int64_t>(blockIdx.x) * y_stride;
  const std::int64_t begin = static_cast<std::int64_t>(threadIdx.x) * VEC;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * VEC;

  float m = -INFINITY;
  for_each_pack<T, VEC>(xr, begin, cols, step, [&](std::int64_t, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
  });
  m = block_reduce<Max>(m, sMax);

  const float m_log2e = m * kLog2e;
  float s = 0.0F;
  for_each_pack<T, VEC>(xr, begin, cols, step, [&](std::int64_t, float(&v)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += exp_shifted(v[i], m_log2e);
  });
  s = block_reduce<Sum>(s, sSum);

  normalize_range<T, VEC>(xr, yr, begin, cols, step, m, reciprocal_or_nan(m, s));
}

// --- online: max and sum in one pass -----------------------------------------

template <class T, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_online(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                   std::int64_t y_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const T* xr = gX + static_cast<std::int64_t>(blockIdx.x) * x_stride;
  T* yr = gY + static_cast<std::int64_t>(blockIdx.x) * y_stride;
  const std::int64_t begin = static_cast<std::int64_t>(threadIdx.x) * VEC;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * VEC;

  MaxSum acc{-INFINITY, 0.0F};
  for_each_pack<T, VEC>(xr, begin, cols, step,
                        [&](std::int64_t, float(&v)[VEC]) { acc = fold<VEC>(acc, v); });
  acc = block_merge(acc, sPartial);
  normalize_range<T, VEC>(xr, yr, begin, cols, step, acc.m, reciprocal_or_nan(acc.m, acc.s));
}

// --- fused: the row in registers ---------------------------------------------

// One row held in registers by `lanes` threads (a warp, or a block), N
// elements a thread in packs of VEC: thread t holds packs t, t + lanes, ...
// Elements past the row are -inf (they add exp(-inf) = 0) and are not stored.
template <class T, int N, int VEC, bool kWholeBlock>
__device__ __forceinline__ void row_in_registers(const T* xr, T* yr, std::int64_t cols, int lane,
                                                 int lanes, float* sMax, float* sSum) {
  static_assert(N % VEC == 0, "a thread holds whole packs");
  constexpr int kPacks = N / VEC;
  float v[N];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const std::int64_t e = (static_cast<std::int64_t>(k) * lanes + lane) * VEC;
    float p[VEC];
    if (e < cols) {
      load<T, VEC>(xr + e, p);
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
  if constexpr (kWholeBlock) {
    m = block_reduce<Max>(m, sMax);
  } else {
    m = warp_reduce<Max>(m);  // no barrier: warps of finished rows have left
  }
  const float m_log2e = m * kLog2e;
  float s = 0.0F;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    v[j] = exp_shifted(v[j], m_log2e);
    s += v[j];
  }
  if constexpr (kWholeBlock) {
    s = block_reduce<Sum>(s, sSum);
  } else {
    s = warp_reduce<Sum>(s);
  }
  const float inv = reciprocal_or_nan(m, s);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const std::int64_t e = (static_cast<std::int64_t>(k) * lanes + lane) * VEC;
    if (e < cols) {
      float p[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) p[i] = m == -INFINITY ? inv : v[k * VEC + i] * inv;
      store<T, VEC>(yr + e, p);
    }
  }
}

template <class T, int N, int VEC>
__global__ void __launch_bounds__(kWarp* kWarpRowsPerBlock)
    softmax_warp_row(const T* gX, T* gY, std::int64_t rows, std::int64_t cols,
                     std::int64_t x_stride, std::int64_t y_stride) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpRowsPerBlock +
                           static_cast<int>(threadIdx.x) / kWarp;
  if (row >= rows) return;  // whole warps leave: the shuffles see full warps
  row_in_registers<T, N, VEC, false>(gX + row * x_stride, gY + row * y_stride, cols,
                                     static_cast<int>(threadIdx.x) % kWarp, kWarp, nullptr,
                                     nullptr);
}

template <class T, int N, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_block_row(const T* gX, T* gY, std::int64_t cols, std::int64_t x_stride,
                      std::int64_t y_stride) {
  __shared__ float sMax[kWarp];
  __shared__ float sSum[kWarp];
  const std::int64_t row = blockIdx.x;
  row_in_registers<T, N, VEC, true>(gX + row * x_stride, gY + row * y_stride, cols,
                                    static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
                                    sMax, sSum);
}

// --- fused, a few long rows: split across blocks ------------------------------

// Block (c, r) folds chunk c of row r into one (max, sum) pair.
template <class T, int VEC>
__global__ void __launch_bounds__(kChunkThreads)
    softmax_split_partial(const T* gX, MaxSum* gPartial, std::int64_t cols, std::int64_t x_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const std::int64_t row = blockIdx.y;
  const std::int64_t chunk_begin = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t chunk_end = min(chunk_begin + kChunk, cols);
  const T* xr = gX + row * x_stride;
  MaxSum acc{-INFINITY, 0.0F};
  for_each_pack<T, VEC>(xr, chunk_begin + static_cast<std::int64_t>(threadIdx.x) * VEC, chunk_end,
                        static_cast<std::int64_t>(blockDim.x) * VEC,
                        [&](std::int64_t, float(&v)[VEC]) { acc = fold<VEC>(acc, v); });
  acc = block_merge(acc, sPartial);
  if (threadIdx.x == 0) gPartial[row * gridDim.x + blockIdx.x] = acc;
}

// Block (c, r) merges row r's pairs, then writes chunk c.
template <class T, int VEC>
__global__ void __launch_bounds__(kChunkThreads)
    softmax_split_normalize(const T* gX, T* gY, const MaxSum* gPartial, std::int64_t cols,
                            std::int64_t x_stride, std::int64_t y_stride) {
  __shared__ MaxSum sPartial[kWarp];
  const std::int64_t row = blockIdx.y;
  const unsigned chunks = gridDim.x;
  MaxSum acc{-INFINITY, 0.0F};
  for (unsigned c = threadIdx.x; c < chunks; c += blockDim.x) {
    acc = merge(acc, gPartial[row * chunks + c]);
  }
  acc = block_merge(acc, sPartial);
  const std::int64_t chunk_begin = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t chunk_end = min(chunk_begin + kChunk, cols);
  normalize_range<T, VEC>(gX + row * x_stride, gY + row * y_stride,
                          chunk_begin + static_cast<std::int64_t>(threadIdx.x) * VEC, chunk_end,
                          static_cast<std::int64_t>(blockDim.x) * VEC, acc.m,
                          reciprocal_or_nan(acc.m, acc.s));
}

// --- host side ---------------------------------------------------------------

template <class T>
constexpr int kWide = kVectorBytes / static_cast<int>(sizeof(T));

SoftmaxVariant resolved(SoftmaxVariant variant) {
  return variant == SoftmaxVariant::automatic ? kSoftmaxDefault : variant;
}

bool is_split(const SoftmaxShape& s, SoftmaxVariant variant) {
  return resolved(variant) == SoftmaxVariant::fused && s.cols > kRegisterRowMax &&
         s.rows < kSplitBelowRows;
}

std::int64_t chunks_of(const SoftmaxShape& s) { return (s.cols + kChunk - 1) / kChunk; }

template <class T>
bool can_vectorize(const void* x, const void* y, const SoftmaxShape& s) {
  constexpr int kVec = kWide<T>;
  const auto aligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0;
  };
  return aligned(x) && aligned(y) && s.cols % kVec == 0 && s.x_row_stride % kVec == 0 &&
         s.y_row_stride % kVec == 0;
}

unsigned threads_for(std::int64_t items, int cap) {
  const std::int64_t warps = (items + kWarp - 1) / kWarp;
  return static_cast<unsigned>(std::clamp<std::int64_t>(warps * kWarp, kWarp, cap));
}

// Calls f(std::integral_constant<int, VEC>) with VEC the wide pack or 1.
template <class T, class F>
void with_vec(bool wide, F&& f) {
  if (wide) {
    f(std::integral_constant<int, kWide<T>>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

template <class T, int N>
void launch_warp_row(const T* x, T* y, const SoftmaxShape& s, bool wide, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((s.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
  // A pack wider than a thread's share is no use: such rows run scalar.
  if constexpr (N >= kWide<T>) {
    if (wide) {
      loom::detail::launch_on_stream(stream, softmax_warp_row<T, N, kWide<T>>, blocks,
                                     kWarp * kWarpRowsPerBlock, 0, x, y, s.rows, s.cols,
                                     s.x_row_stride, s.y_row_stride);
      return;
    }
  }
  loom::detail::launch_on_stream(stream, softmax_warp_row<T, N, 1>, blocks,
                                 kWarp * kWarpRowsPerBlock, 0, x, y, s.rows, s.cols, s.x_row_stride,
                                 s.y_row_stride);
}

template <class T, int N>
void launch_block_row(const T* x, T* y, const SoftmaxShape& s, bool wide, cudaStream_t stream) {
  const unsigned threads = threads_for((s.cols + N - 1) / N, kMaxThreads);
  const auto blocks = static_cast<unsigned>(s.rows);
  with_vec<T>(wide, [&](auto vec) {
    loom::detail::launch_on_stream(stream, softmax_block_row<T, N, decltype(vec)::value>, blocks,
                                   threads, 0, x, y, s.cols, s.x_row_stride, s.y_row_stride);
  });
}

// Dynamic shared memory that leaves room for one block an SM only.
int one_block_per_sm_bytes() {
  int device = 0;
  int per_sm = 0;
  int per_block = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  LOOM_KERNEL_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  LOOM_KERNEL_CHECK(
      cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // Static shared memory (the reduction's partials) counts too: stay below.
  constexpr int kStatic = 1024;
  return std::min(per_sm / 2 + 1, per_block - kStatic);
}

template <class T>
void launch_fused(const T* x, T* y, const SoftmaxShape& s, void* workspace, bool wide,
                  cudaStream_t stream) {
  const std::int64_t cols = s.cols;
  if (cols <= kWarpRowMax) {
    // The smallest power-of-two share per lane that holds the row.
    if (cols <= 1 * kWarp) return launch_warp_row<T, 1>(x, y, s, wide, stream);
    if (cols <= 2 * kWarp) return launch_warp_row<T, 2>(x, y, s, wide, stream);
    if (cols <= 4 * kWarp) return launch_warp_row<T, 4>(x, y, s, wide, stream);
    if (cols <= 8 * kWarp) return launch_warp_row<T, 8>(x, y, s, wide, stream);
    if (cols <= 16 * kWarp) return launch_warp_row<T, 16>(x, y, s, wide, stream);
    return launch_warp_row<T, 32>(x, y, s, wide, stream);
  }
  if (cols <= kRegisterRowMax) {
    // At most 512 threads while that suffices: two blocks an SM, one
    // reducing while the other loads.
    if (cols <= 8 * 512) return launch_block_row<T, 8>(x, y, s, wide, stream);
    if (cols <= 16 * 512) return launch_block_row<T, 16>(x, y, s, wide, stream);
    return launch_block_row<T, 32>(x, y, s, wide, stream);
  }
  if (!is_split(s, SoftmaxVariant::fused)) {
    // One 1024-thread block a row and one block an SM (it reserves more than
    // half the SM's shared memory, unused): the rows in flight (132 x cols
    // elements, 34 MB for 65536 fp32 columns) stay in L2 for the second read.
    with_vec<T>(wide, [&](auto vec) {
      const auto kernel = softmax_online<T, decltype(vec)::value>;
      const int reserve = one_block_per_sm_bytes();
      LOOM_KERNEL_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, reserve));
      loom::detail::launch_on_stream(stream, kernel, static_cast<unsigned>(s.rows), kMaxThreads,
                                     static_cast<std::size_t>(reserve), x, y, cols, s.x_row_stride,
                                     s.y_row_stride);
    });
    return;
  }
  const dim3 grid(static_cast<unsigned>(chunks_of(s)), static_cast<unsigned>(s.rows));
  auto* partial = static_cast<MaxSum*>(workspace);
  with_vec<T>(wide, [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    loom::detail::launch_on_stream(stream, softmax_split_partial<T, kVec>, grid, kChunkThreads, 0,
                                   x, partial, cols, s.x_row_stride);
    LOOM_KERNEL_CHECK_LAUNCH("softmax split-row partial kernel launch");
    loom::detail::launch_on_stream(stream, softmax_split_normalize<T, kVec>, grid, kChunkThreads, 0,
                                   x, y, partial, cols, s.x_row_stride, s.y_row_stride);
  });
}

template <class T>
void launch(const void* xv, void* yv, const SoftmaxShape& s, void* workspace,
            SoftmaxVariant variant, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(xv);
  auto* y = static_cast<T*>(yv);
  const bool wide = can_vectorize<T>(xv, yv, s);
  const auto blocks = static_cast<unsigned>(s.rows);
  const unsigned threads = threads_for((s.cols + kWide<T> - 1) / kWide<T>, kPassThreads);
  switch (resolved(variant)) {
    case SoftmaxVariant::automatic:  // resolved: never here
    case SoftmaxVariant::naive:
      with_vec<T>(wide, [&](auto vec) {
        loom::detail::launch_on_stream(stream, softmax_naive<T, decltype(vec)::value>, blocks,
                                       threads, 0, x, y, s.cols, s.x_row_stride, s.y_row_stride);
      });
      break;
    case SoftmaxVariant::online:
      with_vec<T>(wide, [&](auto vec) {
        loom::detail::launch_on_stream(stream, softmax_online<T, decltype(vec)::value>, blocks,
                                       threads, 0, x, y, s.cols, s.x_row_stride, s.y_row_stride);
      });
      break;
    case SoftmaxVariant::fused: launch_fused<T>(x, y, s, workspace, wide, stream); break;
  }
}

[[noreturn]] void reject_dtype(DType dtype) {
  throw InvalidArgument("softmax: dtype must be f32 or bf16, got " + std::string(to_string(dtype)));
}

}  // namespace

std::size_t softmax_workspace_bytes(const SoftmaxShape& shape, SoftmaxVariant variant) noexcept {
  if (shape.rows <= 0 || shape.cols <= 0 || !is_split(shape, variant)) return 0;
  return static_cast<std::size_t>(shape.rows * chunks_of(shape)) * sizeof(MaxSum);
}

void softmax(const void* x, void* y, DType dtype, const SoftmaxShape& shape, void* workspace,
             StreamView stream, SoftmaxVariant variant) {
  if (dtype != DType::f32 && dtype != DType::bf16) reject_dtype(dtype);
  if (shape.rows <= 0 || shape.cols <= 0) return;
  if (dtype == DType::f32) {
    launch<float>(x, y, shape, workspace, variant, stream);
  } else {
    launch<bf16_bits>(x, y, shape, workspace, variant, stream);
  }
  LOOM_KERNEL_CHECK_LAUNCH("softmax kernel launch");
}

}  // namespace loom::kernels
