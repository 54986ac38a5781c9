#include "sched/run_trace.hpp"

#include <loom/graph.hpp>

namespace loom::detail {

namespace {

// Host workers are tracks 1.., staged copies (started by the scheduler) 99,
// streams 100.. (the device launcher's).
constexpr int kAsyncTrack = 99;

int worker_track(int worker) { return worker + 1; }

}  // namespace

RunTrace collect_run_trace(const Run& run, const Launcher* device, int workers,
                           const std::string& base) {
  RunTrace trace;
  trace.path = trace_path_for_run(base, run.number);
  if (device != nullptr) device->trace_tracks(run, trace.tracks);
  for (int w = 0; w < workers; ++w)
    trace.tracks.push_back({worker_track(w), "host worker " + std::to_string(w)});
  trace.tracks.push_back({kAsyncTrack, "scheduler (async copies)"});
  const auto& tasks = run.tasks();
  for (std::uint32_t t = 0; t < tasks.size(); ++t) {
    const TaskState& ts = run.tasks_state[t];
    if (ts.status != TaskStatus::completed) continue;
    TraceEvent e;
    e.name = tasks[t].name;
    e.category = std::string(to_string(tasks[t].kind));
    switch (run.placement(t)) {
      case Placement::device:
        if (device == nullptr || !device->trace_span(run, t, e)) continue;
        break;
      case Placement::host:
        e.track = worker_track(ts.worker);
        e.start_us = ts.start_us;
        e.duration_us = ts.end_us - ts.start_us;
        break;
      case Placement::async:
        e.track = kAsyncTrack;
        e.start_us = ts.start_us;
        e.duration_us = ts.end_us - ts.start_us;
        break;
    }
    trace.events.push_back(std::move(e));
  }
  return trace;
}

}  // namespace loom::detail
