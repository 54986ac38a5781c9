#include "sched/activity_recorder.hpp"

#include "core/log.hpp"
#include "core/thread_role.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

namespace loom::detail {

void ActivitySession::enter() {
  std::lock_guard lock(mutex_);
  ++inside_;
}

void ActivitySession::leave(std::vector<ActivitySpan> spans) noexcept {
  {
    std::lock_guard lock(mutex_);
    --inside_;  // whatever happens to the spans: close() must not wait for them
    try {
      spans_.insert(spans_.end(), std::make_move_iterator(spans.begin()),
                    std::make_move_iterator(spans.end()));
    } catch (const std::exception& e) {
      logger().error("the activity log dropped {} spans: {}", spans.size(), e.what());
    }
  }
  left_.notify_all();
}

ActivityLog ActivitySession::close() {
  ActivityLog log;
  {
    std::unique_lock lock(mutex_);
    left_.wait(lock, [&] { return inside_ == 0; });
    log.spans = std::move(spans_);
  }
  std::stable_sort(
      log.spans.begin(), log.spans.end(),
      [](const ActivitySpan& a, const ActivitySpan& b) { return a.start_us < b.start_us; });
  log.duration_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - opened_).count();
  // A device span's end is read on the GPU's clock, tied to the host's to
  // within microseconds: the log lasts at least until its last span ends.
  for (const auto& span : log.spans) {
    log.duration_us = std::max(log.duration_us, span.start_us + span.duration_us);
  }
  return log;
}

ActivityTicket::ActivityTicket(std::shared_ptr<ActivitySession> session)
    : session_(std::move(session)) {
  session_->enter();
}

ActivityTicket& ActivityTicket::operator=(ActivityTicket&& other) noexcept {
  if (this != &other) {
    release();
    session_ = std::move(other.session_);
  }
  return *this;
}

void ActivityTicket::deliver(std::vector<ActivitySpan> spans) noexcept {
  if (!session_) return;
  auto session = std::move(session_);
  session->leave(std::move(spans));
}

void ActivityTicket::release() noexcept {
  if (!session_) return;
  auto session = std::move(session_);
  session->leave({});
}

void ActivityRecorder::start(const MarkDeviceClock& mark) {
  std::lock_guard lock(mutex_);
  if (session_) {
    throw InvalidArgument(
        "Runtime::start_activity_log: an activity log is already open; stop it first "
        "(stop_activity_log)");
  }
  const auto opened = std::chrono::steady_clock::now();
  session_ = std::make_shared<ActivitySession>(opened, mark ? mark(opened) : nullptr);
  open_.store(true, std::memory_order_relaxed);
}

ActivityTicket ActivityRecorder::join() {
  std::lock_guard lock(mutex_);
  if (!session_) return {};
  return ActivityTicket(session_);
}

ActivityLog ActivityRecorder::stop() {
  if (current_thread_role() != nullptr) {
    throw InvalidArgument(
        "Runtime::stop_activity_log inside a task or continuation would wait for runs that may "
        "include its own; stop the log from a thread of the program");
  }
  std::shared_ptr<ActivitySession> session;
  {
    std::lock_guard lock(mutex_);
    if (!session_) {
      throw InvalidArgument(
          "Runtime::stop_activity_log: no activity log is open (start_activity_log opens one)");
    }
    session = std::move(session_);
    open_.store(false, std::memory_order_relaxed);
  }
  return session->close();
}

}  // namespace loom::detail
