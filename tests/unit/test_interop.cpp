#include <loom/cuda_interop.hpp>
#include <loom/version.hpp>

#include <gtest/gtest.h>

#include <string>
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
