#include "elementwise/map.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"

#include <algorithm>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr unsigned kMaxBlocks = 132 * 16;

__global__ void fill_kernel(float* __restrict__ gT, std::size_t n, float value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    gT[i] = value;
  }
}

// Not __restrict__: dst may alias src (each element is read before it is written).
__global__ void scale_copy_kernel(const float* gSrc, float* gDst, std::size_t n, float alpha) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    gDst[i] = alpha * gSrc[i];
  }
}

unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
}

}  // namespace

void fill(float* t, std::size_t n, float value, StreamView stream) {
  if (n == 0) return;
  loom::detail::launch_on_stream(stream, fill_kernel, blocks_for(n), kBlock, 0, t, n, value);
  LOOM_KERNEL_CHECK_LAUNCH("fill kernel launch");
}

void scale_copy(const float* src, float* dst, std::size_t n, float alpha, StreamView stream) {
  if (n == 0) return;
  loom::detail::launch_on_stream(stream, scale_copy_kernel, blocks_for(n), kBlock, 0, src, dst, n,
                                 alpha);
  LOOM_KERNEL_CHECK_LAUNCH("scale_copy kernel launch");
}

}  // namespace loom::kernels
