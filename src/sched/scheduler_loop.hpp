#pragma once
// The scheduling thread: takes new runs from a lock-free queue, drives the
// run state machine and the launchers round after round, and never blocks
// (a wait for loom's work there throws: its thread role says why). With
// nothing to do it spins a while, then sleeps until woken: by a submit, a
// worker's result, a staged copy's end, a cancel, or a host callback queued
// behind watched device work (Waker).
//
// Thread-safety: submit() and wake() from any thread (wake() also from CUDA
// callback threads: it makes no CUDA call); start() and stop() from the owner.

#include "sched/launcher.hpp"
#include "sched/run.hpp"

#include <loom/cuda_interop.hpp>

#include <boost/lockfree/queue.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::detail {

class RunMachine;

class SchedulerLoop {
 public:
  SchedulerLoop() = default;
  ~SchedulerLoop();  // stop()
  SchedulerLoop(const SchedulerLoop&) = delete;
  SchedulerLoop& operator=(const SchedulerLoop&) = delete;

  /// Starts the thread. `cuda_device` (-1: none) is made current on it once.
  void start(RunMachine& machine, Launcher& host, Launcher* device, int cuda_device);
  /// Lets every submitted run finish, then joins the thread. Idempotent.
  void stop();
  /// Hands a run (made by the machine) to the scheduling thread.
  void submit(std::unique_ptr<Run> run);
  /// Makes the scheduling thread look for work now.
  void wake();

 private:
  void loop();
  bool sleep_or_spin(bool progress, bool waiting_on_device);

  RunMachine* machine_ = nullptr;
  Launcher* host_ = nullptr;
  Launcher* device_ = nullptr;
  int cuda_device_ = -1;
  boost::lockfree::queue<Run*> incoming_{64};
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::atomic<bool> wake_flag_{false};
  std::atomic<bool> stop_{false};
  Clock::time_point last_progress_{};
  Clock::time_point last_device_wait_{};  // the last look that found device work watched
  std::thread thread_;
};

// Host callbacks queued behind watched device work (cudaLaunchHostFunc) wake
// the sleeping scheduler, at most one pending a stream. They outlive nothing:
// the owner synchronizes the streams before deleting this; where it cannot (a
// poisoned device, whose queued callbacks may never run) it leaves this
// behind rather than risk a callback into freed memory.
class Waker {
 public:
  Waker(SchedulerLoop& target, std::size_t streams);
  /// Queues a wake-up behind the work on `view`, stream index `stream`,
  /// unless one is pending there. False when it cannot be queued.
  bool arm(std::size_t stream, StreamView view) noexcept;
  /// From now on a callback wakes no one.
  void detach();

 private:
  struct Slot {
    Waker* waker;
    std::size_t stream;
  };
  static void CUDART_CB fire(void* data);

  std::mutex mutex_;
  SchedulerLoop* target_;  // under mutex_
  std::unique_ptr<std::atomic<bool>[]> armed_;
  std::vector<Slot> slots_;
};

}  // namespace loom::detail
