// A user's kernel launched the way users get it wrong: more threads a block
// than any GPU allows. Nothing checks the launch here, on purpose: loom must.
#include <cuda_runtime_api.h>

namespace loom::test {
namespace {
__global__ void do_nothing() {}
}  // namespace

void launch_with_too_many_threads(void* stream) {
  do_nothing<<<1, 4096, 0, static_cast<cudaStream_t>(stream)>>>();
}

}  // namespace loom::test
