// An outside program with its own CUDA kernel, which loom runs as an op: a
// loom::Op subclass whose run_cuda() launches the kernel on the stream loom
// gives it (loom::cuda_stream) and whose run_cpu() does the same on the host.
// Without a GPU the program still builds, says why it runs on the CPU
// backend, and checks the result there, also through a CuTe view
// (loom/cute.hpp, linked as loom::cute). Exits 0 when the result is right.
#include <loom/cuda_interop.hpp>
#include <loom/cute.hpp>  // through loom::cute, which brings CUTLASS's headers
#include <loom/loom.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

__global__ void axpy_kernel(float a, const float* x, float* y, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

// y += a * x, over contiguous f32 tensors of one shape.
class Axpy final : public loom::Op {
 public:
  Axpy(float a, loom::Tensor x, loom::Tensor y) : a_(a), x_(std::move(x)), y_(std::move(y)) {}

  std::string_view name() const noexcept override { return "axpy"; }
  std::vector<loom::Tensor> reads() const override { return {x_, y_}; }
  std::vector<loom::Tensor> writes() const override { return {y_}; }
  void validate() const override {
    if (x_.dtype() != loom::DType::f32 || y_.dtype() != loom::DType::f32 ||
        !(x_.shape() == y_.shape()) || !x_.is_contiguous() || !y_.is_contiguous()) {
      throw loom::InvalidArgument("axpy: expected contiguous f32 tensors of one shape, got " +
                                  x_.describe() + " and " + y_.describe());
    }
  }
  void run_cpu() const override {
    const float* x = x_.data_as<float>();
    float* y = y_.data_as<float>();
    for (std::int64_t i = 0; i < x_.numel(); ++i) y[i] += a_ * x[i];
  }
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    const std::int64_t n = x_.numel();
    constexpr int threads = 256;
    const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
    const loom::StreamView stream(loom::cuda_stream(ctx));
    axpy_kernel<<<blocks, threads, 0, stream>>>(a_, x_.data_as<float>(), y_.data_as<float>(), n);
  }

 private:
  float a_;
  loom::Tensor x_;
  loom::Tensor y_;
};

}  // namespace

int main() {
  try {
    loom::Runtime rt;  // the CUDA backend where there is a GPU (LOOM_DEVICE may say otherwise)
    if (rt.has_gpu()) {
      std::printf("CUDA backend on %s: axpy_kernel runs on loom's stream\n",
                  loom::device_properties(0).name.c_str());
    } else {
      const std::string why = loom::cuda_availability().available
                                  ? std::string("the CPU backend was asked for")
                                  : loom::cuda_availability().reason;
      std::printf("no GPU part (%s): axpy runs on the CPU backend\n", why.c_str());
    }

    const std::int64_t n = std::int64_t{1} << 20;
    std::vector<float> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n), 1.0F);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
    auto hx = rt.provide(x.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto hy = rt.provide(y.data(), loom::DType::f32, {n}, loom::Memory::pageable);
    auto dx = rt.tensor<float>({n});  // device memory with a GPU, else host memory
    auto dy = rt.tensor<float>({n});
    loom::Graph g;
    g.copy(hx, dx);
    g.copy(hy, dy);
    g.add(std::make_shared<Axpy>(2.0F, dx, dy));
    g.copy(dy, hy);
    rt.submit(g).wait();

    std::size_t wrong = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      wrong += y[i] != 1.0F + 2.0F * static_cast<float>(i % 7);
    std::printf("axpy over %lld floats: %zu wrong\n", static_cast<long long>(n), wrong);
    // The result again through a CuTe view of the host tensor (loom/cute.hpp).
    const auto cy = loom::cute_tensor<const float, 1>(hy);
    const bool cute_agrees = cute::size(cy) == n && cy(7) == y[7] && cy(n - 1) == y.back();
    std::printf("CuTe view of the result: %s\n", cute_agrees ? "agrees" : "DISAGREES");
    return wrong == 0 && cute_agrees ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
