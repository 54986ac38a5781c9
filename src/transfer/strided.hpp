#pragma once
// Gathering strided tensors into contiguous ones, within one memory space:
// on the calling thread for host memory, by a gather kernel on a stream for
// device memory. Behind Tensor::contiguous() (through the owners' copiers)
// and the copy tasks within one space.

#include "core/storage.hpp"
#include "transfer/strided_copy.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

/// The shape and strides of a tensor, as the strided-copy kernels take them.
StridedLayout layout_of(const Tensor& t);

/// Refuses a gather the paths cannot make: a strided destination, a strided
/// packed-int4 source. @throws InvalidArgument.
void check_gather(const Tensor& src, const Tensor& dst);

/// dst = src on the CPU (dst contiguous; any element size; i4 contiguous only).
void copy_strided_on_host(const Tensor& src, const Tensor& dst);

/// dst = src within one device, enqueued on `stream` (a memcpy when src is
/// contiguous, else the gather kernel). The caller makes the device current.
/// @pre check_gather(src, dst) passed (the copy tasks check at submit).
void copy_strided_on_device(const Tensor& src, const Tensor& dst, StreamView stream);

/// The copiers memory owners are given: host (the calling thread) and device
/// (the owner's stream, the tensors' device made current).
const StridedCopier& host_strided_copier() noexcept;
const StridedCopier& device_strided_copier() noexcept;

}  // namespace loom::detail
