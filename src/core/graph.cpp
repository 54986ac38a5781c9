#include <loom/error.hpp>
#include <loom/graph.hpp>

#include "core/prepared_slot.hpp"
#include "core/storage.hpp"

#include <algorithm>
#include <string>

namespace loom {

std::string_view to_string(TaskKind kind) noexcept {
  switch (kind) {
    case TaskKind::op: return "op";
    case TaskKind::copy: return "copy";
    case TaskKind::host: return "host";
    case TaskKind::collective: return "collective";
  }
  return "unknown";
}

std::string Graph::unique_name(std::string base) {
  if (base.empty()) base = "task";
  const int n = name_counts_[base]++;
  return n == 0 ? base : base + "#" + std::to_string(n);
}

void Graph::changed() {
  // A slot shared with a copy stays with the copy; an unshared one is emptied.
  if (!prepared_ || prepared_.use_count() > 1) {
    prepared_ = std::make_shared<detail::PreparedSlot>();
  } else {
    prepared_->owner = 0;
    prepared_->value.reset();
  }
}

void Graph::add_edge(std::uint32_t from, std::uint32_t to) {
  if (from == to) return;
  auto& preds = tasks_[to].predecessors;
  const auto it = std::lower_bound(preds.begin(), preds.end(), from);
  if (it != preds.end() && *it == from) return;
  preds.insert(it, from);
  auto& succs = tasks_[from].successors;
  succs.insert(std::lower_bound(succs.begin(), succs.end(), to), to);
  ++edges_;
}

void Graph::infer(std::uint32_t task, const Tensor& tensor, bool write) {
  if (!tensor.defined() || tensor.numel() == 0) return;
  const auto [lo, hi] = detail::byte_span(tensor);
  auto& accesses = history_[tensor.storage().get()];
  for (const auto& a : accesses) {
    const bool overlap = a.lo < hi && lo < a.hi;
    if (overlap && (write || a.write)) add_edge(a.task, task);
  }
  if (write) {
    // Accesses this write covers are ordered before it: later tasks need
    // only depend on the write.
    std::erase_if(accesses,
                  [&](const Interval& a) { return a.task != task && lo <= a.lo && a.hi <= hi; });
  }
  accesses.push_back(Interval{task, lo, hi, write});
}

TaskId Graph::append(Task task) {
  changed();
  const auto index = static_cast<std::uint32_t>(tasks_.size());
  task.name = unique_name(std::move(task.name));
  tasks_.push_back(std::move(task));
  const Task& t = tasks_.back();
  // Reads first: a task that reads and writes a tensor depends on earlier
  // writers (as a reader) and on earlier readers (as a writer).
  const auto reads = t.reads;
  const auto writes = t.writes;
  for (const auto& r : reads) infer(index, r, false);
  for (const auto& w : writes) infer(index, w, true);
  return TaskId{index};
}

TaskId Graph::add(OpPtr op, TaskOptions options) {
  if (!op) throw InvalidArgument("Graph::add: a null op");
  Task t;
  t.kind = TaskKind::op;
  t.name = options.name.empty() ? std::string(op->name()) : std::move(options.name);
  t.priority = options.priority;
  t.reads = op->reads();
  t.writes = op->writes();
  t.op = std::move(op);
  return append(std::move(t));
}

TaskId Graph::copy(const Tensor& src, const Tensor& dst, TaskOptions options) {
  Task t;
  t.kind = TaskKind::copy;
  t.name = options.name.empty() ? std::string("copy") : std::move(options.name);
  t.priority = options.priority;
  t.reads = {src};
  t.writes = {dst};
  t.copy_src = src;
  t.copy_dst = dst;
  return append(std::move(t));
}

TaskId Graph::host(std::string name, std::function<void()> fn, std::vector<Tensor> reads,
                   std::vector<Tensor> writes, Priority priority) {
  if (!fn) throw InvalidArgument("Graph::host: task '" + name + "' has an empty function");
  Task t;
  t.kind = TaskKind::host;
  t.name = name.empty() ? std::string("host") : std::move(name);
  t.priority = priority;
  t.reads = std::move(reads);
  t.writes = std::move(writes);
  t.host = std::move(fn);
  return append(std::move(t));
}

TaskId Graph::collective(CollectivePtr collective, TaskOptions options) {
  if (!collective) throw InvalidArgument("Graph::collective: a null collective");
  Task t;
  t.kind = TaskKind::collective;
  t.name = options.name.empty() ? std::string(collective->name()) : std::move(options.name);
  t.priority = options.priority;
  t.reads = collective->reads();
  t.writes = collective->writes();
  t.collective = std::move(collective);
  return append(std::move(t));
}

void Graph::precede(TaskId before, TaskId after) {
  if (before.index >= tasks_.size() || after.index >= tasks_.size()) {
    throw InvalidArgument("Graph::precede: task id " +
                          std::to_string(std::max(before.index, after.index)) +
                          " is not in this graph of " + std::to_string(tasks_.size()) + " tasks");
  }
  if (before.index == after.index) {
    throw InvalidArgument("Graph::precede: task '" + tasks_[before.index].name +
                          "' cannot precede itself");
  }
  changed();
  add_edge(before.index, after.index);
}

bool Graph::has_edge(TaskId from, TaskId to) const {
  const auto& preds = tasks_.at(to.index).predecessors;
  return std::binary_search(preds.begin(), preds.end(), from.index);
}

void Graph::validate() const {
  // Cycles: iterative depth-first search; on a back edge, the grey path
  // from the target to the current task is the cycle.
  enum Colour : unsigned char { white, grey, black };
  std::vector<Colour> colour(tasks_.size(), white);
  std::vector<std::uint32_t> parent(tasks_.size(), 0);
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;
  for (std::uint32_t root = 0; root < tasks_.size(); ++root) {
    if (colour[root] != white) continue;
    stack.emplace_back(root, 0);
    colour[root] = grey;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const auto& succs = tasks_[node].successors;
      if (next == succs.size()) {
        colour[node] = black;
        stack.pop_back();
        continue;
      }
      const std::uint32_t s = succs[next++];
      if (colour[s] == white) {
        colour[s] = grey;
        parent[s] = node;
        stack.emplace_back(s, 0);
      } else if (colour[s] == grey) {
        std::vector<std::uint32_t> cycle{node};
        for (std::uint32_t v = node; v != s;) cycle.push_back(v = parent[v]);
        std::reverse(cycle.begin(), cycle.end());
        std::string names;
        for (auto v : cycle) names += "'" + tasks_[v].name + "' -> ";
        names += "'" + tasks_[s].name + "'";
        throw InvalidArgument("the graph has a cycle: " + names);
      }
    }
  }
  for (const auto& t : tasks_) {
    try {
      if (t.op) t.op->validate();
      if (t.collective) t.collective->validate();
      if (t.kind == TaskKind::copy) {
        if (!t.copy_src.defined() || !t.copy_dst.defined()) {
          throw InvalidArgument("copy needs two defined tensors");
        }
        if (t.copy_src.dtype() != t.copy_dst.dtype() ||
            !(t.copy_src.shape() == t.copy_dst.shape())) {
          throw InvalidArgument(
              "copy: the destination must have the source's dtype and shape; "
              "source is " +
              t.copy_src.describe() + ", destination is " + t.copy_dst.describe());
        }
      }
    } catch (Error& e) {
      e.attach_task(t.name);
      throw;
    }
  }
}

}  // namespace loom
