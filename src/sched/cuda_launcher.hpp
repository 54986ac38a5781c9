#pragma once
// The eager CUDA launcher: device tasks are enqueued one by one on a fixed
// set of pooled streams, as the plan assigns them (chains on one stream,
// event waits only where an edge crosses streams), and staged copies
// (pageable memory) are started and complete on their own.
//
// Launch order: on each stream in plan order (the plan's event elimination
// and stream tails assume it): across streams in plan order while it can
// (interleaved launches measured cheaper than one stream's batch after
// another), then each stream on its own past a task that is not ready yet,
// high-priority streams first. A task's end is observed by polling the
// events of watched tasks (host successors, stream tails); stream order
// confirms everything launched before them. Before the scheduler sleeps,
// arm_wakeups() queues a host callback (Waker) behind the watched work.
//
// Across runs: a run that follows earlier runs over the same data takes
// their streams (rotation) and, at its start, waits for their streams with
// events (start marks watch those waits); runs over disjoint data take the
// least used rotation, so that they overlap on the device.
//
// The implementation is split by concern over cuda_*.cpp: cuda_run_streams.hpp
// lists them.

#include "cuda/event_pool.hpp"
#include "cuda/stream_pool.hpp"
#include "sched/launcher.hpp"
#include "sched/poison.hpp"

#include <loom/device.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace loom::detail {

class CopyEngine;
class SchedulerLoop;
class Waker;

struct CudaLauncherOptions {
  int device = 0;
  int streams_per_priority = 4;
  /// The runtime's own stream on the device (allocations, Runtime::copy):
  /// each run's streams first wait for the work already queued on it.
  cudaStream_t entry_stream = nullptr;
};

class CudaLauncher final : public Launcher {
 public:
  /// @throws NoDevice, CudaError (streams and events are made here).
  CudaLauncher(CudaLauncherOptions options, CopyEngine& copies, Poison& poison,
               SchedulerLoop& loop);
  ~CudaLauncher() override;  // shutdown()
  CudaLauncher(const CudaLauncher&) = delete;
  CudaLauncher& operator=(const CudaLauncher&) = delete;

  /// Once no run is left and the scheduling thread is gone: waits for the
  /// streams and drops the wake-up callbacks (leaving them behind where a
  /// stream cannot be waited for). Idempotent.
  void shutdown();

  void attach(Run& run) override;
  bool orders_runs() const noexcept override { return true; }
  void admit(Run& run, const std::vector<Run*>& earlier, bool follows,
             const RunList& runs) override;
  void start(Run& run) override;
  void ready(RunMachine& machine, Run& run, std::uint32_t t) override;
  bool advance(RunMachine& machine, Run& run) override;
  bool idle(const Run& run) const override;
  bool watching(const Run& run) const override;
  bool arm_wakeups(const RunList& runs) override;
  void trace_tracks(const Run& run, std::vector<TraceTrack>& tracks) const override;
  bool trace_span(const Run& run, std::uint32_t t, TraceEvent& event) const override;
  /// Records a timing event on a stream of its own and waits for it.
  std::shared_ptr<const DeviceClockMark> mark_trace_clock(Clock::time_point opened) override;
  std::optional<double> trace_origin_us(const Run& run, const DeviceClockMark& mark) const override;

  // Per-run state (cuda_run_streams.hpp).
  struct DeviceTask;
  struct StreamCursor;
  struct RunStreams;

 private:
  class Resources;
  /// The executor stream that a run's plan stream lands on.
  std::size_t physical(const Run& run, int plan_stream) const noexcept;
  int least_used_rotation(const Run& run, const RunList& runs);
  /// Launches (or passes, if cancelled or failed) task t, the next of its
  /// plan stream; false when it is not ready yet.
  bool take_next_on_stream(RunMachine& machine, Run& run, std::uint32_t t, int stream);
  bool advance_in_plan_order(RunMachine& machine, Run& run);
  bool advance_stream(RunMachine& machine, Run& run, int stream);
  void watch_stream_tail(RunMachine& machine, Run& run, int stream);
  void mark_unlaunched_waits(Run& run);
  void launch(RunMachine& machine, Run& run, std::uint32_t t);
  void start_async(RunMachine& machine, Run& run, std::uint32_t t);
  bool poll(RunMachine& machine, Run& run);
  void give_up_overdue(RunMachine& machine, Run& run);
  bool poll_staged(RunMachine& machine, Run& run);

  CudaLauncherOptions options_;
  int k_;  // streams a priority
  CopyEngine& copies_;
  Poison& poison_;
  SchedulerLoop& loop_;
  std::unique_ptr<StreamPool> stream_pool_;
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<EventPool> timing_events_;
  std::vector<StreamPool::Lease> streams_;
  std::vector<std::uint64_t> launches_;         // scheduling thread: launches per executor stream
  std::vector<int> rotation_load_;              // scheduling thread: scratch
  std::optional<DeviceProperties> properties_;  // scheduling thread: read once
  Waker* waker_ = nullptr;                      // host callbacks that wake the scheduler
};

}  // namespace loom::detail
