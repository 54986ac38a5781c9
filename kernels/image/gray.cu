#include "image/gray.hpp"

#include "common/check.hpp"
#include "common/launch.hpp"

#include <cstdint>

namespace loom::kernels {
namespace {

constexpr int kBlock = 256;
constexpr int kPixelsPerVector = 16;  // one 16-byte store of gray

__global__ void gray_interleaved_naive(const std::uint8_t* __restrict__ gRgb,
                                       std::uint8_t* __restrict__ gGray, std::size_t pixels) {
  const std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < pixels) gGray[p] = gray_of(gRgb[3 * p], gRgb[3 * p + 1], gRgb[3 * p + 2]);
}

__global__ void gray_planar_naive(const std::uint8_t* __restrict__ gRgb,
                                  std::uint8_t* __restrict__ gGray, std::size_t pixels) {
  const std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < pixels) gGray[p] = gray_of(gRgb[p], gRgb[pixels + p], gRgb[2 * pixels + p]);
}

__device__ __forceinline__ unsigned byte_of(const unsigned (&w)[12], int i) {
  return (w[i / 4] >> (8 * (i % 4))) & 0xFFU;
}

__device__ __forceinline__ unsigned byte_of(unsigned w, int i) { return (w >> (8 * i)) & 0xFFU; }

// 48 bytes in (16 RGB triples), 16 bytes out; consecutive threads read
// consecutive 48-byte runs, so a warp's three loads cover 1.5 KB without gaps.
__global__ void gray_interleaved_vectorized(const uint4* __restrict__ gRgb4,
                                            uint4* __restrict__ gGray4, std::size_t pixels) {
  const std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t vectors = pixels / kPixelsPerVector;
  if (v < vectors) {
    const uint4 a = gRgb4[3 * v];
    const uint4 b = gRgb4[3 * v + 1];
    const uint4 c = gRgb4[3 * v + 2];
    const unsigned w[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
    unsigned out[4] = {0, 0, 0, 0};
#pragma unroll
    for (int p = 0; p < kPixelsPerVector; ++p) {
      const unsigned g = gray_of(byte_of(w, 3 * p), byte_of(w, 3 * p + 1), byte_of(w, 3 * p + 2));
      out[p / 4] |= g << (8 * (p % 4));
    }
    gGray4[v] = make_uint4(out[0], out[1], out[2], out[3]);
  }
  // The pixels % 16 tail: the first threads of the grid take one pixel each.
  const std::size_t tail = vectors * kPixelsPerVector + v;
  if (tail < pixels) {
    const auto* rgb = reinterpret_cast<const std::uint8_t*>(gRgb4);
    reinterpret_cast<std::uint8_t*>(gGray4)[tail] =
        gray_of(rgb[3 * tail], rgb[3 * tail + 1], rgb[3 * tail + 2]);
  }
}

// One 16-byte load from each plane, one 16-byte store. pixels % 16 == 0.
__global__ void gray_planar_vectorized(const uint4* __restrict__ gRgb4, uint4* __restrict__ gGray4,
                                       std::size_t pixels) {
  const std::size_t v = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t vectors = pixels / kPixelsPerVector;
  if (v >= vectors) return;
  const uint4 r = gRgb4[v];
  const uint4 g = gRgb4[vectors + v];
  const uint4 b = gRgb4[2 * vectors + v];
  const unsigned rw[4] = {r.x, r.y, r.z, r.w};
  const unsigned gw[4] = {g.x, g.y, g.z, g.w};
  const unsigned bw[4] = {b.x, b.y, b.z, b.w};
  unsigned out[4] = {0, 0, 0, 0};
#pragma unroll
  for (int word = 0; word < 4; ++word) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned y = gray_of(byte_of(rw[word], i), byte_of(gw[word], i), byte_of(bw[word], i));
      out[word] |= y << (8 * i);
    }
  }
  gGray4[v] = make_uint4(out[0], out[1], out[2], out[3]);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(std::size_t threads) {
  return static_cast<unsigned>((threads + kBlock - 1) / kBlock);
}

bool can_vectorize(const std::uint8_t* rgb, const std::uint8_t* gray, std::size_t pixels,
                   RgbLayout layout) {
  if (!aligned16(rgb) || !aligned16(gray)) return false;
  return layout == RgbLayout::interleaved || pixels % kPixelsPerVector == 0;
}

}  // namespace

std::string_view to_string(RgbLayout layout) noexcept {
  switch (layout) {
    case RgbLayout::interleaved: return "interleaved";
    case RgbLayout::planar: return "planar";
  }
  return "unknown";
}

void rgb_to_gray(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels, RgbLayout layout,
                 StreamView stream, GrayVariant variant) {
  if (pixels == 0) return;
  if (variant == GrayVariant::automatic) variant = kGrayDefault;
  if (variant == GrayVariant::vectorized && !can_vectorize(rgb, gray, pixels, layout)) {
    variant = GrayVariant::naive;
  }
  if (variant == GrayVariant::naive) {
    if (layout == RgbLayout::interleaved) {
      loom::detail::launch_on_stream(stream, gray_interleaved_naive, blocks_for(pixels), kBlock, 0,
                                     rgb, gray, pixels);
    } else {
      loom::detail::launch_on_stream(stream, gray_planar_naive, blocks_for(pixels), kBlock, 0, rgb,
                                     gray, pixels);
    }
  } else {
    const std::size_t vectors = pixels / kPixelsPerVector;
    const std::size_t tail = pixels % kPixelsPerVector;
    const auto* rgb4 = reinterpret_cast<const uint4*>(rgb);
    auto* gray4 = reinterpret_cast<uint4*>(gray);
    if (layout == RgbLayout::interleaved) {
      // At least one thread per tail pixel (the tail is < 16 pixels).
      loom::detail::launch_on_stream(stream, gray_interleaved_vectorized,
                                     blocks_for(vectors > tail ? vectors : tail), kBlock, 0, rgb4,
                                     gray4, pixels);
    } else {
      loom::detail::launch_on_stream(stream, gray_planar_vectorized, blocks_for(vectors), kBlock, 0,
                                     rgb4, gray4, pixels);
    }
  }
  LOOM_KERNEL_CHECK_LAUNCH("rgb_to_gray kernel launch");
}

}  // namespace loom::kernels
