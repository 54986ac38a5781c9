// loom::ops::flash_attention and its backward: bind the attention kernels and
// their CPU references to tasks; and the ring's merge and accumulate ops
// (ring_op.hpp), which bind ring.hpp's kernels.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/attention.hpp>

#include "attention/attention.hpp"
#include "attention/ring.hpp"
#include "attention/ring_op.hpp"
#include "common/checks.hpp"

#include <cmath>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>

namespace loom::ops {
namespace {

constexpr std::string_view kName = "flash_attention";

using detail::reject;
using detail::require_dtype;
using detail::require_rank;
using detail::require_same_memory;

// A [B, H, S, ...] tensor's first three strides; an extent of 1 takes stride
// 0 (its stride is free and never stepped). An undefined tensor (an optional
// one left out) is a null view, which the kernels skip.
kernels::AttentionTensor view(const Tensor& t) {
  if (!t.defined()) return {};
  const auto stride = [&](int dim) { return t.size(dim) <= 1 ? 0 : t.strides()[dim]; };
  return {t.data(), stride(0), stride(1), stride(2)};
}

using Roles = std::initializer_list<std::pair<const Tensor*, const char*>>;

// q, k, v and out as both passes take them: one 16-bit float type, [B, H, S,
// D] with a contiguous last dimension, D 64 or 128, k and v alike, out as q,
// one memory space, and options that make sense.
void validate_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const AttentionOptions& options, std::string_view op) {
  detail::require_dtype_in(q, {DType::bf16, DType::f16}, op, "q");
  for (const auto& [t, role] : Roles{{&k, "k"}, {&v, "v"}, {&out, "out"}}) {
    require_dtype(*t, q.dtype(), op, role);
  }
  for (const auto& [t, role] : Roles{{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) {
    require_rank(*t, 4, op, role);
    if (t->strides()[3] != 1 && t->size(3) > 1) {
      reject(op, std::string(role) + "'s last dimension must be contiguous, got " + t->describe());
    }
  }
  if (!is_known(options.variant)) {
    reject(op, "unknown variant " + std::to_string(static_cast<int>(options.variant)) +
                   " (one of: " + variant_list<AttentionVariant>() + ")");
  }
  const std::int64_t d = q.size(3);
  if (d != 64 && d != 128) {
    reject(op, "the head dim (q's last extent) must be 64 or 128, got " + std::to_string(d));
  }
  if (k.shape() != v.shape() || k.size(0) != q.size(0) || k.size(1) != q.size(1) ||
      k.size(3) != d) {
    reject(op, "k and v must be [B, H, Sk, D] with q's B, H and D: q is " + q.shape().to_string() +
                   ", k " + k.shape().to_string() + ", v " + v.shape().to_string());
  }
  if (out.shape() != q.shape()) {
    reject(op,
           "out must have q's shape " + q.shape().to_string() + ", got " + out.shape().to_string());
  }
  require_same_memory(q, k, op);
  require_same_memory(q, v, op);
  require_same_memory(q, out, op);
  if (!(options.scale >= 0.0F) || std::isinf(options.scale)) {
    reject(op, "scale must be finite and not negative (0: 1/sqrt(D)), got " +
                   std::to_string(options.scale));
  }
  if (options.alignment != CausalAlignment::top_left &&
      options.alignment != CausalAlignment::bottom_right) {
    reject(op, "unknown causal alignment " + std::to_string(static_cast<int>(options.alignment)));
  }
}

// lse: f32 [B, H, Sq] beside q.
void validate_lse(const Tensor& lse, const Tensor& q, std::string_view op) {
  require_dtype(lse, DType::f32, op, "lse");
  require_rank(lse, 3, op, "lse");
  if (lse.size(0) != q.size(0) || lse.size(1) != q.size(1) || lse.size(2) != q.size(2)) {
    reject(op, "lse must be [B, H, Sq] = [" + std::to_string(q.size(0)) + ", " +
                   std::to_string(q.size(1)) + ", " + std::to_string(q.size(2)) + "], got " +
                   lse.shape().to_string());
  }
  require_same_memory(q, lse, op);
}

template <class Args>
void fill_common(Args& p, const Tensor& q, const Tensor& k, const AttentionOptions& options) {
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.q_len = q.size(2);
  p.k_len = k.size(2);
  p.head_dim = q.size(3);
  p.dtype = q.dtype();
  p.scale = options.scale > 0.0F ? options.scale : 1.0F / std::sqrt(static_cast<float>(p.head_dim));
  p.causal = options.causal;
  p.causal_offset = options.alignment == CausalAlignment::bottom_right ? p.k_len - p.q_len : 0;
  if constexpr (requires { p.variant; }) p.variant = options.variant;
}

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
    validate_attention(q_, k_, v_, out_, options_, kName);
    if (lse_.defined()) validate_lse(lse_, q_, kName);
    if (lse_.defined() && (lse_.shares_storage_with(out_) || lse_.shares_storage_with(q_) ||
                           lse_.shares_storage_with(k_) || lse_.shares_storage_with(v_))) {
      reject(kName, "lse must not share storage with q, k, v or out");
    }
    if (out_.shares_storage_with(q_) || out_.shares_storage_with(k_) ||
        out_.shares_storage_with(v_)) {
      reject(kName,
             "out must not share storage with q, k or v (they are read while it is written)");
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
    if (const std::string why = kernels::flash_fwd_variant_refusal(p); !why.empty()) {
      reject(kName, "variant " + std::string(to_string(p.variant)) + ": " + why);
    }
    kernels::flash_attention_forward(p, StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::AttentionArgs args() const {
    kernels::AttentionArgs p;
    fill_common(p, q_, k_, options_);
    p.q = view(q_);
    p.k = view(k_);
    p.v = view(v_);
    p.out = view(out_);
    if (lse_.defined()) p.lse = view(lse_);
    return p;
  }

  Tensor q_, k_, v_, out_, lse_;
  AttentionOptions options_;
};

// validate() names a missing tensor; until then the task's reads and writes skip it.
std::vector<Tensor> defined_of(std::initializer_list<Tensor> tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) {
    if (t.defined()) out.push_back(t);
  }
  return out;
}

constexpr std::string_view kBackwardName = "flash_attention_backward";

class FlashAttentionBackward final : public Op {
 public:
  FlashAttentionBackward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor dout,
                         AttentionGradients grads, AttentionOptions options)
      : q_(std::move(q)),
        k_(std::move(k)),
        v_(std::move(v)),
        out_(std::move(out)),
        lse_(std::move(lse)),
        dout_(std::move(dout)),
        grads_(std::move(grads)),
        options_(options) {}
  std::string_view name() const noexcept override { return kBackwardName; }
  std::vector<Tensor> reads() const override { return defined_of({q_, k_, v_, out_, lse_, dout_}); }
  std::vector<Tensor> writes() const override {
    return defined_of({grads_.dq, grads_.dk, grads_.dv});
  }
  void validate() const override {
    const std::string_view op = kBackwardName;
    for (const auto& [t, role] : Roles{{&lse_, "lse"},
                                       {&dout_, "dout"},
                                       {&grads_.dq, "dq"},
                                       {&grads_.dk, "dk"},
                                       {&grads_.dv, "dv"}}) {
      if (!t->defined()) reject(op, std::string(role) + " is required (an undefined tensor)");
    }
    validate_attention(q_, k_, v_, out_, options_, op);
    validate_lse(lse_, q_, op);
    // Known at submit on either backend: the wgmma backward has no kernel
    // at head dim 64 (the device's own refusals come at run time).
    if (options_.variant == AttentionVariant::wgmma && q_.size(3) != 128) {
      reject(op, "variant wgmma: the wgmma backward takes head dim 128 only, got " +
                     std::to_string(q_.size(3)) + " (automatic or mma_sync run any)");
    }
    for (const auto& [t, like, role] :
         {std::tuple{&dout_, &q_, "dout"}, std::tuple{&grads_.dq, &q_, "dq"},
          std::tuple{&grads_.dk, &k_, "dk"}, std::tuple{&grads_.dv, &v_, "dv"}}) {
      require_dtype(*t, q_.dtype(), op, role);
      if (t->shape() != like->shape()) {
        reject(op, std::string(role) + " must have the shape " + like->shape().to_string() +
                       ", got " + t->shape().to_string());
      }
      if (t->strides()[3] != 1 && t->size(3) > 1) {
        reject(op,
               std::string(role) + "'s last dimension must be contiguous, got " + t->describe());
      }
      require_same_memory(q_, *t, op);
    }
    // Each gradient is written while every input is read, and by its own
    // pass: none may share storage with an input or another gradient.
    const Roles grads{{&grads_.dq, "dq"}, {&grads_.dk, "dk"}, {&grads_.dv, "dv"}};
    for (const auto& [g, g_role] : grads) {
      for (const auto& [t, role] : Roles{{&q_, "q"},
                                         {&k_, "k"},
                                         {&v_, "v"},
                                         {&out_, "out"},
                                         {&lse_, "lse"},
                                         {&dout_, "dout"},
                                         {&grads_.dq, "dq"},
                                         {&grads_.dk, "dk"},
                                         {&grads_.dv, "dv"}}) {
        if (t != g && g->shares_storage_with(*t)) {
          reject(op, std::string(g_role) + " must not share storage with " + role);
        }
      }
    }
  }
  void run_cpu() const override { kernels::attention_backward_reference(args()); }
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::AttentionBackwardArgs p = args();
    if (!kernels::flash_bwd_fits(p)) {
      reject(kBackwardName,
             "on a GPU, q, k, v, out, dout, dq, dk and dv need batch, head and row strides that "
             "are multiples of 8 elements and 16-byte aligned data");
    }
    if (const std::string why = kernels::flash_bwd_variant_refusal(p); !why.empty()) {
      reject(kBackwardName, "variant " + std::string(to_string(p.variant)) + ": " + why);
    }
    const std::size_t bytes = kernels::attention_backward_workspace_bytes(p);
    if (bytes > 0) kernels::place_attention_backward_workspace(p, ctx.workspace(bytes));
    kernels::flash_attention_backward(p, StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::AttentionBackwardArgs args() const {
    kernels::AttentionBackwardArgs p;
    fill_common(p, q_, k_, options_);
    p.q = view(q_);
    p.k = view(k_);
    p.v = view(v_);
    p.out = view(out_);
    p.dout = view(dout_);
    p.lse = view(lse_);
    p.dq = view(grads_.dq);
    p.dk = view(grads_.dk);
    p.dv = view(grads_.dv);
    return p;
  }

  Tensor q_, k_, v_, out_, lse_, dout_;
  AttentionGradients grads_;
  AttentionOptions options_;
};

// The last dimension contiguous, f32 or the given 16-bit type, [B, H, S(, D)] as `like`.
void require_like(const Tensor& t, const Tensor& like, int rank, DType dtype, std::string_view op,
                  std::string_view role) {
  detail::require_defined(t, op, role);
  detail::require_dtype(t, dtype, op, role);
  detail::require_rank(t, rank, op, role);
  for (int d = 0; d < rank; ++d) {
    if (t.size(d) != like.size(d)) {
      reject(op, std::string(role) + " must match " + like.shape().to_string() + " in its first " +
                     std::to_string(rank) + " extents, got " + t.shape().to_string());
    }
  }
  if (t.strides()[rank - 1] != 1 && t.size(rank - 1) > 1) {
    reject(op, std::string(role) + "'s last dimension must be contiguous, got " + t.describe());
  }
  detail::require_same_memory(like, t, op);
}

constexpr std::string_view kMergeName = "attention_merge";

// acc, acc_lse (f32) merged with part, part_lse; out, out_lse the merged
// result (optional).
class AttentionMerge final : public Op {
 public:
  AttentionMerge(Tensor acc, Tensor acc_lse, Tensor part, Tensor part_lse, Tensor out,
                 Tensor out_lse, bool first)
      : acc_(std::move(acc)),
        acc_lse_(std::move(acc_lse)),
        part_(std::move(part)),
        part_lse_(std::move(part_lse)),
        out_(std::move(out)),
        out_lse_(std::move(out_lse)),
        first_(first) {}
  std::string_view name() const noexcept override { return kMergeName; }
  std::vector<Tensor> reads() const override {
    if (first_) return {part_, part_lse_};
    return {part_, part_lse_, acc_, acc_lse_};
  }
  std::vector<Tensor> writes() const override {
    std::vector<Tensor> w{acc_, acc_lse_};
    if (out_.defined()) w.push_back(out_);
    if (out_lse_.defined()) w.push_back(out_lse_);
    return w;
  }
  void validate() const override {
    detail::require_dtype_in(part_, {DType::bf16, DType::f16}, kMergeName, "part");
    detail::require_rank(part_, 4, kMergeName, "part");
    require_like(acc_, part_, 4, DType::f32, kMergeName, "acc");
    require_like(part_lse_, part_, 3, DType::f32, kMergeName, "part_lse");
    require_like(acc_lse_, part_, 3, DType::f32, kMergeName, "acc_lse");
    if (out_.defined()) require_like(out_, part_, 4, part_.dtype(), kMergeName, "out");
    if (out_lse_.defined()) require_like(out_lse_, part_, 3, DType::f32, kMergeName, "out_lse");
    if (part_.size(3) % 4 != 0) reject(kMergeName, "the head dim must be a multiple of 4");
  }
  void run_cpu() const override { kernels::attention_merge_reference(args()); }
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::attention_merge(args(), StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::AttentionMergeArgs args() const {
    kernels::AttentionMergeArgs p;
    p.batch = part_.size(0);
    p.heads = part_.size(1);
    p.rows = part_.size(2);
    p.head_dim = part_.size(3);
    p.dtype = part_.dtype();
    p.acc = view(acc_);
    p.acc_lse = view(acc_lse_);
    p.part = view(part_);
    p.part_lse = view(part_lse_);
    p.out = view(out_);
    p.out_lse = view(out_lse_);
    p.first = first_;
    return p;
  }
  Tensor acc_, acc_lse_, part_, part_lse_, out_, out_lse_;
  bool first_;
};

constexpr std::string_view kAccumulateName = "gradient_accumulate";

// acc (f32) += part (or = part when first; part undefined: nothing added);
// out (optional) = acc rounded.
class GradientAccumulate final : public Op {
 public:
  GradientAccumulate(Tensor acc, Tensor part, Tensor out, bool first)
      : acc_(std::move(acc)), part_(std::move(part)), out_(std::move(out)), first_(first) {}
  std::string_view name() const noexcept override { return kAccumulateName; }
  std::vector<Tensor> reads() const override {
    std::vector<Tensor> r;
    if (part_.defined()) r.push_back(part_);
    if (!first_ || !part_.defined()) r.push_back(acc_);
    return r;
  }
  std::vector<Tensor> writes() const override {
    std::vector<Tensor> w;
    if (part_.defined()) w.push_back(acc_);
    if (out_.defined()) w.push_back(out_);
    return w;
  }
  void validate() const override {
    const Tensor& typed = part_.defined() ? part_ : out_;
    detail::require_defined(typed, kAccumulateName, "part or out");
    detail::require_dtype_in(typed, {DType::bf16, DType::f16}, kAccumulateName, "part");
    detail::require_rank(typed, 4, kAccumulateName, "part");
    require_like(acc_, typed, 4, DType::f32, kAccumulateName, "acc");
    if (out_.defined()) require_like(out_, typed, 4, typed.dtype(), kAccumulateName, "out");
    if (typed.size(3) % 4 != 0) reject(kAccumulateName, "the head dim must be a multiple of 4");
  }
  void run_cpu() const override { kernels::gradient_accumulate_reference(args()); }
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::gradient_accumulate(args(), StreamView(cuda_stream(ctx)));
  }

 private:
  kernels::GradientAccumulateArgs args() const {
    const Tensor& typed = part_.defined() ? part_ : out_;
    kernels::GradientAccumulateArgs p;
    p.batch = typed.size(0);
    p.heads = typed.size(1);
    p.rows = typed.size(2);
    p.head_dim = typed.size(3);
    p.dtype = typed.dtype();
    p.acc = view(acc_);
    p.part = view(part_);
    p.out = view(out_);
    p.first = first_;
    return p;
  }
  Tensor acc_, part_, out_;
  bool first_;
};

}  // namespace

OpPtr flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& lse, const Tensor& dout,
                               const AttentionGradients& grads, const AttentionOptions& options) {
  return std::make_shared<FlashAttentionBackward>(q, k, v, out, lse, dout, grads, options);
}

OpPtr flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                      const Tensor& lse, const AttentionOptions& options) {
  return std::make_shared<FlashAttention>(q, k, v, out, lse, options);
}

namespace detail {

OpPtr attention_merge(const Tensor& acc, const Tensor& acc_lse, const Tensor& part,
                      const Tensor& part_lse, const Tensor& out, const Tensor& out_lse,
                      bool first) {
  return std::make_shared<AttentionMerge>(acc, acc_lse, part, part_lse, out, out_lse, first);
}

OpPtr gradient_accumulate(const Tensor& acc, const Tensor& part, const Tensor& out, bool first) {
  return std::make_shared<GradientAccumulate>(acc, part, out, first);
}

}  // namespace detail

}  // namespace loom::ops
