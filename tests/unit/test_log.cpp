#include <loom/log.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

TEST(Log, ParsesEveryLevelCaseInsensitively) {
  EXPECT_EQ(loom::parse_log_level("trace"), loom::LogLevel::trace);
  EXPECT_EQ(loom::parse_log_level("DEBUG"), loom::LogLevel::debug);
  EXPECT_EQ(loom::parse_log_level("Info"), loom::LogLevel::info);
  EXPECT_EQ(loom::parse_log_level("warn"), loom::LogLevel::warn);
  EXPECT_EQ(loom::parse_log_level("warning"), loom::LogLevel::warn);
  EXPECT_EQ(loom::parse_log_level("error"), loom::LogLevel::error);
  EXPECT_EQ(loom::parse_log_level("off"), loom::LogLevel::off);
  EXPECT_FALSE(loom::parse_log_level("").has_value());
  EXPECT_FALSE(loom::parse_log_level("loud").has_value());
  EXPECT_FALSE(loom::parse_log_level("debugx").has_value());
}

TEST(Log, NamesRoundTrip) {
  for (auto level : {loom::LogLevel::trace, loom::LogLevel::debug, loom::LogLevel::info,
                     loom::LogLevel::warn, loom::LogLevel::error, loom::LogLevel::off}) {
    EXPECT_EQ(loom::parse_log_level(loom::to_string(level)), level);
  }
}

TEST(Log, SetLevelIsVisible) {
  const auto before = loom::log_level();
  loom::set_log_level(loom::LogLevel::error);
  EXPECT_EQ(loom::log_level(), loom::LogLevel::error);
  loom::set_log_level(before);
  EXPECT_EQ(loom::log_level(), before);
}

// Run by ctest with LOOM_LOG_LEVEL set (see tests/CMakeLists.txt): the level
// the logger starts with comes from the environment, a bad value falls back
// to the default.
TEST(LogEnvironment, StartsAtTheLevelFromTheEnvironment) {
  const char* expected = std::getenv("LOOM_EXPECT_LOG_LEVEL");
  if (expected == nullptr) GTEST_SKIP() << "run through ctest, which sets LOOM_LOG_LEVEL";
  EXPECT_EQ(loom::log_level(), loom::parse_log_level(expected));
}

}  // namespace
