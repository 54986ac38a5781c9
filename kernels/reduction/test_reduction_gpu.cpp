// Reductions on the GPU against the CPU reference: every whole-array variant
// x dtype x operation x size (1 to past 2^31 elements), misaligned inputs,
// NaN, empty inputs, bit-identical repeats; segmented reductions of rows and
// columns at awkward shapes and strides; the ops through a graph on the CUDA
// backend. Outputs are poisoned first, inputs fresh and of both signs.
#include "support/gpu.hpp"

#include "cuda/stream.hpp"
#include "reduction/reduce.hpp"
#include "reduction/test_support.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace loom::kernels {
// Names the parameter in test names and failure messages.
void PrintTo(ReduceVariant variant, std::ostream* os) { *os << to_string(variant); }
}  // namespace loom::kernels

namespace {

using loom::DType;
using loom::kernels::ReduceConfig;
using loom::kernels::ReduceOp;
using loom::kernels::ReduceVariant;
using loom::kernels::Segments;
using loom::test::DeviceBuffer;

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

// An input on both sides: host bytes (for the reference) and a device copy.
struct Input {
  Input(DType t, std::size_t count, std::mt19937_64& rng)
      : dtype(t),
        n(count),
        host(loom::test::random_elements(t, count, rng)),
        device(host.size() + 16) {
    device.upload(pad(host, device.size()));
  }
  static std::vector<std::byte> pad(std::vector<std::byte> v, std::size_t size) {
    v.resize(size);
    return v;
  }
  double reference(ReduceOp op, std::size_t offset = 0) const {
    return loom::kernels::reduce_reference(
        op, host.data() + offset * loom::test::element_size(dtype), dtype, n - offset);
  }
  const std::byte* device_at(std::size_t offset) const {
    return device.data() + offset * loom::test::element_size(dtype);
  }

  DType dtype;
  std::size_t n;
  std::vector<std::byte> host;
  DeviceBuffer<std::byte> device;
};

// One reduction of n elements at x (device) into a poisoned output; the raw
// output bits, as f32 of out_dtype.
float run_reduce(ReduceOp op, const void* x, DType dtype, std::size_t n, DType out_dtype,
                 ReduceConfig config) {
  DeviceBuffer<std::byte> out(4);
  out.poison();
  DeviceBuffer<std::byte> workspace(loom::kernels::reduce_workspace_bytes(n, config));
  loom::detail::Stream stream(0, 0);
  loom::kernels::reduce(op, x, dtype, n, out.data(), out_dtype, workspace.data(), stream.view(),
                        config);
  stream.synchronize();
  const auto bytes = out.download();
  return loom::test::element_at(bytes.data(), out_dtype, 0);
}

std::uint32_t bits_of(float f) {
  std::uint32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

class ReduceGpu : public ::testing::TestWithParam<ReduceVariant> {
 protected:
  ReduceConfig config(bool deterministic = false) const {
    return ReduceConfig{GetParam(), deterministic};
  }
};

TEST_P(ReduceGpu, EveryDtypeOperationAndSizeMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  for (DType dtype : kDtypes) {
    for (std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{4097}, std::size_t{16385},
                          std::size_t{1000003}, (std::size_t{1} << 25) + 3}) {
      const Input in(dtype, n, rng);
      for (ReduceOp op : kOps) {
        const double expected = in.reference(op);
        for (DType out_dtype : {DType::f32, dtype}) {
          const float got = run_reduce(op, in.device_at(0), dtype, n, out_dtype, config());
          EXPECT_TRUE(loom::test::close_enough(op, got, expected, static_cast<std::int64_t>(n), 0.5,
                                               out_dtype))
              << to_string(GetParam()) << " " << to_string(op) << " of " << n << " "
              << to_string(dtype) << " into " << to_string(out_dtype) << ": got " << got
              << ", expected " << expected;
        }
      }
    }
  }
}

TEST_P(ReduceGpu, MisalignedInputsAndDeterministicMode) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  for (DType dtype : kDtypes) {
    for (std::size_t n : {std::size_t{5000}, std::size_t{20011}, std::size_t{1000003}}) {
      const Input in(dtype, n, rng);
      for (std::size_t offset : {std::size_t{1}, std::size_t{3}}) {
        for (ReduceOp op : kOps) {
          for (bool deterministic : {false, true}) {
            const float got = run_reduce(op, in.device_at(offset), dtype, n - offset, DType::f32,
                                         config(deterministic));
            EXPECT_TRUE(loom::test::close_enough(op, got, in.reference(op, offset),
                                                 static_cast<std::int64_t>(n), 0.5, DType::f32))
                << to_string(op) << " of " << n - offset << " " << to_string(dtype)
                << " from element " << offset << (deterministic ? " (deterministic)" : "");
          }
        }
      }
    }
  }
}

TEST_P(ReduceGpu, NanPropagatesAndEmptyInputsGiveTheIdentity) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  std::vector<float> x = loom::test::random_floats(1000003, rng);
  x[std::uniform_int_distribution<std::size_t>(0, x.size() - 1)(rng)] =
      std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer<float> dx(x.size());
  dx.upload(x);
  for (ReduceOp op : kOps) {
    EXPECT_TRUE(std::isnan(run_reduce(op, dx.data(), DType::f32, x.size(), DType::f32, config())))
        << to_string(op);
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(run_reduce(ReduceOp::sum, dx.data(), DType::f32, 0, DType::f32, config()), 0.0F);
  EXPECT_EQ(run_reduce(ReduceOp::max, dx.data(), DType::f16, 0, DType::f32, config()), -inf);
  EXPECT_EQ(run_reduce(ReduceOp::min, dx.data(), DType::bf16, 0, DType::bf16, config()), inf);
}

TEST_P(ReduceGpu, RepeatedRunsGiveTheSameBits) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Input in(dtype, (std::size_t{1} << 24) + 5, rng);
    for (bool deterministic : {false, true}) {
      const float first = run_reduce(ReduceOp::sum, in.device_at(0), dtype, in.n, DType::f32,
                                     config(deterministic));
      for (int run = 0; run < 3; ++run) {
        EXPECT_EQ(bits_of(run_reduce(ReduceOp::sum, in.device_at(0), dtype, in.n, DType::f32,
                                     config(deterministic))),
                  bits_of(first))
            << to_string(dtype) << (deterministic ? " deterministic" : " default") << ", run "
            << run;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, ReduceGpu,
                         ::testing::Values(ReduceVariant::interleaved,
                                           ReduceVariant::divergence_free, ReduceVariant::shared,
                                           ReduceVariant::coarsened, ReduceVariant::warp_shuffle),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST(ReduceGpuUnroll, EveryUnrollMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  for (DType dtype : kDtypes) {
    for (std::size_t n : {std::size_t{1000003}, (std::size_t{1} << 24) + 3}) {
      const Input in(dtype, n, rng);
      for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
        for (ReduceOp op : kOps) {
          for (int unroll : {2, 8}) {
            for (bool deterministic : {false, true}) {
              ReduceConfig config;
              config.deterministic = deterministic;
              config.unroll = unroll;
              const float got =
                  run_reduce(op, in.device_at(offset), dtype, n - offset, DType::f32, config);
              EXPECT_TRUE(loom::test::close_enough(op, got, in.reference(op, offset),
                                                   static_cast<std::int64_t>(n), 0.5, DType::f32))
                  << to_string(op) << " of " << n - offset << " " << to_string(dtype) << ", unroll "
                  << unroll << (deterministic ? " (deterministic)" : "");
            }
          }
        }
      }
    }
  }
}

// 2^31 + 37 f16 elements (4 GiB): 32-bit indexing anywhere would wrap.
TEST(ReduceGpuHuge, MoreThanTwoToThe31Elements) {
  LOOM_REQUIRE_GPU();
  const std::size_t n = (std::size_t{1} << 31) + 37;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < n * 2 + (std::size_t{1} << 30)) GTEST_SKIP() << "needs 5 GiB of free memory";
  auto rng = loom::test::random_engine();
  // Random halves of both signs in [2^-4, 1): sign, exponent and mantissa drawn directly.
  std::vector<loom::half> x(n);
  std::uint64_t state = rng();
  for (auto& h : x) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto r = static_cast<std::uint32_t>(state >> 32);
    h.bits = static_cast<std::uint16_t>((r & 0x8000U) | (0x2C00U + (r >> 20) % 0x1000U));
  }
  // The largest and smallest elements sit past 2^31.
  x[n - 2].bits = 0x3C00;  // 1.0
  x[n - 1].bits = 0xBC00;  // -1.0
  DeviceBuffer<loom::half> dx(n);
  dx.upload(x);
  for (ReduceOp op : kOps) {
    const double expected = loom::kernels::reduce_reference(op, x.data(), DType::f16, n);
    for (bool deterministic : {false, true}) {
      const float got = run_reduce(op, dx.data(), DType::f16, n, DType::f32,
                                   ReduceConfig{ReduceVariant::warp_shuffle, deterministic});
      // Mean magnitude 1 (an upper bound): a thread folds thousands of elements here.
      EXPECT_TRUE(loom::test::close_enough(op, got, expected, static_cast<std::int64_t>(n), 1.0,
                                           DType::f32))
          << to_string(op) << ": got " << got << ", expected " << expected;
    }
  }
}

// Segmented reductions into a poisoned output; the results in the
// reference's order (batch-major).
std::vector<float> run_segments(ReduceOp op, const void* x, DType dtype, const Segments& s,
                                DType out_dtype, std::int64_t out_stride) {
  const auto at = [&](std::int64_t b, std::int64_t k) {
    return b * s.out_batch_stride + k * out_stride;
  };
  const auto slots = static_cast<std::size_t>(at(s.batch - 1, s.count - 1) + 1);
  DeviceBuffer<std::byte> out(std::max<std::size_t>(slots, 1) * 4);
  out.poison();
  DeviceBuffer<std::byte> workspace(loom::kernels::reduce_segments_workspace_bytes(s));
  loom::detail::Stream stream(0, 0);
  loom::kernels::reduce_segments(op, x, dtype, s, out.data(), out_dtype, out_stride,
                                 workspace.data(), stream.view());
  stream.synchronize();
  const auto bytes = out.download();
  std::vector<float> values;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t k = 0; k < s.count; ++k) {
      values.push_back(loom::test::element_at(bytes.data(), out_dtype, at(b, k)));
    }
  }
  return values;
}

void expect_segments(ReduceOp op, const Input& in, const Segments& s, DType out_dtype,
                     std::int64_t out_stride, const std::string& what, std::size_t offset = 0) {
  const auto got = run_segments(op, in.device_at(offset), in.dtype, s, out_dtype, out_stride);
  std::vector<double> expected(static_cast<std::size_t>(s.batch * s.count));
  loom::kernels::reduce_segments_reference(
      op, in.host.data() + offset * loom::test::element_size(in.dtype), in.dtype, s,
      expected.data());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!loom::test::close_enough(op, got[i], expected[i], s.length, 0.5, out_dtype)) {
      if (bad++ < 3) {
        ADD_FAILURE() << what << " " << to_string(op) << " " << to_string(in.dtype) << " segment "
                      << i << ": got " << got[i] << ", expected " << expected[i];
      }
    }
  }
  EXPECT_EQ(bad, 0U) << what << " " << to_string(op) << " " << to_string(in.dtype);
}

TEST(ReduceSegmentsGpu, RowsAndColumnsOfAwkwardShapes) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 1}, {3, 1000003}, {4097, 31}, {1000, 1000}, {2, (1 << 20) + 7}, {(1 << 16) + 1, 5}};
  for (const auto& [rows, cols] : shapes) {
    for (DType dtype : kDtypes) {
      const Input in(dtype, static_cast<std::size_t>(rows * cols), rng);
      const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
      for (ReduceOp op : kOps) {
        expect_segments(op, in, Segments{rows, cols, cols, 1}, DType::f32, 1, "rows of " + shape);
        expect_segments(op, in, Segments{cols, rows, 1, cols}, dtype, 1, "columns of " + shape);
      }
    }
  }
}

TEST(ReduceSegmentsGpu, StridedViewsAndStridedOutputs) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const std::int64_t rows = 515;
  const std::int64_t cols = 2050;
  for (DType dtype : kDtypes) {
    const Input in(dtype, static_cast<std::size_t>(rows * cols), rng);
    for (ReduceOp op : kOps) {
      // Every second column, along rows (warp, strided lanes) and down columns.
      expect_segments(op, in, Segments{rows, cols / 2, cols, 2}, DType::f32, 3, "even columns");
      expect_segments(op, in, Segments{cols / 2, rows, 2, cols}, DType::f32, 1,
                      "down even columns");
      // Rows 2 * cols + 1 apart: each starts at another 16-byte misalignment.
      expect_segments(op, in, Segments{rows / 2 - 1, cols - 1, 2 * cols + 1, 1}, DType::bf16, 2,
                      "skewed rows");
    }
  }
}

// Batches of segments: the middle dimension of [B, S, H] tensors, and rows
// of a view whose rows do not merge with its batches.
TEST(ReduceSegmentsGpu, BatchesOfSegments) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  struct Case {
    Segments segments;
    std::int64_t out_stride;
    std::int64_t elements;
    const char* what;
  };
  const Case cases[] = {
      {Segments{67, 1001, 1, 67, 5, 1001 * 67, 67}, 1, 5 * 1001 * 67, "middle of [5, 1001, 67]"},
      {Segments{1, 3000, 1, 1, 4, 3000, 1}, 1, 4 * 3000, "middle of [4, 3000, 1]"},
      {Segments{4, 5000, 5000, 1, 3, 30000, 8}, 2, 3 * 6 * 5000,
       "rows 0-3 of each [6, 5000] of three, into a strided output"},
      {Segments{3, 100000, 1, 3, 2, 300000, 3}, 1, 2 * 100000 * 3, "middle of [2, 100000, 3]"},
      {Segments{33, 20, 1, 33, 4099, 660, 33}, 1, 4099 * 660, "middle of [4099, 20, 33]"},
      // Neighbouring segments contiguous and 16-byte aligned: 16-byte loads.
      {Segments{64, 1001, 1, 64, 5, 1001 * 64, 64}, 1, 5 * 1001 * 64 + 8,
       "middle of [5, 1001, 64]"},
      {Segments{256, 40, 1, 256, 7, 40 * 256, 512}, 2, 7 * 40 * 256 + 8,
       "middle of [7, 40, 256], into a strided output"},
  };
  for (const Case& c : cases) {
    for (DType dtype : kDtypes) {
      const Input in(dtype, static_cast<std::size_t>(c.elements), rng);
      for (ReduceOp op : kOps) {
        expect_segments(op, in, c.segments, DType::f32, c.out_stride, c.what);
        // One element on: the same segments without 16-byte alignment.
        if (c.elements > c.segments.batch * c.segments.batch_stride) {
          expect_segments(op, in, c.segments, DType::f32, c.out_stride,
                          std::string(c.what) + " from element 1", 1);
        }
      }
    }
  }
}

TEST(ReduceSegmentsGpu, RepeatedRunsGiveTheSameBits) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  const Input in(DType::f32, 3 * 1000003, rng);
  for (const Segments& s : {Segments{3, 1000003, 1000003, 1}, Segments{1000003, 3, 1, 1000003},
                            Segments{1, 3 * 1000003, 0, 1}, Segments{1000, 3000, 1, 1000}}) {
    const auto first = run_segments(ReduceOp::sum, in.device_at(0), DType::f32, s, DType::f32, 1);
    const auto second = run_segments(ReduceOp::sum, in.device_at(0), DType::f32, s, DType::f32, 1);
    ASSERT_EQ(first.size(), second.size());
    for (std::size_t i = 0; i < first.size(); ++i) {
      ASSERT_EQ(bits_of(first[i]), bits_of(second[i])) << "segment " << i << " of " << s.count;
    }
  }
}

// The ops through a graph on the CUDA backend: uploads, reductions of whole
// tensors (contiguous, strided, teaching variant, deterministic) and along
// both dimensions, downloads, then the CPU reference.
TEST(ReductionOpsCuda, ThroughAGraph) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_TRUE(rt.default_memory().is_device());
  auto rng = loom::test::random_engine();
  const std::int64_t rows = 1000;
  const std::int64_t cols = 1003;
  std::vector<float> host = loom::test::random_floats(static_cast<std::size_t>(rows * cols), rng);
  auto hx = rt.provide(host.data(), DType::f32, {rows, cols}, loom::Memory::pageable);
  auto x = rt.tensor<float>({rows, cols});
  auto wholes = rt.tensor<float>({6});
  auto row_max = rt.tensor<float>({rows});
  auto col_min = rt.tensor<float>({cols});
  std::vector<float> h_wholes(6);
  std::vector<float> h_row_max(static_cast<std::size_t>(rows));
  std::vector<float> h_col_min(static_cast<std::size_t>(cols));
  const float nan = std::numeric_limits<float>::quiet_NaN();

  loom::Graph g;
  g.copy(hx, x);
  g.add(loom::ops::fill(wholes, nan));
  g.add(loom::ops::fill(row_max, nan));
  g.add(loom::ops::fill(col_min, nan));
  g.add(loom::ops::sum(x, wholes.slice(0, 0, 1)));
  g.add(loom::ops::max(x, wholes.slice(0, 1, 2), {.deterministic = true}));
  g.add(loom::ops::min(x.transpose(0, 1), wholes.slice(0, 2, 3)));
  g.add(loom::ops::sum(x.slice(1, 0, cols, 2), wholes.slice(0, 3, 4)));  // two strided runs
  g.add(loom::ops::sum(x, wholes.slice(0, 4, 5),
                       {.variant = loom::ops::ReductionVariant::interleaved}));
  g.add(loom::ops::sum(x.slice(0, 7, 8), wholes.slice(0, 5, 6)));  // one row
  g.add(loom::ops::max(x, 1, row_max));
  g.add(loom::ops::min(x, 0, col_min));
  g.copy(wholes, rt.provide(h_wholes.data(), DType::f32, {6}, loom::Memory::pageable));
  g.copy(row_max, rt.provide(h_row_max.data(), DType::f32, {rows}, loom::Memory::pageable));
  g.copy(col_min, rt.provide(h_col_min.data(), DType::f32, {cols}, loom::Memory::pageable));
  rt.submit(g).wait();

  const auto n = rows * cols;
  double sum = 0;
  double even_sum = 0;
  double row7 = 0;
  float hi = -INFINITY;
  float lo = INFINITY;
  for (std::int64_t r = 0; r < rows; ++r) {
    float row_hi = -INFINITY;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = host[static_cast<std::size_t>(r * cols + c)];
      sum += v;
      if (c % 2 == 0) even_sum += v;
      if (r == 7) row7 += v;
      hi = std::max(hi, v);
      lo = std::min(lo, v);
      row_hi = std::max(row_hi, v);
    }
    EXPECT_EQ(h_row_max[static_cast<std::size_t>(r)], row_hi) << "row " << r;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    float col_lo = INFINITY;
    for (std::int64_t r = 0; r < rows; ++r) {
      col_lo = std::min(col_lo, host[static_cast<std::size_t>(r * cols + c)]);
    }
    EXPECT_EQ(h_col_min[static_cast<std::size_t>(c)], col_lo) << "column " << c;
  }
  EXPECT_TRUE(loom::test::close_enough(ReduceOp::sum, h_wholes[0], sum, n, 0.5, DType::f32));
  EXPECT_EQ(h_wholes[1], hi);
  EXPECT_EQ(h_wholes[2], lo);
  EXPECT_TRUE(
      loom::test::close_enough(ReduceOp::sum, h_wholes[3], even_sum, n / 2, 0.5, DType::f32));
  EXPECT_TRUE(loom::test::close_enough(ReduceOp::sum, h_wholes[4], sum, n, 0.5, DType::f32));
  EXPECT_TRUE(loom::test::close_enough(ReduceOp::sum, h_wholes[5], row7, cols, 0.5, DType::f32));
}

TEST(ReductionOpsCuda, AlongTheMiddleOfARankThreeTensor) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  const std::int64_t b = 6;
  const std::int64_t s = 5000;
  const std::int64_t h = 33;
  auto bytes = loom::test::random_elements(DType::bf16, static_cast<std::size_t>(b * s * h), rng);
  auto hx = rt.provide(bytes.data(), DType::bf16, {b, s, h}, loom::Memory::pageable);
  auto x = rt.tensor(DType::bf16, {b, s, h});
  auto sums = rt.tensor<float>({b, h});
  std::vector<float> h_sums(static_cast<std::size_t>(b * h));
  loom::Graph g;
  g.copy(hx, x);
  g.add(loom::ops::fill(sums, std::numeric_limits<float>::quiet_NaN()));
  g.add(loom::ops::sum(x, 1, sums));
  g.copy(sums, rt.provide(h_sums.data(), DType::f32, {b, h}, loom::Memory::pageable));
  rt.submit(g).wait();
  for (std::int64_t i = 0; i < b; ++i) {
    for (std::int64_t j = 0; j < h; ++j) {
      double expected = 0;
      for (std::int64_t k = 0; k < s; ++k) {
        expected += loom::test::element_at(bytes.data(), DType::bf16, (i * s + k) * h + j);
      }
      EXPECT_TRUE(loom::test::close_enough(
          ReduceOp::sum, h_sums[static_cast<std::size_t>(i * h + j)], expected, s, 0.5, DType::f32))
          << "[" << i << ", :, " << j << "]";
    }
  }
}

TEST(ReductionOpsCuda, BadInputsAreRejectedAtSubmitNamingTheTask) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  loom::Graph g;
  g.add(loom::ops::sum(rt.tensor<float>({8, 8}), rt.tensor<float>({2})), {.name = "totals"});
  try {
    (void)rt.submit(g);
    FAIL() << "a two-element output was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "totals");
    EXPECT_NE(std::string(e.what()).find("one element"), std::string::npos) << e.what();
  }
}

}  // namespace
