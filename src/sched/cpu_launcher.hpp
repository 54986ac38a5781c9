#pragma once
// The CPU launcher: host tasks (host functions, ops' and collectives' CPU
// implementations, host-to-host copies) run on host workers. Ready tasks are
// posted once a scheduler round, in priority order; a worker runs the task
// and hands its outcome back through a lock-free queue, which the next round
// takes (collect()).

#include "sched/launcher.hpp"
#include "sched/worker_pool.hpp"

#include <boost/lockfree/queue.hpp>

#include <cstdint>
#include <memory>

namespace loom::detail {

class CopyEngine;
class SchedulerLoop;

class CpuLauncher final : public Launcher {
 public:
  /// `loop` is woken when a worker hands an outcome back.
  CpuLauncher(std::shared_ptr<WorkerPool> workers, CopyEngine& copies, SchedulerLoop& loop);

  void ready(RunMachine& machine, Run& run, std::uint32_t t) override;
  bool advance(RunMachine& machine, Run& run) override;
  bool collect(RunMachine& machine) override;
  bool idle(const Run& run) const override;

 private:
  struct Done {
    Run* run;
    std::uint32_t task;
  };
  void post(Run& run, std::uint32_t t);
  void run_on_worker(Run& run, std::uint32_t t, int worker);

  std::shared_ptr<WorkerPool> workers_;
  CopyEngine& copies_;
  SchedulerLoop& loop_;
  boost::lockfree::queue<Done> done_{1024};
  std::vector<std::uint32_t> ready_scratch_;  // advance()'s, on the scheduling thread
};

}  // namespace loom::detail
