#pragma once
// Where rt.compile's time goes, phase by phase, for the benchmarks
// (bench_compiled's BM_CompileCost): a thread that sets compile_profile()
// before compiling gets each phase's wall time added to it. Unset (the
// default), compile reads one thread-local pointer a phase and times
// nothing.

#include <chrono>

namespace loom::detail {

struct CompileProfile {
  double bind_us = 0;         ///< intermediates placed in the arena
  double prepare_us = 0;      ///< the user's graph checked and planned
  double steps_us = 0;        ///< split into steps and segments
  double describe_us = 0;     ///< tasks run to describe their launches
  double add_nodes_us = 0;    ///< kernel nodes added (cudaGraphAddKernelNode)
  double end_capture_us = 0;  ///< captures ended, probes checked
  double instantiate_us = 0;  ///< cudaGraphInstantiate
  double segment_ops_us = 0;  ///< the segments' ops made (their accesses)
  double replay_us = 0;       ///< the replay graph built and prepared
};

/// This thread's profile, or null.
CompileProfile*& compile_profile() noexcept;

/// Adds the time from construction to destruction to one phase of this
/// thread's profile, if one is set.
class CompilePhase {
 public:
  explicit CompilePhase(double CompileProfile::*phase) noexcept
      : profile_(compile_profile()), phase_(phase) {
    if (profile_ != nullptr) start_ = std::chrono::steady_clock::now();
  }
  ~CompilePhase() {
    if (profile_ == nullptr) return;
    const std::chrono::duration<double, std::micro> took =
        std::chrono::steady_clock::now() - start_;
    profile_->*phase_ += took.count();
  }
  CompilePhase(const CompilePhase&) = delete;
  CompilePhase& operator=(const CompilePhase&) = delete;

 private:
  CompileProfile* profile_;
  double CompileProfile::*phase_;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace loom::detail
