#pragma once
// A graph as one executor runs it: an immutable snapshot of the tasks,
// validated, with its plan and each stream's launch order. Made at the first
// submit and kept in the graph's slot, so that submitting the same graph
// again copies and plans nothing; shared by every run of it.

#include "sched/plan.hpp"
#include "sched/run_ordering.hpp"

#include <loom/graph.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::detail {

struct PreparedGraph {
  Graph graph;  ///< the snapshot: tasks, edges, intermediates (GraphAccess::snapshot)
  Plan plan;
  std::vector<std::vector<std::uint32_t>> stream_plan;  ///< device tasks per stream, plan order
  std::vector<std::uint32_t> roots;                     ///< tasks with no predecessor, plan order
  std::vector<std::uint32_t> device_order;  ///< device tasks in plan order, across streams
  std::vector<std::uint32_t> stream_pos;    ///< a device task's index in its stream's list
  bool uses_streams = false;                ///< some task runs on a stream
  bool device_only = true;           ///< every task runs on a stream (no host or staged task)
  std::vector<DataAccess> accesses;  ///< what the graph reads and writes, for ordering across runs
  std::shared_ptr<const std::vector<std::string>> names;  ///< task names, for reports

  const std::vector<Task>& tasks() const noexcept { return graph.tasks(); }
};

}  // namespace loom::detail
