#include "sched/run_ordering.hpp"

#include "core/storage.hpp"
#include "core/tensor_access.hpp"

#include <algorithm>
#include <tuple>

namespace loom::detail {

std::vector<DataAccess> summarize_accesses(const std::vector<Task>& tasks) {
  std::vector<DataAccess> all;
  const auto add = [&](const Tensor& t, bool write) {
    if (!t.defined() || t.numel() == 0) return;
    const auto [lo, hi] = byte_span(t);
    all.push_back(DataAccess{TensorAccess::storage(t).get(), lo, hi, write});
  };
  for (const auto& task : tasks) {
    for (const auto& r : task.reads) add(r, false);
    for (const auto& w : task.writes) add(w, true);
  }
  std::sort(all.begin(), all.end(), [](const DataAccess& a, const DataAccess& b) {
    return std::tuple(a.storage, !a.write, a.lo) < std::tuple(b.storage, !b.write, b.lo);
  });
  std::vector<DataAccess> merged;
  for (const auto& a : all) {
    if (!merged.empty()) {
      auto& m = merged.back();
      if (m.storage == a.storage && m.write == a.write && a.lo <= m.hi) {
        m.hi = std::max(m.hi, a.hi);
        continue;
      }
    }
    merged.push_back(a);
  }
  return merged;
}

void RunOrdering::enter(RunId run, const std::vector<DataAccess>& accesses,
                        std::vector<RunId>& after) {
  for (const auto& a : accesses) {
    auto& entries = by_storage_[a.storage];
    for (const auto& e : entries) {
      if (e.run == run || !(e.write || a.write)) continue;
      if (e.lo < a.hi && a.lo < e.hi &&
          std::find(after.begin(), after.end(), e.run) == after.end()) {
        after.push_back(e.run);
      }
    }
    if (a.write) {
      std::erase_if(entries,
                    [&](const Entry& e) { return e.run != run && a.lo <= e.lo && e.hi <= a.hi; });
    }
    entries.push_back(Entry{run, a.lo, a.hi, a.write});
  }
}

void RunOrdering::leave(RunId run, const std::vector<DataAccess>& accesses) {
  for (const auto& a : accesses) {
    const auto it = by_storage_.find(a.storage);
    if (it == by_storage_.end()) continue;
    std::erase_if(it->second, [&](const Entry& e) { return e.run == run; });
    if (it->second.empty()) by_storage_.erase(it);
  }
}

}  // namespace loom::detail
