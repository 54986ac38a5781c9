#pragma once
// The machinery behind Runtime::start_activity_log and stop_activity_log
// (loom/activity.hpp). A session is one open log: the runs submitted while it
// is open join it (each holds a ticket), and each hands its spans over from
// the worker that tears it down, under a short lock; closing waits for every
// ticket to come back. The scheduling thread never touches the session's lock.
//
// Cost: with no log open, one relaxed atomic load a run (open()); with a log
// open, two locks at submit (join) and one at the run's end (the hand-over).
//
// Thread-safety: every member may be called from any thread; stop() not
// from loom's own threads (it waits for runs).

#include <loom/activity.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace loom::detail {

/// Where a device launcher's trace clock stood when a log opened: made by
/// Launcher::mark_trace_clock, read by Launcher::trace_origin_us.
struct DeviceClockMark {
  virtual ~DeviceClockMark() = default;
  double host_us = 0;  ///< the mark's time on the host, since the log opened
};

/// One open activity log and the spans handed to it.
class ActivitySession {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  ActivitySession(TimePoint opened, std::shared_ptr<const DeviceClockMark> device_clock)
      : opened_(opened), device_clock_(std::move(device_clock)) {}

  TimePoint opened() const noexcept { return opened_; }
  /// Null on the CPU backend.
  const DeviceClockMark* device_clock() const noexcept { return device_clock_.get(); }

  /// A run joins: close() waits for it.
  void enter();
  /// A run that joined hands its spans over (perhaps none) and leaves.
  void leave(std::vector<ActivitySpan> spans) noexcept;
  /// Once no run can join any more: waits for those that did, and returns
  /// every span, sorted by start.
  ActivityLog close();

 private:
  TimePoint opened_;
  std::shared_ptr<const DeviceClockMark> device_clock_;
  std::mutex mutex_;
  std::condition_variable left_;
  std::size_t inside_ = 0;  // runs joined and not yet left
  std::vector<ActivitySpan> spans_;
};

/// A run's membership of a session (Run::activity): handed back with the
/// run's spans, or empty-handed when the run is dropped before its end.
class ActivityTicket {
 public:
  ActivityTicket() = default;
  explicit ActivityTicket(std::shared_ptr<ActivitySession> session);
  ~ActivityTicket() { release(); }
  ActivityTicket(ActivityTicket&& other) noexcept = default;
  ActivityTicket& operator=(ActivityTicket&& other) noexcept;
  ActivityTicket(const ActivityTicket&) = delete;
  ActivityTicket& operator=(const ActivityTicket&) = delete;

  explicit operator bool() const noexcept { return session_ != nullptr; }
  /// @pre *this is not empty.
  const ActivitySession& session() const noexcept { return *session_; }
  /// Hands the run's spans to the session (none when empty); the ticket is
  /// empty afterwards.
  void deliver(std::vector<ActivitySpan> spans) noexcept;

 private:
  void release() noexcept;
  std::shared_ptr<ActivitySession> session_;
};

class ActivityRecorder {
 public:
  using MarkDeviceClock =
      std::function<std::shared_ptr<const DeviceClockMark>(ActivitySession::TimePoint)>;

  /// True while a log is open. One relaxed load: the cost of a run without a log.
  bool open() const noexcept { return open_.load(std::memory_order_relaxed); }
  /// Opens a log; `mark` ties the device clock to it (null: no device).
  /// @throws InvalidArgument when a log is open; what `mark` throws.
  void start(const MarkDeviceClock& mark);
  /// The open log's ticket for a run being submitted; empty when none is open.
  ActivityTicket join();
  /// Closes the log, waits for the runs that joined it, returns their spans.
  /// @throws InvalidArgument when none is open, or on loom's own threads.
  ActivityLog stop();

 private:
  std::atomic<bool> open_{false};
  std::mutex mutex_;  // guards session_; held while a log opens (no run joins meanwhile)
  std::shared_ptr<ActivitySession> session_;
};

}  // namespace loom::detail
