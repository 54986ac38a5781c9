#include <loom/error.hpp>
#include <loom/tensor.hpp>

#include "core/storage.hpp"
#include "core/tensor_access.hpp"

#include <algorithm>
#include <utility>

namespace loom {

Dims::Dims(std::initializer_list<std::int64_t> values)
    : Dims(std::span<const std::int64_t>(values.begin(), values.size())) {}

Dims::Dims(std::span<const std::int64_t> values) {
  if (values.size() > static_cast<std::size_t>(kMaxRank)) {
    throw InvalidArgument("a tensor has at most " + std::to_string(kMaxRank) + " dimensions; got " +
                          std::to_string(values.size()));
  }
  std::copy(values.begin(), values.end(), values_.begin());
  rank_ = static_cast<int>(values.size());
}

std::int64_t Dims::product() const noexcept {
  std::int64_t p = 1;
  for (auto v : *this) {
    if (__builtin_mul_overflow(p, v, &p)) return -1;  // callers reject it
  }
  return p;
}

bool operator==(const Dims& a, const Dims& b) noexcept {
  return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
}

std::string Dims::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string((*this)[i]);
  }
  return s + "]";
}

Strides contiguous_strides(const Shape& shape) {
  Strides s = shape;
  std::int64_t step = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    s[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

void check_element_count(DType dtype, const Shape& shape) {
  const std::int64_t n = shape.product();
  const auto max_elements =
      (~std::uint64_t{0} - 7) / static_cast<std::uint64_t>(bits_of(dtype)) / 2;
  if (n < 0 || static_cast<std::uint64_t>(n) > max_elements) {
    throw InvalidArgument("the shape " + shape.to_string() + " has more " +
                          std::string(to_string(dtype)) + " elements than any memory can hold");
  }
}

Tensor::Tensor(std::shared_ptr<detail::Storage> storage, DType dtype, const Shape& shape,
               const Strides& strides, std::int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(shape),
      strides_(strides),
      offset_(offset) {
  for (auto extent : shape_) {
    if (extent < 0) throw InvalidArgument("negative extent in shape " + shape_.to_string());
  }
  check_element_count(dtype_, shape_);
  if (strides_.rank() != shape_.rank()) {
    throw InvalidArgument("strides " + strides_.to_string() + " do not match shape " +
                          shape_.to_string());
  }
}

std::int64_t Tensor::size(int dim) const {
  const int d = dim < 0 ? dim + rank() : dim;
  if (d < 0 || d >= rank()) {
    throw InvalidArgument("dimension " + std::to_string(dim) + " is out of range for a rank-" +
                          std::to_string(rank()) + " tensor");
  }
  return shape_[d];
}

std::size_t Tensor::nbytes() const noexcept {
  return static_cast<std::size_t>(bytes_for(dtype_, static_cast<std::uint64_t>(numel())));
}

Memory Tensor::memory() const noexcept { return storage_ ? storage_->memory : Memory::pageable; }

bool Tensor::is_contiguous() const noexcept {
  if (numel() == 0) return true;
  std::int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data() const noexcept {
  if (!storage_) return nullptr;
  const auto byte_offset = bytes_for(dtype_, static_cast<std::uint64_t>(offset_));
  return static_cast<char*>(storage_->base) + byte_offset;
}

void Tensor::check_dtype(DType expected) const {
  if (expected != dtype_) {
    throw InvalidArgument("tensor " + describe() + " holds " + std::string(to_string(dtype_)) +
                          ", not " + std::string(to_string(expected)));
  }
}

namespace detail {

std::pair<std::uintptr_t, std::uintptr_t> byte_span(const Tensor& t) {
  const auto base = reinterpret_cast<std::uintptr_t>(t.data());
  if (t.numel() == 0) return {base, base};
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  for (int i = 0; i < t.rank(); ++i) {
    const std::int64_t reach = (t.shape()[i] - 1) * t.strides()[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const std::int64_t bits = bits_of(t.dtype());
  // Round outwards to whole bytes (packed int4 elements share bytes).
  const auto floor_bytes = [bits](std::int64_t e) {
    const std::int64_t b = e * bits;
    return (b >= 0 ? b : b - 7) / 8;
  };
  const auto ceil_bytes = [bits](std::int64_t e) { return (e * bits + 7) / 8; };
  return {base + static_cast<std::uintptr_t>(floor_bytes(lo)),
          base + static_cast<std::uintptr_t>(ceil_bytes(hi + 1))};
}

const void* address_space(const Tensor& t) noexcept {
  const Storage* s = TensorAccess::storage(t).get();
  if (s == nullptr || (s->intermediate && !s->bound)) return s;
  // Small integers: no object lives there, so they never equal a storage's address.
  const Memory m = s->memory;
  const std::uintptr_t space = m.is_host() ? 1 : 2 + static_cast<std::uintptr_t>(m.device());
  return reinterpret_cast<const void*>(space);
}

}  // namespace detail

bool Tensor::shares_storage_with(const Tensor& other) const noexcept {
  if (!storage_ || !other.storage_) return false;
  if (storage_ == other.storage_) return true;
  const void* space = detail::address_space(*this);
  if (space != detail::address_space(other) || space == storage_.get()) return false;
  // Two handles of one memory (provide() twice, take() then provide()): the
  // bytes each storage covers overlap.
  const auto lo = reinterpret_cast<std::uintptr_t>(storage_->base);
  const auto other_lo = reinterpret_cast<std::uintptr_t>(other.storage_->base);
  return lo < other_lo + other.storage_->bytes && other_lo < lo + storage_->bytes;
}

namespace {

int normalize_dim(int dim, int rank, const char* what) {
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) {
    throw InvalidArgument(std::string(what) + ": dimension " + std::to_string(dim) +
                          " is out of range for a rank-" + std::to_string(rank) + " tensor");
  }
  return d;
}

void require_defined(const Tensor& t, const char* what) {
  if (!t.defined()) throw InvalidArgument(std::string(what) + " of an undefined tensor");
}

// Packed int4 elements cannot be addressed one by one: views must keep the
// innermost dimension contiguous and start on a byte.
void check_int4_view(const Tensor& t, const char* what) {
  if (t.dtype() != DType::i4) return;
  const bool inner_ok =
      t.rank() == 0 || t.strides()[t.rank() - 1] == 1 || t.shape()[t.rank() - 1] == 1;
  bool even = t.offset() % 2 == 0;
  for (int i = 0; i + 1 < t.rank(); ++i)
    even = even && (t.strides()[i] % 2 == 0 || t.shape()[i] == 1);
  if (!inner_ok || !even) {
    throw InvalidArgument(std::string(what) +
                          ": an i4 view must keep the innermost dimension contiguous and "
                          "start every row on a whole byte (even element offsets)");
  }
}

}  // namespace

Tensor Tensor::slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  require_defined(*this, "slice");
  const int d = normalize_dim(dim, rank(), "slice");
  if (step <= 0) throw InvalidArgument("slice: step must be positive, got " + std::to_string(step));
  const std::int64_t n = shape_[d];
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  stop = std::clamp<std::int64_t>(stop, start, n);
  Shape shape = shape_;
  Strides strides = strides_;
  const std::int64_t length = stop - start;
  shape[d] = length == 0 ? 0 : 1 + (length - 1) / step;
  strides[d] = strides_[d] * step;
  Tensor view(storage_, dtype_, shape, strides, offset_ + start * strides_[d]);
  check_int4_view(view, "slice");
  return view;
}

Tensor Tensor::reshape(const Shape& requested) const {
  require_defined(*this, "reshape");
  Shape shape = requested;
  int inferred = -1;
  std::int64_t known = 1;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) throw InvalidArgument("reshape: at most one extent may be -1");
      inferred = i;
    } else if (shape[i] < 0) {
      throw InvalidArgument("reshape: negative extent in " + requested.to_string());
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel() % known != 0) {
      throw InvalidArgument("reshape: cannot infer -1 in " + requested.to_string() + " for " +
                            std::to_string(numel()) + " elements");
    }
    shape[inferred] = numel() / known;
  }
  if (shape.product() != numel()) {
    throw InvalidArgument("reshape: " + shape_.to_string() + " has " + std::to_string(numel()) +
                          " elements, " + shape.to_string() + " has " +
                          std::to_string(shape.product()));
  }
  if (!is_contiguous()) {
    throw InvalidArgument("reshape: " + describe() +
                          " is not contiguous, so it cannot be viewed as " + shape.to_string() +
                          " without a copy; call contiguous() first");
  }
  return Tensor(storage_, dtype_, shape, contiguous_strides(shape), offset_);
}

Tensor Tensor::transpose(int d0, int d1) const {
  require_defined(*this, "transpose");
  const int a = normalize_dim(d0, rank(), "transpose");
  const int b = normalize_dim(d1, rank(), "transpose");
  Shape shape = shape_;
  Strides strides = strides_;
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  Tensor view(storage_, dtype_, shape, strides, offset_);
  check_int4_view(view, "transpose");
  return view;
}

Tensor Tensor::expand(const Shape& target) const {
  require_defined(*this, "expand");
  const int extra = target.rank() - rank();
  if (extra < 0) {
    throw InvalidArgument("expand: " + describe() + " has more dimensions than " +
                          target.to_string());
  }
  Strides strides = target;  // the same rank; every entry set below
  for (int d = 0; d < target.rank(); ++d) {
    const int mine = d - extra;
    if (target[d] < 0) {
      throw InvalidArgument("expand: a negative extent in " + target.to_string());
    }
    if (mine < 0) {
      strides[d] = 0;
    } else if (shape_[mine] == target[d]) {
      strides[d] = strides_[mine];
    } else if (shape_[mine] == 1) {
      strides[d] = 0;
    } else {
      throw InvalidArgument("expand: dimension " + std::to_string(mine) + " of " + describe() +
                            " is " + std::to_string(shape_[mine]) + ", neither 1 nor the " +
                            std::to_string(target[d]) + " of " + target.to_string());
    }
  }
  Tensor view(storage_, dtype_, target, strides, offset_);
  check_int4_view(view, "expand");
  return view;
}

Tensor Tensor::contiguous() const {
  require_defined(*this, "contiguous");
  if (is_contiguous()) return *this;
  auto& owner = storage_->owner;
  if (!owner) throw InternalError("storage without an owner: " + describe());
  Tensor out(owner->allocate(nbytes()), dtype_, shape_, contiguous_strides(shape_), 0);
  owner->copy_strided(*this, out);
  return out;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return std::string(to_string(dtype_)) + shape_.to_string() + " (strides " + strides_.to_string() +
         ", offset " + std::to_string(offset_) + ") on " + memory().to_string();
}

std::shared_ptr<void> Tensor::take() {
  require_defined(*this, "take");
  if (!storage_->owned) {
    throw InvalidArgument("take: " + describe() +
                          " wraps memory the caller provided; it is not loom's to hand over");
  }
  if (storage_.use_count() != 1) {
    throw InvalidArgument("take: " + describe() + " shares its storage with " +
                          std::to_string(storage_.use_count() - 1) +
                          " other tensor(s); only the sole owner can take it");
  }
  if (offset_ != 0 || !is_contiguous() || nbytes() != storage_->bytes) {
    throw InvalidArgument("take: " + describe() +
                          " views part of its storage; take the whole tensor");
  }
  void* base = storage_->base;
  std::shared_ptr<detail::Storage> keep = std::move(storage_);
  *this = Tensor();
  // The deleter holds the storage: dropping the pointer returns the memory.
  return std::shared_ptr<void>(base, [keep = std::move(keep)](void*) mutable { keep.reset(); });
}

}  // namespace loom
