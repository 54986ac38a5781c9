#pragma once
// The executor: one scheduling thread a runtime, host workers, and (on the
// CUDA backend) a fixed set of pooled streams. It puts together the parts
// that do the work, each in its own files:
//   prepare.hpp         a graph checked, placed and planned once (cached in its slot)
//   run_machine.hpp     the run state machine: ready, complete, fail, cancel,
//                       ordering across runs, publishing; no backend
//   launcher.hpp        the interface through which tasks are put to work:
//     cpu_launcher.hpp    host workers
//     cuda_launcher.hpp   streams and events, eagerly (wake-ups armed there)
//   scheduler_loop.hpp  the scheduling thread, its queue and its wake-ups
//   run_trace.hpp       a run's Chrome trace, and its spans in an activity log
//   activity_recorder.hpp  the activity log: which runs joined it, their spans
// and, beside it, compile.hpp (Runtime::compile): a graph planned once, its
// intermediates in one arena (memory_plan.hpp), its device segments captured
// into CUDA graphs (compile_plan.hpp, capture.hpp); a replay is an ordinary
// submit of the graph of segments.
// The scheduling thread never blocks on a stream, never allocates or frees
// device memory (finished runs are torn down on a worker), and sleeps while
// device work runs: a host callback queued behind the watched work wakes it.

#include "sched/copy_engine.hpp"
#include "sched/cpu_launcher.hpp"
#include "sched/cuda_launcher.hpp"
#include "sched/poison.hpp"
#include "sched/prepare.hpp"
#include "sched/run_machine.hpp"
#include "sched/scheduler_loop.hpp"
#include "sched/worker_pool.hpp"

#include <loom/completion.hpp>
#include <loom/device.hpp>
#include <loom/future.hpp>
#include <loom/graph.hpp>

#include <cuda_runtime_api.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace loom::detail {

struct ExecutorOptions {
  bool cuda = false;
  int device = 0;
  int streams_per_priority = 4;
  int workers = 0;         // 0: from the core count
  std::string trace_path;  // empty: no trace
  /// The runtime's own stream on the device (allocations, Runtime::copy):
  /// each run's streams first wait for the work already queued on it.
  cudaStream_t entry_stream = nullptr;
  /// See PrepareOptions::check_graph.
  std::function<void(const Graph&)> check_graph;
};

class Executor {
 public:
  Executor(ExecutorOptions options, CopyEngine& copies);
  ~Executor();  // shutdown()

  /// The shutdown protocol (lifecycle.hpp): lets every run in flight finish,
  /// with the runs and continuations they submit meanwhile; then refuses
  /// new runs, stops the scheduling thread and joins the workers. Call it
  /// while everything the runs use is still alive, never on the executor's
  /// own threads (runs_on_own_thread()). Idempotent.
  void shutdown();
  /// True on the executor's scheduling thread or one of its workers, where
  /// shutdown() would wait for itself.
  bool runs_on_own_thread() const noexcept;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Validates the graph and starts it, after the unfinished runs whose
  /// data it touches. @throws InvalidArgument (naming the task); the
  /// poisoning error once a kernel fault made the device unusable.
  Future submit(const Graph& graph, const PrepareHints& hints = {});
  /// dst = src as a run of one task (ordered like any run). @throws as submit.
  Completion submit_copy(const Tensor& src, const Tensor& dst);

  /// The graph's prepared form (validated, checked, planned; cached in its
  /// slot), without running it. @throws as submit.
  std::shared_ptr<const PreparedGraph> prepare(const Graph& graph, const PrepareHints& hints = {}) {
    return preparer_.prepare(graph, hints);
  }
  /// See Preparer::adopt.
  void adopt(Graph& graph, std::shared_ptr<const PreparedGraph> prepared) const {
    preparer_.adopt(graph, std::move(prepared));
  }

  /// Counts a compile as work in flight for its scope (the shutdown
  /// protocol waits for it, and refuses one once closed).
  class CompileInFlight {
   public:
    /// @throws InvalidArgument when the runtime is being destroyed.
    explicit CompileInFlight(Executor& executor) : lifecycle_(executor.machine_.lifecycle()) {
      lifecycle_.compile_begun();
    }
    ~CompileInFlight() { lifecycle_.compile_done(); }
    CompileInFlight(const CompileInFlight&) = delete;
    CompileInFlight& operator=(const CompileInFlight&) = delete;

   private:
    Lifecycle& lifecycle_;
  };

  bool cuda() const noexcept { return options_.cuda; }
  int device() const noexcept { return options_.device; }
  cudaStream_t entry_stream() const noexcept { return options_.entry_stream; }

  /// Blocks until no run is in flight. @throws InvalidArgument on loom's own threads.
  void wait_idle();
  /// See Runtime::start_activity_log and stop_activity_log.
  void start_activity_log() { machine_.start_activity_log(); }
  ActivityLog stop_activity_log() { return machine_.stop_activity_log(); }
  /// Rethrows the error that made the device unusable, if one did.
  void throw_if_poisoned() const { poison_.throw_if_poisoned(); }
  bool poisoned() const noexcept { return poison_.poisoned(); }
  /// Records `error` as poisoning the runtime when it is a sticky CUDA error.
  void note_error(const std::exception_ptr& error) { poison_.note(error); }

 private:
  Future submit_prepared(std::shared_ptr<const PreparedGraph> prepared,
                         std::shared_ptr<CompletionState> completion);

  ExecutorOptions options_;
  Poison poison_;
  Preparer preparer_;
  std::shared_ptr<WorkerPool> workers_;
  SchedulerLoop loop_;                    // its thread starts last and stops first
  CpuLauncher host_;                      // host tasks
  std::unique_ptr<CudaLauncher> device_;  // device tasks and staged copies; null on the CPU backend
  RunMachine machine_;
};

}  // namespace loom::detail
