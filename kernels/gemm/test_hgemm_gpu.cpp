// bf16/f16 GEMM on the GPU (hgemm.hpp) against its CPU reference: every
// variant, every operand layout, tails in M, N and K, padded and misaligned
// leading dimensions, batches with a shared operand, the epilogue with C in
// the operands' type or f32, C poisoned with NaN where beta = 0; large
// products of the wgmma kernel against the simple kernel and exact spot
// checks; and loom::ops::matmul on bf16 tensors through a graph, eager and
// compiled (through wgmma too: captured, bindings copied), against the CPU
// backend. The wgmma tests skip on a device other than compute capability
// 9.0.
#include "support/gpu.hpp"

#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/ops/gemm.hpp>
#include <loom/runtime.hpp>

#include "common/convert.hpp"
#include "cuda/check.hpp"
#include "cuda/stream.hpp"
#include "gemm/hgemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::kernels::BatchedMatrix;
using loom::kernels::HgemmArgs;
using loom::kernels::HgemmVariant;
using loom::kernels::SgemmActivation;

enum class Order { row_major, col_major };

// wgmma runs on compute capability 9.0 only (and where the library was
// built for sm_90a): elsewhere its tests skip, saying why.
#define LOOM_REQUIRE_WGMMA()                                                            \
  do {                                                                                  \
    LOOM_REQUIRE_GPU();                                                                 \
    if (!loom::kernels::hgemm_wgmma_available()) {                                      \
      GTEST_SKIP() << "hgemm's wgmma variant needs a device of compute capability 9.0 " \
                      "(H100/H200) and a library built for sm_90a";                     \
    }                                                                                   \
  } while (0)

float widen(DType d, const unsigned char* p) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return d == DType::bf16 ? loom::kernels::bf16_bits_to_f32(bits)
                          : loom::kernels::f16_bits_to_f32(bits);
}

void narrow(DType d, unsigned char* p, float v) {
  if (d == DType::f32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const std::uint16_t bits =
      d == DType::bf16 ? loom::kernels::f32_to_bf16_bits(v) : loom::kernels::f32_to_f16_bits(v);
  std::memcpy(p, &bits, 2);
}

// A batch of rows x cols matrices in `order`, `pad` spare elements a line
// (after rounding the line up to 8 elements where round_ld), `offset`
// elements before the first (misaligning it), on the host and the device. A
// batch stride of 0 shares one matrix.
struct Matrix {
  DType dtype;
  std::int64_t rows, cols, batch;
  Order order;
  std::int64_t ld, batch_stride, offset;
  std::vector<unsigned char> host;
  loom::test::DeviceBuffer<unsigned char> device;

  Matrix(DType d, std::int64_t r, std::int64_t c, std::int64_t b, Order o, std::int64_t pad,
         std::int64_t off, bool shared = false, bool round_ld = false)
      : dtype(d),
        rows(r),
        cols(c),
        batch(b),
        order(o),
        ld(line(o == Order::row_major ? c : r, round_ld) + pad),
        batch_stride(shared ? 0 : ld * (o == Order::row_major ? r : c)),
        offset(off),
        host(bytes()),
        device(host.size()) {}

  static std::int64_t line(std::int64_t n, bool round_ld) { return round_ld ? (n + 7) / 8 * 8 : n; }
  std::size_t element_size() const { return loom::bits_of(dtype) / 8; }
  std::size_t bytes() const {
    const std::int64_t entries = batch_stride == 0 ? 1 : batch;
    return static_cast<std::size_t>(offset +
                                    entries * ld * (order == Order::row_major ? rows : cols)) *
           element_size();
  }
  std::int64_t index(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return offset + b * batch_stride + (order == Order::row_major ? i * ld + j : j * ld + i);
  }
  float at(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return widen(dtype, host.data() + index(b, i, j) * element_size());
  }
  void fill_random(std::mt19937_64& rng) {
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    for (std::size_t e = 0; e < host.size() / element_size(); ++e) {
      narrow(dtype, host.data() + e * element_size(), dist(rng));
    }
  }
  void poison() { std::fill(host.begin(), host.end(), 0xFF); }  // NaN in every float type
  void upload() { device.upload(host); }
  void download() { host = device.download(); }
  BatchedMatrix on(bool device_side) {
    const unsigned char* base = device_side ? device.data() : host.data();
    return {base + offset * element_size(), order == Order::row_major ? ld : 1,
            order == Order::row_major ? 1 : ld, batch_stride, dtype};
  }
};

struct Case {
  std::int64_t m, n, k, batch = 1;
  Order a = Order::row_major, b = Order::row_major, c = Order::row_major;
  std::int64_t pad = 0, offset = 0;
  float alpha = 1.0F, beta = 0.0F;
  DType c_dtype = DType::bf16;  // bf16 here means "the operands' type"
  int bias = 0;                 // 0 none, 1 f32 a column value (n), 2 C's type a row value (m)
  SgemmActivation activation = SgemmActivation::none;
  bool shared_b = false;
  bool round_ld = false;      // every leading dimension rounded up to 8 elements (before pad)
  std::int64_t c_offset = 0;  // more elements before C's first (misaligning C alone)
};

std::string describe(const Case& t, DType in, HgemmVariant v) {
  const auto order = [](Order o) { return o == Order::row_major ? "row" : "col"; };
  return std::string(to_string(v)) + " " + std::string(loom::to_string(in)) + " " +
         std::to_string(t.batch) + "x" + std::to_string(t.m) + "x" + std::to_string(t.n) + "x" +
         std::to_string(t.k) + " A " + order(t.a) + " B " + order(t.b) + " C " + order(t.c) + " " +
         std::string(loom::to_string(t.c_dtype)) + " pad " + std::to_string(t.pad) + " offset " +
         std::to_string(t.offset) + " beta " + std::to_string(t.beta) + " bias " +
         std::to_string(t.bias) + " act " + std::to_string(static_cast<int>(t.activation)) +
         (t.shared_b ? " shared B" : "") + (t.round_ld ? " ld rounded to 8" : "") +
         (t.c_offset != 0 ? " C offset " + std::to_string(t.c_offset) : "");
}

// Runs case t on the GPU and on the CPU reference; returns "" or the first
// mismatch. The tolerance scales with each element's magnitude
// |alpha| sum |a||b| + |beta c| + |bias|: 1e-2 of it for bf16, 5e-3 for f16,
// 1e-5 sqrt(K) for f32 results.
std::string run_case(Case t, DType in, HgemmVariant variant, bool* took_mma = nullptr) {
  if (t.c_dtype != DType::f32) t.c_dtype = in;
  auto rng = loom::test::random_engine();
  Matrix a(in, t.m, t.k, t.batch, t.a, t.pad, t.offset, false, t.round_ld);
  Matrix b(in, t.k, t.n, t.batch, t.b, t.pad, t.offset, t.shared_b, t.round_ld);
  Matrix c(t.c_dtype, t.m, t.n, t.batch, t.c, t.pad, t.offset + t.c_offset, false, t.round_ld);
  const DType bias_dtype = t.bias == 1 ? DType::f32 : t.c_dtype;
  Matrix bias(bias_dtype, t.bias == 2 ? t.m : 1, t.bias == 2 ? 1 : t.n, 1, Order::row_major, 0, 0);
  a.fill_random(rng);
  b.fill_random(rng);
  bias.fill_random(rng);
  if (t.beta == 0.0F) {
    c.poison();
  } else {
    c.fill_random(rng);
  }
  Matrix expected(t.c_dtype, t.m, t.n, t.batch, t.c, t.pad, t.offset + t.c_offset, false,
                  t.round_ld);
  expected.host = c.host;
  a.upload();
  b.upload();
  c.upload();
  bias.upload();
  const auto args = [&](bool device_side) {
    HgemmArgs p;
    p.m = t.m;
    p.n = t.n;
    p.k = t.k;
    p.batch = t.batch;
    p.alpha = t.alpha;
    p.beta = t.beta;
    p.a = a.on(device_side);
    p.b = b.on(device_side);
    p.c = (device_side ? c : expected).on(device_side);
    if (t.bias != 0) {
      p.bias = bias.on(device_side);
      // A value a column: row stride 0; a value a row: column stride 0.
      if (t.bias == 1) {
        p.bias.row_stride = 0;
      } else {
        p.bias.col_stride = 0;
      }
      p.bias.batch_stride = 0;
    }
    p.activation = t.activation;
    return p;
  };
  const HgemmArgs gpu = args(true);
  if (took_mma != nullptr) *took_mma = loom::kernels::hgemm_mma_sync_fits(gpu);
  loom::detail::Stream stream(0, 0);
  try {
    loom::kernels::hgemm(gpu, stream.view(), variant);
  } catch (const std::exception& e) {
    return describe(t, in, variant) + ": threw " + e.what();
  }
  stream.synchronize();
  c.download();
  loom::kernels::hgemm_reference(args(false));
  const double rel = t.c_dtype == DType::bf16  ? 1e-2
                     : t.c_dtype == DType::f16 ? 5e-3
                                               : 1e-5 * std::sqrt(static_cast<double>(t.k + 1));
  for (std::int64_t e = 0; e < t.batch; ++e) {
    for (std::int64_t i = 0; i < t.m; ++i) {
      for (std::int64_t j = 0; j < t.n; ++j) {
        double magnitude = 0.0;
        for (std::int64_t kk = 0; kk < t.k; ++kk) {
          magnitude += std::fabs(a.at(e, i, kk) * b.at(t.shared_b ? 0 : e, kk, j));
        }
        magnitude = std::fabs(t.alpha) * magnitude + 1e-3;
        if (t.beta != 0.0F) magnitude += std::fabs(t.beta * expected.at(e, i, j));
        if (t.bias != 0) magnitude += std::fabs(t.bias == 1 ? bias.at(0, 0, j) : bias.at(0, i, 0));
        const float want = expected.at(e, i, j);
        const float got = c.at(e, i, j);
        if (!(std::fabs(got - want) <= rel * magnitude)) {
          return describe(t, in, variant) + ": C[" + std::to_string(e) + "][" + std::to_string(i) +
                 "][" + std::to_string(j) + "] = " + std::to_string(got) + ", want " +
                 std::to_string(want);
        }
      }
    }
  }
  return "";
}

class HgemmGpu : public ::testing::TestWithParam<DType> {};

TEST_P(HgemmGpu, EveryLayoutWithTailsInBothVariants) {
  LOOM_REQUIRE_GPU();
  const Case shapes[] = {{.m = 128, .n = 128, .k = 64},  {.m = 136, .n = 72, .k = 40},
                         {.m = 256, .n = 200, .k = 264}, {.m = 8, .n = 8, .k = 8},
                         {.m = 1000, .n = 24, .k = 520}, {.m = 131, .n = 67, .k = 41}};
  for (const Case& shape : shapes) {
    for (Order a : {Order::row_major, Order::col_major}) {
      for (Order b : {Order::row_major, Order::col_major}) {
        for (HgemmVariant v : {HgemmVariant::automatic, HgemmVariant::simple}) {
          Case t = shape;
          t.a = a;
          t.b = b;
          EXPECT_EQ(run_case(t, GetParam(), v), "");
        }
      }
    }
  }
}

TEST_P(HgemmGpu, AlignedShapesTakeMmaSyncAndOthersTheSimpleKernel) {
  LOOM_REQUIRE_GPU();
  bool mma = false;
  EXPECT_EQ(run_case({.m = 136, .n = 72, .k = 40}, GetParam(), HgemmVariant::automatic, &mma), "");
  EXPECT_TRUE(mma);
  EXPECT_EQ(run_case({.m = 136, .n = 72, .k = 41}, GetParam(), HgemmVariant::automatic, &mma), "");
  EXPECT_FALSE(mma) << "a K of 41 leaves row-major A's rows unaligned";
  EXPECT_EQ(
      run_case({.m = 64, .n = 64, .k = 64, .pad = 8}, GetParam(), HgemmVariant::mma_sync, &mma),
      "");
  EXPECT_TRUE(mma) << "a leading dimension padded by 8 keeps 16-byte rows";
  EXPECT_EQ(
      run_case({.m = 64, .n = 64, .k = 64, .pad = 3}, GetParam(), HgemmVariant::automatic, &mma),
      "");
  EXPECT_FALSE(mma);
  EXPECT_EQ(
      run_case({.m = 64, .n = 64, .k = 64, .offset = 1}, GetParam(), HgemmVariant::automatic, &mma),
      "");
  EXPECT_FALSE(mma) << "data one element off 16 bytes";
}

TEST_P(HgemmGpu, TheEpilogueWithCInEitherType) {
  LOOM_REQUIRE_GPU();
  for (DType c_dtype : {DType::bf16, DType::f32}) {
    for (int bias : {0, 1, 2}) {
      for (SgemmActivation act :
           {SgemmActivation::none, SgemmActivation::relu, SgemmActivation::gelu_tanh}) {
        Case t{.m = 200, .n = 136, .k = 72, .alpha = 0.5F, .beta = 0.25F};
        t.c_dtype = c_dtype;
        t.bias = bias;
        t.activation = act;
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::automatic), "");
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::simple), "");
      }
    }
  }
  Case col_c{.m = 136, .n = 200, .k = 64, .c = Order::col_major, .beta = 0.0F};
  EXPECT_EQ(run_case(col_c, GetParam(), HgemmVariant::automatic), "");
  col_c.c_dtype = DType::f32;
  EXPECT_EQ(run_case(col_c, GetParam(), HgemmVariant::automatic), "");
}

TEST_P(HgemmGpu, BatchesWithASharedOperand) {
  LOOM_REQUIRE_GPU();
  for (bool shared : {false, true}) {
    for (Order a : {Order::row_major, Order::col_major}) {
      Case t{.m = 72, .n = 136, .k = 96, .batch = 3, .a = a, .shared_b = shared};
      EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::automatic), "");
      EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::simple), "");
    }
  }
}

TEST_P(HgemmGpu, LargeSquare) {
  LOOM_REQUIRE_GPU();
  EXPECT_EQ(run_case({.m = 1024, .n = 1024, .k = 1024}, GetParam(), HgemmVariant::mma_sync), "");
  EXPECT_EQ(run_case({.m = 512, .n = 768, .k = 1024, .a = Order::col_major, .b = Order::col_major},
                     GetParam(), HgemmVariant::mma_sync),
            "");
}

// --- wgmma -----------------------------------------------------------------

// Shapes for wgmma: whole tiles, tails in M, N and K (K below a k tile, and
// odd extents with leading dimensions rounded up to 8 elements, which TMA
// needs), tiny and tall.
const Case kWgmmaShapes[] = {{.m = 128, .n = 256, .k = 64},
                             {.m = 256, .n = 512, .k = 192},
                             {.m = 136, .n = 72, .k = 40},
                             {.m = 256, .n = 200, .k = 264},
                             {.m = 8, .n = 8, .k = 8},
                             {.m = 1000, .n = 24, .k = 520},
                             {.m = 200, .n = 264, .k = 8},
                             {.m = 131, .n = 67, .k = 41, .round_ld = true},
                             {.m = 1, .n = 1, .k = 1, .round_ld = true},
                             {.m = 300, .n = 257, .k = 1001, .round_ld = true},
                             {.m = 72, .n = 520, .k = 136, .pad = 8}};

TEST_P(HgemmGpu, WgmmaEveryLayoutWithTails) {
  LOOM_REQUIRE_WGMMA();
  for (const Case& shape : kWgmmaShapes) {
    for (Order a : {Order::row_major, Order::col_major}) {
      for (Order b : {Order::row_major, Order::col_major}) {
        Case t = shape;
        t.a = a;
        t.b = b;
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::wgmma), "");
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::wgmma_cluster), "");
      }
    }
  }
}

// What wgmma takes and refuses: an explicit request it cannot take throws
// InvalidArgument (run_case returns the message), automatic falls back.
TEST_P(HgemmGpu, WgmmaFitsAndRefusals) {
  LOOM_REQUIRE_WGMMA();
  EXPECT_EQ(run_case({.m = 64, .n = 64, .k = 64, .pad = 8}, GetParam(), HgemmVariant::wgmma), "");
  for (const Case& refused : {Case{.m = 64, .n = 64, .k = 41},            // A's rows 82 bytes apart
                              Case{.m = 64, .n = 64, .k = 64, .pad = 3},  // leading dimensions
                              Case{.m = 64, .n = 64, .k = 64, .offset = 1}}) {  // data unaligned
    const std::string got = run_case(refused, GetParam(), HgemmVariant::wgmma);
    EXPECT_NE(got.find("threw"), std::string::npos) << got;
    EXPECT_NE(got.find("wgmma"), std::string::npos) << got;
    EXPECT_EQ(run_case(refused, GetParam(), HgemmVariant::automatic), "");
  }
}

TEST_P(HgemmGpu, WgmmaEpilogueWithCInEitherType) {
  LOOM_REQUIRE_WGMMA();
  for (DType c_dtype : {DType::bf16, DType::f32}) {
    for (int bias : {0, 1, 2}) {
      for (SgemmActivation act :
           {SgemmActivation::none, SgemmActivation::relu, SgemmActivation::gelu_tanh}) {
        for (float beta : {0.0F, 0.25F}) {
          Case t{.m = 200, .n = 264, .k = 72, .alpha = 0.5F, .beta = beta};
          t.c_dtype = c_dtype;
          t.bias = bias;
          t.activation = act;
          EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::wgmma), "");
        }
      }
    }
  }
  // C column-major, C misaligned by one element (no pair stores), C with an
  // odd leading dimension; each with the plain epilogue and the full one.
  for (float beta : {0.0F, 0.25F}) {
    for (DType c_dtype : {DType::bf16, DType::f32}) {
      Case col_c{.m = 136, .n = 200, .k = 64, .c = Order::col_major, .alpha = 2.0F, .beta = beta};
      col_c.c_dtype = c_dtype;
      EXPECT_EQ(run_case(col_c, GetParam(), HgemmVariant::wgmma), "");
      Case odd_c{.m = 136, .n = 200, .k = 64, .alpha = 2.0F, .beta = beta, .c_offset = 1};
      odd_c.c_dtype = c_dtype;
      EXPECT_EQ(run_case(odd_c, GetParam(), HgemmVariant::wgmma), "");
      Case odd_n{.m = 136, .n = 201, .k = 64, .alpha = 2.0F, .beta = beta, .round_ld = true};
      odd_n.c_dtype = c_dtype;
      EXPECT_EQ(run_case(odd_n, GetParam(), HgemmVariant::wgmma), "");
    }
  }
}

TEST_P(HgemmGpu, WgmmaBatchesWithASharedOperand) {
  LOOM_REQUIRE_WGMMA();
  for (bool shared : {false, true}) {
    for (Order a : {Order::row_major, Order::col_major}) {
      for (Order b : {Order::row_major, Order::col_major}) {
        Case t{.m = 200, .n = 264, .k = 96, .batch = 3, .a = a, .b = b, .shared_b = shared};
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::wgmma), "");
        t.batch = 5;
        t.m = 72;
        t.n = 40;
        t.beta = 0.5F;
        t.bias = 1;
        EXPECT_EQ(run_case(t, GetParam(), HgemmVariant::wgmma), "");
      }
    }
  }
}

// A large product into f32 C: wgmma against the simple kernel over every
// element (the same f32 accumulation in another order: 1e-3 relative), and
// both against exact double sums at a few hundred places. Returns "" or the
// first mismatch.
// `captured`: the product is captured into a CUDA graph (as a compiled
// graph captures a launch it cannot add as a node), checked to hold one
// kernel node launched in clusters of `cluster` blocks, and replayed.
std::string run_large(DType in, std::int64_t m, std::int64_t n, std::int64_t k, Order oa, Order ob,
                      HgemmVariant variant = HgemmVariant::wgmma, bool captured = false,
                      unsigned cluster = 0) {
  auto rng = loom::test::random_engine();
  Matrix a(in, m, k, 1, oa, 0, 0);
  Matrix b(in, k, n, 1, ob, 0, 0);
  Matrix c(DType::f32, m, n, 1, Order::row_major, 0, 0);
  Matrix c_ref(DType::f32, m, n, 1, Order::row_major, 0, 0);
  a.fill_random(rng);
  b.fill_random(rng);
  c.poison();
  c_ref.poison();
  a.upload();
  b.upload();
  c.upload();
  c_ref.upload();
  HgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = a.on(true);
  p.b = b.on(true);
  p.c = c.on(true);
  HgemmArgs ref = p;
  ref.c = c_ref.on(true);
  const std::string what = std::string(loom::to_string(in)) + " " + std::to_string(m) + "x" +
                           std::to_string(n) + "x" + std::to_string(k) + " A " +
                           (oa == Order::row_major ? "row" : "col") + " B " +
                           (ob == Order::row_major ? "row" : "col");
  loom::detail::Stream stream(0, 0);
  try {
    if (captured) {
      const cudaStream_t s = stream.view().native();
      cudaGraph_t graph = nullptr;
      LOOM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      loom::kernels::hgemm(p, stream.view(), variant);
      LOOM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
      std::size_t count = 0;
      LOOM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
      std::vector<cudaGraphNode_t> nodes(count);
      LOOM_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
      std::string shape;
      for (auto node : nodes) {
        cudaGraphNodeType type{};
        LOOM_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
        if (type != cudaGraphNodeTypeKernel) continue;
        cudaLaunchAttributeValue value{};
        LOOM_CUDA_CHECK(
            cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeClusterDimension, &value));
        shape += std::to_string(value.clusterDim.x) + "x" + std::to_string(value.clusterDim.y) +
                 "x" + std::to_string(value.clusterDim.z) + " ";
      }
      const std::string want = std::to_string(cluster) + "x1x1 ";
      cudaGraphExec_t exec = nullptr;
      LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      LOOM_CUDA_CHECK(cudaGraphLaunch(exec, s));
      LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
      LOOM_CUDA_CHECK(cudaGraphExecDestroy(exec));
      LOOM_CUDA_CHECK(cudaGraphDestroy(graph));
      if (shape != want)
        return what + ": captured kernel nodes' clusters " + shape + ", want " + want;
    } else {
      loom::kernels::hgemm(p, stream.view(), variant);
    }
  } catch (const std::exception& e) {
    return what + ": threw " + e.what();
  }
  loom::kernels::hgemm(ref, stream.view(), HgemmVariant::simple);
  stream.synchronize();
  c.download();
  c_ref.download();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      const float got = c.at(0, i, j);
      const float want = c_ref.at(0, i, j);
      if (!(std::fabs(got - want) <= 1e-3F * (1.0F + std::fabs(want)))) {
        return what + ": C[" + std::to_string(i) + "][" + std::to_string(j) +
               "] = " + std::to_string(got) + ", the simple kernel says " + std::to_string(want);
      }
    }
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> places = {
      {0, 0}, {m - 1, n - 1}, {0, n - 1}, {m - 1, 0}};
  std::uniform_int_distribution<std::int64_t> row(0, m - 1), col(0, n - 1);
  for (int s = 0; s < 300; ++s) places.emplace_back(row(rng), col(rng));
  for (const auto& [i, j] : places) {
    double exact = 0.0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      exact += static_cast<double>(a.at(0, i, kk)) * static_cast<double>(b.at(0, kk, j));
    }
    const float got = c.at(0, i, j);
    if (!(std::fabs(got - exact) <= 1e-3 * (1.0 + std::fabs(exact)))) {
      return what + ": C[" + std::to_string(i) + "][" + std::to_string(j) +
             "] = " + std::to_string(got) + ", exactly " + std::to_string(exact);
    }
  }
  return "";
}

TEST_P(HgemmGpu, WgmmaLarge) {
  LOOM_REQUIRE_WGMMA();
  for (Order a : {Order::row_major, Order::col_major}) {
    for (Order b : {Order::row_major, Order::col_major}) {
      EXPECT_EQ(run_large(GetParam(), 1024, 1024, 1024, a, b), "");
    }
  }
  EXPECT_EQ(run_large(GetParam(), 1000, 1000, 1000, Order::row_major, Order::row_major), "");
  EXPECT_EQ(run_large(GetParam(), 1000, 1000, 1000, Order::col_major, Order::col_major), "");
  EXPECT_EQ(run_large(GetParam(), 4096, 4096, 4096, Order::row_major, Order::row_major), "");
  EXPECT_EQ(run_large(GetParam(), 1536, 4104, 2056, Order::row_major, Order::col_major), "");
}

// wgmma in clusters of two: every tile of a large product, with an odd
// count of tile rows (the last cluster's second block past M), batches with
// a shared B, and the epilogue. (Every layout and tail: WgmmaEveryLayoutWithTails.)
TEST_P(HgemmGpu, WgmmaClusterLargeBatchedAndEpilogue) {
  LOOM_REQUIRE_WGMMA();
  constexpr auto kCluster = HgemmVariant::wgmma_cluster;
  for (Order o : {Order::row_major, Order::col_major}) {
    EXPECT_EQ(run_large(GetParam(), 1024, 1024, 1024, o, o, kCluster), "");
    EXPECT_EQ(run_large(GetParam(), 1000, 1000, 1000, o, o, kCluster), "");
  }
  EXPECT_EQ(run_large(GetParam(), 4096, 4096, 4096, Order::row_major, Order::row_major, kCluster),
            "");
  EXPECT_EQ(run_large(GetParam(), 1408, 2312, 776, Order::row_major, Order::row_major, kCluster),
            "");  // 11 tile rows
  for (bool shared : {false, true}) {
    Case t{.m = 200, .n = 264, .k = 96, .batch = 3, .shared_b = shared};
    EXPECT_EQ(run_case(t, GetParam(), kCluster), "");
    t = Case{.m = 72, .n = 40, .k = 96, .batch = 5, .beta = 0.5F, .bias = 1, .shared_b = shared};
    EXPECT_EQ(run_case(t, GetParam(), kCluster), "");
  }
  // Captured into a CUDA graph, as a compiled graph takes it: one kernel
  // node that keeps its clusters of two.
  EXPECT_EQ(run_large(GetParam(), 1000, 1000, 1000, Order::row_major, Order::row_major, kCluster,
                      true, 2),
            "");
  for (SgemmActivation act : {SgemmActivation::relu, SgemmActivation::gelu_tanh}) {
    Case t{.m = 392, .n = 264, .k = 72, .alpha = 0.5F, .beta = 0.25F};
    t.c_dtype = DType::f32;
    t.bias = 2;
    t.activation = act;
    EXPECT_EQ(run_case(t, GetParam(), kCluster), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HgemmGpu, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& p) { return std::string(loom::to_string(p.param)); });

// loom::ops::matmul on bf16 tensors, with a transposed operand, a bias and
// f32 output, eager and compiled, equals the CPU backend's result.
TEST(MatmulHalfGpu, ThroughAGraphEagerAndCompiledMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  constexpr std::int64_t kBatch = 2, kM = 192, kN = 80, kK = 136;
  auto rng = loom::test::random_engine();
  const auto random_bf16 = [&](std::size_t n) {
    std::vector<loom::bfloat16> v(n);
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    for (auto& x : v) x.bits = loom::kernels::f32_to_bf16_bits(dist(rng));
    return v;
  };
  const auto x_values = random_bf16(kBatch * kM * kK);
  const auto w_values = random_bf16(kN * kK);  // stored [N, K]: used transposed
  std::vector<float> bias_values(kN);
  for (auto& v : bias_values) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  const auto run = [&](loom::Runtime& rt, bool compiled) {
    auto x = rt.upload(std::span<const loom::bfloat16>(x_values), {kBatch, kM, kK});
    auto w = rt.upload(std::span<const loom::bfloat16>(w_values), {kN, kK});
    auto bias = rt.upload(std::span<const float>(bias_values), {kN});
    auto y = rt.tensor<float>({kBatch, kM, kN});
    auto h = rt.tensor<loom::bfloat16>({kBatch, kM, kN});
    loom::Graph g;
    g.add(loom::ops::matmul(x, w.transpose(0, 1), y, {.bias = bias}));
    g.add(loom::ops::matmul(x, w.transpose(0, 1), h,
                            {.alpha = 2.0F, .activation = loom::ops::Activation::relu}));
    if (compiled) {
      auto exe = rt.compile(g);
      exe.run().wait();
      exe.run().wait();
    } else {
      rt.submit(g).wait();
    }
    return std::pair(rt.download<float>(y), rt.download<loom::bfloat16>(h));
  };
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const auto [want_y, want_h] = run(cpu, false);
  loom::Runtime gpu;
  for (bool compiled : {false, true}) {
    const auto [y, h] = run(gpu, compiled);
    ASSERT_EQ(y.size(), want_y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      ASSERT_NEAR(y[i], want_y[i], 1e-3F * (1.0F + std::fabs(want_y[i]))) << i << " " << compiled;
    }
    for (std::size_t i = 0; i < h.size(); ++i) {
      const float got = loom::kernels::bf16_bits_to_f32(h[i].bits);
      const float want = loom::kernels::bf16_bits_to_f32(want_h[i].bits);
      ASSERT_NEAR(got, want, 1e-2F * (1.0F + std::fabs(want))) << i << " " << compiled;
    }
  }
}

// loom::ops::matmul through wgmma (automatic made to pick it): eager and
// compiled match the CPU backend; a compiled graph captures the launch (its
// TMA descriptors hold the tensors' addresses, which a kernel node cannot
// re-point), so bindings are copied through the placeholders, and a
// rebinding run computes on the bound tensors.
TEST(MatmulHalfGpu, WgmmaInACompiledGraphIsCapturedAndItsBindingsCopied) {
  LOOM_REQUIRE_WGMMA();
  const loom::kernels::hgemm_detail::AutomaticUsesWgmmaForTests use_wgmma;
  constexpr std::int64_t kM = 192, kN = 264, kK = 136;
  auto rng = loom::test::random_engine();
  const auto random_bf16 = [&](std::size_t n) {
    std::vector<loom::bfloat16> v(n);
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    for (auto& x : v) x.bits = loom::kernels::f32_to_bf16_bits(dist(rng));
    return v;
  };
  const auto x_values = random_bf16(kM * kK);
  const auto x2_values = random_bf16(kM * kK);
  const auto w_values = random_bf16(kK * kN);
  // The CPU backend's products, for x and for x2.
  const auto on_cpu = [&](const std::vector<loom::bfloat16>& xv) {
    loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
    auto x = cpu.upload(std::span<const loom::bfloat16>(xv), {kM, kK});
    auto w = cpu.upload(std::span<const loom::bfloat16>(w_values), {kK, kN});
    auto y = cpu.tensor<loom::bfloat16>({kM, kN});
    loom::Graph g;
    g.add(loom::ops::matmul(x, w, y));
    cpu.submit(g).wait();
    return cpu.download<loom::bfloat16>(y);
  };
  const auto want = on_cpu(x_values);
  const auto want2 = on_cpu(x2_values);
  const auto expect_near = [](const std::vector<loom::bfloat16>& got,
                              const std::vector<loom::bfloat16>& expected, const char* what) {
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const float g = loom::kernels::bf16_bits_to_f32(got[i].bits);
      const float e = loom::kernels::bf16_bits_to_f32(expected[i].bits);
      ASSERT_NEAR(g, e, 1e-2F * (1.0F + std::fabs(e))) << what << " " << i;
    }
  };

  loom::Runtime gpu;
  auto x = gpu.upload(std::span<const loom::bfloat16>(x_values), {kM, kK});
  auto x2 = gpu.upload(std::span<const loom::bfloat16>(x2_values), {kM, kK});
  auto w = gpu.upload(std::span<const loom::bfloat16>(w_values), {kK, kN});
  auto y = gpu.tensor<loom::bfloat16>({kM, kN});
  auto y2 = gpu.tensor<loom::bfloat16>({kM, kN});
  loom::Graph g;
  g.add(loom::ops::matmul(x, w, y));
  gpu.submit(g).wait();
  expect_near(gpu.download<loom::bfloat16>(y), want, "eager");

  auto exe = gpu.compile(g);
  exe.run().wait();
  exe.run().wait();
  expect_near(gpu.download<loom::bfloat16>(y), want, "compiled");

  const std::vector<loom::Binding> bindings = {{x, x2}, {y, y2}};
  const auto reasons = loom::detail::explain_bindings(exe, bindings);
  ASSERT_EQ(reasons.size(), bindings.size());
  // Not re-pointed: "task ... is captured" (or a reason found before that one).
  for (const auto& reason : reasons) EXPECT_NE(reason, "re-pointed");
  exe.run(bindings).wait();
  expect_near(gpu.download<loom::bfloat16>(y2), want2, "rebound");
  // Bound by copies: the output's placeholder holds the bound run's output too.
  expect_near(gpu.download<loom::bfloat16>(y), want2, "the placeholder after the bound run");
  // x's placeholder holds x2's values since (a bound input is copied in).
  exe.run().wait();
  expect_near(gpu.download<loom::bfloat16>(y), want2, "compiled again");
}

}  // namespace
