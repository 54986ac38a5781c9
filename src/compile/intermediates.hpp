#pragma once
// Giving a graph's intermediates (Graph::intermediate) their memory: one
// pool block each at an eager submit, or one planned arena at compile. An
// intermediate gets memory once; later submits and compiles find it bound
// and treat it as any tensor (ordering across runs keeps its users apart).
//
// Thread-safety: any thread (binding is serialized process-wide; it happens
// once an intermediate).

#include "compile/memory_plan.hpp"
#include "core/storage.hpp"

#include <loom/graph.hpp>

namespace loom::detail {

/// Refuses a task of `graph` that uses another graph's intermediate that
/// was never bound (that graph never submitted nor compiled): it has no
/// memory, and this graph cannot give it any. @throws InvalidArgument naming
/// the task and the tensor.
void check_foreign_intermediates(const Graph& graph);

/// Gives each unbound intermediate of `graph` its own block from `owner`.
/// @throws OutOfMemory.
void bind_from_pool(const Graph& graph, MemoryOwner& owner);

/// Plans the unbound intermediates of `graph` into one arena from `owner`
/// and binds them there. @throws OutOfMemory.
ArenaPlan bind_in_arena(const Graph& graph, MemoryOwner& owner);

}  // namespace loom::detail
