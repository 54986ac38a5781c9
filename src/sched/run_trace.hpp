#pragma once
// A run's Chrome trace (src/trace/chrome_trace): one track a stream (from
// the device launcher), one a host worker, one for staged copies; one event
// a completed task. Collected on the scheduling thread when the run ends,
// written by a worker.

#include "sched/launcher.hpp"
#include "sched/run.hpp"
#include "trace/chrome_trace.hpp"

#include <string>
#include <vector>

namespace loom::detail {

struct RunTrace {
  std::string path;
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;
};

/// The trace of a finished run, for the file `trace_path_for_run(base, run.number)`.
/// `device`: the run's device launcher (null on the CPU backend).
RunTrace collect_run_trace(const Run& run, const Launcher* device, int workers,
                           const std::string& base);

}  // namespace loom::detail
