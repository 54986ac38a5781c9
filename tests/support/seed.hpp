#pragma once
// Seeds for tests with random inputs: fresh each run, printed with the test's
// name so that a failure can be replayed, and fixed by LOOM_TEST_SEED=<n>.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace loom::test {

/// A fresh seed (or LOOM_TEST_SEED's), printed and recorded in the test's XML.
inline std::uint64_t fresh_seed() {
  std::uint64_t seed = 0;
  if (const char* fixed = std::getenv("LOOM_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    seed = std::strtoull(fixed, nullptr, 10);
  } else {
    static std::random_device device;
    seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[   SEED   ] %s.%s: %llu (replay with LOOM_TEST_SEED=%llu)\n",
              info != nullptr ? info->test_suite_name() : "?", info != nullptr ? info->name() : "?",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace loom::test
