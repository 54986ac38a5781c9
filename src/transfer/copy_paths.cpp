#include "transfer/copy_paths.hpp"

#include "core/storage.hpp"
#include "core/tensor_access.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/device_owner.hpp"
#include "transfer/contiguous_copy.hpp"
#include "transfer/strided.hpp"

#include <loom/error.hpp>

#include <string>

namespace loom::detail {
namespace {

void require_contiguous(const Tensor& t, const char* role, const char* path) {
  if (!t.is_contiguous()) {
    throw InvalidArgument(std::string("copy: the ") + role + " " + t.describe() +
                          " must be contiguous for a copy " + path +
                          (std::string(role) == "source" ? "; call contiguous() first"
                                                         : "; copy into a contiguous tensor"));
  }
}

bool within_one_space(Memory from, Memory to) noexcept {
  return (from.is_host() && to.is_host()) || (from.is_device() && to == from);
}

}  // namespace

void check_copy_pair(const Tensor& src, const Tensor& dst) {
  if (!src.defined() || !dst.defined()) {
    throw InvalidArgument(std::string("copy: the ") + (src.defined() ? "destination" : "source") +
                          " is an undefined tensor");
  }
  if (src.dtype() != dst.dtype() || !(src.shape() == dst.shape())) {
    throw InvalidArgument(
        "copy: the destination must have the source's dtype and shape; source is " +
        src.describe() + ", destination is " + dst.describe());
  }
  if (!same_view(src, dst) && src.shares_storage_with(dst)) {
    const auto [slo, shi] = byte_span(src);
    const auto [dlo, dhi] = byte_span(dst);
    if (slo < dhi && dlo < shi) {
      throw InvalidArgument("copy: the source " + src.describe() + " and the destination " +
                            dst.describe() + " overlap in memory");
    }
  }
  // Packed int4: an odd count ends in half a byte, which a byte copy would
  // overwrite in its neighbour.
  if (src.dtype() == DType::i4 && src.numel() % 2 != 0 &&
      (dst.offset() != 0 || dst.nbytes() != TensorAccess::storage(dst)->bytes)) {
    throw InvalidArgument(
        "copy: an odd number of i4 elements can only be copied into a whole "
        "tensor, not into " +
        dst.describe());
  }
}

void check_copy_path(const Tensor& src, const Tensor& dst) {
  const Memory from = src.memory();
  const Memory to = dst.memory();
  if (within_one_space(from, to)) {
    check_gather(src, dst);
    if (!src.is_contiguous()) (void)layout_of(src);  // the gather's rank limit
    return;
  }
  const char* path = from == Memory::pageable || to == Memory::pageable
                         ? "between pageable host memory and a device"
                         : "between memory spaces";
  require_contiguous(src, "source", path);
  require_contiguous(dst, "destination", path);
}

void check_copy(const Tensor& src, const Tensor& dst) {
  check_copy_pair(src, dst);
  if (!same_view(src, dst) && src.numel() != 0) check_copy_path(src, dst);
}

bool same_view(const Tensor& a, const Tensor& b) noexcept {
  return a.shares_storage_with(b) && a.data() == b.data() && a.strides() == b.strides();
}

bool is_stream_ordered_copy(Memory from, Memory to) noexcept {
  if (from == Memory::pageable || to == Memory::pageable) return false;
  return !(from.is_host() && to.is_host());
}

namespace {

void enqueue_copy(const Tensor& src, const Tensor& dst, StreamView stream) {
  const Memory from = src.memory();
  const Memory to = dst.memory();
  if (!is_stream_ordered_copy(from, to)) {
    throw InternalError("copy: " + from.to_string() + " to " + to.to_string() +
                        " is not a stream-ordered path");
  }
  if (from.is_device() && to == from) {
    DeviceGuard guard(from.device());
    copy_strided_on_device(src, dst, stream);
    return;
  }
  const std::size_t bytes = src.nbytes();
  if (from.is_device() && to.is_device()) {
    DeviceGuard guard(to.device());
    LOOM_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst.data(), to.device(), src.data(), from.device(), bytes, stream));
  } else {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDefault, stream));
  }
}

}  // namespace

void enqueue_stream_copy(const Tensor& src, const Tensor& dst, StreamView stream) {
  if (same_view(src, dst) || src.numel() == 0) return;
  enqueue_copy(src, dst, stream);
  if (src.memory().is_device() && dst.memory() == src.memory()) return;
  // Pinned (or another device's) memory is now used on this stream.
  for (const Tensor* t : {&src, &dst}) {
    const auto& storage = TensorAccess::storage(*t);
    if (storage->stream != key_of(stream)) {
      storage->owner->record_stream(*storage, key_of(stream));
    }
  }
}

void enqueue_captured_copy(const Tensor& src, const Tensor& dst, StreamView stream) {
  if (same_view(src, dst) || src.numel() == 0) return;
  const Memory from = src.memory();
  if (from.is_device() && dst.memory() == from && src.is_contiguous() && dst.is_contiguous()) {
    DeviceGuard guard(from.device());
    contiguous_copy(src.data(), dst.data(), src.nbytes(), stream);
    return;
  }
  enqueue_copy(src, dst, stream);
}

}  // namespace loom::detail
