#include "comm/device_reduce.hpp"

#include "cuda/check.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cstdint>

namespace loom::detail {
namespace {

// Inputs a launch takes by value; more are folded into `out` by further
// launches, in order (out = combine(out, next inputs)).
constexpr int kInputsPerLaunch = 8;

struct Inputs {
  const void* at[kInputsPerLaunch];
  int count;
};

template <class T, ReduceOp Op>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (Op == ReduceOp::sum) {
    return static_cast<T>(a + b);
  } else if constexpr (Op == ReduceOp::max) {
    return a < b ? b : a;
  } else {
    return b < a ? b : a;
  }
}

template <class T, ReduceOp Op>
__global__ void reduce_kernel(T* out, Inputs inputs, std::int64_t offset, std::int64_t count,
                              bool accumulate) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    int first = 0;
    T acc;
    if (accumulate) {
      acc = out[i];
    } else {
      acc = static_cast<const T*>(inputs.at[0])[offset + i];
      first = 1;
    }
    for (int k = first; k < inputs.count; ++k) {
      acc = combine<T, Op>(acc, static_cast<const T*>(inputs.at[k])[offset + i]);
    }
    out[i] = acc;
  }
}

template <class T, ReduceOp Op>
void launch(void* out, const std::vector<const void*>& inputs, std::int64_t offset,
            std::int64_t count, cudaStream_t stream) {
  int device = 0;
  LOOM_CUDA_CHECK(cudaGetDevice(&device));
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  constexpr int kThreads = 256;
  const std::int64_t wanted = (count + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, 8LL * sms));
  for (std::size_t start = 0; start < inputs.size(); start += kInputsPerLaunch) {
    Inputs batch{};
    batch.count = static_cast<int>(std::min<std::size_t>(kInputsPerLaunch, inputs.size() - start));
    for (int k = 0; k < batch.count; ++k) batch.at[k] = inputs[start + static_cast<std::size_t>(k)];
    reduce_kernel<T, Op>
        <<<blocks, kThreads, 0, stream>>>(static_cast<T*>(out), batch, offset, count, start != 0);
    LOOM_CUDA_CHECK_LAUNCH("local backend reduction kernel");
  }
}

template <class T>
void launch(ReduceOp op, void* out, const std::vector<const void*>& inputs, std::int64_t offset,
            std::int64_t count, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::sum: return launch<T, ReduceOp::sum>(out, inputs, offset, count, stream);
    case ReduceOp::max: return launch<T, ReduceOp::max>(out, inputs, offset, count, stream);
    case ReduceOp::min: return launch<T, ReduceOp::min>(out, inputs, offset, count, stream);
  }
}

}  // namespace

void device_reduce(DType dtype, ReduceOp op, void* out, const std::vector<const void*>& inputs,
                   std::int64_t offset, std::int64_t count, cudaStream_t stream) {
  if (count == 0 || inputs.empty()) return;
  switch (dtype) {
    case DType::f32: return launch<float>(op, out, inputs, offset, count, stream);
    case DType::i32: return launch<std::int32_t>(op, out, inputs, offset, count, stream);
    case DType::i64: return launch<std::int64_t>(op, out, inputs, offset, count, stream);
    case DType::i8: return launch<std::int8_t>(op, out, inputs, offset, count, stream);
    case DType::u8: return launch<std::uint8_t>(op, out, inputs, offset, count, stream);
    default: throw InternalError("a device reduction over an unchecked dtype");
  }
}

}  // namespace loom::detail
