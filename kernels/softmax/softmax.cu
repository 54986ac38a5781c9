#include "softmax/softmax.hpp"

#include "common/check.hpp"
#include "common/convert.hpp"
#include "common/launch.hpp"

#include <loom/error.hpp>

#include <cooperative_groups.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::kernels::softmax_detail {
namespace cg = cooperative_groups;
}  // namespace loom::kernels::softmax_detail

#include "softmax/softmax_kernels.cuh"

namespace loom::kernels {
namespace {

using namespace softmax_detail;  // NOLINT: the kernels and their constants

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

// Whether every row of x starts as far past a 16-byte boundary as the same
// row of y, so that one RowPacks serves both and rows take wide accesses
// (peeling their ends). Else every access is one element.
template <class T>
bool packs_line_up(const void* x, const void* y, const SoftmaxShape& s) {
  const auto gap = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) -
                                             reinterpret_cast<std::uintptr_t>(y));
  const auto stride_gap = (s.x_row_stride - s.y_row_stride) * static_cast<std::int64_t>(sizeof(T));
  return gap % kVectorBytes == 0 && stride_gap % kVectorBytes == 0;
}

// The longest virtual row: the row itself when every row starts on a
// boundary, else up to a pack more.
template <class T>
std::int64_t row_span(const void* x, const SoftmaxShape& s, bool wide) {
  const bool every_row_aligned =
      reinterpret_cast<std::uintptr_t>(x) % kVectorBytes == 0 &&
      s.x_row_stride * static_cast<std::int64_t>(sizeof(T)) % kVectorBytes == 0;
  return wide && !every_row_aligned ? s.cols + kWide<T> - 1 : s.cols;
}

// Whether the cluster kernel can run on the current device: compute
// capability 9.0 or later, and an image of the kernel built for it (a build
// for older targets only gives a 9.0 device their PTX, whose cluster kernel
// traps and carries no cluster size). Asked once a device.
bool device_runs_clusters() {
  constexpr int kCachedDevices = 64;
  static std::array<std::atomic<int>, kCachedDevices> cache{};  // 0 unknown, 1 yes, 2 no
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    const int known = cache[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (known != 0) return known == 1;
  }
  int major = 0;
  LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  bool runs = major >= 9;
  if (runs) {
    cudaFuncAttributes attributes{};
    LOOM_KERNEL_CHECK(cudaFuncGetAttributes(&attributes, softmax_cluster_row<float, 32, 4>));
    runs = attributes.requiredClusterWidth == kClusterBlocks;
  }
  if (cacheable) cache[static_cast<std::size_t>(device)].store(runs ? 1 : 2);
  return runs;
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
void launch_block_row(const T* x, T* y, const SoftmaxShape& s, std::int64_t span, bool wide,
                      cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(s.rows);
  // Packed bf16 (rows past 16 elements a thread's 512): twice the elements
  // a thread in the same registers, so half the threads a row and twice the
  // rows an SM, with f32's bytes in flight. Shorter rows stay floats: a
  // thread there holds two packs, and computing the exponential twice cost
  // more than the registers saved (4096 x 4097 on an H100: 0.61 of a copy
  // packed, 0.73 as floats).
  if constexpr (std::is_same_v<T, bf16_bits> && N >= 32) {
    if (wide) {
      constexpr int kPackedN = 2 * N;
      const unsigned threads = threads_for((span + kPackedN - 1) / kPackedN, kMaxThreads);
      loom::detail::launch_on_stream(stream, softmax_block_row<T, kPackedN, kWide<T>, true>, blocks,
                                     threads, 0, x, y, s.cols, s.x_row_stride, s.y_row_stride);
      return;
    }
  }
  const unsigned threads = threads_for((span + N - 1) / N, kMaxThreads);
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

// A cluster of blocks a row, N = 32 elements a thread.
template <class T>
void launch_cluster_row(const T* x, T* y, const SoftmaxShape& s, std::int64_t slice, bool wide,
                        cudaStream_t stream) {
  constexpr int kN = 32;
  const auto blocks = static_cast<unsigned>(s.rows * kClusterBlocks);
  if constexpr (std::is_same_v<T, bf16_bits>) {
    if (wide) {  // packed, as launch_block_row's
      constexpr int kPackedN = 2 * kN;
      const unsigned threads = threads_for((slice + kPackedN - 1) / kPackedN, kMaxThreads);
      loom::detail::launch_on_stream(stream, softmax_cluster_row<T, kPackedN, kWide<T>, true>,
                                     blocks, threads, 0, x, y, s.cols, slice, s.x_row_stride,
                                     s.y_row_stride);
      return;
    }
  }
  const unsigned threads = threads_for((slice + kN - 1) / kN, kMaxThreads);
  with_vec<T>(wide, [&](auto vec) {
    loom::detail::launch_on_stream(stream, softmax_cluster_row<T, kN, decltype(vec)::value>, blocks,
                                   threads, 0, x, y, s.cols, slice, s.x_row_stride, s.y_row_stride);
  });
}

template <class T>
void launch_fused(const T* x, T* y, const SoftmaxShape& s, void* workspace, bool wide,
                  cudaStream_t stream) {
  const std::int64_t cols = s.cols;
  // Rows are sized by their virtual length: a peeled row may need a pack more.
  const std::int64_t span = row_span<T>(x, s, wide);
  if (span <= kWarpRowMax) {
    // The smallest power-of-two share per lane that holds the row.
    if (span <= 1 * kWarp) return launch_warp_row<T, 1>(x, y, s, wide, stream);
    if (span <= 2 * kWarp) return launch_warp_row<T, 2>(x, y, s, wide, stream);
    if (span <= 4 * kWarp) return launch_warp_row<T, 4>(x, y, s, wide, stream);
    if (span <= 8 * kWarp) return launch_warp_row<T, 8>(x, y, s, wide, stream);
    if (span <= 16 * kWarp) return launch_warp_row<T, 16>(x, y, s, wide, stream);
    return launch_warp_row<T, 32>(x, y, s, wide, stream);
  }
  if (span <= kRegisterRowMax) {
    // At most 512 threads while that suffices: two blocks an SM, one
    // reducing while the other loads.
    if (span <= 8 * 512) return launch_block_row<T, 8>(x, y, s, span, wide, stream);
    if (span <= 16 * 512) return launch_block_row<T, 16>(x, y, s, span, wide, stream);
    return launch_block_row<T, 32>(x, y, s, span, wide, stream);
  }
  const std::int64_t slice = cluster_slice(span, wide ? kWide<T> : 1);
  if (slice <= kRegisterRowMax && s.rows >= kClusterMinRows && device_runs_clusters()) {
    return launch_cluster_row<T>(x, y, s, slice, wide, stream);
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
  const dim3 grid(static_cast<unsigned>(split_chunks(s)), static_cast<unsigned>(s.rows));
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
  const bool wide = packs_line_up<T>(xv, yv, s);
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
  return static_cast<std::size_t>(shape.rows * split_chunks(shape)) * sizeof(MaxSum);
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
