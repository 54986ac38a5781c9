// The elementwise family on the GPU: every map x variant x dtype pair, and a
// fused chain against the same chain unfused and against one pass over the
// same bytes. The anchor is a device-to-device cudaMemcpyAsync moving the
// same bytes, timed in the same run.
//
// Counters (bytes count what is read plus what is written):
//   GBps       the kernel's achieved bandwidth
//   copy_GBps  the copy's, over the same bytes
//   ratio      GBps / copy_GBps (target >= 0.95 for the vectorized maps)
// For BM_FusedChain: fused_ms, unfused_ms (one kernel a map), one_pass_ms
// (one add map over the same inputs and output: the floor a fused chain
// can reach) and vs_one_pass = one_pass_ms / fused_ms (target >= 0.9).
//
// Each input is 2^28 bytes (64 Mi f32 or 128 Mi f16/bf16 elements), far
// beyond the L2, so every repetition streams from DRAM.
#include "cuda/check.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "elementwise/fusion.hpp"
#include "elementwise/maps.hpp"

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <string>
#include <vector>

namespace {

using loom::DType;
using loom::kernels::MapKind;
using loom::kernels::MapVariant;

constexpr std::size_t kInputBytes = std::size_t{1} << 28;
constexpr int kReps = 11;
constexpr int kInner = 4;

std::size_t esize(DType d) { return static_cast<std::size_t>(loom::bytes_for(d, 1)); }

class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) {
    LOOM_CUDA_CHECK(cudaMalloc(&data_, bytes));
    // 0x3C bytes: finite, normal values in f32 (~0.011), f16 (~1.06) and bf16 (~0.011).
    LOOM_CUDA_CHECK(cudaMemset(data_, 0x3C, bytes));
  }
  ~DeviceBytes() { LOOM_CUDA_ASSERT(cudaFree(data_)); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const noexcept { return data_; }

 private:
  void* data_ = nullptr;
};

/// Median time of one `launch` on `stream`, in ms: kReps timed repetitions
/// of kInner back-to-back launches each (so the host's launch cost hides
/// behind the device's work), after a warm-up.
class Timer {
 public:
  Timer()
      : stream_(0, 0),
        start_(0, loom::detail::EventTiming::enabled),
        stop_(0, loom::detail::EventTiming::enabled) {}
  loom::StreamView stream() const noexcept { return stream_.view(); }
  template <class F>
  double median_ms(F&& launch) {
    launch();
    stream_.synchronize();
    std::vector<double> times;
    for (int r = 0; r < kReps; ++r) {
      start_.record(stream_.view());
      for (int i = 0; i < kInner; ++i) launch();
      stop_.record(stream_.view());
      stop_.synchronize();
      times.push_back(stop_.elapsed_ms_since(start_) / kInner);
    }
    return loom::bench::median(times);
  }
  /// The anchor: a device-to-device copy moving `bytes` in total (half read, half written).
  double copy_ms(std::size_t bytes);

 private:
  loom::detail::Stream stream_;
  loom::detail::Event start_;
  loom::detail::Event stop_;
};

double Timer::copy_ms(std::size_t bytes) {
  const DeviceBytes src(bytes / 2);
  const DeviceBytes dst(bytes / 2);
  return median_ms([&] {
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(dst.get(), src.get(), bytes / 2, cudaMemcpyDeviceToDevice, stream_.view()));
  });
}

double gbps(std::size_t bytes, double ms) { return static_cast<double>(bytes) / (ms * 1e-3) / 1e9; }

void report(benchmark::State& state, std::size_t bytes, double ms, double copy_ms) {
  state.counters["ms"] = ms;
  state.counters["GBps"] = gbps(bytes, ms);
  state.counters["copy_GBps"] = gbps(bytes, copy_ms);
  state.counters["ratio"] = copy_ms / ms;
}

// Args: kind, input dtype, output dtype, variant, and log2 of the element
// count (0: an input of kInputBytes).
void BM_Map(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const auto kind = static_cast<MapKind>(state.range(0));
  const auto in = static_cast<DType>(state.range(1));
  const auto out = static_cast<DType>(state.range(2));
  const auto variant = static_cast<MapVariant>(state.range(3));
  const std::size_t n =
      state.range(4) > 0 ? std::size_t{1} << state.range(4) : kInputBytes / esize(in);
  const int inputs = loom::kernels::arity(kind);
  const std::size_t bytes = static_cast<std::size_t>(inputs) * n * esize(in) + n * esize(out);
  DeviceBytes x(n * esize(in));
  DeviceBytes y(n * esize(in));
  DeviceBytes z(inputs == 3 ? n * esize(in) : 0);
  DeviceBytes o(n * esize(out));
  // Values every map takes in range (0x3C bytes: 0.0117 in f32, 0.0114 in bf16 and
  // 1.06 in f16), so that no map runs on NaNs or denormals.
  LOOM_CUDA_CHECK(cudaMemset(x.get(), 0x3C, n * esize(in)));
  LOOM_CUDA_CHECK(cudaMemset(y.get(), 0x3C, n * esize(in)));
  Timer timer;
  const loom::kernels::MapScalars scalars{1.5F, -0.5F};
  double ms = 0;
  for (auto _ : state) {
    ms = timer.median_ms([&] {
      loom::kernels::map(kind, in, out, {x.get(), y.get(), o.get(), z.get()}, n, timer.stream(),
                         scalars, variant);
    });
    state.SetIterationTime(ms * 1e-3);
  }
  report(state, bytes, ms, timer.copy_ms(bytes));
  state.SetLabel(std::string(to_string(kind)) + " " + std::string(to_string(in)) + "->" +
                 std::string(to_string(out)) + " " + std::string(to_string(variant)));
}

void map_args(benchmark::internal::Benchmark* b) {
  const DType floats[] = {DType::f32, DType::f16, DType::bf16};
  // The maps of a training step (one kernel a dtype, the map an argument):
  // the vectorized kernel, f32 and bf16, at 2^30 elements (target: 0.95 of
  // a copy each; up to 16 GiB of operands and as much again for the copy).
  for (MapKind kind : loom::kernels::all_map_kinds()) {
    if (static_cast<int>(kind) <= static_cast<int>(MapKind::cast)) continue;
    for (DType d : {DType::f32, DType::bf16}) {
      b->Args({static_cast<int>(kind), static_cast<int>(d), static_cast<int>(d),
               static_cast<int>(MapVariant::vectorized), 30});
    }
  }
  for (MapKind kind : {MapKind::add, MapKind::mul, MapKind::axpby, MapKind::relu,
                       MapKind::gelu_tanh, MapKind::cast}) {
    for (DType in : floats) {
      for (DType out : floats) {
        if (!loom::kernels::map_supports(kind, in, out)) continue;
        for (MapVariant v : {MapVariant::naive, MapVariant::grid_stride, MapVariant::vectorized}) {
          b->Args({static_cast<int>(kind), static_cast<int>(in), static_cast<int>(out),
                   static_cast<int>(v), 0});
        }
      }
    }
  }
}
BENCHMARK(BM_Map)
    ->ArgNames({"kind", "in", "out", "variant", "log2n"})
    ->Apply(map_args)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Where the output lies against the input (DRAM's mapping of addresses to
// channels and banks): exp over 2^30 elements (arg 0: f32, 1: bf16) with its
// input and output in one allocation, the output `arg 1` KiB past the
// input's end. The copy anchor moves the same bytes between the same two
// addresses. A fraction of a copy that moves with the offset is placement,
// not the kernel.
void BM_MapPlacement(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const DType d = state.range(0) == 0 ? DType::f32 : DType::bf16;
  const std::size_t n = std::size_t{1} << 30;
  const std::size_t part = n * esize(d);
  const std::size_t gap = static_cast<std::size_t>(state.range(1)) << 10;
  DeviceBytes both(2 * part + gap);
  auto* x = static_cast<unsigned char*>(both.get());
  auto* o = x + part + gap;
  Timer timer;
  double ms = 0;
  for (auto _ : state) {
    ms = timer.median_ms([&] {
      loom::kernels::map(MapKind::exp, d, d, {x, nullptr, o, nullptr}, n, timer.stream());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const double copy_ms = timer.median_ms([&] {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(o, x, part, cudaMemcpyDeviceToDevice, timer.stream()));
  });
  report(state, 2 * part, ms, copy_ms);
  state.SetLabel(std::string("exp ") + std::string(to_string(d)) + ", output " +
                 std::to_string(state.range(1)) + " KiB past the input");
}
BENCHMARK(BM_MapPlacement)
    ->ArgsProduct({{0, 1}, {0, 64, 1028, 1 << 20}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The strided path: an add whose first input is read through a transpose
// (arg 1) or, for the cost of the index arithmetic alone, contiguous data
// through the strided kernel at rank 2 (arg 0: rows of a wider matrix, which
// cannot be merged into one dimension).
void BM_MapStrided(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const bool transpose = state.range(0) == 1;
  const std::int64_t side = 8192;  // 8192^2 f32 = 2^28 bytes
  const auto n = static_cast<std::size_t>(side * side);
  DeviceBytes x(n * sizeof(float) + 64);
  DeviceBytes y(n * sizeof(float) + 64);
  DeviceBytes o(n * sizeof(float) + 64);
  loom::kernels::MapGeometry g;
  g.rank = 2;
  g.shape = {side, transpose ? side : side - 1};
  g.out_strides = {side, 1};
  g.x_strides = transpose ? decltype(g.x_strides){1, side} : decltype(g.x_strides){side, 1};
  g.y_strides = {side, 1};
  const std::size_t bytes = 3 * static_cast<std::size_t>(g.numel()) * sizeof(float);
  Timer timer;
  double ms = 0;
  for (auto _ : state) {
    ms = timer.median_ms([&] {
      loom::kernels::map_strided(MapKind::add, DType::f32, DType::f32, {x.get(), y.get(), o.get()},
                                 g, timer.stream());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  report(state, bytes, ms, timer.copy_ms(bytes));
  state.SetLabel(transpose ? "add f32, x transposed" : "add f32, rank-2 rows (no transpose)");
}
BENCHMARK(BM_MapStrided)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// gelu(relu(1.5 x - 0.5 y) * x) over inputs and output of one dtype (arg 0):
// four maps. Fused: one kernel, 2 reads + 1 write an element. Unfused: four
// kernels through a temporary of that dtype. One pass: an add over the same
// inputs and output (the same dtype, so the same bytes), the least any
// kernel of this shape can take.
void BM_FusedChain(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const auto d = static_cast<DType>(state.range(0));
  const std::size_t n = kInputBytes / esize(d);
  const std::size_t bytes = 3 * n * esize(d);
  using Op = loom::kernels::FusedOpcode;
  loom::kernels::FusedProgram p;
  p.inputs = {d, d};
  p.output = d;
  p.constants = {1.5F, -0.5F};
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1}, {Op::axpby, 0, 1, 0},
            {Op::relu, 2},          {Op::mul, 3, 0},        {Op::gelu_tanh, 4}};
  DeviceBytes x(n * esize(d));
  DeviceBytes y(n * esize(d));
  DeviceBytes o(n * esize(d));
  DeviceBytes t(n * sizeof(float));
  Timer timer;
  const loom::kernels::FusedKernel fused(p);
  fused.prepare();  // the one-time NVRTC compile stays out of the timing
  double fused_ms = 0;
  for (auto _ : state) {
    fused_ms = timer.median_ms([&] {
      fused.launch({x.get(), y.get()}, o.get(), n, timer.stream());
    });
    state.SetIterationTime(fused_ms * 1e-3);
  }
  const auto s = timer.stream();
  // Unfused: four kernels through a temporary of dtype d, as a framework
  // running one kernel an op would (for 16-bit dtypes each map rounds, so the
  // results differ from the fused chain's in the last bits; the bytes are the point).
  const double unfused_ms = timer.median_ms([&] {
    loom::kernels::map(MapKind::axpby, d, d, {x.get(), y.get(), t.get()}, n, s, {1.5F, -0.5F});
    loom::kernels::map(MapKind::relu, d, d, {t.get(), nullptr, t.get()}, n, s);
    loom::kernels::map(MapKind::mul, d, d, {t.get(), x.get(), t.get()}, n, s);
    loom::kernels::map(MapKind::gelu_tanh, d, d, {t.get(), nullptr, o.get()}, n, s);
  });
  const double one_pass_ms = timer.median_ms([&] {
    loom::kernels::map(MapKind::add, d, d, {x.get(), y.get(), o.get()}, n, s);
  });
  report(state, bytes, fused_ms, timer.copy_ms(bytes));
  state.counters["fused_ms"] = fused_ms;
  state.counters["unfused_ms"] = unfused_ms;
  state.counters["one_pass_ms"] = one_pass_ms;
  state.counters["vs_one_pass"] = one_pass_ms / fused_ms;
  state.counters["vs_unfused"] = unfused_ms / fused_ms;
  state.SetLabel("gelu(relu(axpby(x, y)) * x) " + std::string(to_string(d)));
}
BENCHMARK(BM_FusedChain)
    ->Arg(static_cast<int>(DType::f32))
    ->Arg(static_cast<int>(DType::f16))
    ->Arg(static_cast<int>(DType::bf16))
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// A linear layer's forward epilogue done apart from its matmul, as fused_map
// runs it: h [rows, cols] plus a bias row (broadcast, stride 0), giving two
// outputs in one pass: relu(h + b) and the mask (h + b > 0) the backward
// reads. Arg 0: dtype. The strided form (the broadcast row needs it), 2^26
// elements; bytes: h read, two outputs written (the bias row is noise).
void BM_FusedTwoOutputsBroadcast(benchmark::State& state) {
  if (loom::bench::skip_without_gpu(state)) return;
  const auto d = static_cast<DType>(state.range(0));
  const std::int64_t rows = 16384;
  const std::int64_t cols = 4096;
  const auto n = static_cast<std::size_t>(rows * cols);
  using Op = loom::kernels::FusedOpcode;
  loom::kernels::FusedProgram p;
  p.inputs = {d, d};
  p.constants = {0.0F};
  p.code = {{Op::input, -1, -1, 0}, {Op::input, -1, -1, 1},    {Op::add, 0, 1},
            {Op::relu, 2},          {Op::constant, -1, -1, 0}, {Op::gt, 2, 4}};
  p.outputs = {{3, d}, {5, d}};
  p.strided = true;
  loom::kernels::FusedGeometry g;
  g.rank = 2;
  g.shape[0] = rows;
  g.shape[1] = cols;
  g.strides[0][0] = cols;  // h
  g.strides[0][1] = 1;
  g.strides[1][0] = 0;  // the bias row
  g.strides[1][1] = 1;
  for (int o = 2; o < 4; ++o) {
    g.strides[o][0] = cols;
    g.strides[o][1] = 1;
  }
  DeviceBytes h(n * esize(d));
  DeviceBytes bias(static_cast<std::size_t>(cols) * esize(d));
  DeviceBytes act(n * esize(d));
  DeviceBytes mask(n * esize(d));
  Timer timer;
  const loom::kernels::FusedKernel fused(p);
  fused.prepare();
  double ms = 0;
  for (auto _ : state) {
    ms = timer.median_ms([&] {
      fused.launch({h.get(), bias.get()}, {act.get(), mask.get()}, g, timer.stream());
    });
    state.SetIterationTime(ms * 1e-3);
  }
  const std::size_t bytes = 3 * n * esize(d);
  report(state, bytes, ms, timer.copy_ms(bytes));
  state.SetLabel("relu(h + b) and (h + b > 0), b a broadcast row, " + std::string(to_string(d)));
}
BENCHMARK(BM_FusedTwoOutputsBroadcast)
    ->Arg(static_cast<int>(DType::f32))
    ->Arg(static_cast<int>(DType::bf16))
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
