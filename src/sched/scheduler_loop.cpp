#include "sched/scheduler_loop.hpp"

#include "core/log.hpp"
#include "core/thread_role.hpp"
#include "cuda/check.hpp"
#include "sched/run_machine.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>

namespace loom::detail {

namespace {

// How long the scheduling thread keeps spinning after its last progress.
constexpr auto kIdleSpin = std::chrono::microseconds(200);
// How long device work is polled from short naps before a host callback is
// armed to wake the loop instead.
constexpr auto kDeviceNaps = std::chrono::milliseconds(100);

// The scheduling thread must never wait for loom's work: it is what makes
// that work progress.
class SchedulerRole final : public ThreadRole {
 public:
  explicit SchedulerRole(const SchedulerLoop& loop) : loop_(loop) {}
  const void* owner() const noexcept override { return &loop_; }
  void begin_blocking() override {}
  void end_blocking() noexcept override {}
  const char* cannot_wait() const noexcept override {
    return "called on loom's scheduling thread (inside an op's run_cuda), which would wait "
           "for itself forever; enqueue the work in the same graph instead";
  }

 private:
  const SchedulerLoop& loop_;
};

}  // namespace

SchedulerLoop::~SchedulerLoop() { stop(); }

void SchedulerLoop::start(RunMachine& machine, Launcher& host, Launcher* device, int cuda_device) {
  machine_ = &machine;
  host_ = &host;
  device_ = device;
  cuda_device_ = cuda_device;
  thread_ = std::thread([this] { loop(); });
}

void SchedulerLoop::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  wake();
  thread_.join();
}

void SchedulerLoop::submit(std::unique_ptr<Run> run) {
  Run* raw = run.release();
  while (!incoming_.push(raw)) std::this_thread::yield();
  wake();
}

void SchedulerLoop::wake() {
  // Sequentially consistent: the scheduler's exchange(false) at the top of
  // its loop is ordered against this store, so a wake-up between its
  // emptiness checks and its sleep is never lost.
  wake_flag_.store(true);
  std::lock_guard lock(wake_mutex_);
  wake_cv_.notify_one();
}

void SchedulerLoop::loop() {
  SchedulerRole role(*this);
  const ThreadRoleScope role_scope(&role);
  // The scheduling thread drives one device: make it current once, not per launch.
  if (cuda_device_ >= 0) {
    try {
      LOOM_CUDA_CHECK(cudaSetDevice(cuda_device_));
    } catch (const std::exception& e) {
      logger().error("the scheduling thread cannot use device {}: {}", cuda_device_, e.what());
    }
  }
  RunMachine& machine = *machine_;
  last_progress_ = Clock::now();
  for (;;) {
    // Cleared before looking for work: a wake() from now on is seen below.
    wake_flag_.exchange(false);
    bool progress = false;
    Run* incoming = nullptr;
    while (incoming_.pop(incoming)) {
      machine.admit(std::unique_ptr<Run>(incoming));
      progress = true;
    }
    if (host_->collect(machine)) progress = true;
    if (device_ != nullptr && device_->collect(machine)) progress = true;
    machine.start_ready_runs();
    bool waiting_on_device = false;
    for (const auto& r : machine.runs()) {
      if (machine.advance(*r)) progress = true;
      if (device_ != nullptr && device_->watching(*r)) waiting_on_device = true;
    }
    if (machine.finish_runs()) progress = true;
    if (machine.runs_to_start()) continue;
    if (stop_.load() && machine.runs().empty() && incoming_.empty()) return;
    sleep_or_spin(progress, waiting_on_device);
  }
}

bool SchedulerLoop::sleep_or_spin(bool progress, bool waiting_on_device) {
  const auto now = Clock::now();
  if (waiting_on_device) last_device_wait_ = now;
  if (progress) {
    last_progress_ = now;
    return false;
  }
  // Nothing to do now. Spin a while after the last progress, so that the
  // next submit, a worker's result or finishing device work is seen without
  // a wake-up's latency (longer while device work is watched); then sleep
  // until woken: by a submit, a worker, a staged copy's end. Device work
  // that outlasts the spin is polled from short naps that lengthen with the
  // wait (a 64th of it, so its end is seen within ~2% of its time); only
  // past kDeviceNaps is a host callback queued behind it to wake the loop:
  // a callback's round trip is slower than a nap (on the H200 a compiled
  // 2 ms copy, whose end the callback reported, finished ~0.25 ms after its
  // kernel would alone), and the stream's next work waits behind it.
  const auto idle = now - last_progress_;
  // Over device work and after it the spin lasts as long (last_device_wait_
  // is now while device work is watched): the next replay of
  // a training loop comes within milliseconds, and a sleeping scheduler cost
  // it 20-27 µs to wake and a cold launch path (H100, a compiled replay
  // submitted 1.1 ms after the last one ended), while its waiter and a
  // worker spin through the same 2 ms already.
  const bool after_device = now - last_device_wait_ < kDeviceSpin;
  if (idle < (after_device ? kDeviceSpin : kIdleSpin)) {
    // A worker spins as long, to publish the device run's end at once
    // (asleep, it cost a wake-up a run: tens of µs on the GPU machines).
    if (waiting_on_device) machine_->keep_a_worker_warm(last_progress_ + kDeviceSpin);
    std::this_thread::yield();
    return false;
  }
  std::chrono::microseconds nap(100000);
  if (waiting_on_device && idle < kDeviceNaps) {
    nap = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(idle) / 64,
                     std::chrono::microseconds(20), std::chrono::microseconds(1000));
  } else if (waiting_on_device) {
    const bool armed = device_->arm_wakeups(machine_->runs());
    nap = armed ? std::chrono::microseconds(50000) : std::chrono::microseconds(100);
  }
  std::unique_lock lock(wake_mutex_);
  wake_cv_.wait_for(lock, nap, [&] { return wake_flag_.load(); });
  return true;
}

Waker::Waker(SchedulerLoop& target, std::size_t streams)
    : target_(&target), armed_(std::make_unique<std::atomic<bool>[]>(streams)), slots_(streams) {
  for (std::size_t s = 0; s < streams; ++s) slots_[s] = Slot{this, s};
}

bool Waker::arm(std::size_t stream, StreamView view) noexcept {
  if (armed_[stream].exchange(true)) return true;  // one is pending there
  const cudaError_t rc = cudaLaunchHostFunc(view.native(), &Waker::fire, &slots_[stream]);
  if (rc == cudaSuccess) return true;
  (void)cudaGetLastError();
  armed_[stream].store(false);
  return false;
}

void Waker::detach() {
  std::lock_guard lock(mutex_);
  target_ = nullptr;
}

void CUDART_CB Waker::fire(void* data) {
  auto* slot = static_cast<Slot*>(data);
  Waker& w = *slot->waker;
  w.armed_[slot->stream].store(false, std::memory_order_release);
  std::lock_guard lock(w.mutex_);
  if (w.target_ != nullptr) w.target_->wake();
}

}  // namespace loom::detail
