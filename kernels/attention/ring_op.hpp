#pragma once
// The ops that bind ring.hpp's merge and accumulate kernels, made in op.cpp
// beside the family's other op bindings and used by the ring (ring.cpp). Not
// public: loom::ops::ring_attention is their only user. Tensors are as
// ring.hpp's arguments say ([B, H, S, D] with D contiguous, [B, H, S] for
// lse); an undefined optional tensor is not written.

#include <loom/op.hpp>
#include <loom/tensor.hpp>

namespace loom::ops::detail {

/// acc, acc_lse (f32) merged with part, part_lse by log-sum-exp (taken as
/// they are when `first`); out and out_lse (optional) get the merged result.
OpPtr attention_merge(const Tensor& acc, const Tensor& acc_lse, const Tensor& part,
                      const Tensor& part_lse, const Tensor& out, const Tensor& out_lse, bool first);

/// acc (f32) += part (= part when `first`; part undefined: nothing added);
/// out (optional) = acc rounded to its dtype.
OpPtr gradient_accumulate(const Tensor& acc, const Tensor& part, const Tensor& out, bool first);

}  // namespace loom::ops::detail
