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
    all.push_back(DataAccess{address_space(t), lo, hi, write});
  };
  for (const auto& task : tasks) {
    for (const auto& r : task.reads) add(r, false);
    for (const auto& w : task.writes) add(w, true);
  }
  std::sort(all.begin(), all.end(), [](const DataAccess& a, const DataAccess& b) {
    return std::tuple(a.space, !a.write, a.lo) < std::tuple(b.space, !b.write, b.lo);
  });
  std::vector<DataAccess> merged;
  for (const auto& a : all) {
    if (!merged.empty()) {
      auto& m = merged.back();
      if (m.space == a.space && m.write == a.write && a.lo <= m.hi) {
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
    Space& space = by_space_[a.space];
    auto& entries = space.entries;
    // Entries that start before a.lo - longest end before a.lo.
    const std::uintptr_t from = a.lo > space.longest ? a.lo - space.longest : 0;
    for (auto it = entries.lower_bound(from); it != entries.end() && it->first < a.hi;) {
      const Entry& e = it->second;
      const bool overlaps = a.lo < e.hi;
      if (overlaps && e.run != run && (e.write || a.write) &&
          std::find(after.begin(), after.end(), e.run) == after.end()) {
        after.push_back(e.run);
      }
      // A write replaces the accesses of other runs it covers: whoever
      // comes later follows it, and it follows them.
      if (a.write && e.run != run && a.lo <= it->first && e.hi <= a.hi) {
        it = take(space, it);
      } else {
        ++it;
      }
    }
    put(space, a.lo, Entry{run, a.hi, a.write});
    space.longest = std::max(space.longest, a.hi - a.lo);
  }
}

void RunOrdering::put(Space& space, std::uintptr_t lo, const Entry& entry) {
  if (spare_.empty()) {
    space.entries.emplace(lo, entry);
    return;
  }
  auto node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = lo;
  node.mapped() = entry;
  space.entries.insert(std::move(node));
}

std::multimap<std::uintptr_t, RunOrdering::Entry>::iterator RunOrdering::take(
    Space& space, std::multimap<std::uintptr_t, Entry>::iterator at) {
  auto next = std::next(at);
  spare_.push_back(space.entries.extract(at));
  return next;
}

void RunOrdering::leave(RunId run, const std::vector<DataAccess>& accesses) {
  for (const auto& a : accesses) {
    const auto it = by_space_.find(a.space);
    if (it == by_space_.end()) continue;
    auto& entries = it->second.entries;
    // enter() put each of the run's accesses at its own start.
    const auto [first, last] = entries.equal_range(a.lo);
    for (auto e = first; e != last;) {
      e = e->second.run == run ? take(it->second, e) : std::next(e);
    }
    // Kept when empty (a few spaces at most): the next run allocates nothing.
    if (entries.empty()) it->second.longest = 0;
  }
}

std::size_t RunOrdering::tracked_spaces() const noexcept {
  return static_cast<std::size_t>(std::count_if(
      by_space_.begin(), by_space_.end(), [](const auto& s) { return !s.second.entries.empty(); }));
}

}  // namespace loom::detail
