// Stream and event pools over real CUDA objects: a warmed-up steady state
// creates no stream and no event.
#include "support/gpu.hpp"

#include "cuda/event_pool.hpp"
#include "cuda/object_counts.hpp"
#include "cuda/stream_pool.hpp"

#include <set>
#include <vector>

namespace {

using loom::Priority;
using loom::detail::cuda_object_counts;
using loom::detail::EventPool;
using loom::detail::StreamPool;

TEST(StreamPoolGpu, PrioritiesMapOntoTheDeviceRange) {
  LOOM_REQUIRE_GPU();
  const auto p = loom::device_properties(0);
  StreamPool pool(0);
  EXPECT_EQ(pool.cuda_priority(Priority::low), p.stream_priority_least);
  EXPECT_EQ(pool.cuda_priority(Priority::high), p.stream_priority_greatest);
  EXPECT_LE(pool.cuda_priority(Priority::normal), p.stream_priority_least);
  EXPECT_GE(pool.cuda_priority(Priority::normal), p.stream_priority_greatest);
  auto high = pool.acquire(Priority::high);
  int actual = 0;
  LOOM_CUDA_CHECK(cudaStreamGetPriority(high->view(), &actual));
  EXPECT_EQ(actual, p.stream_priority_greatest);
}

TEST(StreamPoolGpu, LeasesAreDistinctStreams) {
  LOOM_REQUIRE_GPU();
  StreamPool pool(0);
  std::vector<StreamPool::Lease> leases;
  std::set<cudaStream_t> seen;
  for (int i = 0; i < 6; ++i) {
    leases.push_back(pool.acquire());
    seen.insert(leases.back()->view().native());
  }
  EXPECT_EQ(seen.size(), 6U);
  EXPECT_EQ(pool.in_use(), 6U);
}

TEST(PoolsGpu, SteadyStateCreatesNoStreamOrEvent) {
  LOOM_REQUIRE_GPU();
  StreamPool streams(0);
  EventPool events(0);
  constexpr int kStreams = 4;
  streams.reserve(Priority::normal, kStreams);
  streams.reserve(Priority::high, 1);
  events.reserve(2 * kStreams);
  loom::test::DeviceBuffer<float> scratch(1024);

  const auto before = cuda_object_counts();
  for (int iteration = 0; iteration < 200; ++iteration) {
    std::vector<StreamPool::Lease> leased;
    std::vector<EventPool::Lease> fired;
    for (int s = 0; s < kStreams; ++s) {
      leased.push_back(streams.acquire(Priority::normal));
      LOOM_CUDA_CHECK(cudaMemsetAsync(scratch.data(), s, 4096, leased.back()->view()));
      fired.push_back(events.acquire());
      fired.back()->record(leased.back()->view());
      fired.back()->make_wait(leased.front()->view());
    }
    auto urgent = streams.acquire(Priority::high);
    LOOM_CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0, 4096, urgent->view()));
    leased.front()->synchronize();
    urgent->synchronize();
  }
  const auto after = cuda_object_counts();
  EXPECT_EQ(after.streams_created, before.streams_created);
  EXPECT_EQ(after.events_created, before.events_created);
  EXPECT_EQ(streams.created(), static_cast<std::size_t>(kStreams + 1));
  EXPECT_EQ(events.created(), static_cast<std::size_t>(2 * kStreams));
}

}  // namespace
