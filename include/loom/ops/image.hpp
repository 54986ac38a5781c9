#pragma once
/// @file ops/image.hpp
/// Image ops: RGB to gray, box blur (Lectures 2, 3), histogram. uint8 images
/// (DType::u8), contiguous tensors only: a strided view is rejected at
/// submit ("must be contiguous"); call contiguous() first.

#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/ops/variant.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace loom::ops {

/// rgb_to_gray's kernels (variant.hpp).
enum class GrayVariant : std::uint8_t {
  automatic,   ///< the fastest for the shape: vectorized where the data allows
  naive,       ///< a pixel a thread
  vectorized,  ///< 16 pixels a thread, 16-byte loads and stores
};
template <>
struct VariantNames<GrayVariant> {
  static constexpr std::array<std::string_view, 3> names = {"automatic", "naive", "vectorized"};
};

/// box_blur's kernels (variant.hpp).
enum class BlurVariant : std::uint8_t {
  automatic,  ///< the fastest for the shape: tiled for radius 1..7, the streaming kernel
              ///< to 15 (widths a multiple of 16, aligned), sliding for the others
  naive,      ///< a pixel a thread, every window read from global memory
  tiled,      ///< radius 1..7 (others run naive): a streaming kernel when the width
              ///< is a multiple of 16 and the data 16-byte aligned, else tiled_v1
  tiled_v1,   ///< shared-memory tiles; radius 1..7 (others run naive)
  separable,  ///< row sums into a workspace, then running sums down columns: two passes
  sliding,    ///< one pass at any radius: running column sums down the image, the row's
              ///< window from prefix sums across a warp
  banded,     ///< one pass at any radius, a block a band of 1024 columns: column sums by
              ///< threads, the row's prefix sums by warps through shared memory (widths a
              ///< multiple of 16, 16-byte aligned data; others run sliding)
};
template <>
struct VariantNames<BlurVariant> {
  static constexpr std::array<std::string_view, 7> names = {
      "automatic", "naive", "tiled", "tiled_v1", "separable", "sliding", "banded"};
};

/// histogram's kernels (variant.hpp).
enum class HistogramVariant : std::uint8_t {
  automatic,       ///< the fastest for the shape: shared
  global_atomics,  ///< one atomicAdd per pixel in global memory: the lecture's first step
  shared,  ///< privatized: a block's histograms in shared memory, 16-byte loads, merged with
           ///< one global atomic per bin per block
};
template <>
struct VariantNames<HistogramVariant> {
  static constexpr std::array<std::string_view, 3> names = {"automatic", "global_atomics",
                                                            "shared"};
};

/// How an RGB image's channels lie in memory.
enum class RgbLayout {
  detect,  ///< from the shape: [H, W, 3] interleaved, [3, H, W] planar ([3, H, 3] is ambiguous and
           ///< rejected)
  interleaved,  ///< [H, W, 3]: R, G, B of a pixel side by side
  planar,       ///< [3, H, W]: the R plane, then G, then B
};

/// gray = luma of rgb, BT.601 weights in 8-bit fixed point:
/// (77 R + 150 G + 29 B + 128) >> 8, the same on both backends bit for bit.
/// rgb is u8 [H, W, 3] or [3, H, W] (see RgbLayout), gray is u8 [H, W].
/// Bad inputs are rejected at submit, naming the task. Thread-safe (a value).
/// @code
///   g.add(loom::ops::rgb_to_gray(frame, gray));   // frame: u8 {3, h, w}
/// @endcode
LOOM_API OpPtr rgb_to_gray(const Tensor& rgb, const Tensor& gray,
                           RgbLayout layout = RgbLayout::detect,
                           GrayVariant variant = GrayVariant::automatic);

/// dst = box blur of src with radius r (a (2r+1) x (2r+1) window), over u8
/// images [H, W], or [C, H, W] with every plane blurred on its own. Borders:
/// each output averages only the window's pixels that lie inside the image,
/// rounded half up ((sum + count / 2) / count); the same on both backends
/// bit for bit. 0 <= radius <= 127; dst must not overlap src. Bad inputs
/// are rejected at submit, naming the task.
LOOM_API OpPtr box_blur(const Tensor& src, const Tensor& dst, int radius,
                        BlurVariant variant = BlurVariant::automatic);

/// counts[v] = how many pixels of `image` equal v, for v in 0..255: image is
/// u8 of any rank (contiguous, at most 2^31 - 1 pixels), counts is i32 [256]
/// (overwritten, not accumulated). Exact and the same on both backends
/// (integer counts). Bad inputs are rejected at submit, naming the task.
/// Thread-safe (a value).
/// @code
///   auto counts = rt.tensor<std::int32_t>({256});
///   g.add(loom::ops::histogram(blurred, counts));   // blurred: u8 {h, w}
/// @endcode
LOOM_API OpPtr histogram(const Tensor& image, const Tensor& counts,
                         HistogramVariant variant = HistogramVariant::automatic);

}  // namespace loom::ops
