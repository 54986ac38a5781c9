#pragma once
// A run's trace: one track a stream (from the device launcher), one a host
// worker, one for staged copies; one event a completed task. Its times are
// read on the scheduling thread when the run ends (a device task's from its
// launcher's events, which only that thread queries); the rest (names, the
// Chrome-trace file of RuntimeOptions::trace_path, the activity log's spans)
// is made by a worker.

#include "sched/launcher.hpp"
#include "sched/run.hpp"
#include "sched/run_times.hpp"
#include "trace/chrome_trace.hpp"

#include <loom/activity.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::detail {

/// A run's Chrome-trace file (RuntimeOptions::trace_path), ready to write.
struct RunTraceFile {
  std::string path;
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;
};

/// What a worker makes of a finished run's trace before it deletes the run;
/// it hands the spans over once it has published the run (so that a closed
/// activity log's runs are all ready).
struct FinishedTrace {
  std::optional<RunTraceFile> file;
  ActivityTicket activity;  // the run's, moved out of it
  std::vector<ActivitySpan> spans;
};

/// The times of a finished run's completed tasks. Scheduling thread.
/// `device`: the run's device launcher (null on the CPU backend).
std::vector<TaskTiming> time_completed_tasks(const Run& run, const Launcher* device);

/// The tracks of a run's trace: the device launcher's streams, `workers`
/// host workers, staged copies. Any thread.
std::vector<TraceTrack> run_trace_tracks(const Run& run, const Launcher* device, int workers);

/// The run's Chrome-trace events (each task's own clock, as timed). Any thread.
std::vector<TraceEvent> run_trace_events(const Run& run, const std::vector<TaskTiming>& timings);

/// The run's spans on an activity log's clock: host times shifted by
/// `host_origin_us` (when the run started, since the log opened), device
/// times by `device_origin_us` (device tasks are left out without it). Any thread.
std::vector<ActivitySpan> activity_spans(const Run& run, const std::vector<TraceTrack>& tracks,
                                         const std::vector<TaskTiming>& timings,
                                         double host_origin_us,
                                         std::optional<double> device_origin_us);

}  // namespace loom::detail
