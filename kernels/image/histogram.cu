#include "image/histogram.hpp"

#include "common/check.hpp"
#include "common/grid_dependency.cuh"
#include "common/launch.hpp"
#include "image/histogram_shared.cuh"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

namespace loom::kernels {
namespace {

namespace hd = histogram_detail;

// --- global_atomics ------------------------------------------------------------

constexpr int kGlobalBlock = 256;

__global__ void histogram_global_atomics(const std::uint8_t* __restrict__ gImage,
                                         std::size_t pixels, int* __restrict__ gCounts) {
  const std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < pixels) atomicAdd(&gCounts[gImage[p]], 1);
}

// --- shared ----------------------------------------------------------------------

__global__ void __launch_bounds__(hd::kBlock)
    histogram_shared(const std::uint8_t* __restrict__ gImage, hd::Split split,
                     int* __restrict__ gCounts) {
  __shared__ unsigned sCopies[hd::kSharedWords];  // (kBins, kCopies): bin-major, a copy a lane
  hd::zero_copies(sCopies, threadIdx.x);
  __syncthreads();
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * hd::kBlock + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * hd::kBlock;
  hd::count_share(gImage, split, thread, threads,
                  sCopies + hd::copy_of(threadIdx.x) * hd::kCopyPitch);
  __syncthreads();
  // Launched early (histogram()): the counts are zeroed by the kernel before.
  wait_for_previous_kernel();
  hd::merge_copies(sCopies, gCounts, threadIdx.x);
}

// Blocks a multiprocessor: a full SM of threads (two blocks of 1024), so
// that warps whose loads have come back count while others still wait; few
// enough blocks that the merge (one global atomic per bin per block) stays
// small next to the counting. Measured on an H100 (4096², µs random / one
// value): two of 512 18.7 / 14.5, one of 1024 17.4 / 13.3, two of 1024 16.3
// / 12.0 (with kUnroll 2), four of 512 16.9 / 12.5.
constexpr int kBlocksPerSm = 2;
constexpr int kCachedDevices = 64;

// What histogram() asks of the current device, once a device: the queries
// are cheap but not free, and a frame pipeline launches this every frame.
struct Machine {
  unsigned blocks;  // the most blocks of histogram_shared worth launching
  bool early;       // programmatic dependent launch (sm_90 and up)
};

// The most blocks: the multiprocessors times the blocks that fit on one (at
// most kBlocksPerSm). Packed in one word with the early bit, so that one
// relaxed atomic holds the cached answer.
Machine machine() {
  static std::array<std::atomic<unsigned>, kCachedDevices> cache{};
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    const unsigned cached = cache[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (cached != 0) return {cached >> 1, (cached & 1U) != 0};
  }
  int sms = 0;
  int resident = 0;
  int major = 0;
  LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LOOM_KERNEL_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, histogram_shared, hd::kBlock, 0));
  const unsigned blocks = static_cast<unsigned>(std::max(sms, 1)) *
                          static_cast<unsigned>(std::clamp(resident, 1, kBlocksPerSm));
  const bool early = major >= 9;
  if (cacheable) {
    cache[static_cast<std::size_t>(device)].store(blocks << 1 | (early ? 1U : 0U),
                                                  std::memory_order_relaxed);
  }
  return {blocks, early};
}

// One vector a thread at least, so that a small image takes few blocks (each
// pays for zeroing and merging its copies); at most what the machine holds.
unsigned shared_blocks(const hd::Split& split, unsigned machine_blocks) {
  const std::size_t wanted =
      std::max<std::size_t>(1, (split.vectors + hd::kBlock - 1) / hd::kBlock);
  return static_cast<unsigned>(std::min<std::size_t>(wanted, machine_blocks));
}

__global__ void zero_counts(std::int32_t* counts) {
  let_next_kernel_begin();
  counts[threadIdx.x] = 0;
}

}  // namespace

void histogram(const std::uint8_t* image, std::size_t pixels, std::int32_t* counts,
               StreamView stream, HistogramVariant variant) {
  // Both variants add to the counts: they start from zero every launch. A
  // kernel, not a memset, so that a compiled graph can describe the op.
  loom::detail::launch_on_stream(stream, zero_counts, 1, kHistogramBins, 0, counts);
  if (pixels == 0) return;
  if (variant == HistogramVariant::automatic) variant = kHistogramDefault;
  if (variant == HistogramVariant::global_atomics) {
    const auto blocks = static_cast<unsigned>((pixels + kGlobalBlock - 1) / kGlobalBlock);
    loom::detail::launch_on_stream(stream, histogram_global_atomics, blocks, kGlobalBlock, 0, image,
                                   pixels, counts);
  } else {
    // Launched early: it counts into shared memory while the zeroing runs
    // (2.2 µs of a 14.5 µs frame on an H100 when it waited), and waits for
    // the zeroing only to merge. The image was written before the zeroing
    // began, so it is visible from the start.
    const hd::Split split = hd::split_at_alignment(reinterpret_cast<std::uintptr_t>(image), pixels);
    const Machine gpu = machine();
    loom::detail::launch_on_stream_early(gpu.early, stream, histogram_shared,
                                         shared_blocks(split, gpu.blocks), hd::kBlock, 0, image,
                                         split, counts);
  }
  LOOM_KERNEL_CHECK_LAUNCH("histogram kernel launch");
}

}  // namespace loom::kernels
