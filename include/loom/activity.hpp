#pragma once
/// @file activity.hpp
/// An activity log: a timeline, on one clock, of every task of every run that
/// is submitted while the log is open (Runtime::start_activity_log until
/// Runtime::stop_activity_log). A real-time pipeline submits hundreds of runs
/// a second, where a Chrome trace per run (RuntimeOptions::trace_path) is of
/// no use; the log gives one timeline over all of them, to measure how busy
/// the GPU was (device_busy_fraction) and to write as one Chrome trace.
///
/// @code
/// rt.start_activity_log();
/// for (int frame = 0; frame < 100; ++frame) exe.run();
/// loom::ActivityLog log = rt.stop_activity_log();          // waits for those runs
/// double busy = loom::device_busy_fraction(log, 0, log.duration_us);
/// loom::write_chrome_trace(log, "frames.json");            // open it in Perfetto
/// @endcode
///
/// What is covered: the completed tasks of runs submitted while the log is
/// open, through Runtime::submit, Executable::run (each captured CUDA-graph
/// segment is one span, named as the segment task is: "segment 0 [a .. b, n
/// tasks]"; copies and host tasks between segments are their own spans) and
/// Runtime::copy (a run of one task named "Runtime::copy"). Not covered:
/// copies that involve a device other than the runtime's (Runtime::copy
/// queues them on that device's stream, outside any run), loom's own
/// allocations, work queued outside loom, tasks that failed or were
/// cancelled, and runs submitted before the log opened or after it closed (a
/// run belongs to the log that was open when it was submitted, whenever it
/// starts and ends).
///
/// Clocks: device spans are timed by CUDA events (resolution about 0.5 µs)
/// against a base event recorded, and waited for, when the log opens; host
/// spans by the host's steady clock. Both read as microseconds since the log
/// opened. The two clocks are tied once, at opening, to within a few
/// microseconds (half the time it took to wait for the base event), and may
/// drift apart slowly after that. A run's place on the device timeline is a
/// float count of milliseconds since the base event (CUDA's elapsed time):
/// its resolution is about 1 µs for the first 16 s of a log, 4 µs up to a
/// minute, and coarser after; durations and offsets within a run keep the
/// events' resolution.
///
/// Staged copies (pageable host memory to or from a device, through pinned
/// buffers) are host spans on the track "staged copies", timed from their
/// start to the moment the scheduler saw them end; their DMA does not count
/// as device time. On the CPU backend every span is a host span, and
/// device_busy_fraction is 0.

#include <loom/export.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

/// One task's execution, on the activity log's clock.
struct ActivitySpan {
  /// The task's name (a compiled graph's segment task keeps the name it has in the run).
  std::string task;
  /// Where it ran, named as a run's Chrome trace names its tracks: "stream 3 (normal)",
  /// "host worker 1", "staged copies".
  std::string track;
  /// True for work that occupied the GPU (kernels, captured segments, copies
  /// on a stream); false for host work (host tasks, staged copies, every task
  /// on the CPU backend).
  bool device = false;
  std::uint64_t run = 0;  ///< the run's number (1 for the runtime's first run)
  double start_us = 0;    ///< since the log was opened
  double duration_us = 0;
};

/// The spans of every run submitted while the log was open.
struct ActivityLog {
  std::vector<ActivitySpan> spans;  ///< sorted by start
  /// From opening to closing the log (when stop_activity_log had every span):
  /// every span lies within [0, duration_us].
  double duration_us = 0;
};

/// The fraction of [begin_us, end_us) during which at least one device span
/// ran: the union of the device spans, clipped to the window, not their sum
/// (concurrent streams count once). 0 for an empty window and on the CPU
/// backend (no device spans). Thread-safe (reads only).
/// @throws InvalidArgument when end_us < begin_us.
LOOM_API double device_busy_fraction(const ActivityLog& log, double begin_us, double end_us);

/// Writes the log as one Chrome-trace (Perfetto-readable) JSON file: one track
/// a distinct ActivitySpan::track (device tracks first), one complete event a
/// span, with its run number as an argument.
/// @throws Error naming the path when it cannot be written.
LOOM_API void write_chrome_trace(const ActivityLog& log, const std::string& path);

}  // namespace loom
