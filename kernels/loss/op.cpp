// The loss ops: log_softmax, cross_entropy and its backward bound to the Op
// interface, with their checks.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/loss.hpp>

#include "common/checks.hpp"
#include "loss/loss.hpp"

#include <string>

namespace loom::ops {
namespace {

using detail::reject;

const std::initializer_list<DType> kLogitTypes{DType::f32, DType::f16, DType::bf16};

// Rows with contiguous columns: the layout the kernels read.
void require_rows(const Tensor& t, std::string_view op, std::string_view role) {
  detail::require_rank(t, 2, op, role);
  const std::int64_t rows = t.shape()[0];
  const std::int64_t cols = t.shape()[1];
  const bool columns_ok = cols <= 1 || t.strides()[1] == 1;
  const bool rows_ok = rows <= 1 || t.strides()[0] >= cols;
  if (!columns_ok || !rows_ok) {
    reject(op, std::string(role) +
                   " must have contiguous rows (column stride 1, row stride >= cols; a strided "
                   "view of rows is fine, a transpose or a column step is not: call "
                   "contiguous() first), got " +
                   t.describe());
  }
}

std::int64_t row_stride(const Tensor& t) {
  return t.shape()[0] <= 1 ? t.shape()[1] : t.strides()[0];
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.data() == b.data() && a.shape() == b.shape() && a.strides() == b.strides();
}

// y is x (in place) or shares no storage with it.
void require_in_place_or_apart(const Tensor& x, const Tensor& y, std::string_view op,
                               std::string_view roles) {
  if (x.shares_storage_with(y) && !same_view(x, y)) {
    reject(op, std::string(roles) + " must be the same view (in place) or share no storage; got " +
                   x.describe() + " and " + y.describe());
  }
}

void require_one_element(const Tensor& t, std::string_view op, std::string_view role,
                         std::string_view why) {
  if (t.numel() != 1 || t.rank() > 1) {
    reject(op, std::string(role) + " must be f32 [1] or [] " + std::string(why) + ", got " +
                   t.describe());
  }
}

void require_rows_vector(const Tensor& t, std::int64_t rows, std::string_view op,
                         std::string_view role) {
  if (t.rank() != 1 || t.shape()[0] != rows || !t.is_contiguous()) {
    reject(op, std::string(role) + " must be a contiguous [" + std::to_string(rows) +
                   "] (one value a row of logits), got " + t.describe());
  }
}

class LogSoftmax final : public Op {
 public:
  LogSoftmax(Tensor x, Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  std::string_view name() const noexcept override { return "log_softmax"; }
  std::vector<Tensor> reads() const override { return {x_}; }
  std::vector<Tensor> writes() const override { return {y_}; }
  void validate() const override {
    constexpr std::string_view op = "log_softmax";
    detail::require_dtype_in(x_, kLogitTypes, op, "x");
    detail::require_dtype(y_, x_.dtype(), op, "y");
    require_rows(x_, op, "x");
    require_rows(y_, op, "y");
    detail::require_same_shape(x_, y_, op, "x and y");
    detail::require_same_memory(x_, y_, op);
    require_in_place_or_apart(x_, y_, op, "x and y");
  }
  void run_cpu() const override {
    kernels::log_softmax_reference(x_.data(), y_.data(), x_.dtype(), shape());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::log_softmax(x_.data(), y_.data(), x_.dtype(), shape(), StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::LossRows shape() const {
    return {x_.shape()[0], x_.shape()[1], row_stride(x_), row_stride(y_)};
  }
  Tensor x_, y_;
};

// What the forward and the backward share: the logits, labels and options,
// checked alike.
class CrossEntropyBase : public Op {
 protected:
  CrossEntropyBase(Tensor logits, Tensor labels, CrossEntropyOptions options)
      : logits_(std::move(logits)), labels_(std::move(labels)), options_(options) {}

  void validate_common(std::string_view op) const {
    detail::require_dtype_in(logits_, kLogitTypes, op, "logits");
    require_rows(logits_, op, "logits");
    if (logits_.shape()[1] == 0)
      reject(op, "logits need at least one class, got " + logits_.describe());
    detail::require_dtype_in(labels_, {DType::i32, DType::i64}, op, "labels");
    require_rows_vector(labels_, rows(), op, "labels");
    detail::require_same_memory(logits_, labels_, op);
    switch (options_.reduction) {
      case LossReduction::mean:
      case LossReduction::sum:
      case LossReduction::none: break;
      default:
        reject(op, "unknown reduction " + std::to_string(static_cast<int>(options_.reduction)) +
                       " (mean, sum, none)");
    }
  }

  std::int64_t rows() const { return logits_.shape()[0]; }
  bool reduced() const { return options_.reduction != LossReduction::none; }

  kernels::CrossEntropyArgs args() const {
    kernels::CrossEntropyArgs a;
    a.logits = logits_.data();
    a.dtype = logits_.dtype();
    a.shape = {logits_.shape()[0], logits_.shape()[1], row_stride(logits_), 0};
    a.labels = labels_.data();
    a.labels64 = labels_.dtype() == DType::i64;
    a.ignore_index = options_.ignore_index;
    a.reduction = options_.reduction;
    return a;
  }

  Tensor logits_, labels_;
  CrossEntropyOptions options_;
};

class CrossEntropy final : public CrossEntropyBase {
 public:
  CrossEntropy(Tensor logits, Tensor labels, Tensor loss, Tensor lse, CrossEntropyOptions options)
      : CrossEntropyBase(std::move(logits), std::move(labels), options),
        loss_(std::move(loss)),
        lse_(std::move(lse)) {}
  std::string_view name() const noexcept override { return "cross_entropy"; }
  std::vector<Tensor> reads() const override { return {logits_, labels_}; }
  std::vector<Tensor> writes() const override { return {loss_, lse_}; }
  void validate() const override {
    constexpr std::string_view op = "cross_entropy";
    validate_common(op);
    detail::require_dtype(loss_, DType::f32, op, "loss");
    detail::require_dtype(lse_, DType::f32, op, "lse");
    if (reduced()) {
      require_one_element(loss_, op, "loss", "for a mean or a sum");
    } else {
      require_rows_vector(loss_, rows(), op, "loss");
    }
    require_rows_vector(lse_, rows(), op, "lse");
    for (const Tensor* t : {&loss_, &lse_}) {
      detail::require_same_memory(logits_, *t, op);
      if (t->shares_storage_with(logits_) || t->shares_storage_with(labels_)) {
        reject(op, "loss and lse must not share storage with logits or labels");
      }
    }
    if (loss_.shares_storage_with(lse_)) reject(op, "loss and lse must not share storage");
  }
  void run_cpu() const override { kernels::cross_entropy_reference(full_args()); }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const auto a = full_args();
    kernels::cross_entropy(a, ctx.workspace(kernels::cross_entropy_workspace_bytes(a)),
                           StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::CrossEntropyArgs full_args() const {
    auto a = args();
    a.loss = static_cast<float*>(loss_.data());
    a.lse = static_cast<float*>(lse_.data());
    return a;
  }
  Tensor loss_, lse_;
};

class CrossEntropyBackward final : public CrossEntropyBase {
 public:
  CrossEntropyBackward(Tensor logits, Tensor labels, Tensor lse, Tensor grad_loss, Tensor grad,
                       CrossEntropyOptions options)
      : CrossEntropyBase(std::move(logits), std::move(labels), options),
        lse_(std::move(lse)),
        grad_loss_(std::move(grad_loss)),
        grad_(std::move(grad)) {}
  std::string_view name() const noexcept override { return "cross_entropy_backward"; }
  std::vector<Tensor> reads() const override {
    std::vector<Tensor> r{logits_, labels_, lse_};
    if (grad_loss_.defined()) r.push_back(grad_loss_);
    return r;
  }
  std::vector<Tensor> writes() const override { return {grad_}; }
  void validate() const override {
    constexpr std::string_view op = "cross_entropy_backward";
    validate_common(op);
    detail::require_dtype(lse_, DType::f32, op, "lse");
    require_rows_vector(lse_, rows(), op, "lse");
    detail::require_same_memory(logits_, lse_, op);
    if (grad_loss_.defined()) {
      detail::require_dtype(grad_loss_, DType::f32, op, "grad_loss");
      detail::require_same_memory(logits_, grad_loss_, op);
      if (reduced()) {
        require_one_element(grad_loss_, op, "grad_loss", "for a mean or a sum");
      } else {
        require_rows_vector(grad_loss_, rows(), op, "grad_loss");
      }
    }
    detail::require_dtype(grad_, logits_.dtype(), op, "grad_logits");
    require_rows(grad_, op, "grad_logits");
    detail::require_same_shape(logits_, grad_, op, "logits and grad_logits");
    detail::require_same_memory(logits_, grad_, op);
    require_in_place_or_apart(logits_, grad_, op, "logits and grad_logits");
    for (const Tensor* t : {&labels_, &lse_, &grad_loss_}) {
      if (t->defined() && t->shares_storage_with(grad_)) {
        reject(op, "grad_logits must not share storage with labels, lse or grad_loss");
      }
    }
  }
  void run_cpu() const override { kernels::cross_entropy_backward_reference(full_args()); }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const auto a = full_args();
    kernels::cross_entropy_backward(a, ctx.workspace(kernels::cross_entropy_workspace_bytes(a)),
                                    StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::CrossEntropyArgs full_args() const {
    auto a = args();
    a.shape.y_row_stride = row_stride(grad_);
    a.lse = static_cast<float*>(lse_.data());
    a.grad_loss = grad_loss_.defined() ? static_cast<const float*>(grad_loss_.data()) : nullptr;
    a.grad = grad_.data();
    return a;
  }
  Tensor lse_, grad_loss_, grad_;
};

}  // namespace

OpPtr log_softmax(const Tensor& x, const Tensor& y) { return std::make_shared<LogSoftmax>(x, y); }

OpPtr cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& loss,
                    const Tensor& lse, CrossEntropyOptions options) {
  return std::make_shared<CrossEntropy>(logits, labels, loss, lse, options);
}

OpPtr cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                             const Tensor& grad_loss, const Tensor& grad_logits,
                             CrossEntropyOptions options) {
  return std::make_shared<CrossEntropyBackward>(logits, labels, lse, grad_loss, grad_logits,
                                                options);
}

}  // namespace loom::ops
