// Every softmax variant, fp32 and bf16, against the CPU reference: fresh
// random rows of awkward lengths (1 to 1000003: warp rows, block rows, long
// rows, split rows), contiguous, strided (aligned and not) and in place;
// outputs poisoned with NaN first and the gaps between strided rows checked
// untouched; special rows (magnitudes of 80, -inf entries, a row of -inf
// only); then the op through a graph on the CUDA backend.
#include "support/gpu.hpp"

#include "common/convert.hpp"
#include "cuda/stream.hpp"
#include "softmax/softmax.hpp"
#include "softmax/test_support.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

namespace loom {
// Names the parameters in test listings and failure messages.
void PrintTo(DType d, std::ostream* os) { *os << to_string(d); }
namespace ops {
void PrintTo(SoftmaxVariant v, std::ostream* os) { *os << to_string(v); }
}  // namespace ops
}  // namespace loom

namespace {

using loom::DType;
using loom::kernels::SoftmaxShape;
using loom::kernels::SoftmaxVariant;

using loom::test::softmax::close;

constexpr float kInf = std::numeric_limits<float>::infinity();

// tiny: each row holds one 10 and, every fifth element, values 88 to 100
// below it (80 to 92 for bf16), whose outputs are subnormal or near it; in
// the last row everything else is -inf.
enum class Rows { random, extreme, tiny };

// Host rows as floats; for bf16 the values are first rounded to bf16 so
// both sides see the same inputs.
struct Case {
  DType dtype;
  std::int64_t rows, cols, x_stride, y_stride;
  bool in_place;
  Rows kind;
};

std::size_t element_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

std::vector<float> make_rows(const Case& c, std::mt19937_64& rng) {
  std::vector<float> x(static_cast<std::size_t>(c.rows * c.x_stride), 0.0F);
  const float scale = c.kind == Rows::extreme ? 80.0F : 6.0F;
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::uniform_int_distribution<int> pick(0, 9);
  std::uniform_real_distribution<float> tiny_gap(88.0F, 100.0F);
  std::uniform_real_distribution<float> tiny_gap_bf16(80.0F, 92.0F);
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t j = 0; j < c.cols; ++j) {
      float v = dist(rng);
      if (c.kind == Rows::tiny) {
        // The last row -inf but for those: a cluster's blocks whose own
        // maximum lies ~90 below the row's.
        if (r == c.rows - 1 && c.rows > 1) v = -kInf;
        if (j == c.cols / 2) v = 10.0F;
        if (j % 5 == 1 && j != c.cols / 2) {
          // bf16's subnormals end at 2^-133 (e^-92): nearer gaps for it.
          v = 10.0F - (c.dtype == DType::bf16 ? tiny_gap_bf16(rng) : tiny_gap(rng));
        }
      }
      if (c.kind == Rows::extreme) {
        if (pick(rng) == 0) v = -kInf;                 // -inf entries contribute 0
        if (r == c.rows - 1 && c.rows > 1) v = -kInf;  // a row of -inf only: NaN
        // The row's first eighth (a cluster's first block) NaN only, or -inf
        // with one NaN: NaN everywhere, though that part's maximum is -inf.
        const bool first_part = c.rows > 3 && j < (c.cols + 7) / 8;
        if (r == 0 && first_part) v = std::numeric_limits<float>::quiet_NaN();
        if (r == 1 && first_part) v = j == 0 ? std::numeric_limits<float>::quiet_NaN() : -kInf;
      }
      if (c.dtype == DType::bf16)
        v = loom::kernels::bf16_bits_to_f32(loom::kernels::f32_to_bf16_bits(v));
      x[static_cast<std::size_t>(r * c.x_stride + j)] = v;
    }
  }
  return x;
}

// Host floats to the dtype's bytes, and back.
std::vector<std::uint8_t> to_bytes(const std::vector<float>& v, DType d) {
  std::vector<std::uint8_t> out(v.size() * element_bytes(d));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (d == DType::f32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t b = loom::kernels::f32_to_bf16_bits(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

float element(const std::vector<std::uint8_t>& bytes, DType d, std::size_t i) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, bytes.data() + 2 * i, 2);
  return loom::kernels::bf16_bits_to_f32(b);
}

std::string describe(const Case& c, SoftmaxVariant v) {
  return std::string(to_string(v)) + " " + std::string(loom::to_string(c.dtype)) + " " +
         std::to_string(c.rows) + "x" + std::to_string(c.cols) + " strides " +
         std::to_string(c.x_stride) + "/" + std::to_string(c.y_stride) +
         (c.in_place ? " in place" : "") + (c.kind == Rows::extreme ? " extreme" : "") +
         (c.kind == Rows::tiny ? " tiny" : "");
}

// `offset`: x and y start that many elements into their buffers, whose
// first elements hold other values (x) or poison (y), which must stay.
void check(const Case& c, SoftmaxVariant variant, std::int64_t offset = 0) {
  auto rng = loom::test::random_engine();
  const auto x = make_rows(c, rng);
  const SoftmaxShape shape{c.rows, c.cols, c.x_stride, c.in_place ? c.x_stride : c.y_stride};
  const std::size_t eb = element_bytes(c.dtype);
  auto x_bytes = to_bytes(x, c.dtype);
  std::vector<std::uint8_t> prefix(static_cast<std::size_t>(offset) * eb, 0x3C);
  x_bytes.insert(x_bytes.begin(), prefix.begin(), prefix.end());
  // The reference over the same bytes, into a NaN-poisoned buffer of y's layout.
  const std::size_t y_elems = static_cast<std::size_t>(c.rows * shape.y_row_stride);
  std::vector<std::uint8_t> want(y_elems * eb + prefix.size(), 0xFF);
  loom::kernels::softmax_reference(x_bytes.data() + prefix.size(), want.data() + prefix.size(),
                                   c.dtype, shape);

  loom::test::DeviceBuffer<std::uint8_t> d_x(x_bytes.size());
  loom::test::DeviceBuffer<std::uint8_t> d_y(want.size());
  d_x.upload(x_bytes);
  d_y.poison();
  const std::size_t ws_bytes = loom::kernels::softmax_workspace_bytes(shape, variant);
  loom::test::DeviceBuffer<std::uint8_t> d_ws(ws_bytes);
  loom::detail::Stream stream(0, 0);
  std::uint8_t* y = (c.in_place ? d_x.data() : d_y.data()) + prefix.size();
  loom::kernels::softmax(d_x.data() + prefix.size(), y, c.dtype, shape,
                         ws_bytes > 0 ? d_ws.data() : nullptr, stream.view(), variant);
  stream.synchronize();
  auto got = c.in_place ? d_x.download() : d_y.download();
  const auto& untouched = c.in_place ? x_bytes : want;
  EXPECT_EQ(std::memcmp(got.data(), untouched.data(), prefix.size()), 0)
      << describe(c, variant) << ": the elements before the start were written";
  got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(prefix.size()));
  want.erase(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(prefix.size()));
  x_bytes.erase(x_bytes.begin(), x_bytes.begin() + static_cast<std::ptrdiff_t>(prefix.size()));

  std::size_t bad = 0;
  std::size_t first_bad = 0;
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t j = 0; j < shape.y_row_stride; ++j) {
      const auto i = static_cast<std::size_t>(r * shape.y_row_stride + j);
      bool ok = true;
      if (j < c.cols) {
        ok = close(element(got, c.dtype, i), element(want, c.dtype, i), c.dtype);
      } else if (c.in_place) {
        ok = std::memcmp(got.data() + i * eb, x_bytes.data() + i * eb, eb) == 0;
      } else {
        ok = std::memcmp(got.data() + i * eb, want.data() + i * eb, eb) == 0;  // still 0xFF
      }
      if (!ok && bad++ == 0) first_bad = i;
    }
  }
  EXPECT_EQ(bad, 0U) << describe(c, variant) << " offset " << offset << ": first at element "
                     << first_bad << " got " << element(got, c.dtype, first_bad) << " want "
                     << element(want, c.dtype, first_bad);
}

class SoftmaxGpu : public ::testing::TestWithParam<std::tuple<SoftmaxVariant, DType>> {
 protected:
  SoftmaxVariant variant() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(SoftmaxGpu, EveryRowLengthMatchesTheReference) {
  LOOM_REQUIRE_GPU();
  const std::int64_t shapes[][2] = {
      {1, 1},       {3, 31},      {4, 32},     {5, 33},      {7, 1000},    {9, 1024},
      {6, 1025},    {3, 4097},    {2, 8192},   {2, 16384},   {3, 16385},   {2, 32768},
      {2, 32769},   {1, 65536},   {3, 100003}, {1, 1000003}, {260, 33000}, {40, 65536},
      {33, 262136}, {32, 262145}, {31, 100000}};
  for (const auto& s : shapes) {
    check({dtype(), s[0], s[1], s[1], s[1], false, Rows::random}, variant());
  }
}

TEST_P(SoftmaxGpu, StridedRowsAndInPlace) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t cols : {std::int64_t{31}, std::int64_t{64}, std::int64_t{1000},
                            std::int64_t{4096}, std::int64_t{20000}, std::int64_t{40000}}) {
    check({dtype(), 5, cols, cols + 8, cols + 16, false, Rows::random}, variant());  // aligned
    check({dtype(), 5, cols, cols + 3, cols + 1, false, Rows::random}, variant());   // not
    check({dtype(), 5, cols, cols + 8, cols + 8, true, Rows::random}, variant());
    check({dtype(), 5, cols, cols + 3, cols + 3, false, Rows::random}, variant());  // peeled
  }
}

// Rows that start off a 16-byte boundary, each by the same amount in x and
// y (so the ends are peeled and the middle is wide) or by different ones,
// at every length class: warp, block, cluster and split rows.
TEST_P(SoftmaxGpu, RowsStartingOffABoundary) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t offset : {std::int64_t{1}, std::int64_t{3}, std::int64_t{5}}) {
    for (const auto& s : std::vector<std::array<std::int64_t, 2>>{
             {7, 20}, {5, 1000}, {4, 4099}, {3, 30000}, {34, 40001}, {2, 70000}}) {
      check({dtype(), s[0], s[1], s[1], s[1], false, Rows::random}, variant(), offset);
      check({dtype(), s[0], s[1], s[1] + 1, s[1] + 1, true, Rows::random}, variant(), offset);
    }
  }
  check({dtype(), 40, 50000, 50001, 50003, false, Rows::random}, variant(), 2);  // unequal
}

TEST_P(SoftmaxGpu, LargeMagnitudesMinusInfinityAndARowOfMinusInfinity) {
  LOOM_REQUIRE_GPU();
  for (std::int64_t cols : {std::int64_t{1}, std::int64_t{17}, std::int64_t{1024},
                            std::int64_t{4097}, std::int64_t{32769}, std::int64_t{100000}}) {
    check({dtype(), 6, cols, cols, cols, false, Rows::extreme}, variant());
  }
  check({dtype(), 300, 40000, 40000, 40000, false, Rows::extreme}, variant());
}

// Outputs in the subnormal range survive (the kernels' exponentials flush
// subnormals; their bias must keep these), at every length class.
TEST_P(SoftmaxGpu, SubnormalOutputsAreKept) {
  LOOM_REQUIRE_GPU();
  for (const auto& s : std::vector<std::array<std::int64_t, 2>>{
           {4, 17}, {5, 1000}, {4, 4097}, {3, 30000}, {34, 40001}, {2, 100003}, {1, 1000003}}) {
    check({dtype(), s[0], s[1], s[1], s[1], false, Rows::tiny}, variant());
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SoftmaxGpu,
                         ::testing::Combine(::testing::Values(SoftmaxVariant::naive,
                                                              SoftmaxVariant::online,
                                                              SoftmaxVariant::fused),
                                            ::testing::Values(DType::f32, DType::bf16)),
                         [](const auto& param_info) {
                           return std::string(to_string(std::get<0>(param_info.param))) + "_" +
                                  std::string(loom::to_string(std::get<1>(param_info.param)));
                         });

TEST(SoftmaxOpGpu, ThroughAGraphOnTheCudaBackend) {
  LOOM_REQUIRE_GPU();
  auto rng = loom::test::random_engine();
  loom::Runtime rt;
  ASSERT_EQ(rt.backend(), loom::Backend::cuda);
  // A column slice (strided rows), a few long rows in bf16 (the split path
  // and its workspace), and an in-place softmax by name.
  const std::int64_t rows = 65;
  const std::int64_t cols = 1000;
  std::vector<float> wide_host =
      loom::test::random_floats(static_cast<std::size_t>(rows * 1200), rng, -5, 5);
  std::vector<float> out_host(static_cast<std::size_t>(rows * cols), -1.0F);
  auto h_wide = rt.provide(wide_host.data(), DType::f32, {rows, 1200}, loom::Memory::pageable);
  auto h_out = rt.provide(out_host.data(), DType::f32, {rows, cols}, loom::Memory::pageable);
  auto wide = rt.tensor<float>({rows, 1200});
  auto y = rt.tensor<float>({rows, cols});
  auto again = rt.tensor<float>({rows, cols});

  const std::int64_t long_rows = 3;
  const std::int64_t long_cols = 200003;
  const Case long_case{DType::bf16, long_rows, long_cols,   long_cols,
                       long_cols,   false,     Rows::random};
  const auto long_x = to_bytes(make_rows(long_case, rng), DType::bf16);
  std::vector<std::uint8_t> long_y(long_x.size(), 0xFF);
  auto h_lx = rt.provide(const_cast<std::uint8_t*>(long_x.data()), DType::bf16,
                         {long_rows, long_cols}, loom::Memory::pageable);
  auto h_ly =
      rt.provide(long_y.data(), DType::bf16, {long_rows, long_cols}, loom::Memory::pageable);
  auto lx = rt.tensor<loom::bfloat16>({long_rows, long_cols});
  auto ly = rt.tensor<loom::bfloat16>({long_rows, long_cols});

  loom::Graph g;
  g.copy(h_wide, wide);
  g.copy(h_lx, lx);
  g.add(loom::ops::softmax(wide.slice(1, 100, 100 + cols), y));
  g.copy(wide.slice(1, 100, 100 + cols), again);
  g.add(loom::ops::softmax(again, again, loom::ops::SoftmaxVariant::online));
  g.add(loom::ops::softmax(lx, ly));
  g.copy(y, h_out);
  g.copy(ly, h_ly);
  rt.submit(g).wait();

  std::vector<float> want(out_host.size());
  loom::kernels::softmax_reference(wide_host.data() + 100, want.data(), DType::f32,
                                   SoftmaxShape{rows, cols, 1200, cols});
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    bad += close(out_host[i], want[i], DType::f32) ? 0 : 1;
  EXPECT_EQ(bad, 0U) << "strided rows through the graph";

  std::vector<float> again_host(want.size());
  auto h_again = rt.provide(again_host.data(), DType::f32, {rows, cols}, loom::Memory::pageable);
  rt.copy(again, h_again).wait();
  bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    bad += close(again_host[i], want[i], DType::f32) ? 0 : 1;
  EXPECT_EQ(bad, 0U) << "in place through the graph";

  std::vector<std::uint8_t> long_want(long_x.size());
  loom::kernels::softmax_reference(long_x.data(), long_want.data(), DType::bf16,
                                   SoftmaxShape{long_rows, long_cols, long_cols, long_cols});
  bad = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(long_rows * long_cols); ++i) {
    bad += close(element(long_y, DType::bf16, i), element(long_want, DType::bf16, i), DType::bf16)
               ? 0
               : 1;
  }
  EXPECT_EQ(bad, 0U) << "long bf16 rows through the graph";
}

TEST(SoftmaxOpGpu, HostTensorsAreRejectedByTheCudaBackendNamingTheTask) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto host = rt.tensor<float>({4, 8}, loom::Memory::pageable);
  auto dev = rt.tensor<float>({4, 8});
  for (const auto& [x, y, words] :
       {std::tuple{host, dev, "one memory space"},
        std::tuple{host, rt.tensor<float>({4, 8}, loom::Memory::pageable), "is not on device 0"}}) {
    loom::Graph g;
    g.add(loom::ops::softmax(x, y), {.name = "logits"});
    try {
      (void)rt.submit(g);
      ADD_FAILURE() << "accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "logits");
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

}  // namespace
