// Staged copies (pageable memory, cuda_launcher.hpp): started by the
// scheduler when ready, run by the copy engine's workers, and seen to end
// here; their end wakes the scheduler.
#include "sched/cuda_run_streams.hpp"

#include "core/completion_state.hpp"
#include "core/task_context.hpp"
#include "sched/copy_engine.hpp"
#include "sched/run_machine.hpp"
#include "sched/scheduler_loop.hpp"

namespace loom::detail {

void CudaLauncher::start_async(RunMachine& machine, Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  DeviceTask& dt = streams_of(run).tasks[t];
  const Task& task = run.tasks()[t];
  try {
    const TaskScope scope(task.name);
    ts.start_us = micros_since(run.started_at);
    dt.async = copies_.start(task.copy_src, task.copy_dst);
  } catch (...) {
    machine.fail(run, t, std::current_exception());
    return;
  }
  machine.running(run, t);
  streams_of(run).async_running.push_back(t);
  // Its end wakes the scheduler (it may be asleep by then).
  CompletionAccess::state(dt.async).on_finish([loop = &loop_] { loop->wake(); });
}

bool CudaLauncher::poll_staged(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  bool progress = false;
  const bool poisoned = poison_.poisoned();
  for (std::size_t i = 0; i < mine.async_running.size();) {
    const auto a = mine.async_running[i];
    DeviceTask& dt = mine.tasks[a];
    // On a poisoned device a staged copy may never report its end: stop
    // waiting, and make sure that its end, should it come, wakes no one.
    if (!dt.async.ready()) {
      if (!poisoned) {
        ++i;
        continue;
      }
      CompletionAccess::state(dt.async).on_finish(nullptr);
    }
    mine.async_running[i] = mine.async_running.back();
    mine.async_running.pop_back();
    progress = true;
    run.tasks_state[a].end_us = micros_since(run.started_at);
    const std::exception_ptr e = dt.async.ready() ? dt.async.error() : poison_.error();
    if (e) {
      machine.fail(run, a, e);
    } else {
      machine.complete(run, a);
    }
  }
  return progress;
}

}  // namespace loom::detail
