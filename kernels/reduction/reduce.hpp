#pragma once
// Reductions (Lecture 9): sum, max and min over f32, f16 and bf16, always
// accumulated in f32, of a whole array (any length that fits in memory) or of
// many segments at once (the rows or the columns of a 2-D view, any strides).
//
// Whole-array variants, in the order the lecture teaches them. Each block of
// the first pass leaves one f32 partial; a one-block final pass folds the
// partials in block order (no atomics anywhere, see "Determinism" below).
//   interleaved      each thread starts with two elements; the tree pairs
//                    elements 1, 2, 4, ... apart and keeps thread t busy only
//                    while t % stride == 0: divergent warps. Like the lecture,
//                    the tree works in global memory (a scratch copy, as the
//                    input is read-only: the workspace holds n floats).
//   divergence_free  the same tree with sequential addressing: the active
//                    threads are always the first `stride`, so whole warps
//                    retire together and accesses are contiguous.
//   shared           the tree moves to shared memory, and the first step
//                    happens during the load (each thread adds its two
//                    elements), so global memory is read once and written
//                    never.
//   coarsened        each thread folds kCoarsen x 2 elements in registers
//                    before the tree: 8x fewer blocks, partials and trees.
//   warp_shuffle     the fast one: a grid sized to the machine strides
//                    through the array with 16-byte loads, several in
//                    flight per thread; warps reduce through register
//                    shuffles, and only one value a warp touches shared memory.
//
// Below kSingleBlockMax elements every variant is served by the final pass
// alone (one launch, one block): launch latency dominates there.
//
// Empty input: the identity of the operation (sum 0, max -inf, min +inf).
// NaN propagates: an input NaN makes sum, max and min NaN.
//
// Determinism: no variant uses atomics; every thread folds a fixed set of
// elements in a fixed order and trees combine them in a fixed order, so the
// same input on the same device gives the same bits on every run.
// warp_shuffle's grid is kDeterministicBlocks (capped by what n needs: a
// function of n only), so every GPU gives the same bits too (for one
// ReduceConfig::unroll: the tuning knob moves elements between threads).
// That fixed grid is also the faster one on the H200 (bench_reduction,
// 2026-12-03: 1.00x CUB for an f32 sum of 2^30 against 0.98x for a grid of
// the SM count times the blocks an SM holds). Only the tuning knob
// ReduceConfig::blocks_per_sm sizes the grid from the machine, and then
// ReduceConfig::deterministic (keep the fixed grid) wins. Segmented reductions never depend on the
// machine. Both depend on the input's address modulo 16 bytes (where 16-byte loads start).

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/ops/reduction.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::kernels {

enum class ReduceOp : std::uint8_t { sum, max, min };

using ReduceVariant = loom::ops::ReductionVariant;  // named by its table (loom/ops/variant.hpp)

/// What ReduceVariant::automatic runs.
inline constexpr ReduceVariant kReduceDefault = ReduceVariant::warp_shuffle;
/// Inputs up to this many elements are reduced by one block in one launch.
inline constexpr std::size_t kSingleBlockMax = std::size_t{1} << 14;
/// warp_shuffle's grid in deterministic mode (and its cap otherwise).
inline constexpr unsigned kDeterministicBlocks = 2048;
inline constexpr unsigned kMaxBlocks = 4096;
/// warp_shuffle's 16-byte loads in flight per thread, by default.
inline constexpr int kDefaultUnroll = 4;

std::string_view to_string(ReduceOp op) noexcept;
/// True for f32, f16 and bf16: the dtypes the reductions read and write.
bool reducible(DType dtype) noexcept;

struct ReduceConfig {
  ReduceVariant variant = kReduceDefault;
  /// The same bits on every GPU, not only on every run (see the file comment).
  bool deterministic = false;
  /// warp_shuffle: 16-byte loads in flight per thread (2, 4 or 8), for tuning.
  int unroll = kDefaultUnroll;
  /// warp_shuffle, for tuning: blocks a multiprocessor (0: the fixed grid of
  /// kDeterministicBlocks, the default). The grid is capped at kMaxBlocks.
  int blocks_per_sm = 0;
};

/// Bytes of device workspace reduce() needs for n elements (0 when none).
std::size_t reduce_workspace_bytes(std::size_t n, ReduceConfig config = {});

/// Enqueues *out = op(x[0], ..., x[n-1]) on `stream`: x holds n elements of
/// `dtype` (f32, f16 or bf16), out one element of `out_dtype` (the same
/// three), both device pointers; `workspace` holds reduce_workspace_bytes()
/// bytes (256-byte aligned). No alignment needed for x. @throws CudaError if
/// a launch fails; InvalidArgument for another dtype.
void reduce(ReduceOp op, const void* x, DType dtype, std::size_t n, void* out, DType out_dtype,
            void* workspace, StreamView stream, ReduceConfig config = {});

/// The CPU reference, accumulated in double (sums) over host memory.
double reduce_reference(ReduceOp op, const void* x, DType dtype, std::size_t n);

/// `batch` x `count` segments of `length` elements: element k of segment s
/// of batch b is at x[b * batch_stride + s * segment_stride + k *
/// element_stride] (strides in elements, any sign), and its result goes to
/// out[b * out_batch_stride + s * out_stride]. Rows of a row-major [R, C]
/// matrix: {R, C, C, 1}; its columns: {C, R, 1, C}; the middle dimension of a
/// contiguous [B, S, H]: {H, S, 1, H, B, S * H, H}.
struct Segments {
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  std::int64_t count = 0;
  std::int64_t length = 0;
  std::int64_t segment_stride = 0;
  std::int64_t element_stride = 1;
  std::int64_t batch = 1;
  std::int64_t batch_stride = 0;
  std::int64_t out_batch_stride = 0;
};

/// Bytes of device workspace reduce_segments() needs (0 when none).
std::size_t reduce_segments_workspace_bytes(const Segments& segments);

/// Enqueues the reduction of every segment into out (see Segments). A
/// warp per segment (split into chunks when few segments are long) where the
/// elements are at least as close as the segments; a thread per segment,
/// neighbours reading neighbouring segments (4 or 8 of them a thread with
/// 16-byte loads where they are contiguous and aligned), where the segments
/// are closer (column sums). Empty segments give the identity.
/// Deterministic: the chunking depends on the shape and that alignment only.
/// `workspace` holds reduce_segments_workspace_bytes() bytes, 16-byte
/// aligned. @throws CudaError if a launch fails; InvalidArgument for another
/// dtype.
void reduce_segments(ReduceOp op, const void* x, DType dtype, const Segments& segments, void* out,
                     DType out_dtype, std::int64_t out_stride, void* workspace, StreamView stream);

/// The CPU reference: out[b * count + s] for every segment, in double.
void reduce_segments_reference(ReduceOp op, const void* x, DType dtype, const Segments& segments,
                               double* out);

/// Host conversions of loom's 16-bit float patterns: common/convert.hpp's
/// (round to nearest even; any NaN to the canonical NaN), typed.
float to_float(half h) noexcept;
float to_float(bfloat16 b) noexcept;
half to_half(float f) noexcept;
bfloat16 to_bfloat16(float f) noexcept;

/// Stores v into element i of a host array of `dtype` (f32, f16, bf16).
void store_host(void* out, DType dtype, std::int64_t i, double v) noexcept;

}  // namespace loom::kernels
