// Whole-array reductions: the lecture's five first passes, the one-block
// final pass, and the host launcher that chains them (see reduce.hpp).
#include "common/check.hpp"
#include "common/launch.hpp"
#include "reduction/reduce.hpp"
#include "reduction/reduce_device.cuh"

#include <algorithm>
#include <string>

namespace loom::kernels {
namespace {

using reduce_detail::align_up;
using reduce_detail::block_reduce;
using reduce_detail::Fold;
using reduce_detail::to_f32;

constexpr int kTeachBlock = 256;  // threads of the four teaching variants
constexpr int kCoarsen = 8;       // coarsened: each thread folds 2 x kCoarsen elements
constexpr int kFastBlock = 256;   // warp_shuffle
constexpr int kFinalBlock = 1024;

// Element i as f32, or the identity past the end: partial blocks need no branch.
template <class T, ReduceOp kOp>
__device__ __forceinline__ float load_or_identity(const T* gX, std::size_t n, std::size_t i) {
  return i < n ? to_f32(gX[i]) : Fold<kOp>::identity();
}

// Lecture 9's first kernel: thread t owns elements 2t and 2t+1 of its block's
// 2 x kTeachBlock; at step `stride` the threads with t % stride == 0 fold the
// element `stride` away into theirs. Half the lanes of a warp idle from the
// first step on (divergence). The tree works in this block's slice of a
// global scratch array, as the lecture's works on its input in place.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kTeachBlock)
    reduce_interleaved_kernel(const T* __restrict__ gX, std::size_t n, float* gScratch,
                              float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  const unsigned t = threadIdx.x;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * (2 * kTeachBlock);
  float* gS = gScratch + base;  // (2 * kTeachBlock)
  gS[2 * t] = load_or_identity<T, kOp>(gX, n, base + 2 * t);
  gS[2 * t + 1] = load_or_identity<T, kOp>(gX, n, base + 2 * t + 1);
  __syncthreads();
  for (unsigned stride = 1; stride <= kTeachBlock; stride *= 2) {
    if (t % stride == 0) gS[2 * t] = F::apply(gS[2 * t], gS[2 * t + stride]);
    __syncthreads();
  }
  if (t == 0) gPartials[blockIdx.x] = gS[0];
}

// Sequential addressing: at step `stride` threads t < stride fold element
// t + stride into t. The busy threads stay packed in the first warps, which
// retire whole, and neighbouring threads touch neighbouring addresses.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kTeachBlock)
    reduce_divergence_free_kernel(const T* __restrict__ gX, std::size_t n, float* gScratch,
                                  float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  const unsigned t = threadIdx.x;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * (2 * kTeachBlock);
  float* gS = gScratch + base;  // (2 * kTeachBlock)
  gS[t] = load_or_identity<T, kOp>(gX, n, base + t);
  gS[t + kTeachBlock] = load_or_identity<T, kOp>(gX, n, base + t + kTeachBlock);
  __syncthreads();
  for (unsigned stride = kTeachBlock; stride >= 1; stride /= 2) {
    if (t < stride) gS[t] = F::apply(gS[t], gS[t + stride]);
    __syncthreads();
  }
  if (t == 0) gPartials[blockIdx.x] = gS[0];
}

// The tree in shared memory, seeded by a first fold during the load: global
// memory is read once, and half the scratch and the first step are gone.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kTeachBlock)
    reduce_shared_kernel(const T* __restrict__ gX, std::size_t n, float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  __shared__ float sX[kTeachBlock];
  const unsigned t = threadIdx.x;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * (2 * kTeachBlock);
  sX[t] = F::apply(load_or_identity<T, kOp>(gX, n, base + t),
                   load_or_identity<T, kOp>(gX, n, base + t + kTeachBlock));
  for (unsigned stride = kTeachBlock / 2; stride >= 1; stride /= 2) {
    __syncthreads();
    if (t < stride) sX[t] = F::apply(sX[t], sX[t + stride]);
  }
  if (t == 0) gPartials[blockIdx.x] = sX[0];
}

// Thread coarsening: each thread folds 2 x kCoarsen elements, kTeachBlock
// apart (coalesced), in registers before the shared tree, so a block covers
// kCoarsen times more input for the same tree and one partial.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kTeachBlock)
    reduce_coarsened_kernel(const T* __restrict__ gX, std::size_t n,
                            float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  __shared__ float sX[kTeachBlock];
  const unsigned t = threadIdx.x;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * (2 * kCoarsen * kTeachBlock);
  float acc = load_or_identity<T, kOp>(gX, n, base + t);
#pragma unroll
  for (int tile = 1; tile < 2 * kCoarsen; ++tile) {
    acc = F::apply(acc, load_or_identity<T, kOp>(gX, n, base + t + tile * kTeachBlock));
  }
  sX[t] = acc;
  for (unsigned stride = kTeachBlock / 2; stride >= 1; stride /= 2) {
    __syncthreads();
    if (t < stride) sX[t] = F::apply(sX[t], sX[t + stride]);
  }
  if (t == 0) gPartials[blockIdx.x] = sX[0];
}

// The fast pass. The grid strides through the array in 16-byte vectors, each
// thread with kUnroll loads in flight (kFastBlock apart: each is coalesced)
// before it folds them; the unaligned head and the tail (each shorter than a
// vector) go to the first threads. Warps combine by shuffles.
template <class T, ReduceOp kOp, int kUnroll>
__global__ void __launch_bounds__(kFastBlock)
    reduce_warp_shuffle_kernel(const T* __restrict__ gX, std::size_t n,
                               float* __restrict__ gPartials) {
  using F = Fold<kOp>;
  constexpr int kPer = reduce_detail::kPerVector<T>;
  const std::size_t head = reduce_detail::head_elements(gX, n);
  const std::size_t vectors = (n - head) / kPer;
  const std::size_t tail = head + vectors * kPer;
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * kFastBlock + threadIdx.x;
  float acc = F::identity();
  if (thread < head) acc = F::apply(acc, to_f32(gX[thread]));
  if (tail + thread < n) acc = F::apply(acc, to_f32(gX[tail + thread]));

  const auto* gV = reinterpret_cast<const uint4*>(gX + head);  // (vectors)
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * (kFastBlock * kUnroll);
  std::size_t v = static_cast<std::size_t>(blockIdx.x) * (kFastBlock * kUnroll) + threadIdx.x;
  for (; v + (kUnroll - 1) * kFastBlock < vectors; v += step) {
    uint4 rV[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) rV[u] = reduce_detail::load_vector(gV + v + u * kFastBlock);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc = reduce_detail::fold_vector<T, kOp>(acc, rV[u]);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (v + u * kFastBlock < vectors) {
      acc = reduce_detail::fold_vector<T, kOp>(acc,
                                               reduce_detail::load_vector(gV + v + u * kFastBlock));
    }
  }
  acc = block_reduce<kOp, kFastBlock>(acc);
  if (threadIdx.x == 0) gPartials[blockIdx.x] = acc;
}

// One block folds everything: the partials of a first pass, or a whole small
// input. Thread t folds elements t, t + kFinalBlock, ... in order.
template <class T, ReduceOp kOp>
__global__ void __launch_bounds__(kFinalBlock)
    reduce_final_kernel(const T* __restrict__ gX, std::size_t n, void* out, DType out_dtype) {
  using F = Fold<kOp>;
  float acc = F::identity();
  for (std::size_t i = threadIdx.x; i < n; i += kFinalBlock) acc = F::apply(acc, to_f32(gX[i]));
  acc = block_reduce<kOp, kFinalBlock>(acc);
  if (threadIdx.x == 0) reduce_detail::store(out, out_dtype, 0, acc);
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Elements one block of a teaching variant covers.
ReduceVariant resolved(ReduceVariant variant) {
  return variant == ReduceVariant::automatic ? kReduceDefault : variant;
}

std::size_t teaching_span(ReduceVariant variant) {
  return variant == ReduceVariant::coarsened ? 2 * kCoarsen * kTeachBlock : 2 * kTeachBlock;
}

bool uses_global_scratch(ReduceVariant variant) {
  return variant == ReduceVariant::interleaved || variant == ReduceVariant::divergence_free;
}

// The most blocks any first pass over n elements launches.
std::size_t max_first_pass_blocks(std::size_t n, ReduceVariant variant) {
  if (variant == ReduceVariant::warp_shuffle) return kMaxBlocks;
  return ceil_div(n, teaching_span(variant));
}

// warp_shuffle's grid: what n needs, capped by a fixed count (the default,
// and always in deterministic mode) or, when tuning asks for blocks a
// multiprocessor, by the machine. n alone sets the need (not the head that
// alignment splits off), so the grid does not move with the address.
template <class T, ReduceOp kOp, int kUnroll>
unsigned warp_shuffle_blocks(std::size_t n, const ReduceConfig& config) {
  const std::size_t per_block = std::size_t{kFastBlock} * kUnroll * reduce_detail::kPerVector<T>;
  const std::size_t needed = std::max<std::size_t>(1, ceil_div(n, per_block));
  std::size_t cap = kDeterministicBlocks;
  if (!config.deterministic && config.blocks_per_sm > 0) {
    int device = 0;
    int sms = 0;
    const int per_sm = config.blocks_per_sm;
    LOOM_KERNEL_CHECK(cudaGetDevice(&device));
    LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cap =
        std::clamp<std::size_t>(static_cast<std::size_t>(sms) * std::max(per_sm, 1), 1, kMaxBlocks);
  }
  return static_cast<unsigned>(std::min(needed, cap));
}

// Where each part of the workspace lives: a second level of partials for
// first passes with many blocks, the first pass's partials, and the global
// scratch of the first two teaching variants.
struct WorkspaceLayout {
  float* level2 = nullptr;
  float* partials = nullptr;
  float* scratch = nullptr;
};

WorkspaceLayout carve(void* workspace, std::size_t n, ReduceVariant variant) {
  auto* base = static_cast<char*>(workspace);
  WorkspaceLayout w;
  w.level2 = reinterpret_cast<float*>(base);
  base += align_up(kMaxBlocks * sizeof(float));
  w.partials = reinterpret_cast<float*>(base);
  base += align_up(max_first_pass_blocks(n, variant) * sizeof(float));
  if (uses_global_scratch(variant)) w.scratch = reinterpret_cast<float*>(base);
  return w;
}

template <class T, ReduceOp kOp, int kUnroll>
unsigned launch_warp_shuffle(const T* x, std::size_t n, float* partials, ReduceConfig config,
                             StreamView stream) {
  const unsigned blocks = warp_shuffle_blocks<T, kOp, kUnroll>(n, config);
  loom::detail::launch_on_stream(stream, reduce_warp_shuffle_kernel<T, kOp, kUnroll>, blocks,
                                 kFastBlock, 0, x, n, partials);
  return blocks;
}

template <class T, ReduceOp kOp>
unsigned launch_first_pass(const T* x, std::size_t n, const WorkspaceLayout& w, ReduceConfig config,
                           StreamView stream) {
  if (config.variant == ReduceVariant::warp_shuffle) {
    switch (config.unroll) {
      case 2: return launch_warp_shuffle<T, kOp, 2>(x, n, w.partials, config, stream);
      case 8: return launch_warp_shuffle<T, kOp, 8>(x, n, w.partials, config, stream);
      default: return launch_warp_shuffle<T, kOp, kDefaultUnroll>(x, n, w.partials, config, stream);
    }
  }
  const auto blocks = static_cast<unsigned>(ceil_div(n, teaching_span(config.variant)));
  switch (config.variant) {
    case ReduceVariant::interleaved:
      loom::detail::launch_on_stream(stream, reduce_interleaved_kernel<T, kOp>, blocks, kTeachBlock,
                                     0, x, n, w.scratch, w.partials);
      break;
    case ReduceVariant::divergence_free:
      loom::detail::launch_on_stream(stream, reduce_divergence_free_kernel<T, kOp>, blocks,
                                     kTeachBlock, 0, x, n, w.scratch, w.partials);
      break;
    case ReduceVariant::shared:
      loom::detail::launch_on_stream(stream, reduce_shared_kernel<T, kOp>, blocks, kTeachBlock, 0,
                                     x, n, w.partials);
      break;
    default:
      loom::detail::launch_on_stream(stream, reduce_coarsened_kernel<T, kOp>, blocks, kTeachBlock,
                                     0, x, n, w.partials);
      break;
  }
  return blocks;
}

}  // namespace

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "unknown";
}

bool reducible(DType dtype) noexcept {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

std::size_t reduce_workspace_bytes(std::size_t n, ReduceConfig config) {
  if (n <= kSingleBlockMax) return 0;
  config.variant = resolved(config.variant);
  const std::size_t blocks = max_first_pass_blocks(n, config.variant);
  std::size_t bytes = align_up(kMaxBlocks * sizeof(float)) + align_up(blocks * sizeof(float));
  if (uses_global_scratch(config.variant)) {
    bytes += align_up(blocks * teaching_span(config.variant) * sizeof(float));
  }
  return bytes;
}

void reduce(ReduceOp op, const void* x, DType dtype, std::size_t n, void* out, DType out_dtype,
            void* workspace, StreamView stream, ReduceConfig config) {
  reduce_detail::require_output_dtype(out_dtype);
  if (config.unroll != 2 && config.unroll != 4 && config.unroll != 8) {
    throw InvalidArgument("reduce: unroll must be 2, 4 or 8, got " + std::to_string(config.unroll));
  }
  config.variant = resolved(config.variant);
  reduce_detail::dispatch(dtype, op, [&](auto type, auto op_tag) {
    using T = typename decltype(type)::type;
    constexpr ReduceOp kOp = decltype(op_tag)::value;
    const auto* gX = static_cast<const T*>(x);
    if (n <= kSingleBlockMax) {
      loom::detail::launch_on_stream(stream, reduce_final_kernel<T, kOp>, 1, kFinalBlock, 0, gX, n,
                                     out, out_dtype);
      LOOM_KERNEL_CHECK_LAUNCH("reduce: single-block kernel launch");
      return;
    }
    const WorkspaceLayout w = carve(workspace, n, config.variant);
    std::size_t partials = launch_first_pass<T, kOp>(gX, n, w, config, stream);
    LOOM_KERNEL_CHECK_LAUNCH("reduce: first-pass kernel launch");
    const float* last = w.partials;
    if (partials > kSingleBlockMax) {
      // Teaching variants leave a partial per 512 or 4096 elements; fold
      // them with the fast pass before the one-block pass.
      partials = launch_warp_shuffle<float, kOp, kDefaultUnroll>(w.partials, partials, w.level2,
                                                                 config, stream);
      LOOM_KERNEL_CHECK_LAUNCH("reduce: second-pass kernel launch");
      last = w.level2;
    }
    loom::detail::launch_on_stream(stream, reduce_final_kernel<float, kOp>, 1, kFinalBlock, 0, last,
                                   partials, out, out_dtype);
    LOOM_KERNEL_CHECK_LAUNCH("reduce: final-pass kernel launch");
  });
}

}  // namespace loom::kernels
