#include <loom/cuda_interop.hpp>
#include <loom/version.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

namespace {

TEST(StreamView, CannotBeBuiltFromZeroOrNullptr) {
  static_assert(!std::is_constructible_v<loom::StreamView, int>);
  static_assert(!std::is_constructible_v<loom::StreamView, std::nullptr_t>);
  static_assert(!std::is_convertible_v<cudaStream_t, loom::StreamView>, "explicit only");
  static_assert(std::is_trivially_copyable_v<loom::StreamView>);
  EXPECT_EQ(loom::StreamView::legacy_default().native(), cudaStream_t{});
}

TEST(EventView, CannotBeBuiltFromZeroOrNullptr) {
  static_assert(!std::is_constructible_v<loom::EventView, int>);
  static_assert(!std::is_constructible_v<loom::EventView, std::nullptr_t>);
}

TEST(Version, LibraryMatchesHeaders) {
  const std::string expected = std::to_string(loom::kVersionMajor) + "." +
                               std::to_string(loom::kVersionMinor) + "." +
                               std::to_string(loom::kVersionPatch);
  EXPECT_EQ(loom::version(), expected);
}

}  // namespace

namespace {

struct Packed {
  float* p;
  int n;
};
enum class Mode : short { a, b };

// What loom::launch reports while a compiled graph is built: each
// parameter's bytes at its offset, which are pointers, and whether any
// parameter is of a class type (a pointer could hide inside).
TEST(LaunchRecord, KeepsEachParametersBytesAndKind) {
  float data[4] = {};
  const void* kernel = &data;  // any address: the record only keeps it
  const auto r = loom::detail::record_launch(
      kernel, dim3(7, 2), dim3(64), 96,
      std::tuple<const float*, char, double, int*, Mode>(data + 1, 'x', 2.5, nullptr, Mode::b));
  EXPECT_EQ(r.function, kernel);
  EXPECT_EQ(r.grid[0], 7U);
  EXPECT_EQ(r.grid[1], 2U);
  EXPECT_EQ(r.grid[2], 1U);
  EXPECT_EQ(r.block[0], 64U);
  EXPECT_EQ(r.shared_bytes, 96U);
  EXPECT_TRUE(r.plain);
  ASSERT_EQ(r.params.size(), 5U);
  const std::size_t sizes[] = {8, 1, 8, 8, 2};
  const bool pointers[] = {true, false, false, true, false};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.params[i].size, sizes[i]) << i;
    EXPECT_EQ(r.params[i].pointer, pointers[i]) << i;
    EXPECT_EQ(r.params[i].offset % r.params[i].size, 0U) << "parameter " << i << " misaligned";
    if (i > 0) {
      EXPECT_GE(r.params[i].offset, r.params[i - 1].offset + r.params[i - 1].size);
    }
  }
  EXPECT_EQ(r.bytes.size(), r.params.back().offset + r.params.back().size);
  const float* p = nullptr;
  std::memcpy(&p, r.bytes.data() + r.params[0].offset, sizeof p);
  EXPECT_EQ(p, data + 1);
  double d = 0;
  std::memcpy(&d, r.bytes.data() + r.params[2].offset, sizeof d);
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(static_cast<char>(r.bytes[r.params[1].offset]), 'x');
}

TEST(LaunchRecord, AClassParameterMakesTheLaunchOpaque) {
  float x = 0;
  const auto r = loom::detail::record_launch(nullptr, dim3(1), dim3(1), 0,
                                             std::tuple<Packed, int>(Packed{&x, 3}, 1));
  EXPECT_FALSE(r.plain) << "a struct may hide a pointer that re-pointing would miss";
  ASSERT_EQ(r.params.size(), 2U);
  EXPECT_FALSE(r.params[0].pointer);
  const auto none = loom::detail::record_launch(nullptr, dim3(1), dim3(1), 0, std::tuple<>());
  EXPECT_TRUE(none.plain);
  EXPECT_TRUE(none.params.empty());
}

struct Stateless {};
struct Shape2 {
  static constexpr bool loom_pointer_free = true;
  long rows, cols;
};
struct TwoPointers {
  int n;
  float* a;
  const float* b;
  static constexpr std::array<std::size_t, 2> loom_pointer_offsets() {
    return {offsetof(TwoPointers, a), offsetof(TwoPointers, b)};
  }
};

// A class that holds no pointer (empty, or saying so) keeps the launch
// plain; one that says where its pointers are does too, and its pointers
// are found at their place in the record's bytes.
TEST(LaunchRecord, ClassesThatDeclareTheirPointersStayPlain) {
  float x = 0;
  float y = 0;
  const auto r =
      loom::detail::record_launch(nullptr, dim3(1), dim3(1), 0,
                                  std::tuple<Stateless, Shape2, char, TwoPointers>(
                                      Stateless{}, Shape2{3, 4}, 'c', TwoPointers{5, &x, &y}));
  EXPECT_TRUE(r.plain);
  ASSERT_EQ(r.params.size(), 4U);
  ASSERT_EQ(r.inner_pointers.size(), 2U);
  float* a = nullptr;
  const float* b = nullptr;
  std::memcpy(&a, r.bytes.data() + r.inner_pointers[0], sizeof a);
  std::memcpy(&b, r.bytes.data() + r.inner_pointers[1], sizeof b);
  EXPECT_EQ(a, &x);
  EXPECT_EQ(b, &y);
  EXPECT_EQ(r.inner_pointers[0], r.params[3].offset + offsetof(TwoPointers, a));
}

}  // namespace
