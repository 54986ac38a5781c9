// The loss family's CPU references: double-precision math over each row,
// rounded once to the output's dtype (common/convert.hpp's rounding).
#include "common/convert.hpp"
#include "loss/loss.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace loom::kernels {
namespace {

double load(const void* base, DType dtype, std::int64_t i) {
  if (dtype == DType::f32) return static_cast<const float*>(base)[i];
  std::uint16_t bits = 0;
  std::memcpy(&bits, static_cast<const std::uint16_t*>(base) + i, sizeof bits);
  return dtype == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

void store(void* base, DType dtype, std::int64_t i, double v) {
  const auto f = static_cast<float>(v);
  if (dtype == DType::f32) {
    static_cast<float*>(base)[i] = f;
    return;
  }
  const std::uint16_t bits = dtype == DType::f16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
  std::memcpy(static_cast<std::uint16_t*>(base) + i, &bits, sizeof bits);
}

// log(sum(exp(x))) of row r, the maximum subtracted first. A row with a NaN
// or +inf, or only -inf, gives NaN (x - m is NaN somewhere).
double row_lse(const void* x, DType dtype, std::int64_t stride, std::int64_t cols, std::int64_t r) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double v = load(x, dtype, r * stride + j);
    nan = nan || std::isnan(v);
    m = std::max(m, v);
  }
  if (nan || std::isinf(m)) return std::numeric_limits<double>::quiet_NaN();
  double s = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) s += std::exp(load(x, dtype, r * stride + j) - m);
  return m + std::log(s);
}

std::int64_t label_of(const CrossEntropyArgs& a, std::int64_t r) {
  return a.labels64 ? static_cast<const std::int64_t*>(a.labels)[r]
                    : static_cast<const std::int32_t*>(a.labels)[r];
}

bool in_range(const CrossEntropyArgs& a, std::int64_t label) {
  return label >= 0 && label < a.shape.cols;
}

double counted_rows(const CrossEntropyArgs& a) {
  double n = 0;
  for (std::int64_t r = 0; r < a.shape.rows; ++r) n += label_of(a, r) != a.ignore_index ? 1 : 0;
  return n;
}

}  // namespace

void log_softmax_reference(const void* x, void* y, DType dtype, const LossRows& s) {
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const double lse = row_lse(x, dtype, s.x_row_stride, s.cols, r);
    for (std::int64_t j = 0; j < s.cols; ++j) {
      store(y, dtype, r * s.y_row_stride + j, load(x, dtype, r * s.x_row_stride + j) - lse);
    }
  }
}

void cross_entropy_reference(const CrossEntropyArgs& a) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double total = 0.0;
  for (std::int64_t r = 0; r < a.shape.rows; ++r) {
    const double lse = row_lse(a.logits, a.dtype, a.shape.x_row_stride, a.shape.cols, r);
    a.lse[r] = static_cast<float>(lse);
    const std::int64_t label = label_of(a, r);
    double loss = 0.0;
    if (label != a.ignore_index) {
      loss = in_range(a, label) ? lse - load(a.logits, a.dtype, r * a.shape.x_row_stride + label)
                                : nan;
    }
    if (a.reduction == LossReduction::none) {
      a.loss[r] = static_cast<float>(loss);
    } else {
      total += loss;
    }
  }
  if (a.reduction == LossReduction::sum) a.loss[0] = static_cast<float>(total);
  if (a.reduction == LossReduction::mean) a.loss[0] = static_cast<float>(total / counted_rows(a));
}

void cross_entropy_backward_reference(const CrossEntropyArgs& a) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double count = a.reduction == LossReduction::mean ? counted_rows(a) : 1.0;
  for (std::int64_t r = 0; r < a.shape.rows; ++r) {
    const std::int64_t label = label_of(a, r);
    const double upstream =
        a.grad_loss == nullptr ? 1.0 : a.grad_loss[a.reduction == LossReduction::none ? r : 0];
    const double scale = upstream / count;
    const double lse = a.lse[r];
    for (std::int64_t j = 0; j < a.shape.cols; ++j) {
      double g = 0.0;
      if (label != a.ignore_index) {
        const double p = std::exp(load(a.logits, a.dtype, r * a.shape.x_row_stride + j) - lse);
        g = in_range(a, label) ? scale * (p - (j == label ? 1.0 : 0.0)) : nan;
      }
      store(a.grad, a.dtype, r * a.shape.y_row_stride + j, g);
    }
  }
}

std::size_t cross_entropy_workspace_bytes(const CrossEntropyArgs& a) noexcept {
  // The rows' losses before a reduction, and one float for the count.
  const auto rows = static_cast<std::size_t>(a.shape.rows);
  return (a.reduction == LossReduction::none ? 0 : rows * sizeof(float)) + 2 * sizeof(float);
}

}  // namespace loom::kernels
