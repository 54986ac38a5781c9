#include "support/gpu.hpp"

#include "core/task_context.hpp"
#include "cuda/event.hpp"
#include "cuda/object_counts.hpp"
#include "cuda/stream.hpp"

#include <loom/error.hpp>

#include <vector>

namespace {

using loom::detail::cuda_object_counts;
using loom::detail::Event;
using loom::detail::EventTiming;
using loom::detail::Stream;

TEST(StreamGpu, RaiiCreatesAndDestroysExactlyOnce) {
  LOOM_REQUIRE_GPU();
  const auto before = cuda_object_counts();
  {
    Stream a(0, 0);
    Stream b = std::move(a);
    Stream c(0, 0);
    c = std::move(b);
    EXPECT_NE(c.view().native(), cudaStream_t{});
    EXPECT_TRUE(c.idle());
  }
  const auto after = cuda_object_counts();
  EXPECT_EQ(after.streams_created - before.streams_created, 2U);
  EXPECT_EQ(after.streams_destroyed - before.streams_destroyed, 2U);
}

TEST(StreamGpu, StreamsAreNonBlockingAndKeepTheirPriority) {
  LOOM_REQUIRE_GPU();
  const auto p = loom::device_properties(0);
  Stream high(0, p.stream_priority_greatest);
  Stream low(0, p.stream_priority_least);
  EXPECT_EQ(high.cuda_priority(), p.stream_priority_greatest);
  EXPECT_EQ(low.cuda_priority(), p.stream_priority_least);
  unsigned flags = 0;
  LOOM_CUDA_CHECK(cudaStreamGetFlags(high.view(), &flags));
  EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
}

TEST(EventGpu, RecordOrdersWorkAcrossStreams) {
  LOOM_REQUIRE_GPU();
  Stream producer(0, 0);
  Stream consumer(0, 0);
  Event done(0);
  constexpr std::size_t kN = std::size_t{1} << 24;
  loom::test::DeviceBuffer<float> a(kN);
  loom::test::DeviceBuffer<float> b(kN);
  auto rng = loom::test::random_engine();
  const auto host = loom::test::random_floats(kN, rng);
  a.upload(host);
  b.poison();
  LOOM_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice,
                                  producer.view()));
  done.record(producer.view());
  done.make_wait(consumer.view());
  std::vector<float> back(kN);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(back.data(), b.data(), kN * sizeof(float), cudaMemcpyDeviceToHost,
                                  consumer.view()));
  consumer.synchronize();
  EXPECT_TRUE(done.completed());
  EXPECT_EQ(back, host);
}

TEST(EventGpu, TimingEventsMeasureAndOthersRefuse) {
  LOOM_REQUIRE_GPU();
  Stream s(0, 0);
  Event start(0, EventTiming::enabled);
  Event stop(0, EventTiming::enabled);
  loom::test::DeviceBuffer<float> a(1 << 20);
  start.record(s.view());
  LOOM_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, a.size() * sizeof(float), s.view()));
  stop.record(s.view());
  stop.synchronize();
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0F);
  Event plain(0);
  plain.record(s.view());
  plain.synchronize();
  EXPECT_THROW((void)plain.elapsed_ms_since(start), loom::InvalidArgument);
}

TEST(CudaErrorsGpu, AFailedCallNamesItsTaskAndLeavesTheContextUsable) {
  LOOM_REQUIRE_GPU();
  const loom::detail::TaskScope scope("upload weights");
  float* never = nullptr;
  try {
    // Copying into a null device pointer is an invalid argument, not a fault.
    LOOM_CUDA_CHECK(cudaMemcpy(never, &never, sizeof never, cudaMemcpyHostToDevice));
    FAIL() << "expected CudaError";
  } catch (const loom::CudaError& e) {
    EXPECT_EQ(e.task(), "upload weights");
    EXPECT_NE(e.call().find("cudaMemcpy"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("task 'upload weights'"), std::string::npos);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error was cleared";
  Stream s(0, 0);
  EXPECT_NO_THROW(s.synchronize());
}

TEST(CudaErrorsGpu, ImpossibleAllocationIsOutOfMemory) {
  LOOM_REQUIRE_GPU();
  void* p = nullptr;
  EXPECT_THROW(LOOM_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 50)), loom::OutOfMemory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
