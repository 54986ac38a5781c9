#include "sched/run_ordering.hpp"

#include "core/storage.hpp"
#include "core/tensor_access.hpp"

#include <algorithm>
#include <iterator>
#include <span>
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
  return summarize(std::move(all));
}

namespace {

// Whether [lo, hi) lies inside one of `writes` (one space's merged writes,
// sorted by start and disjoint).
bool inside_a_write(std::span<const DataAccess> writes, std::uintptr_t lo, std::uintptr_t hi) {
  auto it = std::upper_bound(writes.begin(), writes.end(), lo,
                             [](std::uintptr_t x, const DataAccess& w) { return x < w.lo; });
  if (it == writes.begin()) return false;
  --it;  // the last write starting at or before lo
  return hi <= it->hi;
}

}  // namespace

std::vector<DataAccess> summarize(std::vector<DataAccess> all) {
  std::sort(all.begin(), all.end(), [](const DataAccess& a, const DataAccess& b) {
    return std::tuple(a.space, !a.write, a.lo) < std::tuple(b.space, !b.write, b.lo);
  });
  std::vector<DataAccess> merged;
  merged.reserve(all.size());
  std::size_t space_begin = 0;  // the current space's first (merged) write
  std::size_t writes_end = 0;   // one past its last write: its reads follow
  for (const auto& a : all) {
    if (merged.empty() || merged.back().space != a.space) space_begin = writes_end = merged.size();
    if (a.write) {
      if (writes_end > space_begin && a.lo <= merged.back().hi) {
        merged.back().hi = std::max(merged.back().hi, a.hi);
      } else {
        merged.push_back(a);
        writes_end = merged.size();
      }
      continue;
    }
    // A space's writes come first, so they are all merged by now.
    const std::span<const DataAccess> writes(merged.data() + space_begin, writes_end - space_begin);
    if (inside_a_write(writes, a.lo, a.hi)) continue;
    if (merged.size() > writes_end && a.lo <= merged.back().hi) {
      merged.back().hi = std::max(merged.back().hi, a.hi);
    } else {
      merged.push_back(a);
    }
  }
  // By start within a space, writes and reads together: the order the
  // ordering keeps its entries in, so that a run enters them as they are.
  std::sort(merged.begin(), merged.end(), [](const DataAccess& a, const DataAccess& b) {
    return std::tuple(a.space, a.lo) < std::tuple(b.space, b.lo);
  });
  return merged;
}

namespace {

// The end of the accesses of `begin`'s space.
std::vector<DataAccess>::const_iterator space_end(std::vector<DataAccess>::const_iterator begin,
                                                  std::vector<DataAccess>::const_iterator end) {
  return std::find_if(begin, end, [&](const DataAccess& a) { return a.space != begin->space; });
}

}  // namespace

void RunOrdering::enter(RunId run, const std::vector<DataAccess>& accesses,
                        std::vector<RunId>& after) {
  for (auto group = accesses.begin(); group != accesses.end();) {
    const auto group_end = space_end(group, accesses.end());
    Space& space = by_space_[group->space];
    const bool others = space.entries.size() > space.dead;
    // Alone in the space (the usual case of runs one after another): its
    // accesses become the entries as they are; else they are merged in.
    std::vector<Entry>& incoming = others ? incoming_ : space.entries;
    incoming.clear();
    std::uintptr_t longest = 0;
    for (auto a = group; a != group_end; ++a) {
      if (others) query(space, run, *a, after);
      incoming.push_back(Entry{a->lo, a->hi, run, a->write});
      longest = std::max(longest, a->hi - a->lo);
    }
    // A summary (summarize) is in order already; any other list is sorted here.
    const auto by_start = [](const Entry& x, const Entry& y) { return x.lo < y.lo; };
    if (!std::is_sorted(incoming.begin(), incoming.end(), by_start)) {
      std::sort(incoming.begin(), incoming.end(), by_start);
    }
    if (others) {
      insert(space);
      space.longest = std::max(space.longest, longest);
    } else {
      space.dead = 0;
      space.longest = longest;
    }
    group = group_end;
  }
}

void RunOrdering::query(Space& space, RunId run, const DataAccess& a, std::vector<RunId>& after) {
  auto& entries = space.entries;
  // Entries that start before a.lo - longest end before a.lo.
  const std::uintptr_t from = a.lo > space.longest ? a.lo - space.longest : 0;
  auto it = std::lower_bound(entries.begin(), entries.end(), from,
                             [](const Entry& e, std::uintptr_t lo) { return e.lo < lo; });
  for (; it != entries.end() && it->lo < a.hi; ++it) {
    if (it->run == nullptr || it->run == run) continue;
    const bool overlaps = a.lo < it->hi;
    if (overlaps && (it->write || a.write) &&
        std::find(after.begin(), after.end(), it->run) == after.end()) {
      after.push_back(it->run);
    }
    // A write replaces the accesses of other runs it covers: whoever comes
    // later follows it, and it follows them.
    if (a.write && a.lo <= it->lo && it->hi <= a.hi) {
      it->run = nullptr;
      ++space.dead;
    }
  }
}

void RunOrdering::compact(Space& space) {
  if (space.dead == 0) return;
  std::erase_if(space.entries, [](const Entry& e) { return e.run == nullptr; });
  space.dead = 0;
  // The bound tightens again once a long access has gone: queries start
  // near their own start instead of scanning from the long one's.
  space.longest = 0;
  for (const auto& e : space.entries) space.longest = std::max(space.longest, e.hi - e.lo);
}

void RunOrdering::insert(Space& space) {
  // Merged from the back into the grown vector: no scratch the size of the
  // space, and the vector's capacity is all that ever grows.
  compact(space);
  auto& entries = space.entries;
  const std::size_t old_size = entries.size();
  entries.resize(old_size + incoming_.size());
  auto out = entries.end();
  auto kept = entries.begin() + static_cast<std::ptrdiff_t>(old_size);
  auto in = incoming_.end();
  while (in != incoming_.begin()) {
    if (kept != entries.begin() && std::prev(kept)->lo > std::prev(in)->lo) {
      *--out = *--kept;
    } else {
      *--out = *--in;
    }
  }
}

void RunOrdering::leave(RunId run, const std::vector<DataAccess>& accesses) {
  for (auto group = accesses.begin(); group != accesses.end();) {
    const auto group_end = space_end(group, accesses.end());
    const auto found = by_space_.find(group->space);
    if (found != by_space_.end()) {
      Space& space = found->second;
      auto& entries = space.entries;
      const auto n = static_cast<std::size_t>(group_end - group);
      if (16 * n >= entries.size()) {
        // Much of the space is the run's: one pass beats a search an access.
        for (auto& e : entries) {
          if (e.run != run) continue;
          e.run = nullptr;
          ++space.dead;
        }
      } else {
        for (auto a = group; a != group_end; ++a) {
          // enter() put each of the run's accesses at its own start.
          auto it = std::lower_bound(entries.begin(), entries.end(), a->lo,
                                     [](const Entry& e, std::uintptr_t lo) { return e.lo < lo; });
          for (; it != entries.end() && it->lo == a->lo; ++it) {
            if (it->run != run) continue;
            it->run = nullptr;
            ++space.dead;
          }
        }
      }
      // Kept when empty (a few spaces at most): the next run allocates nothing.
      if (space.dead == entries.size()) {
        entries.clear();
        space.dead = 0;
        space.longest = 0;
      } else if (2 * space.dead > entries.size()) {
        compact(space);
      }
    }
    group = group_end;
  }
}

std::size_t RunOrdering::tracked_spaces() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(by_space_.begin(), by_space_.end(),
                    [](const auto& s) { return s.second.entries.size() > s.second.dead; }));
}

}  // namespace loom::detail
