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
  /// The most bytes the ordering between the intermediates' users took while
  /// planned (HappensBefore::peak_bytes): 0 when no task uses one.
  std::size_t order_bytes = 0;
};

/// Places requests of `sizes` bytes; `may_share(i, j)` (symmetric) says
/// whether i and j may overlap. Offsets are multiples of `alignment`.
ArenaPlan plan_arena(const std::vector<std::size_t>& sizes,
                     const std::function<bool(std::size_t, std::size_t)>& may_share,
                     std::size_t alignment = 256);

/// Reachability over a valid (acyclic) graph's edges, among some of its
/// tasks. Held as one bitset a chosen task, over the chosen tasks only, so
/// that a large graph whose intermediates few tasks use costs little: while
/// it is built, a task's bitset lives only until its last predecessor has
/// taken it in (a chain holds two at a time), and a task with no chosen task
/// after it holds none.
class HappensBefore {
 public:
  /// Among every task of `graph` (tasks² bits: for small graphs).
  explicit HappensBefore(const Graph& graph);
  /// Among `tasks` (indices into graph.tasks(), each once).
  HappensBefore(const Graph& graph, const std::vector<std::uint32_t>& tasks);
  /// True when `u` is ordered before `v` (a path of edges leads from u to v);
  /// false when either is not among the chosen tasks.
  bool before(std::uint32_t u, std::uint32_t v) const noexcept;
  /// True when every task of `first` is ordered before every task of `second`.
  bool all_before(const std::vector<std::uint32_t>& first,
                  const std::vector<std::uint32_t>& second) const;
  /// The most bytes of bitsets held at once, while built or after.
  std::size_t peak_bytes() const noexcept { return peak_bytes_; }

 private:
  static constexpr std::uint32_t kNotChosen = ~std::uint32_t{0};
  std::vector<std::uint32_t> slot_;   // per graph task: its index among the chosen, or kNotChosen
  std::size_t words_ = 0;             // per bitset
  std::vector<std::uint64_t> after_;  // per chosen task, the chosen tasks ordered after it
  std::size_t peak_bytes_ = 0;
};

/// For each tensor of `tensors`, the tasks that read or write its storage
/// (ascending, each once).
std::vector<std::vector<std::uint32_t>> storage_uses(const Graph& graph,
                                                     const std::vector<Tensor>& tensors);

/// The arena for `tensors` (contiguous, each over its own storage) as the
/// graph uses them: two share bytes only when their uses are ordered. Its
/// memory is O(tasks + edges) of the graph, plus bitsets over the tasks that
/// use one of `tensors` (none when no task does).
ArenaPlan plan_tensors(const Graph& graph, const std::vector<Tensor>& tensors,
                       std::size_t alignment = 256);

}  // namespace loom::detail
