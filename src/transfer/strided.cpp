#include "transfer/strided.hpp"

#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <loom/error.hpp>

#include <cstring>

namespace loom::detail {

StridedLayout layout_of(const Tensor& t) {
  if (t.rank() > kStridedCopyMaxRank) {
    throw InvalidArgument("copy: a strided tensor of rank " + std::to_string(t.rank()) +
                          " cannot be gathered (at most " + std::to_string(kStridedCopyMaxRank) +
                          " dimensions); " + t.describe());
  }
  StridedLayout layout;
  layout.rank = t.rank();
  for (int i = 0; i < t.rank(); ++i) {
    layout.shape[static_cast<std::size_t>(i)] = t.shape()[i];
    layout.strides[static_cast<std::size_t>(i)] = t.strides()[i];
  }
  return layout;
}

void check_gather(const Tensor& src, const Tensor& dst) {
  if (!dst.is_contiguous()) {
    throw InvalidArgument("copy: destination " + dst.describe() + " must be contiguous");
  }
  if (!src.is_contiguous() && src.dtype() == DType::i4) {
    throw InvalidArgument("copy: a strided i4 tensor cannot be gathered; " + src.describe());
  }
}

void copy_strided_on_host(const Tensor& src, const Tensor& dst) {
  check_gather(src, dst);
  if (src.numel() == 0) return;  // an empty tensor may have no memory at all
  if (src.is_contiguous()) {
    std::memcpy(dst.data(), src.data(), src.nbytes());
    return;
  }
  strided_copy_reference(src.data(), layout_of(src), dst.data(), src.numel(),
                         bits_of(src.dtype()) / 8);
}

void copy_strided_on_device(const Tensor& src, const Tensor& dst, StreamView stream) {
  if (src.is_contiguous()) {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  strided_copy(src.data(), layout_of(src), dst.data(), src.numel(), bits_of(src.dtype()) / 8,
               stream);
}

namespace {

class HostCopier final : public StridedCopier {
 public:
  void copy_strided(const Tensor& src, const Tensor& dst, std::uintptr_t) const override {
    copy_strided_on_host(src, dst);
  }
};

class DeviceCopier final : public StridedCopier {
 public:
  void copy_strided(const Tensor& src, const Tensor& dst, std::uintptr_t stream) const override {
    check_gather(src, dst);
    DeviceGuard guard(dst.memory().device());
    copy_strided_on_device(src, dst, StreamView(reinterpret_cast<cudaStream_t>(stream)));
  }
};

}  // namespace

const StridedCopier& host_strided_copier() noexcept {
  static const HostCopier copier;
  return copier;
}

const StridedCopier& device_strided_copier() noexcept {
  static const DeviceCopier copier;
  return copier;
}

}  // namespace loom::detail
