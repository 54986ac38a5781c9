#pragma once
// Row losses over [rows, classes] logits (f32, f16 or bf16 in, f32 math),
// each kernel with its CPU reference:
//
//   log_softmax            y = x - lse(x) a row, lse = m + log(sum exp(x - m)), m = max x
//   cross_entropy          lse and loss = lse - x[label] a row, one read of the
//                          row (a running max and rescaled sum, as softmax's
//                          online variant), then the rows' losses reduced
//                          (mean or sum) by one block in a fixed order: the
//                          same bits on every run
//   cross_entropy_backward g = scale * (exp(x - lse) - [j == label]), one read
//                          and one write of the row
//
// A team of threads takes a row: a warp for rows up to kLossWarpRowMax
// classes (several rows a block), else a block. Rows whose elements are 16
// bytes aligned (pointer, row stride and length) move as 16-byte vectors.
//
// Labels (i32 or i64): ignore_index gives loss 0 and gradient 0, uncounted
// by a mean; any other label outside [0, classes) gives NaN loss and
// gradient (a kernel cannot throw; the references do the same).

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/ops/loss.hpp>

#include <cstddef>
#include <cstdint>

namespace loom::kernels {

using LossReduction = loom::ops::LossReduction;

inline constexpr std::int64_t kLossWarpRowMax = 1024;

/// rows x cols, with the distance between rows (in elements) of x and of y.
struct LossRows {
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t x_row_stride = 0;
  std::int64_t y_row_stride = 0;
};

struct CrossEntropyArgs {
  const void* logits = nullptr;
  DType dtype = DType::f32;
  LossRows shape;  // y: the gradient's rows (backward)
  const void* labels = nullptr;
  bool labels64 = false;
  std::int64_t ignore_index = -100;
  LossReduction reduction = LossReduction::mean;
  float* lse = nullptr;              // forward: written; backward: read
  float* loss = nullptr;             // forward: [rows] (none) or [1]
  const float* grad_loss = nullptr;  // backward: [rows] (none) or [1]; null means 1
  void* grad = nullptr;              // backward: the gradient, logits' dtype
};

/// Device scratch the forward and the backward need: the rows' losses before
/// a mean or a sum, and the count of rows not ignored.
std::size_t cross_entropy_workspace_bytes(const CrossEntropyArgs& args) noexcept;

/// Enqueue on `stream`. Device pointers; `workspace` holds at least
/// cross_entropy_workspace_bytes(). Rows have at least one class. No rows
/// make a mean NaN and a sum 0. @throws CudaError if a launch fails.
void log_softmax(const void* x, void* y, DType dtype, const LossRows& shape, StreamView stream);
void cross_entropy(const CrossEntropyArgs& args, void* workspace, StreamView stream);
void cross_entropy_backward(const CrossEntropyArgs& args, void* workspace, StreamView stream);

/// The CPU references: double-precision math, rounded once to the output
/// dtype. Host pointers.
void log_softmax_reference(const void* x, void* y, DType dtype, const LossRows& shape);
void cross_entropy_reference(const CrossEntropyArgs& args);
void cross_entropy_backward_reference(const CrossEntropyArgs& args);

}  // namespace loom::kernels
