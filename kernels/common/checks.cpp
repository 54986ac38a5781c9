#include "common/checks.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::ops::detail {
namespace {

std::string prefix(std::string_view op, std::string_view role) {
  return std::string(op) + ": " + std::string(role);
}

}  // namespace

void reject(std::string_view op, std::string_view what) {
  throw InvalidArgument(std::string(op) + ": " + std::string(what));
}

void require_defined(const Tensor& t, std::string_view op, std::string_view role) {
  if (!t.defined()) throw InvalidArgument(prefix(op, role) + " is undefined");
}

void require_dtype(const Tensor& t, DType dtype, std::string_view op, std::string_view role) {
  require_defined(t, op, role);
  if (t.dtype() != dtype) {
    throw InvalidArgument(prefix(op, role) + " must be " + std::string(to_string(dtype)) +
                          ", got " + t.describe());
  }
}

void require_dtype_in(const Tensor& t, std::initializer_list<DType> dtypes, std::string_view op,
                      std::string_view role) {
  require_defined(t, op, role);
  std::string names;
  for (DType d : dtypes) {
    if (t.dtype() == d) return;
    if (!names.empty()) names += ", ";
    names += to_string(d);
  }
  throw InvalidArgument(prefix(op, role) + " must be one of " + names + "; got " + t.describe());
}

void require_contiguous(const Tensor& t, std::string_view op, std::string_view role) {
  require_defined(t, op, role);
  if (!t.is_contiguous()) {
    throw InvalidArgument(prefix(op, role) + " must be contiguous (this kernel takes no strided " +
                          "views; call contiguous() first), got " + t.describe());
  }
}

void require_rank(const Tensor& t, int rank, std::string_view op, std::string_view role) {
  require_defined(t, op, role);
  if (t.rank() != rank) {
    throw InvalidArgument(prefix(op, role) + " must have rank " + std::to_string(rank) + ", got " +
                          t.describe());
  }
}

void require_same_shape(const Tensor& a, const Tensor& b, std::string_view op,
                        std::string_view roles) {
  if (!(a.shape() == b.shape())) {
    throw InvalidArgument(std::string(op) + ": " + std::string(roles) +
                          " must have one shape; got " + a.shape().to_string() + " and " +
                          b.shape().to_string());
  }
}

bool broadcasts_to(const Shape& from, const Shape& to) noexcept {
  const int extra = to.rank() - from.rank();
  if (extra < 0) return false;
  for (int d = 0; d < from.rank(); ++d) {
    if (from[d] != 1 && from[d] != to[d + extra]) return false;
  }
  return true;
}

void require_broadcastable(const Tensor& t, const Shape& to, std::string_view op,
                           std::string_view role) {
  if (broadcasts_to(t.shape(), to)) return;
  throw InvalidArgument(prefix(op, role) + " " + t.shape().to_string() +
                        " does not broadcast to out's shape " + to.to_string() +
                        " (each dimension, aligned at the last, must be equal or 1, and out "
                        "must have at least as many)");
}

void require_same_memory(const Tensor& a, const Tensor& b, std::string_view op) {
  if (!(a.memory() == b.memory())) {
    throw InvalidArgument(std::string(op) + ": all tensors must be in one memory space; got " +
                          a.memory().to_string() + " and " + b.memory().to_string());
  }
}

void require_f32_contiguous(const Tensor& t, std::string_view op, std::string_view role) {
  require_dtype(t, DType::f32, op, role);
  require_contiguous(t, op, role);
}

}  // namespace loom::ops::detail
