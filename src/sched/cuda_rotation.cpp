// Across runs (cuda_launcher.hpp): which executor streams a run's plan
// streams land on (a rotation over each priority's streams), and the event
// waits at its start, on the runtime's entry stream and on the streams of
// earlier runs over the same data, with the marks that keep the run alive
// until the work it waited for is done.
#include "sched/cuda_run_streams.hpp"

#include "core/log.hpp"
#include "cuda/stream.hpp"

#include <algorithm>

namespace loom::detail {

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

}  // namespace loom::detail
