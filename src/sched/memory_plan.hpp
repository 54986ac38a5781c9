#pragma once
// Memory planning for compiled graphs: every graph-scoped intermediate gets
// an offset in one arena. Two intermediates may share bytes only when every
// use of one happens before every use of the other; happens-before is
// reachability in the graph (the executor honours every edge, and a replay
// follows the previous one as a whole). Greedy packing, largest first, each
// at the lowest aligned offset clear of the intermediates it must not share
// with: simple, and optimal for chains, where it matters most.
//
// CUDA-free, so that it is unit-tested on the CPU with hand-made lifetimes.

#include <loom/graph.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace loom::detail {

struct ArenaPlan {
  std::vector<std::size_t> offsets;  ///< per request, in bytes from the arena's start
  std::size_t arena_bytes = 0;       ///< the arena's size
  std::size_t requested_bytes = 0;   ///< the sum of the requests (aligned)
};

/// Places requests of `sizes` bytes; `may_share(i, j)` (symmetric) says
/// whether i and j may overlap. Offsets are multiples of `alignment`.
ArenaPlan plan_arena(const std::vector<std::size_t>& sizes,
                     const std::function<bool(std::size_t, std::size_t)>& may_share,
                     std::size_t alignment = 256);

/// Reachability over a valid (acyclic) graph's edges.
class HappensBefore {
 public:
  explicit HappensBefore(const Graph& graph);
  /// True when `u` is ordered before `v` (a path of edges leads from u to v).
  bool before(std::uint32_t u, std::uint32_t v) const noexcept;
  /// True when every task of `first` is ordered before every task of `second`.
  bool all_before(const std::vector<std::uint32_t>& first,
                  const std::vector<std::uint32_t>& second) const;

 private:
  std::size_t words_ = 0;
  std::vector<std::uint64_t> after_;  // per task, a bitset of the tasks ordered after it
};

/// For each tensor of `tensors`, the tasks that read or write its storage
/// (ascending, each once).
std::vector<std::vector<std::uint32_t>> storage_uses(const Graph& graph,
                                                     const std::vector<Tensor>& tensors);

/// The arena for `tensors` (contiguous, each over its own storage) as the
/// graph uses them: two share bytes only when their uses are ordered.
ArenaPlan plan_tensors(const Graph& graph, const std::vector<Tensor>& tensors,
                       std::size_t alignment = 256);

}  // namespace loom::detail
