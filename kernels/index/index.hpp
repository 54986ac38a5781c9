#pragma once
// The index ops of a training step (argmax/argmin, gather, scatter_add,
// one_hot, index_select), each with its CPU reference.
//
// Every kernel walks the elements of one shape (the output's, or for
// scatter_add the source's) through an IndexWalk: up to kIndexMaxRank
// extents with, for each of up to three operands, a stride (in elements, or
// in the walk's units) along each. The op layer derives the walk from the
// tensors once: it drops extents of 1 and merges neighbours that every
// operand steps through evenly, so a contiguous case is a walk of rank 1 or
// 2 whatever the tensors' ranks. The indexed operand's stride along the
// indexed dimension is 0 in the walk: an index value selects there instead,
// times IndexedWalk::indexed_stride.
//
// gather and index_select are the same kernel (index_select's index has
// stride 0 outside the indexed dimension). They move elements as raw units
// of 2 or 4 bytes, or 16 (several elements at once) where the innermost
// dimension allows it, so the instantiations do not grow with the dtypes.
//
// An index outside [0, extent) cannot raise on a GPU; it shows in the
// result, identically on both backends: gather, index_select and one_hot
// write NaN (the dtype's canonical NaN, common/convert.hpp) where it was
// used (one_hot: the label's whole row), and scatter_add skips the element.

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>

#include <cstdint>

namespace loom::kernels {

inline constexpr int kIndexMaxRank = 8;
/// The operands an IndexWalk steps through together.
inline constexpr int kWalkOperands = 3;

/// Extents and per-operand strides of a walk over `count` elements,
/// row-major (the last extent varies fastest). Holds no pointer: a compiled
/// graph may describe a launch that takes it.
struct IndexWalk {
  static constexpr bool loom_pointer_free = true;
  int rank = 0;
  std::int64_t count = 0;
  std::int64_t extent[kIndexMaxRank] = {};
  std::int64_t stride[kWalkOperands][kIndexMaxRank] = {};
};

/// A walk whose operand kIndexed is addressed by an index value too:
/// element index * indexed_stride, for indices in [0, indexed_extent).
struct IndexedWalk {
  static constexpr bool loom_pointer_free = true;
  IndexWalk walk;
  std::int64_t indexed_extent = 0;
  std::int64_t indexed_stride = 0;
};

/// The operands of gather's walk (and index_select's).
enum GatherOperand : int { kGatherOut = 0, kGatherX = 1, kGatherIndex = 2 };
/// The operands of scatter_add's walk (over src's shape).
enum ScatterOperand : int { kScatterDst = 0, kScatterSrc = 1, kScatterIndex = 2 };

/// out[o] = x[xo + index[io] * indexed_stride] over the walk (strides in
/// elements of element_bytes, 2 or 4), or NaN where the index is out of
/// range: `nan_word` is the 32-bit pattern a NaN element's bytes repeat
/// (0x7FFFFFFF for f32, 0x7FFF7FFF for f16 and bf16). index_dtype is i32 or
/// i64. Moves 16 bytes a thread where the innermost dimension of out and x is
/// contiguous and 16-byte aligned and index is constant along it
/// (index_select of rows). An empty walk launches nothing.
/// @throws CudaError if a launch fails.
void gather(const void* x, const void* index, DType index_dtype, void* out, int element_bytes,
            std::uint32_t nan_word, const IndexedWalk& walk, StreamView stream);

/// dst[d + index[i] * indexed_stride] += src[s] over the walk (f32), with
/// atomics: the order of the additions to one element is unspecified.
/// Out-of-range indices are skipped.
void scatter_add(float* dst, const void* index, DType index_dtype, const float* src,
                 const IndexedWalk& walk, StreamView stream);

/// out [rows, classes] contiguous, of 2- or 4-byte elements: `one_bits`
/// where j == labels[i * label_stride], 0 elsewhere, and `nan_bits` across a
/// row whose label is out of [0, classes).
struct OneHotShape {
  static constexpr bool loom_pointer_free = true;
  std::int64_t rows = 0;
  std::int64_t classes = 0;
  std::int64_t label_stride = 1;
  std::uint32_t one_bits = 0;
  std::uint32_t nan_bits = 0;
  int element_bytes = 4;
};
void one_hot(const void* labels, DType label_dtype, void* out, const OneHotShape& shape,
             StreamView stream);

enum class ArgReduce : std::uint8_t { max, min };
/// The operands of arg_reduce's walk.
enum ArgOperand : int { kArgX = 0, kArgIndices = 1, kArgValues = 2 };

/// x viewed as outputs x n: the walk over the outputs' shape puts output
/// o's first element in x (operand kArgX, stepping `reduced_stride` to the
/// next), its index (i64, operand kArgIndices) and its value (x's dtype,
/// operand kArgValues; values may be null). The first index of the best
/// element wins; a NaN beats every number (its first occurrence), for max
/// and min alike. A warp reduces a row where the reduced dimension is
/// contiguous and at least 32 long; elsewhere a thread walks an output's row.
struct ArgReduceShape {
  static constexpr bool loom_pointer_free = true;
  IndexWalk outputs;
  std::int64_t reduced = 0;  ///< n >= 1
  std::int64_t reduced_stride = 0;
};
void arg_reduce(ArgReduce op, const void* x, DType dtype, std::int64_t* indices, void* values,
                const ArgReduceShape& shape, StreamView stream);

// The CPU references: the same walks and rules, host pointers; what the CPU
// backend runs. scatter_add adds in the walk's row-major order. gather's
// reference takes units of any size (up to 16 bytes), so that the GPU's
// 16-byte walk can be checked against the element walk here.
void gather_reference(const void* x, const void* index, DType index_dtype, void* out,
                      int element_bytes, std::uint32_t nan_word, const IndexedWalk& walk);
void scatter_add_reference(float* dst, const void* index, DType index_dtype, const float* src,
                           const IndexedWalk& walk);
void one_hot_reference(const void* labels, DType label_dtype, void* out, const OneHotShape& shape);
void arg_reduce_reference(ArgReduce op, const void* x, DType dtype, std::int64_t* indices,
                          void* values, const ArgReduceShape& shape);

}  // namespace loom::kernels
