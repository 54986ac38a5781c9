// Device times for traces (cuda_launcher.hpp): each traced task's span
// from its timing events against the run's base event, its track (the
// executor stream), and the activity log's clock mark.
#include "sched/cuda_run_streams.hpp"

#include "cuda/device_guard.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"

#include <string>

namespace loom::detail {

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
