// Every vector-add variant against the CPU reference: fresh random inputs,
// outputs poisoned first, sizes from 0 through odd sizes to millions, and
// misaligned pointers.
#include "support/gpu.hpp"

#include "cuda/stream.hpp"
#include "elementwise/vector_add.hpp"

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

namespace {

using loom::kernels::MapVariant;

}  // namespace

namespace loom::ops {
// Names the parameter in test names and failure messages.
void PrintTo(MapVariant variant, std::ostream* os) { *os << to_string(variant); }
}  // namespace loom::ops

namespace {

class VectorAddGpu : public ::testing::TestWithParam<MapVariant> {};

void check_against_reference(MapVariant variant, std::size_t n, std::size_t offset) {
  auto rng = loom::test::random_engine();
  const auto a = loom::test::random_floats(n + offset, rng);
  const auto b = loom::test::random_floats(n + offset, rng);
  loom::test::DeviceBuffer<float> da(n + offset);
  loom::test::DeviceBuffer<float> db(n + offset);
  loom::test::DeviceBuffer<float> dc(n + offset);
  da.upload(a);
  db.upload(b);
  dc.poison();
  loom::detail::Stream stream(0, 0);
  loom::kernels::vector_add(da.data() + offset, db.data() + offset, dc.data() + offset, n,
                            stream.view(), variant);
  stream.synchronize();
  const auto c = dc.download();
  std::vector<float> expected(n);
  loom::kernels::vector_add_reference(a.data() + offset, b.data() + offset, expected.data(), n);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // fp32 addition is exact to the rounding of one operation on both sides.
    if (!(c[i + offset] == expected[i])) ++bad;
  }
  EXPECT_EQ(bad, 0U) << to_string(variant) << " n=" << n << " offset=" << offset;
  for (std::size_t i = 0; i < offset; ++i) {
    EXPECT_TRUE(std::isnan(c[i])) << "wrote before the output at " << i;
  }
}

TEST_P(VectorAddGpu, MatchesReferenceAtEverySize) {
  LOOM_REQUIRE_GPU();
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{5},
        std::size_t{255}, std::size_t{1000}, std::size_t{4097}, (std::size_t{1} << 22) + 3}) {
    check_against_reference(GetParam(), n, 0);
  }
}

TEST_P(VectorAddGpu, MisalignedPointersStillCorrect) {
  LOOM_REQUIRE_GPU();
  check_against_reference(GetParam(), 100003, 1);
  check_against_reference(GetParam(), 7, 3);
}

INSTANTIATE_TEST_SUITE_P(Variants, VectorAddGpu,
                         ::testing::Values(MapVariant::automatic, MapVariant::naive,
                                           MapVariant::grid_stride, MapVariant::vectorized),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

}  // namespace
