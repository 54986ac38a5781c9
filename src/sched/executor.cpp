#include "sched/executor.hpp"

#include "core/log.hpp"
#include "core/prepared_slot.hpp"
#include "core/storage.hpp"
#include "core/task_context.hpp"
#include "core/thread_role.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "trace/chrome_trace.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace loom::detail {

using Clock = std::chrono::steady_clock;

namespace {

// How long the scheduling thread keeps spinning after its last progress.
constexpr auto kIdleSpin = std::chrono::microseconds(200);
constexpr auto kDeviceSpin = std::chrono::milliseconds(2);

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// The scheduling thread must never wait for loom's work: it is what makes
// that work progress.
class SchedulerRole final : public ThreadRole {
 public:
  void begin_blocking() override {}
  void end_blocking() noexcept override {}
  const char* cannot_wait() const noexcept override {
    return "called on loom's scheduling thread (inside an op's run_cuda), which would wait "
           "for itself forever; enqueue the work in the same graph instead";
  }
};

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

}  // namespace

// Host callbacks queued behind watched device work wake the sleeping
// scheduler. They outlive nothing: the executor synchronizes its streams
// before deleting this; where it cannot (a poisoned device, whose queued
// callbacks may never run) it leaves this behind rather than risk a callback
// into freed memory.
struct Executor::Waker {
  struct Slot {
    Waker* waker;
    std::size_t stream;
  };
  explicit Waker(std::size_t streams)
      : armed(std::make_unique<std::atomic<bool>[]>(streams)), slots(streams) {
    for (std::size_t s = 0; s < streams; ++s) slots[s] = Slot{this, s};
  }
  static void CUDART_CB fire(void* data) {
    auto* slot = static_cast<Slot*>(data);
    Waker& w = *slot->waker;
    w.armed[slot->stream].store(false, std::memory_order_release);
    std::lock_guard lock(w.mutex);
    if (w.target != nullptr) w.target->wake();
  }
  std::mutex mutex;
  Executor* target = nullptr;  // under mutex
  std::unique_ptr<std::atomic<bool>[]> armed;
  std::vector<Slot> slots;
};

struct TaskState {
  std::uint32_t unmet = 0;
  TaskStatus status = TaskStatus::pending;
  bool launched = false;   // device: enqueued; host: posted; async: started
  bool skipped = false;    // a worker found the run cancelled and did not run it
  bool ready = false;      // device: every predecessor satisfied; waits for its turn on the stream
  bool watching = false;   // device: its event is polled
  bool settled = false;    // terminal, or enqueued on its stream (later runs may follow it there)
  bool confirmed = false;  // device: seen complete through its stream's watched tail
  std::uint64_t launch_seq = 0;  // device: its place among its executor stream's launches
  std::exception_ptr error;
  EventPool::Lease event;
  EventPool::Lease trace_start;
  EventPool::Lease trace_end;
  Completion async;
  std::vector<std::shared_ptr<Storage>> workspaces;  // given back with the run, after its work
  int worker = -1;
  double start_us = 0;
  double end_us = 0;
};

struct Executor::Run {
  std::shared_ptr<RunState> state;
  std::shared_ptr<const PreparedGraph> prepared;
  std::shared_ptr<CompletionState> completion;  // Runtime::copy's
  std::vector<TaskState> tasks_state;
  std::size_t unfinished = 0;
  std::size_t unsettled = 0;
  // Ordering across runs: the runs this one waits for (gates), and those
  // waiting for this one to be wholly enqueued (settled) or finished.
  bool started = false;
  int gates = 0;
  std::vector<Run*> followers_settled;
  std::vector<Run*> followers_finished;
  std::vector<std::uint8_t> wait_streams;  // executor streams of earlier runs to wait on at start
  int rotation = 0;  // the plan's stream k of a priority runs on executor stream (k + rotation) % K
  std::vector<EventPool::Lease> gate_events;
  std::vector<EventPool::Lease> start_marks;  // behind the waits on earlier runs, one a stream
  std::vector<std::size_t> queried_streams;   // executor streams watched without an event
  std::vector<std::vector<std::uint32_t>> in_flight;  // per stream, launch order
  std::vector<std::size_t> in_flight_head;
  std::vector<std::size_t> stream_next;   // the next to launch on each stream
  std::size_t order_next = 0;             // the next in prepared->device_order
  std::vector<std::uint32_t> ready_host;  // posted in priority order once per scheduler round
  std::vector<std::uint32_t> watched;
  std::vector<std::uint32_t> async_running;
  std::atomic<int> host_outstanding{0};
  bool cancel_handled = false;
  std::exception_ptr first_error;
  std::vector<TaskReport> reports;  // names left out (the state has them); published at the end
  Clock::time_point started_at = Clock::now();
  unsigned long long number = 0;
  bool tracing = false;
  EventPool::Lease trace_base;
  EventPool::Lease entry;

  const std::vector<Task>& tasks() const noexcept { return prepared->tasks(); }
  const Plan& plan() const noexcept { return prepared->plan; }
  const std::vector<std::uint32_t>& stream_plan(std::size_t s) const noexcept {
    return prepared->stream_plan[s];
  }
};

namespace {
std::atomic<std::uint64_t> executor_serials{0};
}  // namespace

Executor::Executor(ExecutorOptions options, CopyEngine& copies)
    : options_(std::move(options)), copies_(copies), serial_(++executor_serials) {
  int workers = options_.workers;
  if (workers <= 0) {
    const int cores = static_cast<int>(std::max(2U, std::thread::hardware_concurrency()));
    workers = options_.cuda ? std::clamp(cores / 4, 2, 4) : std::clamp(cores, 2, 16);
  }
  workers_ = std::make_shared<WorkerPool>(workers);
  if (options_.cuda) {
    stream_pool_ = std::make_unique<StreamPool>(options_.device);
    events_ = std::make_unique<EventPool>(options_.device);
    timing_events_ = std::make_unique<EventPool>(options_.device, EventTiming::enabled);
    const int k = std::max(1, options_.streams_per_priority);
    for (int p = 0; p < kPriorityLevels; ++p) {
      for (int i = 0; i < k; ++i)
        streams_.push_back(stream_pool_->acquire(static_cast<Priority>(p)));
    }
    streams_.push_back(stream_pool_->acquire(Priority::normal));  // collectives
    events_->reserve(64);
    launches_.assign(streams_.size(), 0);
    waker_ = new Waker(streams_.size());
    waker_->target = this;
  }
  scheduler_ = std::thread([this] { schedule(); });
}

Executor::~Executor() {
  stop_ = true;
  wake();
  scheduler_.join();
  // Workers may still be finishing a wake(), a trace write or a run's
  // teardown: join them before the members they use go away.
  workers_->shutdown();
  if (waker_ != nullptr) {
    {
      std::lock_guard lock(waker_->mutex);
      waker_->target = nullptr;
    }
    // Queued wake-up callbacks run before a stream synchronizes. On a
    // poisoned device they may never run: leave the waker to them.
    bool idle = true;
    for (auto& s : streams_) {
      if (!LOOM_CUDA_ASSERT(cudaStreamSynchronize(s->view()))) idle = false;
    }
    if (idle) delete waker_;
  }
}

void Executor::wake() {
  // Sequentially consistent: the scheduler's exchange(false) at the top of
  // its loop is ordered against this store, so a wake-up between its
  // emptiness checks and its sleep is never lost.
  wake_flag_.store(true);
  std::lock_guard lock(wake_mutex_);
  wake_cv_.notify_one();
}

void Executor::throw_if_poisoned() const {
  if (!poisoned_.load(std::memory_order_acquire)) return;
  std::exception_ptr e;
  {
    std::lock_guard lock(poison_mutex_);
    e = poison_;
  }
  std::rethrow_exception(e);
}

void Executor::note_error(const std::exception_ptr& error) {
  if (!error || poisoned_.load(std::memory_order_acquire)) return;
  try {
    std::rethrow_exception(error);
  } catch (const CudaError& e) {
    if (!is_sticky_cuda_error(e.code())) return;
    std::lock_guard lock(poison_mutex_);
    if (!poison_) {
      poison_ = error;
      poisoned_.store(true, std::memory_order_release);
      logger().error("the device is unusable from now on (a kernel fault): {}", e.what());
    }
  } catch (...) {
  }
}

void Executor::wait_idle() {
  check_may_wait("Runtime::synchronize()");
  if (current_thread_role() != nullptr) {
    throw InvalidArgument(
        "Runtime::synchronize() inside a task or continuation would wait for its own run");
  }
  std::unique_lock lock(idle_mutex_);
  idle_cv_.wait(lock, [&] { return live_runs_ == 0; });
}

std::vector<Placement> Executor::placements(const Graph& graph) const {
  std::vector<Placement> out;
  out.reserve(graph.size());
  for (const auto& t : graph.tasks()) {
    if (!options_.cuda || t.kind == TaskKind::host) {
      out.push_back(Placement::host);
    } else if (t.kind == TaskKind::copy) {
      const Memory a = t.copy_src.memory();
      const Memory b = t.copy_dst.memory();
      if (a.is_host() && b.is_host()) {
        out.push_back(Placement::host);
      } else if (a == Memory::pageable || b == Memory::pageable) {
        out.push_back(Placement::async);
      } else {
        out.push_back(Placement::device);
      }
    } else {
      out.push_back(Placement::device);
    }
  }
  return out;
}

void Executor::check_memory(const Graph& graph) const {
  for (const auto& t : graph.tasks()) {
    if (t.kind == TaskKind::copy) {
      // Before launch, like an op's inputs: the path's own refusals, by name.
      try {
        copies_.check(t.copy_src, t.copy_dst);
      } catch (Error& e) {
        e.attach_task(t.name);
        throw;
      }
    }
    if (!options_.cuda && t.kind == TaskKind::op && !t.op->has_cpu()) {
      InvalidArgument e("op " + t.name + " ('" + std::string(t.op->name()) +
                        "') has no CPU implementation, and this runtime runs the CPU backend");
      e.attach_task(t.name);
      throw e;
    }
    if (t.kind != TaskKind::op && t.kind != TaskKind::collective) continue;
    const auto check = [&](const Tensor& x, const char* role) {
      if (!x.defined()) return;
      const Memory m = x.memory();
      const bool ok = options_.cuda ? m == Memory::on_device(options_.device) : m.is_host();
      if (!ok) {
        const std::string expected = options_.cuda ? Memory::on_device(options_.device).to_string()
                                                   : std::string("host memory");
        InvalidArgument e(std::string(to_string(t.kind)) + " " + t.name + ": the " + role + " " +
                          x.describe() + " is not on " + expected + ", where this runtime's " +
                          (options_.cuda ? "CUDA" : "CPU") + " backend runs it");
        e.attach_task(t.name);
        throw e;
      }
    };
    for (const auto& r : t.reads) check(r, "input");
    for (const auto& w : t.writes) check(w, "output");
  }
}

std::shared_ptr<const PreparedGraph> Executor::prepare(const Graph& graph) {
  const auto& slot = GraphAccess::slot(graph);
  if (slot) {
    std::lock_guard lock(slot->mutex);
    if (slot->owner == serial_ && slot->value) {
      return std::static_pointer_cast<const PreparedGraph>(slot->value);
    }
  }
  graph.validate();
  check_memory(graph);
  auto prepared = std::make_shared<PreparedGraph>();
  prepared->graph = graph;
  GraphAccess::detach(prepared->graph);
  prepared->plan =
      make_plan(prepared->graph, placements(prepared->graph), options_.streams_per_priority);
  const Plan& plan = prepared->plan;
  prepared->stream_plan.assign(static_cast<std::size_t>(plan.stream_count), {});
  prepared->stream_pos.assign(prepared->tasks().size(), 0);
  for (auto t : plan.order) {
    if (plan.tasks[t].placement == Placement::device) {
      auto& list = prepared->stream_plan[static_cast<std::size_t>(plan.tasks[t].stream)];
      prepared->stream_pos[t] = static_cast<std::uint32_t>(list.size());
      list.push_back(t);
      prepared->device_order.push_back(t);
      prepared->uses_streams = true;
    } else {
      prepared->device_only = false;
    }
    if (prepared->tasks()[t].predecessors.empty()) prepared->roots.push_back(t);
  }
  prepared->accesses = summarize_accesses(prepared->tasks());
  auto names = std::make_shared<std::vector<std::string>>();
  names->reserve(prepared->tasks().size());
  for (const auto& t : prepared->tasks()) names->push_back(t.name);
  prepared->names = std::move(names);
  if (slot) {
    std::lock_guard lock(slot->mutex);
    slot->owner = serial_;
    slot->value = prepared;
  }
  return prepared;
}

Future Executor::submit(const Graph& graph) {
  throw_if_poisoned();
  return submit_prepared(prepare(graph), nullptr);
}

Completion Executor::submit_copy(const Tensor& src, const Tensor& dst) {
  throw_if_poisoned();
  Graph graph;
  graph.copy(src, dst, {.name = "Runtime::copy"});
  auto completion = std::make_shared<CompletionState>();
  submit_prepared(prepare(graph), completion);
  return CompletionAccess::make(std::move(completion));
}

Future Executor::submit_prepared(std::shared_ptr<const PreparedGraph> prepared,
                                 std::shared_ptr<CompletionState> completion) {
  auto run = std::make_unique<Run>();
  run->prepared = std::move(prepared);
  run->completion = std::move(completion);
  const std::size_t n = run->tasks().size();
  run->state = std::make_shared<RunState>();
  run->state->workers = workers_;
  run->state->wake_scheduler = [this] { wake(); };
  run->state->names = run->prepared->names;
  run->reports.resize(n);
  run->tasks_state.resize(n);
  run->unfinished = n;
  run->unsettled = n;
  run->number = ++run_counter_;
  run->tracing = !options_.trace_path.empty();
  Future future = FutureAccess::make(run->state);
  {
    std::lock_guard lock(idle_mutex_);
    ++live_runs_;
  }
  Run* raw = run.release();
  while (!incoming_.push(raw)) std::this_thread::yield();
  wake();
  return future;
}

void Executor::schedule() {
  SchedulerRole role;
  const ThreadRoleScope role_scope(&role);
  // The scheduling thread drives one device: make it current once, not per launch.
  if (options_.cuda) {
    try {
      LOOM_CUDA_CHECK(cudaSetDevice(options_.device));
    } catch (const std::exception& e) {
      logger().error("the scheduling thread cannot use device {}: {}", options_.device, e.what());
    }
  }
  auto last_progress = Clock::now();
  for (;;) {
    // Cleared before looking for work: a wake() from now on is seen below.
    wake_flag_.exchange(false);
    bool progress = false;
    Run* incoming = nullptr;
    while (incoming_.pop(incoming)) {
      runs_.emplace_back(incoming);
      admit(*runs_.back());
      progress = true;
    }
    Done done{};
    while (done_.pop(done)) {
      Run& run = *done.run;
      run.host_outstanding.fetch_sub(1);
      TaskState& ts = run.tasks_state[done.task];
      if (ts.error) {
        fail(run, done.task, ts.error);
      } else if (ts.skipped) {
        ts.status = TaskStatus::cancelled;
        --run.unfinished;
        settle(run, done.task);
        run.reports[done.task].status = TaskStatus::cancelled;
        run.reports[done.task].error = "cancelled: the run was cancelled by the user";
        cancel_successors(run, done.task,
                          "task '" + run.tasks()[done.task].name + "' was cancelled");
      } else {
        complete(run, done.task);
      }
      progress = true;
    }
    start_ready_runs();
    bool waiting_on_device = false;
    for (auto& r : runs_) {
      Run& run = *r;
      if (run.state->cancel_requested.load() && !run.cancel_handled) {
        run.cancel_handled = true;
        if (!run.first_error) {
          run.first_error = std::make_exception_ptr(Cancelled("the run was cancelled by the user"));
        }
        cancel_pending(run, "the run was cancelled by the user");
        progress = true;
      }
      if (!run.started) continue;  // waits for earlier runs over the same data
      // Launch device tasks in plan order on each stream (the plan's event
      // elimination and stream tails assume it): across streams in plan
      // order while it can (interleaved launches measured cheaper than one
      // stream's batch after another), then each stream on its own past a
      // task that is not ready yet, high-priority streams first.
      if (advance_in_plan_order(run)) progress = true;
      for (int st = run.plan().stream_count - 1; st >= 0; --st) {
        if (advance_stream(run, st)) progress = true;
      }
      if (poll(run)) progress = true;
      if (!run.ready_host.empty()) {
        std::vector<std::uint32_t> ready;
        ready.swap(run.ready_host);
        std::stable_sort(ready.begin(), ready.end(), [&](auto a, auto b) {
          return priority_index(run.tasks()[a].priority) > priority_index(run.tasks()[b].priority);
        });
        for (auto t : ready) post_host(run, t);
        progress = true;
      }
      if (!run.watched.empty() || !run.async_running.empty()) waiting_on_device = true;
    }
    // Finished runs.
    for (std::size_t i = 0; i < runs_.size();) {
      if (finished(*runs_[i])) {
        auto run = std::move(runs_[i]);
        runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
        finish_run(std::move(run));
        progress = true;
      } else {
        ++i;
      }
    }
    if (!to_start_.empty()) continue;
    if (stop_.load() && runs_.empty() && incoming_.empty()) return;
    if (progress) {
      last_progress = Clock::now();
      continue;
    }
    // Nothing to do now. Spin a while after the last progress, so that the
    // next submit, a worker's result or finishing device work is seen without
    // a wake-up's latency (longer while device work is watched); then sleep
    // until woken: by a submit, a worker, a staged copy's end, or a host
    // callback queued behind the watched device work.
    const auto idle = Clock::now() - last_progress;
    if (idle < (waiting_on_device ? kDeviceSpin : kIdleSpin)) {
      std::this_thread::yield();
      continue;
    }
    const bool armed = !waiting_on_device || arm_wakeups();
    std::unique_lock lock(wake_mutex_);
    const auto nap = !armed ? std::chrono::microseconds(100)
                            : std::chrono::microseconds(waiting_on_device ? 50000 : 100000);
    wake_cv_.wait_for(lock, nap, [&] { return wake_flag_.load(); });
  }
}

bool Executor::arm_wakeups() {
  if (waker_ == nullptr) return true;
  bool ok = true;
  for (auto& r : runs_) {
    for (auto w : r->watched) {
      const auto s = physical(*r, r->plan().tasks[w].stream);
      // A callback runs behind all the stream's work: behind a later
      // launch it would come late. Such work is polled instead.
      if (r->tasks_state[w].launch_seq != launches_[s]) {
        ok = false;
        continue;
      }
      if (waker_->armed[s].exchange(true)) continue;
      const cudaError_t rc =
          cudaLaunchHostFunc(streams_[s]->view(), &Waker::fire, &waker_->slots[s]);
      if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        waker_->armed[s].store(false);
        ok = false;
      }
    }
  }
  return ok;
}

std::size_t Executor::physical(const Run& run, int plan_stream) const noexcept {
  const int k = std::max(1, options_.streams_per_priority);
  if (plan_stream >= run.plan().collective_stream()) return static_cast<std::size_t>(plan_stream);
  const int priority = plan_stream / k;
  return static_cast<std::size_t>(priority * k + (plan_stream % k + run.rotation) % k);
}

int Executor::least_used_rotation(const Run& run) {
  // Runs in flight spread over the rotations; with none in flight a run
  // takes the first (measured: moving every run to the next streams costs
  // launches about 1 µs each on the H200).
  const auto k = static_cast<std::size_t>(std::max(1, options_.streams_per_priority));
  rotation_load_.assign(k, 0);
  for (const auto& other : runs_) {
    if (other.get() == &run || other->unfinished == 0 || !other->prepared->uses_streams) continue;
    ++rotation_load_[static_cast<std::size_t>(other->rotation)];
  }
  return static_cast<int>(std::min_element(rotation_load_.begin(), rotation_load_.end()) -
                          rotation_load_.begin());
}

void Executor::admit(Run& run) {
  after_.clear();
  ordering_.enter(&run, run.prepared->accesses, after_);
  const bool device_follows = run.prepared->device_only && options_.cuda;
  // Which executor streams the run's plan lands on: a run that follows an
  // earlier one takes its streams (stream order then costs no event); any
  // other takes the next rotation, so that runs over disjoint data overlap.
  if (device_follows && !after_.empty()) {
    run.rotation = static_cast<const Run*>(after_.back())->rotation;
  } else {
    run.rotation = least_used_rotation(run);
  }
  if (device_follows) run.wait_streams.assign(streams_.size(), 0);
  for (auto id : after_) {
    Run& earlier = *static_cast<Run*>(const_cast<void*>(id));
    if (device_follows) {
      // Device work follows device work through events at the start: it
      // may start once the earlier run has enqueued all of its work.
      const auto& plans = earlier.prepared->stream_plan;
      for (std::size_t s = 0; s < plans.size(); ++s) {
        if (!plans[s].empty()) run.wait_streams[physical(earlier, static_cast<int>(s))] = 1;
      }
      if (earlier.unsettled > 0 || !earlier.started) {
        earlier.followers_settled.push_back(&run);
        ++run.gates;
      }
    } else {
      // Host tasks and staged copies run when the earlier run is over.
      earlier.followers_finished.push_back(&run);
      ++run.gates;
    }
  }
  if (run.gates == 0) to_start_.push_back(&run);
}

void Executor::start_ready_runs() {
  while (!to_start_.empty()) {
    std::vector<Run*> starting;
    starting.swap(to_start_);
    for (Run* r : starting) {
      Run& run = *r;
      if (run.started) continue;
      try {
        start_run(run);
      } catch (...) {
        // Only CUDA calls (the entry event, tracing) can throw here: fail
        // the whole run, cleanly.
        const auto error = std::current_exception();
        for (std::uint32_t t = 0; t < run.tasks_state.size(); ++t) {
          if (run.tasks_state[t].status == TaskStatus::pending) fail(run, t, error);
        }
      }
    }
  }
}

bool Executor::finished(const Run& run) const {
  // Not before it started: a run cancelled while it waited for earlier runs
  // over its data ends after them (later runs follow it in their place).
  return run.started && run.start_marks.empty() && run.queried_streams.empty() &&
         run.unfinished == 0 && run.host_outstanding.load() == 0 && run.watched.empty() &&
         run.async_running.empty();
}

void Executor::settle(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.settled) return;
  ts.settled = true;
  if (--run.unsettled == 0) on_settled(run);
}

void Executor::on_settled(Run& run) { release_followers(run.followers_settled); }

void Executor::release_followers(std::vector<Run*>& followers) {
  for (Run* f : followers) {
    if (--f->gates == 0) to_start_.push_back(f);
  }
  followers.clear();
}

void Executor::start_run(Run& run) {
  run.started = true;
  run.started_at = Clock::now();
  const auto streams = static_cast<std::size_t>(run.plan().stream_count);
  run.in_flight.resize(streams);
  for (std::size_t s = 0; s < streams; ++s) run.in_flight[s].reserve(run.stream_plan(s).size());
  run.stream_next.assign(streams, 0);
  run.in_flight_head.assign(streams, 0);
  if (options_.cuda && options_.entry_stream != nullptr && run.prepared->uses_streams &&
      !stream_idle(StreamView(options_.entry_stream))) {
    // Memory the pool hands out is ordered on the runtime's stream; this
    // run's streams must not overtake work still queued there. (An idle
    // entry stream has nothing left to overtake.)
    run.entry = events_->acquire();
    run.entry->record(StreamView(options_.entry_stream));
    for (std::size_t s = 0; s < streams; ++s) {
      if (!run.stream_plan(s).empty()) {
        run.entry->make_wait(streams_[physical(run, static_cast<int>(s))]->view());
      }
    }
  }
  // Earlier runs over the same data have enqueued all their work: this
  // run's streams wait for theirs (a stream is already ordered after itself).
  std::vector<std::uint8_t> waited_on(run.wait_streams.empty() ? 0 : streams, 0);
  for (std::size_t s = 0; s < run.wait_streams.size(); ++s) {
    if (run.wait_streams[s] == 0) continue;
    EventPool::Lease* event = nullptr;
    for (std::size_t mine = 0; mine < streams; ++mine) {
      const auto target = physical(run, static_cast<int>(mine));
      if (target == s || run.stream_plan(mine).empty()) continue;
      if (event == nullptr) {
        run.gate_events.push_back(events_->acquire());
        event = &run.gate_events.back();
        (*event)->record(streams_[s]->view());
      }
      (*event)->make_wait(streams_[target]->view());
      waited_on[mine] = 1;
    }
  }
  // What this run's streams now wait for (earlier runs' work) must be seen
  // done before the run is over, even if it launches nothing after it:
  // later runs follow this one in the earlier ones' place.
  for (std::size_t mine = 0; mine < waited_on.size(); ++mine) {
    if (waited_on[mine] == 0) continue;
    run.start_marks.push_back(events_->acquire());
    run.start_marks.back()->record(streams_[physical(run, static_cast<int>(mine))]->view());
  }
  if (run.tracing && options_.cuda) {
    run.trace_base = timing_events_->acquire();
    std::size_t first = 0;
    while (first + 1 < streams && run.stream_plan(first).empty()) ++first;
    run.trace_base->record(streams_[physical(run, static_cast<int>(first))]->view());
  }
  const auto& tasks = run.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    run.tasks_state[t].unmet = static_cast<std::uint32_t>(tasks[t].predecessors.size());
  }
  for (auto t : run.prepared->roots) make_ready(run, t);
}

void Executor::make_ready(Run& run, std::uint32_t t) {
  if (run.tasks_state[t].status != TaskStatus::pending) return;
  if (run.state->cancel_requested.load()) return;  // cancel_pending() will take it
  switch (run.plan().tasks[t].placement) {
    case Placement::device: run.tasks_state[t].ready = true; break;
    case Placement::host: run.ready_host.push_back(t); break;
    case Placement::async: start_async(run, t); break;
  }
}

void Executor::satisfy(Run& run, std::uint32_t t) {
  if (--run.tasks_state[t].unmet == 0) make_ready(run, t);
}

bool Executor::take_next_on_stream(Run& run, std::uint32_t t, int stream) {
  TaskState& ts = run.tasks_state[t];
  const bool skipped = ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed;
  if (!skipped && (ts.status != TaskStatus::pending || !ts.ready)) return false;
  ++run.stream_next[static_cast<std::size_t>(stream)];
  if (!skipped) launch_device(run, t);
  // Skipped or failed: the work already launched on the stream must still be seen to finish.
  if (ts.status == TaskStatus::cancelled || ts.status == TaskStatus::failed) {
    watch_stream_tail(run, stream);
  }
  return true;
}

bool Executor::advance_in_plan_order(Run& run) {
  const auto& order = run.prepared->device_order;
  bool progress = false;
  while (run.order_next < order.size()) {
    const auto t = order[run.order_next];
    const int stream = run.plan().tasks[t].stream;
    const auto s = static_cast<std::size_t>(stream);
    if (run.stream_next[s] > run.prepared->stream_pos[t] ||  // its stream got past it
        take_next_on_stream(run, t, stream)) {
      ++run.order_next;
      progress = true;
      continue;
    }
    break;
  }
  return progress;
}

bool Executor::advance_stream(Run& run, int stream) {
  const auto& queue = run.stream_plan(static_cast<std::size_t>(stream));
  auto& next = run.stream_next[static_cast<std::size_t>(stream)];
  bool progress = false;
  while (next < queue.size() && take_next_on_stream(run, queue[next], stream)) progress = true;
  return progress;
}

void Executor::watch_stream_tail(Run& run, int stream) {
  const auto s = static_cast<std::size_t>(stream);
  const auto& flight = run.in_flight[s];
  if (run.in_flight_head[s] >= flight.size()) return;  // nothing launched is unconfirmed
  const auto last = flight.back();
  TaskState& ts = run.tasks_state[last];
  if (ts.watching) return;
  try {
    if (!ts.event) {
      ts.event = events_->acquire();
      ts.event->record(streams_[physical(run, stream)]->view());
    }
  } catch (...) {
    // No event to watch the tail with: the stream itself is queried until
    // it has drained, so the run (and its memory) still outlives its work.
    const auto error = std::current_exception();
    for (std::size_t i = run.in_flight_head[s]; i < flight.size(); ++i) {
      run.tasks_state[flight[i]].confirmed = true;
      fail(run, flight[i], error);
    }
    run.in_flight_head[s] = flight.size();
    run.queried_streams.push_back(physical(run, stream));
    return;
  }
  ts.watching = true;
  run.watched.push_back(last);
}

namespace {

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
struct Executor::Resources final : TaskResources {
  Resources(Executor& executor, TaskState& state, StreamView stream)
      : executor_(executor), state_(state), stream_(stream) {}
  void* workspace(std::size_t bytes) override {
    state_.workspaces.push_back(executor_.copies_.workspace(bytes, stream_));
    return state_.workspaces.back()->base;
  }
  const DeviceProperties& properties() override {
    if (!executor_.properties_)
      executor_.properties_ = device_properties(executor_.options_.device);
    return *executor_.properties_;
  }

 private:
  Executor& executor_;
  TaskState& state_;
  StreamView stream_;
};

void Executor::launch_device(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status != TaskStatus::pending) return;
  const Task& task = run.tasks()[t];
  const PlannedTask& planned = run.plan().tasks[t];
  const auto s = static_cast<std::size_t>(planned.stream);
  const StreamView stream = streams_[physical(run, planned.stream)]->view();
  bool enqueued_some = false;  // a failure after this point may leave work on the stream
  try {
    const TaskScope scope(task.name);
    const NvtxRange range(task.name);
    for (auto p : planned.waits) run.tasks_state[p].event->make_wait(stream);
    if (run.tracing) {
      ts.trace_start = timing_events_->acquire();
      ts.trace_start->record(stream);
    }
    Resources resources(*this, ts, stream);
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
      ts.trace_end = timing_events_->acquire();
      ts.trace_end->record(stream);
    }
    if (planned.record_event) {
      ts.event = events_->acquire();
      ts.event->record(stream);
    }
  } catch (...) {
    const auto error = std::current_exception();
    if (enqueued_some) {
      // Whatever the task enqueued before it failed still runs: its stream
      // tail is watched, so that the run (and its memory) outlives it.
      ts.event = {};
      ts.launched = true;
      run.in_flight[s].push_back(t);
    }
    fail(run, t, error);
    return;
  }
  ts.launched = true;
  ts.status = TaskStatus::running;
  ts.launch_seq = ++launches_[physical(run, planned.stream)];
  run.reports[t].status = TaskStatus::running;
  run.in_flight[s].push_back(t);
  settle(run, t);
  if (planned.watched) {
    ts.watching = true;
    run.watched.push_back(t);
  }
  for (auto succ : task.successors) {
    if (run.plan().tasks[succ].placement == Placement::device) satisfy(run, succ);
  }
}

void Executor::start_async(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  const Task& task = run.tasks()[t];
  try {
    const TaskScope scope(task.name);
    ts.start_us = micros_since(run.started_at);
    ts.async = copies_.start(task.copy_src, task.copy_dst);
  } catch (...) {
    fail(run, t, std::current_exception());
    return;
  }
  ts.launched = true;
  ts.status = TaskStatus::running;
  run.reports[t].status = TaskStatus::running;
  run.async_running.push_back(t);
  // Its end wakes the scheduler (it may be asleep by then).
  CompletionAccess::state(ts.async).on_finish([this] { wake(); });
}

void Executor::post_host(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status != TaskStatus::pending) return;  // cancelled while it waited for its round
  ts.launched = true;
  ts.status = TaskStatus::running;
  run.host_outstanding.fetch_add(1);
  Run* r = &run;
  workers_->post(run.tasks()[t].priority,
                 [this, r, t](int worker) { run_host_task(*r, t, worker); });
}

void Executor::run_host_task(Run& run, std::uint32_t t, int worker) {
  TaskState& ts = run.tasks_state[t];
  const Task& task = run.tasks()[t];
  if (run.state->cancel_requested.load()) {
    ts.skipped = true;
  } else {
    ts.worker = worker;
    ts.start_us = micros_since(run.started_at);
    // What threw: the user's host function, or an op's (or collective's)
    // CPU implementation, named as such.
    const std::string thrower = task.kind == TaskKind::host
                                    ? std::string("the host function")
                                    : std::string(to_string(task.kind)) + " '" +
                                          (task.op           ? std::string(task.op->name())
                                           : task.collective ? std::string(task.collective->name())
                                                             : task.name) +
                                          "' (CPU implementation)";
    try {
      const TaskScope scope(task.name);
      const NvtxRange range(task.name);
      switch (task.kind) {
        case TaskKind::host: task.host(); break;
        case TaskKind::op: task.op->run_cpu(); break;
        case TaskKind::collective: task.collective->run_cpu(); break;
        case TaskKind::copy: copies_.host_copy(task.copy_src, task.copy_dst); break;
      }
    } catch (Error& e) {
      e.attach_task(task.name);
      ts.error = std::current_exception();
    } catch (const std::exception& e) {
      ts.error =
          std::make_exception_ptr(Error(thrower + " threw: " + e.what(), {"", "", 0, task.name}));
    } catch (...) {
      ts.error = std::make_exception_ptr(
          Error(thrower + " threw a non-standard exception", {"", "", 0, task.name}));
    }
    ts.end_us = micros_since(run.started_at);
  }
  while (!done_.push(Done{&run, t})) std::this_thread::yield();
  wake();
}

void Executor::complete(Run& run, std::uint32_t t) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status == TaskStatus::completed || ts.status == TaskStatus::failed) return;
  ts.status = TaskStatus::completed;
  run.reports[t].status = TaskStatus::completed;
  --run.unfinished;
  settle(run, t);
  const bool device = run.plan().tasks[t].placement == Placement::device;
  for (auto s : run.tasks()[t].successors) {
    // Device successors of a device task were released at its launch.
    if (!device || run.plan().tasks[s].placement != Placement::device) satisfy(run, s);
  }
}

void Executor::fail(Run& run, std::uint32_t t, std::exception_ptr error) {
  TaskState& ts = run.tasks_state[t];
  if (ts.status == TaskStatus::completed || ts.status == TaskStatus::failed ||
      ts.status == TaskStatus::cancelled) {
    return;
  }
  const std::string& name = run.tasks()[t].name;
  try {
    std::rethrow_exception(error);
  } catch (Error& e) {
    e.attach_task(name);
    error = std::current_exception();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(Error(e.what(), {"", "", 0, name}));
  } catch (...) {
    error = std::make_exception_ptr(Error("an unknown exception", {"", "", 0, name}));
  }
  note_error(error);  // after the task's name is attached: others may read it from now on
  ts.status = TaskStatus::failed;
  ts.error = error;
  run.reports[t].status = TaskStatus::failed;
  run.reports[t].error = message_of(error);
  --run.unfinished;
  settle(run, t);
  if (!run.first_error) run.first_error = error;
  detail::logger().debug("task '{}' failed: {}", name, run.reports[t].error);
  cancel_successors(run, t, "task '" + name + "' failed");
}

void Executor::cancel_successors(Run& run, std::uint32_t t, const std::string& why) {
  std::vector<std::uint32_t> stack(run.tasks()[t].successors);
  while (!stack.empty()) {
    const auto s = stack.back();
    stack.pop_back();
    TaskState& ts = run.tasks_state[s];
    if (ts.status != TaskStatus::pending) continue;  // launched work finishes on its own
    ts.status = TaskStatus::cancelled;
    run.reports[s].status = TaskStatus::cancelled;
    run.reports[s].error = "cancelled: " + why;
    --run.unfinished;
    settle(run, s);
    for (auto n : run.tasks()[s].successors) stack.push_back(n);
  }
}

void Executor::cancel_pending(Run& run, const std::string& why) {
  for (std::uint32_t t = 0; t < run.tasks_state.size(); ++t) {
    TaskState& ts = run.tasks_state[t];
    if (ts.status != TaskStatus::pending) continue;
    ts.status = TaskStatus::cancelled;
    run.reports[t].status = TaskStatus::cancelled;
    run.reports[t].error = "cancelled: " + why;
    --run.unfinished;
    settle(run, t);
  }
  run.ready_host.clear();
}

bool Executor::poll(Run& run) {
  bool progress = false;
  for (std::size_t i = 0; i < run.start_marks.size();) {
    bool done = true;
    try {
      done = run.start_marks[i]->completed();
    } catch (const std::exception& e) {
      logger().debug("a run's start mark failed: {}", e.what());  // its tasks report the fault
    }
    if (!done) {
      ++i;
      continue;
    }
    run.start_marks.erase(run.start_marks.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < run.queried_streams.size();) {
    if (!stream_drained_or_lost(streams_[run.queried_streams[i]]->view())) {
      ++i;
      continue;
    }
    run.queried_streams.erase(run.queried_streams.begin() + static_cast<std::ptrdiff_t>(i));
    progress = true;
  }
  for (std::size_t i = 0; i < run.watched.size();) {
    const auto w = run.watched[i];
    bool done = false;
    std::exception_ptr error;
    try {
      done = run.tasks_state[w].event->completed();
    } catch (...) {
      done = true;
      error = std::current_exception();
    }
    if (!done) {
      ++i;
      continue;
    }
    run.watched[i] = run.watched.back();
    run.watched.pop_back();
    progress = true;
    // A later watched task of the same stream may already have confirmed it.
    if (run.tasks_state[w].confirmed) continue;
    // Stream order: everything launched on the stream up to w is done too.
    const auto s = static_cast<std::size_t>(run.plan().tasks[w].stream);
    auto& flight = run.in_flight[s];
    auto& head = run.in_flight_head[s];
    while (head < flight.size()) {
      const auto t = flight[head++];
      run.tasks_state[t].confirmed = true;
      if (error) {
        fail(run, t, error);
      } else {
        complete(run, t);  // a task that failed at its launch stays failed
      }
      if (t == w) break;
    }
  }
  const bool poisoned = poisoned_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < run.async_running.size();) {
    const auto a = run.async_running[i];
    TaskState& ts = run.tasks_state[a];
    // On a poisoned device a staged copy may never report its end: stop
    // waiting, and make sure that its end, should it come, wakes no one.
    if (!ts.async.ready()) {
      if (!poisoned) {
        ++i;
        continue;
      }
      CompletionAccess::state(ts.async).on_finish(nullptr);
    }
    run.async_running[i] = run.async_running.back();
    run.async_running.pop_back();
    progress = true;
    ts.end_us = micros_since(run.started_at);
    std::exception_ptr e = ts.async.ready() ? ts.async.error() : nullptr;
    if (!ts.async.ready()) {
      std::lock_guard lock(poison_mutex_);
      e = poison_;
    }
    if (e) {
      fail(run, a, e);
    } else {
      complete(run, a);
    }
  }
  return progress;
}

void Executor::finish_run(std::unique_ptr<Run> owned) {
  Run& run = *owned;
  ordering_.leave(&run, run.prepared->accesses);
  release_followers(run.followers_settled);
  release_followers(run.followers_finished);
  if (run.gates > 0) {
    // Cancelled before the runs it waited for were over: forget it there.
    for (auto& other : runs_) {
      std::erase(other->followers_settled, &run);
      std::erase(other->followers_finished, &run);
    }
  }
  std::erase(to_start_, &run);
  auto state = run.state;
  auto completion = run.completion;
  auto publish = [this, state, completion, error = run.first_error,
                  reports = std::move(run.reports)]() mutable {
    std::vector<std::function<void(const Future&)>> continuations;
    {
      std::lock_guard lock(state->mutex);
      state->error = error;
      state->reports = std::move(reports);
      state->done = true;
      state->wake_scheduler = nullptr;
      continuations.swap(state->continuations);
    }
    state->done_cv.notify_all();
    if (completion) completion->finish(error);
    {
      std::lock_guard lock(idle_mutex_);
      --live_runs_;
    }
    idle_cv_.notify_all();
    const auto workers = state->workers.lock();
    for (auto& fn : continuations) {
      auto job = [fn = std::move(fn), state](int) {
        try {
          fn(FutureAccess::make(state));
        } catch (const std::exception& e) {
          logger().error("a continuation threw: {}", e.what());
        } catch (...) {
          logger().error("a continuation threw a non-standard exception");
        }
      };
      if (workers) {
        workers->post(Priority::normal, std::move(job));
      } else {
        job(-1);
      }
    }
  };
  std::optional<Trace> trace;
  if (run.tracing) trace = collect_trace(run);
  // The run's last references to its tensors (and so perhaps their memory)
  // are dropped on a worker, never here, and before the run is published:
  // once wait() returns, the run holds nothing (take() works).
  Run* raw = owned.release();
  // High priority: user host work must not hold back a run's end.
  workers_->post(Priority::high,
                 [raw, trace = std::move(trace), publish = std::move(publish)](int) mutable {
                   delete raw;
                   if (trace) write_chrome_trace(trace->path, trace->tracks, trace->events);
                   publish();
                 });
}

Executor::Trace Executor::collect_trace(Run& run) {
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;
  const int k = std::max(1, options_.streams_per_priority);
  for (int s = 0; options_.cuda && s < run.plan().stream_count; ++s) {
    const std::string prio = s == run.plan().collective_stream()
                                 ? std::string("collectives")
                                 : std::string(to_string(static_cast<Priority>(s / k)));
    tracks.push_back({100 + s, "stream " + std::to_string(s) + " (" + prio + ")"});
  }
  for (int w = 0; w < workers_->size(); ++w)
    tracks.push_back({w + 1, "host worker " + std::to_string(w)});
  tracks.push_back({99, "scheduler (async copies)"});
  const auto& tasks = run.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    const TaskState& ts = run.tasks_state[t];
    if (ts.status != TaskStatus::completed) continue;
    TraceEvent e;
    e.name = tasks[t].name;
    e.category = std::string(to_string(tasks[t].kind));
    switch (run.plan().tasks[t].placement) {
      case Placement::device: {
        if (!ts.trace_start || !ts.trace_end || !run.trace_base) continue;
        try {
          e.start_us = 1e3 * ts.trace_start->elapsed_ms_since(*run.trace_base);
          e.duration_us = 1e3 * ts.trace_end->elapsed_ms_since(*ts.trace_start);
        } catch (const std::exception&) {
          continue;
        }
        e.track = 100 + static_cast<int>(physical(run, run.plan().tasks[t].stream));
        break;
      }
      case Placement::host:
        e.track = ts.worker + 1;
        e.start_us = ts.start_us;
        e.duration_us = ts.end_us - ts.start_us;
        break;
      case Placement::async:
        e.track = 99;
        e.start_us = ts.start_us;
        e.duration_us = ts.end_us - ts.start_us;
        break;
    }
    events.push_back(std::move(e));
  }
  return Trace{trace_path_for_run(options_.trace_path, run.number), std::move(tracks),
               std::move(events)};
}

}  // namespace loom::detail
