#pragma once
/// @file ops/elementwise.hpp
/// Elementwise maps and their fusion (Lectures 2, 8).
///
/// Maps: every element of the output from the elements at the same index of
/// the inputs, computed in f32 and rounded once (to nearest even) to the
/// output's dtype. Which dtypes each takes:
///   every map but cast   one dtype for all operands: f32, f16 or bf16
///   cast                 any of f32, f16, bf16 to any of them
/// Broadcasting: an input's shape need only broadcast to out's (NumPy's
/// rule, dimensions aligned at the last: each equal or 1), as if expanded
/// with Tensor::expand; so a bias [N] adds to every row of [B, N], and a
/// tensor of shape [] or [1] is a scalar operand, read on the device at run
/// time (a hyperparameter that a compiled graph replays with new values:
/// write the tensor, replay). cast's shapes must be equal.
/// Strided views (slices, transposes, expanded views) are accepted, up to
/// rank 8 (every loom tensor); contiguous tensors take the vectorized path.
/// The output may be one of the inputs (the same view: in place), but may not
/// overlap an input otherwise, nor itself (a view with a zero stride).
/// Everything is checked at submit, and a rejection names the task.
///
/// Comparisons (gt, ge, lt, le, eq) give masks in their operands' dtype, 1
/// where true and 0 where false (false where either is NaN), for where() and
/// for multiplying with. The GPU's exp, log, tanh, pow, rsqrt and the like
/// are CUDA's (within 2 ulp or so of the CPU backend's); the rest are exact
/// or correctly rounded on both.
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
#include <loom/ops/variant.hpp>
#include <loom/tensor.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom {
namespace detail {
struct MapNode;  ///< loom's own (kernels/elementwise/op.cpp)
}  // namespace detail

namespace ops {

/// The maps' kernels over contiguous operands (variant.hpp), the steps of
/// Lecture 2. Strided views take the kernel that walks the shape whichever
/// is named, and a vectorized map whose pointers cannot be aligned together
/// runs grid_stride.
enum class MapVariant : std::uint8_t {
  automatic,    ///< the fastest for the data: vectorized
  naive,        ///< an element a thread, a grid covering the tensor
  grid_stride,  ///< a grid sized to the machine, each thread striding through the tensor
  vectorized,   ///< 16-byte loads and stores, several vectors a thread
};
template <>
struct VariantNames<MapVariant> {
  static constexpr std::array<std::string_view, 4> names = {"automatic", "naive", "grid_stride",
                                                            "vectorized"};
};
// A value added to the enum needs its name in the table: the last one must match.
static_assert(to_string(MapVariant::vectorized) == "vectorized");

/// c = a + b, elementwise over f32 tensors of one shape; c may alias a or b.
LOOM_API OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c,
                          MapVariant variant = MapVariant::automatic);
/// Every element of the f32 tensor t becomes `value`.
LOOM_API OpPtr fill(const Tensor& t, float value);
/// dst = alpha * src over f32 tensors of one shape; dst may alias src.
LOOM_API OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha);

/// out = a + b. @throws nothing; inputs are checked at submit.
LOOM_API OpPtr add(const Tensor& a, const Tensor& b, const Tensor& out,
                   MapVariant variant = MapVariant::automatic);
/// out = a * b.
LOOM_API OpPtr mul(const Tensor& a, const Tensor& b, const Tensor& out,
                   MapVariant variant = MapVariant::automatic);
/// out = alpha * x + beta * y.
LOOM_API OpPtr axpby(float alpha, const Tensor& x, float beta, const Tensor& y, const Tensor& out,
                     MapVariant variant = MapVariant::automatic);
/// out = max(x, 0); NaN stays NaN.
LOOM_API OpPtr relu(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
/// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GELU's tanh form,
/// computed as x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), the same
/// function (the GPU's result is within a few f32 ulp of the CPU's).
LOOM_API OpPtr gelu_tanh(const Tensor& x, const Tensor& out,
                         MapVariant variant = MapVariant::automatic);
/// out = x converted to out's dtype (f32, f16, bf16), rounding to nearest even.
LOOM_API OpPtr cast(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);

/// out = e^x.
LOOM_API OpPtr exp(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
/// out = ln x (NaN below 0, -inf at 0).
LOOM_API OpPtr log(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr sqrt(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
/// out = 1 / sqrt(x).
LOOM_API OpPtr rsqrt(const Tensor& x, const Tensor& out,
                     MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr tanh(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
/// out = 1 / (1 + e^-x).
LOOM_API OpPtr sigmoid(const Tensor& x, const Tensor& out,
                       MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr abs(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);
/// out = -x.
LOOM_API OpPtr neg(const Tensor& x, const Tensor& out, MapVariant variant = MapVariant::automatic);

/// out = a - b.
LOOM_API OpPtr sub(const Tensor& a, const Tensor& b, const Tensor& out,
                   MapVariant variant = MapVariant::automatic);
/// out = a / b (IEEE division).
LOOM_API OpPtr div(const Tensor& a, const Tensor& b, const Tensor& out,
                   MapVariant variant = MapVariant::automatic);
/// The smaller of a and b; NaN if either is NaN (as torch.minimum).
LOOM_API OpPtr minimum(const Tensor& a, const Tensor& b, const Tensor& out,
                       MapVariant variant = MapVariant::automatic);
/// The larger of a and b; NaN if either is NaN.
LOOM_API OpPtr maximum(const Tensor& a, const Tensor& b, const Tensor& out,
                       MapVariant variant = MapVariant::automatic);
/// out = a^b (powf: NaN for a negative a and a non-integer b).
LOOM_API OpPtr pow(const Tensor& a, const Tensor& b, const Tensor& out,
                   MapVariant variant = MapVariant::automatic);
/// Masks: out = 1 where a > b (>=, <, <=, ==), else 0.
LOOM_API OpPtr gt(const Tensor& a, const Tensor& b, const Tensor& out,
                  MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr ge(const Tensor& a, const Tensor& b, const Tensor& out,
                  MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr lt(const Tensor& a, const Tensor& b, const Tensor& out,
                  MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr le(const Tensor& a, const Tensor& b, const Tensor& out,
                  MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr eq(const Tensor& a, const Tensor& b, const Tensor& out,
                  MapVariant variant = MapVariant::automatic);
/// out = a where mask is not 0, else b (all three broadcast to out's shape;
/// the mask has the dtype of a and b, as the comparisons make it).
LOOM_API OpPtr where(const Tensor& mask, const Tensor& a, const Tensor& b, const Tensor& out,
                     MapVariant variant = MapVariant::automatic);

/// Backwards of the activations: out = grad * relu'(x) (grad where x > 0,
/// else 0) and grad * gelu_tanh'(x), x being the activation's input.
LOOM_API OpPtr relu_backward(const Tensor& grad, const Tensor& x, const Tensor& out,
                             MapVariant variant = MapVariant::automatic);
LOOM_API OpPtr gelu_tanh_backward(const Tensor& grad, const Tensor& x, const Tensor& out,
                                  MapVariant variant = MapVariant::automatic);

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
LOOM_API MapExpr exp(const MapExpr& x);
LOOM_API MapExpr log(const MapExpr& x);
LOOM_API MapExpr sqrt(const MapExpr& x);
LOOM_API MapExpr rsqrt(const MapExpr& x);
LOOM_API MapExpr tanh(const MapExpr& x);
LOOM_API MapExpr sigmoid(const MapExpr& x);
LOOM_API MapExpr abs(const MapExpr& x);
LOOM_API MapExpr neg(const MapExpr& x);
LOOM_API MapExpr sub(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr div(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr minimum(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr maximum(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr pow(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr gt(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr ge(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr lt(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr le(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr eq(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr where(const MapExpr& mask, const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr relu_backward(const MapExpr& grad, const MapExpr& x);
LOOM_API MapExpr gelu_tanh_backward(const MapExpr& grad, const MapExpr& x);
/// x rounded to `dtype` (f32, f16 or bf16; checked at submit), as a cast to a
/// tensor of that dtype and back would.
LOOM_API MapExpr cast(const MapExpr& x, DType dtype);
LOOM_API MapExpr operator+(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator*(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator*(float s, const MapExpr& x);
LOOM_API MapExpr operator-(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator/(const MapExpr& a, const MapExpr& b);
LOOM_API MapExpr operator-(const MapExpr& x);

/// out = expr(inputs...), one kernel for the whole chain. Inputs and out are
/// f32, f16 or bf16 tensors in one memory space (at most 8 inputs, 32
/// scalars, 256 maps). Inputs broadcast to out's shape as the maps' do (a
/// [1] input is a scalar read on the device); any strides are accepted (a
/// kernel that walks the shape serves them; contiguous operands and
/// broadcast scalars take the vectorized one). out may be one of the inputs
/// (the same view). On the CUDA backend the chain is compiled with NVRTC
/// the first time it is seen (at submit where a GPU is visible), then cached
/// for the process.
LOOM_API OpPtr fused_map(std::vector<Tensor> inputs, const Tensor& out, const MapExpr& expr);
/// Several results of one pass over the inputs: outs[k] = exprs[k](inputs...),
/// one kernel (at most 4 outputs, of one shape, none overlapping another;
/// each may be an input, the same view). Shared subexpressions are computed
/// once. For example a value and its gradient, or an SGD step's new weight
/// and new momentum.
LOOM_API OpPtr fused_map(std::vector<Tensor> inputs, std::vector<Tensor> outs,
                         std::vector<MapExpr> exprs);

}  // namespace ops
}  // namespace loom
