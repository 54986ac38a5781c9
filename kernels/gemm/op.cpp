// loom::ops::matmul: binds the SGEMM kernels and their CPU reference to a task.
#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/ops/gemm.hpp>

#include "common/checks.hpp"
#include "gemm/hgemm.hpp"
#include "gemm/sgemm.hpp"

#include <algorithm>
#include <string>

namespace loom::ops {
namespace {

constexpr std::string_view kName = "matmul";

using detail::reject;
using detail::require_dtype;
using detail::require_same_memory;

// The last two dimensions row-major (unit column stride) or column-major
// (unit row stride), with a leading dimension that keeps rows (columns)
// apart. An extent of 1 leaves its stride free.
bool has_matrix_layout(const Tensor& t) {
  const int r = t.rank();
  const std::int64_t rows = t.size(r - 2);
  const std::int64_t cols = t.size(r - 1);
  const std::int64_t rs = t.strides()[r - 2];
  const std::int64_t cs = t.strides()[r - 1];
  const bool row_major = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= cols);
  const bool col_major = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= rows);
  return row_major || col_major;
}

void require_matrix(const Tensor& t, std::string_view role) {
  if (t.rank() != 2 && t.rank() != 3) {
    reject(kName, std::string(role) + " must be a matrix [rows, cols] or a batch of them " +
                      "[batch, rows, cols], got " + t.describe());
  }
  if (!has_matrix_layout(t)) {
    reject(kName, std::string(role) +
                      " must be row-major or column-major (a transposed view); other strided " +
                      "views are not taken (call contiguous() first), got " + t.describe());
  }
}

std::int64_t rows_of(const Tensor& t) { return t.size(t.rank() - 2); }
std::int64_t cols_of(const Tensor& t) { return t.size(t.rank() - 1); }
std::int64_t batch_of(const Tensor& t) { return t.rank() == 3 ? t.size(0) : 1; }

bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// The strides the kernels get: an extent of 1 takes a unit stride, so that
// a single row or column reaches them as the row- or column-major matrix it
// is; a matrix shared by the whole batch has a batch stride of 0.
struct MatrixStrides {
  std::int64_t row = 0, col = 0, batch = 0;
};
MatrixStrides matrix_strides(const Tensor& t) {
  const int r = t.rank();
  MatrixStrides s{t.strides()[r - 2], t.strides()[r - 1], r == 3 ? t.strides()[0] : 0};
  if (t.size(r - 1) <= 1) {
    s.col = 1;
  } else if (t.size(r - 2) <= 1) {
    s.row = 1;
  }
  if (r == 3 && t.size(0) <= 1) s.batch = 0;
  return s;
}

kernels::BatchedMatrix batched(const Tensor& t) {
  const MatrixStrides s = matrix_strides(t);
  return {t.data(), s.row, s.col, s.batch, t.dtype()};
}

// The public variants each dtype family takes (MatmulVariant's order).
bool is_f32_variant(MatmulVariant v) {
  return v >= MatmulVariant::naive && v <= MatmulVariant::skinny;
}
bool is_half_variant(MatmulVariant v) {
  return v >= MatmulVariant::mma_sync && v <= MatmulVariant::wgmma_cluster;
}

kernels::SgemmVariant sgemm_variant(MatmulVariant v) {
  switch (v) {
    case MatmulVariant::naive: return kernels::SgemmVariant::naive;
    case MatmulVariant::tiled_manual: return kernels::SgemmVariant::tiled_manual;
    case MatmulVariant::tiled_cute: return kernels::SgemmVariant::tiled_cute;
    case MatmulVariant::register_tiled: return kernels::SgemmVariant::register_tiled;
    case MatmulVariant::skinny: return kernels::SgemmVariant::skinny;
    default: return kernels::SgemmVariant::warp_tiled;
  }
}

kernels::HgemmVariant hgemm_variant(MatmulVariant v) {
  switch (v) {
    case MatmulVariant::mma_sync: return kernels::HgemmVariant::mma_sync;
    case MatmulVariant::simple: return kernels::HgemmVariant::simple;
    case MatmulVariant::wgmma: return kernels::HgemmVariant::wgmma;
    case MatmulVariant::wgmma_cluster: return kernels::HgemmVariant::wgmma_cluster;
    default: return kernels::HgemmVariant::automatic;
  }
}

class Matmul final : public Op {
 public:
  Matmul(Tensor a, Tensor b, Tensor c, MatmulEpilogue epilogue,
         MatmulVariant variant = MatmulVariant::automatic)
      : a_(std::move(a)),
        b_(std::move(b)),
        c_(std::move(c)),
        epilogue_(std::move(epilogue)),
        variant_(variant) {}
  std::string_view name() const noexcept override { return kName; }
  std::vector<Tensor> reads() const override {
    std::vector<Tensor> r{a_, b_};
    if (epilogue_.beta != 0.0F) r.push_back(c_);
    if (epilogue_.bias.defined()) r.push_back(epilogue_.bias);
    return r;
  }
  std::vector<Tensor> writes() const override { return {c_}; }
  void validate() const override {
    validate_dtypes();
    validate_variant();
    require_matrix(a_, "a");
    require_matrix(b_, "b");
    require_matrix(c_, "c");
    if (cols_of(a_) != rows_of(b_)) {
      reject(kName, "the inner dimensions differ: a is " + a_.shape().to_string() + ", b is " +
                        b_.shape().to_string() + " (a's columns must equal b's rows)");
    }
    const std::int64_t batch = std::max(batch_of(a_), batch_of(b_));
    if ((batch_of(a_) != 1 && batch_of(a_) != batch) ||
        (batch_of(b_) != 1 && batch_of(b_) != batch)) {
      reject(kName, "a and b have different batches: a is " + a_.shape().to_string() + ", b is " +
                        b_.shape().to_string() + " (a batch of 1 or none is shared)");
    }
    const bool batched_c = a_.rank() == 3 || b_.rank() == 3;
    if ((c_.rank() == 3) != batched_c || rows_of(c_) != rows_of(a_) || cols_of(c_) != cols_of(b_) ||
        (batched_c && c_.size(0) != batch)) {
      reject(kName, "c must be " + expected_c() + " (a's rows x b's columns" +
                        (batched_c ? ", a batch as a's and b's" : "") + "), got " +
                        c_.shape().to_string());
    }
    require_same_memory(a_, b_, kName);
    require_same_memory(a_, c_, kName);
    if (c_.shares_storage_with(a_) || c_.shares_storage_with(b_)) {
      reject(kName, "c must not share storage with a or b (the kernels read a and b while " +
                        std::string("writing c)"));
    }
    validate_epilogue();
  }
  void run_cpu() const override {
    if (is_half(a_.dtype())) {
      kernels::hgemm_reference(half_args());
      return;
    }
    for (std::int64_t b = 0; b < batch_of(c_); ++b) kernels::sgemm_reference(sgemm_args(b));
  }
  // One entry's kernel choice.
  struct Plan {
    kernels::SgemmArgs args;
    kernels::SgemmVariant variant;
    kernels::SgemmWarpTile tile;
  };
  Plan plan_of(const kernels::SgemmArgs& p, int sm_count) const {
    const bool fused = p.bias.data != nullptr || p.activation != kernels::SgemmActivation::none;
    return {p,
            variant_ == MatmulVariant::automatic ? kernels::choose_sgemm_variant(p)
                                                 : sgemm_variant(variant_),
            kernels::default_warp_tile(p.m, p.n, sm_count, fused)};
  }
  // The workspace is scratch that makes products faster (split-K's partial
  // sums, an M-major copy of A), never needed for a right result: where
  // the pool cannot give it, the products run without it.
  static void* workspace_or_null(const ExecutionContext& ctx, std::size_t bytes) {
    try {
      return ctx.workspace(bytes);
    } catch (const OutOfMemory&) {
      return nullptr;
    }
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const StreamView stream(cuda_stream(ctx));
    if (is_half(a_.dtype())) {
      kernels::hgemm(half_args(), stream, hgemm_variant(variant_));
      return;
    }
    const int sm_count = ctx.properties().sm_count;
    // Entries of a batch differ only in their pointers: one plan sizes the
    // workspace, and as they run in stream order they share it, taken once
    // (a compiled graph keeps every workspace it is given).
    void* workspace = nullptr;
    for (std::int64_t b = 0; b < batch_of(c_); ++b) {
      const Plan plan = plan_of(sgemm_args(b), sm_count);
      if (b == 0) {
        const std::size_t bytes =
            kernels::sgemm_workspace_bytes(plan.args, plan.variant, plan.tile);
        if (bytes > 0) workspace = workspace_or_null(ctx, bytes);
      }
      kernels::sgemm(plan.args, stream, plan.variant, plan.tile, workspace);
    }
  }

 private:
  std::string expected_c() const {
    const bool batched_c = a_.rank() == 3 || b_.rank() == 3;
    std::string shape = "[";
    if (batched_c) shape += std::to_string(std::max(batch_of(a_), batch_of(b_))) + ", ";
    return shape + std::to_string(rows_of(a_)) + ", " + std::to_string(cols_of(b_)) + "]";
  }

  void validate_variant() const {
    detail::require_known_variant(variant_, kName);
    const bool half = is_half(a_.dtype());
    if ((half && is_f32_variant(variant_)) || (!half && is_half_variant(variant_))) {
      reject(kName, "the variant " + std::string(to_string(variant_)) + " is for " +
                        (half ? "f32" : "f16 and bf16") + " operands, and a is " +
                        std::string(loom::to_string(a_.dtype())));
    }
  }

  void validate_dtypes() const {
    detail::require_dtype_in(a_, {DType::f32, DType::f16, DType::bf16}, kName, "a");
    require_dtype(b_, a_.dtype(), kName, "b");
    if (is_half(a_.dtype())) {
      detail::require_dtype_in(c_, {a_.dtype(), DType::f32}, kName, "c");
    } else {
      require_dtype(c_, DType::f32, kName, "c");
    }
  }

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
    if (bias.dtype() != c_.dtype()) require_dtype(bias, DType::f32, kName, "bias");
    detail::require_broadcastable(bias, c_.shape(), kName, "bias");
    require_same_memory(bias, c_, kName);
    if (bias.shares_storage_with(c_)) {
      reject(kName, "bias must not share storage with c (c is written while bias is read)");
    }
  }

  // The bias broadcast to c's shape (a dimension it lacks or has at extent 1
  // gets stride 0); null data without one.
  kernels::BatchedMatrix bias_matrix() const {
    if (!epilogue_.bias.defined()) return {};
    const Tensor bias = epilogue_.bias.expand(c_.shape());
    const int r = bias.rank();
    return {bias.data(), bias.strides()[r - 2], bias.strides()[r - 1],
            r == 3 ? bias.strides()[0] : 0, bias.dtype()};
  }

  kernels::HgemmArgs half_args() const {
    kernels::HgemmArgs p;
    p.m = rows_of(a_);
    p.n = cols_of(b_);
    p.k = cols_of(a_);
    p.batch = batch_of(c_);
    p.alpha = epilogue_.alpha;
    p.beta = epilogue_.beta;
    p.a = batched(a_);
    p.b = batched(b_);
    p.c = batched(c_);
    p.bias = bias_matrix();
    p.activation = static_cast<kernels::SgemmActivation>(epilogue_.activation);
    return p;
  }

  // Entry b of the batch, as one f32 SGEMM.
  kernels::SgemmArgs sgemm_args(std::int64_t b) const {
    const auto matrix = [b](const Tensor& t) {
      const MatrixStrides s = matrix_strides(t);
      return kernels::MatrixRef<float>{t.data_as<float>() + b * s.batch, s.row, s.col};
    };
    const auto input = [&](const Tensor& t) {
      const auto m = matrix(t);
      return kernels::MatrixRef<const float>{m.data, m.row_stride, m.col_stride};
    };
    kernels::SgemmArgs p;
    p.m = rows_of(a_);
    p.n = cols_of(b_);
    p.k = cols_of(a_);
    p.alpha = epilogue_.alpha;
    p.beta = epilogue_.beta;
    p.a = input(a_);
    p.b = input(b_);
    p.c = matrix(c_);
    if (epilogue_.bias.defined()) {
      const kernels::BatchedMatrix bias = bias_matrix();  // f32 here (validate)
      p.bias = {static_cast<const float*>(bias.data) + b * bias.batch_stride, bias.row_stride,
                bias.col_stride};
    }
    p.activation = static_cast<kernels::SgemmActivation>(epilogue_.activation);
    return p;
  }

  Tensor a_, b_, c_;
  MatmulEpilogue epilogue_;
  MatmulVariant variant_;
};

}  // namespace

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta) {
  return std::make_shared<Matmul>(a, b, c, MatmulEpilogue{.alpha = alpha, .beta = beta});
}

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, const MatmulEpilogue& epilogue) {
  return std::make_shared<Matmul>(a, b, c, epilogue);
}

OpPtr matmul(const Tensor& a, const Tensor& b, const Tensor& c, const MatmulEpilogue& epilogue,
             MatmulVariant variant) {
  return std::make_shared<Matmul>(a, b, c, epilogue, variant);
}

}  // namespace loom::ops

static_assert(static_cast<int>(loom::ops::Activation::relu) ==
                  static_cast<int>(loom::kernels::SgemmActivation::relu) &&
              static_cast<int>(loom::ops::Activation::gelu_tanh) ==
                  static_cast<int>(loom::kernels::SgemmActivation::gelu_tanh));
