#include "sched/plan.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <functional>
#include <queue>
#include <string_view>

namespace loom::detail {
namespace {

std::vector<std::uint32_t> topological_order(const Graph& graph) {
  const auto& tasks = graph.tasks();
  std::vector<std::uint32_t> unmet(tasks.size());
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    unmet[i] = static_cast<std::uint32_t>(tasks[i].predecessors.size());
    if (unmet[i] == 0) ready.push(i);
  }
  std::vector<std::uint32_t> order;
  order.reserve(tasks.size());
  while (!ready.empty()) {
    const auto t = ready.top();
    ready.pop();
    order.push_back(t);
    for (auto s : tasks[t].successors) {
      if (--unmet[s] == 0) ready.push(s);
    }
  }
  if (order.size() != tasks.size()) throw InvalidArgument("the graph has a cycle");
  return order;
}

// How many distinct streams the task's device predecessors are on.
int device_pred_streams(const Task& task, const std::vector<PlannedTask>& planned) {
  std::vector<int> seen;
  for (auto p : task.predecessors) {
    const auto& pred = planned[p];
    if (pred.placement != Placement::device) continue;
    if (std::find(seen.begin(), seen.end(), pred.stream) == seen.end()) seen.push_back(pred.stream);
  }
  return static_cast<int>(seen.size());
}

// How many device predecessors stream `s` (whose vector clock is `clock`)
// would still have to wait for.
std::size_t waits_needed(const Task& task, const std::vector<PlannedTask>& planned,
                         const std::vector<std::int64_t>& clock, int s,
                         const std::vector<std::int64_t>& task_seq) {
  std::size_t n = 0;
  for (auto p : task.predecessors) {
    const auto& pred = planned[p];
    if (pred.placement != Placement::device || pred.stream == s) continue;
    if (clock[static_cast<std::size_t>(pred.stream)] < task_seq[p]) ++n;
  }
  return n;
}

// True when a predecessor of the task does not run on a stream (a host task,
// a staged copy): the task may wait long before it can be launched.
bool waits_for_host(const Task& task, const std::vector<Placement>& placement) {
  return std::any_of(task.predecessors.begin(), task.predecessors.end(),
                     [&](std::uint32_t p) { return placement[p] != Placement::device; });
}

// Ops whose device time is known not to follow the bytes they touch: spin
// (it runs as long as it is told), matmul (its work grows as m n k), a
// compiled graph's segment (a CUDA graph of any number of kernels).
bool time_not_bytes(std::string_view name) {
  static constexpr std::string_view kNames[] = {"spin", "matmul", "cuda_graph"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

std::uint64_t tensor_bytes(const std::vector<Tensor>& tensors) {
  std::uint64_t bytes = 0;
  for (const auto& t : tensors) {
    if (t.defined()) bytes += t.nbytes();
  }
  return bytes;
}

}  // namespace

bool small_work(const Task& task) {
  switch (task.kind) {
    case TaskKind::copy: {
      if (!task.copy_src.defined() || !task.copy_dst.defined()) return false;
      const std::uint64_t bytes = task.copy_src.nbytes();
      const bool on_device =
          task.copy_src.memory().is_device() && task.copy_dst.memory().is_device();
      // Bytes weighted, bounded so that the product cannot overflow.
      if (bytes >= kSmallWorkBytes) return false;
      return (on_device ? 2 * bytes : kHostLinkWeight * bytes) < kSmallWorkBytes;
    }
    case TaskKind::op:
      return task.op && !is_collective(task) && !time_not_bytes(task.op->name()) &&
             tensor_bytes(task.reads) + tensor_bytes(task.writes) < kSmallWorkBytes;
    case TaskKind::host: return false;
  }
  return false;
}

Plan make_plan(const Graph& graph, const std::vector<Placement>& placement,
               int streams_per_priority) {
  const auto& tasks = graph.tasks();
  Plan plan;
  plan.tasks.resize(tasks.size());
  plan.order = topological_order(graph);
  const int k = std::max(1, streams_per_priority);
  plan.stream_count = k * kPriorityLevels + 1;
  const auto streams = static_cast<std::size_t>(plan.stream_count);

  std::vector<std::int64_t> tail(streams, -1);      // last task on each stream
  std::vector<std::uint64_t> last_use(streams, 0);  // for least-recently-used choice
  // The stream's last task may keep what follows it waiting: large work, or
  // a task that waits for a host task or a staged copy.
  std::vector<std::uint8_t> slow_tail(streams, 0);
  std::vector<std::int64_t> seq(streams, 0);
  std::vector<std::vector<std::int64_t>> clock(streams, std::vector<std::int64_t>(streams, 0));
  std::vector<std::int64_t> task_seq(tasks.size(), 0);
  std::vector<std::vector<std::int64_t>> snapshot(tasks.size());
  std::uint64_t use_counter = 0;

  for (auto t : plan.order) {
    auto& p = plan.tasks[t];
    p.placement = placement[t];
    if (p.placement != Placement::device) continue;
    const Task& task = tasks[t];
    p.small = small_work(task);
    int s = -1;
    if (is_collective(task)) {
      s = plan.collective_stream();
    } else {
      const int first = priority_index(task.priority) * k;
      // Continue a predecessor's chain: the latest predecessor that is still its stream's tail.
      for (auto it = task.predecessors.rbegin(); it != task.predecessors.rend() && s < 0; ++it) {
        const auto& pred = plan.tasks[*it];
        if (pred.placement == Placement::device && pred.stream >= first &&
            pred.stream < first + k &&
            tail[static_cast<std::size_t>(pred.stream)] == static_cast<std::int64_t>(*it)) {
          s = pred.stream;
        }
      }
      if (s < 0 && p.small) {
        // Small work: a stream not behind large work (or work waiting for
        // the host), then the fewest waits, then the most recently used (so
        // small work gathers).
        s = first;
        std::size_t best =
            waits_needed(task, plan.tasks, clock[static_cast<std::size_t>(s)], s, task_seq);
        for (int c = first + 1; c < first + k; ++c) {
          const auto cu = static_cast<std::size_t>(c);
          const auto bu = static_cast<std::size_t>(s);
          const std::size_t w = waits_needed(task, plan.tasks, clock[cu], c, task_seq);
          const bool better = slow_tail[cu] != slow_tail[bu] ? slow_tail[cu] < slow_tail[bu]
                              : w != best                    ? w < best
                                                             : last_use[cu] > last_use[bu];
          if (better) {
            s = c;
            best = w;
          }
        }
      }
      if (s < 0) {
        // A join (device predecessors on two or more streams) gains no
        // concurrency from a fresh stream: it takes the stream that needs the
        // fewest waits. Anything else takes the least recently used stream.
        const bool join = device_pred_streams(task, plan.tasks) >= 2;
        s = first;
        std::size_t best =
            join ? waits_needed(task, plan.tasks, clock[static_cast<std::size_t>(s)], s, task_seq)
                 : 0;
        for (int c = first + 1; c < first + k; ++c) {
          const std::size_t w =
              join ? waits_needed(task, plan.tasks, clock[static_cast<std::size_t>(c)], c, task_seq)
                   : 0;
          if (w < best || (w == best && last_use[static_cast<std::size_t>(c)] <
                                            last_use[static_cast<std::size_t>(s)])) {
            s = c;
            best = w;
          }
        }
      }
    }
    const auto su = static_cast<std::size_t>(s);
    p.stream = s;
    // Waits, latest predecessors first: their clocks imply the most.
    for (auto it = task.predecessors.rbegin(); it != task.predecessors.rend(); ++it) {
      auto& pred = plan.tasks[*it];
      if (pred.placement != Placement::device || pred.stream == s) continue;
      ++plan.cross_stream_edges;
      const auto ps = static_cast<std::size_t>(pred.stream);
      if (clock[su][ps] >= task_seq[*it]) continue;  // already known to be done
      p.waits.push_back(*it);
      pred.record_event = true;
      ++plan.cross_stream_waits;
      for (std::size_t x = 0; x < streams; ++x) {
        clock[su][x] = std::max(clock[su][x], snapshot[*it][x]);
      }
    }
    clock[su][su] = task_seq[t] = ++seq[su];
    snapshot[t] = clock[su];
    tail[su] = t;
    slow_tail[su] = !p.small || waits_for_host(task, placement) ? 1 : 0;
    last_use[su] = ++use_counter;
    // A device task whose successor runs on the host is watched.
    for (auto succ : task.successors) {
      if (placement[succ] != Placement::device) p.watched = true;
    }
  }
  // Every stream's last task is watched: its completion completes the stream's part of the run.
  for (std::size_t s = 0; s < streams; ++s) {
    if (tail[s] >= 0) plan.tasks[static_cast<std::size_t>(tail[s])].watched = true;
  }
  for (auto& p : plan.tasks) {
    if (p.watched) p.record_event = true;
  }
  return plan;
}

}  // namespace loom::detail
