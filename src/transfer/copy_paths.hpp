#pragma once
// The copy paths between memory spaces, and what each can take:
//   within host memory          on the calling thread (strided source gathered)
//   within one device           cudaMemcpyAsync, or the gather kernel (strided source)
//   between devices             cudaMemcpyPeerAsync
//   pinned host <-> a device    cudaMemcpyAsync (DMA; contiguous only)
//   pageable host <-> a device  staged through pinned chunks (transfer/staging.hpp)
// The checks run before anything is queued, so that bad input is refused at
// the call (submit, or Runtime::copy), saying what each path expects.

#include <loom/cuda_interop.hpp>
#include <loom/tensor.hpp>

namespace loom::detail {

/// Both defined, one dtype and shape, no partial overlap, whole-byte int4.
/// @throws InvalidArgument.
void check_copy_pair(const Tensor& src, const Tensor& dst);

/// What the path between the two spaces can take (contiguity, gatherable).
/// @pre check_copy_pair passed. @throws InvalidArgument.
void check_copy_path(const Tensor& src, const Tensor& dst);

/// Both checks, skipping the path check where nothing will be copied.
void check_copy(const Tensor& src, const Tensor& dst);

/// The same view of the same storage: a copy that moves nothing.
bool same_view(const Tensor& a, const Tensor& b) noexcept;

/// True where the copy is ordered on a stream (everything but pageable <->
/// device, which stages, and host <-> host, which runs on the caller).
bool is_stream_ordered_copy(Memory from, Memory to) noexcept;

/// Enqueues a stream-ordered copy on `stream`, and records that pinned
/// memory or another device's memory is used there (so the pools do not
/// reuse it before the copy is done).
/// @pre check_copy passed; is_stream_ordered_copy(src.memory(), dst.memory()).
void enqueue_stream_copy(const Tensor& src, const Tensor& dst, StreamView stream);
/// The same copy, into a CUDA graph being captured on `stream`: the pools
/// are told nothing, since `stream` is the capture's and the replays run
/// elsewhere; the compiled graph holds both tensors for as long as a replay
/// can use them. A contiguous copy within one device becomes a kernel node
/// (transfer/contiguous_copy.hpp: a memcpy node inside a graph runs at
/// about two thirds of the eager copy's bandwidth); other copies memcpy nodes.
void enqueue_captured_copy(const Tensor& src, const Tensor& dst, StreamView stream);

}  // namespace loom::detail
