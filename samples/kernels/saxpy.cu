// Your own kernel as a loom task: y = a * x + y, with a CPU version for
// machines without a GPU. Everything below main's first line is the task.
#include <loom/cuda_interop.hpp>
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <cstdio>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  loom::Runtime rt;
  const int n = 1 << 20;
  auto x = rt.tensor<float>({n}), y = rt.tensor<float>({n});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.0F));
  g.add(loom::ops::fill(y, 2.0F));
  g.add(loom::kernel_task(
      "saxpy", {x, y}, {y},
      [=](loom::KernelContext& k) {
        loom::launch(k, saxpy, dim3((n + 255) / 256), dim3(256), 0, n, 3.0F, x.data_as<float>(),
                     y.data_as<float>());
      },
      [=] {  // the CPU backend's version
        for (int i = 0; i < n; ++i) y.data_as<float>()[i] += 3.0F * x.data_as<float>()[i];
      }));
  auto out = rt.tensor<float>({n}, loom::Memory::pageable);
  g.copy(y, out);
  rt.submit(g).wait();
  std::printf("saxpy on the %s backend: y[0] = %.1f (expected 5.0)\n",
              rt.has_gpu() ? "CUDA" : "CPU", out.data_as<float>()[0]);
  return out.data_as<float>()[0] == 5.0F && out.data_as<float>()[n - 1] == 5.0F ? 0 : 1;
}
