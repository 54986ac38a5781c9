#pragma once
/// @file ops/softmax.hpp
/// Softmax over rows (Lectures 9, 14).

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace loom::ops {

/// softmax's kernels (variant.hpp).
enum class SoftmaxVariant : std::uint8_t {
  automatic,  ///< the fastest for the shape: fused
  naive,      ///< three passes over the row: max, sum, output
  online,     ///< max and sum in one pass (rescaling the sum), then the output
  fused,      ///< the row read once where it fits in registers
};
template <>
struct VariantNames<SoftmaxVariant> {
  static constexpr std::array<std::string_view, 4> names = {"automatic", "naive", "online",
                                                            "fused"};
};

/// y = softmax of each row of x: exp(x - max) / sum(exp(x - max)), over a
/// 2-D tensor [rows, cols] of f32, or bf16 (bf16 in and out, f32 math).
/// x and y have one shape and dtype. Rows may be strided (a column slice of
/// a wider tensor, say) as long as each row's elements are contiguous
/// (column stride 1); other views are rejected at submit. y may be x itself
/// (in place); otherwise it must not share storage with x.
///
/// Special rows: a row whose entries are all -inf gives NaN everywhere (it
/// has no distribution); a row holding a NaN or +inf gives NaN everywhere;
/// -inf entries otherwise give 0. Large magnitudes (|x| of 80 and more) are
/// fine: the row's maximum is subtracted first.
///
/// Bad inputs (dtype, rank, shape, layout, memory space, an unknown variant)
/// are rejected at submit, naming the task. Thread-safe (a value).
/// @code
///   g.add(loom::ops::softmax(logits, probs));
///   g.add(loom::ops::softmax(t.slice(1, 0, 1000), out));   // rows with a stride
/// @endcode
LOOM_API OpPtr softmax(const Tensor& x, const Tensor& y,
                       SoftmaxVariant variant = SoftmaxVariant::automatic);

}  // namespace loom::ops
