#pragma once
/// @file priority.hpp
/// Task and stream priorities. On the CUDA backend they map to the device's
/// stream priority range; on host workers, to the order of the ready queue.

#include <string_view>

namespace loom {

enum class Priority { low, normal, high };

inline constexpr int kPriorityLevels = 3;

/// 0 for low, 1 for normal, 2 for high.
constexpr int priority_index(Priority p) noexcept { return static_cast<int>(p); }

constexpr std::string_view to_string(Priority p) noexcept {
  switch (p) {
    case Priority::low: return "low";
    case Priority::normal: return "normal";
    case Priority::high: return "high";
  }
  return "unknown";
}

}  // namespace loom
