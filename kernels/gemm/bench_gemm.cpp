// SGEMM: every variant against cuBLAS's SGEMM measured in the same run, with
// cuBLAS in its default math mode, which keeps FP32 math (TF32 is only used
// when asked for by CUBLAS_TF32_TENSOR_OP_MATH), as loom's kernels do.
//
// Arguments: variant, warp tile (warp_tiled only), m, n, k, layout (bit 0: A
// column-major, bit 1: B column-major, bit 2: loom's epilogue adds a bias
// along rows and applies relu, cuBLAS's product stays plain; bit 3: loom gets
// no workspace, so both-K-major products read A as it is instead of copying
// it M-major first). Counters: loom
// and cuBLAS TFLOP/s, their ratio (> 1: loom faster), and the largest
// difference from cuBLAS's result relative to the largest |C| (a check that
// the timed kernel is right; not kept with the epilogue).
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "gemm/sgemm.hpp"

#include <loom/device.hpp>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>

#include "common/convert.hpp"
#include "gemm/hgemm.hpp"

#include "bench_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using loom::kernels::SgemmArgs;
using loom::kernels::SgemmVariant;
using loom::kernels::SgemmWarpTile;

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::ostringstream what;
    what << call << " failed with cuBLAS status " << static_cast<int>(status);
    throw std::runtime_error(what.str());
  }
}

class Cublas {
 public:
  explicit Cublas(cudaStream_t stream) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    // FP32 math, no TF32: the default mode's SGEMM (checked: the mode reads back).
    check_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    cublasMath_t mode{};
    check_cublas(cublasGetMathMode(handle_, &mode), "cublasGetMathMode");
    if (mode != CUBLAS_DEFAULT_MATH) throw std::runtime_error("cuBLAS math mode not default");
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // Row-major C = alpha A B + beta C as cuBLAS's column-major C^T = B^T A^T.
  void sgemm(const SgemmArgs& p) {
    const bool a_col = p.a.row_stride == 1 && p.a.col_stride != 1;
    const bool b_col = p.b.row_stride == 1 && p.b.col_stride != 1;
    const auto lda = static_cast<int>(a_col ? p.a.col_stride : p.a.row_stride);
    const auto ldb = static_cast<int>(b_col ? p.b.col_stride : p.b.row_stride);
    check_cublas(cublasSgemm(handle_, b_col ? CUBLAS_OP_T : CUBLAS_OP_N,
                             a_col ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p.n),
                             static_cast<int>(p.m), static_cast<int>(p.k), &p.alpha, p.b.data, ldb,
                             p.a.data, lda, &p.beta, p.c.data, static_cast<int>(p.c.row_stride)),
                 "cublasSgemm");
  }

  // Row-major C (m x n, type of A or f32) = A B in bf16/f16 with f32
  // accumulation: what a user calls for a half-precision product.
  void gemm_ex(const loom::kernels::HgemmArgs& p) {
    const bool a_col = p.a.row_stride == 1 && p.a.col_stride != 1;
    const bool b_col = p.b.row_stride == 1 && p.b.col_stride != 1;
    const auto lda = static_cast<int>(a_col ? p.a.col_stride : p.a.row_stride);
    const auto ldb = static_cast<int>(b_col ? p.b.col_stride : p.b.row_stride);
    const auto type = [](loom::DType d) {
      return d == loom::DType::bf16 ? CUDA_R_16BF : d == loom::DType::f16 ? CUDA_R_16F : CUDA_R_32F;
    };
    check_cublas(
        cublasGemmEx(handle_, b_col ? CUBLAS_OP_T : CUBLAS_OP_N, a_col ? CUBLAS_OP_T : CUBLAS_OP_N,
                     static_cast<int>(p.n), static_cast<int>(p.m), static_cast<int>(p.k), &p.alpha,
                     p.b.data, type(p.b.dtype), ldb, p.a.data, type(p.a.dtype), lda, &p.beta,
                     const_cast<void*>(p.c.data), type(p.c.dtype), static_cast<int>(p.c.row_stride),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

class DeviceMatrix {
 public:
  explicit DeviceMatrix(std::size_t count) : count_(count) {
    LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(float)));
  }
  ~DeviceMatrix() { LOOM_CUDA_ASSERT(cudaFree(data_)); }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
  float* data() const { return data_; }
  void randomize(std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    std::vector<float> host(count_);
    for (auto& x : host) x = dist(rng);
    LOOM_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    std::vector<float> host(count_);
    LOOM_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  float* data_ = nullptr;
  std::size_t count_;
};

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  double scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

void BM_Sgemm(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const auto variant = static_cast<SgemmVariant>(state.range(0));
  const auto tile = static_cast<SgemmWarpTile>(state.range(1));
  const std::int64_t m = state.range(2), n = state.range(3), k = state.range(4);
  const bool a_col = (state.range(5) & 1) != 0;
  const bool b_col = (state.range(5) & 2) != 0;
  const bool epilogue = (state.range(5) & 4) != 0;  // a bias along rows and relu
  const bool no_workspace = (state.range(5) & 8) != 0;

  std::mt19937 rng(42);
  DeviceMatrix a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  DeviceMatrix bias(static_cast<std::size_t>(n));
  bias.randomize(rng);
  DeviceMatrix c(static_cast<std::size_t>(m * n)), c_ref(static_cast<std::size_t>(m * n));
  a.randomize(rng);
  b.randomize(rng);
  SgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {a.data(), a_col ? 1 : k, a_col ? m : 1};
  p.b = {b.data(), b_col ? 1 : n, b_col ? k : 1};
  p.c = {c.data(), n, 1};
  SgemmArgs ref = p;  // cuBLAS runs the plain product: the ratio shows the epilogue's cost
  ref.c = {c_ref.data(), n, 1};
  if (epilogue) {
    p.bias = {bias.data(), 0, 1};
    p.activation = loom::kernels::SgemmActivation::relu;
  }

  loom::detail::Stream stream(0, 0);
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  Cublas cublas(stream.view());
  const auto time_ms = [&](auto&& launch) {
    launch();  // warm-up, and a first timing to choose the repetitions
    start.record(stream.view());
    launch();
    stop.record(stream.view());
    stop.synchronize();
    const double once = stop.elapsed_ms_since(start);
    const int reps = std::clamp(static_cast<int>(200.0 / std::max(once, 1e-3)), 3, 50);
    start.record(stream.view());
    for (int i = 0; i < reps; ++i) launch();
    stop.record(stream.view());
    stop.synchronize();
    return stop.elapsed_ms_since(start) / reps;
  };
  const std::size_t workspace_bytes =
      no_workspace ? 0 : loom::kernels::sgemm_workspace_bytes(p, variant, tile);
  DeviceMatrix workspace(workspace_bytes / sizeof(float) + 1);
  const auto run_loom = [&] {
    loom::kernels::sgemm(p, stream.view(), variant, tile,
                         workspace_bytes > 0 ? workspace.data() : nullptr);
  };
  const auto run_cublas = [&] { cublas.sgemm(ref); };

  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = time_ms(run_loom);
    state.SetIterationTime(loom_ms * 1e-3);
  }
  const double cublas_ms = time_ms(run_cublas);
  stream.synchronize();
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double loom_tflops = flops / (loom_ms * 1e-3) / 1e12;
  const double cublas_tflops = flops / (cublas_ms * 1e-3) / 1e12;
  state.counters["loom_TFLOPs"] = loom_tflops;
  state.counters["cublas_TFLOPs"] = cublas_tflops;
  state.counters["ratio"] = loom_tflops / cublas_tflops;
  if (!epilogue) {
    state.counters["max_rel_diff"] = max_relative_difference(c.download(), c_ref.download());
  }
  std::ostringstream label;  // (GCC 12 warns falsely on chained string +)
  label << to_string(variant);
  if (variant == SgemmVariant::warp_tiled) label << " " << to_string(tile);
  label << " A " << (a_col ? "col" : "row") << " B " << (b_col ? "col" : "row");
  if (epilogue) label << " + bias, relu";
  if (no_workspace) label << ", no workspace";
  state.SetLabel(label.str());
}

// loom's and cuBLAS's TFLOP/s for an m x n x k product, and their ratio.
void report_tensor_core_tflops(benchmark::State& state, std::int64_t m, std::int64_t n,
                               std::int64_t k, double loom_ms, double cublas_ms) {
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["loom_TFLOPs"] = flops / (loom_ms * 1e-3) / 1e12;
  state.counters["cublas_TFLOPs"] = flops / (cublas_ms * 1e-3) / 1e12;
  state.counters["ratio"] = cublas_ms / loom_ms;
}

// bf16/f16 products on tensor cores against cublasGemmEx (f32 accumulation,
// C in the operands' type), TFLOP/s.
void BM_Hgemm(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const loom::DType dtype = state.range(0) == 0 ? loom::DType::bf16 : loom::DType::f16;
  const std::int64_t m = state.range(1), n = state.range(2), k = state.range(3);
  const bool a_col = (state.range(4) & 1) != 0;
  const bool b_col = (state.range(4) & 2) != 0;
  const auto variant = static_cast<loom::kernels::HgemmVariant>(state.range(5));
  const bool wgmma = variant == loom::kernels::HgemmVariant::wgmma ||
                     variant == loom::kernels::HgemmVariant::wgmma_cluster;
  if (wgmma && !loom::kernels::hgemm_wgmma_available()) {
    state.SkipWithError("wgmma needs a device of compute capability 9.0 and an sm_90a build");
    return;
  }
  const auto halves = [](std::int64_t count) { return static_cast<std::size_t>(count / 2 + 1); };
  DeviceMatrix a(halves(m * k)), b(halves(k * n)), c(halves(m * n)), c_ref(halves(m * n));
  std::mt19937 rng(42);
  for (DeviceMatrix* x : {&a, &b}) {
    // Random f32 bit patterns would hold NaNs as halves: values in [-1, 1] instead.
    std::vector<std::uint16_t> host(static_cast<std::size_t>(x == &a ? m * k : k * n));
    std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
    for (auto& v : host) {
      v = dtype == loom::DType::bf16 ? loom::kernels::f32_to_bf16_bits(dist(rng))
                                     : loom::kernels::f32_to_f16_bits(dist(rng));
    }
    LOOM_CUDA_CHECK(cudaMemcpy(x->data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  }
  loom::kernels::HgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {a.data(), a_col ? 1 : k, a_col ? m : 1, 0, dtype};
  p.b = {b.data(), b_col ? 1 : n, b_col ? k : 1, 0, dtype};
  p.c = {c.data(), n, 1, 0, dtype};
  loom::kernels::HgemmArgs ref = p;
  ref.c.data = c_ref.data();

  loom::detail::Stream stream(0, 0);
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  Cublas cublas(stream.view());
  const auto time_ms = [&](auto&& launch) {
    launch();
    start.record(stream.view());
    launch();
    stop.record(stream.view());
    stop.synchronize();
    const double once = stop.elapsed_ms_since(start);
    const int reps = std::clamp(static_cast<int>(300.0 / std::max(once, 1e-3)), 3, 100);
    start.record(stream.view());
    for (int i = 0; i < reps; ++i) launch();
    stop.record(stream.view());
    stop.synchronize();
    return stop.elapsed_ms_since(start) / reps;
  };
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = time_ms([&] { loom::kernels::hgemm(p, stream.view(), variant); });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  const double cublas_ms = time_ms([&] { cublas.gemm_ex(ref); });
  report_tensor_core_tflops(state, m, n, k, loom_ms, cublas_ms);
  // Both results widened: their largest difference against the largest value.
  const auto widened = [&](const DeviceMatrix& x) {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(m * n));
    LOOM_CUDA_CHECK(cudaMemcpy(bits.data(), x.data(), bits.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) {
      out[i] = dtype == loom::DType::bf16 ? loom::kernels::bf16_bits_to_f32(bits[i])
                                          : loom::kernels::f16_bits_to_f32(bits[i]);
    }
    return out;
  };
  state.counters["max_rel_diff"] = max_relative_difference(widened(c), widened(c_ref));
  std::ostringstream label;
  label << loom::to_string(dtype) << " " << loom::kernels::to_string(variant) << " A "
        << (a_col ? "col" : "row") << " B " << (b_col ? "col" : "row");
  state.SetLabel(label.str());
}

// variant: 0 automatic, 1 mma_sync, 2 simple, 3 wgmma, 4 wgmma_cluster
// (HgemmVariant's order).
void hgemm_arguments(benchmark::internal::Benchmark* b) {
  constexpr auto kWgmma = static_cast<std::int64_t>(loom::kernels::HgemmVariant::wgmma);
  static_assert(kWgmma == 3);
  for (std::int64_t s : {4096, 8192}) {
    for (int dtype : {0, 1}) b->Args({dtype, s, s, s, 0, 0});
  }
  for (int layout = 1; layout < 4; ++layout) b->Args({0, 8192, 8192, 8192, layout, 0});
  b->Args({0, 4096, 4096, 4096, 0, 2});  // the simple kernel, for scale
  // The portable mma_sync kernel (what sm_80 and up run without wgmma).
  constexpr std::int64_t kMmaSync = 1;
  for (int dtype : {0, 1}) b->Args({dtype, 4096, 4096, 4096, 0, kMmaSync});
  b->Args({0, 8192, 8192, 8192, 0, kMmaSync});
  b->Args({0, 4000, 4000, 4000, 0, 0});  // tails
  // The wgmma kernel (Hopper only): the target is a ratio of 0.9 at 4096^3
  // and 8192^3, every layout, and the tails.
  for (std::int64_t s : {4096, 8192}) {
    for (int dtype : {0, 1}) b->Args({dtype, s, s, s, 0, kWgmma});
  }
  for (int layout = 1; layout < 4; ++layout) b->Args({0, 8192, 8192, 8192, layout, kWgmma});
  b->Args({0, 4000, 4000, 4000, 0, kWgmma});
  // Where a tile's time goes: M = N = 4096 (512 tiles, about four waves)
  // over K, so that a fit of time against K separates what a tile costs
  // once (its epilogue, its pipeline's fill) from what each k step costs.
  for (std::int64_t k : {512, 1024, 2048, 8192}) b->Args({0, 4096, 4096, k, 0, kWgmma});
  // wgmma in clusters of two sharing B's tiles: both operands row-major, or
  // both column-major (layout 3, the transposed problem); the tails.
  constexpr auto kCluster = static_cast<std::int64_t>(loom::kernels::HgemmVariant::wgmma_cluster);
  for (std::int64_t s : {4096, 8192}) {
    for (int dtype : {0, 1}) b->Args({dtype, s, s, s, 0, kCluster});
  }
  b->Args({0, 8192, 8192, 8192, 3, kCluster});
  b->Args({0, 4000, 4000, 4000, 0, kCluster});
}

BENCHMARK(BM_Hgemm)
    ->ArgNames({"dtype", "m", "n", "k", "layout", "variant"})
    ->Apply(hgemm_arguments)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// wgmma's epilogue paths, bf16 operands (A and B row-major) at M = N = K:
// case 0 C bf16 (alpha alone: the 16-bit staged path), 1 C f32 (the general
// staged path), 2 C bf16 with an f32 bias [N] and gelu_tanh (the general
// path's whole epilogue). The anchor is cublasGemmEx without an epilogue,
// C bf16: the ratio says what the epilogue costs beyond a plain product.
void BM_HgemmEpilogue(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const int kind = static_cast<int>(state.range(0));
  const std::int64_t m = state.range(1), n = m, k = m;
  if (!loom::kernels::hgemm_wgmma_available()) {
    state.SkipWithError("wgmma needs a device of compute capability 9.0 and an sm_90a build");
    return;
  }
  const auto halves = [](std::int64_t count) { return static_cast<std::size_t>(count / 2 + 1); };
  DeviceMatrix a(halves(m * k)), b(halves(k * n)), c(static_cast<std::size_t>(m * n)),
      c_ref(halves(m * n)), bias(static_cast<std::size_t>(n));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  for (DeviceMatrix* x : {&a, &b}) {
    std::vector<std::uint16_t> host(static_cast<std::size_t>(x == &a ? m * k : k * n));
    for (auto& v : host) v = loom::kernels::f32_to_bf16_bits(dist(rng));
    LOOM_CUDA_CHECK(cudaMemcpy(x->data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  }
  std::vector<float> host_bias(static_cast<std::size_t>(n));
  for (auto& v : host_bias) v = dist(rng);
  LOOM_CUDA_CHECK(cudaMemcpy(bias.data(), host_bias.data(), host_bias.size() * sizeof(float),
                             cudaMemcpyHostToDevice));
  loom::kernels::HgemmArgs p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {a.data(), k, 1, 0, loom::DType::bf16};
  p.b = {b.data(), n, 1, 0, loom::DType::bf16};
  p.c = {c.data(), n, 1, 0, kind == 1 ? loom::DType::f32 : loom::DType::bf16};
  loom::kernels::HgemmArgs ref = p;
  ref.c = {c_ref.data(), n, 1, 0, loom::DType::bf16};
  if (kind == 2) {
    p.bias = {bias.data(), 0, 1, 0, loom::DType::f32};
    p.activation = loom::kernels::SgemmActivation::gelu_tanh;
  }
  loom::detail::Stream stream(0, 0);
  loom::detail::Event start(0, loom::detail::EventTiming::enabled);
  loom::detail::Event stop(0, loom::detail::EventTiming::enabled);
  Cublas cublas(stream.view());
  const auto time_ms = [&](auto&& launch) {
    launch();
    start.record(stream.view());
    for (int i = 0; i < 10; ++i) launch();
    stop.record(stream.view());
    stop.synchronize();
    return stop.elapsed_ms_since(start) / 10;
  };
  double loom_ms = 0;
  for (auto _ : state) {
    loom_ms = time_ms(
        [&] { loom::kernels::hgemm(p, stream.view(), loom::kernels::HgemmVariant::wgmma); });
    state.SetIterationTime(loom_ms * 1e-3);
  }
  const double cublas_ms = time_ms([&] { cublas.gemm_ex(ref); });
  report_tensor_core_tflops(state, m, n, k, loom_ms, cublas_ms);
  static constexpr const char* kKinds[] = {"C bf16", "C f32", "C bf16 + f32 bias, gelu_tanh"};
  state.SetLabel(std::string("wgmma bf16, ") + kKinds[kind] + " (anchor: cublasGemmEx, C bf16)");
}
BENCHMARK(BM_HgemmEpilogue)
    ->ArgNames({"kind", "mnk"})
    ->ArgsProduct({{0, 1, 2}, {4096, 8192}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

constexpr int kVariantCount = 5;
constexpr int kTileCount = 4;

void sgemm_arguments(benchmark::internal::Benchmark* b) {
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1024, 1024, 1024}, {4096, 4096, 4096}, {4000, 4000, 4000}, {3000, 5000, 1000}};
  for (const auto& s : shapes) {
    for (int v = 0; v < kVariantCount; ++v) {
      const auto variant = static_cast<SgemmVariant>(v);
      // The naive kernel at 4096^3 takes seconds a call: only the small shape.
      if (variant == SgemmVariant::naive && s[0] > 1024) continue;
      const int tiles = variant == SgemmVariant::warp_tiled ? kTileCount : 1;
      for (int t = 0; t < tiles; ++t) b->Args({v, t, s[0], s[1], s[2], 0});
    }
  }
  // The default variant's other operand layouts at 4096^3.
  const auto warp = static_cast<std::int64_t>(SgemmVariant::warp_tiled);
  for (int layout = 1; layout < 4; ++layout) {
    for (int t : {0, 1}) b->Args({warp, t, 4096, 4096, 4096, layout});
  }
  // Both operands K-major without the M-major copy of A, and at other sizes
  // both ways: what the copy costs and gains.
  for (int t : {0, 1}) b->Args({warp, t, 4096, 4096, 4096, 2 | 8});
  for (std::int64_t s : {2048, 8192}) {
    for (int layout : {2, 2 | 8}) b->Args({warp, 1, s, s, s, layout});
  }
  for (int layout : {2, 2 | 8}) b->Args({warp, 1, 4096, 1024, 4096, layout});
  // The fused epilogue (layout bit 2: a bias along rows and relu) at 4096^3
  // and at the step's first layer, against the plain product's time.
  b->Args({warp, 1, 4096, 4096, 4096, 4});
  b->Args({warp, 3, 256, 1024, 512, 0});
  b->Args({warp, 3, 256, 1024, 512, 4});
  // A classifier's step (samples/mlp_training): the skinny products (logits,
  // their weight gradient with A transposed, the hidden layer's gradient with
  // B transposed) and the wide ones, skinny against warp_tiled at 64 x 64.
  const auto skinny = static_cast<std::int64_t>(SgemmVariant::skinny);
  for (const auto& s : std::vector<std::vector<std::int64_t>>{
           {256, 10, 1024, 0}, {1024, 10, 256, 1}, {256, 1024, 10, 2}, {10, 1024, 256, 0}}) {
    b->Args({skinny, 0, s[0], s[1], s[2], s[3]});
    b->Args({warp, 3, s[0], s[1], s[2], s[3]});
  }
  for (const auto& s :
       std::vector<std::vector<std::int64_t>>{{256, 1024, 512, 0}, {512, 1024, 256, 1}}) {
    b->Args({warp, 3, s[0], s[1], s[2], s[3]});
  }
  // Small shapes bench_small_shapes times against PyTorch, in every variant
  // that can run them: the measurements behind the chooser's rules (a
  // variant a thread or warp too few for a shape reports its own time).
  const auto reg = static_cast<std::int64_t>(SgemmVariant::register_tiled);
  const auto naive = static_cast<std::int64_t>(SgemmVariant::naive);
  for (const auto& s : std::vector<std::vector<std::int64_t>>{{256, 1024, 10, 2},
                                                              {256, 48, 1024, 0},
                                                              {256, 64, 1024, 0},
                                                              {64, 1024, 1024, 0},
                                                              {64, 64, 8192, 0},
                                                              {128, 128, 16384, 0}}) {
    b->Args({naive, 0, s[0], s[1], s[2], s[3]});
    b->Args({reg, 0, s[0], s[1], s[2], s[3]});
    b->Args({skinny, 0, s[0], s[1], s[2], s[3]});
    for (int t = 0; t < kTileCount; ++t) b->Args({warp, t, s[0], s[1], s[2], s[3]});
  }
}

BENCHMARK(BM_Sgemm)
    ->ArgNames({"variant", "tile", "m", "n", "k", "layout"})
    ->Apply(sgemm_arguments)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
