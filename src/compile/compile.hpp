#pragma once
// Runtime::compile: a graph planned, its intermediates placed in one arena,
// its device segments captured and instantiated, once, on the caller's
// thread; Executable::run submits the replay graph through the executor's
// ordinary run path. See loom/executable.hpp.

#include "core/storage.hpp"
#include "sched/copy_engine.hpp"
#include "sched/executor.hpp"

#include <loom/executable.hpp>
#include <loom/graph.hpp>

namespace loom::detail {

struct CompileServices {
  Executor& executor;
  CopyEngine& copies;        ///< copy tasks and workspaces at capture
  MemoryOwner& arena_owner;  ///< the default memory's pool
};

class CapturedGraphs;

/// The CUDA graphs of an executable (null on the CPU backend or for an
/// empty one): for tests that look at the nodes and edges built.
const CapturedGraphs* captured_graphs(const Executable& exe) noexcept;

/// @throws InvalidArgument naming the task (an op that cannot be captured, a
/// collective, what submit refuses); OutOfMemory; CudaError.
Executable compile_graph(const Graph& graph, const CompileServices& services);

}  // namespace loom::detail
