#include "sched/cpu_launcher.hpp"

#include "core/task_context.hpp"
#include "sched/copy_engine.hpp"
#include "sched/plan.hpp"
#include "sched/run_machine.hpp"
#include "sched/run_profile.hpp"
#include "sched/scheduler_loop.hpp"
#include "trace/nvtx_range.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <thread>

namespace loom::detail {

CpuLauncher::CpuLauncher(std::shared_ptr<WorkerPool> workers, CopyEngine& copies,
                         SchedulerLoop& loop)
    : workers_(std::move(workers)), copies_(copies), loop_(loop) {}

void CpuLauncher::ready(RunMachine& /*machine*/, Run& run, std::uint32_t t) {
  run.ready_host.push_back(t);
}

bool CpuLauncher::advance(RunMachine& machine, Run& run) {
  if (run.ready_host.empty()) return false;
  // The round's tasks move to the scratch list, and the run keeps the
  // scratch's capacity for the next round: neither allocates once grown.
  std::vector<std::uint32_t>& ready = ready_scratch_;
  ready.clear();
  ready.swap(run.ready_host);
  // Highest priority first, in the order they became ready within a level
  // (a pass a level: no sort, whose buffer would allocate).
  for (int level = kPriorityLevels - 1; level >= 0; --level) {
    for (auto t : ready) {
      if (priority_index(run.tasks()[t].priority) != level) continue;
      // Cancelled while it waited for its round: the machine has taken it.
      if (run.tasks_state[t].status != TaskStatus::pending) continue;
      machine.running(run, t);
      post(run, t);
    }
  }
  return true;
}

bool CpuLauncher::collect(RunMachine& machine) {
  bool progress = false;
  Done done{};
  while (done_.pop(done)) {
    Run& run = *done.run;
    run.host_outstanding.fetch_sub(1);
    TaskState& ts = run.tasks_state[done.task];
    if (ts.error) {
      machine.fail(run, done.task, ts.error);
    } else if (ts.skipped) {
      machine.skipped(run, done.task);
    } else {
      machine.complete(run, done.task);
    }
    progress = true;
  }
  return progress;
}

bool CpuLauncher::idle(const Run& run) const { return run.host_outstanding.load() == 0; }

void CpuLauncher::post(Run& run, std::uint32_t t) {
  run.host_outstanding.fetch_add(1);
  // Written before the run's first job is queued (the queue orders it before
  // every worker's read), and never while one may be reading it.
  if (run.host_launcher != this) run.host_launcher = this;
  Run* r = &run;
  workers_->post(run.tasks()[t].priority,
                 [r, t](int worker) { r->host_launcher->run_on_worker(*r, t, worker); });
  mark(RunMilestone::launched);
}

void CpuLauncher::run_on_worker(Run& run, std::uint32_t t, int worker) {
  TaskState& ts = run.tasks_state[t];
  const Task& task = run.tasks()[t];
  if (run.state->cancel_requested.load()) {
    ts.skipped = true;
  } else {
    ts.worker = worker;
    ts.start_us = micros_since(run.started_at);
    try {
      const TaskScope scope(task.name);
      const CurrentRunScope in_run(run.state.get());
      const NvtxRange range(task.name);
      switch (task.kind) {
        case TaskKind::host: task.host(); break;
        case TaskKind::op: task.op->run_cpu(); break;
        case TaskKind::copy: copies_.host_copy(task.copy_src, task.copy_dst); break;
      }
    } catch (...) {
      // A loom::Error keeps its type; one that names another task (a run
      // waited on here failed) becomes a new error of this task "because of"
      // that one, which stays as it was.
      // What threw: the user's host function, or an op's (a collective's)
      // CPU implementation, named as such (built only now: no allocation a
      // task that succeeds).
      const std::string thrower = task.kind == TaskKind::host
                                      ? std::string("the host function")
                                      : std::string(kind_name(task)) + " '" +
                                            (task.op ? std::string(task.op->name()) : task.name) +
                                            "' (CPU implementation)";
      ts.error = naming_task(std::current_exception(), task.name, thrower);
    }
    ts.end_us = micros_since(run.started_at);
  }
  while (!done_.push(Done{&run, t})) std::this_thread::yield();
  loop_.wake();
}

}  // namespace loom::detail
