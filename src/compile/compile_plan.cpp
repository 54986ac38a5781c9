#include "compile/compile_plan.hpp"

#include <loom/error.hpp>

namespace loom::detail {

bool capturable_task(const PreparedGraph& prepared, std::uint32_t t) {
  if (prepared.plan.tasks[t].placement != Placement::device) return false;
  const Task& task = prepared.tasks()[t];
  if (task.kind == TaskKind::op) return true;
  // Stream-ordered copies within a device, or between pinned memory and a
  // device, become memcpy nodes (or the gather kernel's). A peer copy between
  // two devices stays out: it would capture work on another device's streams.
  if (task.kind != TaskKind::copy) return false;
  const Memory from = task.copy_src.memory();
  const Memory to = task.copy_dst.memory();
  return !(from.is_device() && to.is_device() && from != to);
}

namespace {

std::string segment_name(const PreparedGraph& prepared, const CompiledStep& step,
                         std::size_t index) {
  const auto& tasks = prepared.tasks();
  std::string name = "segment " + std::to_string(index) + " [" + tasks[step.tasks.front()].name;
  if (step.tasks.size() > 1) {
    name += " .. " + tasks[step.tasks.back()].name + ", " + std::to_string(step.tasks.size()) +
            " tasks";
  }
  return name + "]";
}

}  // namespace

std::vector<CompiledStep> compile_steps(const PreparedGraph& prepared) {
  std::vector<CompiledStep> steps;
  bool open = false;  // the last step is a segment that may still grow
  std::size_t segments = 0;
  for (auto t : prepared.plan.order) {
    if (capturable_task(prepared, t)) {
      if (!open) {
        steps.push_back(CompiledStep{true, {}, {}});
        open = true;
      }
      steps.back().tasks.push_back(t);
    } else {
      steps.push_back(CompiledStep{false, {t}, prepared.tasks()[t].name});
      open = false;
    }
  }
  for (auto& step : steps) {
    if (step.segment) step.name = segment_name(prepared, step, segments++);
  }
  return steps;
}

void step_accesses(const PreparedGraph& prepared, const CompiledStep& step,
                   std::vector<Tensor>& reads, std::vector<Tensor>& writes) {
  for (auto t : step.tasks) {
    const Task& task = prepared.tasks()[t];
    reads.insert(reads.end(), task.reads.begin(), task.reads.end());
    writes.insert(writes.end(), task.writes.begin(), task.writes.end());
  }
}

std::vector<TaskId> append_steps(Graph& g, const PreparedGraph& prepared,
                                 const std::vector<CompiledStep>& steps,
                                 const std::function<OpPtr(std::size_t step)>& segment_op) {
  const auto& tasks = prepared.tasks();
  std::vector<std::uint32_t> step_of(tasks.size(), 0);
  std::vector<TaskId> ids;
  ids.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const CompiledStep& step = steps[i];
    for (auto t : step.tasks) step_of[t] = static_cast<std::uint32_t>(i);
    const Task& first = tasks[step.tasks.front()];
    TaskOptions options{step.name, first.priority};
    if (step.segment) {
      ids.push_back(g.add(segment_op(i), std::move(options)));
      continue;
    }
    switch (first.kind) {
      case TaskKind::op: ids.push_back(g.add(first.op, std::move(options))); break;
      case TaskKind::copy:
        ids.push_back(g.copy(first.copy_src, first.copy_dst, std::move(options)));
        break;
      case TaskKind::host:
        ids.push_back(g.host(first.host, first.reads, first.writes, std::move(options)));
        break;
    }
  }
  for (std::uint32_t v = 0; v < tasks.size(); ++v) {
    for (auto u : tasks[v].predecessors) {
      if (step_of[u] != step_of[v]) g.precede(ids[step_of[u]], ids[step_of[v]]);
    }
  }
  return ids;
}

}  // namespace loom::detail
