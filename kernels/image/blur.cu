#include "image/blur.hpp"

#include "common/check.hpp"
#include "common/device_limits.hpp"
#include "common/launch.hpp"
#include "image/blur_separable.cuh"
#include "image/blur_stream.cuh"

#include <loom/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::kernels {
namespace {

constexpr unsigned kMaxGridYZ = 65535;
// The streaming kernel indexes rows and columns with ints.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 30;

// --- naive -------------------------------------------------------------------

constexpr int kNaiveBlockX = 32;
constexpr int kNaiveBlockY = 8;

__global__ void blur_naive(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst,
                           int planes, int height, int width, int r) {
  const int x = static_cast<int>(blockIdx.x) * kNaiveBlockX + static_cast<int>(threadIdx.x);
  if (x >= width) return;
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;
  for (int plane = static_cast<int>(blockIdx.z); plane < planes;
       plane += static_cast<int>(gridDim.z)) {
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    for (int y = static_cast<int>(blockIdx.y) * kNaiveBlockY + static_cast<int>(threadIdx.y);
         y < height; y += static_cast<int>(gridDim.y) * kNaiveBlockY) {
      const int ya = max(y - r, 0);
      const int yb = min(y + r, height - 1);
      const int xa = max(x - r, 0);
      const int xb = min(x + r, width - 1);
      unsigned sum = 0;
      for (int yy = ya; yy <= yb; ++yy) {
        const std::uint8_t* gRow = gIn + static_cast<std::size_t>(yy) * width;
        for (int xx = xa; xx <= xb; ++xx) sum += gRow[xx];
      }
      const auto count = static_cast<unsigned>((xb - xa + 1) * (yb - ya + 1));
      gOut[static_cast<std::size_t>(y) * width + x] =
          static_cast<std::uint8_t>(rounded_average(sum, count));
    }
  }
}

// --- tiled_v1 (and tiled where the stream cannot run) ------------------------

constexpr int kTileW = 128;  // output columns a block: 32 threads x 4 columns
constexpr int kTileH = 64;   // output rows a block: 8 threads x 8 rows
constexpr int kThreadsX = kTileW / 4;
constexpr int kThreadsY = 8;
constexpr int kRowsPerThread = kTileH / kThreadsY;
constexpr int kThreads = kThreadsX * kThreadsY;

// How the tile is read from global memory: 16-byte vectors (width % 16 == 0),
// 4-byte words (width % 4 == 0), or bytes; with aligned pointers. Every
// vector or word is then wholly inside the image or wholly outside.
enum class Access : int { bytes, words, vectors };

template <int R>
struct TileShape {
  static_assert(R >= 1 && R <= kBlurTiledMaxRadius, "16-bit packed column sums need R <= 7");
  // Columns loaded left and right of the tile: one 16-byte vector, so that
  // rows of the shared tile start on vector boundaries of the image.
  static constexpr int kHalo = 16;
  static_assert(R <= kHalo, "the halo holds the window");
  static constexpr int kInRows = kTileH + 2 * R;
  static constexpr int kInPitch = kTileW + 2 * kHalo;  // bytes a shared input row
  static constexpr int kInWords = kInPitch / 4;
  static constexpr int kInVectors = kInPitch / 16;
  static constexpr int kWindow = 2 * R + 1;
  static constexpr unsigned kArea = kWindow * kWindow;
  // Thread tx's four row sums read bytes [4 tx + kFirst, 4 tx + kFirst +
  // kWindow + 3) of a shared row: kRowWords words from word tx + kFirstWord.
  static constexpr int kFirst = kHalo - R;
  static constexpr int kFirstWord = kFirst / 4;
  static constexpr int kFirstByte = kFirst % 4;
  static constexpr int kRowWords = (kFirstByte + kWindow + 2) / 4 + 1;
  static_assert(4 * (kThreadsX - 1 + kFirstWord + kRowWords) <= kInPitch,
                "row sums read inside the row");
};

// Bytes of word `word` (of the kRowWords a thread reads) inside the window
// of its output column `out` (0..3), as a dp4a mask: 1 in each byte that counts.
template <int R>
__host__ __device__ constexpr unsigned window_mask(int out, int word) {
  using T = TileShape<R>;
  unsigned mask = 0;
  for (int b = 0; b < 4; ++b) {
    const int j = 4 * word + b;
    if (j >= T::kFirstByte + out && j <= T::kFirstByte + out + 2 * R) mask |= 1U << (8 * b);
  }
  return mask;
}

template <int R>
__device__ __forceinline__ void load_tile(const std::uint8_t* __restrict__ gIn, std::uint8_t* sIn,
                                          int height, int width, int x0, int y0, Access access) {
  using T = TileShape<R>;
  const int tid = static_cast<int>(threadIdx.y) * kThreadsX + static_cast<int>(threadIdx.x);
  if (access == Access::vectors) {
    for (int i = tid; i < T::kInRows * T::kInVectors; i += kThreads) {
      const int yy = i / T::kInVectors;
      const int gy = y0 - R + yy;
      const int gx = x0 - T::kHalo + 16 * (i - yy * T::kInVectors);
      uint4 v = make_uint4(0, 0, 0, 0);
      if (gy >= 0 && gy < height && gx >= 0 && gx < width) {
        v = *reinterpret_cast<const uint4*>(gIn + static_cast<std::size_t>(gy) * width + gx);
      }
      reinterpret_cast<uint4*>(sIn)[i] = v;  // (kInRows, kInPitch) bytes
    }
  } else if (access == Access::words) {
    for (int i = tid; i < T::kInRows * T::kInWords; i += kThreads) {
      const int yy = i / T::kInWords;
      const int gy = y0 - R + yy;
      const int gx = x0 - T::kHalo + 4 * (i - yy * T::kInWords);
      unsigned v = 0;
      if (gy >= 0 && gy < height && gx >= 0 && gx < width) {
        v = *reinterpret_cast<const unsigned*>(gIn + static_cast<std::size_t>(gy) * width + gx);
      }
      reinterpret_cast<unsigned*>(sIn)[i] = v;  // (kInRows, kInPitch) bytes
    }
  } else {
    for (int i = tid; i < T::kInRows * T::kInPitch; i += kThreads) {
      const int yy = i / T::kInPitch;
      const int gy = y0 - R + yy;
      const int gx = x0 - T::kHalo + (i - yy * T::kInPitch);
      std::uint8_t v = 0;
      if (gy >= 0 && gy < height && gx >= 0 && gx < width) {
        v = gIn[static_cast<std::size_t>(gy) * width + gx];
      }
      sIn[i] = v;
    }
  }
}

// Row sums of the window for the tile's 128 columns, every input row; out-of-
// image bytes are 0 in sIn, so they add nothing (the count excludes them).
template <int R>
__device__ __forceinline__ void row_sums(const std::uint8_t* sIn, uint2* sH2) {
  using T = TileShape<R>;
  const int tx = static_cast<int>(threadIdx.x);
  for (int yy = static_cast<int>(threadIdx.y); yy < T::kInRows; yy += kThreadsY) {
    const auto* sRow =
        reinterpret_cast<const unsigned*>(sIn + yy * T::kInPitch) + tx + T::kFirstWord;
    unsigned w[T::kRowWords];
#pragma unroll
    for (int k = 0; k < T::kRowWords; ++k) w[k] = sRow[k];
    // Each sum is a few byte dot products with 0/1 masks (dp4a): no byte
    // extraction, and no dependency from one column's sum to the next.
    unsigned h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned s = 0;
#pragma unroll
      for (int k = 0; k < T::kRowWords; ++k) {
        const unsigned mask = window_mask<R>(j, k);
        if (mask != 0) s = __dp4a(w[k], mask, s);
      }
      h[j] = s;
    }
    sH2[yy * kThreadsX + tx] = make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
  }
}

// Pixels of the window around p inside [0, extent); at least 1, so that the
// columns past the image's edge (computed, never stored) divide safely.
__device__ __forceinline__ unsigned window_count(int p, int r, int extent) {
  return static_cast<unsigned>(max(min(p + r, extent - 1) - max(p - r, 0) + 1, 1));
}

template <int R>
__global__ void __launch_bounds__(kThreads)
    blur_tiled(const std::uint8_t* __restrict__ gSrc, std::uint8_t* __restrict__ gDst, int planes,
               int height, int width, Access access) {
  using T = TileShape<R>;
  __shared__ __align__(16) std::uint8_t sIn[T::kInRows * T::kInPitch];  // (kInRows, kInPitch)
  __shared__ uint2 sH2[T::kInRows * kThreadsX];  // (kInRows, kTileW) 16-bit row sums
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int x0 = static_cast<int>(blockIdx.x) * kTileW;
  const int tiles_y = (height + kTileH - 1) / kTileH;
  const std::size_t plane_size = static_cast<std::size_t>(height) * width;
  for (int plane = static_cast<int>(blockIdx.z); plane < planes;
       plane += static_cast<int>(gridDim.z)) {
    const std::uint8_t* gIn = gSrc + plane * plane_size;
    std::uint8_t* gOut = gDst + plane * plane_size;
    for (int tile_y = static_cast<int>(blockIdx.y); tile_y < tiles_y;
         tile_y += static_cast<int>(gridDim.y)) {
      const int y0 = tile_y * kTileH;
      __syncthreads();  // the previous tile's readers are done with sIn and sH2
      load_tile<R>(gIn, sIn, height, width, x0, y0, access);
      __syncthreads();
      row_sums<R>(sIn, sH2);
      __syncthreads();

      const bool interior =
          x0 - R >= 0 && x0 + kTileW + R <= width && y0 - R >= 0 && y0 + kTileH + R <= height;
      const int gx0 = x0 + 4 * tx;
      unsigned count_x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) count_x[j] = window_count(gx0 + j, R, width);
      const int oy0 = ty * kRowsPerThread;
      uint2 acc = make_uint2(0, 0);
#pragma unroll
      for (int k = 0; k < T::kWindow; ++k) {
        const uint2 v = sH2[(oy0 + k) * kThreadsX + tx];
        acc.x += v.x;
        acc.y += v.y;
      }
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        if (i > 0) {
          // Add first, then subtract what the sum holds: no 16-bit lane borrows.
          const uint2 in = sH2[(oy0 + i + 2 * R) * kThreadsX + tx];
          const uint2 out = sH2[(oy0 + i - 1) * kThreadsX + tx];
          acc.x = acc.x + in.x - out.x;
          acc.y = acc.y + in.y - out.y;
        }
        const int gy = y0 + oy0 + i;
        if (gy >= height || gx0 >= width) continue;
        const unsigned sums[4] = {acc.x & 0xFFFFU, acc.x >> 16, acc.y & 0xFFFFU, acc.y >> 16};
        unsigned q[4];
        if (interior) {
#pragma unroll
          for (int j = 0; j < 4; ++j) q[j] = (sums[j] + T::kArea / 2) / T::kArea;
        } else {
          const unsigned count_y = window_count(gy, R, height);
#pragma unroll
          for (int j = 0; j < 4; ++j) q[j] = rounded_average(sums[j], count_x[j] * count_y);
        }
        std::uint8_t* gRow = gOut + static_cast<std::size_t>(gy) * width;
        if (access != Access::bytes) {
          *reinterpret_cast<unsigned*>(gRow + gx0) =
              q[0] | (q[1] << 8) | (q[2] << 16) | (q[3] << 24);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (gx0 + j < width) gRow[gx0 + j] = static_cast<std::uint8_t>(q[j]);
          }
        }
      }
    }
  }
}

template <int R>
void launch_tiled(const std::uint8_t* src, std::uint8_t* dst, int planes, int height, int width,
                  Access access, StreamView stream) {
  const dim3 grid(
      static_cast<unsigned>((width + kTileW - 1) / kTileW),
      std::min<unsigned>(static_cast<unsigned>((height + kTileH - 1) / kTileH), kMaxGridYZ),
      std::min<unsigned>(static_cast<unsigned>(planes), kMaxGridYZ));
  loom::detail::launch_on_stream(stream, blur_tiled<R>, grid, dim3(kThreadsX, kThreadsY), 0, src,
                                 dst, planes, height, width, access);
}

template <int R>
void launch_stream(const std::uint8_t* src, std::uint8_t* dst, int planes, int height, int width,
                   int segment_rows, StreamView stream) {
  using blur_detail::kStripBytes;
  using blur_detail::kStripsPerWarp;
  const int strips = width / kStripBytes;
  const dim3 grid(
      static_cast<unsigned>((strips + kStripsPerWarp - 1) / kStripsPerWarp),
      std::min<unsigned>(static_cast<unsigned>((height + segment_rows - 1) / segment_rows),
                         kMaxGridYZ),
      std::min<unsigned>(static_cast<unsigned>(planes), kMaxGridYZ));
  loom::detail::launch_on_stream(stream, blur_detail::blur_stream<R>, grid,
                                 dim3(blur_detail::kWarpLanes), 0, src, dst, planes, height, width,
                                 segment_rows);
}

// Calls f(std::integral_constant<int, R>) for radius r in R..Max (Max for
// any r past it; r is checked by the caller).
template <int R, int Max, class F>
void with_radius_in(int r, F& f) {
  if constexpr (R == Max) {
    f(std::integral_constant<int, R>{});
  } else if (r <= R) {
    f(std::integral_constant<int, R>{});
  } else {
    with_radius_in<R + 1, Max>(r, f);
  }
}

// For radius r of the tiled kernels (1..kBlurTiledMaxRadius).
template <class F>
void with_tiled_radius(int r, F&& f) {
  with_radius_in<1, kBlurTiledMaxRadius>(r, f);
}

// For radius r of the streaming kernel (1..kBlurStreamMaxRadius).
template <class F>
void with_stream_radius(int r, F&& f) {
  with_radius_in<1, kBlurStreamMaxRadius>(r, f);
}
static_assert(kBlurStreamMaxRadius == blur_detail::kStreamMaxRadius);

// The warps (one-warp blocks) of the streaming kernel at radius r that an
// SM holds at once: its ring of rows in shared memory decides past r = 3
// (4.6 KB a block at r = 1, 18.9 KB at r = 15; 32 blocks an H100 SM at
// r = 1..3, 11 at r = 15). Asked once a device and radius.
int stream_warps_per_sm(int r) {
  constexpr int kDevices = 64;
  static std::array<std::atomic<int>, kDevices * kBlurStreamMaxRadius> cache{};
  int device = 0;
  LOOM_KERNEL_CHECK(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < kDevices;
  const auto key = static_cast<std::size_t>(device * kBlurStreamMaxRadius + r - 1);
  if (cached) {
    if (const int known = cache[key].load(std::memory_order_relaxed); known > 0) return known;
  }
  int blocks = 0;
  with_stream_radius(r, [&](auto radius) {
    LOOM_KERNEL_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, blur_detail::blur_stream<decltype(radius)::value>, blur_detail::kWarpLanes, 0));
  });
  blocks = std::max(blocks, 1);
  if (cached) cache[key].store(blocks, std::memory_order_relaxed);
  return blocks;
}

void launch_stream(const std::uint8_t* src, std::uint8_t* dst, int planes, int height, int width,
                   int radius, int segment_rows, StreamView stream) {
  with_stream_radius(radius, [&](auto r) {
    launch_stream<decltype(r)::value>(src, dst, planes, height, width, segment_rows, stream);
  });
}

void launch_naive(const std::uint8_t* src, std::uint8_t* dst, int planes, int height, int width,
                  int radius, StreamView stream) {
  const dim3 grid(
      static_cast<unsigned>((width + kNaiveBlockX - 1) / kNaiveBlockX),
      std::min<unsigned>(static_cast<unsigned>((height + kNaiveBlockY - 1) / kNaiveBlockY),
                         kMaxGridYZ),
      std::min<unsigned>(static_cast<unsigned>(planes), kMaxGridYZ));
  loom::detail::launch_on_stream(stream, blur_naive, grid, dim3(kNaiveBlockX, kNaiveBlockY), 0, src,
                                 dst, planes, height, width, radius);
}

bool aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// What automatic means for this radius: the tiled kernels in their radii,
// the sliding kernel (no workspace) at every other, radius 0 included.
BlurVariant resolved(BlurVariant variant, int radius) {
  if (variant != BlurVariant::automatic) return variant;
  return radius >= 1 && radius <= kBlurTiledMaxRadius ? kBlurDefault : BlurVariant::sliding;
}

unsigned blocks_for_threads(std::int64_t threads) {
  const std::int64_t blocks =
      (threads + blur_detail::kSeparableThreads - 1) / blur_detail::kSeparableThreads;
  if (blocks > 0x7FFFFFFF) {
    throw InvalidArgument("box_blur: the image is too large for one separable launch (" +
                          std::to_string(threads) + " threads)");
  }
  return static_cast<unsigned>(blocks);
}

void launch_separable(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                      std::int64_t height, std::int64_t width, int radius, void* workspace,
                      StreamView stream) {
  if (workspace == nullptr) {
    throw InvalidArgument("box_blur: the separable variant needs its workspace (" +
                          std::to_string(box_blur_workspace_bytes(planes, height, width, radius,
                                                                  BlurVariant::separable)) +
                          " bytes)");
  }
  auto* rows = static_cast<std::uint16_t*>(workspace);
  const std::int64_t all_rows = planes * height;
  const std::int64_t row_chunks = (width + blur_detail::kRowChunk - 1) / blur_detail::kRowChunk;
  const std::int64_t col_runs = (height + blur_detail::kColRun - 1) / blur_detail::kColRun;
  // A block a chunk of a row (striding past 2^31 - 1 chunks).
  const auto row_blocks =
      static_cast<unsigned>(std::min<std::int64_t>(all_rows * row_chunks, 0x7FFFFFFF));
  loom::detail::launch_on_stream(stream, blur_detail::blur_row_sums, row_blocks,
                                 blur_detail::kSeparableThreads, 0, src, rows, all_rows, width,
                                 std::int64_t{radius});
  loom::detail::launch_on_stream(
      stream, blur_detail::blur_column_sums, blocks_for_threads(planes * col_runs * width),
      blur_detail::kSeparableThreads, 0, rows, dst, planes, height, width, std::int64_t{radius});
}

}  // namespace

bool box_blur_stream_takes(std::int64_t height, std::int64_t width, int radius, const void* src,
                           const void* dst) noexcept {
  return radius >= 1 && radius <= kBlurStreamMaxRadius && width % 16 == 0 && width > 2 * radius &&
         height >= 2 && height <= kMaxExtent && width <= kMaxExtent && aligned(src, 16) &&
         aligned(dst, 16);
}

int box_blur_stream_segment_rows(std::int64_t planes, std::int64_t height, std::int64_t width,
                                 int radius) {
  if (planes <= 0 || height <= 0 || width <= 0) return 0;
  const int r = std::clamp(radius, 1, kBlurStreamMaxRadius);
  const std::int64_t groups = (width / blur_detail::kStripBytes + blur_detail::kStripsPerWarp - 1) /
                              blur_detail::kStripsPerWarp;
  const std::int64_t slots =
      static_cast<std::int64_t>(device_multiprocessors()) * stream_warps_per_sm(r);
  return blur_detail::stream_segment_rows(planes, height, groups, slots, r);
}

void box_blur_stream(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes,
                     std::int64_t height, std::int64_t width, int radius, StreamView stream,
                     int segment_rows) {
  if (planes == 0 || height == 0 || width == 0) return;
  if (!box_blur_stream_takes(height, width, radius, src, dst)) {
    throw InvalidArgument(
        "box_blur: the streaming kernel takes radius 1.." + std::to_string(kBlurStreamMaxRadius) +
        ", widths a multiple of 16 and more than twice the radius, at least 2 rows and 16-byte "
        "aligned pointers; got radius " +
        std::to_string(radius) + " over " + std::to_string(height) + " x " + std::to_string(width));
  }
  if (segment_rows <= 0) segment_rows = box_blur_stream_segment_rows(planes, height, width, radius);
  launch_stream(src, dst, static_cast<int>(planes), static_cast<int>(height),
                static_cast<int>(width), radius, segment_rows, stream);
  LOOM_KERNEL_CHECK_LAUNCH("box_blur kernel launch");
}

std::size_t box_blur_workspace_bytes(std::int64_t planes, std::int64_t height, std::int64_t width,
                                     int radius, BlurVariant variant) noexcept {
  if (resolved(variant, radius) != BlurVariant::separable) return 0;
  return static_cast<std::size_t>(planes * height * width) * sizeof(std::uint16_t);
}

void box_blur(const std::uint8_t* src, std::uint8_t* dst, std::int64_t planes, std::int64_t height,
              std::int64_t width, int radius, StreamView stream, BlurVariant variant,
              void* workspace) {
  if (planes == 0 || height == 0 || width == 0) return;
  // Past the tiled radii, automatic runs the streaming kernel where it takes
  // the image (inside them, `tiled` does).
  if (variant == BlurVariant::automatic && radius > kBlurTiledMaxRadius &&
      box_blur_stream_takes(height, width, radius, src, dst)) {
    box_blur_stream(src, dst, planes, height, width, radius, stream);
    return;
  }
  variant = resolved(variant, radius);
  if (variant == BlurVariant::banded) {
    if (box_blur_banded_takes(height, width, radius, src, dst)) {
      box_blur_banded(src, dst, planes, height, width, radius, stream);
      return;
    }
    variant = BlurVariant::sliding;  // other widths and alignments
  }
  if (variant == BlurVariant::sliding && box_blur_sliding_takes(height, width, radius)) {
    box_blur_sliding(src, dst, planes, height, width, radius, stream);
    return;
  }
  if (variant == BlurVariant::separable) {
    launch_separable(src, dst, planes, height, width, radius, workspace, stream);
    LOOM_KERNEL_CHECK_LAUNCH("box_blur kernel launch");
    return;
  }
  const auto p = static_cast<int>(planes);
  const auto h = static_cast<int>(height);
  const auto w = static_cast<int>(width);
  Access access = Access::bytes;
  if (width % 4 == 0 && aligned(src, 4) && aligned(dst, 4)) access = Access::words;
  if (access == Access::words && width % 16 == 0 && aligned(src, 16)) access = Access::vectors;
  const bool streams = variant == BlurVariant::tiled && width % 16 == 0 && height >= 2 &&
                       aligned(src, 16) && aligned(dst, 16);
  if (variant == BlurVariant::naive || radius < 1 || radius > kBlurTiledMaxRadius) {
    launch_naive(src, dst, p, h, w, radius, stream);
  } else if (streams) {
    launch_stream(src, dst, p, h, w, radius,
                  box_blur_stream_segment_rows(planes, height, width, radius), stream);
  } else {
    with_tiled_radius(radius, [&](auto r) {
      launch_tiled<decltype(r)::value>(src, dst, p, h, w, access, stream);
    });
  }
  LOOM_KERNEL_CHECK_LAUNCH("box_blur kernel launch");
}

}  // namespace loom::kernels
