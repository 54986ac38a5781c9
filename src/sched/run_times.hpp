#pragma once
// The times the scheduling thread reads of a finished run, for its trace:
// kept in the run (their capacity reused) until a worker winds it up.

#include <cstdint>
#include <optional>
#include <vector>

namespace loom::detail {

/// A completed task's time, as its launcher measured it: a device task's
/// since the run's trace base, on the device (Launcher::trace_span); a host
/// task's or a staged copy's since the run started, on the host.
struct TaskTiming {
  std::uint32_t task = 0;
  int track = 0;
  double start_us = 0;
  double duration_us = 0;
};

/// What the scheduling thread reads of a finished run for its trace.
struct RunTimes {
  std::vector<TaskTiming> tasks;
  /// The device times' base on the activity log's clock (µs since it opened);
  /// none outside a log or without a device launcher.
  std::optional<double> device_origin_us;
};

}  // namespace loom::detail
