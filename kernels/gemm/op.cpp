// loom::ops::matmul: binds the SGEMM kernels and their CPU reference to a task.
#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/ops/gemm.hpp>

#include "common/checks.hpp"
#include "gemm/sgemm.hpp"

#include <string>

namespace loom::ops {
namespace {

constexpr std::string_view kName = "matmul";

using detail::reject;
using detail::require_dtype;
using detail::require_rank;
using detail::require_same_memory;

// Row-major (unit column stride) or column-major (unit row stride), with a
// leading dimension that keeps rows (columns) apart. An extent of 1 leaves
// its stride free.
bool has_matrix_layout(const Tensor& t) {
  const std::int64_t rows = t.size(0);
  const std::int64_t cols = t.size(1);
  const std::int64_t rs = t.strides()[0];
  const std::int64_t cs = t.strides()[1];
  const bool row_major = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= cols);
  const bool col_major = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= rows);
  return row_major || col_major;
}

void require_matrix(const Tensor& t, std::string_view role) {
  require_dtype(t, DType::f32, kName, role);
  require_rank(t, 2, kName, role);
  if (!has_matrix_layout(t)) {
    reject(kName, std::string(role) +
                      " must be row-major or column-major (a transposed view); other strided " +
                      "views are not taken (call contiguous() first), got " + t.describe());
  }
}

// The strides the kernels get: an extent of 1 takes a unit stride, so that
// a single row or column reaches them as the row- or column-major matrix it is.
template <class T>
kernels::MatrixRef<T> matrix(const Tensor& t, T* data) {
  std::int64_t rs = t.strides()[0];
  std::int64_t cs = t.strides()[1];
  if (t.size(1) <= 1) {
    cs = 1;
  } else if (t.size(0) <= 1) {
    rs = 1;
  }
  return {data, rs, cs};
}

class Matmul final : public Op {
 public:
  Matmul(Tensor a, Tensor b, Tensor c, MatmulEpilogue epilogue)
      : a_(std::move(a)), b_(std::move(b)), c_(std::move(c)), epilogue_(std::move(epilogue)) {}
  std::string_view name() const noexcept override { return kName; }
  std::vector<Tensor> reads() const override {
    std::vector<Tensor> r{a_, b_};
    if (epilogue_.beta != 0.0F) r.push_back(c_);
    if (epilogue_.bias.defined()) r.push_back(epilogue_.bias);
    return r;
  }
  std::vector<Tensor> writes() const override { return {c_}; }
  void validate() const override {
    require_matrix(a_, "a");
    require_matrix(b_, "b");
    require_matrix(c_, "c");
    if (a_.size(1) != b_.size(0)) {
      reject(kName, "the inner dimensions differ: a is " + a_.shape().to_string() + ", b is " +
                        b_.shape().to_string() + " (a's columns must equal b's rows)");
    }
    if (c_.size(0) != a_.size(0) || c_.size(1) != b_.size(1)) {
      reject(kName, "c must be " + std::to_string(a_.size(0)) + " x " + std::to_string(b_.size(1)) +
                        " (a's rows x b's columns), got " + c_.shape().to_string());
    }
    require_same_memory(a_, b_, kName);
    require_same_memory(a_, c_, kName);
    if (c_.shares_storage_with(a_) || c_.shares_storage_with(b_)) {
      reject(kName, "c must not share storage with a or b (the kernels read a and b while " +
                        std::string("writing c)"));
    }
    validate_epilogue();
  }
  void run_cpu() const override { kernels::sgemm_reference(args()); }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const kernels::SgemmArgs p = args();
    const auto tile = kernels::default_warp_tile(p.m, p.n, ctx.properties().sm_count);
    const auto variant = kernels::choose_sgemm_variant(p);
    const std::size_t bytes = kernels::sgemm_workspace_bytes(p, variant, tile);
    kernels::sgemm(p, StreamView(cuda_stream(ctx)), variant, tile,
                   bytes > 0 ? ctx.workspace(bytes) : nullptr);
  }

 private:
  void validate_epilogue() const {
    switch (epilogue_.activation) {
      case Activation::none:
      case Activation::relu:
      case Activation::gelu_tanh: break;
      default:
        reject(kName, "unknown activation " +
                          std::to_string(static_cast<int>(epilogue_.activation)) +
                          " (none, relu, gelu_tanh)");
    }
    const Tensor& bias = epilogue_.bias;
    if (!bias.defined()) return;
    require_dtype(bias, DType::f32, kName, "bias");
    detail::require_broadcastable(bias, c_.shape(), kName, "bias");
    require_same_memory(bias, c_, kName);
    if (bias.shares_storage_with(c_)) {
      reject(kName, "bias must not share storage with c (c is written while bias is read)");
    }
  }

  kernels::SgemmArgs args() const {
    kernels::SgemmArgs p;
    p.m = a_.size(0);
    p.n = b_.size(1);
    p.k = a_.size(1);
    p.alpha = epilogue_.alpha;
    p.beta = epilogue_.beta;
    p.a = matrix<const float>(a_, a_.data_as<float>());
    p.b = matrix<const float>(b_, b_.data_as<float>());
    p.c = matrix<float>(c_, c_.data_as<float>());
    if (epilogue_.bias.defined()) {
      // Broadcast to c's shape: a dimension the bias lacks or has at extent 1 gets stride 0.
      const Tensor bias = epilogue_.bias.expand(c_.shape());
      p.bias = {bias.data_as<float>(), bias.strides()[0], bias.strides()[1]};
    }
    p.activation = static_cast<kernels::SgemmActivation>(epilogue_.activation);
    return p;
  }

  Tensor a_, b_, c_;
  MatmulEpilogue epilogue_;
};

}  // namespace

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta) {
  return std::make_shared<Matmul>(a, b, c, MatmulEpilogue{.alpha = alpha, .beta = beta});
}

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, const MatmulEpilogue& epilogue) {
  return std::make_shared<Matmul>(a, b, c, epilogue);
}

}  // namespace loom::ops

static_assert(static_cast<int>(loom::ops::Activation::relu) ==
                  static_cast<int>(loom::kernels::SgemmActivation::relu) &&
              static_cast<int>(loom::ops::Activation::gelu_tanh) ==
                  static_cast<int>(loom::kernels::SgemmActivation::gelu_tanh));
