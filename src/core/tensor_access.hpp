#pragma once
// loom's own way into a Tensor: its storage, and a tensor made over storage.
// Users see neither (tensor.hpp keeps them private).

#include "core/storage.hpp"

#include <loom/tensor.hpp>

#include <memory>
#include <utility>

namespace loom::detail {

struct TensorAccess {
  static const std::shared_ptr<Storage>& storage(const Tensor& t) noexcept { return t.storage(); }
  static Tensor make(std::shared_ptr<Storage> storage, DType dtype, const Shape& shape,
                     const Strides& strides, std::int64_t offset) {
    return Tensor(std::move(storage), dtype, shape, strides, offset);
  }
};

}  // namespace loom::detail
