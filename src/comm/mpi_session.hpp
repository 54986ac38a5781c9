#pragma once
// MPI as loom uses it (built only with MPI): initialized on first use when the
// program has not (MPI_THREAD_MULTIPLE, finalized at exit), and one lock for
// loom's MPI calls when the program initialized MPI with less than
// MPI_THREAD_MULTIPLE (collectives run on host workers, several threads).

#include <mpi.h>

#include <mutex>

namespace loom::detail {

class MpiSession {
 public:
  /// The process's session; initializes MPI the first time when needed.
  /// @throws CommError when MPI was initialized without thread support
  /// (MPI_THREAD_SERIALIZED at least), or finalized already.
  static MpiSession& get();

  /// Held around each of loom's MPI calls: a real lock below
  /// MPI_THREAD_MULTIPLE, none at it.
  std::unique_lock<std::mutex> lock() {
    return serialized_ ? std::unique_lock(mutex_) : std::unique_lock<std::mutex>();
  }
  /// True once MPI is finalized (by loom at exit, or by the program).
  static bool finalized() noexcept;

  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  MpiSession();

  bool initialized_here_ = false;
  bool serialized_ = false;
  std::mutex mutex_;
};

}  // namespace loom::detail
