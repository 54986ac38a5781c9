#pragma once
// How a compiled graph is cut for capture: each maximal run of device tasks
// ops that are consecutive in the plan (no host task or copy between them)
// becomes one segment, captured once into a CUDA graph; the
// other tasks stay as they are, between segments. Segments are intervals of
// a topological order, so the graph of steps is acyclic: an edge between two
// tasks becomes an edge between their steps.
//
// Replay submits the graph of steps (replay_graph) through the executor's
// ordinary run path: each segment is one device task that launches its CUDA
// graph, ordering across runs and the run's error handling apply unchanged.
//
// CUDA-free, so that the cutting is unit-tested on the CPU.

#include "sched/prepared_graph.hpp"

#include <loom/graph.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::detail {

/// A step that is no segment, where an index of segments is asked for.
inline constexpr std::size_t kNotASegment = static_cast<std::size_t>(-1);

struct CompiledStep {
  bool segment = false;              ///< device tasks captured as one CUDA graph
  std::vector<std::uint32_t> tasks;  ///< plan order; exactly one when not a segment
  std::string name;                  ///< the step's task name in the replay graph
};

/// True when task t may go into a segment: an op on the device (copy tasks
/// run as in an eager run, between segments).
bool capturable_task(const PreparedGraph& prepared, std::uint32_t t);

/// The steps of a prepared graph, in plan order.
std::vector<CompiledStep> compile_steps(const PreparedGraph& prepared);

/// What a segment reads and writes (the union of its tasks').
void step_accesses(const PreparedGraph& prepared, const CompiledStep& step,
                   std::vector<Tensor>& reads, std::vector<Tensor>& writes);

/// Appends to `g` what a replay runs: the op `segment_op(i)` for each
/// segment step i, the other tasks as they are, and an edge wherever two
/// tasks of different steps had one. Returns the appended tasks, one a step.
std::vector<TaskId> append_steps(Graph& g, const PreparedGraph& prepared,
                                 const std::vector<CompiledStep>& steps,
                                 const std::function<OpPtr(std::size_t step)>& segment_op);

}  // namespace loom::detail
