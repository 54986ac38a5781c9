#pragma once
// Input checks shared by the built-in ops (each op's validate() calls them).
// Every message starts with the op's name and the tensor's role, and says what
// was expected and what was given; the executor adds the task's name.

#include <loom/dtype.hpp>
#include <loom/ops/variant.hpp>
#include <loom/tensor.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace loom::ops::detail {

/// Throws InvalidArgument "<op>: <what>".
[[noreturn]] void reject(std::string_view op, std::string_view what);

void require_defined(const Tensor& t, std::string_view op, std::string_view role);
void require_dtype(const Tensor& t, DType dtype, std::string_view op, std::string_view role);
/// One of several dtypes.
void require_dtype_in(const Tensor& t, std::initializer_list<DType> dtypes, std::string_view op,
                      std::string_view role);
void require_contiguous(const Tensor& t, std::string_view op, std::string_view role);
void require_rank(const Tensor& t, int rank, std::string_view op, std::string_view role);
void require_same_shape(const Tensor& a, const Tensor& b, std::string_view op,
                        std::string_view roles);
/// Whether `from` broadcasts to `to` (NumPy's rule, as Tensor::expand).
bool broadcasts_to(const Shape& from, const Shape& to) noexcept;
/// t's shape broadcasts to `to` (out's shape).
void require_broadcastable(const Tensor& t, const Shape& to, std::string_view op,
                           std::string_view role);
void require_same_memory(const Tensor& a, const Tensor& b, std::string_view op);
/// Defined, f32 and contiguous: what the simplest kernels take.
void require_f32_contiguous(const Tensor& t, std::string_view op, std::string_view role);

/// `variant` is one of its family's values, not a cast of another number:
/// "<op>: unknown variant 9 (automatic, naive, ...)".
template <class Variant>
void require_known_variant(Variant variant, std::string_view op) {
  if (is_known(variant)) return;
  reject(op, "unknown variant " + std::to_string(static_cast<int>(variant)) + " (" +
                 variant_list<Variant>() + ")");
}

inline std::size_t count(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace loom::ops::detail
