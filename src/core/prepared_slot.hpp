#pragma once
// Where a runtime keeps what it derived from a graph (see Graph::prepared_).
// Type-erased: the core layer knows graphs, not the scheduler that fills it.

#include <loom/graph.hpp>

#include <cstdint>
#include <memory>
#include <mutex>

namespace loom::detail {

struct PreparedSlot {
  std::mutex mutex;
  std::uint64_t owner = 0;            ///< which executor filled it (0: none)
  std::shared_ptr<const void> value;  ///< that executor's prepared form
};

/// The scheduler's way into a graph's slot.
struct GraphAccess {
  /// The graph's slot; null for a graph with no tasks.
  static const std::shared_ptr<PreparedSlot>& slot(const Graph& g) noexcept { return g.prepared_; }
  /// Cuts a snapshot off its original's slot (a snapshot kept inside the
  /// slot's value would otherwise keep the slot, and itself, alive).
  static void detach(Graph& snapshot) noexcept { snapshot.prepared_.reset(); }
};

}  // namespace loom::detail
