// Device and pinned pools, and every copy path, on a real GPU: fresh random
// data, destinations poisoned first, results checked byte for byte.
#include "support/gpu.hpp"

#include "cuda/cuda_upstreams.hpp"
#include "cuda/event.hpp"
#include "cuda/object_counts.hpp"
#include "cuda/stream.hpp"
#include "memory/caching_allocator.hpp"
#include "testing/spin.hpp"
#include "transfer/staging.hpp"

#include <loom/completion.hpp>
#include <loom/error.hpp>
#include <loom/runtime.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace {

using loom::Memory;

std::vector<std::uint8_t> random_bytes(std::size_t n) {
  auto rng = loom::test::random_engine();
  std::vector<std::uint8_t> v(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t r = rng();
    std::memcpy(v.data() + i, &r, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::uint8_t>(rng());
  return v;
}

void fill(const loom::Tensor& host, const std::vector<std::uint8_t>& bytes) {
  std::memcpy(host.data(), bytes.data(), bytes.size());
}

bool equals(const loom::Tensor& host, const std::vector<std::uint8_t>& bytes) {
  return std::memcmp(host.data(), bytes.data(), bytes.size()) == 0;
}

void poison_device(const loom::Tensor& t) {
  if (t.nbytes() > 0) LOOM_CUDA_CHECK(cudaMemset(t.data(), 0xA5, t.nbytes()));
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());  // loom's streams do not wait for the legacy one
}

class CopyPaths : public ::testing::TestWithParam<std::size_t> {};

// host(A) -> device -> device(strided back and forth) -> host(B), for every
// pair of host spaces: each hop is checked.
TEST_P(CopyPaths, RoundTripsThroughEverySpace) {
  LOOM_REQUIRE_GPU();
  const std::size_t n = GetParam();
  loom::RuntimeOptions options;
  options.staging_chunk_bytes = 1 << 20;  // several chunks even for modest sizes
  loom::Runtime rt(options);
  const auto data = random_bytes(n);
  const loom::Shape shape{static_cast<std::int64_t>(n)};
  for (Memory from : {Memory::pageable, Memory::pinned}) {
    for (Memory to : {Memory::pageable, Memory::pinned}) {
      SCOPED_TRACE(from.to_string() + " -> device -> " + to.to_string() + ", " + std::to_string(n) +
                   " bytes");
      auto src = rt.tensor<std::uint8_t>(shape, from);
      fill(src, data);
      auto dev = rt.tensor<std::uint8_t>(shape);
      poison_device(dev);
      rt.copy(src, dev).wait();
      auto dev2 = rt.tensor<std::uint8_t>(shape);
      poison_device(dev2);
      rt.copy(dev, dev2).wait();
      auto dst = rt.tensor<std::uint8_t>(shape, to);
      std::memset(dst.data(), 0x5A, n);
      rt.copy(dev2, dst).wait();
      EXPECT_TRUE(equals(dst, data));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, CopyPaths,
                         ::testing::Values(std::size_t{1}, std::size_t{4097},
                                           (std::size_t{4} << 20) + 3, std::size_t{64} << 20));

TEST(CopyGpu, ProvidedUserMemoryCopiesBothWays) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const std::size_t n = (std::size_t{9} << 20) + 17;
  const auto data = random_bytes(n);
  std::vector<std::uint8_t> mine = data;
  std::vector<std::uint8_t> back(n, 0);
  const loom::Shape shape{static_cast<std::int64_t>(n)};
  auto src = rt.provide(mine.data(), loom::DType::u8, shape, Memory::pageable);
  auto dst = rt.provide(back.data(), loom::DType::u8, shape, Memory::pageable);
  auto dev = rt.tensor<std::uint8_t>(shape);
  poison_device(dev);
  rt.copy(src, dev).wait();
  rt.copy(dev, dst).wait();
  EXPECT_EQ(back, data);
}

TEST(CopyGpu, StridedDeviceTensorsGatherThroughTheKernel) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto rng = loom::test::random_engine();
  const auto values = loom::test::random_floats(37 * 53, rng);
  auto host = rt.tensor<float>({37, 53}, Memory::pinned);
  std::memcpy(host.data(), values.data(), values.size() * sizeof(float));
  auto dev = rt.tensor<float>({37, 53});
  rt.copy(host, dev).wait();
  auto view = dev.transpose(0, 1).slice(0, 1, 50, 3);  // (17, 37), strided
  auto gathered = view.contiguous();
  EXPECT_FALSE(gathered.shares_storage_with(dev));
  auto out = rt.tensor<float>({17, 37}, Memory::pinned);
  rt.copy(gathered, out).wait();
  for (int i = 0; i < 17; ++i) {
    for (int j = 0; j < 37; ++j) {
      ASSERT_EQ(out.data_as<float>()[i * 37 + j],
                values[static_cast<std::size_t>(j * 53 + 1 + 3 * i)])
          << i << "," << j;
    }
  }
  EXPECT_THROW((void)rt.copy(view, rt.tensor<float>({17, 37}, Memory::pinned)),
               loom::InvalidArgument)
      << "a strided source across spaces must be made contiguous first";
}

TEST(CopyGpu, PageableUploadOf256MBReturnsAtOnceAndArrivesIntact) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const std::size_t n = std::size_t{256} << 20;
  const auto data = random_bytes(n);
  const loom::Shape shape{static_cast<std::int64_t>(n)};
  auto src = rt.tensor<std::uint8_t>(shape, Memory::pageable);
  fill(src, data);
  auto dev = rt.tensor<std::uint8_t>(shape);
  poison_device(dev);
  rt.copy(src, dev).wait();  // warm: staging buffers and workers exist now
  poison_device(dev);
  const auto t0 = std::chrono::steady_clock::now();
  auto done = rt.copy(src, dev);
  const auto t1 = std::chrono::steady_clock::now();
  const bool ready_at_return = done.ready();
  done.wait();
  const auto t2 = std::chrono::steady_clock::now();
  const double call_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  const double total_us = std::chrono::duration<double, std::micro>(t2 - t0).count();
  std::printf(
      "pageable 256 MB upload: caller blocked %.1f us, copy done after %.1f us (%.1f GB/s)\n",
      call_us, total_us, static_cast<double>(n) / total_us / 1e3);
  EXPECT_FALSE(ready_at_return) << "the call returned only after the copy";
  EXPECT_LT(call_us, 0.1 * total_us) << "the caller was blocked for a large part of the copy";
  auto back = rt.tensor<std::uint8_t>(shape, Memory::pinned);
  rt.copy(dev, back).wait();
  EXPECT_TRUE(equals(back, data));
}

TEST(PoolsGpu, DevicePoolReusesAndReportsStatistics) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const Memory dev = rt.default_memory();
  void* first = nullptr;
  {
    auto t = rt.tensor<float>({1 << 20});
    first = t.data();
    cudaPointerAttributes attributes{};
    LOOM_CUDA_CHECK(cudaPointerGetAttributes(&attributes, first));
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  }
  const auto before = rt.statistics(dev);
  for (int i = 0; i < 100; ++i) {
    auto t = rt.tensor<float>({1 << 20});
    EXPECT_EQ(t.data(), first);
  }
  const auto after = rt.statistics(dev);
  EXPECT_EQ(after.upstream_allocations, before.upstream_allocations);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 100U);
  EXPECT_GT(rt.release_cached(dev), 0U);
  EXPECT_EQ(rt.statistics(dev).reserved_bytes, 0U);
}

TEST(PoolsGpu, PinnedPoolHandsOutPageLockedMemory) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<std::uint8_t>({12345}, Memory::pinned);
  cudaPointerAttributes attributes{};
  LOOM_CUDA_CHECK(cudaPointerGetAttributes(&attributes, t.data()));
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  EXPECT_EQ(rt.statistics(Memory::pinned).allocations, 1U);
}

TEST(PoolsGpu, ImpossibleDeviceAllocationIsOutOfMemoryWithStatistics) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto keep = rt.tensor<float>({1000});
  try {
    (void)rt.tensor<std::uint8_t>({std::int64_t{1} << 50});
    FAIL() << "1 PiB should not fit";
  } catch (const loom::OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device 0 pool"), std::string::npos) << what;
    EXPECT_NE(what.find("reserved"), std::string::npos) << what;
    EXPECT_EQ(e.requested(), std::size_t{1} << 50);
  }
  EXPECT_NO_THROW((void)rt.tensor<float>({1000})) << "the pool is usable afterwards";
}

TEST(PoolsGpu, CrossStreamBlockWaitsForTheOtherStream) {
  LOOM_REQUIRE_GPU();
  auto events = std::make_shared<loom::detail::CudaEventSource>();
  loom::detail::CachingAllocator pool(loom::detail::make_device_upstream(0), events);
  loom::detail::Stream home(0, 0);
  loom::detail::Stream other(0, 0);
  const auto home_key = reinterpret_cast<std::uintptr_t>(home.view().native());
  loom::test::DeviceBuffer<std::uint8_t> big(std::size_t{1} << 30);
  auto a = pool.allocate(1 << 20, home_key);
  // Keep `other` busy for a while, using the block.
  for (int i = 0; i < 100; ++i) {
    LOOM_CUDA_CHECK(cudaMemsetAsync(big.data(), i, big.size(), other.view()));
  }
  LOOM_CUDA_CHECK(cudaMemsetAsync(a.ptr, 1, 1 << 20, other.view()));
  pool.record_stream(a, reinterpret_cast<std::uintptr_t>(other.view().native()));
  void* p = a.ptr;
  pool.deallocate(a);
  auto b = pool.allocate(1 << 20, home_key);
  const bool other_still_busy = !other.idle();
  if (other_still_busy) {
    EXPECT_NE(b.ptr, p) << "reused while the other stream still used it";
  }
  other.synchronize();
  auto c = pool.allocate(1 << 20, home_key);
  EXPECT_EQ(c.ptr, p) << "reused once the other stream finished";
  pool.deallocate(b);
  pool.deallocate(c);
  EXPECT_TRUE(other_still_busy) << "the test did not keep the other stream busy long enough";
}

TEST(PoolsGpu, SteadyStateCopiesAllocateNothingNew) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  const loom::Shape shape{3 << 20};
  auto host = rt.tensor<std::uint8_t>(shape, Memory::pageable);
  auto pinned = rt.tensor<std::uint8_t>(shape, Memory::pinned);
  std::memset(host.data(), 7, host.nbytes());
  const auto round = [&] {
    auto dev = rt.tensor<std::uint8_t>(shape);
    rt.copy(host, dev).wait();
    rt.copy(dev, pinned).wait();
  };
  round();
  round();
  const auto counts = loom::detail::cuda_object_counts();
  const auto device_stats = rt.statistics(rt.default_memory());
  const auto pinned_stats = rt.statistics(Memory::pinned);
  for (int i = 0; i < 20; ++i) round();
  const auto after = loom::detail::cuda_object_counts();
  EXPECT_EQ(after.streams_created, counts.streams_created);
  EXPECT_EQ(after.events_created, counts.events_created);
  EXPECT_EQ(rt.statistics(rt.default_memory()).upstream_allocations,
            device_stats.upstream_allocations);
  EXPECT_EQ(rt.statistics(Memory::pinned).upstream_allocations, pinned_stats.upstream_allocations);
}

// A staged copy that fails midway reports its error only once the chunks it
// had already queued are done: the caller may free the memory then, and the
// engine's pinned buffers are free. The chunks wait behind a 200 ms kernel
// on the stream the copy follows, so an early report would be seen.
TEST(StagingGpu, ACopyThatFailsMidwayReportsOnceItsQueuedChunksAreDone) {
  LOOM_REQUIRE_GPU();
  constexpr std::size_t chunk = 1 << 20;
  constexpr std::size_t bytes = 4 * chunk;
  auto pinned = std::make_shared<loom::detail::CachingAllocator>(
      loom::detail::make_pinned_upstream(), nullptr);
  loom::test::DeviceBuffer<float> counter(1);
  loom::test::DeviceBuffer<std::uint8_t> device(bytes);
  std::vector<std::uint8_t> host(bytes, 0x11);
  for (const bool upload : {true, false}) {
    SCOPED_TRACE(upload ? "upload" : "download");
    loom::detail::StagingEngine engine(0, pinned, chunk,
                                       1);  // one worker: chunks 0, 1, ... in order
    const loom::detail::Stream before(0, 0);
    loom::kernels::spin(counter.data(), 200'000, before.view());
    loom::detail::Event spun(0);
    spun.record(before.view());
    // Chunk 0 is queued (behind the kernel); chunk 1 fails.
    loom::detail::StagingEngine::fail_chunk_for_testing(1);
    const loom::Completion c =
        upload ? engine.upload(host.data(), device.data(), bytes, before.view(), nullptr)
               : engine.download(device.data(), host.data(), bytes, before.view(), nullptr);
    EXPECT_THROW(c.wait(), loom::CudaError);
    EXPECT_TRUE(spun.completed())
        << "the copy reported its failure while chunk 0 still waited behind the kernel";
    LOOM_CUDA_CHECK(cudaStreamSynchronize(before.view()));
  }
}

}  // namespace
