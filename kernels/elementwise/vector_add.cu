#include "elementwise/vector_add.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"

#include <algorithm>
#include <cstdint>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr int kVector = 4;  // floats per 16-byte access

__global__ void vector_add_naive(const float* __restrict__ gA, const float* __restrict__ gB,
                                 float* __restrict__ gC, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) gC[i] = gA[i] + gB[i];
}

__global__ void vector_add_grid_stride(const float* __restrict__ gA, const float* __restrict__ gB,
                                       float* __restrict__ gC, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    gC[i] = gA[i] + gB[i];
  }
}

__global__ void vector_add_vectorized(const float4* __restrict__ gA4,
                                      const float4* __restrict__ gB4, float4* __restrict__ gC4,
                                      std::size_t n) {
  const std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t vectors = n / kVector;
  if (v < vectors) {
    const float4 a = gA4[v];
    const float4 b = gB4[v];
    gC4[v] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  // The n % 4 tail: the first threads of the grid take one element each.
  const std::size_t tail = vectors * kVector + v;
  if (tail < n) {
    reinterpret_cast<float*>(gC4)[tail] =
        reinterpret_cast<const float*>(gA4)[tail] + reinterpret_cast<const float*>(gB4)[tail];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(std::size_t items) {
  return static_cast<unsigned>((items + kBlock - 1) / kBlock);
}

}  // namespace

void vector_add(const float* a, const float* b, float* c, std::size_t n, StreamView stream,
                MapVariant variant) {
  if (n == 0) return;
  if ((variant == MapVariant::automatic || variant == MapVariant::vectorized) &&
      !(aligned16(a) && aligned16(b) && aligned16(c))) {
    variant = MapVariant::grid_stride;
  }
  switch (variant) {
    case MapVariant::naive:
      loom::detail::launch_on_stream(stream, vector_add_naive, blocks_for(n), kBlock, 0, a, b, c,
                                     n);
      break;
    case MapVariant::grid_stride: {
      int device = 0;
      int sms = 0;
      LOOM_KERNEL_CHECK(cudaGetDevice(&device));
      LOOM_KERNEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const unsigned wanted = blocks_for(n);
      const unsigned cap = static_cast<unsigned>(sms) * 8U;
      const unsigned blocks = std::min(wanted, cap);
      loom::detail::launch_on_stream(stream, vector_add_grid_stride, blocks, kBlock, 0, a, b, c, n);
      break;
    }
    case MapVariant::automatic:
    case MapVariant::vectorized: {
      // At least one thread per tail element (the tail is < 4 elements).
      const std::size_t threads = n / kVector > n % kVector ? n / kVector : n % kVector;
      loom::detail::launch_on_stream(stream, vector_add_vectorized, blocks_for(threads), kBlock, 0,
                                     reinterpret_cast<const float4*>(a),
                                     reinterpret_cast<const float4*>(b),
                                     reinterpret_cast<float4*>(c), n);
      break;
    }
  }
  LOOM_KERNEL_CHECK_LAUNCH("vector_add kernel launch");
}

}  // namespace loom::kernels
