#include "sched/run_trace.hpp"

#include "core/task_kind.hpp"

#include <loom/graph.hpp>

#include <algorithm>
#include <string>

namespace loom::detail {

namespace {

// Host workers are tracks 1.., staged copies (started by the scheduler) 99,
// streams 100.. (the device launcher's).
constexpr int kStagedCopiesTrack = 99;

int worker_track(int worker) { return worker + 1; }

std::string track_name(const std::vector<TraceTrack>& tracks, int id) {
  const auto it =
      std::find_if(tracks.begin(), tracks.end(), [id](const TraceTrack& t) { return t.id == id; });
  if (it != tracks.end()) return it->name;
  // A worker the pool added after the tracks were listed (it grows while
  // workers wait).
  if (id >= worker_track(0) && id < kStagedCopiesTrack) {
    return "host worker " + std::to_string(id - worker_track(0));
  }
  return "track " + std::to_string(id);
}

}  // namespace

std::vector<TaskTiming> time_completed_tasks(const Run& run, const Launcher* device) {
  std::vector<TaskTiming> timings;
  const auto n = static_cast<std::uint32_t>(run.tasks().size());
  for (std::uint32_t t = 0; t < n; ++t) {
    const TaskState& ts = run.tasks_state[t];
    if (ts.status != TaskStatus::completed) continue;
    TaskTiming timing{t, 0, ts.start_us, ts.end_us - ts.start_us};
    switch (run.placement(t)) {
      case Placement::device: {
        TraceEvent e;
        if (device == nullptr || !device->trace_span(run, t, e)) continue;
        timing = {t, e.track, e.start_us, e.duration_us};
        break;
      }
      case Placement::host: timing.track = worker_track(ts.worker); break;
      case Placement::async: timing.track = kStagedCopiesTrack; break;
    }
    timings.push_back(timing);
  }
  return timings;
}

std::vector<TraceTrack> run_trace_tracks(const Run& run, const Launcher* device, int workers) {
  std::vector<TraceTrack> tracks;
  if (device != nullptr) device->trace_tracks(run, tracks);
  for (int w = 0; w < workers; ++w)
    tracks.push_back({worker_track(w), "host worker " + std::to_string(w)});
  tracks.push_back({kStagedCopiesTrack, "staged copies"});
  return tracks;
}

std::vector<TraceEvent> run_trace_events(const Run& run, const std::vector<TaskTiming>& timings) {
  std::vector<TraceEvent> events;
  events.reserve(timings.size());
  for (const auto& timing : timings) {
    const Task& task = run.tasks()[timing.task];
    TraceEvent e;
    e.name = task.name;
    e.category = std::string(kind_name(task));
    e.track = timing.track;
    e.start_us = timing.start_us;
    e.duration_us = timing.duration_us;
    events.push_back(std::move(e));
  }
  return events;
}

std::vector<ActivitySpan> activity_spans(const Run& run, const std::vector<TraceTrack>& tracks,
                                         const std::vector<TaskTiming>& timings,
                                         double host_origin_us,
                                         std::optional<double> device_origin_us) {
  std::vector<ActivitySpan> spans;
  spans.reserve(timings.size());
  for (const auto& timing : timings) {
    const bool device = run.placement(timing.task) == Placement::device;
    if (device && !device_origin_us) continue;
    ActivitySpan span;
    span.task = run.tasks()[timing.task].name;
    span.track = track_name(tracks, timing.track);
    span.device = device;
    span.run = run.number;
    span.start_us = (device ? *device_origin_us : host_origin_us) + timing.start_us;
    span.duration_us = std::max(0.0, timing.duration_us);
    spans.push_back(std::move(span));
  }
  return spans;
}

}  // namespace loom::detail
