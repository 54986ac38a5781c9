#pragma once
/// @file tensor.hpp
/// A tensor: a shape, strides (in elements), a dtype and a memory space over
/// storage with shared ownership. Storage comes from loom's pools (through a
/// Runtime), or wraps a user's pointer without owning it (Runtime::provide).
/// Views (slice, reshape, transpose) share the storage and copy nothing.
///
/// Thread-safety: a Tensor is a value; copies may be used from different
/// threads. Writing the same elements from two threads is a data race, as
/// for any memory.

#include <loom/dtype.hpp>
#include <loom/export.hpp>
#include <loom/memory.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

namespace loom {

namespace detail {
struct Storage;
struct TensorAccess;
}  // namespace detail

/// A short list of extents or strides (rank at most kMaxRank), stored inline.
class LOOM_API Dims {
 public:
  static constexpr int kMaxRank = 8;

  Dims() = default;
  /// @throws InvalidArgument for more than kMaxRank entries.
  Dims(std::initializer_list<std::int64_t> values);
  explicit Dims(std::span<const std::int64_t> values);

  int rank() const noexcept { return rank_; }
  std::int64_t operator[](int i) const noexcept { return values_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) noexcept { return values_[static_cast<std::size_t>(i)]; }
  const std::int64_t* begin() const noexcept { return values_.data(); }
  const std::int64_t* end() const noexcept { return values_.data() + rank_; }
  /// The product of the entries (1 for rank 0); -1 if it overflows.
  std::int64_t product() const noexcept;
  friend LOOM_API bool operator==(const Dims& a, const Dims& b) noexcept;
  /// "[3, 4, 5]".
  std::string to_string() const;

 private:
  std::array<std::int64_t, kMaxRank> values_{};
  int rank_ = 0;
};

using Shape = Dims;
using Strides = Dims;

/// Row-major strides of a shape, in elements.
LOOM_API Strides contiguous_strides(const Shape& shape);

/// @throws InvalidArgument when `shape` holds more elements of `dtype` than
/// any memory could (including overflow of the element count).
LOOM_API void check_element_count(DType dtype, const Shape& shape);

class LOOM_API Tensor {
 public:
  /// An undefined tensor: no storage; defined() is false.
  Tensor() = default;

  bool defined() const noexcept { return storage_ != nullptr; }
  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  const Strides& strides() const noexcept { return strides_; }
  int rank() const noexcept { return shape_.rank(); }
  std::int64_t size(int dim) const;
  std::int64_t numel() const noexcept { return shape_.product(); }
  /// Bytes the elements occupy when contiguous.
  std::size_t nbytes() const noexcept;
  /// Offset of the first element from the start of the storage, in elements.
  std::int64_t offset() const noexcept { return offset_; }
  Memory memory() const noexcept;
  /// Row-major with no gaps.
  bool is_contiguous() const noexcept;

  /// Address of the first element (a device address for device tensors).
  void* data() const noexcept;
  /// Typed address of the first element. @throws InvalidArgument if T is not the dtype.
  template <class T>
  T* data_as() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data());
  }

  /// Elements [start, stop) with `step` along `dim`: a view. Negative start
  /// and stop count from the end. @throws InvalidArgument for a bad dim,
  /// range or step.
  Tensor slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
  /// The same elements with another shape: a view. One extent may be -1.
  /// @throws InvalidArgument when the counts differ or the layout cannot be
  /// viewed that way (call contiguous() first).
  Tensor reshape(const Shape& shape) const;
  /// Dimensions d0 and d1 swapped: a view.
  Tensor transpose(int d0, int d1) const;
  /// This tensor broadcast to `shape` (NumPy's rule, dimensions aligned at
  /// the last): a view whose added dimensions, and those of extent 1 that
  /// grow, have stride 0. It shares the storage, so a graph orders it as the
  /// same data as the tensor. An input of the maps; an op refuses it as an
  /// output (its elements share memory), naming the task.
  /// @code
  ///   g.add(loom::ops::add(h, bias.expand(h.shape()), h));   // bias: [1, N] or [N]
  /// @endcode
  /// @throws InvalidArgument when `shape` has fewer dimensions, or a
  /// dimension is neither equal nor 1 in this tensor.
  Tensor expand(const Shape& shape) const;
  /// This tensor if contiguous; else a contiguous copy in the same memory
  /// space (host: copied now; device: enqueued on the storage's stream).
  Tensor contiguous() const;

  /// True when both tensors view the same memory: the same storage, or two
  /// storages whose bytes overlap in one address space (rt.provide() twice
  /// on one pointer, or take() then provide(), are the same memory).
  bool shares_storage_with(const Tensor& other) const noexcept;
  /// "f32[3, 4] (strides [4, 1], offset 0) on device 0".
  std::string describe() const;

  /// Hands the storage to the caller: the returned pointer owns it (its
  /// deleter gives pooled memory back to loom) and this tensor becomes
  /// undefined. @throws InvalidArgument when another tensor shares the
  /// storage or this tensor is a view of part of it.
  std::shared_ptr<void> take();

 private:
  friend struct detail::TensorAccess;  // loom's way in (src/core/tensor_access.hpp)
  const std::shared_ptr<detail::Storage>& storage() const noexcept { return storage_; }
  Tensor(std::shared_ptr<detail::Storage> storage, DType dtype, const Shape& shape,
         const Strides& strides, std::int64_t offset);
  void check_dtype(DType expected) const;

  std::shared_ptr<detail::Storage> storage_;
  DType dtype_ = DType::f32;
  Shape shape_;
  Strides strides_;
  std::int64_t offset_ = 0;
};

}  // namespace loom
