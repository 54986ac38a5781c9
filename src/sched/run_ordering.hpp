#pragma once
// Ordering across runs: a run (or a Runtime::copy, which is a run of one
// task) that reads or writes storage an earlier, unfinished run writes, or
// writes storage an earlier one reads, must follow it; runs over disjoint
// data do not. RunOrdering keeps, per storage, the byte spans each entered
// run reads and writes, and tells a new run which earlier runs it follows.
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

/// One storage's bytes [lo, hi) that a run reads or writes.
struct DataAccess {
  const void* storage = nullptr;
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  bool write = false;
};

/// The accesses of a graph's tasks, merged per storage and mode (overlapping
/// or touching spans become one), sorted by storage, then writes first.
std::vector<DataAccess> summarize_accesses(const std::vector<Task>& tasks);

class RunOrdering {
 public:
  using RunId = const void*;

  /// Enters `run` after every run entered so far, and appends to `after`
  /// each of those, still entered, that it must follow (each once).
  void enter(RunId run, const std::vector<DataAccess>& accesses, std::vector<RunId>& after);
  /// Forgets what `run` entered (it finished).
  void leave(RunId run, const std::vector<DataAccess>& accesses);
  /// Storages with accesses of unfinished runs.
  std::size_t tracked_storages() const noexcept { return by_storage_.size(); }

 private:
  struct Entry {
    RunId run;
    std::uintptr_t lo;
    std::uintptr_t hi;
    bool write;
  };
  std::unordered_map<const void*, std::vector<Entry>> by_storage_;
};

}  // namespace loom::detail
