// Graph building: inferred hazards, explicit edges, cycles and validation
// messages; the plan's stream assignment and event elimination.
#include "sched/plan.hpp"

#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <set>
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

TEST_F(GraphTest, PlanSpreadsFanOutAndJoinsWithOneEventPerCrossingEdge) {
  Graph g;
  auto src = g.add(loom::ops::fill(x, 1));
  std::vector<loom::Tensor> outs;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(rt.tensor<float>({64}));
    g.add(loom::ops::scale_copy(x, outs.back(), static_cast<float>(i)));
  }
  auto sum = rt.tensor<float>({64});
  g.add(loom::ops::vector_add(outs[0], outs[1], sum));
  const auto plan = device_plan(g);
  std::set<int> branch_streams;
  for (std::uint32_t i = 1; i <= 4; ++i) branch_streams.insert(plan.tasks[i].stream);
  EXPECT_EQ(branch_streams.size(), 4U) << "independent branches on distinct streams";
  EXPECT_EQ(plan.tasks[1].stream, plan.tasks[src.index].stream) << "the first branch continues";
  // 3 branches wait on the source; the join waits on one of its two inputs.
  EXPECT_EQ(plan.cross_stream_waits, 4U);
  EXPECT_TRUE(plan.tasks[src.index].record_event);
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

TEST_F(GraphTest, PlanBoundsTheStreamsAndSeparatesPriorities) {
  Graph g;
  std::vector<loom::Tensor> ts;
  for (int i = 0; i < 12; ++i) {
    ts.push_back(rt.tensor<float>({4}));
    g.add(loom::ops::fill(ts.back(), 1),
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
