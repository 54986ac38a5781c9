#pragma once
// The executor: one scheduling thread a runtime, host workers, and (on the
// CUDA backend) a fixed set of pooled streams.
//
// The scheduling thread takes new runs and completions from lock-free queues,
// launches ready device tasks onto their planned streams (waiting on events
// only where the plan says an edge crosses streams), polls the events of
// watched device tasks without blocking, and hands host tasks to the workers.
// It never blocks on a stream and never allocates device memory.

#include "cuda/event_pool.hpp"
#include "cuda/stream_pool.hpp"
#include "sched/plan.hpp"
#include "sched/prepared_graph.hpp"
#include "sched/run_state.hpp"
#include "sched/worker_pool.hpp"
#include "trace/chrome_trace.hpp"

#include <loom/completion.hpp>
#include <loom/future.hpp>
#include <loom/graph.hpp>

#include <boost/lockfree/queue.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
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
  /// A copy between host spaces, on the calling thread.
  virtual void host_copy(const Tensor& src, const Tensor& dst) = 0;
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

  /// Validates the graph and starts it. @throws InvalidArgument (naming the task).
  Future submit(const Graph& graph);

  bool cuda() const noexcept { return options_.cuda; }

  struct Run;

 private:
  struct Done {
    Run* run;
    std::uint32_t task;
  };

  /// The graph's prepared form: from its slot when this executor made it, else made now.
  std::shared_ptr<const PreparedGraph> prepare(const Graph& graph);
  std::vector<Placement> placements(const Graph& graph) const;
  void check_memory(const Graph& graph) const;
  void schedule();
  void start_run(Run& run);
  void make_ready(Run& run, std::uint32_t t);
  void satisfy(Run& run, std::uint32_t t);
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
  void finish_run(Run& run);
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
  std::thread scheduler_;
};

}  // namespace loom::detail
