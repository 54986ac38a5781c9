// The elementwise family on the GPU: every map x variant x dtype against the
// CPU reference at awkward sizes with poisoned outputs and guard elements,
// misaligned pointers for the vectorized path, the strided path, the fused
// kernel against its CPU interpretation and against the unfused chain, and
// every op through a graph on the CUDA backend.
#include "support/gpu.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include "cuda/stream.hpp"
#include "elementwise/fusion.hpp"
#include "elementwise/maps.hpp"
#include "elementwise/test_support.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::kernels::MapKind;
using loom::kernels::MapVariant;
using loom::ops::MapExpr;
using loom::test::HostArray;

constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16};
const auto kKinds = loom::kernels::all_map_kinds();
constexpr MapVariant kVariants[] = {MapVariant::naive, MapVariant::grid_stride,
                                    MapVariant::vectorized, MapVariant::automatic};
constexpr std::size_t kSizes[] = {1, 31, 4097, 1000003};
constexpr std::size_t kGuard = 16;  // poisoned elements after the output, which must stay poisoned
constexpr loom::kernels::MapScalars kScalars{1.25F, -0.5F};

/// A device copy of a host array, `offset` elements in (to misalign it), with
/// kGuard spare elements after it.
class DeviceArray {
 public:
  DeviceArray(DType d, std::size_t n, std::size_t offset)
      : dtype_(d), n_(n), offset_(offset), buffer_((offset + n + kGuard) * bytes_for(d, 1)) {}
  void upload(const HostArray& a) {
    std::vector<unsigned char> bytes(buffer_.size(), 0xFF);
    std::memcpy(bytes.data() + offset_ * bytes_for(dtype_, 1), a.bytes.data(), a.bytes.size());
    buffer_.upload(bytes);
  }
  void poison() { buffer_.poison(); }
  void* data() { return buffer_.data() + offset_ * bytes_for(dtype_, 1); }
  /// The n elements, after checking that nothing around them was written.
  HostArray download(std::string* trespass) const {
    const auto bytes = buffer_.download();
    const std::size_t esize = bytes_for(dtype_, 1);
    for (std::size_t i = 0; i < offset_ * esize; ++i) {
      if (bytes[i] != 0xFF) *trespass = "wrote before the output";
    }
    for (std::size_t i = (offset_ + n_) * esize; i < bytes.size(); ++i) {
      if (bytes[i] != 0xFF) *trespass = "wrote past the end of the output";
    }
    HostArray a(dtype_, n_);
    std::memcpy(a.bytes.data(), bytes.data() + offset_ * esize, a.bytes.size());
    return a;
  }

 private:
  DType dtype_;
  std::size_t n_;
  std::size_t offset_;
  loom::test::DeviceBuffer<unsigned char> buffer_;
};

struct Offsets {
  std::size_t x = 0;
  std::size_t y = 0;
  std::size_t out = 0;
  std::size_t z = 0;
};

// Runs one map on the GPU and compares it with the reference; "" when equal.
std::string check_map(MapKind kind, DType in, DType out, MapVariant variant, const HostArray& x,
                      const HostArray& y, const HostArray& want, Offsets off = {},
                      const HostArray* z = nullptr) {
  const std::size_t n = x.size();
  DeviceArray dx(in, n, off.x);
  DeviceArray dy(in, n, off.y);
  DeviceArray dz(in, n, off.z);
  DeviceArray dout(out, n, off.out);
  dx.upload(x);
  dy.upload(y);
  dz.upload(z != nullptr ? *z : y);
  dout.poison();
  loom::detail::Stream stream(0, 0);
  loom::kernels::map(kind, in, out, {dx.data(), dy.data(), dout.data(), dz.data()}, n,
                     stream.view(), kScalars, variant);
  stream.synchronize();
  std::string trespass;
  const HostArray got = dout.download(&trespass);
  if (!trespass.empty()) return trespass;
  return loom::test::compare(got, want, loom::test::exact(kind));
}

std::string label(MapKind kind, DType in, DType out) {
  return std::string(to_string(kind)) + " " + std::string(to_string(in)) + "->" +
         std::string(to_string(out));
}

TEST(ElementwiseGpu, EveryMapVariantAndDtypeMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  for (MapKind kind : kKinds) {
    for (DType in : kFloatTypes) {
      for (DType out : kFloatTypes) {
        if (!loom::kernels::map_supports(kind, in, out)) continue;
        for (std::size_t n : kSizes) {
          const auto [x, y, z] = loom::test::map_inputs(kind, in, n, rng);
          HostArray want(out, n);
          loom::kernels::map_reference(kind, in, out, {x.data(), y.data(), want.data(), z.data()},
                                       n, kScalars);
          for (MapVariant v : kVariants) {
            EXPECT_EQ(check_map(kind, in, out, v, x, y, want, {}, &z), "")
                << label(kind, in, out) << " " << to_string(v) << " n=" << n;
          }
        }
      }
    }
  }
}

// Offsets that can be peeled together (the same misalignment in bytes), and
// ones that cannot (the vectorized variant falls back to grid_stride). A
// vector is 16 bytes of the output, so the 16-bit input of a widening cast
// needs only 8-byte alignment: {4, 4, 0} and {2, 2, 2} (a head of 2) are
// vectorized there and {6, 6, 0} is not; for the other maps these are more
// peelable and unpeelable cases.
// Broadcast inputs (Tensor::expand, stride 0) through the strided map and
// the reductions on the device, against the same graph on the CPU backend.
TEST(ElementwiseGpu, ExpandedInputsMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  constexpr std::int64_t kRows = 257, kCols = 129;
  std::vector<float> h_values(kRows * kCols);
  std::vector<float> b_values(kCols);
  auto rng = loom::test::random_engine();
  for (auto& v : h_values) v = std::uniform_real_distribution<float>(-4, 4)(rng);
  for (auto& v : b_values) v = std::uniform_real_distribution<float>(-4, 4)(rng);
  const auto run = [&](loom::Runtime& rt) {
    auto h = rt.upload(std::span<const float>(h_values), {kRows, kCols});
    auto bias = rt.upload(std::span<const float>(b_values), {kCols});
    auto out = rt.tensor<float>({kRows, kCols});
    auto column_sums = rt.tensor<float>({kCols});
    loom::Graph g;
    g.add(loom::ops::add(h, bias.expand({kRows, kCols}), out));
    g.add(loom::ops::sum(bias.expand({kRows, kCols}), 0, column_sums));
    rt.submit(g).wait();
    return std::pair(rt.download<float>(out), rt.download<float>(column_sums));
  };
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const auto [gpu_out, gpu_sums] = run(gpu);
  const auto [cpu_out, cpu_sums] = run(cpu);
  EXPECT_EQ(gpu_out, cpu_out);
  for (std::size_t j = 0; j < cpu_sums.size(); ++j) {
    EXPECT_NEAR(gpu_sums[j], cpu_sums[j], 1e-4F * std::fabs(cpu_sums[j]) + 1e-4F) << j;
  }
}

TEST(ElementwiseGpu, MisalignedPointersTakeTheVectorizedPathOrItsFallback) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  const Offsets offsets[] = {{1, 1, 1}, {3, 3, 3}, {1, 0, 0}, {0, 2, 1},
                             {5, 7, 6}, {2, 2, 2}, {4, 4, 0}, {6, 6, 0}};
  for (MapKind kind : {MapKind::add, MapKind::axpby, MapKind::relu, MapKind::cast}) {
    for (DType in : kFloatTypes) {
      for (DType out : kFloatTypes) {
        if (!loom::kernels::map_supports(kind, in, out)) continue;
        for (std::size_t n : {std::size_t{31}, std::size_t{4097}, std::size_t{1000003}}) {
          const HostArray x = loom::test::random_array(in, n, rng);
          const HostArray y = loom::test::random_array(in, n, rng);
          HostArray want(out, n);
          loom::kernels::map_reference(kind, in, out, {x.data(), y.data(), want.data()}, n,
                                       kScalars);
          for (const Offsets& off : offsets) {
            EXPECT_EQ(check_map(kind, in, out, MapVariant::vectorized, x, y, want, off), "")
                << label(kind, in, out) << " n=" << n << " offsets " << off.x << "," << off.y << ","
                << off.out;
          }
        }
      }
    }
  }
}

// gelu's fast division and exp2f over the whole range, where the
// denominator overflows (x below about -9: the result is a zero or a value
// below 1e-30) and at infinities and NaN, in the maps and the fused kernel.
TEST(ElementwiseGpu, GeluOverItsWholeRangeMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  using Op = loom::kernels::FusedOpcode;
  auto rng = loom::test::seeded_engine();
  const std::size_t n = 4097;
  const float inf = std::numeric_limits<float>::infinity();
  for (DType d : kFloatTypes) {
    HostArray x = loom::test::random_array(d, n, rng, -12.0F, 12.0F);
    const float specials[] = {inf, -inf, std::nanf(""), -0.0F, -9.5F, -40.0F, 40.0F};
    for (std::size_t i = 0; i < std::size(specials); ++i) x.set(i * 97, specials[i]);
    HostArray want(d, n);
    loom::kernels::map_reference(MapKind::gelu_tanh, d, d, {x.data(), nullptr, want.data()}, n);
    for (MapVariant v : {MapVariant::naive, MapVariant::vectorized}) {
      EXPECT_EQ(check_map(MapKind::gelu_tanh, d, d, v, x, x, want), "")
          << to_string(d) << " " << to_string(v);
    }
    loom::kernels::FusedProgram p;
    p.inputs = {d};
    p.output = d;
    p.code = {{Op::input, -1, -1, 0}, {Op::gelu_tanh, 0}};
    DeviceArray dx(d, n, 0);
    DeviceArray dout(d, n, 0);
    dx.upload(x);
    dout.poison();
    loom::detail::Stream stream(0, 0);
    loom::kernels::fused_map(p, {dx.data()}, dout.data(), n, stream.view());
    stream.synchronize();
    std::string trespass;
    EXPECT_EQ(loom::test::compare(dout.download(&trespass), want, false), "")
        << "fused, " << to_string(d);
    EXPECT_EQ(trespass, "");
  }
}

TEST(ElementwiseGpu, InPlaceOnTheSameBuffer) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  const std::size_t n = 1000003;
  for (DType d : kFloatTypes) {
    const HostArray x = loom::test::random_array(d, n, rng);
    HostArray want(d, n);
    loom::kernels::map_reference(MapKind::gelu_tanh, d, d, {x.data(), nullptr, want.data()}, n);
    DeviceArray dx(d, n, 0);
    dx.upload(x);
    loom::detail::Stream stream(0, 0);
    loom::kernels::map(MapKind::gelu_tanh, d, d, {dx.data(), nullptr, dx.data()}, n, stream.view());
    stream.synchronize();
    std::string trespass;
    EXPECT_EQ(loom::test::compare(dx.download(&trespass), want, false), "") << to_string(d);
    EXPECT_EQ(trespass, "");
  }
}

TEST(ElementwiseGpu, StridedPathMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  // out [r, c] contiguous; x read through a transpose; y every other column of a wider matrix.
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {31, 7}, {1000, 1003}}) {
    for (DType in : kFloatTypes) {
      const std::size_t n = static_cast<std::size_t>(rows * cols);
      const HostArray x = loom::test::random_array(in, n, rng);
      const HostArray y = loom::test::random_array(in, 2 * n, rng);
      loom::kernels::MapGeometry g;
      g.rank = 2;
      g.shape = {rows, cols};
      g.out_strides = {cols, 1};
      g.x_strides = {1, rows};
      g.y_strides = {2 * cols, 2};
      for (DType out : kFloatTypes) {
        const MapKind kind = out == in ? MapKind::axpby : MapKind::cast;
        HostArray want(out, n);
        loom::kernels::map_strided_reference(kind, in, out, {x.data(), y.data(), want.data()}, g,
                                             kScalars);
        DeviceArray dx(in, n, 0);
        DeviceArray dy(in, 2 * n, 0);
        DeviceArray dout(out, n, 0);
        dx.upload(x);
        dy.upload(y);
        dout.poison();
        loom::detail::Stream stream(0, 0);
        loom::kernels::map_strided(kind, in, out, {dx.data(), dy.data(), dout.data()}, g,
                                   stream.view(), kScalars);
        stream.synchronize();
        std::string trespass;
        EXPECT_EQ(loom::test::compare(dout.download(&trespass), want, loom::test::exact(kind)), "")
            << label(kind, in, out) << " " << rows << "x" << cols;
        EXPECT_EQ(trespass, "");
      }
    }
  }
}

// ---- fusion -----------------------------------------------------------------------

loom::kernels::FusedProgram sample_program(DType in, DType out) {
  using Op = loom::kernels::FusedOpcode;
  loom::kernels::FusedProgram p;
  p.inputs = {in, DType::f32, in};
  p.output = out;
  p.constants = {1.5F, -0.5F, 0.25F};
  // gelu(round_bf16(relu(1.5 x - 0.5 y) * x)) + 0.25 z
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::axpby, 0, 1, 0},
            {Op::relu, 2},          {Op::mul, 3, 0},        {Op::round, 4, -1, 0, DType::bf16},
            {Op::gelu_tanh, 5},     {Op::input, -1, -1, 2}, {Op::constant, -1, -1, 2},
            {Op::mul, 7, 8},        {Op::add, 6, 9}};
  return p;
}

TEST(ElementwiseGpu, FusedKernelMatchesItsCpuInterpretation) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  for (DType in : kFloatTypes) {
    for (DType out : kFloatTypes) {
      const auto p = sample_program(in, out);
      for (std::size_t n : kSizes) {
        for (std::size_t misalign : {std::size_t{0}, std::size_t{1}}) {
          const HostArray a = loom::test::random_array(in, n, rng);
          const HostArray b = loom::test::random_array(DType::f32, n, rng);
          const HostArray c = loom::test::random_array(in, n, rng);
          HostArray want(out, n);
          loom::kernels::fused_map_reference(p, {a.data(), b.data(), c.data()}, want.data(), n);
          DeviceArray da(in, n, misalign);
          DeviceArray db(DType::f32, n, 0);
          DeviceArray dc(in, n, 0);
          DeviceArray dout(out, n, 0);
          da.upload(a);
          db.upload(b);
          dc.upload(c);
          dout.poison();
          loom::detail::Stream stream(0, 0);
          loom::kernels::fused_map(p, {da.data(), db.data(), dc.data()}, dout.data(), n,
                                   stream.view());
          stream.synchronize();
          std::string trespass;
          // gelu (exp2f, a fast division) and axpby (a fused multiply-add) differ in the last bits.
          EXPECT_EQ(loom::test::compare(dout.download(&trespass), want, false), "")
              << to_string(in) << "->" << to_string(out) << " n=" << n << " misalign " << misalign;
          EXPECT_EQ(trespass, "");
        }
      }
    }
  }
}

// ---- ops through a graph on the CUDA backend ---------------------------------

loom::Tensor to_device(loom::Runtime& rt, HostArray& a, const loom::Shape& shape) {
  auto host = rt.provide(a.data(), a.dtype, shape, loom::Memory::pageable);
  auto dev = rt.tensor(a.dtype, shape);
  rt.copy(host, dev).wait();
  return dev;
}

HostArray to_host(loom::Runtime& rt, const loom::Tensor& dev) {
  HostArray a(dev.dtype(), static_cast<std::size_t>(dev.numel()));
  auto host = rt.provide(a.data(), a.dtype, dev.shape(), loom::Memory::pageable);
  rt.copy(dev, host).wait();
  return a;
}

TEST(ElementwiseGpu, EveryOpThroughAGraphOnTheCudaBackend) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ASSERT_EQ(rt.backend(), loom::Backend::cuda);
  auto rng = loom::test::seeded_engine();
  const std::int64_t rows = 257;
  const std::int64_t cols = 129;
  const auto n = static_cast<std::size_t>(rows * cols);
  for (DType d : kFloatTypes) {
    HostArray x = loom::test::random_array(d, n, rng);
    HostArray y = loom::test::random_array(d, n, rng);
    auto dx = to_device(rt, x, {rows, cols});
    auto dy = to_device(rt, y, {rows, cols});
    auto sum = rt.tensor(d, {rows, cols});
    auto prod = rt.tensor(d, {rows, cols});
    auto comb = rt.tensor(d, {rows, cols});
    auto act = rt.tensor(d, {rows, cols});
    auto gel = rt.tensor(d, {rows, cols});
    auto as_f32 = rt.tensor(DType::f32, {rows, cols});
    auto transposed = rt.tensor(d, {cols, rows});
    auto fused = rt.tensor(d, {rows, cols});
    loom::Graph g;
    g.add(loom::ops::add(dx, dy, sum));
    g.add(loom::ops::mul(dx, dy, prod));
    g.add(loom::ops::axpby(kScalars.alpha, dx, kScalars.beta, dy, comb));
    g.add(loom::ops::relu(dx, act));
    g.add(loom::ops::gelu_tanh(dx, gel));
    g.add(loom::ops::cast(dx, as_f32));
    g.add(loom::ops::add(dx.transpose(0, 1), dy.transpose(0, 1), transposed));  // strided path
    const auto ex = MapExpr::input(0);
    const auto ey = MapExpr::input(1);
    g.add(
        loom::ops::fused_map({dx, dy}, fused, loom::ops::gelu_tanh(loom::ops::relu(ex + ey) * ex)));
    rt.submit(g).wait();

    const auto reference = [&](MapKind kind, DType out) {
      HostArray want(out, n);
      loom::kernels::map_reference(kind, d, out, {x.data(), y.data(), want.data()}, n, kScalars);
      return want;
    };
    EXPECT_EQ(loom::test::compare(to_host(rt, sum), reference(MapKind::add, d), true), "");
    EXPECT_EQ(loom::test::compare(to_host(rt, prod), reference(MapKind::mul, d), true), "");
    EXPECT_EQ(loom::test::compare(to_host(rt, comb), reference(MapKind::axpby, d), false), "");
    EXPECT_EQ(loom::test::compare(to_host(rt, act), reference(MapKind::relu, d), true), "");
    EXPECT_EQ(loom::test::compare(to_host(rt, gel), reference(MapKind::gelu_tanh, d), false), "");
    EXPECT_EQ(loom::test::compare(to_host(rt, as_f32), reference(MapKind::cast, DType::f32), true),
              "");
    const HostArray t = to_host(rt, transposed);
    const HostArray s = reference(MapKind::add, d);
    std::size_t bad = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        if (!(t.get(static_cast<std::size_t>(c * rows + r)) ==
              s.get(static_cast<std::size_t>(r * cols + c)))) {
          ++bad;
        }
      }
    }
    EXPECT_EQ(bad, 0U) << "transposed add, " << to_string(d);
    // The fused op against the unfused chain of maps on the GPU.
    auto t1 = rt.tensor(DType::f32, {rows, cols});
    auto t2 = rt.tensor(DType::f32, {rows, cols});
    auto unfused = rt.tensor(d, {rows, cols});
    loom::Graph chain;
    chain.add(loom::ops::cast(dx, t2));
    chain.add(loom::ops::cast(dy, t1));
    chain.add(loom::ops::add(t2, t1, t1));
    chain.add(loom::ops::relu(t1, t1));
    chain.add(loom::ops::mul(t1, t2, t1));
    chain.add(loom::ops::gelu_tanh(t1, t1));
    chain.add(loom::ops::cast(t1, unfused));
    rt.submit(chain).wait();
    EXPECT_EQ(loom::test::compare(to_host(rt, fused), to_host(rt, unfused), false), "")
        << "fused vs unfused, " << to_string(d);
  }
}

TEST(ElementwiseGpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto a = rt.tensor<float>({8});
  auto host = rt.tensor<float>({8}, loom::Memory::pageable);
  auto h = rt.tensor(DType::f16, {8});
  const auto expect_rejected = [&](loom::OpPtr op, const std::string& words) {
    loom::Graph g;
    g.add(std::move(op), {.name = "suspect"});
    try {
      (void)rt.submit(g);
      ADD_FAILURE() << "accepted; expected '" << words << "'";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "suspect") << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_rejected(loom::ops::add(a, host, a), "memory");
  expect_rejected(loom::ops::relu(host, host), "host");
  expect_rejected(loom::ops::mul(a, h, a), "one dtype");
  expect_rejected(loom::ops::fused_map({a, h}, a.slice(0, 0, 4), MapExpr::input(0)),
                  "does not broadcast");
}

// ---- the maps added for a training step ------------------------------------------

// where's mask misaligned on its own, and the three-input vectorized path.
TEST(ElementwiseGpu, WhereTakesTheVectorizedPathOrItsFallback) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  // {x (the mask), y, out, z}: the mask misaligned alone, then b, then several.
  const Offsets offsets[] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {3, 0, 0, 0}, {0, 0, 0, 3}, {2, 1, 0, 0}};
  for (DType d : kFloatTypes) {
    for (std::size_t n : {std::size_t{31}, std::size_t{1000003}}) {
      const auto [x, y, z] = loom::test::map_inputs(MapKind::where, d, n, rng);
      HostArray want(d, n);
      loom::kernels::map_reference(MapKind::where, d, d,
                                   {x.data(), y.data(), want.data(), z.data()}, n);
      for (const Offsets& off : offsets) {
        EXPECT_EQ(check_map(MapKind::where, d, d, MapVariant::vectorized, x, y, want, off, &z), "")
            << to_string(d) << " n=" << n << " offsets " << off.x << "," << off.y << "," << off.z
            << "," << off.out;
      }
    }
  }
}

// where() on 16-bit data selects bit patterns instead of widening: the
// same bits as the reference for masks of -0, NaN, subnormals and
// infinities, and for NaN operands (any payload or sign: the canonical NaN).
TEST(ElementwiseGpu, WhereGivesTheReferencesBitsOnSpecialValues) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  for (DType d : kFloatTypes) {
    const std::size_t n = 4099;  // whole vectors, then a scalar tail
    auto [x, y, z] = loom::test::map_inputs(MapKind::where, d, n, rng);
    const std::size_t width = loom::bytes_for(d, 1);
    const auto set_bits = [&](HostArray& a, std::size_t i, std::uint32_t bits) {
      std::memcpy(a.bytes.data() + i * width, &bits, width);  // little-endian: the low bytes
    };
    const bool wide = d == DType::f32;
    const std::uint32_t special_masks[] = {
        0x00000000U,                   // +0: false
        wide ? 0x80000000U : 0x8000U,  // -0: false
        wide ? 0x7FC00001U : 0x7E01U,  // a NaN (f16's, and a bf16 one): true
        wide ? 0xFFFFFFFFU : 0xFFFFU,  // a negative NaN: true
        0x00000001U,                   // the smallest subnormal: true
        wide ? 0xFF800000U : 0xFC00U,  // -infinity in f16, -2^121 in bf16: true
    };
    for (std::size_t i = 0; i < n; i += 3) set_bits(x, i, special_masks[(i / 3) % 6]);
    for (std::size_t i = 1; i < n; i += 5) set_bits(y, i, wide ? 0x7FA00123U : 0x7D23U);
    for (std::size_t i = 2; i < n; i += 7) set_bits(z, i, wide ? 0xFFC00042U : 0xFF81U);
    HostArray want(d, n);
    loom::kernels::map_reference(MapKind::where, d, d, {x.data(), y.data(), want.data(), z.data()},
                                 n);
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      DeviceArray dx(d, n, offset);
      DeviceArray dy(d, n, offset);
      DeviceArray dz(d, n, offset);
      DeviceArray dout(d, n, offset);
      dx.upload(x);
      dy.upload(y);
      dz.upload(z);
      dout.poison();
      loom::detail::Stream stream(0, 0);
      loom::kernels::map(MapKind::where, d, d, {dx.data(), dy.data(), dout.data(), dz.data()}, n,
                         stream.view(), kScalars, MapVariant::vectorized);
      stream.synchronize();
      std::string trespass;
      const HostArray got = dout.download(&trespass);
      EXPECT_EQ(trespass, "") << to_string(d);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (std::memcmp(got.bytes.data() + i * width, want.bytes.data() + i * width, width) != 0) {
          if (differ++ == 0)
            ADD_FAILURE() << to_string(d) << " offset " << offset << ": element " << i
                          << " differs in its bits";
        }
      }
      EXPECT_EQ(differ, 0U) << to_string(d) << " offset " << offset;
    }
  }
}

// Every map through a graph with broadcast operands (a row, a column, a
// scalar tensor) and a transposed one, against the same graph on the CPU
// backend.
TEST(ElementwiseGpu, BroadcastAndStridedMapsMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  constexpr std::int64_t kRows = 67, kCols = 257;
  auto rng = loom::test::seeded_engine();
  for (MapKind kind : kKinds) {
    if (kind == MapKind::cast) continue;  // a cast does not broadcast
    for (DType d : kFloatTypes) {
      const auto n = static_cast<std::size_t>(kRows * kCols);
      auto [x, y, z] = loom::test::map_inputs(kind, d, n, rng);
      const auto run = [&](loom::Runtime& rt) {
        auto tx = to_device(rt, x, {kRows, kCols});
        auto ty = to_device(rt, y, {kRows, kCols});
        auto tz = to_device(rt, z, {kRows, kCols});
        auto row = ty.slice(0, 3, 4).reshape({kCols});  // [N]
        auto column = tz.slice(1, 5, 6);                // [B, 1], strided
        auto scalar = ty.slice(0, 0, 1).slice(1, 0, 1).reshape({1});
        auto a = rt.tensor(d, {kRows, kCols});
        auto b = rt.tensor(d, {kRows, kCols});
        auto c = rt.tensor(d, {kCols, kRows});
        loom::Graph g;
        const auto op = [&](const loom::Tensor& p, const loom::Tensor& q, const loom::Tensor& r,
                            const loom::Tensor& out) {
          switch (loom::kernels::arity(kind)) {
            case 1: return loom::test::make_map_op(kind, p, p, p, out);
            case 2: return loom::test::make_map_op(kind, p, q, q, out);
            default: return loom::test::make_map_op(kind, p, q, r, out);
          }
        };
        g.add(op(tx, row, column, a));
        g.add(op(tx, scalar, row, b));
        g.add(op(tx.transpose(0, 1), ty.transpose(0, 1), column.transpose(0, 1), c));
        rt.submit(g).wait();
        return std::array<HostArray, 3>{to_host(rt, a), to_host(rt, b), to_host(rt, c)};
      };
      loom::Runtime gpu;
      loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
      const auto got = run(gpu);
      const auto want = run(cpu);
      for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(loom::test::compare(got[k], want[k], loom::test::exact(kind)), "")
            << to_string(kind) << " " << to_string(d) << " case " << k;
      }
    }
  }
}

// The fused kernels convert with NVRTC's prelude (fusion.cpp), which cannot
// include common/convert.hpp: it must give that header's bits. Every f16 and
// bf16 pattern widened; f32 patterns (every upper half, with low halves at
// the rounding boundaries and random ones) narrowed, to contiguous outputs
// (the paired conversions of the vectorized form) and strided ones (the
// scalar form); and a cast() inside a chain, rounded and widened again.
TEST(ElementwiseGpu, TheFusedKernelsConversionsGiveConvertHppsBits) {
  LOOM_REQUIRE_GPU();
  namespace k = loom::kernels;
  loom::Runtime rt;
  const auto bits32 = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  const auto run = [&](HostArray& in, DType out_dtype, const MapExpr& expr, bool strided) {
    const auto n = static_cast<std::int64_t>(in.size());
    auto x = to_device(rt, in, {n});
    auto out = rt.tensor(out_dtype, {strided ? 2 * n : n});
    const auto view = strided ? out.slice(0, 0, 2 * n, 2) : out;
    loom::Graph g;
    g.add(loom::ops::fused_map({x}, view, expr));
    rt.submit(g).wait();
    return to_host(rt, out);
  };
  const auto at = [](std::size_t i, bool strided) { return strided ? 2 * i : i; };
  for (DType narrow : {DType::f16, DType::bf16}) {
    HostArray every(narrow, 1 << 16);
    for (std::uint32_t b = 0; b < (1U << 16); ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      std::memcpy(static_cast<unsigned char*>(every.data()) + 2 * b, &h, 2);
    }
    for (bool strided : {false, true}) {
      const HostArray got = run(every, DType::f32, MapExpr::input(0), strided);
      std::size_t bad = 0;
      for (std::uint32_t b = 0; b < (1U << 16); ++b) {
        const auto h = static_cast<std::uint16_t>(b);
        const float want = narrow == DType::f16 ? k::f16_bits_to_f32(h) : k::bf16_bits_to_f32(h);
        const float g = got.get(at(b, strided));
        if (bits32(g) != bits32(want) && bad++ < 5) {
          ADD_FAILURE() << to_string(narrow) << " 0x" << std::hex << b << " widened to 0x"
                        << bits32(g) << ", convert.hpp gives 0x" << bits32(want)
                        << (strided ? " (strided)" : "");
        }
      }
      EXPECT_EQ(bad, 0U) << to_string(narrow) << (strided ? " strided" : "");
    }
  }
  // f32 patterns: every upper half with low halves on and around the
  // rounding boundaries of both formats, and random ones.
  auto rng = loom::test::seeded_engine();
  constexpr std::uint32_t kLows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001,
                                     0x7FFF, 0x8000, 0x8001, 0xFFFF};
  constexpr std::size_t kPerHigh = std::size(kLows) + 2;
  HostArray patterns(DType::f32, kPerHigh << 16);
  std::vector<std::uint32_t> words(patterns.size());
  for (std::uint32_t hi = 0; hi < (1U << 16); ++hi) {
    for (std::size_t j = 0; j < kPerHigh; ++j) {
      const std::uint32_t lo = j < std::size(kLows) ? kLows[j] : static_cast<std::uint32_t>(rng());
      words[hi * kPerHigh + j] = (hi << 16) | (lo & 0xFFFFU);
    }
  }
  std::memcpy(patterns.data(), words.data(), words.size() * 4);
  for (DType narrow : {DType::f16, DType::bf16}) {
    const auto round = [&](std::uint32_t w) {
      const float f = std::bit_cast<float>(w);
      return narrow == DType::f16 ? k::f32_to_f16_bits(f) : k::f32_to_bf16_bits(f);
    };
    for (bool strided : {false, true}) {
      const HostArray got = run(patterns, narrow, MapExpr::input(0), strided);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < words.size(); ++i) {
        std::uint16_t g = 0;
        std::memcpy(&g, static_cast<const unsigned char*>(got.data()) + 2 * at(i, strided), 2);
        if (g != round(words[i]) && bad++ < 5) {
          ADD_FAILURE() << "f32 0x" << std::hex << words[i] << " to " << to_string(narrow)
                        << " gave 0x" << g << ", convert.hpp gives 0x" << round(words[i])
                        << (strided ? " (strided)" : "");
        }
      }
      EXPECT_EQ(bad, 0U) << to_string(narrow) << (strided ? " strided" : "");
    }
    // Rounded inside the chain and widened again: an f32 output.
    const HostArray got =
        run(patterns, DType::f32, loom::ops::cast(MapExpr::input(0), narrow), false);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::uint16_t r = round(words[i]);
      const float want = narrow == DType::f16 ? k::f16_bits_to_f32(r) : k::bf16_bits_to_f32(r);
      if (bits32(got.get(i)) != bits32(want) && bad++ < 5) {
        ADD_FAILURE() << "cast(f32 0x" << std::hex << words[i] << ", " << to_string(narrow)
                      << ") gave 0x" << bits32(got.get(i)) << ", convert.hpp gives 0x"
                      << bits32(want);
      }
    }
    EXPECT_EQ(bad, 0U) << "cast to " << to_string(narrow) << " inside a chain";
  }
}

// The README: every map takes a MapVariant. Each variant of each map, through
// the op, on contiguous tensors aligned and one element off (where the
// vectorized kernel peels a head, or falls back when the operands cannot be
// aligned together), against the CPU backend; vector_add's variants too.
TEST(ElementwiseGpu, EveryVariantThroughTheOpsMatchesTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  constexpr std::int64_t kN = 4099;
  constexpr MapVariant kAll[] = {MapVariant::automatic, MapVariant::naive, MapVariant::grid_stride,
                                 MapVariant::vectorized};
  auto rng = loom::test::seeded_engine();
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  for (MapKind kind : kKinds) {
    for (DType d : kFloatTypes) {
      // A cast's output is f32 for 16-bit inputs and bf16 for f32 ones.
      const DType out_dtype =
          kind != MapKind::cast ? d : (d == DType::f32 ? DType::bf16 : DType::f32);
      auto [x, y, z] = loom::test::map_inputs(kind, d, kN + 1, rng);
      const auto run = [&](loom::Runtime& rt, MapVariant v) {
        auto tx = to_device(rt, x, {kN + 1});
        auto ty = to_device(rt, y, {kN + 1});
        auto tz = to_device(rt, z, {kN + 1});
        auto aligned = rt.tensor(out_dtype, {kN});
        auto shifted = rt.tensor(out_dtype, {kN + 1});
        loom::Graph g;
        g.add(loom::test::make_map_op(kind, tx.slice(0, 0, kN), ty.slice(0, 0, kN),
                                      tz.slice(0, 0, kN), aligned, {1.25F, -0.5F}, v));
        // x and out one element in (they peel together), y and z aligned.
        g.add(loom::test::make_map_op(kind, tx.slice(0, 1, kN + 1), ty.slice(0, 0, kN),
                                      tz.slice(0, 0, kN), shifted.slice(0, 1, kN + 1),
                                      {1.25F, -0.5F}, v));
        rt.submit(g).wait();
        return std::array<HostArray, 2>{to_host(rt, aligned),
                                        to_host(rt, shifted.slice(0, 1, kN + 1))};
      };
      const auto want = run(cpu, MapVariant::automatic);
      for (MapVariant v : kAll) {
        const auto got = run(gpu, v);
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(loom::test::compare(got[k], want[k], loom::test::exact(kind)), "")
              << to_string(kind) << " " << to_string(d) << " " << to_string(v)
              << (k == 0 ? " aligned" : " shifted");
        }
      }
    }
  }
  HostArray a = loom::test::random_array(DType::f32, kN + 1, rng);
  HostArray b = loom::test::random_array(DType::f32, kN + 1, rng);
  HostArray want(DType::f32, kN);
  for (std::size_t i = 0; i < static_cast<std::size_t>(kN); ++i) {
    want.set(i, a.get(i + 1) + b.get(i));
  }
  for (MapVariant v : kAll) {
    auto ta = to_device(gpu, a, {kN + 1});
    auto tb = to_device(gpu, b, {kN + 1});
    auto c = gpu.tensor(DType::f32, {kN});
    loom::Graph g;
    // a one element in, b and c aligned: the vectorized kernel falls back.
    g.add(loom::ops::vector_add(ta.slice(0, 1, kN + 1), tb.slice(0, 0, kN), c, v));
    gpu.submit(g).wait();
    EXPECT_EQ(loom::test::compare(to_host(gpu, c), want, true), "") << to_string(v);
  }
}

// A learning rate in a device tensor: a compiled graph replays with the
// value uploaded before each replay.
TEST(ElementwiseGpu, AScalarTensorIsReadAtEveryReplayOfACompiledGraph) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const std::vector<float> ones(1000, 1.0F);
  std::vector<float> grads(1000);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 10);
  auto w = rt.upload(std::span<const float>(ones), {1000});
  auto grad = rt.upload(std::span<const float>(grads), {1000});
  auto lr = rt.tensor<float>({1});
  auto step = rt.tensor<float>({1000});
  const auto in = [](int i) { return MapExpr::input(i); };
  loom::Graph g;
  g.add(loom::ops::mul(grad, lr, step), {.name = "scale"});
  g.add(loom::ops::fused_map({w, step}, w, in(0) - in(1)),
        {.name = "sgd"});  // after: it reads step
  auto exe = rt.compile(g);
  const float lr1 = 0.5F;
  const float lr2 = 0.25F;
  rt.upload_into(lr, std::span<const float>(&lr1, 1)).wait();
  exe.run().wait();
  rt.upload_into(lr, std::span<const float>(&lr2, 1)).wait();
  exe.run().wait();
  const auto got = rt.download<float>(w);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], 1.0F - 0.5F * grads[i] - 0.25F * grads[i]) << i;
  }
}

// The fused kernel's forms on the device against its CPU interpretation:
// several outputs of mixed dtypes, scalar inputs, the strided form with
// transposed, broadcast and sliced operands, every opcode in one chain.
TEST(ElementwiseGpu, FusedFormsMatchTheirCpuInterpretation) {
  LOOM_REQUIRE_GPU();
  using Op = loom::kernels::FusedOpcode;
  auto rng = loom::test::seeded_engine();
  loom::kernels::FusedProgram p;
  p.inputs = {DType::f32, DType::bf16, DType::f16};
  p.scalar_inputs = {false, true, false};
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::input, -1, -1, 2}};
  // Every map of the inputs themselves (exact on both sides, so no
  // comparison can flip on an ulp), and the sum of all their values.
  std::vector<int> values;
  for (MapKind kind : kKinds) {
    if (kind == MapKind::cast || kind == MapKind::axpby) continue;
    values.push_back(static_cast<int>(p.code.size()));
    p.code.push_back({loom::kernels::opcode_of(kind), 0, 1, 0, DType::f32, 2});
  }
  p.constants = {1.5F, -0.25F, 3.0F};
  values.push_back(static_cast<int>(p.code.size()));
  p.code.push_back({Op::axpby, 0, 2, 0});  // 1.5 x - 0.25 z
  values.push_back(static_cast<int>(p.code.size()));
  p.code.push_back({Op::constant, -1, -1, 2});
  values.push_back(static_cast<int>(p.code.size()));
  p.code.push_back({Op::round, 0, -1, 0, DType::bf16});
  int sum = values[0];
  for (std::size_t k = 1; k < values.size(); ++k) {
    p.code.push_back({Op::add, sum, values[k]});
    sum = static_cast<int>(p.code.size()) - 1;
  }
  p.outputs = {{sum, DType::f32}, {values.back(), DType::bf16}, {values[2], DType::f16}};
  for (const auto& [strided, misalign] :
       {std::pair{false, 0}, std::pair{false, 1}, std::pair{true, 0}}) {
    p.strided = strided;
    const std::int64_t rows = 301;
    const std::int64_t cols = 173;
    const auto n = static_cast<std::size_t>(rows * cols);
    const HostArray x = loom::test::random_array(DType::f32, n, rng, 0.1F, 2.0F);
    const HostArray s = loom::test::random_array(DType::bf16, 1, rng, 0.1F, 2.0F);
    const HostArray z = loom::test::random_array(DType::f16, 2 * n, rng, 0.1F, 2.0F);
    loom::kernels::FusedGeometry g = loom::kernels::FusedGeometry::contiguous(p, n);
    if (strided) {  // x transposed, s broadcast, z every other column, output 1 transposed
      g.rank = 2;
      g.shape[0] = rows;
      g.shape[1] = cols;
      const std::int64_t strides[6][2] = {{1, rows}, {0, 0},    {2 * cols, 2},
                                          {cols, 1}, {1, rows}, {cols, 1}};
      for (int k = 0; k < 6; ++k) {
        g.strides[k][0] = strides[k][0];
        g.strides[k][1] = strides[k][1];
      }
    }
    HostArray want0(DType::f32, n);
    HostArray want1(DType::bf16, n);
    HostArray want2(DType::f16, n);
    loom::kernels::fused_map_reference(p, {x.data(), s.data(), z.data()},
                                       {want0.data(), want1.data(), want2.data()}, g);
    // A misaligned x sends the vectorized form down its element-wise path.
    DeviceArray dx(DType::f32, n, static_cast<std::size_t>(misalign));
    DeviceArray ds(DType::bf16, 1, 0);
    DeviceArray dz(DType::f16, 2 * n, 0);
    DeviceArray d0(DType::f32, n, 0);
    DeviceArray d1(DType::bf16, n, 0);
    DeviceArray d2(DType::f16, n, 0);
    dx.upload(x);
    ds.upload(s);
    dz.upload(z);
    d0.poison();
    d1.poison();
    d2.poison();
    loom::detail::Stream stream(0, 0);
    loom::kernels::FusedKernel(p).launch({dx.data(), ds.data(), dz.data()},
                                         {d0.data(), d1.data(), d2.data()}, g, stream.view());
    stream.synchronize();
    std::string trespass;
    EXPECT_EQ(loom::test::compare(d0.download(&trespass), want0, false), "") << strided << misalign;
    EXPECT_EQ(loom::test::compare(d1.download(&trespass), want1, false), "") << strided << misalign;
    EXPECT_EQ(loom::test::compare(d2.download(&trespass), want2, false), "") << strided << misalign;
    EXPECT_EQ(trespass, "");
  }
}

// A one-element operand on the contiguous kernels (every variant): read once
// a thread, its alignment free, the others' vectorized or peeled.
TEST(ElementwiseGpu, ScalarOperandsTakeTheContiguousKernels) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  for (DType d : kFloatTypes) {
    for (std::size_t n : {std::size_t{1}, std::size_t{33}, std::size_t{1000003}}) {
      const auto [x, y, z] = loom::test::map_inputs(MapKind::where, d, n, rng);
      for (const auto& [kind, bits] :
           {std::pair{MapKind::mul, loom::kernels::kBroadcastY},
            std::pair{MapKind::sub, loom::kernels::kBroadcastX},
            std::pair{MapKind::where, loom::kernels::kBroadcastY | loom::kernels::kBroadcastZ}}) {
        HostArray want(d, n);
        loom::kernels::MapOperands host{x.data(), y.data(), want.data(), z.data(), bits};
        loom::kernels::map_reference(kind, d, d, host, n);
        for (std::size_t misalign : {std::size_t{0}, std::size_t{1}}) {
          DeviceArray dx(d, n, misalign);
          DeviceArray dy(d, n, 0);
          DeviceArray dz(d, n, 3);
          DeviceArray dout(d, n, misalign);
          dx.upload(x);
          dy.upload(y);
          dz.upload(z);
          for (MapVariant v : kVariants) {
            dout.poison();
            loom::detail::Stream stream(0, 0);
            loom::kernels::map(kind, d, d, {dx.data(), dy.data(), dout.data(), dz.data(), bits}, n,
                               stream.view(), {}, v);
            stream.synchronize();
            std::string trespass;
            EXPECT_EQ(loom::test::compare(dout.download(&trespass), want, true), "")
                << to_string(kind) << " " << to_string(d) << " n=" << n << " " << to_string(v)
                << " misalign " << misalign;
            EXPECT_EQ(trespass, "");
          }
        }
      }
    }
  }
}

}  // namespace

// Shapes at the edges, through graphs on both backends: empty tensors
// (nothing launched, nothing written), size-1 dimensions, a rank-0 scalar
// operand, a unary map of an expanded input, and fused_map with two outputs
// through the op.
TEST(ElementwiseGpu, EdgeShapesMatchTheCpuBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::seeded_engine();
  loom::Runtime gpu;
  loom::Runtime cpu({.backend = loom::Backend::cpu, .workers = 2});
  const loom::Shape shapes[] = {{0}, {3, 0}, {0, 5}, {1}, {1, 1}, {1, 7}, {5, 1}};
  for (MapKind kind : kKinds) {
    if (kind == MapKind::cast) continue;
    for (DType d : kFloatTypes) {
      for (const loom::Shape& shape : shapes) {
        std::int64_t numel = 1;
        for (auto e : shape) numel *= e;
        const auto n = static_cast<std::size_t>(numel);
        auto [x, y, z] = loom::test::map_inputs(kind, d, std::max<std::size_t>(n, 1), rng);
        auto scalar = loom::test::map_inputs(kind, d, 1, rng);
        HostArray sevens(d, std::max<std::size_t>(n, 1));  // what an empty op must leave alone
        for (std::size_t i = 0; i < sevens.size(); ++i) sevens.set(i, 7.0F);
        const auto run = [&](loom::Runtime& rt) {
          auto tx = to_device(rt, x, shape);
          auto ty = to_device(rt, y, shape);
          auto tz = to_device(rt, z, shape);
          auto rank0 = to_device(rt, scalar.y, {});  // a scalar of shape []
          auto out = to_device(rt, sevens, shape);
          auto with_scalar = to_device(rt, sevens, shape);
          loom::Graph g;
          g.add(loom::test::make_map_op(kind, tx, ty, tz, out));
          g.add(loom::test::make_map_op(kind, tx, rank0, kind == MapKind::where ? rank0 : tz,
                                        with_scalar));
          rt.submit(g).wait();
          return std::array<HostArray, 2>{to_host(rt, out), to_host(rt, with_scalar)};
        };
        const auto got = run(gpu);
        const auto want = run(cpu);
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k].size(), n);
          EXPECT_EQ(loom::test::compare(got[k], want[k], loom::test::exact(kind)), "")
              << to_string(kind) << " " << to_string(d) << " shape " << shape.to_string()
              << " numel " << numel << " case " << k;
        }
      }
    }
  }

  // A unary map and a two-output fused_map over an expanded row, on both backends.
  for (DType d : kFloatTypes) {
    constexpr std::int64_t kRows = 33, kCols = 129;
    HostArray row = loom::test::random_array(d, kCols, rng);
    const auto run = [&](loom::Runtime& rt) {
      auto r = to_device(rt, row, {kCols});
      auto expanded = r.expand({kRows, kCols});
      auto unary = rt.tensor(d, {kRows, kCols});
      auto first = rt.tensor(d, {kRows, kCols});
      auto second = rt.tensor(DType::f32, {kRows, kCols});
      using loom::ops::MapExpr;
      loom::Graph g;
      g.add(loom::ops::tanh(expanded, unary));
      g.add(loom::ops::fused_map({expanded, unary}, {first, second},
                                 {MapExpr::input(0) - MapExpr::input(1),
                                  loom::ops::maximum(MapExpr::input(0), MapExpr::constant(0.0F))}));
      rt.submit(g).wait();
      return std::array<HostArray, 3>{to_host(rt, unary), to_host(rt, first), to_host(rt, second)};
    };
    const auto got = run(gpu);
    const auto want = run(cpu);
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(loom::test::compare(got[k], want[k], false), "") << to_string(d) << " case " << k;
    }
    // Every row of the unary map is the same row.
    for (std::int64_t i = 1; i < kRows; ++i) {
      for (std::int64_t j = 0; j < kCols; ++j) {
        ASSERT_EQ(got[0].get(static_cast<std::size_t>(i * kCols + j)),
                  got[0].get(static_cast<std::size_t>(j)));
      }
    }
  }
}
