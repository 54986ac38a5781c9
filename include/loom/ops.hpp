#pragma once
/// @file ops.hpp
/// The built-in ops (each a kernel of the catalogue with its CPU reference).
/// Each returns an op to add to a graph; inputs are checked by validate(),
/// at submit, and a bad input is reported naming the task.

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/gemm.hpp>
#include <loom/ops/image.hpp>
#include <loom/ops/reduction.hpp>
#include <loom/ops/softmax.hpp>

#include <cstdint>

namespace loom::ops {

/// c = a + b, elementwise over f32 tensors of one shape; c may alias a or b.
LOOM_API OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c);
/// Every element of the f32 tensor t becomes `value`.
LOOM_API OpPtr fill(const Tensor& t, float value);
/// dst = alpha * src over f32 tensors of one shape; dst may alias src.
LOOM_API OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha);
/// Busy-waits for `microseconds`, then adds 1 to the first element of the f32
/// tensor t: a stand-in for a kernel of known duration, for scheduling tests
/// and benchmarks.
LOOM_API OpPtr spin(const Tensor& t, std::int64_t microseconds);

}  // namespace loom::ops
