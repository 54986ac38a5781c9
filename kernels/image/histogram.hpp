#pragma once
// The 256-bin histogram of uint8 images (any number of bytes, read as one
// run), each variant with the CPU reference: counts[v] = how many bytes equal
// v. The counts are overwritten (zeroed on the stream first), never
// accumulated across launches, and exact: integer counts, the same on both
// sides whatever the order of the atomic additions.
//
// Variants, in the order the lecture teaches them:
//   global_atomics  one thread per pixel, one atomicAdd per pixel on the
//                   global counts. Every pixel is a read-modify-write in L2,
//                   and equal pixels serialize on one address: an image of
//                   one value is the worst case.
//   shared          privatized (histogram_shared.cuh): each block counts
//                   into its own 256-bin histograms in shared memory, then
//                   adds each non-zero bin to the global counts with one
//                   atomic. A copy a lane, interleaved so that lane l's
//                   bins all lie in bank l: a warp's atomics never meet on
//                   a bank, whatever the values; a word of four equal bytes
//                   is one atomic (flat regions, constant frames), any
//                   other word one a byte. 16-byte loads
//                   over the 16-byte aligned body, a few in flight a thread,
//                   the bytes before and after it one at a time; the grid
//                   is sized to the GPU (two 1024-thread blocks a
//                   multiprocessor, asked once a device). On sm_90 it starts
//                   while the counts are being zeroed and waits for them
//                   only to merge. The default.

#include <loom/cuda_interop.hpp>
#include <loom/ops/image.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom::kernels {

using HistogramVariant = loom::ops::HistogramVariant;  // named by its table (variant.hpp)

/// What HistogramVariant::automatic runs.
inline constexpr HistogramVariant kHistogramDefault = HistogramVariant::shared;
/// One bin per uint8 value.
inline constexpr int kHistogramBins = 256;
/// The most pixels one histogram takes: its counts are 32-bit signed.
inline constexpr std::size_t kHistogramMaxPixels = 0x7FFFFFFF;

/// Enqueues counts = the histogram of `pixels` bytes of `image` on `stream`:
/// a kernel that zeroes the kHistogramBins counts, then the kernel (none for 0
/// pixels). Device pointers, any alignment of `image`; counts 4-byte aligned;
/// pixels <= kHistogramMaxPixels. No host synchronization: capturable.
/// @throws CudaError if the memset, the launch or the occupancy query fails.
void histogram(const std::uint8_t* image, std::size_t pixels, std::int32_t* counts,
               StreamView stream, HistogramVariant variant = kHistogramDefault);

/// The CPU reference: the kHistogramBins counts, overwritten. Host pointers.
void histogram_reference(const std::uint8_t* image, std::size_t pixels,
                         std::int32_t* counts) noexcept;

}  // namespace loom::kernels
