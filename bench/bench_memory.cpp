// Memory: what a pool hit costs against cudaMalloc/cudaFree,
// cudaMallocAsync/cudaFreeAsync and cudaMallocHost/cudaFreeHost (anchors, in
// the same run); pageable host-to-device bandwidth and caller-blocked time
// through loom against a raw pageable cudaMemcpyAsync and a pinned one; and
// fragmentation under a random churn on 4 streams.
#include "cuda/check.hpp"
#include "cuda/cuda_upstreams.hpp"
#include "cuda/stream.hpp"
#include "memory/caching_allocator.hpp"

#include <loom/device.hpp>
#include <loom/runtime.hpp>

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

using loom::bench::Clock;
using loom::bench::median;
using loom::bench::ns_per_call;
using loom::bench::skip_without_gpu;

int calls_for(std::size_t bytes) { return bytes >= (std::size_t{8} << 20) ? 50 : 500; }

// Device pool hit (alloc + free) against cudaMalloc+cudaFree and
// cudaMallocAsync+cudaFreeAsync.
void BM_DevicePoolAllocFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto events = std::make_shared<loom::detail::CudaEventSource>();
  loom::detail::CachingAllocator pool(loom::detail::make_device_upstream(0), events);
  loom::detail::Stream stream(0, 0);
  const auto key = reinterpret_cast<std::uintptr_t>(stream.view().native());
  pool.deallocate(pool.allocate(bytes, key));  // warm
  double loom_ns = 0;
  for (auto _ : state) {
    loom_ns = ns_per_call([&] { pool.deallocate(pool.allocate(bytes, key)); }, 20000);
  }
  const int calls = calls_for(bytes);
  const double malloc_ns = ns_per_call(
      [&] {
        void* p = nullptr;
        LOOM_CUDA_CHECK(cudaMalloc(&p, bytes));
        LOOM_CUDA_CHECK(cudaFree(p));
      },
      calls);
  const double async_ns = ns_per_call(
      [&] {
        void* p = nullptr;
        LOOM_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream.view()));
        LOOM_CUDA_CHECK(cudaFreeAsync(p, stream.view()));
      },
      calls * 10);
  stream.synchronize();
  state.counters["loom_ns"] = loom_ns;
  state.counters["cudaMalloc_ns"] = malloc_ns;
  state.counters["cudaMallocAsync_ns"] = async_ns;
  state.counters["speedup_vs_malloc"] = malloc_ns / loom_ns;
  state.counters["speedup_vs_async"] = async_ns / loom_ns;
}
BENCHMARK(BM_DevicePoolAllocFree)->RangeMultiplier(16)->Range(256, 64 << 20)->Iterations(1);

void BM_PinnedPoolAllocFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  loom::detail::CachingAllocator pool(loom::detail::make_pinned_upstream(),
                                      std::make_shared<loom::detail::CudaEventSource>());
  pool.deallocate(pool.allocate(bytes));
  double loom_ns = 0;
  for (auto _ : state) {
    loom_ns = ns_per_call([&] { pool.deallocate(pool.allocate(bytes)); }, 20000);
  }
  const double host_ns = ns_per_call(
      [&] {
        void* p = nullptr;
        LOOM_CUDA_CHECK(cudaMallocHost(&p, bytes));
        LOOM_CUDA_CHECK(cudaFreeHost(p));
      },
      bytes >= (std::size_t{8} << 20) ? 5 : 20);
  state.counters["loom_ns"] = loom_ns;
  state.counters["cudaMallocHost_ns"] = host_ns;
  state.counters["speedup"] = host_ns / loom_ns;
}
BENCHMARK(BM_PinnedPoolAllocFree)->RangeMultiplier(16)->Range(1 << 20, 64 << 20)->Iterations(1);

// 256 MB pageable -> device: loom (staged, asynchronous) vs a raw pageable
// cudaMemcpyAsync vs a pinned cudaMemcpyAsync. Blocked = time until the call returned.
void BM_PageableUpload(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::size_t n = std::size_t{256} << 20;
  loom::Runtime rt;
  const loom::Shape shape{static_cast<std::int64_t>(n)};
  auto host = rt.tensor<std::uint8_t>(shape, loom::Memory::pageable);
  std::memset(host.data(), 3, n);
  auto pinned = rt.tensor<std::uint8_t>(shape, loom::Memory::pinned);
  std::memset(pinned.data(), 3, n);
  auto dev = rt.tensor<std::uint8_t>(shape);
  rt.copy(host, dev).wait();
  std::vector<double> loom_total;
  std::vector<double> loom_blocked;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto done = rt.copy(host, dev);
    const auto t1 = Clock::now();
    done.wait();
    const auto t2 = Clock::now();
    loom_blocked.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    loom_total.push_back(std::chrono::duration<double>(t2 - t0).count());
    state.SetIterationTime(loom_total.back());
  }
  loom::detail::Stream stream(0, 0);
  const auto raw = [&](const void* src) {
    std::vector<double> total;
    std::vector<double> blocked;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      LOOM_CUDA_CHECK(cudaMemcpyAsync(dev.data(), src, n, cudaMemcpyHostToDevice, stream.view()));
      const auto t1 = Clock::now();
      stream.synchronize();
      const auto t2 = Clock::now();
      blocked.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      total.push_back(std::chrono::duration<double>(t2 - t0).count());
    }
    return std::pair{median(total), median(blocked)};
  };
  const auto [pageable_s, pageable_blocked] = raw(host.data());
  const auto [pinned_s, pinned_blocked] = raw(pinned.data());
  const double gb = static_cast<double>(n) / 1e9;
  state.counters["loom_GBps"] = gb / median(loom_total);
  state.counters["loom_blocked_us"] = median(loom_blocked);
  state.counters["raw_pageable_GBps"] = gb / pageable_s;
  state.counters["raw_pageable_blocked_us"] = pageable_blocked;
  state.counters["pinned_GBps"] = gb / pinned_s;
  state.counters["ratio_vs_pinned"] = (gb / median(loom_total)) / (gb / pinned_s);
  // What bounds staging: the host's copy bandwidth into pinned memory with
  // as many threads as the staging engine has (8 on 16 cores). When this
  // moves between machines or runs, the staged upload moves with it.
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 2, 8);
  std::vector<double> memcpy_s;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    std::vector<std::thread> copiers;
    const std::size_t slice = n / static_cast<std::size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      copiers.emplace_back([&, t] {
        const std::size_t off = static_cast<std::size_t>(t) * slice;
        std::memcpy(static_cast<char*>(pinned.data()) + off,
                    static_cast<const char*>(host.data()) + off, slice);
      });
    }
    for (auto& c : copiers) c.join();
    memcpy_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  state.counters["host_memcpy_GBps"] = gb / median(memcpy_s);
}
BENCHMARK(BM_PageableUpload)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

// Random sizes (256 B .. 16 MB, log-uniform) on 4 streams: fill a live set
// of 512 blocks, then churn (free a random block, allocate a new one on a
// random stream, touch it with a small memset so the streams have work in
// flight). Fragmentation = reserved / in use at the end, and at the peak.
void BM_Churn(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  auto events = std::make_shared<loom::detail::CudaEventSource>();
  loom::detail::CachingAllocator pool(loom::detail::make_device_upstream(0), events);
  std::vector<std::unique_ptr<loom::detail::Stream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(std::make_unique<loom::detail::Stream>(0, 0));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> log_size(8.0, 24.0);
  std::vector<loom::detail::Allocation> live;
  constexpr std::size_t kLive = 512;
  constexpr int kOps = 100000;
  const auto allocate_one = [&] {
    const auto bytes = static_cast<std::size_t>(std::exp2(log_size(rng)));
    const auto s = streams[rng() % streams.size()]->view();
    live.push_back(pool.allocate(bytes, reinterpret_cast<std::uintptr_t>(s.native())));
    LOOM_CUDA_CHECK(cudaMemsetAsync(live.back().ptr, 0, std::min<std::size_t>(bytes, 256), s));
  };
  while (live.size() < kLive) allocate_one();
  double ns = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) {
      const std::size_t k = rng() % live.size();
      pool.deallocate(live[k]);
      live[k] = live.back();
      live.pop_back();
      allocate_one();
    }
    ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kOps;
  }
  for (auto& s : streams) s->synchronize();
  std::size_t requested = 0;
  for (auto& a : live) requested += a.size;
  const auto s = pool.statistics();
  state.counters["ns_per_free_alloc"] = ns;
  state.counters["fragmentation"] = s.fragmentation();
  state.counters["reserved_over_requested"] =
      static_cast<double>(s.reserved_bytes) / static_cast<double>(requested);
  state.counters["peak_fragmentation"] =
      static_cast<double>(s.peak_reserved_bytes) / static_cast<double>(s.peak_in_use_bytes);
  state.counters["hit_rate"] = s.cache_hit_rate();
  state.counters["cross_stream_reuses"] = static_cast<double>(s.cross_stream_reuses);
  for (auto& a : live) pool.deallocate(a);
}
BENCHMARK(BM_Churn)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
