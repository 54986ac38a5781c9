#include "copy/contiguous_copy.hpp"

#include "common/check.hpp"

#include <cstdint>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr int kUnroll = 4;  // 16-byte words in flight a thread

__global__ void copy_words(const uint4* __restrict__ gSrc, uint4* __restrict__ gDst,
                           std::size_t words) {
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four independent loads before the stores: enough bytes in flight to
  // cover HBM latency with a grid of a few blocks an SM.
  for (; i + (kUnroll - 1) * threads < words; i += kUnroll * threads) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = gSrc[i + u * threads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) gDst[i + u * threads] = v[u];
  }
  for (; i < words; i += threads) gDst[i] = gSrc[i];
}

__global__ void copy_bytes(const unsigned char* __restrict__ gSrc, unsigned char* __restrict__ gDst,
                           std::size_t bytes) {
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += threads) {
    gDst[i] = gSrc[i];
  }
}

unsigned grid_for(std::size_t items) {
  // 132 SMs x 8 blocks of 256 covers an H200; smaller copies get fewer.
  constexpr std::size_t kMaxBlocks = 132 * 8;
  const std::size_t wanted = (items + kBlock - 1) / kBlock;
  return static_cast<unsigned>(wanted < kMaxBlocks ? (wanted == 0 ? 1 : wanted) : kMaxBlocks);
}

void launch_bytes(const unsigned char* src, unsigned char* dst, std::size_t bytes,
                  StreamView stream) {
  if (bytes == 0) return;
  copy_bytes<<<grid_for(bytes), kBlock, 0, stream>>>(src, dst, bytes);
  LOOM_KERNEL_CHECK_LAUNCH("contiguous_copy byte kernel launch");
}

}  // namespace

void contiguous_copy(const void* src, void* dst, std::size_t bytes, StreamView stream) {
  if (bytes == 0) return;
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const auto misalign = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16; };
  if (misalign(s) != misalign(d)) {
    launch_bytes(s, d, bytes, stream);
    return;
  }
  const std::size_t head = misalign(s) == 0 ? 0 : 16 - misalign(s);
  if (head >= bytes) {
    launch_bytes(s, d, bytes, stream);
    return;
  }
  const std::size_t words = (bytes - head) / 16;
  const std::size_t tail = bytes - head - words * 16;
  launch_bytes(s, d, head, stream);
  if (words > 0) {
    copy_words<<<grid_for(words), kBlock, 0, stream>>>(reinterpret_cast<const uint4*>(s + head),
                                                       reinterpret_cast<uint4*>(d + head), words);
    LOOM_KERNEL_CHECK_LAUNCH("contiguous_copy kernel launch");
  }
  launch_bytes(s + head + words * 16, d + head + words * 16, tail, stream);
}

}  // namespace loom::kernels
