#pragma once
/// @file ops/elementwise.hpp
/// Elementwise maps and their fusion (Lectures 2, 8).
///
/// Maps: every element of the output from the elements at the same index of
/// the inputs, computed in f32 and rounded once (to nearest even) to the
/// output's dtype. Which dtypes each takes:
///   add, mul, axpby, relu, gelu_tanh  one dtype for all operands: f32, f16 or bf16
///   cast                              any of f32, f16, bf16 to any of them
/// Shapes must be equal (no broadcasting). Strided views (slices,
/// transposes) are accepted, up to rank 8 (every loom tensor); contiguous
/// tensors take the vectorized path. The output may be one of the inputs
/// (the same view: in place), but may not overlap an input otherwise, nor
/// itself (a view with a zero stride). Everything is checked at submit, and
/// a rejection names the task.
///
/// Fusion: a chain of maps, composed as a MapExpr over the inputs of
/// fused_map(), runs as one kernel, compiled at run time for the device (once
/// per distinct chain, then cached; see kernels/elementwise/fusion.hpp). The
/// CPU backend evaluates the same chain.
///
/// @code
/// using loom::ops::MapExpr;
/// auto x = MapExpr::input(0), y = MapExpr::input(1);
/// g.add(loom::ops::fused_map({dx, dy}, dz, loom::ops::relu(loom::ops::axpby(2.0F, x, -1.0F, y))));
/// g.add(loom::ops::gelu_tanh(dz, dz));                       // a single map, in place
/// @endcode
///
/// Thread-safety: the factories may be called from any thread; MapExpr is an
/// immutable value.

#include <loom/dtype.hpp>
#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/tensor.hpp>

#include <memory>
#include <string>
#include <vector>

namespace loom {
namespace detail {
struct MapNode;  ///< loom's own (kernels/elementwise/op.cpp)
}  // namespace detail

namespace ops {

/// c = a + b, elementwise over f32 tensors of one shape; c may alias a or b.
LOOM_API OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c);
/// Every element of the f32 tensor t becomes `value`.
LOOM_API OpPtr fill(const Tensor& t, float value);
/// dst = alpha * src over f32 tensors of one shape; dst may alias src.
LOOM_API OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha);

/// out = a + b. @throws nothing; inputs are checked at submit.
LOOM_API OpPtr add(const Tensor& a, const Tensor& b, const Tensor& out);
/// out = a * b.
LOOM_API OpPtr mul(const Tensor& a, const Tensor& b, const Tensor& out);
/// out = alpha * x + beta * y.
LOOM_API OpPtr axpby(float alpha, const Tensor& x, float beta, const Tensor& y, const Tensor& out);
/// out = max(x, 0); NaN stays NaN.
LOOM_API OpPtr relu(const Tensor& x, const Tensor& out);
/// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GELU's tanh form,
/// computed as x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), the same
/// function (the GPU's result is within a few f32 ulp of the CPU's).
LOOM_API OpPtr gelu_tanh(const Tensor& x, const Tensor& out);
/// out = x converted to out's dtype (f32, f16, bf16), rounding to nearest even.
LOOM_API OpPtr cast(const Tensor& x, const Tensor& out);

/// An expression over the inputs of fused_map(): a chain (or any DAG) of
/// maps. Values are f32 inside; cast() rounds where the chain asks.
class LOOM_API MapExpr {
 public:
  /// The index-th input tensor of fused_map() (checked at submit).
  static MapExpr input(int index);
  /// A scalar; it is a kernel argument, so changing it recompiles nothing.
  static MapExpr constant(float value);

  /// loom's own: the expression's node (incomplete outside loom).
  explicit MapExpr(std::shared_ptr<const loom::detail::MapNode> node) noexcept;
  const std::shared_ptr<const loom::detail::MapNode>& node() const noexcept { return node_; }
  /// "relu(axpby(2, in0, -1, in1))".
  std::string to_string() const;

 private:
  std::shared_ptr<const loom::detail::MapNode> node_;
};

LOOM_API MapExpr add(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr mul(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr axpby(float alpha, const MapExpr& x, float beta, const MapExpr& y);
LOOM_API MapExpr relu(const MapExpr& x);
LOOM_API MapExpr gelu_tanh(const MapExpr& x);
/// x rounded to `dtype` (f32, f16 or bf16; checked at submit), as a cast to a
/// tensor of that dtype and back would.
LOOM_API MapExpr cast(const MapExpr& x, DType dtype);
LOOM_API MapExpr operator+(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator*(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator*(float s, const MapExpr& x);

/// out = expr(inputs...), one kernel for the whole chain. Inputs and out are
/// contiguous f32, f16 or bf16 tensors of one shape in one memory space (at
/// most 8 inputs, 32 scalars, 256 maps); out may be one of the inputs.
/// On the CUDA backend the chain is compiled with NVRTC the first time it is
/// seen (at submit where a GPU is visible), then cached for the process.
LOOM_API OpPtr fused_map(std::vector<Tensor> inputs, const Tensor& out, const MapExpr& expr);

}  // namespace ops
}  // namespace loom
