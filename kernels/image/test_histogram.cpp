// The histogram op on the CPU: the reference against a hand-checked case,
// the op through a graph (the reference is what runs) against a plain count
// on random images of awkward sizes and ranks and on one-value images, every
// variant name, replays that overwrite rather than accumulate, and bad inputs
// rejected at submit naming the task.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "image/histogram.hpp"
#include "image/test_support.hpp"
#include "support/cpu.hpp"
#include "support/rejection.hpp"
#include "support/seed.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::test::cpu;
using loom::test::image::Bytes;
using loom::test::image::random_bytes;
using Counts = std::vector<std::int32_t>;

constexpr std::int32_t kPoison = 0x5A5A5A5A;

// The histogram the slow way: one pass over the image per value.
Counts plain_count(const Bytes& image) {
  Counts counts(256);
  for (int v = 0; v < 256; ++v) {
    counts[static_cast<std::size_t>(v)] =
        static_cast<std::int32_t>(std::count(image.begin(), image.end(), v));
  }
  return counts;
}

Counts read_counts(const loom::Tensor& counts) {
  const auto* p = counts.data_as<std::int32_t>();
  return {p, p + 256};
}

// The op's counts for `pixels` laid out as `shape`, counts poisoned first.
Counts histogram_through_graph(
    loom::Runtime& rt, const Bytes& pixels, const loom::Shape& shape,
    loom::ops::HistogramVariant variant = loom::ops::HistogramVariant::automatic) {
  auto image = rt.tensor<std::uint8_t>(shape);
  if (!pixels.empty()) std::memcpy(image.data(), pixels.data(), pixels.size());
  auto counts = rt.tensor<std::int32_t>({256});
  std::fill_n(counts.data_as<std::int32_t>(), 256, kPoison);
  loom::Graph g;
  g.add(loom::ops::histogram(image, counts, variant));
  rt.submit(g).wait();
  return read_counts(counts);
}

std::int64_t total(const Counts& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

TEST(HistogramReference, CountsEachValueAndOverwrites) {
  const Bytes image = {0, 255, 7, 7, 0, 7, 128};
  Counts counts(256, kPoison);
  loom::kernels::histogram_reference(image.data(), image.size(), counts.data());
  Counts want(256, 0);
  want[0] = 2;
  want[7] = 3;
  want[128] = 1;
  want[255] = 1;
  EXPECT_EQ(counts, want);
  // Again over the same counts: overwritten, not accumulated; none for no pixels.
  loom::kernels::histogram_reference(image.data(), image.size(), counts.data());
  EXPECT_EQ(counts, want);
  loom::kernels::histogram_reference(image.data(), 0, counts.data());
  EXPECT_EQ(counts, Counts(256, 0));
}

TEST(HistogramOpsCpu, MatchesAPlainCountAtAwkwardSizesAndRanks) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  const loom::Shape shapes[] = {{1}, {17}, {1000, 999}, {3, 37, 53}, {2, 3, 5, 7}, {1, 1}};
  for (const loom::Shape& shape : shapes) {
    const Bytes pixels = random_bytes(static_cast<std::size_t>(shape.product()), rng);
    const Counts got = histogram_through_graph(rt, pixels, shape);
    EXPECT_EQ(got, plain_count(pixels)) << shape.to_string();
    EXPECT_EQ(total(got), shape.product()) << shape.to_string();
  }
}

TEST(HistogramOpsCpu, AnEmptyImageGivesZeroCounts) {
  loom::Runtime rt(cpu(1));
  EXPECT_EQ(histogram_through_graph(rt, {}, {0}), Counts(256, 0));
  EXPECT_EQ(histogram_through_graph(rt, {}, {4, 0, 3}), Counts(256, 0));
}

TEST(HistogramOpsCpu, OneValueImagesFillOneBin) {
  loom::Runtime rt(cpu(1));
  for (int value : {0, 1, 127, 254, 255}) {
    const Bytes pixels(480 * 640, static_cast<std::uint8_t>(value));
    Counts want(256, 0);
    want[static_cast<std::size_t>(value)] = 480 * 640;
    EXPECT_EQ(histogram_through_graph(rt, pixels, {480, 640}), want) << value;
  }
}

TEST(HistogramOpsCpu, EveryVariantCountsTheSame) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  const Bytes pixels = random_bytes(61 * 67, rng);
  const Counts want = plain_count(pixels);
  for (std::string_view name : loom::ops::VariantNames<loom::ops::HistogramVariant>::names) {
    const auto variant = loom::ops::parse_variant<loom::ops::HistogramVariant>(name);
    ASSERT_TRUE(variant.has_value()) << name;
    EXPECT_EQ(loom::ops::to_string(*variant), name);
    EXPECT_EQ(histogram_through_graph(rt, pixels, {61, 67}, *variant), want) << name;
  }
  EXPECT_FALSE(loom::ops::parse_variant<loom::ops::HistogramVariant>("auto").has_value());
}

TEST(HistogramOpsCpu, CompiledReplaysOverwriteTheCounts) {
  auto rng = std::mt19937_64(loom::test::fresh_seed());
  loom::Runtime rt(cpu(2));
  auto image = rt.tensor<std::uint8_t>({123, 45});
  auto counts = rt.tensor<std::int32_t>({256});
  loom::Graph g;
  g.add(loom::ops::histogram(image, counts));
  auto exe = rt.compile(g);
  for (int replay = 0; replay < 3; ++replay) {
    const Bytes pixels = random_bytes(123 * 45, rng);
    std::memcpy(image.data(), pixels.data(), pixels.size());
    if (replay == 0) std::fill_n(counts.data_as<std::int32_t>(), 256, kPoison);
    exe.run().wait();
    EXPECT_EQ(read_counts(counts), plain_count(pixels)) << "replay " << replay;
  }
}

using loom::test::expect_rejected;

TEST(HistogramOpsCpu, BadInputsAreRejectedAtSubmitNamingTheTask) {
  loom::Runtime rt(cpu(1));
  auto image = rt.tensor<std::uint8_t>({8, 9});
  auto counts = rt.tensor<std::int32_t>({256});
  using loom::ops::histogram;
  expect_rejected(rt, histogram(rt.tensor<float>({8, 9}), counts), "image must be u8");
  expect_rejected(rt, histogram(rt.tensor<std::int8_t>({8, 9}), counts), "image must be u8");
  expect_rejected(rt, histogram(image, rt.tensor<std::uint8_t>({256})), "counts must be i32");
  expect_rejected(rt, histogram(image, rt.tensor<std::int64_t>({256})), "counts must be i32");
  expect_rejected(rt, histogram(image, rt.tensor<std::int32_t>({255})), "counts must be [256]");
  expect_rejected(rt, histogram(image, rt.tensor<std::int32_t>({16, 16})), "counts must be [256]");
  expect_rejected(rt, histogram(image, rt.tensor<std::int32_t>({1, 256})), "counts must be [256]");
  expect_rejected(rt, histogram(image, counts, static_cast<loom::ops::HistogramVariant>(9)),
                  "unknown variant 9 (automatic, global_atomics, shared)");
  auto wide = rt.tensor<std::uint8_t>({8, 18});
  expect_rejected(rt, histogram(wide.slice(1, 0, 9), counts), "image must be contiguous");
  expect_rejected(rt, histogram(wide.slice(1, 0, 18, 2), counts), "image must be contiguous");
  auto long_counts = rt.tensor<std::int32_t>({512});
  expect_rejected(rt, histogram(image, long_counts.slice(0, 0, 512, 2)),
                  "counts must be contiguous");
  // A contiguous slice of a bigger tensor is fine, at any offset.
  auto bytes = rt.tensor<std::uint8_t>({100});
  std::memset(bytes.data(), 3, 100);
  loom::Graph g;
  g.add(histogram(bytes.slice(0, 5, 55), counts));
  rt.submit(g).wait();
  EXPECT_EQ(counts.data_as<std::int32_t>()[3], 50);
}

}  // namespace
