#pragma once
// loom's own way into a Tensor: its storage, and a tensor made over storage.
// Users see neither (tensor.hpp keeps them private).

#include "core/storage.hpp"

#include <loom/tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace loom::detail {

struct TensorAccess {
  static const std::shared_ptr<Storage>& storage(const Tensor& t) noexcept { return t.storage(); }
  static Tensor make(std::shared_ptr<Storage> storage, DType dtype, const Shape& shape,
                     const Strides& strides, std::int64_t offset) {
    return Tensor(std::move(storage), dtype, shape, strides, offset);
  }
};

/// Whether every element of `t` has bytes of its own (an op may write it:
/// no two elements alias). Sufficient, not necessary: sorted by stride, each
/// dimension of extent > 1 steps over all of the previous ones. A zero
/// stride (an expanded view) fails.
inline bool elements_distinct(const Tensor& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // |stride|, extent
  for (int d = 0; d < t.rank(); ++d) {
    if (t.shape()[d] > 1) dims.emplace_back(std::abs(t.strides()[d]), t.shape()[d]);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t covered = 1;
  for (const auto& [stride, extent] : dims) {
    if (stride < covered) return false;
    covered = stride * extent;
  }
  return true;
}

}  // namespace loom::detail
