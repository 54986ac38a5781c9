// Softmax's own kernels (softmax_kernels.cuh) run on the CPU under the
// emulation of CUDA threads (support/emulated_cuda.hpp), clusters included:
// every variant's rows at offsets across a 16-byte pack (the peeled
// ends and the wide middle), in place or not, with x and y off by the same or
// by different amounts, against the CPU reference at small shapes, and the
// bytes around each row untouched. Timing and the memory model are not
// emulated (the GPU tests cover those at the real shapes).
#include "softmax/softmax.hpp"  // first: CUDA's headers define the qualifiers redefined below

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "softmax/test_support.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/emulated_cuda.hpp"

namespace loom::kernels::softmax_detail {
using namespace loom::emulated;  // NOLINT: the kernel's code reads CUDA's names unqualified
}  // namespace loom::kernels::softmax_detail

#include "softmax/softmax_kernels.cuh"

namespace {

namespace emu = loom::kernels::softmax_detail;
using loom::DType;
using loom::kernels::SoftmaxShape;
using loom::test::softmax::close;
using bf16_bits = std::uint16_t;

template <class T>
constexpr DType kDType = std::is_same_v<T, float> ? DType::f32 : DType::bf16;
template <class T>
constexpr int kWide = 16 / static_cast<int>(sizeof(T));

// Where a case's rows lie: each of x and y starts `offset` elements into a
// buffer that starts on a 16-byte boundary.
struct Layout {
  std::int64_t rows, cols, x_stride, y_stride, x_offset, y_offset;
  bool in_place;
};

std::string describe(const Layout& l) {
  return std::to_string(l.rows) + "x" + std::to_string(l.cols) + " strides " +
         std::to_string(l.x_stride) + "/" + std::to_string(l.y_stride) + " offsets " +
         std::to_string(l.x_offset) + "/" + std::to_string(l.y_offset) +
         (l.in_place ? " in place" : "");
}

template <class T>
T to_element(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return loom::kernels::f32_to_bf16_bits(v);
  }
}

template <class T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return loom::kernels::bf16_bits_to_f32(v);
  }
}

// Values a test puts in place of the random ones: (row, column, the random
// value drawn, the value so far) -> the value. Empty: none.
using SpecialValues = std::function<float(std::int64_t, std::int64_t, float, float)>;
SpecialValues& special_values() {
  static SpecialValues f;
  return f;
}

// special_values() = f for a scope, emptied again however the scope ends
// (a fatal assertion returns early).
class WithSpecialValues {
 public:
  explicit WithSpecialValues(SpecialValues f) { special_values() = std::move(f); }
  ~WithSpecialValues() { special_values() = {}; }
  WithSpecialValues(const WithSpecialValues&) = delete;
  WithSpecialValues& operator=(const WithSpecialValues&) = delete;
};

// Runs `kernel(x, y)` over the layout's rows (random values with a few -inf,
// the last row -inf only, then special_values()) and checks y against the
// reference, and that no element outside the rows changed.
template <class T>
void expect_reference(const char* what, const Layout& l,
                      const std::function<void(const T*, T*)>& kernel) {
  std::mt19937_64 rng(loom::test::fresh_seed());
  std::uniform_real_distribution<float> value(-8.0F, 8.0F);
  std::uniform_int_distribution<int> pick(0, 15);
  const std::int64_t y_stride = l.in_place ? l.x_stride : l.y_stride;
  const std::int64_t y_offset = l.in_place ? l.x_offset : l.y_offset;
  const auto x_count = static_cast<std::size_t>(l.x_offset + l.rows * l.x_stride + 8);
  const auto y_count = static_cast<std::size_t>(y_offset + l.rows * y_stride + 8);
  // 16-byte aligned storage; elements outside the rows hold 7 (x) or poison (y).
  std::vector<uint4> x_store(x_count * sizeof(T) / 16 + 1);
  std::vector<uint4> y_store(y_count * sizeof(T) / 16 + 1);
  auto* x_all = reinterpret_cast<T*>(x_store.data());
  auto* y_all = reinterpret_cast<T*>(y_store.data());
  for (std::size_t i = 0; i < x_count; ++i) x_all[i] = to_element<T>(7.0F);
  std::memset(y_store.data(), 0xFF, y_store.size() * sizeof(uint4));
  T* x = x_all + l.x_offset;
  for (std::int64_t r = 0; r < l.rows; ++r) {
    for (std::int64_t j = 0; j < l.cols; ++j) {
      const float drawn = value(rng);
      float v = drawn;
      if (pick(rng) == 0 || (r == l.rows - 1 && l.rows > 1))
        v = -std::numeric_limits<float>::infinity();
      if (special_values()) v = special_values()(r, j, drawn, v);
      x[r * l.x_stride + j] = to_element<T>(v);
    }
  }
  const std::vector<uint4> x_before = x_store;
  const SoftmaxShape shape{l.rows, l.cols, l.x_stride, y_stride};
  std::vector<T> want(static_cast<std::size_t>(l.rows * y_stride));
  loom::kernels::softmax_reference(x, want.data(), kDType<T>, shape);

  T* y = l.in_place ? x : y_all + l.y_offset;
  kernel(x, y);

  const auto* before = reinterpret_cast<const T*>(x_before.data());
  const T* y_base = l.in_place ? x_all : y_all;
  const std::size_t y_total = l.in_place ? x_count : y_count;
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < y_total; ++i) {
    const auto rel = static_cast<std::int64_t>(i) - y_offset;
    const std::int64_t r = rel >= 0 ? rel / y_stride : -1;
    const std::int64_t j = rel >= 0 ? rel % y_stride : -1;
    bool ok = false;
    if (r >= 0 && r < l.rows && j < l.cols) {
      ok = close(to_float(y_base[i]), to_float(want[static_cast<std::size_t>(r * y_stride + j)]),
                 kDType<T>);
    } else if (l.in_place) {
      ok = std::memcmp(&y_base[i], &before[i], sizeof(T)) == 0;
    } else {
      T poison;
      std::memset(&poison, 0xFF, sizeof(T));
      ok = std::memcmp(&y_base[i], &poison, sizeof(T)) == 0;
    }
    if (!ok && bad++ == 0) {
      first = "element " + std::to_string(i) + " (row " + std::to_string(r) + ", column " +
              std::to_string(j) + ") got " + std::to_string(to_float(y_base[i]));
    }
  }
  if (!l.in_place) {
    EXPECT_EQ(std::memcmp(x_store.data(), x_before.data(), x_store.size() * sizeof(uint4)), 0)
        << what << " " << describe(l) << ": x changed";
  }
  EXPECT_EQ(bad, 0U) << what << " " << std::string(loom::to_string(kDType<T>)) << " " << describe(l)
                     << ": first " << first;
}

// The layouts of one row length: contiguous and padded rows, at every
// offset of x and y alike, in place, and x and y off by different amounts
// (which the host runs with VEC = 1).
std::vector<Layout> layouts(std::int64_t rows, std::int64_t cols, int wide) {
  std::vector<Layout> all;
  // Offsets 0, 1, the middle and the last of a pack (every one for f32).
  std::vector<std::int64_t> offsets{0, 1, wide / 2, wide - 1};
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  for (std::int64_t o : offsets) {
    all.push_back({rows, cols, cols, cols, o, o, false});
    all.push_back({rows, cols, cols + 3, cols + 3, o, o, false});
  }
  all.push_back({rows, cols, cols + 1, cols + 1, 1, 1, true});
  return all;
}

bool lines_up(const Layout& l, int wide) {
  return l.in_place ||
         ((l.x_offset - l.y_offset) % wide == 0 && (l.x_stride - l.y_stride) % wide == 0);
}

// As the host sizes a row: a pack more where some row starts off a boundary.
std::int64_t span_of(const Layout& l, int vec) {
  const bool aligned = l.x_offset % vec == 0 && l.x_stride % vec == 0;
  return vec > 1 && !aligned ? l.cols + vec - 1 : l.cols;
}

template <class T, int VEC>
void warp_rows(const Layout& l) {
  constexpr int kN = 8;  // 256 elements a warp
  ASSERT_LE(span_of(l, VEC), kN * emu::kWarp);
  const dim3 grid(
      static_cast<unsigned>((l.rows + emu::kWarpRowsPerBlock - 1) / emu::kWarpRowsPerBlock));
  expect_reference<T>("warp row", l, [&](const T* x, T* y) {
    loom::emulated::run_grid(grid, dim3(emu::kWarp * emu::kWarpRowsPerBlock), [&] {
      emu::softmax_warp_row<T, kN, VEC>(x, y, l.rows, l.cols, l.x_stride,
                                        l.in_place ? l.x_stride : l.y_stride);
    });
  });
}

// bf16 in packs of eight: the kernels can hold such rows packed.
template <class T, int VEC>
constexpr bool kPackable = std::is_same_v<T, bf16_bits>&& VEC == 8;

template <class T, int VEC>
void block_rows(const Layout& l) {
  constexpr int kN = 8;
  constexpr unsigned kThreads = 64;  // 512 elements a block, two warps
  ASSERT_LE(span_of(l, VEC), kN * kThreads);
  expect_reference<T>("block row", l, [&](const T* x, T* y) {
    loom::emulated::run_grid(dim3(static_cast<unsigned>(l.rows)), dim3(kThreads), [&] {
      emu::softmax_block_row<T, kN, VEC>(x, y, l.cols, l.x_stride,
                                         l.in_place ? l.x_stride : l.y_stride);
    });
  });
  if constexpr (kPackable<T, VEC>) {
    // Twice the elements a thread, held as bf16 pairs, on half the threads.
    expect_reference<T>("packed block row", l, [&](const T* x, T* y) {
      loom::emulated::run_grid(dim3(static_cast<unsigned>(l.rows)), dim3(kThreads / 2), [&] {
        emu::softmax_block_row<T, 2 * kN, VEC, true>(x, y, l.cols, l.x_stride,
                                                     l.in_place ? l.x_stride : l.y_stride);
      });
    });
  }
}

template <class T, int VEC>
void cluster_rows(const Layout& l) {
  constexpr int kN = 32;
  constexpr unsigned kThreads = 32;  // 1024 elements a block (block rows cover several warps)
  const std::int64_t slice = emu::cluster_slice(span_of(l, VEC), VEC);
  ASSERT_LE(slice, kN * kThreads);
  expect_reference<T>("cluster row", l, [&](const T* x, T* y) {
    loom::emulated::run_clusters(dim3(static_cast<unsigned>(l.rows * emu::kClusterBlocks)),
                                 dim3(kThreads), emu::kClusterBlocks, [&] {
                                   emu::softmax_cluster_row<T, kN, VEC>(
                                       x, y, l.cols, slice, l.x_stride,
                                       l.in_place ? l.x_stride : l.y_stride);
                                 });
  });
  if constexpr (kPackable<T, VEC>) {
    // Twice the slice a thread could hold: the same slice, fewer packs each.
    expect_reference<T>("packed cluster row", l, [&](const T* x, T* y) {
      loom::emulated::run_clusters(dim3(static_cast<unsigned>(l.rows * emu::kClusterBlocks)),
                                   dim3(kThreads), emu::kClusterBlocks, [&] {
                                     emu::softmax_cluster_row<T, 2 * kN, VEC, true>(
                                         x, y, l.cols, slice, l.x_stride,
                                         l.in_place ? l.x_stride : l.y_stride);
                                   });
    });
  }
}

template <class T, int VEC>
void streamed_rows(const Layout& l) {
  const std::int64_t y_stride = l.in_place ? l.x_stride : l.y_stride;
  expect_reference<T>("naive", l, [&](const T* x, T* y) {
    loom::emulated::run_grid(dim3(static_cast<unsigned>(l.rows)), dim3(64), [&] {
      emu::softmax_naive<T, VEC>(x, y, l.cols, l.x_stride, y_stride);
    });
  });
  expect_reference<T>("online", l, [&](const T* x, T* y) {
    loom::emulated::run_grid(dim3(static_cast<unsigned>(l.rows)), dim3(64), [&] {
      emu::softmax_online<T, VEC>(x, y, l.cols, l.x_stride, y_stride);
    });
  });
}

template <class T, int VEC>
void split_rows(const Layout& l) {
  const std::int64_t y_stride = l.in_place ? l.x_stride : l.y_stride;
  const SoftmaxShape shape{l.rows, l.cols, l.x_stride, y_stride};
  const std::int64_t chunks = emu::split_chunks(shape);
  std::vector<emu::MaxSum> partial(static_cast<std::size_t>(l.rows * chunks));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(l.rows));
  // Fewer threads than the host launches (the kernels stride by blockDim):
  // each thread then walks more of its chunk.
  const dim3 block(64);
  expect_reference<T>("split", l, [&](const T* x, T* y) {
    loom::emulated::run_grid(grid, block, [&] {
      emu::softmax_split_partial<T, VEC>(x, partial.data(), l.cols, l.x_stride);
    });
    loom::emulated::run_grid(grid, block, [&] {
      emu::softmax_split_normalize<T, VEC>(x, y, partial.data(), l.cols, l.x_stride, y_stride);
    });
  });
}

// Each layout of `cols` through `run` with the wide packs where x and y
// line up, and one element at a time always.
template <class T, template <class, int> class Run>
void every_layout(std::int64_t rows, std::int64_t cols) {
  auto all = layouts(rows, cols, kWide<T>);
  all.push_back({rows, cols, cols + 2, cols + 1, 1, 2, false});  // x and y off by different amounts
  for (const auto& l : all) {
    if (lines_up(l, kWide<T>)) Run<T, kWide<T>>::run(l);
    Run<T, 1>::run(l);
  }
}

#define LOOM_RUNNER(name, fn)                           \
  template <class T, int VEC>                           \
  struct name {                                         \
    static void run(const Layout& l) { fn<T, VEC>(l); } \
  };
LOOM_RUNNER(WarpRows, warp_rows)
LOOM_RUNNER(BlockRows, block_rows)
LOOM_RUNNER(ClusterRows, cluster_rows)
LOOM_RUNNER(StreamedRows, streamed_rows)
LOOM_RUNNER(SplitRows, split_rows)
#undef LOOM_RUNNER

template <class T>
class SoftmaxEmulated : public ::testing::Test {};
using Types = ::testing::Types<float, bf16_bits>;
TYPED_TEST_SUITE(SoftmaxEmulated, Types);

TYPED_TEST(SoftmaxEmulated, WarpRowsAtOffsetsAcrossAPack) {
  for (std::int64_t cols : {1, 5, 33, 248}) every_layout<TypeParam, WarpRows>(5, cols);
}

TYPED_TEST(SoftmaxEmulated, BlockRowsAtOffsetsAcrossAPack) {
  for (std::int64_t cols : {300, 504}) every_layout<TypeParam, BlockRows>(3, cols);
}

TYPED_TEST(SoftmaxEmulated, ClusterRowsAtOffsetsAcrossAPack) {
  // Slices of one pack, and slices of many packs a thread; at 9 elements
  // some blocks hold none.
  for (std::int64_t cols : {9, 7000}) every_layout<TypeParam, ClusterRows>(2, cols);
}

// Rows whose first part (a cluster's first block, a split's first chunk, a
// thread's first packs) holds no value above -inf but a NaN, and other
// special rows: NaN or +inf anywhere makes the row NaN; a row of -inf but
// one part finite is that part's softmax.
TYPED_TEST(SoftmaxEmulated, NaNAndInfinitiesInEveryRowPath) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr std::int64_t kCols = 7000;
  // A cluster block's whole slice (about 880 elements), and the first packs
  // of the streaming and split kernels' threads.
  const std::int64_t first = emu::cluster_slice(kCols, kWide<TypeParam>);
  const WithSpecialValues special([first](std::int64_t r, std::int64_t j, float drawn, float v) {
    switch (r) {
      case 0: return j < first ? kNaN : drawn;                       // all NaN first
      case 1: return j < first ? (j == 300 ? kNaN : -kInf) : drawn;  // -inf and one NaN first
      case 2: return j == 3 * kCols / 8 + 5 ? kInf : drawn;          // +inf in a later part
      case 3: return j >= 5 * kCols / 8 && j < 5 * kCols / 8 + 400 ? drawn : -kInf;  // one part
      default: return v;
    }
  });
  const Layout l{5, kCols, kCols, kCols, 0, 0, false};
  ClusterRows<TypeParam, kWide<TypeParam>>::run(l);
  StreamedRows<TypeParam, kWide<TypeParam>>::run(l);
  SplitRows<TypeParam, kWide<TypeParam>>::run(
      {5, 2 * emu::kChunk + 11, 2 * emu::kChunk + 11, 2 * emu::kChunk + 11, 0, 0, false});
}

// Outputs below the smallest normal float (e^-88 .. e^-100 of the row's
// maximum) are kept in every row path: the exponentials flush subnormal
// results (the emulation as the instruction), and their bias must make up
// for it.
TYPED_TEST(SoftmaxEmulated, SubnormalOutputsAreKeptInEveryRowPath) {
  std::mt19937_64 rng(loom::test::fresh_seed());
  std::uniform_real_distribution<float> gap(88.0F, 100.0F);
  const WithSpecialValues special([&](std::int64_t, std::int64_t j, float, float v) {
    if (j == 2) return 10.0F;
    return j % 5 == 1 ? 10.0F - gap(rng) : v;
  });
  for (std::int64_t cols : {std::int64_t{33}, std::int64_t{248}}) {
    WarpRows<TypeParam, kWide<TypeParam>>::run({3, cols, cols, cols, 0, 0, false});
  }
  BlockRows<TypeParam, kWide<TypeParam>>::run({2, 504, 504, 504, 0, 0, false});
  ClusterRows<TypeParam, kWide<TypeParam>>::run({2, 7000, 7000, 7000, 0, 0, false});
  StreamedRows<TypeParam, kWide<TypeParam>>::run({2, 1003, 1003, 1003, 0, 0, false});
  SplitRows<TypeParam, kWide<TypeParam>>::run(
      {2, 2 * emu::kChunk + 11, 2 * emu::kChunk + 11, 2 * emu::kChunk + 11, 0, 0, false});
}

TYPED_TEST(SoftmaxEmulated, NaiveAndOnlineRowsAtOffsetsAcrossAPack) {
  for (std::int64_t cols : {3, 1003}) every_layout<TypeParam, StreamedRows>(3, cols);
}

TYPED_TEST(SoftmaxEmulated, SplitRowsAtOffsetsAcrossAPack) {
  // Three chunks, the last a partial one, whatever the shift.
  every_layout<TypeParam, SplitRows>(2, 2 * emu::kChunk + 11);
}

}  // namespace
