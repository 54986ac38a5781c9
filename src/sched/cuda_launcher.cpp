#include "sched/cuda_launcher.hpp"

#include "core/completion_state.hpp"
#include "core/log.hpp"
#include "core/storage.hpp"
#include "core/task_context.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/stream.hpp"
#include "sched/copy_engine.hpp"
#include "sched/run_machine.hpp"
#include "sched/scheduler_loop.hpp"
#include "trace/nvtx_range.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>

#include <algorithm>

namespace loom::detail {

// A device task's launch state in one run.
struct CudaLauncher::DeviceTask {
  bool watching = false;         // its event is polled
  bool confirmed = false;        // seen complete through its stream's watched tail
  std::uint64_t launch_seq = 0;  // its place among its executor stream's launches
  EventPool::Lease event;
  EventPool::Lease trace_start;
  EventPool::Lease trace_end;
  Completion async;                                  // a staged copy's
  std::vector<std::shared_ptr<Storage>> workspaces;  // given back with the run, after its work
};

namespace {

// One plan stream of a run: what was launched on it, in order, and how far
// its launches and its confirmed completions have come.
struct StreamCursor {
  std::vector<std::uint32_t> in_flight;  // launch order
  std::size_t head = 0;                  // the first launched and not yet confirmed
  std::size_t next = 0;                  // the next of the stream's plan to launch
};

}  // namespace

// A run's state on the streams (Run::device).
struct CudaLauncher::RunStreams final : LaunchState {
  std::vector<DeviceTask> tasks;
  std::vector<StreamCursor> streams;  // per plan stream
  std::size_t order_next = 0;         // the next in prepared->device_order
  int rotation = 0;  // the plan's stream k of a priority runs on executor stream (k + rotation) % K
  std::vector<std::uint8_t> wait_streams;  // executor streams of earlier runs to wait on at start
  std::vector<EventPool::Lease> gate_events;
  std::vector<EventPool::Lease> start_marks;  // behind the waits on earlier runs, one a stream
  // Plan streams ordered after earlier runs by stream order alone (they land
  // on those runs' streams): no event, so no start mark unless nothing of
  // this run is launched there (see mark_unlaunched_waits).
  std::vector<std::uint8_t> stream_order_waits;
  bool unlaunched_marked = false;
  std::vector<std::size_t> queried_streams;  // executor streams watched without an event
  std::vector<std::uint32_t> watched;
  std::vector<std::uint32_t> async_running;
  EventPool::Lease trace_base;
  EventPool::Lease entry;
};

namespace {

CudaLauncher::RunStreams& streams_of(Run& run) noexcept {
  return static_cast<CudaLauncher::RunStreams&>(*run.device);
}
const CudaLauncher::RunStreams& streams_of(const Run& run) noexcept {
  return static_cast<const CudaLauncher::RunStreams&>(*run.device);
}

// True once everything queued on the stream has run, or the device is lost
// (nothing more will run). Never blocks.
bool stream_drained_or_lost(StreamView stream) {
  const cudaError_t rc = cudaStreamQuery(stream.native());
  if (rc == cudaErrorNotReady) return false;
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return true;
}

// A launch that went wrong without a failing call (a bad configuration, too
// much shared memory) leaves its error for cudaGetLastError: read it right
// after the op, so it fails this task and is not blamed on the next one.
void check_op_launch(const Task& task) {
  const cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) return;
  const std::string what = std::string(to_string(task.kind)) + " '" + task.name + "' launch";
  throw_cuda_error(rc, what.c_str(), __FILE__, __LINE__);
}

}  // namespace

// What a running device task may ask for: scratch memory for its stream,
// kept until the run is over (its device work has finished by then), and the
// device's properties.
class CudaLauncher::Resources final : public TaskResources {
 public:
  Resources(CudaLauncher& launcher, DeviceTask& task, StreamView stream)
      : launcher_(launcher), task_(task), stream_(stream) {}
  void* workspace(std::size_t bytes) override {
    task_.workspaces.push_back(launcher_.copies_.workspace(bytes, stream_));
    return task_.workspaces.back()->base;
  }
  const DeviceProperties& properties() override {
    if (!launcher_.properties_)
      launcher_.properties_ = device_properties(launcher_.options_.device);
    return *launcher_.properties_;
  }

 private:
  CudaLauncher& launcher_;
  DeviceTask& task_;
  StreamView stream_;
};

CudaLauncher::CudaLauncher(CudaLauncherOptions options, CopyEngine& copies, Poison& poison,
                           SchedulerLoop& loop)
    : options_(options),
      k_(std::max(1, options.streams_per_priority)),
      copies_(copies),
      poison_(poison),
      loop_(loop) {
  stream_pool_ = std::make_unique<StreamPool>(options_.device);
  events_ = std::make_unique<EventPool>(options_.device);
  timing_events_ = std::make_unique<EventPool>(options_.device, EventTiming::enabled);
  for (int p = 0; p < kPriorityLevels; ++p) {
    for (int i = 0; i < k_; ++i)
      streams_.push_back(stream_pool_->acquire(static_cast<Priority>(p)));
  }
  streams_.push_back(stream_pool_->acquire(Priority::normal));  // collectives
  events_->reserve(64);
  launches_.assign(streams_.size(), 0);
  waker_ = new Waker(loop_, streams_.size());
}

CudaLauncher::~CudaLauncher() { shutdown(); }

void CudaLauncher::shutdown() {
  if (waker_ == nullptr) return;
  waker_->detach();
  // Queued wake-up callbacks run before a stream synchronizes. On a
  // poisoned device they may never run: leave the waker to them.
  bool idle = true;
  for (auto& s : streams_) {
    if (!LOOM_CUDA_ASSERT(cudaStreamSynchronize(s->view()))) idle = false;
  }
  if (idle) delete waker_;
  waker_ = nullptr;
}

void CudaLauncher::attach(Run& run) {
  auto state = std::make_unique<RunStreams>();
  state->tasks.resize(run.tasks().size());
  const auto streams = static_cast<std::size_t>(run.plan().stream_count);
  state->streams.resize(streams);
  for (std::size_t s = 0; s < streams; ++s) {
    state->streams[s].in_flight.reserve(run.stream_plan(s).size());
  }
  run.device = std::move(state);
}

std::size_t CudaLauncher::physical(const Run& run, int plan_stream) const noexcept {
  if (plan_stream >= run.plan().collective_stream()) return static_cast<std::size_t>(plan_stream);
  const int priority = plan_stream / k_;
  return static_cast<std::size_t>(priority * k_ +
                                  (plan_stream % k_ + streams_of(run).rotation) % k_);
}

int CudaLauncher::least_used_rotation(const Run& run, const RunList& runs) {
  // Runs in flight spread over the rotations; with none in flight a run
  // takes the first (measured: moving every run to the next streams costs
  // launches about 1 µs each on the H200).
  rotation_load_.assign(static_cast<std::size_t>(k_), 0);
  for (const auto& other : runs) {
    if (other.get() == &run || other->unfinished == 0 || !other->prepared->uses_streams) continue;
    ++rotation_load_[static_cast<std::size_t>(streams_of(*other).rotation)];
  }
  return static_cast<int>(std::min_element(rotation_load_.begin(), rotation_load_.end()) -
                          rotation_load_.begin());
}

void CudaLauncher::admit(Run& run, const std::vector<Run*>& earlier, bool follows,
                         const RunList& runs) {
  RunStreams& mine = streams_of(run);
  // Which executor streams the run's plan lands on: a run that follows an
  // earlier one takes its streams (stream order then costs no event); any
  // other takes the least used rotation, so that runs over disjoint data overlap.
  if (follows && !earlier.empty()) {
    mine.rotation = streams_of(*earlier.back()).rotation;
  } else {
    mine.rotation = least_used_rotation(run, runs);
  }
  if (!follows) return;  // it starts once they are over
  // Device work follows device work through events at the start: it may
  // start once the earlier runs have enqueued all of their work.
  mine.wait_streams.assign(streams_.size(), 0);
  for (const Run* e : earlier) {
    const auto& plans = e->prepared->stream_plan;
    for (std::size_t s = 0; s < plans.size(); ++s) {
      if (!plans[s].empty()) mine.wait_streams[physical(*e, static_cast<int>(s))] = 1;
    }
  }
}

void CudaLauncher::start(Run& run) {
  RunStreams& mine = streams_of(run);
  const auto streams = static_cast<std::size_t>(run.plan().stream_count);
  if (options_.entry_stream != nullptr && run.prepared->uses_streams &&
      !stream_idle(StreamView(options_.entry_stream))) {
    // Memory the pool hands out is ordered on the runtime's stream; this
    // run's streams must not overtake work still queued there. (An idle
    // entry stream has nothing left to overtake.)
    mine.entry = events_->acquire();
    mine.entry->record(StreamView(options_.entry_stream));
    for (std::size_t s = 0; s < streams; ++s) {
      if (!run.stream_plan(s).empty()) {
        mine.entry->make_wait(streams_[physical(run, static_cast<int>(s))]->view());
      }
    }
  }
  // Earlier runs over the same data have enqueued all their work: this
  // run's streams wait for theirs (a stream is already ordered after itself).
  std::vector<std::uint8_t> waited_on(mine.wait_streams.empty() ? 0 : streams, 0);
  if (!mine.wait_streams.empty()) mine.stream_order_waits.assign(streams, 0);
  for (std::size_t s = 0; s < mine.wait_streams.size(); ++s) {
    if (mine.wait_streams[s] == 0) continue;
    EventPool::Lease* event = nullptr;
    for (std::size_t plan_stream = 0; plan_stream < streams; ++plan_stream) {
      const auto target = physical(run, static_cast<int>(plan_stream));
      if (run.stream_plan(plan_stream).empty()) continue;
      if (target == s) {
        mine.stream_order_waits[plan_stream] = 1;
        continue;
      }
      if (event == nullptr) {
        mine.gate_events.push_back(events_->acquire());
        event = &mine.gate_events.back();
        (*event)->record(streams_[s]->view());
      }
      (*event)->make_wait(streams_[target]->view());
      waited_on[plan_stream] = 1;
    }
  }
  // What this run's streams now wait for (earlier runs' work) must be seen
  // done before the run is over, even if it launches nothing after it:
  // later runs follow this one in the earlier ones' place.
  for (std::size_t plan_stream = 0; plan_stream < waited_on.size(); ++plan_stream) {
    if (waited_on[plan_stream] == 0) continue;
    mine.start_marks.push_back(events_->acquire());
    mine.start_marks.back()->record(streams_[physical(run, static_cast<int>(plan_stream))]->view());
  }
  if (run.tracing) {
    mine.trace_base = timing_events_->acquire();
    std::size_t first = 0;
    while (first + 1 < streams && run.stream_plan(first).empty()) ++first;
    mine.trace_base->record(streams_[physical(run, static_cast<int>(first))]->view());
  }
}

void CudaLauncher::ready(RunMachine& machine, Run& run, std::uint32_t t) {
  // A device task waits for its turn on its stream (advance()); a staged
  // copy starts now.
  if (run.placement(t) == Placement::async) start_async(machine, run, t);
}

bool CudaLauncher::advance(RunMachine& machine, Run& run) {
  bool progress = advance_in_plan_order(machine, run);
  for (int st = run.plan().stream_count - 1; st >= 0; --st) {
    if (advance_stream(machine, run, st)) progress = true;
  }
  if (run.unsettled == 0) mark_unlaunched_waits(run);
  if (poll(machine, run)) progress = true;
  return progress;
}

void CudaLauncher::mark_unlaunched_waits(Run& run) {
  RunStreams& mine = streams_of(run);
  if (mine.unlaunched_marked) return;
  mine.unlaunched_marked = true;
  // A plan stream that waits for earlier runs by stream order and launched
  // nothing (its tasks were cancelled, or cancelled by a failure) must still
  // see that work done before the run is over: later runs follow this one
  // in the earlier runs' place, and a run that ended at once would let them
  // overtake it.
  for (std::size_t s = 0; s < mine.stream_order_waits.size(); ++s) {
    if (mine.stream_order_waits[s] == 0 || !mine.streams[s].in_flight.empty()) continue;
    const std::size_t executor_stream = physical(run, static_cast<int>(s));
    try {
      EventPool::Lease mark = events_->acquire();
      mark->record(streams_[executor_stream]->view());
      mine.start_marks.push_back(std::move(mark));
    } catch (const std::exception& e) {
      // No mark: the stream itself is queried until it has drained.
      logger().debug("a run's ordering mark could not be recorded: {}", e.what());
      mine.queried_streams.push_back(executor_stream);
    }
  }
}

bool CudaLauncher::idle(const Run& run) const {
  const RunStreams& mine = streams_of(run);
  return mine.start_marks.empty() && mine.queried_streams.empty() && mine.watched.empty() &&
         mine.async_running.empty();
}

bool CudaLauncher::watching(const Run& run) const {
  const RunStreams& mine = streams_of(run);
  return !mine.watched.empty() || !mine.async_running.empty();
}

bool CudaLauncher::arm_wakeups(const RunList& runs) {
  if (waker_ == nullptr) return true;
  bool ok = true;
  for (const auto& r : runs) {
    const RunStreams& mine = streams_of(*r);
    for (auto w : mine.watched) {
      const auto s = physical(*r, r->plan().tasks[w].stream);
      // A callback runs behind all the stream's work: behind a later
      // launch it would come late. Such work is polled instead.
      if (mine.tasks[w].launch_seq != launches_[s]) {
        ok = false;
        continue;
      }
      if (!waker_->arm(s, streams_[s]->view())) ok = false;
    }
  }
  return ok;
}

bool CudaLauncher::take_next_on_stream(RunMachine& machine, Run& run, std::uint32_t t, int stream) {
  const TaskState& ts = run.tasks_state[t];
  const bool skipped = ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed;
  if (!skipped && (ts.status != TaskStatus::pending || !ts.ready)) return false;
  ++streams_of(run).streams[static_cast<std::size_t>(stream)].next;
  if (!skipped) launch(machine, run, t);
  // Skipped or failed: the work already launched on the stream must still be seen to finish.
  if (ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed) {
    watch_stream_tail(machine, run, stream);
  }
  return true;
}

bool CudaLauncher::advance_in_plan_order(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  const auto& order = run.prepared->device_order;
  bool progress = false;
  while (mine.order_next < order.size()) {
    const auto t = order[mine.order_next];
    const int stream = run.plan().tasks[t].stream;
    const auto s = static_cast<std::size_t>(stream);
    if (mine.streams[s].next > run.prepared->stream_pos[t] ||  // its stream got past it
        take_next_on_stream(machine, run, t, stream)) {
      ++mine.order_next;
      progress = true;
      continue;
    }
    break;
  }
  return progress;
}

bool CudaLauncher::advance_stream(RunMachine& machine, Run& run, int stream) {
  const auto& queue = run.stream_plan(static_cast<std::size_t>(stream));
  auto& next = streams_of(run).streams[static_cast<std::size_t>(stream)].next;
  bool progress = false;
  while (next < queue.size() && take_next_on_stream(machine, run, queue[next], stream)) {
    progress = true;
  }
  return progress;
}

void CudaLauncher::watch_stream_tail(RunMachine& machine, Run& run, int stream) {
  RunStreams& mine = streams_of(run);
  StreamCursor& cursor = mine.streams[static_cast<std::size_t>(stream)];
  const auto& flight = cursor.in_flight;
  if (cursor.head >= flight.size()) return;  // nothing launched is unconfirmed
  const auto last = flight.back();
  DeviceTask& dt = mine.tasks[last];
  if (dt.watching) return;
  try {
    if (!dt.event) {
      dt.event = events_->acquire();
      dt.event->record(streams_[physical(run, stream)]->view());
    }
  } catch (...) {
    // No event to watch the tail with: the stream itself is queried until
    // it has drained, so the run (and its memory) still outlives its work.
    const auto error = std::current_exception();
    for (std::size_t i = cursor.head; i < flight.size(); ++i) {
      mine.tasks[flight[i]].confirmed = true;
      machine.fail(run, flight[i], error);
    }
    cursor.head = flight.size();
    mine.queried_streams.push_back(physical(run, stream));
    return;
  }
  dt.watching = true;
  mine.watched.push_back(last);
}

void CudaLauncher::launch(RunMachine& machine, Run& run, std::uint32_t t) {
  if (run.tasks_state[t].status != TaskStatus::pending) return;
  RunStreams& mine = streams_of(run);
  DeviceTask& dt = mine.tasks[t];
  const Task& task = run.tasks()[t];
  const PlannedTask& planned = run.plan().tasks[t];
  StreamCursor& cursor = mine.streams[static_cast<std::size_t>(planned.stream)];
  const std::size_t executor_stream = physical(run, planned.stream);
  const StreamView stream = streams_[executor_stream]->view();
  bool enqueued_some = false;  // a failure after this point may leave work on the stream
  try {
    const TaskScope scope(task.name);
    const NvtxRange range(task.name);
    for (auto p : planned.waits) mine.tasks[p].event->make_wait(stream);
    if (run.tracing) {
      dt.trace_start = timing_events_->acquire();
      dt.trace_start->record(stream);
    }
    Resources resources(*this, dt, stream);
    const ExecutionContext ctx(options_.device, stream.native(), &resources);
    enqueued_some = true;
    switch (task.kind) {
      case TaskKind::op:
        task.op->run_cuda(ctx);
        check_op_launch(task);
        break;
      case TaskKind::collective:
        task.collective->run_cuda(ctx);
        check_op_launch(task);
        break;
      case TaskKind::copy: copies_.enqueue(task.copy_src, task.copy_dst, stream); break;
      case TaskKind::host: throw InternalError("a host task was planned on a stream");
    }
    if (run.tracing) {
      dt.trace_end = timing_events_->acquire();
      dt.trace_end->record(stream);
    }
    if (planned.record_event) {
      dt.event = events_->acquire();
      dt.event->record(stream);
    }
  } catch (...) {
    const auto error = std::current_exception();
    if (enqueued_some) {
      // Whatever the task enqueued before it failed still runs: its stream
      // tail is watched, so that the run (and its memory) outlives it.
      dt.event = {};
      cursor.in_flight.push_back(t);
    }
    machine.fail(run, t, error);
    return;
  }
  dt.launch_seq = ++launches_[executor_stream];
  cursor.in_flight.push_back(t);
  if (planned.watched) {
    dt.watching = true;
    mine.watched.push_back(t);
  }
  machine.enqueued(run, t);
}

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

bool CudaLauncher::poll(RunMachine& machine, Run& run) {
  RunStreams& mine = streams_of(run);
  bool progress = false;
  for (std::size_t i = 0; i < mine.start_marks.size();) {
    bool done = true;
    try {
      done = mine.start_marks[i]->completed();
    } catch (const std::exception& e) {
      logger().debug("a run's start mark failed: {}", e.what());  // its tasks report the fault
    }
    if (!done) {
      ++i;
      continue;
    }
    mine.start_marks.erase(mine.start_marks.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < mine.queried_streams.size();) {
    if (!stream_drained_or_lost(streams_[mine.queried_streams[i]]->view())) {
      ++i;
      continue;
    }
    mine.queried_streams.erase(mine.queried_streams.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < mine.watched.size();) {
    const auto w = mine.watched[i];
    bool done = false;
    std::exception_ptr error;
    try {
      done = mine.tasks[w].event->completed();
    } catch (...) {
      done = true;
      error = std::current_exception();
    }
    if (!done) {
      ++i;
      continue;
    }
    mine.watched[i] = mine.watched.back();
    mine.watched.pop_back();
    progress = true;
    // A later watched task of the same stream may already have confirmed it.
    if (mine.tasks[w].confirmed) continue;
    // Stream order: everything launched on the stream up to w is done too.
    StreamCursor& cursor = mine.streams[static_cast<std::size_t>(run.plan().tasks[w].stream)];
    while (cursor.head < cursor.in_flight.size()) {
      const auto t = cursor.in_flight[cursor.head++];
      mine.tasks[t].confirmed = true;
      if (error) {
        machine.fail(run, t, error);
      } else {
        machine.complete(run, t);  // a task that failed at its launch stays failed
      }
      if (t == w) break;
    }
  }
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

void CudaLauncher::trace_tracks(const Run& run, std::vector<TraceTrack>& tracks) const {
  for (int s = 0; s < run.plan().stream_count; ++s) {
    const std::string prio = s == run.plan().collective_stream()
                                 ? std::string("collectives")
                                 : std::string(to_string(static_cast<Priority>(s / k_)));
    tracks.push_back({100 + s, "stream " + std::to_string(s) + " (" + prio + ")"});
  }
}

bool CudaLauncher::trace_span(const Run& run, std::uint32_t t, TraceEvent& event) const {
  const RunStreams& mine = streams_of(run);
  const DeviceTask& dt = mine.tasks[t];
  if (!dt.trace_start || !dt.trace_end || !mine.trace_base) return false;
  try {
    event.start_us = 1e3 * dt.trace_start->elapsed_ms_since(*mine.trace_base);
    event.duration_us = 1e3 * dt.trace_end->elapsed_ms_since(*dt.trace_start);
  } catch (const std::exception&) {
    return false;
  }
  event.track = 100 + static_cast<int>(physical(run, run.plan().tasks[t].stream));
  return true;
}

namespace {

// An activity log's base on the device: a timing event, and its host time.
struct CudaClockMark final : DeviceClockMark {
  explicit CudaClockMark(int device) : event(device, EventTiming::enabled) {}
  Event event;
};

}  // namespace

std::shared_ptr<const DeviceClockMark> CudaLauncher::mark_trace_clock(Clock::time_point opened) {
  auto mark = std::make_shared<CudaClockMark>(options_.device);
  // A stream of its own, idle: the event runs as soon as it is recorded, so
  // the host times around record and wait bracket its device time closely
  // (the executor's streams may be busy for milliseconds).
  const Stream stream(options_.device, 0);
  const DeviceGuard guard(options_.device);
  const double before = micros_since(opened);
  mark->event.record(stream.view());
  mark->event.synchronize();
  const double after = micros_since(opened);
  mark->host_us = 0.5 * (before + after);
  return mark;
}

std::optional<double> CudaLauncher::trace_origin_us(const Run& run,
                                                    const DeviceClockMark& mark) const {
  const auto* cuda_mark = dynamic_cast<const CudaClockMark*>(&mark);
  const RunStreams& mine = streams_of(run);
  if (cuda_mark == nullptr || !mine.trace_base) return std::nullopt;
  try {
    // Not yet run (its stream still waits): no throw on this thread, no placement.
    if (!mine.trace_base->completed()) return std::nullopt;
    return mark.host_us + 1e3 * mine.trace_base->elapsed_ms_since(cuda_mark->event);
  } catch (const std::exception&) {
    return std::nullopt;  // its base never ran (a failed start): no device span to place
  }
}

}  // namespace loom::detail
