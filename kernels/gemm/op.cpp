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
  Matmul(Tensor a, Tensor b, Tensor c, float alpha, float beta)
      : a_(std::move(a)), b_(std::move(b)), c_(std::move(c)), alpha_(alpha), beta_(beta) {}
  std::string_view name() const noexcept override { return kName; }
  std::vector<Tensor> reads() const override {
    if (beta_ == 0.0F) return {a_, b_};
    return {a_, b_, c_};
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
  }
  void run_cpu() const override { kernels::sgemm_reference(args()); }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const kernels::SgemmArgs p = args();
    const auto tile = kernels::default_warp_tile(p.m, p.n, ctx.properties().sm_count);
    kernels::sgemm(p, StreamView(cuda_stream(ctx)), kernels::kSgemmDefault, tile);
  }

 private:
  kernels::SgemmArgs args() const {
    kernels::SgemmArgs p;
    p.m = a_.size(0);
    p.n = b_.size(1);
    p.k = a_.size(1);
    p.alpha = alpha_;
    p.beta = beta_;
    p.a = matrix<const float>(a_, a_.data_as<float>());
    p.b = matrix<const float>(b_, b_.data_as<float>());
    p.c = matrix<float>(c_, c_.data_as<float>());
    return p;
  }

  Tensor a_, b_, c_;
  float alpha_;
  float beta_;
};

}  // namespace

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta) {
  return std::make_shared<Matmul>(a, b, c, alpha, beta);
}

}  // namespace loom::ops
