#pragma once
// Box blur of radius r over uint8 images (one plane H x W, or `planes`
// planes one after another, each blurred on its own), with the CPU reference.
//
// Border rule: each output is the average over the in-image pixels of its
// (2r+1) x (2r+1) window only (no padding, no clamping), rounded half up:
//   out = (sum + count / 2) / count   (integer division)
// where count = (pixels of the window inside the image). Integer arithmetic
// on both sides makes the kernels and the reference agree bit for bit.
//
// Variants, in the order the lecture teaches them:
//   naive  one thread per output pixel, summing its whole window from global
//          memory (every input byte read (2r+1)^2 times, mostly from L1/L2).
//   tiled  when the width is a multiple of 16, the height at least 2 and
//          both pointers 16-byte aligned: a stream down the image. A block
//          is one warp; each lane owns a 16-column strip and walks down a
//          segment of rows (blur_stream.cuh's rule: the fewest waves of
//          blocks, then near 24 rows; 24 on an H100 at 4096 x 4096), one
//          16-byte load and one 16-byte store a row: the vertical window
//          slides over a ring of rows in shared memory, filled by cp.async
//          6 rows ahead, column sums are packed two 16-bit sums to a word,
//          and the horizontal window takes the neighbouring strips' column
//          sums by warp shuffles (lanes 0 and 31 only lend theirs). Every
//          pixel divides by multiply-highs with reciprocals, compile-time
//          constants but in the R rows at the top and bottom. Other shapes
//          and pointers run tiled_v1. The radius is a template parameter,
//          1..kBlurTiledMaxRadius here (other radii run naive); automatic
//          also runs this kernel for radius 8..kBlurStreamMaxRadius, with
//          32-bit window sums. The default.
//   tiled_v1  a 128 x 64 output tile per block: the tile and its halo are
//          loaded once into shared memory (16-byte vectors when the width is
//          a multiple of 16, 4-byte words when it is a multiple of 4, with
//          aligned pointers; else bytes), then summed separably: row sums of
//          the window as byte dot products with 0/1 masks (dp4a), packed two
//          16-bit sums to a word, then column sums by sliding down each
//          thread's 8 rows. Interior tiles divide by a compile-time
//          constant; tiles that touch a border divide by their pixels' own
//          counts. Radii 1..kBlurTiledMaxRadius; other radii run naive.
//   separable  two passes (blur_separable.cuh): 16-bit row sums into a
//          workspace (a block takes 1024 pixels of a row and the window's
//          reach into shared memory, coalesced, and differences their prefix
//          sums), then column sums by running windows and the division; each
//          pixel costs the same whatever the radius (6 bytes of traffic
//          against the 2 of the floor).
//   sliding  one pass at any radius 0..127 (blur_sliding.cuh): a warp walks
//          down 512 columns, a lane's 16 column sums (16-bit, two to a
//          word) gaining the row entering the window and losing the one
//          leaving it (two 16-byte loads a row, the second an L1/L2 hit),
//          then the horizontal window as the difference of two prefix sums
//          taken across the warp by shuffles (lanes within r of the warp's
//          edges only lend), and one multiply-high a pixel (two steps for
//          pixels within r of a border). Every pixel is read from DRAM once
//          and written once. 16-byte accesses where the width is a multiple
//          of 16 and the pointers aligned, bytes otherwise; images one pixel
//          wide past radius 0 run naive. What automatic
//          runs outside the tiled radii (and at radius 0).
//   banded  one pass at any radius 0..127 (blur_banded.cuh): a block of 256
//          threads walks a band of 1024 columns down a segment of rows; each
//          thread slides the column sums of 4 columns (4-byte loads) into a
//          batch of 8 rows in shared memory, and each warp turns one row of
//          the batch into prefix sums (a lane 32 columns, a shuffle scan)
//          and reads its windows as differences of two of them (16-byte
//          shared-memory reads, no bank conflicts). Bands overlap by r
//          rounded up to 32 columns on each side. Widths a multiple of 16
//          and 16-byte aligned pointers; other images run sliding.

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

using BlurVariant = loom::ops::BlurVariant;  // named by its table (loom/ops/variant.hpp)

/// What BlurVariant::automatic runs for radius 1..kBlurTiledMaxRadius (the
/// streaming kernel up to kBlurStreamMaxRadius where it takes the image,
/// sliding for the others).
inline constexpr BlurVariant kBlurDefault = BlurVariant::tiled;
/// The largest radius any variant takes: sums stay well inside 32 bits.
inline constexpr int kBlurMaxRadius = 127;
/// The largest radius the tiled variants take; larger ones run naive.
inline constexpr int kBlurTiledMaxRadius = 7;
/// The largest radius the streaming kernel takes (automatic runs it up to
/// here where it takes the image, the sliding kernel past it).
inline constexpr int kBlurStreamMaxRadius = 15;

/// Device scratch box_blur() needs for this image, radius and variant: the
/// separable variant's 16-bit row sums (0 for the others).
std::size_t box_blur_workspace_bytes(std::int64_t planes, std::int64_t height, std::int64_t width,
                                     int radius, BlurVariant variant) noexcept;

/// Enqueues the blur of `planes` planes of height x width bytes each (one
/// after another in memory, rows contiguous) on `stream`. Device pointers;
/// src and dst must not overlap. 0 <= radius <= kBlurMaxRadius. `workspace`
/// holds box_blur_workspace_bytes() (may be null when that is 0). An empty
/// image launches nothing. @throws CudaError if the launch fails;
/// InvalidArgument for a missing workspace.
void box_blur(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes, std::int64_t height,
              std::int64_t width, int radius, StreamView stream,
              BlurVariant variant = BlurVariant::automatic, void* workspace = nullptr);

/// Whether the sliding kernel takes the image at this radius: 0..127, and
/// (past radius 0) a width of at least 2.
bool box_blur_sliding_takes(std::int64_t height, std::int64_t width, int radius) noexcept;

/// The rows a warp of the sliding kernel walks, as box_blur() chooses them
/// for a device of `sm_count` multiprocessors; 0 for an image or radius the
/// sliding kernel does not take (box_blur_sliding_takes).
int box_blur_sliding_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                  int radius, int sm_count) noexcept;

/// The sliding kernel with segments of `segment_rows` rows (0: as box_blur()
/// chooses them), for benchmarks that sweep it; box_blur() with
/// BlurVariant::sliding is the usual way in. @throws InvalidArgument where
/// box_blur_sliding_takes() is false; CudaError if the launch fails.
void box_blur_sliding(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                      std::int64_t height, std::int64_t width, int radius, StreamView stream,
                      int segment_rows = 0);

/// Whether the streaming kernel (what `tiled` runs where it can, and
/// automatic up to kBlurStreamMaxRadius) takes the image: radius
/// 1..kBlurStreamMaxRadius, a width that is a multiple of 16 and more than
/// twice the radius, at least 2 rows, extents up to 2^30, 16-byte aligned
/// pointers.
bool box_blur_stream_takes(std::int64_t height, std::int64_t width, int radius, const void* src,
                           const void* dst) noexcept;

/// The rows a warp of the streaming kernel writes, as box_blur() chooses them
/// on the current device (blur_stream.cuh's stream_segment_rows). @throws
/// CudaError if the device cannot be asked.
int box_blur_stream_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                 int radius);

/// The streaming kernel with segments of `segment_rows` rows (0: as box_blur()
/// chooses them), for benchmarks that sweep it; box_blur() with
/// BlurVariant::tiled is the usual way in. @throws InvalidArgument where
/// box_blur_stream_takes() is false; CudaError if the launch fails.
void box_blur_stream(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                     std::int64_t height, std::int64_t width, int radius, StreamView stream,
                     int segment_rows = 0);

/// Whether the banded kernel takes the image: radius 0..127, a width that is
/// a multiple of 16, extents up to 2^30, 16-byte aligned pointers.
bool box_blur_banded_takes(std::int64_t height, std::int64_t width, int radius, const void* src,
                           const void* dst) noexcept;

/// The rows a block of the banded kernel walks, as box_blur() chooses them
/// for a device of `sm_count` multiprocessors; 0 for a radius outside
/// 0..127 or an empty image.
int box_blur_banded_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                 int radius, int sm_count) noexcept;

/// The banded kernel with segments of `segment_rows` rows (0: as box_blur()
/// chooses them), for benchmarks that sweep it; box_blur() with
/// BlurVariant::banded is the usual way in. @throws InvalidArgument where
/// box_blur_banded_takes() is false; CudaError if the launch fails.
void box_blur_banded(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                     std::int64_t height, std::int64_t width, int radius, StreamView stream,
                     int segment_rows = 0);

/// A window's average, rounded half up: what every variant and the reference store.
LOOM_IMAGE_HD inline unsigned rounded_average(unsigned sum, unsigned count) {
  return (sum + count / 2) / count;
}

/// The CPU reference (separable integer sums, the same rounding). Host pointers.
void box_blur_reference(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                        std::int64_t height, std::int64_t width, int radius);

}  // namespace loom::kernels
