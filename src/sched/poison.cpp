#include "sched/poison.hpp"

#include "core/log.hpp"
#include "cuda/check.hpp"

#include <loom/error.hpp>

namespace loom::detail {

std::exception_ptr Poison::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Poison::throw_if_poisoned() const {
  if (!poisoned()) return;
  std::rethrow_exception(error());
}

void Poison::note(const std::exception_ptr& error) {
  if (!error || poisoned()) return;
  try {
    std::rethrow_exception(error);
  } catch (const CudaError& e) {
    if (!is_sticky_cuda_error(e.code())) return;
    std::lock_guard lock(mutex_);
    if (!error_) {
      error_ = error;
      poisoned_.store(true, std::memory_order_release);
      logger().error("the device is unusable from now on (a kernel fault): {}", e.what());
    }
  } catch (...) {
  }
}

}  // namespace loom::detail
