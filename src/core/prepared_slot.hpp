#pragma once
// Where a runtime keeps what it derived from a graph (see Graph::prepared_).
// Type-erased: the core layer knows graphs, not the scheduler that fills it.

#include <loom/graph.hpp>

#include <cstddef>
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
  /// Replaces `g`'s slot (Preparer::adopt).
  static void give_slot(Graph& g, std::shared_ptr<PreparedSlot> slot) noexcept {
    g.prepared_ = std::move(slot);
  }
  /// What a runtime runs of `g`: its tasks, edges and intermediates, without
  /// its build history (the accesses that infer edges for tasks added later,
  /// the names given): no copy of what running never reads. Detached (no
  /// slot). Not to be built on: a task added to it would miss inferred edges.
  static Graph snapshot(const Graph& g);
  /// Entries of `g`'s build history (storages tracked, names asked for): tests.
  static std::size_t history_entries(const Graph& g) noexcept {
    return g.history_.size() + g.names_.size() + g.spaces_by_address_.size();
  }
};

}  // namespace loom::detail
