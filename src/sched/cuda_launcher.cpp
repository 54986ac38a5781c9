// The eager CUDA launcher (cuda_launcher.hpp): its streams and pools, a
// run's launch state, and one scheduler round over a run. The round's parts
// live in the files cuda_run_streams.hpp lists.
#include "sched/cuda_run_streams.hpp"

#include "cuda/check.hpp"
#include "sched/copy_engine.hpp"
#include "sched/run_machine.hpp"
#include "sched/scheduler_loop.hpp"

#include <algorithm>

namespace loom::detail {

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
  // Collectives at the greatest priority: NCCL's kernels hold every rank
  // up, and on a lower one their blocks would wait behind queued compute.
  streams_.push_back(stream_pool_->acquire(Priority::high));
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
  // A recycled run brings the state its last run left (released, with its
  // vectors' capacity): a steady state allocates nothing here.
  auto* state = static_cast<RunStreams*>(run.device.get());  // only this launcher makes it
  if (state == nullptr) {
    auto made = std::make_unique<RunStreams>();
    state = made.get();
    run.device = std::move(made);
  }
  state->tasks.resize(run.tasks().size());
  const auto streams = static_cast<std::size_t>(run.plan().stream_count);
  state->streams.resize(streams);
  for (std::size_t s = 0; s < streams; ++s) {
    state->streams[s].in_flight.reserve(run.stream_plan(s).size());
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

}  // namespace loom::detail
