#pragma once
// Preparing a graph for one executor: validation, the checks that refuse a
// task before launch (memory spaces, copy paths, a CPU implementation on the
// CPU backend), each task's placement, the plan, and each stream's launch
// order. The result is kept in the graph's slot, so that submitting the same
// graph again copies, checks and plans nothing.
//
// Thread-safety: prepare() from any thread (the slot has its own lock).

#include "sched/plan.hpp"
#include "sched/prepared_graph.hpp"

#include <loom/graph.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace loom::detail {

class CopyEngine;

struct PrepareOptions {
  bool cuda = false;  ///< the CUDA backend (else every task runs on host workers)
  int device = 0;     ///< where the CUDA backend runs ops
  int streams_per_priority = 4;
  /// A check of the layers above (the runtime's: a graph that uses another
  /// graph's unbound intermediates), run with the others on a graph not yet
  /// prepared. May be empty.
  std::function<void(const Graph&)> check_graph;
};

/// What the caller knows of a graph that its tasks do not say.
struct PrepareHints {
  /// Ops that replay CUDA graphs (a compiled graph's segments): the copies
  /// inside may read or write pinned host memory.
  std::vector<const Op*> device_graph_ops;
};

/// Where each task of `graph` runs on a backend.
std::vector<Placement> placements(const Graph& graph, bool cuda);

/// The prepared form of a valid graph with the given placements: the plan,
/// each stream's launch order, the roots, the data accesses, the names.
/// Checks nothing (prepare() does); tests build runs with it directly.
std::shared_ptr<PreparedGraph> make_prepared(const Graph& graph,
                                             const std::vector<Placement>& placement,
                                             int streams_per_priority);

class Preparer {
 public:
  Preparer(PrepareOptions options, const CopyEngine& copies);

  /// The graph's prepared form: from its slot when this preparer made it,
  /// else validated, checked and made now (and kept in the slot).
  /// @throws InvalidArgument (naming the task) for a graph that cannot run here.
  /// `hints` matter only when the graph is prepared now.
  std::shared_ptr<const PreparedGraph> prepare(const Graph& graph, const PrepareHints& hints = {});
  /// Gives `graph` a slot of its own holding `prepared`, which must be what
  /// prepare(graph) would give (a copy of a prepared graph that should not
  /// share its original's slot, whose owner may change it).
  void adopt(Graph& graph, std::shared_ptr<const PreparedGraph> prepared) const;

 private:
  void check(const Graph& graph, const PrepareHints& hints) const;

  PrepareOptions options_;
  const CopyEngine& copies_;
  std::uint64_t serial_;  // tells this preparer's prepared graphs from another's
};

}  // namespace loom::detail
