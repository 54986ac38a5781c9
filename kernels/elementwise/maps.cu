#include "elementwise/maps.hpp"

#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "elementwise/maps_dispatch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr int kBlocksPerSm = 8;  // grid_stride and strided: enough resident warps to hide latency
constexpr int kVectorBytes = 16;

template <DType D>
struct DeviceType;
template <>
struct DeviceType<DType::f32> {
  using type = float;
};
template <>
struct DeviceType<DType::f16> {
  using type = __half;
};
template <>
struct DeviceType<DType::bf16> {
  using type = __nv_bfloat16;
};

// Conversions as common/convert.hpp defines them (and the CPU references
// compute them): __half2float and the __float2*_rn / __floats2*2_rn
// roundings are the instructions that header names as giving its bits; bf16
// is widened by the header itself (__bfloat162float keeps a NaN's payload
// before sm_90).
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return bf16_bits_to_f32(__bfloat16_as_ushort(v));
}

template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// out[o] = f(x[xi], y[yi], z[zi]); y and z are touched only by the maps that
// read them (either may be null otherwise).
template <class F, class In, class Out>
__device__ __forceinline__ void map_one(const F& f, const In* gX, const In* gY, const In* gZ,
                                        Out* gOut, std::int64_t o, std::int64_t xi, std::int64_t yi,
                                        std::int64_t zi) {
  if constexpr (F::kArity == 3) {
    gOut[o] = narrow<Out>(f(widen(gX[xi]), widen(gY[yi]), widen(gZ[zi])));
  } else if constexpr (F::kArity == 2) {
    gOut[o] = narrow<Out>(f(widen(gX[xi]), widen(gY[yi])));
  } else {
    gOut[o] = narrow<Out>(f(widen(gX[xi])));
  }
}

// Element `at` of a contiguous map: a broadcast input (its bit set) is read
// at 0 for every element.
template <class F, class In, class Out>
__device__ __forceinline__ void map_at(const F& f, const In* gX, const In* gY, const In* gZ,
                                       Out* gOut, std::int64_t at, unsigned broadcast) {
  map_one(f, gX, gY, gZ, gOut, at, (broadcast & kBroadcastX) != 0 ? 0 : at,
          (broadcast & kBroadcastY) != 0 ? 0 : at, (broadcast & kBroadcastZ) != 0 ? 0 : at);
}

// Elements one vector holds: 16 bytes of the output, so that every store
// instruction of a warp writes 512 contiguous bytes. L1 merges no stores
// across instructions: were the output wider than 16 bytes a thread (as when
// the vector followed the narrower input of a widening cast), each of a
// thread's two stores would fill half of every 32-byte sector it touches,
// doubling the write requests the L2 sees (widening casts laid out so ran at
// 0.71 of a copy). A wider input is harmless: of its two 16-byte loads the
// second is served from the lines L1 kept for the first.
template <class In, class Out>
constexpr int kElemsPerVector = kVectorBytes / static_cast<int>(sizeof(Out));

// Bytes one vector of T occupies, and so its alignment: 8 for the narrow
// input of a widening cast, 16 otherwise (a 32-byte vector is two 16-byte accesses).
template <class T, int N>
constexpr int kPackAlign = std::min(kVectorBytes, static_cast<int>(sizeof(T)) * N);

// Vectors a thread moves: kMapVectorsPerThread, or more where an input
// vector is narrower than 16 bytes, so that every thread keeps at least
// 32 bytes of each input in flight.
template <class In, class Out>
constexpr int kInputVectorBytes = static_cast<int>(sizeof(In)) * kElemsPerVector<In, Out>;
template <class In, class Out>
constexpr int kVectorsPerThread =
    std::max(1, kVectorBytes / kInputVectorBytes<In, Out>) * kMapVectorsPerThread;

template <class T, int N>
struct alignas(kPackAlign<T, N>) Pack {
  T v[N];
};

// Rounds a vector's results to Out; 16-bit formats two at a time (one
// conversion instruction a pair, each rounded to nearest even as narrow() does).
template <class Out, int N>
__device__ __forceinline__ Pack<Out, N> narrow_pack(const float (&r)[N]) {
  Pack<Out, N> p;
  if constexpr (std::is_same_v<Out, float>) {
#pragma unroll
    for (int e = 0; e < N; ++e) p.v[e] = r[e];
  } else {
    static_assert(N % 2 == 0, "16-bit vectors hold pairs");
#pragma unroll
    for (int e = 0; e < N; e += 2) {
      if constexpr (std::is_same_v<Out, __half>) {
        const __half2 pair = __floats2half2_rn(r[e], r[e + 1]);
        p.v[e] = pair.x;
        p.v[e + 1] = pair.y;
      } else {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(r[e], r[e + 1]);
        p.v[e] = pair.x;
        p.v[e + 1] = pair.y;
      }
    }
  }
  return p;
}

// r[e] = f(x[e], y[e], z[e]) over a thread's elements. The maths chosen at
// run time (UnaryMath, BinaryMath) switch once here, not once an element:
// a switch an element made each element's maths a branch region of its own,
// so the elements' long-latency steps (the special-function unit's exp2,
// lg2, rcp) could not overlap, and the bf16 maps, which need twice f32's
// element rate, ran compute-bound (tanh, log, sigmoid at 0.54 of a copy on
// the H200).
template <bool kHalfOut, class F, int N>
__device__ __forceinline__ void apply_all(const F& f, const float (&x)[N], const float (&y)[N],
                                          const float (&z)[N], float (&r)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    if constexpr (F::kArity == 3) {
      r[e] = f(x[e], y[e], z[e]);
    } else if constexpr (F::kArity == 2) {
      r[e] = f(x[e], y[e]);
    } else {
      r[e] = f(x[e]);
    }
  }
}

// For 16-bit outputs: log and pow through the special-function unit's lg2
// and ex2 (non-flushing forms, so subnormal inputs stay exact in range).
// Their f32 errors (about 2^-22 absolute for lg2, relative for ex2) are far
// below half a unit of bf16 (2^-9) or f16 (2^-12), where logf and powf made
// the map compute-bound (bf16 log at 0.87 of a copy, pow at 0.55). f32 outputs keep the accurate
// functions, as do the fused chains (their text is map_math.inc's).
__device__ __forceinline__ float lg2_approx(float x) {
  float r;
  asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float log_for_16bit(float x) {
  return lg2_approx(x) * 0.693147180559945309f;
}
// lg2's absolute error (about 2^-22) is multiplied by y: the fast form is
// kept to |y| <= 64 (relative error under 2^-16, against half a unit of
// f16 at 2^-12). Larger exponents and powf's special cases (x <= 0, x
// infinite or NaN, x = 1 with any y) take powf itself.
__device__ __forceinline__ float pow_for_16bit(float x, float y) {
  if (x > 0.0f && x != 1.0f && x < __int_as_float(0x7F800000) && fabsf(y) <= 64.0f) {
    return ex2_approx(y * lg2_approx(x));
  }
  return powf(x, y);
}

template <bool kHalfOut, int N>
__device__ __forceinline__ void apply_all(const map_fn::UnaryMath& f, const float (&x)[N],
                                          const float (&)[N], const float (&)[N], float (&r)[N]) {
  if constexpr (kHalfOut) {
    if (f.kind == MapKind::log) {
#pragma unroll
      for (int e = 0; e < N; ++e) r[e] = log_for_16bit(x[e]);
      return;
    }
  }
  switch (f.kind) {
#define LOOM_CASE(name)                                                                 \
  case MapKind::name:                                                                   \
    _Pragma("unroll") for (int e = 0; e < N; ++e) r[e] = map_fn::loom_map_##name(x[e]); \
    return;
    LOOM_UNARY_MATH_MAPS(LOOM_CASE)
#undef LOOM_CASE
    default:
#pragma unroll
      for (int e = 0; e < N; ++e) r[e] = f(x[e]);
  }
}

template <bool kHalfOut, int N>
__device__ __forceinline__ void apply_all(const map_fn::BinaryMath& f, const float (&x)[N],
                                          const float (&y)[N], const float (&)[N], float (&r)[N]) {
  if constexpr (kHalfOut) {
    if (f.kind == MapKind::pow) {
#pragma unroll
      for (int e = 0; e < N; ++e) r[e] = pow_for_16bit(x[e], y[e]);
      return;
    }
  }
  switch (f.kind) {
#define LOOM_CASE(name)                                                                       \
  case MapKind::name:                                                                         \
    _Pragma("unroll") for (int e = 0; e < N; ++e) r[e] = map_fn::loom_map_##name(x[e], y[e]); \
    return;
    LOOM_BINARY_MATH_MAPS(LOOM_CASE)
#undef LOOM_CASE
    default:
#pragma unroll
      for (int e = 0; e < N; ++e) r[e] = f(x[e], y[e]);
  }
}

// Not __restrict__: out may be x or y (in place); each element is read
// before it is written, by the same thread, in every variant.
template <class F, class In, class Out>
__global__ void __launch_bounds__(kBlock) map_naive(F f, const In* gX, const In* gY, const In* gZ,
                                                    Out* gOut, std::size_t n, unsigned broadcast) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto at = static_cast<std::int64_t>(i);
  if (i < n) map_at(f, gX, gY, gZ, gOut, at, broadcast);
}

template <class F, class In, class Out>
__global__ void __launch_bounds__(kBlock)
    map_grid_stride(F f, const In* gX, const In* gY, const In* gZ, Out* gOut, std::size_t n,
                    unsigned broadcast) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    map_at(f, gX, gY, gZ, gOut, static_cast<std::int64_t>(i), broadcast);
  }
}

// where() on 16-bit data picks a 16-bit pattern: widening the three inputs
// to f32 and rounding the winner back cost registers (56 a thread in bf16,
// against 34 in f32) and instructions for nothing, since the round trip is
// exact but for a NaN. The bits give the same answers: a mask is true
// unless it is +0 or -0 (a NaN mask is true, as in f32), and a NaN winner
// becomes the canonical NaN, as narrowing it would.
template <class F, class In, class Out>
constexpr bool kSelectsBits = std::is_same_v<F, map_fn::Where>&& std::is_same_v<In, Out> &&
                              sizeof(In) == 2;

__device__ __forceinline__ std::uint16_t bits_of(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ std::uint16_t bits_of(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}
template <class T>
__device__ __forceinline__ T of_bits(std::uint16_t b) {
  if constexpr (std::is_same_v<T, __half>) {
    return __ushort_as_half(b);
  } else {
    return __ushort_as_bfloat16(b);
  }
}
// The magnitude of infinity: any larger magnitude is a NaN.
template <class T>
constexpr std::uint16_t kInfinityBits = std::is_same_v<T, __half> ? 0x7C00U : 0x7F80U;

template <class T>
__device__ __forceinline__ T select_bits(T mask, T a, T b) {
  const std::uint16_t picked = (bits_of(mask) & 0x7FFFU) != 0 ? bits_of(a) : bits_of(b);
  const bool nan = (picked & 0x7FFFU) > kInfinityBits<T>;
  return of_bits<T>(nan ? std::uint16_t{0x7FFFU} : picked);
}

// kU vectors of where() a thread, as map_vectorized lays them out: every
// load issued before the first store. A broadcast operand (a null vector
// pointer) is its one element read again for each vector, which L1 serves:
// keeping it splatted in registers for the whole thread cost 12 of them.
template <int kU, class T, class Pk, class OutPk>
__device__ __forceinline__ void select_vectors(const Pk* gM, const Pk* gA, const Pk* gB,
                                               const T* sM, const T* sA, const T* sB, OutPk* gOut,
                                               std::size_t first, std::size_t vectors) {
  const auto load = [](const Pk* g, const T* scalar, std::size_t v) {
    if (g != nullptr) return g[v];
    Pk p;
#pragma unroll
    for (int e = 0; e < static_cast<int>(sizeof(p.v) / sizeof(p.v[0])); ++e) p.v[e] = *scalar;
    return p;
  };
  Pk m[kU];
  Pk a[kU];
  Pk b[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const std::size_t v = first + static_cast<std::size_t>(u) * kBlock;
    if (v < vectors) {
      m[u] = load(gM, sM, v);
      a[u] = load(gA, sA, v);
      b[u] = load(gB, sB, v);
    }
  }
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const std::size_t v = first + static_cast<std::size_t>(u) * kBlock;
    if (v < vectors) {
      OutPk r;
#pragma unroll
      for (int e = 0; e < static_cast<int>(sizeof(r.v) / sizeof(r.v[0])); ++e) {
        r.v[e] = select_bits(m[u].v[e], a[u].v[e], b[u].v[e]);
      }
      gOut[v] = r;
    }
  }
}

// The body is `vectors` vectors of kV elements from element `head` on, where
// every operand is aligned to its part of a vector (kPackAlign). Block b
// owns kBlock * kU consecutive vectors and thread t takes vectors t,
// t + kBlock, ... of them, so each warp's accesses stay contiguous. All
// loads come before any store: the loads of a thread are in flight together.
template <class F, class In, class Out>
__global__ void __launch_bounds__(kBlock)
    map_vectorized(F f, const In* gX, const In* gY, const In* gZ, Out* gOut, std::size_t n,
                   std::size_t head, std::size_t vectors, unsigned broadcast) {
  constexpr int kV = kElemsPerVector<In, Out>;
  constexpr int kU = kVectorsPerThread<In, Out>;
  using InPack = Pack<In, kV>;
  using OutPack = Pack<Out, kV>;
  // A broadcast input is one value, read once and copied into every vector.
  const auto vector_of = [&](const In* g, unsigned bit) -> const InPack* {
    return g == nullptr || (broadcast & bit) != 0 ? nullptr
                                                  : reinterpret_cast<const InPack*>(g + head);
  };
  const auto splat = [&](const In* g, unsigned bit) {
    InPack p{};
    if (g != nullptr && (broadcast & bit) != 0) {
#pragma unroll
      for (int e = 0; e < kV; ++e) p.v[e] = g[0];
    }
    return p;
  };
  const InPack* gX4 = vector_of(gX, kBroadcastX);
  const InPack* gY4 = vector_of(F::kArity >= 2 ? gY : nullptr, kBroadcastY);
  const InPack* gZ4 = vector_of(F::kArity == 3 ? gZ : nullptr, kBroadcastZ);
  const InPack sX = splat(gX, kBroadcastX);
  const InPack sY = splat(F::kArity >= 2 ? gY : nullptr, kBroadcastY);
  const InPack sZ = splat(F::kArity == 3 ? gZ : nullptr, kBroadcastZ);
  auto* gOut4 = reinterpret_cast<OutPack*>(gOut + head);
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * kBlock * kU + threadIdx.x;

  if constexpr (kSelectsBits<F, In, Out>) {
    select_vectors<kU>(gX4, gY4, gZ4, gX, gY, gZ, gOut4, first, vectors);
  } else {
    // Every vector's elements widened, then the map over all of them at once.
    // Vectors past the end compute on zeros and are not stored.
    constexpr int kAll = kU * kV;
    float fX[kAll];
    float fY[kAll];  // unused (and dropped by the compiler) below arity 2
    float fZ[kAll];
    const auto widen_into = [](float* to, const InPack& p) {
#pragma unroll
      for (int e = 0; e < kV; ++e) to[e] = widen(p.v[e]);
    };
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::size_t v = first + static_cast<std::size_t>(u) * kBlock;
      const bool inside = v < vectors;
      widen_into(fX + u * kV, inside ? (gX4 != nullptr ? gX4[v] : sX) : InPack{});
      if constexpr (F::kArity >= 2) {
        widen_into(fY + u * kV, inside ? (gY4 != nullptr ? gY4[v] : sY) : InPack{});
      }
      if constexpr (F::kArity == 3) {
        widen_into(fZ + u * kV, inside ? (gZ4 != nullptr ? gZ4[v] : sZ) : InPack{});
      }
    }
    float fR[kAll];
    apply_all<sizeof(Out) == 2>(f, fX, fY, fZ, fR);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::size_t v = first + static_cast<std::size_t>(u) * kBlock;
      if (v < vectors) {
        float rR[kV];
#pragma unroll
        for (int e = 0; e < kV; ++e) rR[e] = fR[u * kV + e];
        gOut4[v] = narrow_pack<Out>(rR);
      }
    }
  }

  // The scalar head (before the first aligned vector) and tail (after the
  // last whole one), fewer than kV elements each: the grid's first threads.
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t tail = head + vectors * kV;
  if (thread < head) map_at(f, gX, gY, gZ, gOut, static_cast<std::int64_t>(thread), broadcast);
  if (tail + thread < n) {
    map_at(f, gX, gY, gZ, gOut, static_cast<std::int64_t>(tail + thread), broadcast);
  }
}

// Plain arrays: the kernel parameter must not need std::array's members on the device.
struct DeviceGeometry {
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  int rank;
  std::int64_t shape[kMapMaxRank];
  std::int64_t out_strides[kMapMaxRank];
  std::int64_t x_strides[kMapMaxRank];
  std::int64_t y_strides[kMapMaxRank];
  std::int64_t z_strides[kMapMaxRank];
};

// Each element's offsets come from its linear index, innermost dimension
// first; one 64-bit division a dimension is the price of generality. Rank 1
// (a strided vector, or a scalar broadcast over a contiguous tensor: stride
// 0) needs none, and takes its own loop (the rank is the same for the grid).
template <class F, class In, class Out>
__global__ void __launch_bounds__(kBlock)
    map_strided_kernel(F f, const In* gX, const In* gY, const In* gZ, Out* gOut,
                       DeviceGeometry geometry, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (geometry.rank == 1) {
    for (std::size_t i = first; i < n; i += stride) {
      const auto at = static_cast<std::int64_t>(i);
      map_one(f, gX, gY, gZ, gOut, at * geometry.out_strides[0], at * geometry.x_strides[0],
              at * geometry.y_strides[0], at * geometry.z_strides[0]);
    }
    return;
  }
  // Below 2^32 elements every index fits in 32 bits, and a 32-bit division
  // costs about half a 64-bit one (the loop's cost at rank 2 and above).
  const bool narrow = n <= 0xFFFFFFFFULL;
  for (std::size_t i = first; i < n; i += stride) {
    std::int64_t out_at = 0;
    std::int64_t x_at = 0;
    std::int64_t y_at = 0;
    std::int64_t z_at = 0;
    const auto add = [&](std::int64_t index, int d) {
      out_at += index * geometry.out_strides[d];
      x_at += index * geometry.x_strides[d];
      y_at += index * geometry.y_strides[d];
      z_at += index * geometry.z_strides[d];
    };
    if (narrow) {
      auto rest = static_cast<std::uint32_t>(i);
      for (int d = geometry.rank - 1; d >= 0; --d) {
        const auto extent = static_cast<std::uint32_t>(geometry.shape[d]);
        add(static_cast<std::int64_t>(rest % extent), d);
        rest /= extent;
      }
    } else {
      auto rest = static_cast<std::int64_t>(i);
      for (int d = geometry.rank - 1; d >= 0; --d) {
        add(rest % geometry.shape[d], d);
        rest /= geometry.shape[d];
      }
    }
    map_one(f, gX, gY, gZ, gOut, out_at, x_at, y_at, z_at);
  }
}

unsigned blocks_for(std::size_t items, std::size_t per_block) {
  return static_cast<unsigned>(std::max<std::size_t>(1, (items + per_block - 1) / per_block));
}

unsigned machine_blocks() {
  int device = 0;
  int sms = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(sms) * kBlocksPerSm;
}

bool aligned(const void* p, int alignment) {
  return p == nullptr ||
         reinterpret_cast<std::uintptr_t>(p) % static_cast<unsigned>(alignment) == 0;
}

// The number of leading elements after which every operand is aligned to
// its vector, if there is one below kV.
template <class In, class Out>
std::optional<std::size_t> aligning_head(const In* x, const In* y, const In* z, Out* out) {
  constexpr int kV = kElemsPerVector<In, Out>;
  constexpr int kIn = kPackAlign<In, kV>;
  constexpr int kOut = kPackAlign<Out, kV>;
  for (std::size_t h = 0; h < static_cast<std::size_t>(kV); ++h) {
    if ((x == nullptr || aligned(x + h, kIn)) && (y == nullptr || aligned(y + h, kIn)) &&
        (z == nullptr || aligned(z + h, kIn)) && aligned(out + h, kOut)) {
      return h;
    }
  }
  return std::nullopt;
}

template <class F, class In, class Out>
void launch_contiguous(F f, const In* x, const In* y, const In* z, Out* out, std::size_t n,
                       StreamView stream, MapVariant variant, unsigned broadcast) {
  if (F::kArity < 2) y = nullptr;
  if (F::kArity < 3) z = nullptr;
  if (variant == MapVariant::automatic) variant = kMapDefault;
  std::optional<std::size_t> head;
  if (variant == MapVariant::vectorized) {
    // Broadcast inputs are read a value at a time: their alignment is free.
    head = aligning_head((broadcast & kBroadcastX) != 0 ? nullptr : x,
                         (broadcast & kBroadcastY) != 0 ? nullptr : y,
                         (broadcast & kBroadcastZ) != 0 ? nullptr : z, out);
    if (!head) variant = MapVariant::grid_stride;
  }
  switch (variant) {
    case MapVariant::naive:
      loom::detail::launch_on_stream(stream, map_naive<F, In, Out>, blocks_for(n, kBlock), kBlock,
                                     0, f, x, y, z, out, n, broadcast);
      break;
    case MapVariant::grid_stride:
      loom::detail::launch_on_stream(stream, map_grid_stride<F, In, Out>,
                                     std::min(blocks_for(n, kBlock), machine_blocks()), kBlock, 0,
                                     f, x, y, z, out, n, broadcast);
      break;
    case MapVariant::automatic:
    case MapVariant::vectorized: {
      constexpr std::size_t kV = kElemsPerVector<In, Out>;
      const std::size_t h = std::min(*head, n);
      const std::size_t vectors = (n - h) / kV;
      constexpr std::size_t kPerBlock = std::size_t{kBlock} * kVectorsPerThread<In, Out>;
      loom::detail::launch_on_stream(stream, map_vectorized<F, In, Out>,
                                     blocks_for(vectors, kPerBlock), kBlock, 0, f, x, y, z, out, n,
                                     h, vectors, broadcast);
      break;
    }
  }
  LOOM_KERNEL_CHECK_LAUNCH("elementwise map kernel launch");
}

template <class Fn>
void visit_device_types(MapKind kind, DType in, DType out, MapScalars scalars, Fn&& fn) {
  detail::visit_map(kind, in, out, scalars, [&](auto f, auto in_tag, auto out_tag) {
    using In = typename DeviceType<decltype(in_tag)::value>::type;
    using Out = typename DeviceType<decltype(out_tag)::value>::type;
    fn(f, static_cast<const In*>(nullptr), static_cast<Out*>(nullptr));
  });
}

}  // namespace

void map(MapKind kind, DType in, DType out, const MapOperands& operands, std::size_t n,
         StreamView stream, MapScalars scalars, MapVariant variant) {
  visit_device_types(kind, in, out, scalars, [&](auto f, auto in_ptr, auto out_ptr) {
    using In = std::remove_cv_t<std::remove_pointer_t<decltype(in_ptr)>>;
    using Out = std::remove_pointer_t<decltype(out_ptr)>;
    if (n == 0) return;
    launch_contiguous(f, static_cast<const In*>(operands.x), static_cast<const In*>(operands.y),
                      static_cast<const In*>(operands.z), static_cast<Out*>(operands.out), n,
                      stream, variant, operands.broadcast);
  });
}

void map_strided(MapKind kind, DType in, DType out, const MapOperands& operands,
                 const MapGeometry& geometry, StreamView stream, MapScalars scalars) {
  visit_device_types(kind, in, out, scalars, [&](auto f, auto in_ptr, auto out_ptr) {
    using In = std::remove_cv_t<std::remove_pointer_t<decltype(in_ptr)>>;
    using Out = std::remove_pointer_t<decltype(out_ptr)>;
    const MapGeometry merged = coalesce(geometry);
    const std::int64_t count = merged.numel();
    if (count <= 0) return;
    DeviceGeometry g{};
    g.rank = merged.rank;
    for (int d = 0; d < merged.rank; ++d) {
      g.shape[d] = merged.shape[static_cast<std::size_t>(d)];
      g.out_strides[d] = merged.out_strides[static_cast<std::size_t>(d)];
      g.x_strides[d] = merged.x_strides[static_cast<std::size_t>(d)];
      g.y_strides[d] = merged.y_strides[static_cast<std::size_t>(d)];
      g.z_strides[d] = merged.z_strides[static_cast<std::size_t>(d)];
    }
    const auto n = static_cast<std::size_t>(count);
    loom::detail::launch_on_stream(
        stream, map_strided_kernel<decltype(f), In, Out>,
        std::min(blocks_for(n, kBlock), machine_blocks()), kBlock, 0, f,
        static_cast<const In*>(operands.x), static_cast<const In*>(operands.y),
        static_cast<const In*>(operands.z), static_cast<Out*>(operands.out), g, n);
    LOOM_KERNEL_CHECK_LAUNCH("elementwise strided map kernel launch");
  });
}

}  // namespace loom::kernels
