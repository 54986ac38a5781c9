// Your own CuTe kernel over loom tensors: loom::cute_tensor turns a tensor's
// pointer, shape and strides into a CuTe tensor, so the kernel indexes by
// coordinates and any view (here a transposed one) just works. The CPU
// backend's version runs the same CuTe indexing on the host.
#include <loom/cuda_interop.hpp>
#include <loom/cute.hpp>
#include <loom/loom.hpp>

#include <cute/tensor.hpp>

#include <cstdint>
#include <cstdio>

namespace {

// x(i, j) = 1000 i + j: each thread finds its coordinate from its index.
template <class TX>
__global__ void iota(TX x) {
  const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (idx >= cute::size(x)) return;
  const auto coord = cute::idx2crd(idx, cute::shape(x));  // (i, j), column-major order
  x(coord) =
      1000.0F * static_cast<float>(cute::get<0>(coord)) + static_cast<float>(cute::get<1>(coord));
}

// y = a * x over two tensors of one shape and any strides.
template <class TX, class TY>
__global__ void scale(TX x, TY y, float a) {
  const int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (idx < cute::size(x)) y(idx) = a * x(idx);
}

constexpr int kBlock = 256;

dim3 grid_for(std::int64_t n) { return dim3(static_cast<unsigned>((n + kBlock - 1) / kBlock)); }

}  // namespace

int main() {
  loom::Runtime rt;
  const std::int64_t rows = 300, cols = 500;
  auto x = rt.tensor<float>({rows, cols});
  auto y = rt.tensor<float>({cols, rows});  // receives 2 x, transposed
  loom::Graph g;
  g.add(loom::kernel_task(
      "iota", {}, {x},
      [=](loom::KernelContext& k) {
        auto cx = loom::cute_tensor<float, 2>(x);
        loom::launch(k, iota<decltype(cx)>, grid_for(x.numel()), dim3(kBlock), 0, cx);
      },
      [=] {
        auto cx = loom::cute_tensor<float, 2>(x);
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < cols; ++j)
            cx(i, j) = 1000.0F * static_cast<float>(i) + static_cast<float>(j);
      }));
  g.add(loom::kernel_task(
      "scale", {x}, {y},
      [=](loom::KernelContext& k) {
        auto cx = loom::cute_tensor<const float, 2>(x);
        auto cy = loom::cute_tensor<float, 2>(y.transpose(0, 1));  // strides (1, rows)
        loom::launch(k, scale<decltype(cx), decltype(cy)>, grid_for(x.numel()), dim3(kBlock), 0, cx,
                     cy, 2.0F);
      },
      [=] {
        auto cx = loom::cute_tensor<const float, 2>(x);
        auto cy = loom::cute_tensor<float, 2>(y.transpose(0, 1));
        for (int i = 0; i < cute::size(cx); ++i) cy(i) = 2.0F * cx(i);
      }));
  auto out = rt.tensor<float>({cols, rows}, loom::Memory::pageable);
  g.copy(y, out);
  rt.submit(g).wait();
  int bad = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const float expected = 2.0F * (1000.0F * static_cast<float>(i) + static_cast<float>(j));
      if (out.data_as<float>()[j * rows + i] != expected) ++bad;
    }
  }
  std::printf("cute_scale on the %s backend: %d of %lld elements wrong\n",
              rt.has_gpu() ? "CUDA" : "CPU", bad, static_cast<long long>(rows * cols));
  return bad == 0 ? 0 : 1;
}
