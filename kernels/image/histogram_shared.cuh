#pragma once
// The privatized histogram, what "shared" runs (histogram.hpp describes it);
// launched from histogram.cu. Its three phases (zero the block's copies,
// count each thread's share, merge the copies into the global counts) are
// functions of the thread's place, so that the CPU test can run them for
// every thread of a small grid (test_histogram_emulated.cpp).
//
// A thread's share: the head byte at its index (the bytes before the first
// 16-byte boundary), every gridDim.x * kBlock-th 16-byte vector of the
// aligned body from its index on (kUnroll loads issued before their
// atomics), and the tail byte at its index (the bytes after the last whole
// vector). Head and tail are below 16 bytes, the grid at least a block.
#include <cstddef>
#include <cstdint>

namespace loom::kernels::histogram_detail {
namespace {

constexpr int kBins = 256;
constexpr int kWarpLanes = 32;
constexpr int kBanks = 32;
constexpr int kBlock = 1024;  // threads a block
constexpr int kVectorBytes = 16;
// 16-byte loads a thread has in flight before it counts them: with two
// 1024-thread blocks a multiprocessor, 64 KB in flight. A 4096² frame is
// about four vectors a thread there: two batches, so that the first is
// counted while the second loads (4 measured 0.3 µs slower, 1 0.3 µs).
constexpr int kUnroll = 2;
// Copies of the histogram a block: one a lane of the warp, interleaved, so
// that bin b of copy c is word b * kBinPitch + c and lies in bank c. A
// warp's 32 atomics serialize on equal addresses and on equal banks; lane l
// counts into copy l, so its atomic lands in bank l whatever the value: a
// warp's atomics never meet, on random, blurred or constant images alike
// (with 8 copies a bank over from each other, random values met ~3.5 deep).
// Warps of the block share the copies (atomics keep them right).
constexpr int kCopies = kWarpLanes;
constexpr int kCopyPitch = 1;       // words from one copy to the next
constexpr int kBinPitch = kCopies;  // words from one bin to the next, in a copy
constexpr int kSharedWords = kBins * kBinPitch;

static_assert(kBlock % kWarpLanes == 0, "a block is whole warps");
static_assert(kCopies == kBanks, "a copy a bank");
static_assert(kBlock >= kVectorBytes, "one block covers the head and the tail");
static_assert(kSharedWords * sizeof(unsigned) <= 48 * 1024, "static shared memory");

/// Where the 16-byte aligned body of an image lies: `head` bytes before it,
/// `vectors` 16-byte vectors, `tail` bytes after it.
struct Split {
  std::size_t head;
  std::size_t vectors;
  std::size_t tail;
  static constexpr bool loom_pointer_free = true;  // a compiled graph may describe it
};

/// @post head < 16, tail < 16, head + 16 vectors + tail == pixels, and
/// address + head is 16-byte aligned whenever vectors > 0.
__host__ __device__ inline Split split_at_alignment(std::uintptr_t address, std::size_t pixels) {
  const std::size_t to_boundary = (kVectorBytes - address % kVectorBytes) % kVectorBytes;
  const std::size_t head = to_boundary < pixels ? to_boundary : pixels;
  const std::size_t body = pixels - head;
  return {head, body / kVectorBytes, body % kVectorBytes};
}

/// The copy thread `thread` of a block counts into: its lane.
__host__ __device__ constexpr int copy_of(unsigned thread) {
  return static_cast<int>(thread % kWarpLanes);
}

/// The bank of bin `value` of copy `copy`.
__host__ __device__ constexpr int bank_of(int copy, int value) {
  return (value * kBinPitch + copy * kCopyPitch) % kBanks;
}

__device__ __forceinline__ void count_byte(unsigned value, unsigned* sCopy) {
  atomicAdd(&sCopy[value * kBinPitch], 1U);
}

/// A word of four equal bytes (flat regions, constant frames) is one atomic;
/// any other word one a byte. Following runs of equal bytes across words,
/// as this did before, cost about six instructions a byte (extract, compare,
/// branch, count) where random and blurred frames gain nothing from it.
__device__ __forceinline__ void count_word(unsigned word, unsigned* sCopy) {
  const unsigned first = word & 0xFFU;
  if (word == first * 0x01010101U) {
    atomicAdd(&sCopy[first * kBinPitch], 4U);
    return;
  }
#pragma unroll
  for (int b = 0; b < 4; ++b) count_byte((word >> (8 * b)) & 0xFFU, sCopy);
}

__device__ __forceinline__ void count_vector(const uint4& v, unsigned* sCopy) {
  count_word(v.x, sCopy);
  count_word(v.y, sCopy);
  count_word(v.z, sCopy);
  count_word(v.w, sCopy);
}

/// Phase 1, before a barrier: thread `thread` zeroes its part of the copies.
__device__ __forceinline__ void zero_copies(unsigned* sCopies, unsigned thread) {
  for (int i = static_cast<int>(thread); i < kSharedWords; i += kBlock)
    sCopies[i] = 0;  // (kSharedWords)
}

/// Phase 2, between barriers: grid thread `thread` of `threads` counts its
/// share of the image (see the top) into its copy.
__device__ __forceinline__ void count_share(const std::uint8_t* __restrict__ gImage,
                                            const Split& split, std::size_t thread,
                                            std::size_t threads, unsigned* sCopy) {
  if (thread < split.head) count_byte(gImage[thread], sCopy);
  const auto* gBody = reinterpret_cast<const uint4*>(gImage + split.head);  // (vectors)
  std::size_t v = thread;
  for (; v + (kUnroll - 1) * threads < split.vectors; v += kUnroll * threads) {
    uint4 rVectors[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) rVectors[u] = gBody[v + u * threads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) count_vector(rVectors[u], sCopy);
  }
  for (; v < split.vectors; v += threads) count_vector(gBody[v], sCopy);
  if (thread < split.tail) {
    count_byte(gImage[split.head + split.vectors * kVectorBytes + thread], sCopy);
  }
}

/// Phase 3, after a barrier: thread `thread` adds the copies' sum of its bins
/// to the global counts, one atomic per non-zero bin. Each thread starts at
/// another copy (its bin's), so that a warp's reads fall in distinct banks.
__device__ __forceinline__ void merge_copies(const unsigned* sCopies, int* gCounts,
                                             unsigned thread) {
  for (int bin = static_cast<int>(thread); bin < kBins; bin += kBlock) {
    unsigned sum = 0;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int c = (i + bin) % kCopies;
      sum += sCopies[bin * kBinPitch + c * kCopyPitch];
    }
    if (sum != 0) atomicAdd(&gCounts[bin], static_cast<int>(sum));
  }
}

}  // namespace
}  // namespace loom::kernels::histogram_detail
