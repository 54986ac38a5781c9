#pragma once
// Chrome-trace (Perfetto-readable) JSON: one complete event ("ph": "X") a
// task, one track (tid) per stream and per host worker, named by metadata.

#include <string>
#include <vector>

namespace loom::detail {

struct TraceEvent {
  std::string name;
  std::string category;  // "op", "copy", "host", ...
  int track = 0;
  double start_us = 0;
  double duration_us = 0;
  unsigned long long run = 0;  // written as an argument when not 0
};

struct TraceTrack {
  int id = 0;
  std::string name;  // "stream 3 (high)", "host worker 1"
};

/// The JSON text of a trace.
std::string chrome_trace_json(const std::vector<TraceTrack>& tracks,
                              const std::vector<TraceEvent>& events);

/// Writes the trace to `path`; false (and `why` says so) on failure.
bool try_write_chrome_trace(const std::string& path, const std::vector<TraceTrack>& tracks,
                            const std::vector<TraceEvent>& events, std::string& why);

/// Writes the trace to `path`; logs (does not throw) on failure.
void write_chrome_trace(const std::string& path, const std::vector<TraceTrack>& tracks,
                        const std::vector<TraceEvent>& events);

/// The file for run `run` of a LOOM_TRACE path: "t.json" -> "t.<run>.json".
std::string trace_path_for_run(const std::string& base, unsigned long long run);

}  // namespace loom::detail
