#include "compile/memory_plan.hpp"

#include "core/tensor_access.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace loom::detail {

namespace {

std::size_t round_up(std::size_t n, std::size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The lowest multiple of `alignment` where `bytes` fit between the busy
// ranges (sorted by start).
std::size_t first_fit(std::vector<std::pair<std::size_t, std::size_t>>& busy, std::size_t bytes) {
  std::sort(busy.begin(), busy.end());
  std::size_t at = 0;
  for (const auto& [lo, hi] : busy) {
    if (at + bytes <= lo) break;
    at = std::max(at, hi);
  }
  return at;
}

std::vector<std::uint32_t> topological(const Graph& graph) {
  const auto& tasks = graph.tasks();
  std::vector<std::uint32_t> unmet(tasks.size());
  std::vector<std::uint32_t> order;
  order.reserve(tasks.size());
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    unmet[t] = static_cast<std::uint32_t>(tasks[t].predecessors.size());
    if (unmet[t] == 0) order.push_back(t);
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (auto s : tasks[order[i]].successors) {
      if (--unmet[s] == 0) order.push_back(s);
    }
  }
  return order;
}

}  // namespace

ArenaPlan plan_arena(const std::vector<std::size_t>& sizes,
                     const std::function<bool(std::size_t, std::size_t)>& may_share,
                     std::size_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(sizes.size(), 0);
  std::vector<std::size_t> by_size(sizes.size());
  std::iota(by_size.begin(), by_size.end(), std::size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;
  for (const auto i : by_size) {
    const std::size_t bytes = round_up(std::max<std::size_t>(sizes[i], 1), alignment);
    plan.requested_bytes += bytes;
    busy.clear();
    for (const auto j : placed) {
      if (!may_share(i, j)) {
        busy.emplace_back(
            plan.offsets[j],
            plan.offsets[j] + round_up(std::max<std::size_t>(sizes[j], 1), alignment));
      }
    }
    plan.offsets[i] = first_fit(busy, bytes);
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + bytes);
    placed.push_back(i);
  }
  return plan;
}

namespace {

std::vector<std::uint32_t> every_task(const Graph& graph) {
  std::vector<std::uint32_t> all(graph.size());
  std::iota(all.begin(), all.end(), std::uint32_t{0});
  return all;
}

}  // namespace

HappensBefore::HappensBefore(const Graph& graph) : HappensBefore(graph, every_task(graph)) {}

HappensBefore::HappensBefore(const Graph& graph, const std::vector<std::uint32_t>& tasks)
    : slot_(graph.size(), kNotChosen), words_((tasks.size() + 63) / 64) {
  if (tasks.empty()) return;
  for (std::uint32_t i = 0; i < tasks.size(); ++i) slot_[tasks[i]] = i;
  after_.assign(tasks.size() * words_, 0);
  const auto& all = graph.tasks();
  // A task's bitset (the chosen tasks after it) is built from its
  // successors', in reverse topological order, and released once every
  // predecessor has taken it in: only the frontier of the walk is held.
  std::vector<std::uint32_t> takers(all.size(), 0);
  for (const auto& task : all) {
    for (auto s : task.successors) ++takers[s];
  }
  std::vector<std::vector<std::uint64_t>> reach(all.size());  // empty: no chosen task after it
  const std::size_t row_bytes = words_ * sizeof(std::uint64_t);
  std::size_t held = after_.size() * sizeof(std::uint64_t);
  peak_bytes_ = held;
  const auto order = topological(graph);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::uint32_t v = *it;
    std::vector<std::uint64_t>& mine = reach[v];
    for (auto s : all[v].successors) {
      const std::vector<std::uint64_t>& theirs = reach[s];
      if (theirs.empty() && slot_[s] == kNotChosen) continue;
      if (mine.empty()) {
        mine.assign(words_, 0);
        held += row_bytes;
        peak_bytes_ = std::max(peak_bytes_, held);
      }
      if (slot_[s] != kNotChosen) mine[slot_[s] / 64] |= std::uint64_t{1} << (slot_[s] % 64);
      for (std::size_t w = 0; w < theirs.size(); ++w) mine[w] |= theirs[w];
    }
    if (slot_[v] != kNotChosen && !mine.empty()) {
      std::copy(mine.begin(), mine.end(), after_.begin() + slot_[v] * words_);
    }
    const auto release = [&](std::uint32_t t) {
      if (reach[t].empty()) return;
      held -= row_bytes;
      std::vector<std::uint64_t>().swap(reach[t]);
    };
    for (auto s : all[v].successors) {
      if (--takers[s] == 0) release(s);
    }
    if (takers[v] == 0) release(v);  // a source: nothing will take it in
  }
}

bool HappensBefore::before(std::uint32_t u, std::uint32_t v) const noexcept {
  const std::uint32_t a = slot_[u], b = slot_[v];
  if (a == kNotChosen || b == kNotChosen) return false;
  return ((after_[a * words_ + b / 64] >> (b % 64)) & 1U) != 0;
}

bool HappensBefore::all_before(const std::vector<std::uint32_t>& first,
                               const std::vector<std::uint32_t>& second) const {
  for (auto u : first) {
    for (auto v : second) {
      if (!before(u, v)) return false;
    }
  }
  return true;
}

std::vector<std::vector<std::uint32_t>> storage_uses(const Graph& graph,
                                                     const std::vector<Tensor>& tensors) {
  std::unordered_map<const Storage*, std::size_t> index;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    index.emplace(TensorAccess::storage(tensors[i]).get(), i);
  }
  std::vector<std::vector<std::uint32_t>> uses(tensors.size());
  const auto note = [&](std::uint32_t t, const Tensor& x) {
    if (!x.defined()) return;
    const auto it = index.find(TensorAccess::storage(x).get());
    if (it == index.end()) return;
    auto& list = uses[it->second];
    if (list.empty() || list.back() != t) list.push_back(t);
  };
  const auto& tasks = graph.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    for (const auto& r : tasks[t].reads) note(t, r);
    for (const auto& w : tasks[t].writes) note(t, w);
  }
  return uses;
}

ArenaPlan plan_tensors(const Graph& graph, const std::vector<Tensor>& tensors,
                       std::size_t alignment) {
  const auto uses = storage_uses(graph, tensors);
  // Ordering is asked of the tasks that use an intermediate only.
  std::vector<std::uint32_t> users;
  for (const auto& list : uses) users.insert(users.end(), list.begin(), list.end());
  std::sort(users.begin(), users.end());
  users.erase(std::unique(users.begin(), users.end()), users.end());
  const HappensBefore order(graph, users);
  std::vector<std::size_t> sizes;
  sizes.reserve(tensors.size());
  for (const auto& t : tensors) sizes.push_back(TensorAccess::storage(t)->bytes);
  // An intermediate no task uses shares with everything: it is never touched.
  const auto may_share = [&](std::size_t i, std::size_t j) {
    return order.all_before(uses[i], uses[j]) || order.all_before(uses[j], uses[i]);
  };
  ArenaPlan plan = plan_arena(sizes, may_share, alignment);
  plan.order_bytes = order.peak_bytes();
  return plan;
}

}  // namespace loom::detail
