#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"
#include "loss/loss.hpp"

#include <loom/error.hpp>

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace loom::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kBlock = 256;         // threads of every row kernel's block
constexpr int kReduceBlock = 1024;  // the one block that reduces the rows' losses
constexpr int kVectorBytes = 16;

// ---- elements ----------------------------------------------------------------

template <DType D>
struct Storage {
  using type = std::uint16_t;  // f16 and bf16 as their bits
};
template <>
struct Storage<DType::f32> {
  using type = float;
};

template <DType D>
__device__ __forceinline__ float widen(typename Storage<D>::type v) {
  if constexpr (D == DType::f32) {
    return v;
  } else if constexpr (D == DType::f16) {
    return __half2float(__ushort_as_half(v));
  } else {
    return bf16_bits_to_f32(v);
  }
}

template <DType D>
__device__ __forceinline__ typename Storage<D>::type narrow(float v) {
  if constexpr (D == DType::f32) {
    return v;
  } else if constexpr (D == DType::f16) {
    return __half_as_ushort(__float2half_rn(v));
  } else {
    return f32_to_bf16_bits(v);
  }
}

// Elements a thread moves at a time: a 16-byte vector, or one.
template <DType D, bool kVec>
constexpr int kPack = kVec ? kVectorBytes / static_cast<int>(sizeof(typename Storage<D>::type)) : 1;

template <DType D, bool kVec>
struct alignas(kPack<D, kVec> * sizeof(typename Storage<D>::type)) Pack {
  typename Storage<D>::type v[kPack<D, kVec>];
};

template <DType D, bool kVec>
__device__ __forceinline__ void load_pack(const void* row, std::int64_t p,
                                          float (&out)[kPack<D, kVec>]) {
  const Pack<D, kVec> raw = static_cast<const Pack<D, kVec>*>(row)[p];
#pragma unroll
  for (int e = 0; e < kPack<D, kVec>; ++e) out[e] = widen<D>(raw.v[e]);
}

template <DType D, bool kVec>
__device__ __forceinline__ void store_pack(void* row, std::int64_t p,
                                           const float (&in)[kPack<D, kVec>]) {
  Pack<D, kVec> raw;
#pragma unroll
  for (int e = 0; e < kPack<D, kVec>; ++e) raw.v[e] = narrow<D>(in[e]);
  static_cast<Pack<D, kVec>*>(row)[p] = raw;
}

template <DType D>
__device__ __forceinline__ float element(const void* row, std::int64_t j) {
  return widen<D>(static_cast<const typename Storage<D>::type*>(row)[j]);
}

template <DType D>
__device__ __forceinline__ const void* row_at(const void* base, std::int64_t r,
                                              std::int64_t stride) {
  return static_cast<const typename Storage<D>::type*>(base) + r * stride;
}
template <DType D>
__device__ __forceinline__ void* row_at(void* base, std::int64_t r, std::int64_t stride) {
  return static_cast<typename Storage<D>::type*>(base) + r * stride;
}

// ---- a running (max, sum of exp(x - max)) over a row ----------------------------

struct MaxSum {
  float m;
  float s;
};

__device__ __forceinline__ float rescale(float from, float to) {
  return from == to ? 1.0F : expf(from - to);
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0F};  // both empty: exp(-inf - -inf) would be NaN
  return {m, a.s * rescale(a.m, m) + b.s * rescale(b.m, m)};
}

// One rescale a pack, not one an element. A NaN element makes s NaN (fmaxf
// skips it in m, exp(NaN - m) does not), as a +inf one does (inf - inf).
template <int N>
__device__ __forceinline__ MaxSum fold(MaxSum acc, const float (&v)[N]) {
  float m = acc.m;
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmaxf(m, v[i]);
  if (m == -INFINITY) {
    bool nan = false;
#pragma unroll
    for (int i = 0; i < N; ++i) nan = nan || v[i] != v[i];
    return nan ? MaxSum{m, NAN} : acc;
  }
  float s = acc.s * rescale(acc.m, m);
#pragma unroll
  for (int i = 0; i < N; ++i) s += expf(v[i] - m);
  return {m, s};
}

// The team's pair, in every thread of the team: a warp by shuffles; a block
// through shared memory, warp by warp.
template <int kTeam>
__device__ __forceinline__ MaxSum team_merge(MaxSum p) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    p = merge(
        p, {__shfl_xor_sync(0xFFFFFFFFU, p.m, offset), __shfl_xor_sync(0xFFFFFFFFU, p.s, offset)});
  }
  if constexpr (kTeam > kWarp) {
    __shared__ MaxSum sPartial[kTeam / kWarp];
    const int warp = static_cast<int>(threadIdx.x) / kWarp;
    if (threadIdx.x % kWarp == 0) sPartial[warp] = p;
    __syncthreads();
    p = sPartial[0];
#pragma unroll
    for (int w = 1; w < kTeam / kWarp; ++w) p = merge(p, sPartial[w]);
  }
  return p;
}

// The row's log-sum-exp: NaN for a row with a NaN or +inf, or only -inf.
template <DType D, int kTeam, bool kVec>
__device__ __forceinline__ float row_lse(const void* row, std::int64_t cols, int lane) {
  constexpr int kN = kPack<D, kVec>;
  MaxSum acc{-INFINITY, 0.0F};
  const std::int64_t packs = cols / kN;
  for (std::int64_t p = lane; p < packs; p += kTeam) {
    float v[kN];
    load_pack<D, kVec>(row, p, v);
    acc = fold(acc, v);
  }
  acc = team_merge<kTeam>(acc);
  return acc.m == -INFINITY ? NAN : acc.m + logf(acc.s);
}

// Which row a thread's team takes, and its place in the team.
template <int kTeam>
__device__ __forceinline__ std::int64_t team_row() {
  return static_cast<std::int64_t>(blockIdx.x) * (kBlock / kTeam) +
         static_cast<int>(threadIdx.x) / kTeam;
}
template <int kTeam>
__device__ __forceinline__ int team_lane() {
  return static_cast<int>(threadIdx.x) % kTeam;
}

__device__ __forceinline__ std::int64_t label_at(const void* labels, bool labels64,
                                                 std::int64_t r) {
  return labels64 ? static_cast<const std::int64_t*>(labels)[r]
                  : static_cast<const std::int32_t*>(labels)[r];
}

// ---- kernels -------------------------------------------------------------------------

// A team's rows past the end return whole (a block team returns together, so
// no barrier is left waiting).
template <DType D, int kTeam, bool kVec>
__global__ void __launch_bounds__(kBlock)
    log_softmax_rows(const void* gX, void* gY, LossRows shape) {
  const std::int64_t r = team_row<kTeam>();
  if (r >= shape.rows) return;
  const int lane = team_lane<kTeam>();
  const void* x = row_at<D>(gX, r, shape.x_row_stride);
  void* y = row_at<D>(gY, r, shape.y_row_stride);
  const float lse = row_lse<D, kTeam, kVec>(x, shape.cols, lane);
  constexpr int kN = kPack<D, kVec>;
  for (std::int64_t p = lane; p < shape.cols / kN; p += kTeam) {
    float v[kN];
    load_pack<D, kVec>(x, p, v);
#pragma unroll
    for (int e = 0; e < kN; ++e) v[e] -= lse;
    store_pack<D, kVec>(y, p, v);
  }
}

// Plain values: the kernels' parameter (pointers travel as their own arguments).
struct CrossEntropyParams {
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  LossRows shape;
  bool labels64;
  std::int64_t ignore_index;
  LossReduction reduction;
};

template <DType D, int kTeam, bool kVec>
__global__ void __launch_bounds__(kBlock)
    cross_entropy_rows(const void* gLogits, const void* gLabels, float* gLse, float* gRowLoss,
                       CrossEntropyParams p) {
  const std::int64_t r = team_row<kTeam>();
  if (r >= p.shape.rows) return;
  const void* x = row_at<D>(gLogits, r, p.shape.x_row_stride);
  const float lse = row_lse<D, kTeam, kVec>(x, p.shape.cols, team_lane<kTeam>());
  if (team_lane<kTeam>() != 0) return;
  gLse[r] = lse;
  const std::int64_t label = label_at(gLabels, p.labels64, r);
  float loss = 0.0F;
  if (label != p.ignore_index) {
    loss = label >= 0 && label < p.shape.cols ? lse - element<D>(x, label) : NAN;
  }
  gRowLoss[r] = loss;
}

__device__ __forceinline__ float block_sum(float v, float* sPartial) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xFFFFFFFFU, v, offset);
  }
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  if (threadIdx.x % kWarp == 0) sPartial[warp] = v;
  __syncthreads();
  float total = 0.0F;
  for (int w = 0; w < static_cast<int>(blockDim.x) / kWarp; ++w) total += sPartial[w];
  __syncthreads();  // sPartial is reused by the next sum
  return total;
}

// One block: the rows not ignored (into gCount) and, given the rows' losses,
// their sum or mean (into gLoss), in a fixed order: the same bits every run.
__global__ void __launch_bounds__(kReduceBlock)
    cross_entropy_reduce(const float* gRowLoss, const void* gLabels, float* gLoss, float* gCount,
                         CrossEntropyParams p) {
  __shared__ float sPartial[kReduceBlock / kWarp];
  float sum = 0.0F;
  // Counted in integers a thread, then summed as floats: exact while the
  // count stays below 2^24 rows (16.7 million); the CPU counts in double.
  std::int64_t mine = 0;
  for (std::int64_t r = threadIdx.x; r < p.shape.rows; r += kReduceBlock) {
    if (gRowLoss != nullptr) sum += gRowLoss[r];
    mine += label_at(gLabels, p.labels64, r) != p.ignore_index ? 1 : 0;
  }
  sum = block_sum(sum, sPartial);
  const float count = block_sum(static_cast<float>(mine), sPartial);
  if (threadIdx.x != 0) return;
  *gCount = count;
  if (gRowLoss != nullptr) *gLoss = p.reduction == LossReduction::mean ? sum / count : sum;
}

template <DType D, int kTeam, bool kVec>
__global__ void __launch_bounds__(kBlock)
    cross_entropy_backward_rows(const void* gLogits, const void* gLabels, const float* gLse,
                                const float* gGradLoss, const float* gCount, void* gGrad,
                                CrossEntropyParams p) {
  const std::int64_t r = team_row<kTeam>();
  if (r >= p.shape.rows) return;
  const int lane = team_lane<kTeam>();
  const void* x = row_at<D>(gLogits, r, p.shape.x_row_stride);
  void* g = row_at<D>(gGrad, r, p.shape.y_row_stride);
  const std::int64_t label = label_at(gLabels, p.labels64, r);
  const float upstream =
      gGradLoss == nullptr ? 1.0F : gGradLoss[p.reduction == LossReduction::none ? r : 0];
  const float scale = p.reduction == LossReduction::mean ? upstream / *gCount : upstream;
  const bool ignored = label == p.ignore_index;
  const bool valid = label >= 0 && label < p.shape.cols;
  const float lse = gLse[r];
  constexpr int kN = kPack<D, kVec>;
  for (std::int64_t q = lane; q < p.shape.cols / kN; q += kTeam) {
    float v[kN];
    load_pack<D, kVec>(x, q, v);
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      const std::int64_t j = q * kN + e;
      const float onehot = j == label ? 1.0F : 0.0F;
      v[e] = ignored ? 0.0F : valid ? scale * (expf(v[e] - lse) - onehot) : NAN;
    }
    store_pack<D, kVec>(g, q, v);
  }
}

// ---- launches -------------------------------------------------------------------

bool aligned(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % kVectorBytes == 0; }

// Whether every row of both operands starts on a 16-byte boundary and holds
// whole vectors.
bool vectorizable(DType dtype, const void* x, const void* y, const LossRows& s) {
  const std::int64_t per_vector = kVectorBytes / static_cast<std::int64_t>(bytes_for(dtype, 1));
  return aligned(x) && (y == nullptr || aligned(y)) && s.cols % per_vector == 0 &&
         s.x_row_stride % per_vector == 0 && (y == nullptr || s.y_row_stride % per_vector == 0);
}

// Calls fn(dtype tag, team tag, vec tag) for the instantiation serving this shape.
template <class Fn>
void dispatch(DType dtype, std::int64_t cols, bool vec, Fn&& fn) {
  const auto with_dtype = [&](auto d) {
    const auto with_team = [&](auto team) {
      if (vec) {
        fn(d, team, std::true_type{});
      } else {
        fn(d, team, std::false_type{});
      }
    };
    if (cols <= kLossWarpRowMax) {
      with_team(std::integral_constant<int, kWarp>{});
    } else {
      with_team(std::integral_constant<int, kBlock>{});
    }
  };
  switch (dtype) {
    case DType::f32: with_dtype(std::integral_constant<DType, DType::f32>{}); return;
    case DType::f16: with_dtype(std::integral_constant<DType, DType::f16>{}); return;
    case DType::bf16: with_dtype(std::integral_constant<DType, DType::bf16>{}); return;
    default: throw InvalidArgument("loss kernels take f32, f16 or bf16 logits");
  }
}

template <int kTeam>
unsigned row_blocks(std::int64_t rows) {
  constexpr std::int64_t kRowsPerBlock = kBlock / kTeam;
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

CrossEntropyParams params_of(const CrossEntropyArgs& a) {
  return {a.shape, a.labels64, a.ignore_index, a.reduction};
}

}  // namespace

void log_softmax(const void* x, void* y, DType dtype, const LossRows& shape, StreamView stream) {
  if (shape.rows == 0) return;
  dispatch(dtype, shape.cols, vectorizable(dtype, x, y, shape), [&](auto d, auto team, auto vec) {
    constexpr int kTeam = decltype(team)::value;
    loom::detail::launch_on_stream(stream, log_softmax_rows<decltype(d)::value, kTeam, vec()>,
                                   row_blocks<kTeam>(shape.rows), kBlock, 0, x, y, shape);
  });
  LOOM_KERNEL_CHECK_LAUNCH("log_softmax kernel launch");
}

void cross_entropy(const CrossEntropyArgs& a, void* workspace, StreamView stream) {
  auto* count = static_cast<float*>(workspace);
  float* row_loss = a.reduction == LossReduction::none ? a.loss : count + 2;
  const CrossEntropyParams p = params_of(a);
  if (a.shape.rows > 0) {
    dispatch(a.dtype, a.shape.cols, vectorizable(a.dtype, a.logits, nullptr, a.shape),
             [&](auto d, auto team, auto vec) {
               constexpr int kTeam = decltype(team)::value;
               loom::detail::launch_on_stream(stream,
                                              cross_entropy_rows<decltype(d)::value, kTeam, vec()>,
                                              row_blocks<kTeam>(a.shape.rows), kBlock, 0, a.logits,
                                              a.labels, a.lse, row_loss, p);
             });
    LOOM_KERNEL_CHECK_LAUNCH("cross_entropy kernel launch");
  }
  if (a.reduction != LossReduction::none) {
    loom::detail::launch_on_stream(stream, cross_entropy_reduce, 1, kReduceBlock, 0,
                                   static_cast<const float*>(row_loss), a.labels, a.loss, count, p);
    LOOM_KERNEL_CHECK_LAUNCH("cross_entropy reduction launch");
  }
}

void cross_entropy_backward(const CrossEntropyArgs& a, void* workspace, StreamView stream) {
  if (a.shape.rows == 0) return;
  auto* count = static_cast<float*>(workspace);
  const CrossEntropyParams p = params_of(a);
  if (a.reduction == LossReduction::mean) {
    loom::detail::launch_on_stream(stream, cross_entropy_reduce, 1, kReduceBlock, 0,
                                   static_cast<const float*>(nullptr), a.labels,
                                   static_cast<float*>(nullptr), count, p);
    LOOM_KERNEL_CHECK_LAUNCH("cross_entropy_backward count launch");
  }
  dispatch(a.dtype, a.shape.cols, vectorizable(a.dtype, a.logits, a.grad, a.shape),
           [&](auto d, auto team, auto vec) {
             constexpr int kTeam = decltype(team)::value;
             loom::detail::launch_on_stream(
                 stream, cross_entropy_backward_rows<decltype(d)::value, kTeam, vec()>,
                 row_blocks<kTeam>(a.shape.rows), kBlock, 0, a.logits, a.labels,
                 static_cast<const float*>(a.lse), a.grad_loss, static_cast<const float*>(count),
                 a.grad, p);
           });
  LOOM_KERNEL_CHECK_LAUNCH("cross_entropy_backward kernel launch");
}

}  // namespace loom::kernels
