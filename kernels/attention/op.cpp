// loom::ops::flash_attention: binds the attention kernel and its CPU reference to a task.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/attention.hpp>

#include "attention/attention.hpp"
#include "common/checks.hpp"

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

namespace loom::ops {
namespace {

constexpr std::string_view kName = "flash_attention";

using detail::reject;
using detail::require_dtype;
using detail::require_rank;
using detail::require_same_memory;

// A [B, H, S, ...] tensor's first three strides; an extent of 1 takes stride
// 0 (its stride is free and never stepped).
kernels::AttentionTensor view(const Tensor& t) {
  const auto stride = [&](int dim) { return t.size(dim) <= 1 ? 0 : t.strides()[dim]; };
  return {t.data(), stride(0), stride(1), stride(2)};
}

using Roles = std::initializer_list<std::pair<const Tensor*, const char*>>;

class FlashAttention final : public Op {
 public:
  FlashAttention(Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, AttentionOptions options)
      : q_(std::move(q)),
        k_(std::move(k)),
        v_(std::move(v)),
        out_(std::move(out)),
        lse_(std::move(lse)),
        options_(options) {}
  std::string_view name() const noexcept override { return kName; }
  std::vector<Tensor> reads() const override { return {q_, k_, v_}; }
  std::vector<Tensor> writes() const override {
    if (lse_.defined()) return {out_, lse_};
    return {out_};
  }
  void validate() const override {
    detail::require_dtype_in(q_, {DType::bf16, DType::f16}, kName, "q");
    for (const auto& [t, role] : Roles{{&k_, "k"}, {&v_, "v"}, {&out_, "out"}}) {
      require_dtype(*t, q_.dtype(), kName, role);
    }
    for (const auto& [t, role] : Roles{{&q_, "q"}, {&k_, "k"}, {&v_, "v"}, {&out_, "out"}}) {
      require_rank(*t, 4, kName, role);
      if (t->strides()[3] != 1 && t->size(3) > 1) {
        reject(kName,
               std::string(role) + "'s last dimension must be contiguous, got " + t->describe());
      }
    }
    const std::int64_t d = q_.size(3);
    if (d != 64 && d != 128) {
      reject(kName, "the head dim (q's last extent) must be 64 or 128, got " + std::to_string(d));
    }
    if (k_.shape() != v_.shape() || k_.size(0) != q_.size(0) || k_.size(1) != q_.size(1) ||
        k_.size(3) != d) {
      reject(kName, "k and v must be [B, H, Sk, D] with q's B, H and D: q is " +
                        q_.shape().to_string() + ", k " + k_.shape().to_string() + ", v " +
                        v_.shape().to_string());
    }
    if (out_.shape() != q_.shape()) {
      reject(kName, "out must have q's shape " + q_.shape().to_string() + ", got " +
                        out_.shape().to_string());
    }
    if (lse_.defined()) {
      require_dtype(lse_, DType::f32, kName, "lse");
      require_rank(lse_, 3, kName, "lse");
      if (lse_.size(0) != q_.size(0) || lse_.size(1) != q_.size(1) || lse_.size(2) != q_.size(2)) {
        reject(kName, "lse must be [B, H, Sq] = [" + std::to_string(q_.size(0)) + ", " +
                          std::to_string(q_.size(1)) + ", " + std::to_string(q_.size(2)) +
                          "], got " + lse_.shape().to_string());
      }
      require_same_memory(q_, lse_, kName);
      if (lse_.shares_storage_with(out_) || lse_.shares_storage_with(q_) ||
          lse_.shares_storage_with(k_) || lse_.shares_storage_with(v_)) {
        reject(kName, "lse must not share storage with q, k, v or out");
      }
    }
    require_same_memory(q_, k_, kName);
    require_same_memory(q_, v_, kName);
    require_same_memory(q_, out_, kName);
    if (out_.shares_storage_with(q_) || out_.shares_storage_with(k_) ||
        out_.shares_storage_with(v_)) {
      reject(kName,
             "out must not share storage with q, k or v (they are read while it is written)");
    }
    if (!(options_.scale >= 0.0F) || std::isinf(options_.scale)) {
      reject(kName, "scale must be finite and not negative (0: 1/sqrt(D)), got " +
                        std::to_string(options_.scale));
    }
    if (options_.alignment != CausalAlignment::top_left &&
        options_.alignment != CausalAlignment::bottom_right) {
      reject(kName,
             "unknown causal alignment " + std::to_string(static_cast<int>(options_.alignment)));
    }
  }
  void run_cpu() const override { kernels::attention_reference(args()); }
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const kernels::AttentionArgs p = args();
    if (!kernels::flash_fwd_fits(p)) {
      reject(kName,
             "on a GPU, q, k, v and out need batch, head and row strides that are "
             "multiples of 8 elements and 16-byte aligned data");
    }
    kernels::flash_attention_forward(p, StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::AttentionArgs args() const {
    kernels::AttentionArgs p;
    p.batch = q_.size(0);
    p.heads = q_.size(1);
    p.q_len = q_.size(2);
    p.k_len = k_.size(2);
    p.head_dim = q_.size(3);
    p.dtype = q_.dtype();
    p.q = view(q_);
    p.k = view(k_);
    p.v = view(v_);
    p.out = view(out_);
    if (lse_.defined()) p.lse = view(lse_);
    p.scale =
        options_.scale > 0.0F ? options_.scale : 1.0F / std::sqrt(static_cast<float>(p.head_dim));
    p.causal = options_.causal;
    p.causal_offset = options_.alignment == CausalAlignment::bottom_right ? p.k_len - p.q_len : 0;
    return p;
  }

  Tensor q_, k_, v_, out_, lse_;
  AttentionOptions options_;
};

}  // namespace

OpPtr flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                      const Tensor& lse, const AttentionOptions& options) {
  return std::make_shared<FlashAttention>(q, k, v, out, lse, options);
}

}  // namespace loom::ops
