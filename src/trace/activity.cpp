// The activity log's public functions: the busy fraction of the device, and
// the log as one Chrome trace.

#include "trace/chrome_trace.hpp"

#include <loom/activity.hpp>
#include <loom/error.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace loom {

namespace {

using Interval = std::pair<double, double>;  // [start, end)

// The device spans' parts inside [begin, end).
std::vector<Interval> device_intervals_within(const ActivityLog& log, double begin, double end) {
  std::vector<Interval> intervals;
  for (const auto& span : log.spans) {
    if (!span.device) continue;
    const double from = std::max(span.start_us, begin);
    const double to = std::min(span.start_us + span.duration_us, end);
    if (to > from) intervals.emplace_back(from, to);
  }
  return intervals;
}

// The length of the union of `intervals`.
double union_length(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0;
  double covered_to = 0;
  bool any = false;
  for (const auto& [from, to] : intervals) {
    if (!any || from > covered_to) {
      total += to - from;
      covered_to = to;
      any = true;
    } else if (to > covered_to) {
      total += to - covered_to;
      covered_to = to;
    }
  }
  return total;
}

// One track a distinct span track, device tracks first, each group in the
// order its tracks first ran.
std::vector<detail::TraceTrack> tracks_of(const ActivityLog& log,
                                          std::unordered_map<std::string, int>& ids) {
  std::vector<detail::TraceTrack> tracks;
  for (const bool device : {true, false}) {
    for (const auto& span : log.spans) {
      if (span.device != device || ids.contains(span.track)) continue;
      const int id = static_cast<int>(tracks.size()) + 1;
      ids.emplace(span.track, id);
      tracks.push_back({id, span.track});
    }
  }
  return tracks;
}

}  // namespace

double device_busy_fraction(const ActivityLog& log, double begin_us, double end_us) {
  if (end_us < begin_us) {
    throw InvalidArgument("device_busy_fraction: the window ends (" + std::to_string(end_us) +
                          " us) before it begins (" + std::to_string(begin_us) +
                          " us); expected begin_us <= end_us");
  }
  if (end_us == begin_us) return 0.0;
  return union_length(device_intervals_within(log, begin_us, end_us)) / (end_us - begin_us);
}

void write_chrome_trace(const ActivityLog& log, const std::string& path) {
  std::unordered_map<std::string, int> ids;
  const auto tracks = tracks_of(log, ids);
  std::vector<detail::TraceEvent> events;
  events.reserve(log.spans.size());
  for (const auto& span : log.spans) {
    detail::TraceEvent e;
    e.name = span.task;
    e.category = span.device ? "device" : "host";
    e.track = ids.at(span.track);
    e.start_us = span.start_us;
    e.duration_us = span.duration_us;
    e.run = span.run;
    events.push_back(std::move(e));
  }
  std::string why;
  if (!detail::try_write_chrome_trace(path, tracks, events, why)) {
    throw Error("write_chrome_trace: the activity log was not written: " + why);
  }
}

}  // namespace loom
