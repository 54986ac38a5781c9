// Tensors on the CPU backend: shapes, views without copies, provide/take,
// host copies, and the errors for bad input.
#include <loom/error.hpp>
#include <loom/runtime.hpp>
#include <loom/tensor.hpp>

#include <gtest/gtest.h>

#include "support/cpu.hpp"
#include "support/seed.hpp"

#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace {

using loom::test::cpu;

std::vector<float> iota_floats(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0F);
  return v;
}

TEST(Dims, ShapeBasics) {
  const loom::Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.product(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  EXPECT_EQ(loom::contiguous_strides(s), (loom::Strides{12, 4, 1}));
  EXPECT_EQ(loom::Shape{}.product(), 1);
  EXPECT_THROW((loom::Shape{1, 2, 3, 4, 5, 6, 7, 8, 9}), loom::InvalidArgument);
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(loom::bytes_for(loom::DType::f32, 3), 12U);
  EXPECT_EQ(loom::bytes_for(loom::DType::bf16, 3), 6U);
  EXPECT_EQ(loom::bytes_for(loom::DType::i4, 3), 2U) << "packed, rounded up";
  EXPECT_EQ(loom::bytes_for(loom::DType::i64, 2), 16U);
  static_assert(loom::dtype_of<std::uint8_t>() == loom::DType::u8);
  static_assert(loom::dtype_of<loom::bfloat16>() == loom::DType::bf16);
  EXPECT_EQ(loom::to_string(loom::DType::i4), "i4");
}

TEST(Tensor, AllocatesFromThePoolOfItsSpace) {
  loom::Runtime rt(cpu());
  EXPECT_FALSE(rt.has_gpu());
  EXPECT_EQ(rt.default_memory(), loom::Memory::pageable);
  auto t = rt.tensor<float>({3, 5});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60U);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.memory(), loom::Memory::pageable);
  EXPECT_NE(t.data(), nullptr);
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).allocations, 1U);
  EXPECT_THROW((void)t.data_as<std::int32_t>(), loom::InvalidArgument);
  EXPECT_EQ(t.describe(), "f32[3, 5] (strides [5, 1], offset 0) on pageable host");
}

TEST(Tensor, StorageReturnsToThePoolWhenTheLastViewGoes) {
  loom::Runtime rt(cpu());
  void* first = nullptr;
  {
    auto t = rt.tensor<float>({256});
    auto view = t.slice(0, 10, 20);
    first = t.data();
    t = loom::Tensor();
    EXPECT_EQ(rt.statistics(loom::Memory::pageable).in_use_bytes, 1024U) << "the view keeps it";
  }
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).in_use_bytes, 0U);
  EXPECT_EQ(rt.tensor<float>({256}).data(), first) << "the pool hands the block out again";
}

TEST(Tensor, WithoutAGpuPinnedAndDeviceMemoryAreRefusedSayingWhy) {
  loom::Runtime rt(cpu());
  EXPECT_THROW((void)rt.tensor<float>({4}, loom::Memory::pinned), loom::NoDevice);
  try {
    (void)rt.tensor<float>({4}, loom::Memory::on_device(0));
    FAIL();
  } catch (const loom::NoDevice& e) {
    EXPECT_NE(std::string(e.what()).find("CPU backend"), std::string::npos) << e.what();
  }
}

TEST(TensorViews, SliceSharesStorageAndOffsets) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({4, 6});
  const auto values = iota_floats(24);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  auto rows = t.slice(0, 1, 3);
  EXPECT_TRUE(rows.shares_storage_with(t));
  EXPECT_EQ(rows.shape(), (loom::Shape{2, 6}));
  EXPECT_EQ(rows.data_as<float>()[0], 6.0F);
  auto cols = t.slice(1, 1, -1, 2);  // columns 1 and 3
  EXPECT_EQ(cols.shape(), (loom::Shape{4, 2}));
  EXPECT_EQ(cols.strides(), (loom::Strides{6, 2}));
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.data_as<float>()[0], 1.0F);
  EXPECT_EQ(t.slice(0, 5, 9).numel(), 0) << "clamped to the extent";
  EXPECT_THROW((void)t.slice(2, 0, 1), loom::InvalidArgument);
  EXPECT_THROW((void)t.slice(0, 0, 1, 0), loom::InvalidArgument);
}

TEST(TensorViews, TransposeAndContiguousCopyOnlyWhenNeeded) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({2, 3});
  const auto values = iota_floats(6);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  auto tt = t.transpose(0, 1);
  EXPECT_EQ(tt.shape(), (loom::Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_TRUE(t.contiguous().shares_storage_with(t)) << "already contiguous: no copy";
  auto c = tt.contiguous();
  EXPECT_FALSE(c.shares_storage_with(t));
  EXPECT_TRUE(c.is_contiguous());
  const float expected[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data_as<float>()[i], expected[i]) << i;
}

TEST(TensorViews, ReshapeViewsContiguousDataAndRefusesStridedData) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<std::int32_t>({4, 6});
  auto r = t.reshape({2, -1, 3});
  EXPECT_EQ(r.shape(), (loom::Shape{2, 4, 3}));
  EXPECT_TRUE(r.shares_storage_with(t));
  EXPECT_THROW((void)t.reshape({5, 5}), loom::InvalidArgument);
  EXPECT_THROW((void)t.reshape({-1, -1}), loom::InvalidArgument);
  try {
    (void)t.transpose(0, 1).reshape({24});
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous() first"), std::string::npos) << e.what();
  }
}

TEST(TensorViews, PackedInt4ViewsKeepWholeBytes) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor(loom::DType::i4, {4, 8});
  EXPECT_EQ(t.nbytes(), 16U);
  EXPECT_NO_THROW((void)t.slice(0, 1, 3));
  EXPECT_NO_THROW((void)t.slice(1, 2, 6));
  EXPECT_THROW((void)t.slice(1, 1, 4), loom::InvalidArgument) << "odd start splits a byte";
  EXPECT_THROW((void)t.transpose(0, 1), loom::InvalidArgument);
}

TEST(Provide, WrapsUserMemoryWithoutOwningIt) {
  loom::Runtime rt(cpu());
  std::vector<float> mine = iota_floats(12);
  {
    auto t = rt.provide(mine.data(), loom::DType::f32, {3, 4}, loom::Memory::pageable);
    EXPECT_EQ(t.data(), mine.data());
    t.data_as<float>()[5] = -1.0F;
    EXPECT_THROW((void)t.take(), loom::InvalidArgument) << "loom does not own it";
  }
  EXPECT_EQ(mine[5], -1.0F) << "still the user's memory";
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).allocations, 0U);
  EXPECT_THROW((void)rt.provide(nullptr, loom::DType::f32, {3}, loom::Memory::pageable),
               loom::InvalidArgument);
}

TEST(Take, HandsPooledMemoryToTheUserAndBackOnRelease) {
  loom::Runtime rt(cpu());
  auto t = rt.tensor<float>({1000});
  auto view = t.slice(0, 0, 10);
  EXPECT_THROW((void)t.take(), loom::InvalidArgument) << "shared with a view";
  view = loom::Tensor();
  EXPECT_THROW((void)t.slice(0, 0, 10).take(), loom::InvalidArgument) << "part of the storage";
  void* expected = t.data();
  std::shared_ptr<void> mine = t.take();
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(mine.get(), expected);
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).in_use_bytes, 4096U);
  mine.reset();
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).in_use_bytes, 0U);
}

TEST(HostCopy, CopiesContiguousAndStridedTensors) {
  loom::Runtime rt(cpu());
  std::mt19937 rng(static_cast<std::uint32_t>(loom::test::fresh_seed()));
  std::uniform_real_distribution<float> dist(-1, 1);
  auto a = rt.tensor<float>({64, 33});
  for (std::int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
  auto b = rt.tensor<float>({64, 33});
  rt.copy(a, b).wait();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  auto at = a.transpose(0, 1);
  auto c = rt.tensor<float>({33, 64});
  rt.copy(at, c).wait();
  for (int i = 0; i < 33; ++i) {
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(c.data_as<float>()[i * 64 + j], a.data_as<float>()[j * 33 + i]);
    }
  }
  EXPECT_TRUE(rt.copy(a, a).ready()) << "the same memory: nothing to do";
}

TEST(HostCopy, MismatchesAreRejectedWithWhatWasExpected) {
  loom::Runtime rt(cpu());
  auto a = rt.tensor<float>({4, 4});
  try {
    (void)rt.copy(a, rt.tensor<float>({4, 5}));
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("f32[4, 4]"), std::string::npos) << what;
    EXPECT_NE(what.find("f32[4, 5]"), std::string::npos) << what;
  }
  EXPECT_THROW((void)rt.copy(a, rt.tensor<std::int32_t>({4, 4})), loom::InvalidArgument);
  EXPECT_THROW((void)rt.copy(a, loom::Tensor()), loom::InvalidArgument);
  EXPECT_THROW((void)rt.copy(a, rt.tensor<float>({4, 4}).transpose(0, 1)), loom::InvalidArgument)
      << "a strided destination";
}

TEST(TensorEdges, OverflowingShapesAreRefused) {
  loom::Runtime rt(cpu());
  EXPECT_THROW((void)rt.tensor<float>({(std::int64_t{1} << 61) + 1}), loom::InvalidArgument);
  EXPECT_THROW((void)rt.tensor<float>({std::int64_t{1} << 32, std::int64_t{1} << 32}),
               loom::InvalidArgument);
  float x = 0;
  EXPECT_THROW(
      (void)rt.provide(&x, loom::DType::f32, {std::int64_t{1} << 62, 4}, loom::Memory::pageable),
      loom::InvalidArgument);
}

TEST(TensorEdges, EmptyTensorsAreContiguousAndCopyable) {
  loom::Runtime rt(cpu());
  auto e = rt.tensor<float>({4, 0});
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(e.nbytes(), 0U);
  EXPECT_NO_THROW((void)e.reshape({0, 7}));
  EXPECT_NO_THROW(rt.copy(e, rt.tensor<float>({4, 0})).wait());
  EXPECT_EQ(rt.tensor<float>({8}).slice(0, 0, 8, std::numeric_limits<std::int64_t>::max()).numel(),
            1);
}

TEST(TensorEdges, OverlappingCopiesAreRefused) {
  loom::Runtime rt(cpu());
  auto r = rt.tensor<float>({8});
  try {
    (void)rt.copy(r.slice(0, 0, 7), r.slice(0, 1, 8));
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(rt.copy(r.slice(0, 0, 4), r.slice(0, 4, 8)).wait()) << "disjoint halves";
}

TEST(TensorEdges, OddInt4CopiesDoNotClobberTheNeighbouringNibble) {
  loom::Runtime rt(cpu());
  auto big = rt.tensor(loom::DType::i4, {8});
  auto src = rt.tensor(loom::DType::i4, {3});
  EXPECT_THROW((void)rt.copy(src, big.slice(0, 0, 3)), loom::InvalidArgument);
  EXPECT_NO_THROW(rt.copy(src, rt.tensor(loom::DType::i4, {3})).wait()) << "a whole tensor";
  EXPECT_NO_THROW(rt.copy(rt.tensor(loom::DType::i4, {4}), big.slice(0, 4, 8)).wait());
}

TEST(Completion, DefaultIsReady) {
  const loom::Completion c;
  EXPECT_TRUE(c.ready());
  EXPECT_NO_THROW(c.wait());
  EXPECT_TRUE(c.wait_for(std::chrono::milliseconds(1)));
  EXPECT_EQ(c.error(), nullptr);
}

}  // namespace
