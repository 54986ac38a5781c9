// Graph building: inferred hazards, explicit edges, cycles and validation
// messages; the plan's stream assignment and event elimination.
#include "core/prepared_slot.hpp"
#include "core/storage.hpp"
#include "core/tensor_access.hpp"
#include "sched/plan.hpp"
#include "sched/prepare.hpp"
#include "testing/spin_op.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/kernel_task.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using loom::Graph;
using loom::TaskId;

struct GraphTest : ::testing::Test {
  loom::Runtime rt{[] {
    loom::RuntimeOptions o;
    o.backend = loom::Backend::cpu;
    return o;
  }()};
  loom::Tensor x = rt.tensor<float>({64});
  loom::Tensor y = rt.tensor<float>({64});
  loom::Tensor z = rt.tensor<float>({64});
};

TEST_F(GraphTest, ReadAfterWrite) {
  Graph g;
  auto w = g.add(loom::ops::fill(x, 1));
  auto r = g.add(loom::ops::scale_copy(x, y, 2));
  EXPECT_TRUE(g.has_edge(w, r));
  EXPECT_EQ(g.edge_count(), 1U);
}

TEST_F(GraphTest, WriteAfterRead) {
  Graph g;
  auto r = g.add(loom::ops::scale_copy(x, y, 2));
  auto w = g.add(loom::ops::fill(x, 1));
  EXPECT_TRUE(g.has_edge(r, w));
}

TEST_F(GraphTest, WriteAfterWrite) {
  Graph g;
  auto a = g.add(loom::ops::fill(x, 1));
  auto b = g.add(loom::ops::fill(x, 2));
  EXPECT_TRUE(g.has_edge(a, b));
}

TEST_F(GraphTest, ReadsDoNotOrderEachOther) {
  Graph g;
  g.add(loom::ops::fill(x, 1));
  auto r1 = g.add(loom::ops::scale_copy(x, y, 2));
  auto r2 = g.add(loom::ops::scale_copy(x, z, 3));
  EXPECT_FALSE(g.has_edge(r1, r2));
  EXPECT_EQ(g.edge_count(), 2U);
}

TEST_F(GraphTest, DisjointSlicesAreIndependentOverlappingOnesAreNot) {
  Graph g;
  auto lo = g.add(loom::ops::fill(x.slice(0, 0, 32), 1));
  auto hi = g.add(loom::ops::fill(x.slice(0, 32, 64), 2));
  auto mid = g.add(loom::ops::fill(x.slice(0, 16, 48), 3));
  EXPECT_FALSE(g.has_edge(lo, hi));
  EXPECT_TRUE(g.has_edge(lo, mid));
  EXPECT_TRUE(g.has_edge(hi, mid));
}

TEST_F(GraphTest, CoveredAccessesAreNotRepeated) {
  Graph g;
  auto a = g.add(loom::ops::fill(x, 1));
  auto b = g.add(loom::ops::fill(x, 2));  // covers a
  auto c = g.add(loom::ops::scale_copy(x, y, 1));
  EXPECT_TRUE(g.has_edge(b, c));
  EXPECT_FALSE(g.has_edge(a, c)) << "a is ordered before c through b";
}

TEST_F(GraphTest, NamesDefaultToTheOpAndAreNumbered) {
  Graph g;
  auto a = g.add(loom::ops::fill(x, 1));
  auto b = g.add(loom::ops::fill(y, 1));
  auto c = g.add(loom::ops::fill(z, 1), {.name = "init z"});
  EXPECT_EQ(g.task(a).name, "fill");
  EXPECT_EQ(g.task(b).name, "fill#1");
  EXPECT_EQ(g.task(c).name, "init z");
}

TEST_F(GraphTest, ExplicitEdgesAndTheirErrors) {
  Graph g;
  auto a = g.host("a", [] {});
  auto b = g.host("b", [] {});
  g.precede(a, b);
  EXPECT_TRUE(g.has_edge(a, b));
  g.succeed(a, b);  // b before a too: a cycle
  try {
    g.validate();
    FAIL() << "expected a cycle";
  } catch (const loom::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cycle"), std::string::npos) << what;
    EXPECT_NE(what.find("'a'"), std::string::npos) << what;
    EXPECT_NE(what.find("'b'"), std::string::npos) << what;
  }
  EXPECT_THROW(g.precede(a, TaskId{99}), loom::InvalidArgument);
  EXPECT_THROW(g.precede(a, a), loom::InvalidArgument);
  EXPECT_THROW(g.host("empty", {}), loom::InvalidArgument);
}

TEST_F(GraphTest, LongCycleIsNamedInOrder) {
  Graph g;
  auto a = g.host("first", [] {});
  auto b = g.host("second", [] {});
  auto c = g.host("third", [] {});
  g.precede(a, b);
  g.precede(b, c);
  g.precede(c, a);
  try {
    g.validate();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'first' -> 'second' -> 'third' -> 'first'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(GraphTest, ShapeAndDtypeMismatchesNameTheTaskAndTheExpectation) {
  Graph g;
  auto small = rt.tensor<float>({8});
  g.add(loom::ops::vector_add(x, small, z), {.name = "bad add"});
  try {
    g.validate();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.task(), "bad add");
    EXPECT_NE(what.find("task 'bad add'"), std::string::npos) << what;
    EXPECT_NE(what.find("[64] and [8]"), std::string::npos) << what;
  }
  Graph h;
  h.add(loom::ops::fill(rt.tensor<std::int32_t>({4}), 1));
  EXPECT_THROW(h.validate(), loom::InvalidArgument);
  Graph c;
  c.copy(x, rt.tensor<float>({65}), {.name = "copy out"});
  try {
    c.validate();
    FAIL();
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "copy out");
  }
}

// The inferred edges for the patterns that must stay cheap to build: many
// readers of one tensor, a chain of in-place writers, many disjoint slices.

std::vector<std::uint32_t> preds(const Graph& g, TaskId t) { return g.task(t).predecessors; }
std::vector<std::uint32_t> ids(std::initializer_list<TaskId> ts) {
  std::vector<std::uint32_t> v;
  for (auto t : ts) v.push_back(t.index);
  std::sort(v.begin(), v.end());
  return v;
}

TEST_F(GraphTest, AWriterAfterManyReadersDependsOnEachOfThem) {
  Graph g;
  auto w0 = g.host("w0", [] {}, {}, {x});
  std::vector<TaskId> readers;
  for (int i = 0; i < 20; ++i) readers.push_back(g.host("r", [] {}, {x}, {}));
  auto w1 = g.host("w1", [] {}, {}, {x});
  auto after = g.host("after", [] {}, {x}, {});
  for (auto r : readers) {
    EXPECT_EQ(preds(g, r), ids({w0}));
    EXPECT_EQ(g.task(r).successors, ids({w1}));
  }
  auto expected = ids({w0});
  for (auto r : readers) expected.push_back(r.index);
  EXPECT_EQ(preds(g, w1), expected) << "after every reader, and after w0 (write after write)";
  EXPECT_EQ(preds(g, after), ids({w1})) << "w1 covers the earlier accesses";
  EXPECT_EQ(g.edge_count(), 20U + 20U + 1U + 1U);
}

TEST_F(GraphTest, AReaderDependsOnEachOverlappingWriteSinceTheLastCoveringOne) {
  // x: 64 floats, 256 bytes. a writes all of it, b0..b3 a quarter each.
  Graph g;
  auto a = g.host("a", [] {}, {}, {x});
  std::vector<TaskId> b;
  for (int i = 0; i < 4; ++i)
    b.push_back(g.host("b", [] {}, {}, {x.slice(0, 16 * i, 16 * i + 16)}));
  for (auto t : b) EXPECT_EQ(preds(g, t), ids({a})) << "the quarters do not cover a";
  auto r = g.host("r", [] {}, {x.slice(0, 8, 40)}, {});
  EXPECT_EQ(preds(g, r), ids({a, b[0], b[1], b[2]}));
  auto c = g.host("c", [] {}, {}, {x.slice(0, 0, 32)});  // covers b0 and b1, not r
  EXPECT_EQ(preds(g, c), ids({a, b[0], b[1], r}));
  auto r2 = g.host("r2", [] {}, {x}, {});
  EXPECT_EQ(preds(g, r2), ids({a, b[2], b[3], c})) << "c covers b0 and b1";
  auto w = g.host("w", [] {}, {}, {x});
  EXPECT_EQ(preds(g, w), ids({a, b[2], b[3], c, r, r2}));
  auto last = g.host("last", [] {}, {x.slice(0, 60, 64)}, {});
  EXPECT_EQ(preds(g, last), ids({w}));
}

TEST_F(GraphTest, AChainOfInPlaceWritersDependsOnlyOnThePreviousOne) {
  Graph g;
  std::vector<TaskId> chain;
  for (int i = 0; i < 100; ++i) chain.push_back(g.add(loom::ops::scale_copy(x, x, 1.0F)));
  for (std::size_t i = 1; i < chain.size(); ++i) {
    EXPECT_EQ(preds(g, chain[i]), ids({chain[i - 1]}));
  }
  EXPECT_EQ(g.edge_count(), 99U);
  auto r = g.host("r", [] {}, {x}, {});
  auto w = g.host("w", [] {}, {}, {x});
  EXPECT_EQ(preds(g, r), ids({chain.back()}));
  EXPECT_EQ(preds(g, w), ids({chain.back(), r}));
}

TEST_F(GraphTest, DisjointSlicesWrittenThenReadPairUp) {
  constexpr int n = 256;
  auto big = rt.tensor<float>({4 * n});
  const auto slice = [&](int i) { return big.slice(0, 4 * i, 4 * i + 4); };
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937 rng(3);
  Graph g;
  std::vector<TaskId> w(n), r(n), rw(n);
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) w[static_cast<std::size_t>(i)] = g.host("w", [] {}, {}, {slice(i)});
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) r[static_cast<std::size_t>(i)] = g.host("r", [] {}, {slice(i)}, {});
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) rw[static_cast<std::size_t>(i)] = g.host("rw", [] {}, {}, {slice(i)});
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(preds(g, w[i]).empty());
    EXPECT_EQ(preds(g, r[i]), ids({w[i]}));
    EXPECT_EQ(preds(g, rw[i]), ids({w[i], r[i]}));
  }
  auto all = g.host("all", [] {}, {}, {big});
  std::vector<std::uint32_t> expected;
  for (auto t : rw) expected.push_back(t.index);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(preds(g, all), expected) << "the rewrites covered the first writes and the reads";
  EXPECT_EQ(g.edge_count(), 3U * n + n);
}

// Random accesses (views of several sizes, strided and transposed ones,
// reads and writes) against a direct transcription of the rules: every
// access since the last covering write, per storage, in one list.
TEST_F(GraphTest, InferredEdgesMatchTheRulesForRandomAccesses) {
  auto a = rt.tensor<float>({512});
  auto m = rt.tensor<float>({16, 32});
  std::mt19937 rng(11);
  const auto pick = [&](int bound) {
    return static_cast<std::int64_t>(rng() % static_cast<unsigned>(bound));
  };
  const auto view = [&]() -> loom::Tensor {
    const auto kind = rng() % 32;
    if (kind == 0) return a;
    if (kind == 1) return m;
    if (kind < 8) {  // any length
      const auto lo = pick(512);
      return a.slice(0, lo, lo + 1 + pick(static_cast<int>(512 - lo)));
    }
    if (kind < 16) {  // short
      const auto lo = pick(500);
      return a.slice(0, lo, std::min<std::int64_t>(512, lo + 1 + pick(12)));
    }
    if (kind < 22) {  // aligned, of one length
      const auto lo = 8 * pick(64);
      return a.slice(0, lo, lo + 8);
    }
    if (kind < 26) {  // strided
      const auto lo = pick(500);
      return a.slice(0, lo, std::min<std::int64_t>(512, lo + 1 + pick(40)), 1 + pick(3));
    }
    if (kind < 29) return m.slice(0, pick(16), 16);
    const auto c = pick(32);
    return m.transpose(0, 1).slice(0, c, c + 1);
  };
  struct Access {
    std::uint32_t task;
    std::uintptr_t lo, hi;
    bool write;
    const void* storage;
  };
  std::vector<Access> history;
  Graph g;
  for (std::uint32_t t = 0; t < 4000; ++t) {
    std::vector<loom::Tensor> reads, writes;
    for (auto k = pick(3); k > 0; --k) reads.push_back(view());
    for (auto k = pick(3); k > 0; --k) writes.push_back(view());
    std::set<std::uint32_t> expected;
    const auto infer = [&](const loom::Tensor& v, bool write) {
      const auto [lo, hi] = loom::detail::byte_span(v);
      const void* s = loom::detail::TensorAccess::storage(v).get();
      for (const auto& h : history) {
        if (h.storage == s && h.lo < hi && lo < h.hi && (write || h.write) && h.task != t) {
          expected.insert(h.task);
        }
      }
      if (write) {
        std::erase_if(history, [&](const Access& h) {
          return h.storage == s && h.task != t && lo <= h.lo && h.hi <= hi;
        });
      }
      history.push_back({t, lo, hi, write, s});
    };
    for (const auto& v : reads) infer(v, false);
    for (const auto& v : writes) infer(v, true);
    const auto id = g.host(
        "t", [] {}, reads, writes);
    ASSERT_EQ(preds(g, id), std::vector<std::uint32_t>(expected.begin(), expected.end()))
        << "task " << t;
  }
}

// Building stays linear: 200k readers of one tensor (quadratic before: each
// read scanned every earlier read), and 64k disjoint slices written, read
// and written again.
TEST_F(GraphTest, ManyReadersOfOneTensorBuildInLinearTime) {
  constexpr std::uint32_t n = 200000;
  Graph g;
  auto w0 = g.host("w0", [] {}, {}, {x});
  for (std::uint32_t i = 0; i < n; ++i) g.host("r", [] {}, {x}, {y.slice(0, 0, 1)});
  auto w1 = g.host("w1", [] {}, {}, {x});
  auto r = g.host("after", [] {}, {x}, {});
  EXPECT_EQ(g.edge_count(), 2U * n + 1U + 1U + (n - 1U)) << "y's writers form a chain";
  EXPECT_EQ(g.task(w0).successors.size(), n + 1U);
  EXPECT_EQ(g.task(w1).predecessors.size(), n + 1U);
  EXPECT_EQ(preds(g, TaskId{n / 2}), ids({w0, TaskId{n / 2 - 1}}));
  EXPECT_EQ(preds(g, r), ids({w1}));
}

TEST_F(GraphTest, ManyDisjointSlicesBuildInLinearTime) {
  constexpr std::uint32_t n = 65536;
  auto big = rt.tensor<float>({4 * static_cast<std::int64_t>(n)});
  const auto slice = [&](std::uint32_t i) { return big.slice(0, 4 * i, 4 * i + 4); };
  Graph g;
  for (std::uint32_t i = n; i-- > 0;) g.host("w", [] {}, {}, {slice(i)});  // descending addresses
  for (std::uint32_t i = 0; i < n; ++i) g.host("r", [] {}, {slice(i)}, {});
  for (std::uint32_t i = 0; i < n; ++i) g.host("rw", [] {}, {}, {slice(i)});
  auto all = g.host("all", [] {}, {big}, {});
  EXPECT_EQ(g.edge_count(), 3U * n + n);
  EXPECT_EQ(preds(g, TaskId{n + 5}), ids({TaskId{n - 6}}));
  EXPECT_EQ(preds(g, TaskId{2 * n + 5}), ids({TaskId{n - 6}, TaskId{n + 5}}));
  EXPECT_EQ(g.task(all).predecessors.size(), n);
}

// The plan's streams and events, with every task on the device.
loom::detail::Plan device_plan(const Graph& g, int streams = 4) {
  return loom::detail::make_plan(
      g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), streams);
}

TEST_F(GraphTest, PlanKeepsChainsOnOneStreamWithoutEvents) {
  Graph g;
  for (int i = 0; i < 10; ++i) g.add(loom::ops::scale_copy(x, x, 1.5F));
  const auto plan = device_plan(g);
  for (const auto& t : plan.tasks) EXPECT_EQ(t.stream, plan.tasks[0].stream);
  EXPECT_EQ(plan.cross_stream_waits, 0U);
  EXPECT_EQ(plan.cross_stream_edges, 0U);
}

// Floats enough for an op's work to deserve a stream of its own.
constexpr std::int64_t kLarge = std::int64_t{2} << 20;  // 8 MiB of floats, above kSmallWorkBytes

TEST_F(GraphTest, PlanSpreadsFanOutAndJoinsWithOneEventPerCrossingEdge) {
  Graph g;
  auto big = rt.tensor<float>({kLarge});
  auto src = g.add(loom::ops::fill(big, 1));
  std::vector<loom::Tensor> outs;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(rt.tensor<float>({kLarge}));
    g.add(loom::ops::scale_copy(big, outs.back(), static_cast<float>(i)));
  }
  auto sum = rt.tensor<float>({kLarge});
  g.add(loom::ops::vector_add(outs[0], outs[1], sum));
  const auto plan = device_plan(g);
  for (const auto& t : plan.tasks) EXPECT_FALSE(t.small);
  std::set<int> branch_streams;
  for (std::uint32_t i = 1; i <= 4; ++i) branch_streams.insert(plan.tasks[i].stream);
  EXPECT_EQ(branch_streams.size(), 4U) << "independent branches on distinct streams";
  EXPECT_EQ(plan.tasks[1].stream, plan.tasks[src.index].stream) << "the first branch continues";
  // 3 branches wait on the source; the join waits on one of its two inputs.
  EXPECT_EQ(plan.cross_stream_waits, 4U);
  EXPECT_TRUE(plan.tasks[src.index].record_event);
}

TEST_F(GraphTest, PlanKeepsSmallWorkOnOneStreamWithoutEvents) {
  // The same fan-out and join over small tensors, then a random DAG of small
  // ops: nothing gains from a second stream, so nothing pays for one.
  Graph g;
  g.add(loom::ops::fill(x, 1));
  std::vector<loom::Tensor> outs;
  for (int i = 0; i < 8; ++i) {
    outs.push_back(rt.tensor<float>({64}));
    g.add(loom::ops::scale_copy(x, outs.back(), static_cast<float>(i)));
  }
  g.add(loom::ops::vector_add(outs[0], outs[1], y));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    g.add(loom::ops::scale_copy(outs[rng() % outs.size()], outs[rng() % outs.size()], 1.0F));
  }
  const auto plan = device_plan(g);
  for (const auto& t : plan.tasks) {
    EXPECT_TRUE(t.small);
    EXPECT_EQ(t.stream, plan.tasks[0].stream);
    EXPECT_FALSE(t.record_event && !t.watched);
  }
  EXPECT_EQ(plan.cross_stream_edges, 0U);
  EXPECT_EQ(plan.cross_stream_waits, 0U);
}

TEST_F(GraphTest, TheCostModelGoesByBytesSaveWhereTimeIsNotBytes) {
  auto big = rt.tensor<float>({kLarge});
  Graph g;
  auto small_fill = g.add(loom::ops::fill(x, 1));
  auto large_fill = g.add(loom::ops::fill(big, 1));
  auto spin = g.add(loom::testing::spin(y, 1000));  // a few bytes, a millisecond
  auto kernel = g.add(loom::kernel_task("user", {z}, {z}, [](loom::KernelContext&) {}));
  auto large_kernel = g.add(loom::kernel_task("user", {big}, {}, [](loom::KernelContext&) {}));
  auto small_copy = g.copy(x, y);
  auto host = g.host("h", [] {}, {}, {});
  const auto small = [&](loom::TaskId t) { return loom::detail::small_work(g.task(t)); };
  EXPECT_TRUE(small(small_fill));
  EXPECT_FALSE(small(large_fill)) << "8 MiB written";
  EXPECT_FALSE(small(spin)) << "its time is not its bytes'";
  EXPECT_TRUE(small(kernel)) << "a kernel task declaring 512 bytes";
  EXPECT_FALSE(small(large_kernel)) << "a kernel task reading 8 MiB";
  EXPECT_FALSE(small(host));
  // Host memory on both sides (the CPU runtime's): over the host link, 64x
  // its 256 bytes is still small.
  EXPECT_TRUE(small(small_copy));
  auto big2 = rt.tensor<float>({std::int64_t{64} << 10});  // 256 KiB: 16 MiB weighted
  auto big3 = rt.tensor<float>({std::int64_t{64} << 10});
  EXPECT_FALSE(small(g.copy(big2, big3)));
}

TEST_F(GraphTest, PlanKeepsSmallWorkOffStreamsBusyWithLargeWork) {
  // Two long kernels take two streams; a small independent task must not
  // queue behind either, and small tasks after it gather on its stream.
  Graph g;
  auto a = rt.tensor<float>({4});
  auto b = rt.tensor<float>({4});
  auto l1 = g.add(loom::testing::spin(a, 1000));
  auto l2 = g.add(loom::testing::spin(b, 1000));
  auto s1 = g.add(loom::ops::fill(x, 1));
  auto s2 = g.add(loom::ops::fill(y, 1));
  auto s3 = g.add(loom::ops::fill(z, 1));
  const auto plan = device_plan(g);
  const int l1s = plan.tasks[l1.index].stream;
  const int l2s = plan.tasks[l2.index].stream;
  EXPECT_NE(l1s, l2s) << "large independent work is spread";
  const int ss = plan.tasks[s1.index].stream;
  EXPECT_NE(ss, l1s);
  EXPECT_NE(ss, l2s);
  EXPECT_EQ(plan.tasks[s2.index].stream, ss);
  EXPECT_EQ(plan.tasks[s3.index].stream, ss);
}

TEST_F(GraphTest, PlanDropsEventsThatEarlierWaitsImply) {
  // a -> b on stream 0; c independent (stream 1); d after a and c (stream 1, waits a);
  // e after a, b, d (continues d): waits b; a is implied by b.
  Graph g;
  auto a = g.host("a", [] {}, {}, {x});
  auto b = g.host("b", [] {}, {x}, {y});
  auto c = g.host("c", [] {}, {}, {z});
  auto d = g.host("d", [] {}, {x, z}, {});
  auto e = g.host("e", [] {}, {y}, {});
  g.precede(a, e);
  g.precede(d, e);
  (void)c;
  const auto plan = device_plan(g);
  EXPECT_EQ(plan.tasks[b.index].stream, plan.tasks[a.index].stream);
  EXPECT_EQ(plan.tasks[d.index].stream, plan.tasks[c.index].stream);
  EXPECT_EQ(plan.tasks[e.index].stream, plan.tasks[d.index].stream);
  EXPECT_EQ(plan.cross_stream_edges, 3U);  // d-a, e-b, e-a
  EXPECT_EQ(plan.cross_stream_waits, 2U);  // e-a is implied by e-b (stream order a -> b)
  EXPECT_EQ(plan.tasks[e.index].waits, std::vector<std::uint32_t>{b.index});
}

TEST_F(GraphTest, PlanPutsAJoinWhereItNeedsTheFewestWaits) {
  // a and b start two streams, each continued by another task; j joins a and
  // b, which are no longer their streams' tails. A fresh stream would wait on
  // both; a stream of one of them waits only on the other.
  Graph g;
  auto a = g.host("a", [] {}, {}, {x});
  auto b = g.host("b", [] {}, {}, {y});
  auto a2 = g.host("a2", [] {}, {}, {});
  auto b2 = g.host("b2", [] {}, {}, {});
  auto j = g.host("j", [] {}, {}, {});
  g.precede(a, a2);
  g.precede(b, b2);
  g.precede(a, j);
  g.precede(b, j);
  const auto plan = device_plan(g);
  ASSERT_NE(plan.tasks[a.index].stream, plan.tasks[b.index].stream);
  EXPECT_EQ(plan.tasks[a2.index].stream, plan.tasks[a.index].stream);
  EXPECT_EQ(plan.tasks[b2.index].stream, plan.tasks[b.index].stream);
  const int js = plan.tasks[j.index].stream;
  EXPECT_TRUE(js == plan.tasks[a.index].stream || js == plan.tasks[b.index].stream) << js;
  EXPECT_EQ(plan.tasks[j.index].waits.size(), 1U);
}

TEST_F(GraphTest, PlanKeepsSmallWorkOffAStreamWaitingForTheHost) {
  // A small task after a slow host task is launched only once the host task
  // is over; small independent tasks must not queue behind it on its stream
  // (a stream launches in plan order), and they still gather on one stream.
  Graph g;
  auto h = g.host("slow host", [] {});
  auto gated = g.add(loom::ops::fill(x, 1));
  g.precede(h, gated);
  std::vector<loom::TaskId> free;
  for (int i = 0; i < 4; ++i) {
    free.push_back(g.add(loom::ops::fill(rt.tensor<float>({16}), 2)));
  }
  std::vector<loom::detail::Placement> placement(g.size(), loom::detail::Placement::device);
  placement[h.index] = loom::detail::Placement::host;
  const auto plan = loom::detail::make_plan(g, placement, 2);
  const int gs = plan.tasks[gated.index].stream;
  for (auto f : free) {
    EXPECT_NE(plan.tasks[f.index].stream, gs);
    EXPECT_EQ(plan.tasks[f.index].stream, plan.tasks[free[0].index].stream);
  }
}

TEST_F(GraphTest, PreparingSharesTheTasksUntilTheGraphChanges) {
  Graph g;
  auto a = rt.tensor<float>({64});
  g.add(loom::ops::scale_copy(x, a, 2.0F), {.name = "first"});
  const auto prepared = loom::detail::make_prepared(
      g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), 2);
  const Graph& snapshot = prepared->graph;
  EXPECT_EQ(snapshot.tasks().data(), g.tasks().data()) << "the snapshot copied the tasks";
  // The graph changes a copy of its own; the snapshot keeps what it had.
  auto second = g.add(loom::ops::vector_add(a, x, y), {.name = "second"});
  EXPECT_NE(snapshot.tasks().data(), g.tasks().data());
  ASSERT_EQ(snapshot.size(), 1U);
  EXPECT_EQ(snapshot.tasks()[0].name, "first");
  EXPECT_TRUE(snapshot.tasks()[0].successors.empty());
  ASSERT_EQ(g.size(), 2U);
  EXPECT_EQ(g.tasks()[0].successors, std::vector<std::uint32_t>{1});
  // Unshared now: changing it again copies nothing.
  const auto* own = g.tasks().data();
  second.name("renamed").priority(loom::Priority::high);
  EXPECT_EQ(g.tasks().data(), own);
  EXPECT_EQ(g.tasks()[1].name, "renamed");
  // Copies of a graph share the tasks and part at their first change, each way.
  Graph copy = g;
  EXPECT_EQ(copy.tasks().data(), g.tasks().data());
  copy.add(loom::ops::fill(rt.tensor<float>({4}), 1), {.name = "only in the copy"});
  EXPECT_EQ(g.size(), 2U);
  EXPECT_EQ(copy.size(), 3U);
  EXPECT_EQ(g.tasks()[1].name, "renamed");
  Graph other = copy;
  auto t = g.add(loom::ops::fill(rt.tensor<float>({4}), 2), {.name = "only in g"});
  g.precede(t, second);  // a backward edge: the one change that edits two tasks
  EXPECT_EQ(copy.size(), 3U);
  EXPECT_EQ(other.tasks().data(), copy.tasks().data());
  EXPECT_TRUE(copy.tasks()[1].predecessors == std::vector<std::uint32_t>{0});
  EXPECT_EQ(g.tasks()[1].predecessors, (std::vector<std::uint32_t>{0, 2}));
  // A moved-from graph is empty and usable.
  Graph moved = std::move(other);
  EXPECT_EQ(moved.size(), 3U);
  EXPECT_EQ(other.size(), 0U);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  other.add(loom::ops::fill(rt.tensor<float>({4}), 3));
  EXPECT_EQ(other.size(), 1U);
  EXPECT_EQ(moved.size(), 3U);
}

TEST_F(GraphTest, PreparingCopiesTheTasksNotTheBuildHistory) {
  Graph g;
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 50; ++i) {
    ts.push_back(rt.tensor<float>({64}));
    g.add(loom::ops::scale_copy(x, ts.back(), 1.0F));
  }
  g.add(loom::ops::vector_add(ts[0], ts[1], y));
  auto mid = g.intermediate(loom::DType::f32, {4});
  g.add(loom::ops::fill(mid, 1));
  const auto prepared = loom::detail::make_prepared(
      g, std::vector<loom::detail::Placement>(g.size(), loom::detail::Placement::device), 2);
  const Graph& snapshot = prepared->graph;
  EXPECT_GT(loom::detail::GraphAccess::history_entries(g), 50U);
  EXPECT_EQ(loom::detail::GraphAccess::history_entries(snapshot), 0U);
  EXPECT_EQ(loom::detail::GraphAccess::slot(snapshot), nullptr) << "detached from g's slot";
  ASSERT_EQ(snapshot.size(), g.size());
  EXPECT_EQ(snapshot.edge_count(), g.edge_count());
  EXPECT_EQ(snapshot.intermediates().size(), 1U);
  for (std::uint32_t t = 0; t < g.size(); ++t) {
    EXPECT_EQ(snapshot.tasks()[t].name, g.tasks()[t].name);
    EXPECT_EQ(snapshot.tasks()[t].predecessors, g.tasks()[t].predecessors);
    EXPECT_EQ(snapshot.tasks()[t].successors, g.tasks()[t].successors);
  }
  EXPECT_NO_THROW(snapshot.validate());
}

TEST_F(GraphTest, PlanBoundsTheStreamsAndSeparatesPriorities) {
  Graph g;
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 12; ++i) {
    ts.push_back(rt.tensor<float>({4}));
    g.add(loom::testing::spin(ts.back(), 10),  // large work (its time is not its bytes')
          {.name = "", .priority = i % 2 == 0 ? loom::Priority::high : loom::Priority::normal});
  }
  const auto plan = device_plan(g, 2);
  std::set<int> high;
  std::set<int> normal;
  for (std::uint32_t i = 0; i < 12; ++i) (i % 2 == 0 ? high : normal).insert(plan.tasks[i].stream);
  EXPECT_EQ(high.size(), 2U);
  EXPECT_EQ(normal.size(), 2U);
  for (int s : high) EXPECT_EQ(normal.count(s), 0U);
}

}  // namespace

namespace {

TEST(TaskHandle, PrecedeAndSucceedReadTheRightWayRound) {
  loom::Graph g;
  auto a = g.host([] {}, {}, {}, {.name = "a"});
  auto b = g.host([] {}, {}, {}, {.name = "b"});
  auto c = g.host([] {}, {}, {}, {.name = "c"});
  auto d = g.host([] {}, {}, {}, {.name = "d"});
  a.precede(b, c);  // a before b and c
  d.succeed(b, c);  // d after b and c
  EXPECT_TRUE(g.has_edge(a, b));
  EXPECT_TRUE(g.has_edge(a, c));
  EXPECT_TRUE(g.has_edge(b, d));
  EXPECT_TRUE(g.has_edge(c, d));
  EXPECT_FALSE(g.has_edge(b, a));
  EXPECT_EQ(g.edge_count(), 4U);
  EXPECT_THROW(a.precede(a), loom::InvalidArgument) << "a task cannot precede itself";
}

TEST(TaskHandle, NameAndPriorityOnTheHandle) {
  loom::Graph g;
  auto a = g.host([] {}, {}, {}, {.name = "load", .priority = loom::Priority::high});
  EXPECT_EQ(a.name(), "load");
  EXPECT_EQ(a.priority(), loom::Priority::high);
  auto b = g.host([] {});
  EXPECT_EQ(b.name(), "host");
  b.name("load").priority(loom::Priority::low);
  EXPECT_EQ(b.name(), "load#1") << "names stay unique, as add() makes them";
  EXPECT_EQ(g.task(b).priority, loom::Priority::low);
}

TEST(TaskHandle, HandlesOfAnotherGraphOrNoneAreRefused) {
  loom::Graph g1;
  loom::Graph g2;
  auto a = g1.host([] {});
  auto b = g2.host([] {});
  EXPECT_THROW(a.precede(b), loom::InvalidArgument);
  EXPECT_THROW(g1.precede(a, b), loom::InvalidArgument);
  loom::TaskId bare{0};
  EXPECT_THROW(bare.precede(a), loom::InvalidArgument);
  EXPECT_NO_THROW(g1.precede(bare, g1.host([] {}))) << "a bare index still names a task for Graph";
}

TEST(TaskHandle, AHostTaskWithAnUndefinedTensorIsRejectedNamingIt) {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  loom::Runtime rt(o);
  loom::Graph g;
  g.host([] {}, {rt.tensor<float>({4}), loom::Tensor()}, {}, {.name = "careless"});
  try {
    rt.submit(g).wait();
    FAIL() << "a host task reading an undefined tensor was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "careless");
    EXPECT_NE(std::string(e.what()).find("undefined"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

loom::RuntimeOptions cpu_options() {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  return o;
}

// An op whose validate() throws something other than a loom::Error.
class CarelessValidation final : public loom::Op {
 public:
  explicit CarelessValidation(loom::Tensor t) : t_(std::move(t)) {}
  std::string_view name() const noexcept override { return "careless"; }
  std::vector<loom::Tensor> reads() const override { return {}; }
  std::vector<loom::Tensor> writes() const override { return {t_}; }
  void validate() const override { throw std::out_of_range("vector::at: index 7 >= 3"); }
  void run_cpu() const override {}
  void run_cuda(const loom::ExecutionContext&) const override {}

 private:
  loom::Tensor t_;
};

TEST(Validation, AValidateThatThrowsAStdExceptionIsRefusedAsInvalidArgumentNamingTheTask) {
  loom::Runtime rt(cpu_options());
  loom::Graph g;
  g.add(std::make_shared<CarelessValidation>(rt.tensor<float>({4})), {.name = "check me"});
  try {
    (void)rt.submit(g);
    FAIL() << "accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "check me");
    EXPECT_NE(std::string(e.what()).find("vector::at: index 7 >= 3"), std::string::npos)
        << e.what();
  } catch (const std::exception& e) {
    FAIL() << "escaped unnamed: " << e.what();
  }
}

// Every op's output must have distinct elements: one generic check at
// submit, for ops and kernel tasks alike, naming the task and the tensor.
TEST(Validation, AnOutputWhoseElementsShareMemoryIsRefusedForEveryOp) {
  loom::Runtime rt(cpu_options());
  std::vector<float> one(1);
  auto expanded =
      rt.provide(one.data(), loom::DType::f32, {8}, loom::Memory::pageable, loom::Strides{0});
  loom::Graph g;
  g.add(loom::kernel_task(
      "broadcast into", {}, {expanded}, [](loom::KernelContext&) {}, [] {}));
  try {
    (void)rt.submit(g);
    FAIL() << "a kernel task writing an expanded view was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_EQ(e.task(), "broadcast into");
    const std::string what = e.what();
    EXPECT_NE(what.find("share memory"), std::string::npos) << what;
    EXPECT_NE(what.find(expanded.describe()), std::string::npos) << what;
  }
  // Legitimate outputs stay accepted: a transpose, a slice with a step, a
  // tensor with an extent of 1 and any stride there.
  auto m = rt.tensor<float>({4, 6});
  auto row =
      rt.provide(one.data(), loom::DType::f32, {1, 1}, loom::Memory::pageable, loom::Strides{0, 0});
  loom::Graph ok;
  ok.add(loom::kernel_task(
      "fine", {}, {m.transpose(0, 1), row}, [](loom::KernelContext&) {}, [] {}));
  EXPECT_NO_THROW(rt.submit(ok).wait());
}

// A tensor that Graph::intermediate made for another graph is that graph's:
// until that graph is submitted or compiled it has no memory, and a graph
// that uses it first is refused, by the task's name.
TEST(Validation, AnotherGraphsUnboundIntermediateIsRefusedNamingTheTask) {
  loom::Runtime rt(cpu_options());
  loom::Graph a;
  auto scratch = a.intermediate(loom::DType::f32, {16});
  a.add(loom::ops::fill(scratch, 1.0F));
  auto out = rt.tensor<float>({16});
  loom::Graph b;
  b.copy(scratch, out, {.name = "borrow"});
  for (int compile = 0; compile < 2; ++compile) {
    try {
      if (compile != 0) {
        (void)rt.compile(b);
      } else {
        rt.submit(b).wait();
      }
      FAIL() << "a foreign, unbound intermediate was accepted";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "borrow") << e.what();
      EXPECT_NE(std::string(e.what()).find("intermediate of another graph"), std::string::npos)
          << e.what();
    }
  }
  // Once its own graph has given it memory, it is a tensor like any other.
  rt.submit(a).wait();
  rt.submit(b).wait();
  EXPECT_EQ(out.data_as<float>()[15], 1.0F);
}

// Names are unique for real: a user's own "load#1" beside generated ones.
TEST(TaskNames, AreUniqueWhateverTheOrder) {
  const std::vector<std::vector<std::string>> orders = {
      {"load", "load#1", "load", "load#1"},
      {"load#1", "load", "load", "load#1"},
      {"load", "load", "load#1", "load#1", "load#1#1", "load"},
      {"load#2", "load", "load", "load", "load#1"},
  };
  for (const auto& order : orders) {
    loom::Graph g;
    for (const auto& n : order) g.host([] {}, {}, {}, {.name = n});
    auto renamed = g.host([] {});
    renamed.name("load");
    std::set<std::string> names;
    for (const auto& t : g.tasks()) names.insert(t.name);
    EXPECT_EQ(names.size(), g.tasks().size()) << "two tasks share a name, order " << order[0];
    EXPECT_EQ(g.tasks()[0].name, order[0]) << "the first keeps its name";
    loom::Runtime rt(cpu_options());
    std::set<std::string> reported;
    for (const auto& r : rt.submit(g).report()) reported.insert(r.name);
    EXPECT_EQ(reported.size(), g.tasks().size());
  }
}

}  // namespace
