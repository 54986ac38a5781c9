// The runtime under abuse, on the CUDA backend: a cancelled run keeps its
// place in the order (device-op and host followers, and runs submitted after
// it ended), ordering by memory for two wrappers of one device buffer, and
// the shutdown protocol with device work in flight and tensors that outlive
// the runtime.
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>
#include "testing/spin_op.hpp"

#include <gtest/gtest.h>

#include "support/gpu.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using loom::DType;
using loom::Graph;
using loom::Memory;

constexpr std::int64_t kN = 1 << 16;

// The device tensor's values, read with a plain synchronous cudaMemcpy: it
// does not wait for loom's streams, so it sees whatever is there now.
std::vector<float> peek(const loom::Tensor& t) {
  std::vector<float> host(static_cast<std::size_t>(t.numel()));
  LOOM_CUDA_CHECK(
      cudaMemcpy(host.data(), t.data(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

bool all_equal(const std::vector<float>& v, float x) {
  return std::all_of(v.begin(), v.end(), [x](float y) { return y == x; });
}

void fill_now(loom::Runtime& rt, const loom::Tensor& t, float value) {
  Graph g;
  g.add(loom::ops::fill(t, value));
  rt.submit(g).wait();
}

// C (a slow host task), D (a 50 ms kernel, then fill 2) and E (fill 3) touch
// one tensor, submitted in that order; a follower is queued after E, then E
// is cancelled while it still waits for D. The follower must see 2.
TEST(CancelledRunKeepsItsPlaceGpu, ADeviceFollowerSeesTheWorkBeforeIt) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({kN});
  auto out = rt.tensor<float>({kN});
  fill_now(rt, t, -1.0F);
  fill_now(rt, out, -5.0F);
  Graph c, d, e, f;
  c.host("C slow", [] { std::this_thread::sleep_for(100ms); }, {}, {t});
  d.add(loom::testing::spin(t, 50000), {.name = "D spin"});
  d.add(loom::ops::fill(t, 2.0F), {.name = "D fill"});
  e.add(loom::ops::fill(t, 3.0F), {.name = "E"});
  f.add(loom::ops::scale_copy(t, out, 1.0F), {.name = "F"});
  auto rc = rt.submit(c);
  auto rd = rt.submit(d);
  auto re = rt.submit(e);
  auto rf = rt.submit(f);
  re.cancel();
  rf.wait();
  EXPECT_THROW(re.wait(), loom::Cancelled);
  rd.wait();
  const auto seen = peek(out);
  EXPECT_TRUE(all_equal(seen, 2.0F)) << "F overtook C and D: out[0] = " << seen[0];
}

TEST(CancelledRunKeepsItsPlaceGpu, AHostFollowerAndALaterRunSeeTheWorkBeforeIt) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto t = rt.tensor<float>({kN});
  fill_now(rt, t, -1.0F);
  Graph d, e, h;
  d.add(loom::testing::spin(t, 50000), {.name = "D spin"});
  d.add(loom::ops::fill(t, 2.0F), {.name = "D fill"});
  e.add(loom::ops::fill(t, 3.0F), {.name = "E"});
  std::vector<float> seen_by_host;
  h.host("H reads t", [&] { seen_by_host = peek(t); }, {t}, {});
  // E is cancelled before it starts: it waits for D to be enqueued, which
  // waits for a slow host task.
  Graph c;
  c.host("C slow", [] { std::this_thread::sleep_for(100ms); }, {}, {t});
  auto rc = rt.submit(c);
  auto rd = rt.submit(d);
  auto re = rt.submit(e);
  auto rh = rt.submit(h);
  re.cancel();
  rh.wait();
  EXPECT_TRUE(all_equal(seen_by_host, 2.0F))
      << "the host follower overtook D: t[0] = " << seen_by_host[0];
  EXPECT_THROW(re.wait(), loom::Cancelled);
  // Once E is over, a run submitted after it must still follow D's kernel.
  Graph c2, d2, e2, later;
  c2.host("C2 slow", [] { std::this_thread::sleep_for(100ms); }, {}, {t});
  d2.add(loom::testing::spin(t, 50000), {.name = "D2 spin"});
  d2.add(loom::ops::fill(t, 4.0F), {.name = "D2 fill"});
  e2.add(loom::ops::fill(t, 5.0F), {.name = "E2"});
  std::vector<float> seen_later;
  later.host("later", [&] { seen_later = peek(t); }, {t}, {});
  auto rc2 = rt.submit(c2);
  auto rd2 = rt.submit(d2);
  auto re2 = rt.submit(e2);
  re2.cancel();
  EXPECT_THROW(re2.wait(), loom::Cancelled);
  rt.submit(later).wait();
  EXPECT_TRUE(all_equal(seen_later, 4.0F))
      << "a run after the cancelled one overtook D2: t[0] = " << seen_later[0];
  rd2.wait();
}

TEST(OrderByMemoryGpu, RunsOverTwoWrappersOfOneDeviceBufferAreOrdered) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto owner = rt.tensor<float>({kN});
  fill_now(rt, owner, -1.0F);
  auto a = rt.provide(owner.data(), DType::f32, {kN}, Memory::on_device(0));
  auto b = rt.provide(static_cast<float*>(owner.data()) + kN / 2, DType::f32, {kN / 2},
                      Memory::on_device(0));
  auto out = rt.tensor<float>({kN / 2});
  Graph writer, reader;
  writer.add(loom::testing::spin(a, 50000));
  writer.add(loom::ops::fill(a, 4.0F));
  reader.add(loom::ops::scale_copy(b, out, 1.0F));
  auto w = rt.submit(writer);
  rt.submit(reader).wait();
  w.wait();
  const auto seen = peek(out);
  EXPECT_TRUE(all_equal(seen, 4.0F))
      << "the reader of the second wrapper overtook the writer: " << seen[0];
}

TEST(ShutdownProtocolGpu, TasksSubmitWhileTheRuntimeIsDestroyedAndTensorsOutliveIt) {
  LOOM_REQUIRE_GPU();
  std::atomic<int> nested{0};
  loom::Tensor survivor;
  loom::Future outer;
  {
    auto rt = std::make_unique<loom::Runtime>();
    loom::Runtime* p = rt.get();
    survivor = rt->tensor<float>({kN});
    auto t = rt->tensor<float>({kN});
    Graph g;
    g.add(loom::testing::spin(t, 20000));
    g.add(loom::ops::scale_copy(t, survivor, 1.0F));  // the survivor is used on a run's stream
    // The nested run has data of its own: one over t would be ordered after
    // this run, which waits for it (a deadlock by design).
    auto own = rt->tensor<float>({kN});
    g.host("submits during shutdown",
           [&, p, own] {
             std::this_thread::sleep_for(50ms);
             Graph h;
             h.add(loom::ops::fill(own, 9.0F));
             p->submit(h).wait();
             ++nested;
           },
           {t}, {});
    outer = rt->submit(g);
    rt.reset();
  }
  EXPECT_NO_THROW(outer.wait());
  EXPECT_EQ(nested.load(), 1);
  // Freed after the runtime's streams are gone: no stream of it is named again.
  survivor = loom::Tensor();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(ShutdownProtocolGpu, ARuntimeDestroyedByItsOwnContinuationIsHandedOff) {
  LOOM_REQUIRE_GPU();
  auto rt = std::make_shared<loom::Runtime>();
  std::weak_ptr<loom::Runtime> watch = rt;
  auto t = rt->tensor<float>({kN});
  std::promise<void> released;
  auto main_released = released.get_future().share();
  Graph g;
  g.add(loom::testing::spin(t, 10000));
  rt->submit(g).then([rt, t, main_released](const loom::Future&) {
    Graph h;
    h.add(loom::ops::fill(t, 1.0F));
    rt->submit(h).wait();
    main_released.wait();
  });
  rt.reset();
  released.set_value();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!watch.expired() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watch.expired());
}

}  // namespace
