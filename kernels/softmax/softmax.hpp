#pragma once
// Softmax over the rows of a 2-D tensor, fp32 or bf16 (bf16 in and out, fp32
// math), each variant with the CPU reference.
//
//   y[i, j] = exp(x[i, j] - m_i) / sum_k exp(x[i, k] - m_i),  m_i = max_k x[i, k]
//
// Subtracting the row's maximum keeps exp() in range (rows of magnitude 80
// and beyond are fine; -inf entries contribute 0). Special rows, on every
// variant and the reference: a row whose entries are all -inf has no
// distribution and gives NaN everywhere (as 0/0 would); a row holding a NaN
// or +inf gives NaN everywhere.
//
// Rows may be strided (a row stride in elements, >= cols, for input and
// output each); columns are contiguous. y may be x (in place): every variant
// reads an element before writing it, within the same thread.
//
// Variants, in the order the lecture teaches them:
//   naive  a block a row, three passes over the row: the maximum, the sum of
//          exponentials, then the normalised output (3 reads, 1 write).
//   online a block a row, two passes: the maximum and the sum together, each
//          thread rescaling its running sum when its maximum grows, partial
//          (max, sum) pairs merged across the block (Milakov & Gimelshein,
//          2018); then the output (2 reads, 1 write).
//   fused  the row read once and kept in registers (1 read, 1 write):
//          a warp a row for rows up to 1024, a block a row up to 32768, and
//          on compute capability 9.0 and later a cluster of 8 blocks a row up
//          to 262144 when there are at least 32 rows (the blocks combine the
//          row's maximum and sum through distributed shared memory). Other
//          long rows take the online kernel with one block an SM (its second
//          read mostly hits L2) when there are many rows, or, for a few long
//          rows, split the row across blocks: each block's partial (max, sum)
//          goes to a workspace, and a second kernel merges them and writes the
//          output. The default; the op's choice for every shape.
// All variants use 16-byte loads and stores wherever x and y start equally
// far past a 16-byte boundary in every row (any offset, row length and
// stride): each row's ends are peeled, element by element, and its middle
// is read and written 16 bytes at a time. Otherwise every access is one
// element. The device code is softmax_kernels.cuh.

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/ops/softmax.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom::kernels {

using SoftmaxVariant = loom::ops::SoftmaxVariant;  // named by its table (loom/ops/variant.hpp)

/// What SoftmaxVariant::automatic runs.
inline constexpr SoftmaxVariant kSoftmaxDefault = SoftmaxVariant::fused;

/// rows x cols, with the distance between rows (in elements) of x and of y.
struct SoftmaxShape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t x_row_stride = 0;
  std::int64_t y_row_stride = 0;
};

/// Device scratch that softmax() needs for this shape and variant (0 for
/// most; the split-row path of `fused` keeps a (max, sum) pair a block).
std::size_t softmax_workspace_bytes(const SoftmaxShape& shape, SoftmaxVariant variant) noexcept;

/// Enqueues y = softmax(x) over rows on `stream`. dtype is f32 (float) or
/// bf16 (loom::bfloat16). Device pointers; `workspace` holds at least
/// softmax_workspace_bytes() (may be null when that is 0). An empty shape
/// launches nothing. @throws CudaError if a launch fails; InvalidArgument for
/// another dtype.
void softmax(const void* x, void* y, DType dtype, const SoftmaxShape& shape, void* workspace,
             StreamView stream, SoftmaxVariant variant = kSoftmaxDefault);

/// The CPU reference: double-precision math, rounded once to the output
/// dtype (bf16 as common/convert.hpp rounds it). Host pointers.
void softmax_reference(const void* x, void* y, DType dtype, const SoftmaxShape& shape);

}  // namespace loom::kernels
