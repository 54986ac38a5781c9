#pragma once
// The executor: one scheduling thread a runtime, host workers, and (on the
// CUDA backend) a fixed set of pooled streams.
//
// The scheduling thread takes new runs and completions from lock-free queues,
// orders runs after earlier unfinished runs that touch the same data
// (RunOrdering), launches ready device tasks onto their planned streams
// (waiting on events only where the plan says an edge crosses streams),
// polls the events of watched device tasks without blocking, and hands host
// tasks to the workers. It never blocks on a stream, never allocates or
// frees memory (finished runs are torn down on a worker), and sleeps while
// device work runs: a host callback queued behind the watched work wakes it.

#include "core/completion_state.hpp"
#include "cuda/event_pool.hpp"
#include "cuda/stream_pool.hpp"
#include "sched/plan.hpp"
#include "sched/prepared_graph.hpp"
#include "sched/run_ordering.hpp"
#include "sched/run_state.hpp"
#include "sched/worker_pool.hpp"
#include "trace/chrome_trace.hpp"

#include <loom/completion.hpp>
#include <loom/device.hpp>
#include <loom/future.hpp>
#include <loom/graph.hpp>

#include <boost/lockfree/queue.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom::detail {

/// How the executor copies: the runtime's copy paths, on a given stream.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  /// A stream-ordered copy (pinned <-> device, device <-> device) on `stream`.
  virtual void enqueue(const Tensor& src, const Tensor& dst, StreamView stream) = 0;
  /// A staged copy (pageable <-> device), completing on its own.
  virtual Completion start(const Tensor& src, const Tensor& dst) = 0;
  /// Refuses a copy no path can make (mismatched tensors, layouts the path
  /// cannot take), saying what was expected. @throws InvalidArgument.
  virtual void check(const Tensor& src, const Tensor& dst) const = 0;
  /// A copy between host spaces, on the calling thread.
  virtual void host_copy(const Tensor& src, const Tensor& dst) = 0;
  /// Device scratch memory for work on `stream`, given back when released.
  virtual std::shared_ptr<Storage> workspace(std::size_t bytes, StreamView stream) = 0;
};

struct ExecutorOptions {
  bool cuda = false;
  int device = 0;
  int streams_per_priority = 4;
  int workers = 0;         // 0: from the core count
  std::string trace_path;  // empty: no trace
  /// The runtime's own stream on the device (allocations, Runtime::copy):
  /// each run's streams first wait for the work already queued on it.
  cudaStream_t entry_stream = nullptr;
};

class Executor {
 public:
  Executor(ExecutorOptions options, CopyEngine& copies);
  ~Executor();  // lets every submitted run finish
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Validates the graph and starts it, after the unfinished runs whose
  /// data it touches. @throws InvalidArgument (naming the task); the
  /// poisoning error once a kernel fault made the device unusable.
  Future submit(const Graph& graph);
  /// dst = src as a run of one task (ordered like any run). @throws as submit.
  Completion submit_copy(const Tensor& src, const Tensor& dst);

  bool cuda() const noexcept { return options_.cuda; }

  /// Blocks until no run is in flight. @throws InvalidArgument on loom's own threads.
  void wait_idle();
  /// Rethrows the error that made the device unusable, if one did.
  void throw_if_poisoned() const;
  bool poisoned() const noexcept { return poisoned_.load(std::memory_order_acquire); }
  /// Records `error` as poisoning the runtime when it is a sticky CUDA error.
  void note_error(const std::exception_ptr& error);

  struct Run;
  struct Waker;
  struct Resources;

 private:
  struct Done {
    Run* run;
    std::uint32_t task;
  };

  Future submit_prepared(std::shared_ptr<const PreparedGraph> prepared,
                         std::shared_ptr<CompletionState> completion);
  void admit(Run& run);
  void start_ready_runs();
  void settle(Run& run, std::uint32_t t);
  void on_settled(Run& run);
  void release_followers(std::vector<Run*>& followers);
  bool finished(const Run& run) const;
  bool arm_wakeups();
  /// The executor stream that a run's plan stream lands on.
  std::size_t physical(const Run& run, int plan_stream) const noexcept;
  int least_used_rotation(const Run& run);

  /// The graph's prepared form: from its slot when this executor made it, else made now.
  std::shared_ptr<const PreparedGraph> prepare(const Graph& graph);
  std::vector<Placement> placements(const Graph& graph) const;
  void check_memory(const Graph& graph) const;
  void schedule();
  void start_run(Run& run);
  void make_ready(Run& run, std::uint32_t t);
  void satisfy(Run& run, std::uint32_t t);
  /// Launches (or passes, if cancelled or failed) task t, the next of its
  /// plan stream; false when it is not ready yet.
  bool take_next_on_stream(Run& run, std::uint32_t t, int stream);
  bool advance_in_plan_order(Run& run);
  bool advance_stream(Run& run, int stream);
  void watch_stream_tail(Run& run, int stream);
  void launch_device(Run& run, std::uint32_t t);
  void start_async(Run& run, std::uint32_t t);
  void post_host(Run& run, std::uint32_t t);
  void run_host_task(Run& run, std::uint32_t t, int worker);
  void complete(Run& run, std::uint32_t t);
  void fail(Run& run, std::uint32_t t, std::exception_ptr error);
  void cancel_successors(Run& run, std::uint32_t t, const std::string& why);
  void cancel_pending(Run& run, const std::string& why);
  bool poll(Run& run);
  void finish_run(std::unique_ptr<Run> run);
  struct Trace {
    std::string path;
    std::vector<TraceTrack> tracks;
    std::vector<TraceEvent> events;
  };
  Trace collect_trace(Run& run);
  void wake();

  ExecutorOptions options_;
  CopyEngine& copies_;
  std::shared_ptr<WorkerPool> workers_;
  std::unique_ptr<StreamPool> stream_pool_;
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<EventPool> timing_events_;
  std::vector<StreamPool::Lease> streams_;

  boost::lockfree::queue<Run*> incoming_{64};
  boost::lockfree::queue<Done> done_{1024};
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::atomic<bool> wake_flag_{false};
  std::atomic<bool> stop_{false};
  std::atomic<unsigned long long> run_counter_{0};
  std::uint64_t serial_;                    // tells this executor's prepared graphs from another's
  std::vector<std::unique_ptr<Run>> runs_;  // scheduler thread only
  std::vector<Run*> to_start_;              // scheduler thread only: gates just opened
  std::vector<RunOrdering::RunId> after_;   // scheduler thread only: scratch
  RunOrdering ordering_;                    // scheduler thread only
  std::vector<std::uint64_t> launches_;     // scheduler thread only: launches per executor stream
  std::vector<int> rotation_load_;
  std::optional<DeviceProperties>
      properties_;  // scheduler thread only: read once          // scheduler thread only: scratch
  Waker* waker_ = nullptr;  // host callbacks that wake the scheduler
  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;
  int live_runs_ = 0;  // under idle_mutex_: submitted and not yet published
  mutable std::mutex poison_mutex_;
  std::atomic<bool> poisoned_{false};
  std::exception_ptr poison_;  // under poison_mutex_
  std::thread scheduler_;
};

}  // namespace loom::detail
