// Softmax's CPU reference: double-precision math, rounded once to the
// output's dtype; what the CPU backend runs and the GPU kernels are checked
// against.
#include "softmax/softmax.hpp"

#include "common/convert.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace loom::kernels {
namespace {

using bf16_bits = std::uint16_t;

template <class T>
double load_host(const T* p);
template <>
double load_host<float>(const float* p) {
  return *p;
}
template <>
double load_host<bf16_bits>(const bf16_bits* p) {
  return bf16_bits_to_f32(*p);
}
template <class T>
void store_host(T* p, double v);
template <>
void store_host<float>(float* p, double v) {
  *p = static_cast<float>(v);
}
template <>
void store_host<bf16_bits>(bf16_bits* p, double v) {
  *p = f32_to_bf16_bits(static_cast<float>(v));
}

template <class T>
void reference_rows(const T* x, T* y, const SoftmaxShape& s) {
  std::vector<double> e(static_cast<std::size_t>(s.cols));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * s.x_row_stride;
    T* yr = y + r * s.y_row_stride;
    double m = -std::numeric_limits<double>::infinity();
    bool poisoned = false;  // a NaN or +inf: the row is NaN
    for (std::int64_t j = 0; j < s.cols; ++j) {
      const double v = load_host(xr + j);
      if (std::isnan(v) || v == std::numeric_limits<double>::infinity()) poisoned = true;
      m = std::max(m, v);
    }
    if (poisoned || m == -std::numeric_limits<double>::infinity()) {
      for (std::int64_t j = 0; j < s.cols; ++j) {
        store_host(yr + j, std::numeric_limits<double>::quiet_NaN());
      }
      continue;
    }
    double sum = 0.0;
    for (std::int64_t j = 0; j < s.cols; ++j) {
      e[static_cast<std::size_t>(j)] = std::exp(load_host(xr + j) - m);
      sum += e[static_cast<std::size_t>(j)];
    }
    for (std::int64_t j = 0; j < s.cols; ++j)
      store_host(yr + j, e[static_cast<std::size_t>(j)] / sum);
  }
}

[[noreturn]] void reject_dtype(DType dtype) {
  throw InvalidArgument("softmax: dtype must be f32 or bf16, got " + std::string(to_string(dtype)));
}

}  // namespace

void softmax_reference(const void* x, void* y, DType dtype, const SoftmaxShape& shape) {
  if (dtype == DType::f32) {
    reference_rows(static_cast<const float*>(x), static_cast<float*>(y), shape);
  } else if (dtype == DType::bf16) {
    reference_rows(static_cast<const bf16_bits*>(x), static_cast<bf16_bits*>(y), shape);
  } else {
    reject_dtype(dtype);
  }
}

}  // namespace loom::kernels
