// Compiled graphs on the CPU: the memory planner alone (hand-made lifetimes),
// the cutting into segments, and Executable on the CPU backend (replay equals
// eager, the arena shares and never aliases live intermediates, rebinding,
// refusals named by task).

#include "compile/compile_plan.hpp"
#include "compile/memory_plan.hpp"
#include "core/storage.hpp"
#include "core/tensor_access.hpp"
#include "sched/prepare.hpp"
#include "support/compile_graphs.hpp"
#include "support/cpu.hpp"
#include "support/seed.hpp"
#include "testing/spin_op.hpp"

#include <loom/error.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::test::cpu;

// A host-only op that records nothing; for graphs that are planned, not run.
class Touch final : public loom::Op {
 public:
  Touch(std::vector<loom::Tensor> r, std::vector<loom::Tensor> w, bool capturable = true)
      : r_(std::move(r)), w_(std::move(w)), capturable_(capturable) {}
  std::string_view name() const noexcept override { return "touch"; }
  std::vector<loom::Tensor> reads() const override { return r_; }
  std::vector<loom::Tensor> writes() const override { return w_; }
  bool capturable() const noexcept override { return capturable_; }
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext&) const override {}

 private:
  std::vector<loom::Tensor> r_, w_;
  bool capturable_;
};

loom::OpPtr touch(std::vector<loom::Tensor> r, std::vector<loom::Tensor> w) {
  return std::make_shared<Touch>(std::move(r), std::move(w));
}

std::pair<std::uintptr_t, std::uintptr_t> bytes_of(const loom::Tensor& t) {
  const auto lo = reinterpret_cast<std::uintptr_t>(t.data());
  return {lo, lo + t.nbytes()};
}

// Every two intermediates whose bytes overlap are used one wholly before the other.
void expect_no_live_aliasing(const loom::Graph& g) {
  const auto& xs = g.intermediates();
  const auto uses = loom::detail::storage_uses(g, xs);
  const loom::detail::HappensBefore order(g);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    for (std::size_t j = i + 1; j < xs.size(); ++j) {
      const auto [a0, a1] = bytes_of(xs[i]);
      const auto [b0, b1] = bytes_of(xs[j]);
      if (a1 <= b0 || b1 <= a0) continue;
      EXPECT_TRUE(order.all_before(uses[i], uses[j]) || order.all_before(uses[j], uses[i]))
          << "intermediates " << i << " and " << j << " share bytes while both are live";
    }
  }
}

std::vector<float> values_of(const loom::Tensor& t) {
  const float* p = t.data_as<float>();
  return {p, p + t.numel()};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(MemoryPlanner, PacksDisjointLifetimesIntoTheSameBytes) {
  // Four requests; 0-1 and 2-3 may share, nothing else.
  const std::vector<std::size_t> sizes{1000, 1000, 300, 200};
  const auto may_share = [](std::size_t i, std::size_t j) {
    return (i / 2 == j / 2) && i != j;  // hand-made: pairs whose lifetimes do not meet
  };
  const auto plan = loom::detail::plan_arena(sizes, may_share, 256);
  EXPECT_EQ(plan.requested_bytes, 1024U + 1024U + 512U + 256U);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 1024U + 512U);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % 256, 0U);
    for (std::size_t j = 0; j < sizes.size(); ++j) {
      if (i == j || may_share(i, j)) continue;
      const bool apart = plan.offsets[i] + sizes[i] <= plan.offsets[j] ||
                         plan.offsets[j] + sizes[j] <= plan.offsets[i];
      EXPECT_TRUE(apart) << i << " and " << j << " overlap";
    }
  }
}

TEST(MemoryPlanner, NothingSharedWhenEverythingIsLive) {
  const std::vector<std::size_t> sizes{10, 20, 30};
  const auto plan = loom::detail::plan_arena(
      sizes, [](std::size_t, std::size_t) { return false; }, 64);
  EXPECT_EQ(plan.arena_bytes, plan.requested_bytes);
  EXPECT_EQ(plan.arena_bytes, 3U * 64U);
}

TEST(MemoryPlanner, HappensBeforeFollowsPathsNotTaskOrder) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  loom::Graph g;
  auto a = g.add(touch({}, {x}));  // 0
  auto b = g.add(touch({}, {y}));  // 1: independent of a
  auto c = g.add(touch({x}, {}));  // 2: after a
  g.host("h", [] {}, {y}, {});     // 3: after b
  auto d = g.add(touch({}, {}));   // 4
  c.precede(d);
  const loom::detail::HappensBefore order(g);
  EXPECT_TRUE(order.before(a.index, c.index));
  EXPECT_TRUE(order.before(a.index, d.index));
  EXPECT_FALSE(order.before(a.index, b.index));
  EXPECT_FALSE(order.before(b.index, a.index));
  EXPECT_TRUE(order.before(b.index, 3));
  EXPECT_FALSE(order.before(c.index, a.index));
  EXPECT_TRUE(order.all_before({a.index}, {c.index, d.index}));
  EXPECT_FALSE(order.all_before({a.index, b.index}, {c.index}));
}

TEST(MemoryPlanner, AChainOfIntermediatesNeedsTwoSlots) {
  loom::Graph g;
  std::vector<loom::Tensor> xs;
  for (int i = 0; i < 8; ++i) xs.push_back(g.intermediate(loom::DType::f32, {1000}));
  g.add(touch({}, {xs[0]}));
  for (int i = 1; i < 8; ++i)
    g.add(touch({xs[static_cast<std::size_t>(i - 1)]}, {xs[static_cast<std::size_t>(i)]}));
  const auto plan = loom::detail::plan_tensors(g, xs, 256);
  EXPECT_EQ(plan.requested_bytes, 8U * 4096U);
  EXPECT_EQ(plan.arena_bytes, 2U * 4096U);
}

TEST(MemoryPlanner, FanOutBranchesDoNotShare) {
  // x feeds four independent branches, each through its own intermediate:
  // the branches may run at once, so their intermediates must not share.
  loom::Graph g;
  auto x = g.intermediate(loom::DType::f32, {100});
  g.add(touch({}, {x}));
  std::vector<loom::Tensor> branch;
  for (int i = 0; i < 4; ++i) {
    branch.push_back(g.intermediate(loom::DType::f32, {100}));
    g.add(touch({x}, {branch.back()}));
    g.add(touch({branch.back()}, {}));
  }
  std::vector<loom::Tensor> all{x};
  all.insert(all.end(), branch.begin(), branch.end());
  const auto plan = loom::detail::plan_tensors(g, all, 256);
  EXPECT_EQ(plan.arena_bytes, 5U * 512U);
}

namespace {

// A chain of `n` touches of `x`, with every `every`-th task (when `every` is
// not 0) also writing a fresh intermediate that the next task reads.
loom::Graph long_chain(const loom::Tensor& x, int n, int every) {
  loom::Graph g;
  for (int i = 0; i < n; ++i) {
    if (every > 0 && i % every == 0 && i + 1 < n) {
      auto t = g.intermediate(loom::DType::f32, {256});
      g.add(touch({x}, {x, t}));
      g.add(touch({x, t}, {x}));
      ++i;
    } else {
      g.add(touch({x}, {x}));
    }
  }
  return g;
}

}  // namespace

TEST(MemoryPlanner, OrderingCostsNothingWithoutIntermediatesAndLittleWithFew) {
  loom::Runtime rt(cpu(1));
  auto x = rt.tensor<float>({4});
  const loom::Graph none = long_chain(x, 40000, 0);
  EXPECT_EQ(loom::detail::plan_tensors(none, none.intermediates()).order_bytes, 0U);
  // Four intermediates, eight tasks using them, 40,000 tasks: a bitset of
  // one word for a few tasks at a time, not 40,000² bits.
  const loom::Graph few = long_chain(x, 40000, 10000);
  ASSERT_EQ(few.intermediates().size(), 4U);
  const auto plan = loom::detail::plan_tensors(few, few.intermediates());
  EXPECT_LE(plan.order_bytes, 8U * 8U + 3U * 8U);
  EXPECT_EQ(plan.arena_bytes, 1024U);  // one after the other: all in the same bytes
}

TEST(MemoryPlanner, OrderingAmongSomeTasksAgreesWithOrderingAmongAll) {
  // Random DAGs: reachability among a random subset, against the full table.
  std::mt19937 rng(static_cast<std::mt19937::result_type>(loom::test::fresh_seed()));
  for (int round = 0; round < 20; ++round) {
    loom::Graph g;
    const int n = 40 + round * 7;
    std::vector<loom::TaskId> ids;
    for (int i = 0; i < n; ++i) {
      ids.push_back(g.add(touch({}, {})));
      for (int e = 0; e < 2 && i > 0; ++e) {
        const auto from = static_cast<std::size_t>(rng() % static_cast<unsigned>(i));
        if (rng() % 3 != 0) ids[from].precede(ids.back());
      }
    }
    std::vector<std::uint32_t> some;
    for (std::uint32_t t = 0; t < g.size(); ++t) {
      if (rng() % 4 == 0) some.push_back(t);
    }
    const loom::detail::HappensBefore all(g);
    const loom::detail::HappensBefore part(g, some);
    for (auto u : some) {
      for (auto v : some) {
        EXPECT_EQ(part.before(u, v), all.before(u, v))
            << "round " << round << ": " << u << "->" << v;
      }
    }
    EXPECT_LE(part.peak_bytes(), all.peak_bytes());
  }
}

TEST(CompileSteps, DeviceRunsBetweenHostTasksBecomeSegments) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  loom::Graph g;
  g.add(touch({}, {x}), {.name = "d0"});
  g.add(touch({x}, {x}), {.name = "d1"});
  g.host("h", [] {}, {x}, {x});
  g.add(touch({x}, {x}), {.name = "d2"});
  g.add(touch({x}, {x}), {.name = "d3"});
  g.add(touch({x}, {x}), {.name = "d4"});
  std::vector<loom::detail::Placement> placement(g.size(), loom::detail::Placement::device);
  placement[2] = loom::detail::Placement::host;
  const auto prepared = loom::detail::make_prepared(g, placement, 2);
  const auto steps = loom::detail::compile_steps(*prepared);
  ASSERT_EQ(steps.size(), 3U);
  EXPECT_TRUE(steps[0].segment);
  EXPECT_EQ(steps[0].tasks, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_FALSE(steps[1].segment);
  EXPECT_EQ(steps[1].name, "h");
  EXPECT_TRUE(steps[2].segment);
  EXPECT_EQ(steps[2].tasks.size(), 3U);
  EXPECT_NE(steps[2].name.find("d2 .. d4"), std::string::npos) << steps[2].name;

  loom::Graph replay;
  loom::detail::append_steps(replay, *prepared, steps, [&](std::size_t i) {
    std::vector<loom::Tensor> r, w;
    loom::detail::step_accesses(*prepared, steps[i], r, w);
    return touch(r, w);
  });
  ASSERT_EQ(replay.size(), 3U);
  EXPECT_NO_THROW(replay.validate());
  EXPECT_TRUE(replay.has_edge(loom::TaskId(0), loom::TaskId(1)));
  EXPECT_TRUE(replay.has_edge(loom::TaskId(1), loom::TaskId(2)));
}

TEST(CompileSteps, StreamCopiesJoinTheSegmentPeerAndStagedCopiesDoNot) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  loom::Graph g;
  g.add(touch({}, {x}), {.name = "d0"});
  g.copy(x, y, {.name = "device copy"});
  g.add(touch({y}, {y}), {.name = "d1"});
  g.copy(y, x, {.name = "staged copy"});
  g.add(touch({x}, {x}), {.name = "d2"});
  std::vector<loom::detail::Placement> placement(g.size(), loom::detail::Placement::device);
  placement[3] = loom::detail::Placement::async;  // what a pageable copy gets
  const auto prepared = loom::detail::make_prepared(g, placement, 2);
  const auto steps = loom::detail::compile_steps(*prepared);
  ASSERT_EQ(steps.size(), 3U);
  EXPECT_TRUE(steps[0].segment);
  EXPECT_EQ(steps[0].tasks, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_FALSE(steps[1].segment);
  EXPECT_EQ(steps[1].name, "staged copy");
  EXPECT_TRUE(steps[2].segment);
}

TEST(CompileSteps, IndependentTasksKeepTheirEdgesAcrossSteps) {
  // A host task between two device tasks that do not depend on it: the
  // second segment still follows the first only through real edges.
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({4});
  loom::Graph g;
  g.add(touch({}, {x}), {.name = "dx"});
  g.host("h", [] {}, {}, {y});
  g.add(touch({x}, {}), {.name = "rx"});
  std::vector<loom::detail::Placement> placement(g.size(), loom::detail::Placement::device);
  placement[1] = loom::detail::Placement::host;
  const auto prepared = loom::detail::make_prepared(g, placement, 2);
  const auto steps = loom::detail::compile_steps(*prepared);
  ASSERT_EQ(steps.size(), 3U);
  loom::Graph replay;
  loom::detail::append_steps(replay, *prepared, steps, [&](std::size_t i) {
    std::vector<loom::Tensor> r, w;
    loom::detail::step_accesses(*prepared, steps[i], r, w);
    return touch(r, w);
  });
  EXPECT_TRUE(replay.has_edge(loom::TaskId(0), loom::TaskId(2)));
  EXPECT_FALSE(replay.has_edge(loom::TaskId(1), loom::TaskId(2)));
}

TEST(Executable, ReplayEqualsEagerOnRandomGraphsAndNeverAliasesLiveIntermediates) {
  std::mt19937_64 rng(loom::test::fresh_seed());
  loom::Runtime rt(cpu(4));
  bool shared = false;
  for (int round = 0; round < 6; ++round) {
    auto twins = loom::test::random_twins(rt, rng, 60, 257);
    rt.submit(twins.eager).wait();
    auto exe = rt.compile(twins.planned);
    EXPECT_EQ(exe.segments(), 0U) << "the CPU backend captures nothing";
    EXPECT_LE(exe.arena_bytes(), exe.intermediate_bytes());
    shared = shared || exe.arena_bytes() < exe.intermediate_bytes();
    expect_no_live_aliasing(twins.planned);
    for (int replay = 0; replay < 2; ++replay) {
      exe.run().wait();
      for (std::size_t o = 0; o < twins.eager_outputs.size(); ++o) {
        EXPECT_TRUE(
            same_bits(values_of(twins.planned_outputs[o]), values_of(twins.eager_outputs[o])))
            << "round " << round << ", replay " << replay << ", output " << o;
      }
    }
  }
  EXPECT_TRUE(shared) << "no random graph let two intermediates share memory";
}

TEST(Executable, ChainSharesTheArena) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({1000});
  auto y = rt.tensor<float>({1000});
  loom::Graph g;
  g.add(loom::ops::fill(x, 3.0F));
  loom::Tensor prev = x;
  for (int i = 0; i < 8; ++i) {
    auto next = g.intermediate(loom::DType::f32, {1000});
    g.add(loom::ops::scale_copy(prev, next, 2.0F));
    prev = next;
  }
  g.add(loom::ops::vector_add(prev, x, y));
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.intermediate_bytes(), 8U * 4096U);
  EXPECT_EQ(exe.arena_bytes(), 2U * 4096U);
  exe.run().wait();
  for (float v : values_of(y)) ASSERT_EQ(v, 3.0F * 256.0F + 3.0F);
}

TEST(Executable, ReplaysOfOneExecutableAreOrdered) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({64});
  std::fill_n(x.data_as<float>(), 64, 0.0F);
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {64});
  g.add(loom::testing::spin(x, 200));  // x[0] += 1, slowly
  g.add(loom::ops::scale_copy(x, tmp, 1.0F));
  g.add(loom::ops::vector_add(tmp, tmp, tmp));
  g.add(loom::ops::scale_copy(tmp, x, 0.5F));  // x unchanged but for x[0]'s increment
  auto exe = rt.compile(g);
  std::vector<loom::Future> runs;
  for (int i = 0; i < 20; ++i) runs.push_back(exe.run());  // no wait between them
  for (auto& r : runs) r.wait();
  EXPECT_EQ(x.data_as<float>()[0], 20.0F) << "replays over the same memory overlapped";
}

// The README: "replays are ordered like eager runs, by the data": replays
// of two executables over x, eager runs of their graphs and rt.copy from x,
// all issued without waiting, each see everything issued before them.
TEST(Executable, ReplaysEagerRunsAndCopiesOverOneTensorFollowTheirOrder) {
  loom::Runtime rt(cpu(4));
  auto x = rt.tensor<float>({64});
  std::fill_n(x.data_as<float>(), 64, 0.0F);
  loom::Graph one;
  one.add(loom::testing::spin(x, 200));  // x[0] += 1, slowly
  loom::Graph two;
  auto tmp = two.intermediate(loom::DType::f32, {64});
  two.add(loom::ops::scale_copy(x, tmp, 1.0F));
  two.add(loom::testing::spin(tmp, 100));        // tmp[0] += 1
  two.add(loom::ops::scale_copy(tmp, x, 1.0F));  // x[0] += 1 through tmp
  auto exe_one = rt.compile(one);
  auto exe_two = rt.compile(two);
  std::vector<loom::Future> runs;
  std::vector<loom::Completion> copies;
  std::vector<loom::Tensor> snapshots;
  std::vector<float> expected;
  float count = 0;
  for (int round = 0; round < 6; ++round) {
    runs.push_back(exe_one.run());
    runs.push_back(exe_two.run());
    runs.push_back(rt.submit(one));
    count += 3;
    auto copy = rt.tensor<float>({64});
    copies.push_back(rt.copy(x, copy));
    snapshots.push_back(copy);
    expected.push_back(count);
    runs.push_back(rt.submit(two));
    runs.push_back(exe_one.run());
    count += 2;
  }
  for (auto& r : runs) r.wait();
  for (auto& c : copies) c.wait();
  EXPECT_EQ(x.data_as<float>()[0], count) << "replays and runs over x overlapped";
  for (std::size_t i = 0; i < snapshots.size(); ++i) {
    EXPECT_EQ(snapshots[i].data_as<float>()[0], expected[i]) << "copy " << i;
  }
}

// A compile with no device segment replays the graph itself (a copy that
// shares its tasks): the caller's later changes and submits of the graph,
// here and on another runtime, leave the executable as it was compiled.
TEST(Executable, TheGraphChangedOrSubmittedAfterCompileLeavesTheExecutableAsCompiled) {
  loom::Runtime rt(cpu(2));
  loom::Runtime other(cpu(2));
  int first = 0;
  int second = 0;
  loom::Graph g;
  auto a = g.host("first", [&] { ++first; });
  auto exe = rt.compile(g);
  exe.run().wait();
  EXPECT_EQ(first, 1);
  auto b = g.host("second", [&] { ++second; });
  g.precede(b, a);  // and an edge into the compiled task
  a.name("renamed").priority(loom::Priority::high);
  other.submit(g).wait();  // prepared by another runtime
  EXPECT_EQ(first, 2);
  EXPECT_EQ(second, 1);
  for (int i = 0; i < 3; ++i) exe.run().wait();
  EXPECT_EQ(first, 5);
  EXPECT_EQ(second, 1) << "the executable ran a task added after compile";
  rt.submit(g).wait();
  EXPECT_EQ(first, 6);
  EXPECT_EQ(second, 2);
  exe.run_n(2).wait();
  EXPECT_EQ(first, 8);
  EXPECT_EQ(second, 2);
}

// run_n's replays of a task that touches no data follow each other: with
// two workers free, the next replay never starts while one is inside.
TEST(Executable, RunNNeverOverlapsATaskWithItsOwnReplay) {
  loom::Runtime rt(cpu(2));
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int count = 0;  // plain: TSan reports it if two replays ever overlap
  loom::Graph g;
  g.host("step", [&] {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    ++count;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    inside.fetch_sub(1);
  });
  g.host("other", [] {});  // a second step, so run_n takes the general path
  auto exe = rt.compile(g);
  exe.run_n(6).wait();
  EXPECT_EQ(count, 6);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(Executable, RunNReplaysInOneRunAndRunUntilStopsWhenThePredicateHolds) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({64});
  std::fill_n(x.data_as<float>(), 64, 0.0F);
  int host_runs = 0;
  loom::Graph g;
  g.add(loom::testing::spin(x, 1));                // x[0] += 1 (a device op)
  g.host("count", [&] { ++host_runs; }, {x}, {});  // a host step between
  g.add(loom::ops::scale_copy(x.slice(0, 1, 2), x.slice(0, 2, 3), 1.0F));
  auto exe = rt.compile(g);
  exe.run_n(7).wait();
  EXPECT_EQ(x.data_as<float>()[0], 7.0F);
  EXPECT_EQ(host_runs, 7);
  // A count's graph is kept for the next call with it; another count
  // builds its own, and the first comes back right.
  exe.run_n(7).wait();
  exe.run_n(3).wait();
  exe.run_n(7).wait();
  EXPECT_EQ(x.data_as<float>()[0], 24.0F);
  EXPECT_EQ(host_runs, 24);
  exe.run_n(0).wait();
  EXPECT_EQ(host_runs, 24) << "run_n(0) replays nothing";
  int checks = 0;
  exe.run_until([&] { return ++checks > 4; }).wait();
  EXPECT_EQ(checks, 5) << "the predicate is asked before each replay";
  EXPECT_EQ(host_runs, 28);
  exe.run_until([] { return true; }).wait();
  EXPECT_EQ(host_runs, 28) << "a predicate true at once replays nothing";
  EXPECT_THROW((void)exe.run_n(-2), loom::InvalidArgument);
  EXPECT_THROW((void)exe.run_until(nullptr), loom::InvalidArgument);
  EXPECT_THROW((void)loom::Executable().run_n(3), loom::InvalidArgument);
}

TEST(Executable, RunUntilFailsWithTheFailingReplaysError) {
  loom::Runtime rt(cpu(2));
  int runs = 0;
  loom::Graph g;
  g.host("third fails", [&] {
    if (++runs == 3) throw std::runtime_error("third");
  });
  auto exe = rt.compile(g);
  try {
    exe.run_until([] { return false; }).wait();
    FAIL() << "the loop did not stop at the failure";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("third"), std::string::npos) << e.what();
  }
  EXPECT_EQ(runs, 3);
}

TEST(Executable, EagerSubmitGivesIntermediatesPoolMemory) {
  loom::Runtime rt(cpu(2));
  auto y = rt.tensor<float>({100});
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {100});
  EXPECT_EQ(tmp.data(), nullptr);
  g.add(loom::ops::fill(tmp, 2.5F));
  g.add(loom::ops::scale_copy(tmp, y, 2.0F));
  rt.submit(g).wait();
  EXPECT_NE(tmp.data(), nullptr);
  for (float v : values_of(y)) ASSERT_EQ(v, 5.0F);
  rt.submit(g).wait();  // bound once; the next submit reuses it
  for (float v : values_of(y)) ASSERT_EQ(v, 5.0F);
  // Compiling the graph afterwards treats the bound intermediate as any tensor.
  auto exe = rt.compile(g);
  EXPECT_EQ(exe.arena_bytes(), 0U);
  std::fill_n(y.data_as<float>(), 100, 0.0F);
  exe.run().wait();
  for (float v : values_of(y)) ASSERT_EQ(v, 5.0F);
}

TEST(Executable, ReplayAllocatesNothingFromThePool) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({256});
  auto y = rt.tensor<float>({256});
  loom::Graph g;
  auto a = g.intermediate(loom::DType::f32, {256});
  auto b = g.intermediate(loom::DType::f32, {256});
  g.add(loom::ops::fill(x, 1.0F));
  g.add(loom::ops::scale_copy(x, a, 2.0F));
  g.add(loom::ops::vector_add(a, x, b));
  g.add(loom::ops::scale_copy(b, y, 1.0F));
  auto exe = rt.compile(g);
  exe.run().wait();
  const auto before = rt.statistics(loom::Memory::pageable).allocations;
  for (int i = 0; i < 10; ++i) exe.run().wait();
  EXPECT_EQ(rt.statistics(loom::Memory::pageable).allocations, before);
  for (float v : values_of(y)) ASSERT_EQ(v, 3.0F);
}

TEST(Executable, AnOpThatCannotBeCapturedFailsCompileByName) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.0F));
  g.add(std::make_shared<Touch>(std::vector<loom::Tensor>{x}, std::vector<loom::Tensor>{x}, false),
        {.name = "synchronizer"});
  try {
    (void)rt.compile(g);
    FAIL() << "compile accepted an op that cannot be captured";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "synchronizer");
    EXPECT_NE(std::string(e.what()).find("cannot be captured"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(rt.submit(g).wait()) << "an eager submit still runs it";
}

TEST(Executable, CompileRefusesWhatSubmitRefusesByName) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  auto y = rt.tensor<float>({5});
  loom::Graph g;
  g.add(loom::ops::scale_copy(x, y, 1.0F), {.name = "mismatched"});
  try {
    (void)rt.compile(g);
    FAIL() << "compile accepted mismatched shapes";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "mismatched");
  }
}

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // shadow memory and quarantine blur resident sizes
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The growth of the peak resident size, in KiB, while a child process
// compiles a 60,000-task chain (every `every`-th task using an
// intermediate, if `every` is not 0) on the CPU backend; -1 if the child
// failed. A child of its own, so that earlier tests' peaks do not hide it.
long compile_peak_growth_kib(int every) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    close(fds[0]);
    long growth = -1;
    try {
      loom::Runtime rt(cpu(1));
      auto x = rt.tensor<float>({4});
      const loom::Graph g = long_chain(x, 60000, every);
      rusage before{};
      getrusage(RUSAGE_SELF, &before);
      const loom::Executable exe = rt.compile(g);
      rusage after{};
      getrusage(RUSAGE_SELF, &after);
      growth = after.ru_maxrss - before.ru_maxrss;
    } catch (...) {
    }
    const bool sent = write(fds[1], &growth, sizeof growth) == sizeof growth;
    _exit(sent ? 0 : 1);
  }
  close(fds[1]);
  long growth = -1;
  if (read(fds[0], &growth, sizeof growth) != sizeof growth) growth = -1;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? growth : -1;
}

}  // namespace

// Compile's planning memory grows with the tasks that use intermediates, not
// with the graph squared: an n x n table was 429 MiB at 60,000 tasks, where
// the rest of compile (the plan, the replay graph) takes about 2.3 KiB a task.
TEST(Executable, CompilingALargeGraphTakesMemoryLinearInItsSize) {
  if (kSanitized) GTEST_SKIP() << "resident sizes mean little under a sanitizer";
  for (const int every : {0, 7500}) {
    const long kib = compile_peak_growth_kib(every);
    ASSERT_GE(kib, 0) << "the child process failed";
    EXPECT_LT(kib, 256L * 1024) << "compile of 60,000 tasks (intermediates every " << every
                                << ") grew the peak resident size by " << kib / 1024 << " MiB";
  }
}

TEST(Executable, RebindingRunsTheGraphOnOtherTensors) {
  loom::Runtime rt(cpu(2));
  auto in = rt.tensor<float>({128});
  auto out = rt.tensor<float>({128});
  loom::Graph g;
  auto tmp = g.intermediate(loom::DType::f32, {128});
  g.add(loom::ops::scale_copy(in, tmp, 3.0F));
  g.add(loom::ops::vector_add(tmp, in, out));  // out = 4 * in
  auto exe = rt.compile(g);
  std::fill_n(in.data_as<float>(), 128, 1.0F);
  exe.run().wait();
  for (float v : values_of(out)) ASSERT_EQ(v, 4.0F);

  auto in2 = rt.tensor<float>({128});
  auto out2 = rt.tensor<float>({128});
  std::fill_n(in2.data_as<float>(), 128, 2.5F);
  std::fill_n(out2.data_as<float>(), 128, -1.0F);
  exe.run({{in, in2}, {out, out2}}).wait();
  for (float v : values_of(out2)) ASSERT_EQ(v, 10.0F);
  // The README: where a binding is not re-pointed (the CPU backend captures
  // nothing, so every binding is copied), "after the run x holds x2's
  // values and y holds the output as well as y2".
  for (float v : values_of(in)) ASSERT_EQ(v, 2.5F);
  for (float v : values_of(out)) ASSERT_EQ(v, 10.0F);
  // The next replay without bindings uses the placeholders again.
  std::fill_n(in.data_as<float>(), 128, 0.5F);
  exe.run().wait();
  for (float v : values_of(out)) ASSERT_EQ(v, 2.0F);
  for (float v : values_of(out2)) ASSERT_EQ(v, 10.0F);
}

// The README: a binding that a host task uses is copied into the placeholder
// before the run and out of it after, "and runs that bind the same
// placeholder follow each other". Two such runs issued back to back must not
// overlap: the second's copy-in would overwrite the placeholder while the
// first's slow task still reads it, and its task would race the first's.
TEST(Executable, RunsThatBindTheSamePlaceholderFollowEachOther) {
  loom::Runtime rt(cpu(4));  // workers enough for the two runs to overlap if allowed
  constexpr std::int64_t n = 256;
  auto in = rt.tensor<float>({n});
  auto out = rt.tensor<float>({n});
  std::fill_n(in.data_as<float>(), n, 0.0F);
  std::fill_n(out.data_as<float>(), n, 0.0F);
  std::mutex mutex;
  std::vector<std::string> order;  // "start" and "end" of each task, as they happen
  std::atomic<int> active{0};
  std::atomic<int> most_active{0};
  loom::Graph g;
  g.host("slow double",
         [&] {
           {
             std::lock_guard lock(mutex);
             order.emplace_back("start");
           }
           const int now = ++active;
           int seen = most_active.load();
           while (now > seen && !most_active.compare_exchange_weak(seen, now)) {
           }
           // Reads in before the sleep and again after: a copy-in of another run
           // in between shows as a mix of its values and this run's.
           const float first = in.data_as<float>()[0];
           std::this_thread::sleep_for(std::chrono::milliseconds(50));
           for (std::int64_t i = 0; i < n; ++i) {
             out.data_as<float>()[i] = in.data_as<float>()[i] + first;
           }
           --active;
           std::lock_guard lock(mutex);
           order.emplace_back("end");
         },
         {in}, {out});
  auto exe = rt.compile(g);

  auto a = rt.tensor<float>({n});
  auto b = rt.tensor<float>({n});
  auto oa = rt.tensor<float>({n});
  auto ob = rt.tensor<float>({n});
  std::fill_n(a.data_as<float>(), n, 1.0F);
  std::fill_n(b.data_as<float>(), n, 2.0F);
  std::fill_n(oa.data_as<float>(), n, -1.0F);
  std::fill_n(ob.data_as<float>(), n, -1.0F);
  auto first = exe.run({{in, a}, {out, oa}});
  auto second = exe.run({{in, b}, {out, ob}});
  second.wait();
  first.wait();

  EXPECT_EQ(most_active.load(), 1) << "the two runs' tasks ran at once";
  EXPECT_EQ(order, (std::vector<std::string>{"start", "end", "start", "end"}));
  for (float v : values_of(oa)) ASSERT_EQ(v, 2.0F) << "the first run saw the second's input";
  for (float v : values_of(ob)) ASSERT_EQ(v, 4.0F) << "the second run saw the first's input";
  // The bound tensors themselves are untouched inputs.
  for (float v : values_of(a)) ASSERT_EQ(v, 1.0F);
  for (float v : values_of(b)) ASSERT_EQ(v, 2.0F);
}

TEST(Executable, RebindingThatWouldChangeTheGraphIsRefused) {
  loom::Runtime rt(cpu(2));
  auto in = rt.tensor<float>({8, 8});
  auto out = rt.tensor<float>({8, 8});
  loom::Graph g;
  g.add(loom::ops::scale_copy(in, out, 2.0F));
  auto exe = rt.compile(g);
  const auto refused = [&](const loom::Binding& b, const char* why) {
    try {
      (void)exe.run({b});
      ADD_FAILURE() << "accepted a binding: " << why;
    } catch (const loom::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({in, rt.tensor<float>({8, 9})}, "shape");
  refused({in, rt.tensor<float>({64})}, "shape");
  refused({in, rt.tensor(loom::DType::f16, {8, 8})}, "dtype");
  refused({in, rt.tensor<float>({8, 8}).transpose(0, 1)}, "contiguous");
  refused({rt.tensor<float>({8, 8}), rt.tensor<float>({8, 8})}, "does not use");
  refused({in, loom::Tensor()}, "defined");
  {
    loom::Graph h;
    auto tmp = h.intermediate(loom::DType::f32, {8, 8});
    h.add(loom::ops::scale_copy(in, tmp, 1.0F));
    h.add(loom::ops::scale_copy(tmp, out, 1.0F));
    auto with_tmp = rt.compile(h);
    EXPECT_THROW((void)with_tmp.run({{tmp, rt.tensor<float>({8, 8})}}), loom::InvalidArgument);
  }
  EXPECT_THROW((void)exe.run({{in, rt.tensor<float>({8, 8})}, {in, rt.tensor<float>({8, 8})}}),
               loom::InvalidArgument);
  EXPECT_THROW((void)loom::Executable().run(), loom::InvalidArgument);
}

TEST(Executable, EmptyAndHostOnlyGraphsCompile) {
  loom::Runtime rt(cpu(2));
  auto empty = rt.compile(loom::Graph{});
  EXPECT_TRUE(empty.valid());
  EXPECT_NO_THROW(empty.run().wait());
  int calls = 0;
  loom::Graph g;
  g.host("count", [&] { ++calls; });
  auto exe = rt.compile(g);
  exe.run().wait();
  exe.run().wait();
  EXPECT_EQ(calls, 2);
}

TEST(Executable, AFailingTaskFailsTheReplayByName) {
  loom::Runtime rt(cpu(2));
  auto x = rt.tensor<float>({4});
  loom::Graph g;
  g.add(loom::ops::fill(x, 1.0F));
  g.host("thrower", [] { throw std::runtime_error("boom"); }, {x}, {});
  auto exe = rt.compile(g);
  for (int i = 0; i < 2; ++i) {
    try {
      exe.run().wait();
      FAIL() << "the replay hid the failure";
    } catch (const loom::Error& e) {
      EXPECT_EQ(e.task(), "thrower") << e.what();
    }
  }
}
