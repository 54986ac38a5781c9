#pragma once
// The shared state of one run: what a Future sees. Written by the executor
// (scheduler thread and workers), read by any thread through the Future.

#include <loom/future.hpp>
#include <loom/graph.hpp>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace loom::detail {

class WorkerPool;

struct RunState {
  mutable std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;                 // the first failure
  std::vector<TaskReport> reports;          // statuses and errors; report() adds the names
  std::shared_ptr<const void> names_owner;  // keeps `tasks` alive
  const std::vector<Task>* tasks = nullptr;
  std::atomic<bool> cancel_requested{false};
  std::vector<std::function<void(const Future&)>> continuations;
  std::weak_ptr<WorkerPool> workers;     // where continuations run
  std::function<void()> wake_scheduler;  // after cancel()
};

}  // namespace loom::detail
