// The softmax op: the kernel bound to the Op interface, with its checks.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/softmax.hpp>

#include "common/checks.hpp"
#include "softmax/softmax.hpp"

#include <string>

namespace loom::ops {
namespace {

using detail::reject;

// Rows with contiguous columns: the layout the kernels read (a row stride of
// at least cols, a column stride of 1).
void require_row_layout(const Tensor& t, std::string_view role) {
  const std::int64_t rows = t.shape()[0];
  const std::int64_t cols = t.shape()[1];
  const bool columns_ok = cols <= 1 || t.strides()[1] == 1;
  const bool rows_ok = rows <= 1 || t.strides()[0] >= cols;
  if (!columns_ok || !rows_ok) {
    reject("softmax", std::string(role) +
                          " must have contiguous rows (column stride 1, row stride >= cols; a "
                          "strided view of rows is fine, a transpose or a column step is not: "
                          "call contiguous() first), got " +
                          t.describe());
  }
}

std::int64_t row_stride(const Tensor& t) {
  return t.shape()[0] <= 1 ? t.shape()[1] : t.strides()[0];
}

class Softmax final : public Op {
 public:
  Softmax(Tensor x, Tensor y, SoftmaxVariant variant)
      : x_(std::move(x)), y_(std::move(y)), variant_(variant) {}
  std::string_view name() const noexcept override { return "softmax"; }
  std::vector<Tensor> reads() const override { return {x_}; }
  std::vector<Tensor> writes() const override { return {y_}; }

  void validate() const override {
    constexpr std::string_view op = "softmax";
    detail::require_dtype_in(x_, {DType::f32, DType::bf16}, op, "x");
    detail::require_dtype(y_, x_.dtype(), op, "y");
    detail::require_rank(x_, 2, op, "x");
    detail::require_rank(y_, 2, op, "y");
    detail::require_same_shape(x_, y_, op, "x and y");
    detail::require_same_memory(x_, y_, op);
    require_row_layout(x_, "x");
    require_row_layout(y_, "y");
    if (x_.shares_storage_with(y_) && !in_place()) {
      reject(op, "y must be x itself (in place) or not share storage with it; got x " +
                     x_.describe() + " and y " + y_.describe());
    }
    (void)variant();
  }
  void run_cpu() const override {
    kernels::softmax_reference(x_.data(), y_.data(), x_.dtype(), shape());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const kernels::SoftmaxShape s = shape();
    const kernels::SoftmaxVariant v = variant();
    const std::size_t bytes = kernels::softmax_workspace_bytes(s, v);
    void* workspace = bytes > 0 ? ctx.workspace(bytes) : nullptr;
    kernels::softmax(x_.data(), y_.data(), x_.dtype(), s, workspace, StreamView(cuda_stream(ctx)),
                     v);
  }

 private:
  bool in_place() const { return x_.data() == y_.data() && x_.strides() == y_.strides(); }

  kernels::SoftmaxShape shape() const {
    return {x_.shape()[0], x_.shape()[1], row_stride(x_), row_stride(y_)};
  }

  SoftmaxVariant variant() const {
    detail::require_known_variant(variant_, "softmax");
    return variant_;
  }

  Tensor x_, y_;
  SoftmaxVariant variant_;
};

}  // namespace

OpPtr softmax(const Tensor& x, const Tensor& y, SoftmaxVariant variant) {
  return std::make_shared<Softmax>(x, y, variant);
}

}  // namespace loom::ops
