// Every image kernel variant against its CPU reference, bit for bit: fresh
// random pixels, outputs poisoned with two different byte patterns (an
// unwritten pixel cannot match both), awkward sizes, unaligned pointers and
// widths; histograms also on one-value and blurred-like images, run twice
// over the same counts (overwritten, not accumulated) and replayed from a
// CUDA graph; then the ops through a graph on the CUDA backend, eager and
// compiled, and tensors in the wrong memory space rejected at submit naming
// the task.
#include "support/gpu.hpp"

#include "cuda/stream.hpp"
#include "image/blur.hpp"
#include "image/gray.hpp"
#include "image/histogram.hpp"
#include "image/test_support.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace loom::ops {
void PrintTo(GrayVariant v, std::ostream* os) { *os << to_string(v); }
void PrintTo(BlurVariant v, std::ostream* os) { *os << to_string(v); }
void PrintTo(HistogramVariant v, std::ostream* os) { *os << to_string(v); }
}  // namespace loom::ops

namespace {

using loom::kernels::BlurVariant;
using loom::kernels::GrayVariant;
using loom::kernels::HistogramVariant;
using loom::kernels::RgbLayout;
using loom::test::image::Bytes;
using loom::test::image::random_bytes;

constexpr std::uint8_t kPoisons[] = {0x5A, 0xA5};

// Counts the bytes of `got` (offset by `offset`) that differ from `want`,
// and the bytes before and after the output that were touched.
std::size_t mismatches(const Bytes& got, const Bytes& want, std::size_t offset,
                       std::uint8_t poison) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got[offset + i] != want[i] ? 1 : 0;
  for (std::size_t i = 0; i < offset; ++i) bad += got[i] != poison ? 1 : 0;
  for (std::size_t i = offset + want.size(); i < got.size(); ++i) bad += got[i] != poison ? 1 : 0;
  return bad;
}

class GrayGpu : public ::testing::TestWithParam<GrayVariant> {};

void check_gray(GrayVariant variant, RgbLayout layout, std::size_t pixels, std::size_t offset) {
  auto rng = loom::test::random_engine();
  const Bytes rgb = random_bytes(3 * pixels, rng);
  Bytes want(pixels);
  loom::kernels::rgb_to_gray_reference(rgb.data(), want.data(), pixels, layout);
  loom::test::DeviceBuffer<std::uint8_t> d_rgb(3 * pixels + offset);
  loom::test::DeviceBuffer<std::uint8_t> d_gray(pixels + offset + 16);
  Bytes staged(3 * pixels + offset);
  std::memcpy(staged.data() + offset, rgb.data(), rgb.size());
  d_rgb.upload(staged);
  loom::detail::Stream stream(0, 0);
  for (std::uint8_t poison : kPoisons) {
    LOOM_CUDA_CHECK(cudaMemset(d_gray.data(), poison, d_gray.size()));
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());  // before the kernel on a loom stream
    loom::kernels::rgb_to_gray(d_rgb.data() + offset, d_gray.data() + offset, pixels, layout,
                               stream.view(), variant);
    stream.synchronize();
    EXPECT_EQ(mismatches(d_gray.download(), want, offset, poison), 0U)
        << to_string(variant) << " " << to_string(layout) << " pixels=" << pixels
        << " offset=" << offset << " poison=" << int{poison};
  }
}

TEST_P(GrayGpu, MatchesTheReferenceBitForBit) {
  LOOM_REQUIRE_GPU();
  for (RgbLayout layout : {RgbLayout::interleaved, RgbLayout::planar}) {
    for (std::size_t pixels :
         {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{31},
          std::size_t{4097}, std::size_t{1000003}, std::size_t{1920 * 1080}}) {
      check_gray(GetParam(), layout, pixels, 0);
    }
  }
}

TEST_P(GrayGpu, UnalignedPointersStillMatch) {
  LOOM_REQUIRE_GPU();
  for (RgbLayout layout : {RgbLayout::interleaved, RgbLayout::planar}) {
    check_gray(GetParam(), layout, 100003, 1);
    check_gray(GetParam(), layout, 4096, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, GrayGpu,
                         ::testing::Values(GrayVariant::naive, GrayVariant::vectorized),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

class BlurGpu : public ::testing::TestWithParam<BlurVariant> {};

// `saturated`: the first quarter of the pixels 255, so that the window sums
// reach their largest values.
void check_blur(BlurVariant variant, std::int64_t planes, std::int64_t h, std::int64_t w, int r,
                std::size_t offset, bool saturated = false) {
  auto rng = loom::test::random_engine();
  const auto n = static_cast<std::size_t>(planes * h * w);
  Bytes src = random_bytes(n, rng);
  if (saturated) std::fill(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n / 4), 255);
  Bytes want(n);
  loom::kernels::box_blur_reference(src.data(), want.data(), planes, h, w, r);
  loom::test::DeviceBuffer<std::uint8_t> d_src(n + offset);
  loom::test::DeviceBuffer<std::uint8_t> d_dst(n + offset + 16);
  Bytes staged(n + offset);
  std::memcpy(staged.data() + offset, src.data(), n);
  d_src.upload(staged);
  loom::detail::Stream stream(0, 0);
  const std::size_t scratch = loom::kernels::box_blur_workspace_bytes(planes, h, w, r, variant);
  loom::test::DeviceBuffer<std::uint8_t> workspace(std::max<std::size_t>(scratch, 1));
  for (std::uint8_t poison : kPoisons) {
    LOOM_CUDA_CHECK(cudaMemset(d_dst.data(), poison, d_dst.size()));
    LOOM_CUDA_CHECK(cudaMemset(workspace.data(), poison, workspace.size()));
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());  // before the kernel on a loom stream
    loom::kernels::box_blur(d_src.data() + offset, d_dst.data() + offset, planes, h, w, r,
                            stream.view(), variant, scratch > 0 ? workspace.data() : nullptr);
    stream.synchronize();
    EXPECT_EQ(mismatches(d_dst.download(), want, offset, poison), 0U)
        << to_string(variant) << " planes=" << planes << " " << h << "x" << w << " r=" << r
        << " offset=" << offset << " poison=" << int{poison};
  }
}

TEST_P(BlurGpu, MatchesTheReferenceBitForBitAtEveryRadius) {
  LOOM_REQUIRE_GPU();
  struct Size {
    std::int64_t h, w;
  };
  // Single pixels and lines, widths a multiple of 16 (vector loads; tiled
  // streams from a height of 2), of 4 (word loads) and neither, tiles and
  // row segments exact and not, images narrower than the window.
  const Size sizes[] = {{1, 1},  {1, 31},  {31, 1},    {5, 7},      {64, 128}, {65, 129}, {1, 32},
                        {2, 32}, {33, 16}, {127, 256}, {200, 4097}, {3, 1000}, {70, 496}};
  for (int r : {0, 1, 2, 3, 4, 5, 7, 8, 12, 15, 16, 20}) {
    for (const Size& s : sizes) check_blur(GetParam(), 1, s.h, s.w, r, 0);
  }
}

TEST_P(BlurGpu, PlanesAndUnalignedPointers) {
  LOOM_REQUIRE_GPU();
  check_blur(GetParam(), 3, 67, 132, 3, 0);
  check_blur(GetParam(), 3, 67, 131, 3, 0);
  check_blur(GetParam(), 2, 70, 128, 3, 1);  // a vector-wide width, unaligned pointer: bytes
  check_blur(GetParam(), 2, 70, 128, 3, 4);  // the same, 4-byte aligned pointer: words
  check_blur(GetParam(), 1, 1080, 1920, 3, 0);
  check_blur(GetParam(), 1, 1000, 4096, 7, 0);  // many row segments, the widest window
  check_blur(GetParam(), 2, 300, 496, 1, 16);   // 16-byte aligned at an offset: streams
}

TEST_P(BlurGpu, SaturatedWindowsAtEveryRadius) {
  LOOM_REQUIRE_GPU();
  for (int r = 1; r <= loom::kernels::kBlurStreamMaxRadius; ++r) {
    check_blur(GetParam(), 1, 70, 512, r, 0, true);
    check_blur(GetParam(), 2, 33, 496, r, 0, true);
  }
}

// The separable running sums cost the same at any radius: every radius the
// op takes, saturated windows included (the 16-bit row sums' largest).
TEST(BlurSeparableGpu, MatchesTheReferenceAtEveryRadius) {
  LOOM_REQUIRE_GPU();
  for (int r = 0; r <= loom::kernels::kBlurMaxRadius; ++r) {
    check_blur(BlurVariant::separable, 1, 37, 300, r, 0);
    check_blur(BlurVariant::separable, 2, 64, 129, r, 3, true);
  }
  check_blur(BlurVariant::separable, 1, 1080, 1920, 64, 0);
  check_blur(BlurVariant::automatic, 1, 1000, 4096, 8, 0);  // automatic past the tiled radii
}

// The sliding kernel (one pass at any radius, what automatic runs outside
// 1..7): every radius the op takes on an aligned image of two strip groups
// (16-byte accesses), an odd width at an unaligned offset (bytes), and
// saturated windows.
TEST(BlurSlidingGpu, MatchesTheReferenceAtEveryRadius) {
  LOOM_REQUIRE_GPU();
  for (int r = 0; r <= loom::kernels::kBlurMaxRadius; ++r) {
    check_blur(BlurVariant::sliding, 1, 70, 512, r, 0);
    check_blur(BlurVariant::sliding, 2, 37, 300, r, 3);
    check_blur(BlurVariant::sliding, 1, 64, 256, r, 16, true);
  }
}

// Frame-sized images at the radii the benchmark sweeps, through the variant
// and through automatic: random pixels, outputs poisoned twice.
TEST(BlurSlidingGpu, LargeImagesAtTheBenchmarkRadii) {
  LOOM_REQUIRE_GPU();
  for (int r : {1, 7, 8, 16, 33, 64, 127}) {
    for (BlurVariant variant : {BlurVariant::sliding, BlurVariant::automatic}) {
      check_blur(variant, 1, 300, 4096, r, 0);   // many strip groups, 16-byte accesses
      check_blur(variant, 1, 1080, 1920, r, 0);  // a frame
      check_blur(variant, 3, 131, 1001, r, 5);   // planes, an odd width, unaligned: bytes
      check_blur(variant, 1, 2 * r + 40, 512, r, 0, true);  // saturated, interior rows
    }
  }
}

TEST(BlurSlidingGpu, ThinAndTinyImages) {
  LOOM_REQUIRE_GPU();
  struct Size {
    std::int64_t h, w;
  };
  // One row (cy = 1), two columns, one column (runs naive past radius 0),
  // windows far larger than the image.
  for (const Size s : {Size{1, 16}, Size{1, 4096}, Size{2, 2}, Size{4096, 2}, Size{5, 1},
                       Size{3, 17}, Size{129, 16}}) {
    for (int r : {0, 1, 8, 64, 127}) check_blur(BlurVariant::sliding, 2, s.h, s.w, r, 0);
  }
}

// A kernel with segments of `rows` rows (launch(src, dst, h, w, r, rows,
// stream)): the segment length changes which rows a warp or block walks,
// never the result.
template <class Launch>
void expect_every_segment_length_same(std::int64_t h, std::int64_t w, Launch launch,
                                      std::vector<int> radii = {3, 16, 64, 127}) {
  auto rng = loom::test::random_engine();
  for (int r : radii) {
    const Bytes src = random_bytes(static_cast<std::size_t>(h * w), rng);
    Bytes want(src.size());
    loom::kernels::box_blur_reference(src.data(), want.data(), 1, h, w, r);
    loom::test::DeviceBuffer<std::uint8_t> d_src(src.size());
    loom::test::DeviceBuffer<std::uint8_t> d_dst(src.size() + 16);
    d_src.upload(src);
    loom::detail::Stream stream(0, 0);
    for (int rows : {1, 7, 32, 100, 256, 4096}) {
      LOOM_CUDA_CHECK(cudaMemset(d_dst.data(), 0x5A, d_dst.size()));
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());  // before the kernel on a loom stream
      launch(d_src.data(), d_dst.data(), h, w, r, rows, stream.view());
      stream.synchronize();
      EXPECT_EQ(mismatches(d_dst.download(), want, 0, 0x5A), 0U)
          << "r=" << r << " segment_rows=" << rows;
    }
  }
}

TEST(BlurSlidingGpu, EverySegmentLengthGivesTheSameImage) {
  LOOM_REQUIRE_GPU();
  expect_every_segment_length_same(517, 1024,
                                   [](const std::uint8_t* src, std::uint8_t* dst, std::int64_t h,
                                      std::int64_t w, int r, int rows, loom::StreamView stream) {
                                     loom::kernels::box_blur_sliding(src, dst, 1, h, w, r, stream,
                                                                     rows);
                                   });
}

// The streaming kernel (what tiled runs for radius 1..7, automatic to 15).
TEST(BlurStreamGpu, EverySegmentLengthGivesTheSameImage) {
  LOOM_REQUIRE_GPU();
  expect_every_segment_length_same(517, 1024,
                                   [](const std::uint8_t* src, std::uint8_t* dst, std::int64_t h,
                                      std::int64_t w, int r, int rows, loom::StreamView stream) {
                                     loom::kernels::box_blur_stream(src, dst, 1, h, w, r, stream,
                                                                    rows);
                                   },
                                   {1, 3, 7, 8, 15});
}

// The banded kernel (a block a band of 1024 columns): every radius on an
// image of several bands, saturated windows, frame sizes, and shapes it
// hands to the sliding kernel (an odd width, an unaligned offset).
TEST(BlurBandedGpu, MatchesTheReferenceAtEveryRadius) {
  LOOM_REQUIRE_GPU();
  for (int r = 0; r <= loom::kernels::kBlurMaxRadius; ++r) {
    check_blur(BlurVariant::banded, 1, 70, 2048, r, 0);
    check_blur(BlurVariant::banded, 2, 37, 304, r, 0);
    check_blur(BlurVariant::banded, 1, 64, 1024, r, 16, true);
    if (r % 16 == 1) check_blur(BlurVariant::banded, 2, 37, 300, r, 3);  // runs sliding
  }
  for (int r : {1, 7, 8, 33, 64, 127}) {
    check_blur(BlurVariant::banded, 1, 300, 4096, r, 0);
    check_blur(BlurVariant::banded, 1, 1080, 1920, r, 0);
    check_blur(BlurVariant::banded, 3, 131, 1008, r, 0);
  }
}

TEST(BlurBandedGpu, EverySegmentLengthGivesTheSameImage) {
  LOOM_REQUIRE_GPU();
  expect_every_segment_length_same(517, 2048,
                                   [](const std::uint8_t* src, std::uint8_t* dst, std::int64_t h,
                                      std::int64_t w, int r, int rows, loom::StreamView stream) {
                                     loom::kernels::box_blur_banded(src, dst, 1, h, w, r, stream,
                                                                    rows);
                                   });
}

INSTANTIATE_TEST_SUITE_P(Variants, BlurGpu,
                         ::testing::Values(BlurVariant::naive, BlurVariant::tiled,
                                           BlurVariant::tiled_v1, BlurVariant::separable,
                                           BlurVariant::sliding, BlurVariant::banded),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// --- histogram ------------------------------------------------------------------

using Counts = std::vector<std::int32_t>;

// Bytes of poison for the counts (cudaMemset): 0x5A5A5A5A and -1 a count.
constexpr std::uint8_t kCountPoisons[] = {0x5A, 0xFF};
// Counts either side of the 256 the kernel writes: a write outside shows.
constexpr std::size_t kCountGuard = 16;

enum class Pixels { random, constant, runs };

// Random bytes; one random value; or runs of 1 to 40 equal bytes over a few
// neighbouring values, as in a blurred image (shared atomics contend).
Bytes histogram_pixels(std::size_t n, Pixels kind, std::mt19937_64& rng) {
  if (kind == Pixels::random) return random_bytes(n, rng);
  std::uniform_int_distribution<int> byte(0, 255);
  if (kind == Pixels::constant) return Bytes(n, static_cast<std::uint8_t>(byte(rng)));
  std::uniform_int_distribution<int> length(1, 40);
  std::uniform_int_distribution<int> near(0, 6);
  const int centre = std::uniform_int_distribution<int>(0, 249)(rng);
  Bytes v(n);
  for (std::size_t i = 0; i < n;) {
    const auto b = static_cast<std::uint8_t>(centre + near(rng));
    for (int k = length(rng); k > 0 && i < n; --k) v[i++] = b;
  }
  return v;
}

Counts reference_counts(const Bytes& pixels) {
  Counts counts(loom::kernels::kHistogramBins);
  loom::kernels::histogram_reference(pixels.data(), pixels.size(), counts.data());
  return counts;
}

// The counts a device buffer holds between its guards, and whether the
// guards still hold `poison`.
struct ReadCounts {
  Counts counts;
  bool guards_intact;
};

ReadCounts read_counts(const loom::test::DeviceBuffer<std::int32_t>& d_counts,
                       std::uint8_t poison) {
  const Counts all = d_counts.download();
  std::int32_t guard = 0;
  std::memset(&guard, poison, sizeof guard);
  const auto guard_count = static_cast<std::ptrdiff_t>(kCountGuard);
  ReadCounts r{Counts(all.begin() + guard_count, all.end() - guard_count), true};
  for (std::size_t i = 0; i < kCountGuard; ++i) {
    r.guards_intact = r.guards_intact && all[i] == guard && all[all.size() - 1 - i] == guard;
  }
  return r;
}

// The image `offset` bytes into a device buffer (the bytes around it random:
// a read outside the image would count one of them).
struct DeviceImage {
  DeviceImage(const Bytes& pixels, std::size_t offset, std::mt19937_64& rng)
      : buffer(pixels.size() + offset + 16), image(buffer.data() + offset) {
    Bytes staged = random_bytes(buffer.size(), rng);
    std::copy(pixels.begin(), pixels.end(), staged.begin() + static_cast<std::ptrdiff_t>(offset));
    buffer.upload(staged);
  }
  loom::test::DeviceBuffer<std::uint8_t> buffer;
  std::uint8_t* image;
};

class HistogramGpu : public ::testing::TestWithParam<HistogramVariant> {};

// For each poison: counts poisoned, one run, then a second run over the same
// counts; both must equal the reference (the second proves the counts are
// overwritten, not accumulated).
void check_histogram(HistogramVariant variant, Pixels kind, std::size_t pixels,
                     std::size_t offset) {
  auto rng = loom::test::random_engine();
  const Bytes values = histogram_pixels(pixels, kind, rng);
  const Counts want = reference_counts(values);
  const DeviceImage d_image(values, offset, rng);
  loom::test::DeviceBuffer<std::int32_t> d_counts(loom::kernels::kHistogramBins + 2 * kCountGuard);
  loom::detail::Stream stream(0, 0);
  for (std::uint8_t poison : kCountPoisons) {
    LOOM_CUDA_CHECK(cudaMemset(d_counts.data(), poison, d_counts.size() * sizeof(std::int32_t)));
    // A device memset may return early, and `stream` does not wait for the legacy stream.
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    for (int run = 0; run < 2; ++run) {
      loom::kernels::histogram(d_image.image, pixels, d_counts.data() + kCountGuard, stream.view(),
                               variant);
      stream.synchronize();
      const ReadCounts got = read_counts(d_counts, poison);
      EXPECT_EQ(got.counts, want) << to_string(variant) << " pixels=" << pixels
                                  << " offset=" << offset << " kind=" << static_cast<int>(kind)
                                  << " poison=" << int{poison} << " run=" << run;
      EXPECT_TRUE(got.guards_intact) << to_string(variant) << " wrote outside the 256 counts";
    }
  }
}

TEST_P(HistogramGpu, MatchesTheReferenceOnRandomImages) {
  LOOM_REQUIRE_GPU();
  for (std::size_t pixels :
       {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
        std::size_t{255}, std::size_t{4097}, std::size_t{1000 * 999}, std::size_t{1920 * 1080},
        std::size_t{3 * 1080 * 1920}, std::size_t{4096 * 4096}}) {
    check_histogram(GetParam(), Pixels::random, pixels, 0);
  }
}

TEST_P(HistogramGpu, OneValueImagesWhereEveryAtomicContends) {
  LOOM_REQUIRE_GPU();
  for (std::size_t pixels : {std::size_t{33}, std::size_t{1920 * 1080}, std::size_t{4096 * 4096}}) {
    check_histogram(GetParam(), Pixels::constant, pixels, 0);
  }
}

TEST_P(HistogramGpu, BlurredLikeRunsOfFewValues) {
  LOOM_REQUIRE_GPU();
  check_histogram(GetParam(), Pixels::runs, 1000 * 999, 0);
  check_histogram(GetParam(), Pixels::runs, 4096 * 4096, 0);
}

TEST_P(HistogramGpu, EveryMisalignedStart) {
  LOOM_REQUIRE_GPU();
  for (std::size_t offset = 1; offset < 16; ++offset) {
    for (std::size_t pixels : {std::size_t{5}, std::size_t{31}, std::size_t{100003}}) {
      check_histogram(GetParam(), Pixels::random, pixels, offset);
    }
    check_histogram(GetParam(), Pixels::runs, 4096 * 17 + 9, offset);
    check_histogram(GetParam(), Pixels::constant, 4096 * 17 + 9, offset);
  }
}

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { LOOM_CUDA_ASSERT(cudaGraphDestroy(g)); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const { LOOM_CUDA_ASSERT(cudaGraphExecDestroy(g)); }
};

TEST_P(HistogramGpu, CapturedInACudaGraphAndReplayedTwice) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const std::size_t pixels = 1920 * 1080 + 3;
  Bytes values = histogram_pixels(pixels, Pixels::random, rng);
  const DeviceImage d_image(values, 7, rng);
  loom::test::DeviceBuffer<std::int32_t> d_counts(loom::kernels::kHistogramBins + 2 * kCountGuard);
  std::int32_t* counts = d_counts.data() + kCountGuard;
  loom::detail::Stream stream(0, 0);
  // Eager first: the capture then records what a warm launcher enqueues.
  loom::kernels::histogram(d_image.image, pixels, counts, stream.view(), GetParam());
  stream.synchronize();
  cudaGraph_t raw_graph = nullptr;
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream.view(), cudaStreamCaptureModeThreadLocal));
  loom::kernels::histogram(d_image.image, pixels, counts, stream.view(), GetParam());
  LOOM_CUDA_CHECK(cudaStreamEndCapture(stream.view(), &raw_graph));
  const std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter> graph(raw_graph);
  cudaGraphExec_t raw_exec = nullptr;
  LOOM_CUDA_CHECK(cudaGraphInstantiate(&raw_exec, graph.get(), 0));
  const std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter> exec(raw_exec);
  for (std::uint8_t poison : kCountPoisons) {
    LOOM_CUDA_CHECK(cudaMemset(d_counts.data(), poison, d_counts.size() * sizeof(std::int32_t)));
    // A device memset may return early, and `stream` does not wait for the legacy stream.
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    for (int replay = 0; replay < 2; ++replay) {
      // Fresh pixels for each replay: the graph reads the image anew.
      values = histogram_pixels(pixels, replay == 0 ? Pixels::random : Pixels::runs, rng);
      LOOM_CUDA_CHECK(cudaMemcpy(d_image.image, values.data(), pixels, cudaMemcpyHostToDevice));
      // From pageable memory cudaMemcpy may return before the DMA is done, and
      // `stream` does not wait for the legacy stream.
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      LOOM_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream.view()));
      stream.synchronize();
      const ReadCounts got = read_counts(d_counts, poison);
      EXPECT_EQ(got.counts, reference_counts(values))
          << to_string(GetParam()) << " poison=" << int{poison} << " replay=" << replay;
      EXPECT_TRUE(got.guards_intact);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, HistogramGpu,
                         ::testing::Values(HistogramVariant::global_atomics,
                                           HistogramVariant::shared),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST(ImageOpsGpu, GrayThenBlurThroughAGraphOnTheCudaBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  loom::Runtime rt;
  ASSERT_EQ(rt.backend(), loom::Backend::cuda);
  const std::int64_t h = 481;
  const std::int64_t w = 643;
  for (bool planar : {false, true}) {
    Bytes pixels = random_bytes(static_cast<std::size_t>(3 * h * w), rng);
    Bytes gray_out(static_cast<std::size_t>(h * w), 0xA5);
    Bytes blur_out(static_cast<std::size_t>(h * w), 0xA5);
    const loom::Shape rgb_shape = planar ? loom::Shape{3, h, w} : loom::Shape{h, w, 3};
    auto h_rgb = rt.provide(pixels.data(), loom::DType::u8, rgb_shape, loom::Memory::pageable);
    auto h_gray = rt.provide(gray_out.data(), loom::DType::u8, {h, w}, loom::Memory::pageable);
    auto h_blur = rt.provide(blur_out.data(), loom::DType::u8, {h, w}, loom::Memory::pageable);
    auto rgb = rt.tensor(loom::DType::u8, rgb_shape);
    auto gray = rt.tensor<std::uint8_t>({h, w});
    auto blurred = rt.tensor<std::uint8_t>({h, w});
    loom::Graph g;
    g.copy(h_rgb, rgb);
    g.add(loom::ops::rgb_to_gray(rgb, gray));
    g.add(loom::ops::box_blur(gray, blurred, 3));
    g.copy(gray, h_gray);
    g.copy(blurred, h_blur);
    rt.submit(g).wait();

    Bytes want_gray(gray_out.size());
    loom::kernels::rgb_to_gray_reference(pixels.data(), want_gray.data(), want_gray.size(),
                                         planar ? RgbLayout::planar : RgbLayout::interleaved);
    Bytes want_blur(want_gray.size());
    loom::kernels::box_blur_reference(want_gray.data(), want_blur.data(), 1, h, w, 3);
    EXPECT_EQ(gray_out, want_gray) << (planar ? "planar" : "interleaved");
    EXPECT_EQ(blur_out, want_blur) << (planar ? "planar" : "interleaved");
  }
}

// The frame pipeline (RGB in, gray, blur, histogram, counts out) as a loom
// graph: submitted twice, then compiled and replayed twice, on fresh frames,
// counts poisoned on both sides before the first run of each.
TEST(ImageOpsGpu, GrayBlurHistogramEagerAndCompiledOverwriteTheCounts) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  loom::Runtime rt;
  const std::int64_t h = 479;
  const std::int64_t w = 641;
  Bytes pixels(static_cast<std::size_t>(3 * h * w));
  Counts counts_out(256);
  auto h_rgb = rt.provide(pixels.data(), loom::DType::u8, {3, h, w}, loom::Memory::pageable);
  auto h_counts = rt.provide(counts_out.data(), loom::DType::i32, {256}, loom::Memory::pageable);
  auto rgb = rt.tensor<std::uint8_t>({3, h, w});
  auto gray = rt.tensor<std::uint8_t>({h, w});
  auto blurred = rt.tensor<std::uint8_t>({h, w});
  auto counts = rt.tensor<std::int32_t>({256});
  Counts poison(256, 0x5A5A5A5A);
  auto h_poison = rt.provide(poison.data(), loom::DType::i32, {256}, loom::Memory::pageable);
  loom::Graph g;
  g.copy(h_rgb, rgb);
  g.add(loom::ops::rgb_to_gray(rgb, gray));
  g.add(loom::ops::box_blur(gray, blurred, 3));
  g.add(loom::ops::histogram(blurred, counts));
  g.copy(counts, h_counts);

  const auto expected = [&] {
    Bytes want_gray(static_cast<std::size_t>(h * w));
    loom::kernels::rgb_to_gray_reference(pixels.data(), want_gray.data(), want_gray.size(),
                                         RgbLayout::planar);
    Bytes want_blur(want_gray.size());
    loom::kernels::box_blur_reference(want_gray.data(), want_blur.data(), 1, h, w, 3);
    return reference_counts(want_blur);
  };
  const auto fresh_frame = [&] {
    const Bytes frame = random_bytes(pixels.size(), rng);
    std::copy(frame.begin(), frame.end(), pixels.begin());  // in place: h_rgb views this buffer
    std::fill(counts_out.begin(), counts_out.end(), -1);
  };
  rt.copy(h_poison, counts).wait();
  for (int run = 0; run < 2; ++run) {
    fresh_frame();
    rt.submit(g).wait();
    EXPECT_EQ(counts_out, expected()) << "eager run " << run;
  }
  auto exe = rt.compile(g);
  rt.copy(h_poison, counts).wait();
  for (int replay = 0; replay < 2; ++replay) {
    fresh_frame();
    exe.run().wait();
    EXPECT_EQ(counts_out, expected()) << "replay " << replay;
  }
}

// A contiguous 1-D slice starting at every byte offset of a bigger device
// tensor, both variants, through the op.
TEST(ImageOpsGpu, HistogramOfSlicesAtEveryByteOffset) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  loom::Runtime rt;
  const std::int64_t n = 70001;
  Bytes pixels = random_bytes(static_cast<std::size_t>(n + 16), rng);
  auto h_pixels = rt.provide(pixels.data(), loom::DType::u8, {n + 16}, loom::Memory::pageable);
  auto bytes = rt.tensor<std::uint8_t>({n + 16});
  rt.copy(h_pixels, bytes).wait();
  Counts counts_out(256);
  auto h_counts = rt.provide(counts_out.data(), loom::DType::i32, {256}, loom::Memory::pageable);
  auto counts = rt.tensor<std::int32_t>({256});
  for (auto variant :
       {loom::ops::HistogramVariant::global_atomics, loom::ops::HistogramVariant::shared}) {
    for (std::int64_t offset = 1; offset < 16; ++offset) {
      std::fill(counts_out.begin(), counts_out.end(), -1);
      loom::Graph g;
      g.add(loom::ops::histogram(bytes.slice(0, offset, offset + n), counts, variant));
      g.copy(counts, h_counts);
      rt.submit(g).wait();
      const auto first = pixels.begin() + offset;
      EXPECT_EQ(counts_out, reference_counts(Bytes(first, first + n)))
          << to_string(variant) << " offset=" << offset;
    }
  }
}

TEST(ImageOpsGpu, HostTensorsAreRejectedByTheCudaBackendNamingTheTask) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto host_rgb = rt.tensor<std::uint8_t>({8, 8, 3}, loom::Memory::pageable);
  auto dev_gray = rt.tensor<std::uint8_t>({8, 8});
  auto host_gray = rt.tensor<std::uint8_t>({8, 8}, loom::Memory::pageable);
  const auto expect_rejected = [&](const loom::OpPtr& op, const std::string& words) {
    loom::Graph g;
    g.add(op, {.name = "frame"});
    try {
      (void)rt.submit(g);
      FAIL() << "accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "frame");
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  // Mixed spaces: the op's own check; all on the host: the backend's.
  expect_rejected(loom::ops::rgb_to_gray(host_rgb, dev_gray), "one memory space");
  expect_rejected(loom::ops::box_blur(host_gray, dev_gray, 1), "one memory space");
  expect_rejected(
      loom::ops::histogram(dev_gray, rt.tensor<std::int32_t>({256}, loom::Memory::pageable)),
      "one memory space");
  expect_rejected(
      loom::ops::histogram(host_gray, rt.tensor<std::int32_t>({256}, loom::Memory::pageable)),
      "is not on device 0");
  expect_rejected(loom::ops::rgb_to_gray(host_rgb, host_gray), "is not on device 0");
}

}  // namespace
