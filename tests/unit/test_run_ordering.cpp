// RunOrdering alone: which earlier runs a new run follows, from the byte
// spans each reads and writes.
#include "sched/run_ordering.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace {

using loom::detail::DataAccess;
using loom::detail::RunOrdering;

int storage_a = 0;
int storage_b = 0;

DataAccess rd(const void* s, std::uintptr_t lo, std::uintptr_t hi) { return {s, lo, hi, false}; }
DataAccess wr(const void* s, std::uintptr_t lo, std::uintptr_t hi) { return {s, lo, hi, true}; }

std::vector<RunOrdering::RunId> enter(RunOrdering& o, int& id, std::vector<DataAccess> acc) {
  std::vector<RunOrdering::RunId> after;
  o.enter(&id, acc, after);
  return after;
}

TEST(RunOrderingRules, ConflictsAreReadWriteOrWriteWriteOnOverlappingBytes) {
  RunOrdering o;
  int r1 = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0;
  EXPECT_TRUE(enter(o, r1, {wr(&storage_a, 0, 100)}).empty());
  EXPECT_EQ(enter(o, r2, {rd(&storage_a, 50, 60)}), std::vector<RunOrdering::RunId>{&r1});
  EXPECT_EQ(enter(o, r3, {rd(&storage_a, 0, 10)}), std::vector<RunOrdering::RunId>{&r1})
      << "readers do not follow readers";
  EXPECT_TRUE(enter(o, r4, {wr(&storage_a, 100, 200), wr(&storage_b, 0, 8)}).empty())
      << "disjoint bytes, other storage";
  auto after = enter(o, r5, {wr(&storage_a, 0, 200)});
  std::sort(after.begin(), after.end());
  std::vector<RunOrdering::RunId> expected{&r1, &r2, &r3, &r4};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(after, expected);
}

TEST(RunOrderingRules, ACoveringWriteReplacesWhatItCoversAndLeaveForgets) {
  RunOrdering o;
  int r1 = 0, r2 = 0, r3 = 0;
  enter(o, r1, {rd(&storage_a, 0, 10)});
  enter(o, r2, {wr(&storage_a, 0, 100)});
  EXPECT_EQ(enter(o, r3, {rd(&storage_a, 0, 5)}), std::vector<RunOrdering::RunId>{&r2})
      << "follows the covering writer only (which follows the reader)";
  o.leave(&r2, {wr(&storage_a, 0, 100)});
  o.leave(&r3, {rd(&storage_a, 0, 5)});
  o.leave(&r1, {rd(&storage_a, 0, 10)});
  EXPECT_EQ(o.tracked_spaces(), 0U);
}

TEST(RunOrderingRules, ManyReadersStayCheap) {
  RunOrdering o;
  std::vector<int> ids(10000);
  for (auto& id : ids) enter(o, id, {rd(&storage_a, 0, 64)});
  int writer = 0;
  EXPECT_EQ(enter(o, writer, {wr(&storage_a, 0, 64)}).size(), ids.size());
  int reader = 0;
  EXPECT_EQ(enter(o, reader, {rd(&storage_a, 0, 64)}).size(), 1U) << "the writer pruned them";
}

}  // namespace
