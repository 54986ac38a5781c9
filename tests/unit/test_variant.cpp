// One way to choose a kernel in every family (loom/ops/variant.hpp): an enum
// with automatic first, named by one table that prints, parses and lists.
#include "support/cpu.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace {

template <class Variant>
void expect_one_table(std::string_view family) {
  const auto& names = loom::ops::VariantNames<Variant>::names;
  ASSERT_FALSE(names.empty()) << family;
  EXPECT_EQ(names.front(), "automatic") << family << ": automatic comes first";
  EXPECT_EQ(Variant{}, static_cast<Variant>(0)) << family << ": the default value is automatic";
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto v = static_cast<Variant>(i);
    EXPECT_TRUE(loom::ops::is_known(v));
    EXPECT_EQ(to_string(v), names[i]) << family;
    EXPECT_EQ(loom::ops::parse_variant<Variant>(names[i]), v) << family;
    listed += (i ? ", " : "") + std::string(names[i]);
  }
  EXPECT_EQ(loom::ops::variant_list<Variant>(), listed);
  const auto outside = static_cast<Variant>(names.size());
  EXPECT_FALSE(loom::ops::is_known(outside));
  EXPECT_EQ(to_string(outside), "unknown");
  EXPECT_FALSE(loom::ops::parse_variant<Variant>("auto").has_value()) << family;
  EXPECT_FALSE(loom::ops::parse_variant<Variant>("").has_value()) << family;
}

TEST(Variants, EveryFamilyNamesItsKernelsFromOneTable) {
  expect_one_table<loom::ops::GrayVariant>("gray");
  expect_one_table<loom::ops::BlurVariant>("blur");
  expect_one_table<loom::ops::HistogramVariant>("histogram");
  expect_one_table<loom::ops::SoftmaxVariant>("softmax");
  expect_one_table<loom::ops::ReductionVariant>("reduction");
  expect_one_table<loom::ops::MatmulVariant>("matmul");
}

TEST(Variants, AValueOutsideTheFamilyIsRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(loom::test::cpu());
  auto x = rt.tensor<float>({16});
  auto out = rt.tensor<float>({1});
  loom::Graph g;
  g.add(loom::ops::sum(x, out, {.variant = static_cast<loom::ops::ReductionVariant>(6)}),
        {.name = "total"});
  try {
    rt.submit(g).wait();
    FAIL() << "an unknown variant was accepted";
  } catch (const loom::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("total"), std::string::npos) << what;
    EXPECT_NE(what.find("unknown variant 6 (automatic, interleaved, divergence_free, shared, "
                        "coarsened, warp_shuffle)"),
              std::string::npos)
        << what;
  }
}

}  // namespace
