#pragma once
// RGB to gray over uint8 images, each variant with the CPU reference.
//
// Weights: ITU-R BT.601 luma (0.299, 0.587, 0.114) in 8-bit fixed point,
//   gray = (77 R + 150 G + 29 B + 128) >> 8
// (the weights sum to 256, so white stays 255 and the + 128 rounds to
// nearest). Integer arithmetic on both sides makes the kernels and the
// reference agree bit for bit.
//
// Layouts: interleaved (H x W x 3, RGBRGB...) and planar (3 x H x W, the R
// plane, then G, then B). Either way the gray image is H x W, and the kernels
// see the image as `pixels` = H * W consecutive pixels.
//
// Variants, in the order the lecture teaches them:
//   naive       one thread per pixel, byte loads and stores.
//   vectorized  16 pixels a thread: three (interleaved) or one a plane
//               (planar) 16-byte loads and one 16-byte store, with a byte tail
//               for pixels % 16. Needs 16-byte aligned rows of bytes (for
//               planar, pixels % 16 == 0 so that every plane is aligned);
//               otherwise it runs naive. The default.

#include <loom/cuda_interop.hpp>
#include <loom/ops/image.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#if defined(__CUDACC__)
#define LOOM_IMAGE_HD __host__ __device__
#else
#define LOOM_IMAGE_HD
#endif

namespace loom::kernels {

enum class RgbLayout { interleaved, planar };
using GrayVariant = loom::ops::GrayVariant;  // named by its table (loom/ops/variant.hpp)

/// What GrayVariant::automatic runs.
inline constexpr GrayVariant kGrayDefault = GrayVariant::vectorized;

std::string_view to_string(RgbLayout layout) noexcept;

/// The one formula both sides use.
LOOM_IMAGE_HD inline std::uint8_t gray_of(unsigned r, unsigned g, unsigned b) {
  return static_cast<std::uint8_t>((77U * r + 150U * g + 29U * b + 128U) >> 8);
}

/// Enqueues gray = luma(rgb) over `pixels` pixels on `stream`. Device
/// pointers. pixels == 0 launches nothing. @throws CudaError if the launch fails.
void rgb_to_gray(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels, RgbLayout layout,
                 StreamView stream, GrayVariant variant = kGrayDefault);

/// The CPU reference. Host pointers.
void rgb_to_gray_reference(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels,
                           RgbLayout layout) noexcept;

}  // namespace loom::kernels
