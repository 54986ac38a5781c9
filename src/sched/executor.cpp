#include "sched/executor.hpp"

#include "core/thread_role.hpp"
#include "sched/run_profile.hpp"

#include <algorithm>
#include <thread>

namespace loom::detail {

namespace {

int worker_count(const ExecutorOptions& options) {
  if (options.workers > 0) return options.workers;
  const int cores = static_cast<int>(std::max(2U, std::thread::hardware_concurrency()));
  return options.cuda ? std::clamp(cores / 4, 2, 4) : std::clamp(cores, 2, 16);
}

std::unique_ptr<CudaLauncher> make_device_launcher(const ExecutorOptions& options,
                                                   CopyEngine& copies, Poison& poison,
                                                   SchedulerLoop& loop) {
  if (!options.cuda) return nullptr;
  return std::make_unique<CudaLauncher>(
      CudaLauncherOptions{options.device, options.streams_per_priority, options.entry_stream},
      copies, poison, loop);
}

}  // namespace

Executor::Executor(ExecutorOptions options, CopyEngine& copies)
    : options_(std::move(options)),
      preparer_(PrepareOptions{options_.cuda, options_.device, options_.streams_per_priority,
                               options_.check_graph},
                copies),
      workers_(std::make_shared<WorkerPool>(worker_count(options_))),
      host_(workers_, copies, loop_),
      device_(make_device_launcher(options_, copies, poison_, loop_)),
      machine_(host_, device_.get(), poison_, workers_, options_.trace_path) {
  loop_.start(machine_, host_, device_.get(), options_.cuda ? options_.device : -1);
}

Executor::~Executor() { shutdown(); }

void Executor::shutdown() {
  // Runs, and continuations that may submit more, first: the scheduling
  // thread and the workers stay until nothing can reach them any more.
  machine_.drain_and_close();
  loop_.stop();
  // Workers may still be finishing a wake(), a trace write or a run's
  // teardown: join them before the members they use go away.
  workers_->shutdown();
  if (device_) device_->shutdown();
}

bool Executor::runs_on_own_thread() const noexcept {
  const ThreadRole* role = current_thread_role();
  return role != nullptr && (role->owner() == workers_.get() || role->owner() == &loop_);
}

void Executor::wait_idle() { machine_.wait_idle(); }

Future Executor::submit(const Graph& graph, const PrepareHints& hints) {
  mark(RunMilestone::submitted);
  throw_if_poisoned();
  return submit_prepared(preparer_.prepare(graph, hints), nullptr);
}

Completion Executor::submit_copy(const Tensor& src, const Tensor& dst) {
  throw_if_poisoned();
  Graph graph;
  graph.copy(src, dst, {.name = "Runtime::copy"});
  auto completion = std::make_shared<CompletionState>();
  submit_prepared(preparer_.prepare(graph), completion);
  return CompletionAccess::make(std::move(completion));
}

Future Executor::submit_prepared(std::shared_ptr<const PreparedGraph> prepared,
                                 std::shared_ptr<CompletionState> completion) {
  auto run = machine_.make_run(std::move(prepared), std::move(completion));
  run->state->wake_scheduler = [loop = &loop_] { loop->wake(); };
  Future future = FutureAccess::make(run->state);
  loop_.submit(std::move(run));
  return future;
}

}  // namespace loom::detail
