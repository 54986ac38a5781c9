#pragma once
/// @file cute.hpp
/// A loom Tensor as a CuTe tensor, for your own kernels written over CuTe
/// (CUTLASS 4.x's layout algebra). Optional: it needs CUDA and CUTLASS's
/// include path (link loom::cuda_interop and CUTLASS's headers); the rest of
/// loom does not require CUTLASS.
///
/// The CuTe tensor views the loom tensor's elements in place: its pointer,
/// its shape and its strides (in elements), so a transposed or sliced view
/// reaches a kernel as exactly the elements it names. The layout is dynamic
/// (extents and strides are run-time values) with a static rank.
///
/// @code
/// template <class TX, class TY>
/// __global__ void scale(TX x, TY y, float a) {
///   const int i = blockIdx.x * blockDim.x + threadIdx.x;
///   if (i < cute::size(x)) y(i) = a * x(i);  // any layouts, one logical order
/// }
/// g.add(loom::kernel_task("scale", {x}, {y}, [=](loom::KernelContext& k) {
///   auto cx = loom::cute_tensor<const float, 2>(x);
///   auto cy = loom::cute_tensor<float, 2>(y.transpose(0, 1));
///   loom::launch(k, scale<decltype(cx), decltype(cy)>, grid, block, 0, cx, cy, 2.0f);
/// }));
/// @endcode

#include <loom/cuda_interop.hpp>
#include <loom/dtype.hpp>
#include <loom/error.hpp>
#include <loom/tensor.hpp>

#include <cute/numeric/numeric_types.hpp>
#include <cute/tensor.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace loom {

namespace detail {

/// The loom dtype of a CuTe element type: loom's own types, and CuTe's half
/// and bfloat16 for the f16 and bf16 patterns.
template <class T>
constexpr DType cute_dtype() noexcept {
  if constexpr (std::is_same_v<T, cute::half_t>) {
    return DType::f16;
  } else if constexpr (std::is_same_v<T, cute::bfloat16_t>) {
    return DType::bf16;
  } else {
    return dtype_of<T>();
  }
}

template <class T, std::size_t... I>
auto cute_tensor_of(const Tensor& t, T* data, std::index_sequence<I...>) {
  return cute::make_tensor(cute::make_gmem_ptr(data),
                           cute::make_layout(cute::make_shape(t.shape()[int(I)]...),
                                             cute::make_stride(t.strides()[int(I)]...)));
}

}  // namespace detail

/// The CuTe tensor over `t`'s elements: element type T (const T for a
/// read-only view), rank R, a global-memory pointer and a layout with t's
/// extents and strides as std::int64_t. Valid as long as t's storage is; for
/// a device tensor, dereference it on the device only.
/// @throws InvalidArgument when t is undefined, its rank is not R, or its
/// dtype is not T's.
/// Thread-safe: reads t only.
template <class T, int R>
auto cute_tensor(const Tensor& t) {
  static_assert(R >= 1 && R <= Dims::kMaxRank, "loom::cute_tensor: rank out of range");
  using Element = std::remove_cv_t<T>;
  if (!t.defined()) throw InvalidArgument("cute_tensor: the tensor is undefined");
  if (t.rank() != R) {
    throw InvalidArgument("cute_tensor: expected a tensor of rank " + std::to_string(R) + ", got " +
                          t.describe());
  }
  constexpr DType expected = detail::cute_dtype<Element>();
  if (t.dtype() != expected) {
    throw InvalidArgument("cute_tensor: expected dtype " + std::string(to_string(expected)) +
                          ", got " + t.describe());
  }
  T* data = static_cast<T*>(t.data());
  return detail::cute_tensor_of(t, data, std::make_index_sequence<R>{});
}

}  // namespace loom
