#pragma once
// Ordering across runs: a run (or a Runtime::copy, which is a run of one
// task) that reads or writes storage an earlier, unfinished run writes, or
// writes storage an earlier one reads, must follow it; runs over disjoint
// data do not. Data is memory, not a handle: accesses are keyed by address
// space (all host memory, or one device: detail::address_space) and absolute
// byte spans, so two tensors over one buffer (provided twice, taken then
// provided) are ordered, partial overlaps included. RunOrdering keeps, per
// space, the byte spans each entered run reads and writes, sorted by their
// start, and tells a new run which earlier runs it follows.
// A write that covers earlier accesses of other runs replaces them: whoever
// comes later follows the writer, which follows them (ordering is
// transitive), so the lists stay short.
//
// CUDA-free and single-threaded (the scheduling thread owns it), so that it
// is unit-tested on the CPU.

#include <loom/graph.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace loom::detail {

/// Bytes [lo, hi) of one address space that a run reads or writes.
struct DataAccess {
  const void* space = nullptr;
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  bool write = false;
};

/// The accesses of a graph's tasks, summarized (below).
std::vector<DataAccess> summarize_accesses(const std::vector<Task>& tasks);

/// Accesses that order a run exactly as `all` do, fewer: merged per space
/// and mode (overlapping or touching spans become one), reads inside the
/// run's own writes dropped (whatever conflicts with such a read conflicts
/// with the write), sorted by space, then by start.
std::vector<DataAccess> summarize(std::vector<DataAccess> all);

class RunOrdering {
 public:
  using RunId = const void*;

  /// Enters `run` after every run entered so far, and appends to `after`
  /// each of those, still entered, that it must follow (each once).
  void enter(RunId run, const std::vector<DataAccess>& accesses, std::vector<RunId>& after);
  /// Forgets what `run` entered (it finished).
  void leave(RunId run, const std::vector<DataAccess>& accesses);
  /// Address spaces with accesses of unfinished runs.
  std::size_t tracked_spaces() const noexcept;

 private:
  // One access of an entered run; a null run marks one taken out (a
  // tombstone, skipped by queries, dropped at the next merge).
  struct Entry {
    std::uintptr_t lo;
    std::uintptr_t hi;
    RunId run;
    bool write;
  };
  // One space's entries, sorted by start, in a flat vector: entering and
  // leaving cost a binary search an access and one linear merge a space,
  // with nothing allocated once the vectors have grown (a node-based map cost
  // about 0.1 µs an access, which a compiled graph touching thousands of
  // tensors paid on every replay). `longest` bounds how far before a
  // query's start an overlapping entry can begin (reset when the space
  // empties); `dead` counts tombstones.
  struct Space {
    std::vector<Entry> entries;
    std::uintptr_t longest = 0;
    std::size_t dead = 0;
  };
  void query(Space& space, RunId run, const DataAccess& a, std::vector<RunId>& after);
  void insert(Space& space);
  static void compact(Space& space);

  std::unordered_map<const void*, Space> by_space_;
  std::vector<Entry> incoming_;  // scratch: one space's new entries, by start
};

}  // namespace loom::detail
