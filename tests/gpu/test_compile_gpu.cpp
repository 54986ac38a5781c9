// Compiled graphs on the CUDA backend: replay equals eager (random DAGs of
// in-place kernels, fan-out lanes, chains, host tasks and host copies
// between segments), the arena never aliases live intermediates, rebinding,
// zero pool allocations and zero stream or event creations during replay,
// workspaces kept from capture, and an op that breaks capture named at compile.
#include "support/compile_graphs.hpp"
#include "support/gpu.hpp"
#include "testing/spin_op.hpp"

#include "compile/memory_plan.hpp"
#include "cuda/object_counts.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using loom::Memory;

using loom::test::read_back;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_no_live_aliasing(const loom::Graph& g) {
  const auto& xs = g.intermediates();
  const auto uses = loom::detail::storage_uses(g, xs);
  const loom::detail::HappensBefore order(g);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const auto a0 = reinterpret_cast<std::uintptr_t>(xs[i].data());
    const auto a1 = a0 + xs[i].nbytes();
    for (std::size_t j = i + 1; j < xs.size(); ++j) {
      const auto b0 = reinterpret_cast<std::uintptr_t>(xs[j].data());
      const auto b1 = b0 + xs[j].nbytes();
      if (a1 <= b0 || b1 <= a0) continue;
      EXPECT_TRUE(order.all_before(uses[i], uses[j]) || order.all_before(uses[j], uses[i]))
          << "intermediates " << i << " and " << j << " share bytes while both are live";
    }
  }
}

struct Counts {
  loom::detail::CudaObjectCounts objects;
  std::uint64_t device_allocations;
  std::uint64_t pinned_allocations;
  std::uint64_t pageable_allocations;
};

Counts counts(loom::Runtime& rt) {
  return {loom::detail::cuda_object_counts(), rt.statistics(rt.default_memory()).allocations,
          rt.statistics(Memory::pinned).allocations, rt.statistics(Memory::pageable).allocations};
}

// Copies a tensor through scratch memory from ctx.workspace().
class ThroughWorkspace final : public loom::Op {
 public:
  ThroughWorkspace(loom::Tensor in, loom::Tensor out) : in_(std::move(in)), out_(std::move(out)) {}
  std::string_view name() const noexcept override { return "through_workspace"; }
  std::vector<loom::Tensor> reads() const override { return {in_}; }
  std::vector<loom::Tensor> writes() const override { return {out_}; }
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    void* scratch = ctx.workspace(in_.nbytes());
    const cudaStream_t s = loom::cuda_stream(ctx);
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(scratch, in_.data(), in_.nbytes(), cudaMemcpyDeviceToDevice, s));
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(out_.data(), scratch, in_.nbytes(), cudaMemcpyDeviceToDevice, s));
  }

 private:
  loom::Tensor in_, out_;
};

// Claims to be capturable but synchronizes its stream.
class Synchronizer final : public loom::Op {
 public:
  explicit Synchronizer(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "synchronizer"; }
  std::vector<loom::Tensor> reads() const override { return {t_}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void run_cuda(const loom::ExecutionContext& ctx) const override {
    LOOM_CUDA_CHECK(cudaStreamSynchronize(loom::cuda_stream(ctx)));
  }

 private:
  loom::Tensor t_;
};

}  // namespace

TEST(CompileGpu, ReplayEqualsEagerOnRandomDagsOfInPlaceKernels) {
  LOOM_REQUIRE_GPU();
  std::mt19937_64 rng(loom::test::fresh_seed());
  loom::Runtime rt;
  bool shared = false;
  for (int round = 0; round < 4; ++round) {
    auto twins = loom::test::random_twins(rt, rng, 300, 4099);
    rt.submit(twins.eager).wait();
    auto exe = rt.compile(twins.planned);
    EXPECT_EQ(exe.segments(), 1U) << "device tasks only: one segment";
    EXPECT_EQ(exe.captured_tasks(), twins.planned.size());
    shared = shared || exe.arena_bytes() < exe.intermediate_bytes();
    expect_no_live_aliasing(twins.planned);
    for (int replay = 0; replay < 3; ++replay) {
      // Poison the outputs: a replay that did not run would leave them.
      for (const auto& o : twins.planned_outputs)
        rt.submit([&] {
            loom::Graph p;
            p.add(loom::ops::fill(o, std::nanf("")));
            return p;
          }())
            .wait();
      exe.run().wait();
      for (std::size_t o = 0; o < twins.eager_outputs.size(); ++o) {
        EXPECT_TRUE(same_bits(read_back(rt, twins.planned_outputs[o]),
                              read_back(rt, twins.eager_outputs[o])))
            << "round " << round << ", replay " << replay << ", output " << o;
      }
    }
  }
  EXPECT_TRUE(shared) << "no random graph let two intermediates share memory";
}

TEST(CompileGpu, EightIndependentLanesReplayAsOneGraph) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 31;
  auto x = rt.tensor<float>({n});
  std::vector<loom::Tensor> outs;
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.5F));
  for (int lane = 0; lane < 8; ++lane) {
    loom::Tensor prev = x;
    for (int i = 0; i < 10; ++i) {
      auto next = g.intermediate(loom::DType::f32, {n});
      g.add(loom::ops::scale_copy(prev, next, 2.0F));
      prev = next;
    }
    outs.push_back(rt.tensor<float>({n}));
    g.add(loom::ops::vector_add(prev, x, outs.back()));
  }
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.segments(), 1U);
  EXPECT_LT(exe.arena_bytes(), exe.intermediate_bytes());
  expect_no_live_aliasing(g);
  for (int replay = 0; replay < 3; ++replay) {
    exe.run().wait();
    for (const auto& o : outs) {
      for (float v : read_back(rt, o)) ASSERT_EQ(v, 1.5F * 1024.0F + 1.5F);
    }
  }
}

TEST(CompileGpu, ReplaysAreOrderedAndFollowEagerRuns) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({1});
  loom::Graph zero;
  zero.add(loom::ops::fill(x, 0.0F));
  rt.submit(zero).wait();
  loom::Graph g;
  for (int i = 0; i < 100; ++i) g.add(loom::testing::spin(x, i % 10 == 0 ? 20 : 0));  // a chain
  auto exe = rt.compile(g);
  std::vector<loom::Future> runs;
  for (int i = 0; i < 10; ++i) runs.push_back(exe.run());  // no wait between them
  (void)rt.submit(g);                                      // eager, after them through x
  for (int i = 0; i < 10; ++i) runs.push_back(exe.run());
  for (auto& r : runs) r.wait();
  rt.synchronize();
  EXPECT_EQ(read_back(rt, x)[0], 2100.0F);
}

TEST(CompileGpu, HostTasksAndHostCopiesStayBetweenSegments) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 4097;
  auto x = rt.tensor<float>({n});
  auto y = rt.tensor<float>({n});
  auto pinned = rt.tensor<float>({n}, Memory::pinned);
  auto pageable = rt.tensor<float>({n}, Memory::pageable);
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {n});
  g.add(loom::ops::fill(x, 2.0F));
  g.add(loom::ops::scale_copy(x, tmp, 3.0F));
  g.copy(tmp, pinned);  // stream-ordered: captured at the end of the first segment
  g.host("add one",
         [pinned] {
           for (std::int64_t i = 0; i < n; ++i) pinned.data_as<float>()[i] += 1.0F;
         },
         {pinned}, {pinned});
  g.copy(pinned, pageable);
  g.copy(pageable, y);  // staged: between segments
  g.add(loom::ops::vector_add(y, x, y));
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.segments(), 2U);
  EXPECT_EQ(exe.captured_tasks(), 4U);
  for (int replay = 0; replay < 3; ++replay) {
    loom::Graph poison;
    poison.add(loom::ops::fill(y, std::nanf("")));
    rt.submit(poison).wait();
    exe.run().wait();
    for (float v : read_back(rt, y)) ASSERT_EQ(v, 9.0F);
  }
}

// Uploads from pinned memory, a strided device copy (the gather kernel) and
// the download are captured with the kernels: one segment, and each replay
// sees the host input as it is then.
TEST(CompileGpu, StreamCopiesAreCapturedWithTheKernels) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t rows = 301, cols = 257;
  auto host_in = rt.tensor<float>({rows, cols}, Memory::pinned);
  auto host_out = rt.tensor<float>({cols, rows}, Memory::pinned);
  auto x = rt.tensor<float>({rows, cols});
  auto xt = rt.tensor<float>({cols, rows});
  loom::Graph g;
  g.copy(host_in, x, {.name = "upload"});
  g.add(loom::ops::scale_copy(x, x, 2.0F));
  g.copy(x.transpose(0, 1), xt, {.name = "transpose"});  // strided source: the gather kernel
  g.copy(xt, host_out, {.name = "download"});
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.segments(), 1U);
  EXPECT_EQ(exe.captured_tasks(), 4U);
  std::mt19937 rng(static_cast<unsigned>(loom::test::fresh_seed()));
  std::uniform_real_distribution<float> dist(-8.0F, 8.0F);
  for (int replay = 0; replay < 4; ++replay) {
    float* in = host_in.data_as<float>();
    for (std::int64_t i = 0; i < rows * cols; ++i) in[i] = dist(rng);
    std::fill_n(host_out.data_as<float>(), rows * cols, std::nanf(""));
    exe.run().wait();
    const float* out = host_out.data_as<float>();
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(out[c * rows + r], 2.0F * in[r * cols + c]) << "replay " << replay;
  }
}

TEST(CompileGpu, ReplayCreatesNoStreamOrEventAndAllocatesNothing) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 1000;
  auto x = rt.tensor<float>({n});
  auto y = rt.tensor<float>({n});
  auto pinned = rt.tensor<float>({n}, Memory::pinned);
  loom::Graph g;
  auto a = g.intermediate(loom::DType::f32, {n});
  auto b = g.intermediate(loom::DType::f32, {n});
  g.add(loom::ops::fill(x, 1.0F));
  g.add(loom::ops::scale_copy(x, a, 2.0F));
  g.add(std::make_shared<ThroughWorkspace>(a, b));  // scratch given at capture
  g.copy(b, pinned);
  g.host("check", [] {}, {pinned}, {});
  g.add(loom::ops::vector_add(b, x, y));
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.segments(), 2U);
  const auto burst = [&] {
    std::vector<loom::Future> runs;
    for (int i = 0; i < 20; ++i) runs.push_back(exe.run());
    for (auto& r : runs) r.wait();
  };
  burst();  // the executor's event pool grows to what a burst needs
  burst();
  const Counts before = counts(rt);
  burst();
  burst();
  const Counts after = counts(rt);
  EXPECT_EQ(after.objects.streams_created, before.objects.streams_created);
  EXPECT_EQ(after.objects.events_created, before.objects.events_created);
  EXPECT_EQ(after.device_allocations, before.device_allocations);
  EXPECT_EQ(after.pinned_allocations, before.pinned_allocations);
  EXPECT_EQ(after.pageable_allocations, before.pageable_allocations);
  for (float v : read_back(rt, y)) ASSERT_EQ(v, 3.0F);
  for (int i = 0; i < n; ++i) ASSERT_EQ(pinned.data_as<float>()[i], 2.0F);
}

TEST(CompileGpu, AnOpThatBreaksCaptureIsNamedAtCompile) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  auto x = rt.tensor<float>({16});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.0F));
  g.add(std::make_shared<Synchronizer>(x), {.name = "sync in the middle"});
  g.add(loom::ops::scale_copy(x, x, 2.0F));
  try {
    (void)rt.compile(g);
    FAIL() << "compile captured a synchronizing op";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "sync in the middle") << e.what();
  }
  // The runtime, and capture, still work.
  loom::Graph ok;
  ok.add(loom::ops::fill(x, 4.0F));
  ok.add(loom::ops::scale_copy(x, x, 0.5F));
  rt.compile(ok).run().wait();
  EXPECT_EQ(read_back(rt, x)[0], 2.0F);
  EXPECT_NO_THROW(rt.submit(g).wait()) << "an eager submit still runs it";
}

TEST(CompileGpu, RebindingRunsOnOtherTensorsAndRefusesAnotherMemorySpace) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  constexpr std::int64_t n = 1000003;
  auto in = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {n});
  g.add(loom::ops::scale_copy(in, tmp, 3.0F));
  g.add(loom::ops::vector_add(tmp, in, out));  // out = 4 * in
  auto exe = rt.compile(g);
  loom::Graph init;
  auto in2 = rt.tensor<float>({n});
  auto out2 = rt.tensor<float>({n});
  init.add(loom::ops::fill(in, 1.0F));
  init.add(loom::ops::fill(in2, 2.5F));
  init.add(loom::ops::fill(out2, std::nanf("")));
  rt.submit(init).wait();
  exe.run({{in, in2}, {out, out2}}).wait();
  for (float v : read_back(rt, out2)) ASSERT_EQ(v, 10.0F);
  loom::Graph refill;  // the copy in wrote the placeholder
  refill.add(loom::ops::fill(in, 1.0F));
  rt.submit(refill).wait();
  exe.run().wait();
  for (float v : read_back(rt, out)) ASSERT_EQ(v, 4.0F);
  try {
    (void)exe.run({{in, rt.tensor<float>({n}, Memory::pinned)}});
    FAIL() << "bound a device placeholder to pinned memory";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("memory space"), std::string::npos) << e.what();
  }
}
