#include "testing/spin.hpp"

#include "common/check.hpp"

#include <chrono>
#include <thread>

namespace loom::kernels {
namespace {

__global__ void spin_kernel(float* gT, std::int64_t nanoseconds) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  std::uint64_t now = start;
  while (now - start < static_cast<std::uint64_t>(nanoseconds)) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
  gT[0] += 1.0F;
}

}  // namespace

void spin(float* t, std::int64_t microseconds, StreamView stream) {
  spin_kernel<<<1, 1, 0, stream>>>(t, microseconds * 1000);
  LOOM_KERNEL_CHECK_LAUNCH("spin kernel launch");
}

void spin_reference(float* t, std::int64_t microseconds) {
  std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
  t[0] += 1.0F;
}

}  // namespace loom::kernels
