// loom quickstart: report the machine, then add two vectors of 2^24 floats
// on the GPU through loom's core layer (pooled stream, events, the catalogue's
// vector-add kernel) and check the result against the CPU reference. Where
// there is no GPU it says why and runs the CPU reference alone.
//
// This sample predates the graph API (which will let it become the real-time
// image pipeline); it uses loom's internal core layer, not public headers.
#include "cuda/check.hpp"
#include "cuda/event_pool.hpp"
#include "cuda/stream_pool.hpp"
#include "elementwise/vector_add.hpp"

#include <loom/loom.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

namespace {

constexpr std::size_t kElements = std::size_t{1} << 24;

struct DeviceArray {
  float* data = nullptr;
  explicit DeviceArray(std::size_t n) {
    LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float)));
  }
  ~DeviceArray() { LOOM_CUDA_ASSERT(cudaFree(data)); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

std::size_t count_mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] == want[i] ? 0 : 1;
  return bad;
}

int run_on_gpu(const std::vector<float>& a, const std::vector<float>& b,
               const std::vector<float>& expected) {
  loom::detail::StreamPool streams(0);
  loom::detail::EventPool timers(0, loom::detail::EventTiming::enabled);
  auto stream = streams.acquire(loom::Priority::normal);
  auto start = timers.acquire();
  auto stop = timers.acquire();
  const std::size_t bytes = kElements * sizeof(float);
  DeviceArray da(kElements);
  DeviceArray db(kElements);
  DeviceArray dc(kElements);
  LOOM_CUDA_CHECK(cudaMemcpy(da.data, a.data(), bytes, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemcpy(db.data, b.data(), bytes, cudaMemcpyHostToDevice));
  LOOM_CUDA_CHECK(cudaMemset(dc.data, 0xFF, bytes));  // poison: NaN everywhere

  loom::kernels::vector_add(da.data, db.data, dc.data, kElements, stream->view());  // warm-up
  start->record(stream->view());
  loom::kernels::vector_add(da.data, db.data, dc.data, kElements, stream->view());
  stop->record(stream->view());
  stop->synchronize();
  const float ms = stop->elapsed_ms_since(*start);

  std::vector<float> c(kElements);
  LOOM_CUDA_CHECK(cudaMemcpy(c.data(), dc.data, bytes, cudaMemcpyDeviceToHost));
  const std::size_t bad = count_mismatches(c, expected);
  std::printf("GPU vector add (%s): %zu elements in %.3f ms, %.0f GB/s, %zu mismatches\n",
              to_string(loom::kernels::kVectorAddDefault).data(), kElements, ms,
              3.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9, bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main() {
  try {
    std::printf("%s", loom::device_report().c_str());
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    std::vector<float> a(kElements);
    std::vector<float> b(kElements);
    for (std::size_t i = 0; i < kElements; ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
    std::vector<float> expected(kElements);
    const auto t0 = std::chrono::steady_clock::now();
    loom::kernels::vector_add_reference(a.data(), b.data(), expected.data(), kElements);
    const double cpu_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("CPU reference vector add: %zu elements in %.3f ms\n", kElements, cpu_ms);

    if (!loom::cuda_availability().available) {
      std::printf("no GPU (%s): ran the CPU reference only\n",
                  loom::cuda_availability().reason.c_str());
      return 0;
    }
    return run_on_gpu(a, b, expected);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
