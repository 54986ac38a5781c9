// RunOrdering alone: which earlier runs a new run follows, from the byte
// spans each reads and writes.
#include "sched/run_ordering.hpp"
#include "support/seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <tuple>
#include <vector>

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

TEST(RunOrderingSummary, ReadsInsideTheRunsWritesAreDroppedAndSpansMerged) {
  using loom::detail::summarize;
  const auto s = summarize({rd(&storage_a, 10, 20), wr(&storage_a, 0, 32), rd(&storage_a, 30, 40),
                            wr(&storage_a, 32, 48), rd(&storage_a, 64, 72), rd(&storage_a, 72, 80),
                            rd(&storage_b, 0, 8), wr(&storage_b, 16, 24)});
  const std::vector<std::tuple<const void*, std::uintptr_t, std::uintptr_t, bool>> expected{
      {&storage_a, 0, 48, true},    // touching writes merged; reads at 10 and 30 inside them
      {&storage_a, 64, 80, false},  // touching reads merged
      {&storage_b, 16, 24, true},
      {&storage_b, 0, 8, false}};  // a read outside the space's write stays
  std::vector<std::tuple<const void*, std::uintptr_t, std::uintptr_t, bool>> got;
  for (const auto& a : s) got.emplace_back(a.space, a.lo, a.hi, a.write);
  std::sort(got.begin(), got.end());
  auto want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(summarize({rd(&storage_a, 0, 40), wr(&storage_a, 0, 32)}).size(), 2U)
      << "a read reaching past the write is kept";
  EXPECT_TRUE(summarize({}).empty());
}

// A run's summary conflicts with exactly what its accesses conflict with.
TEST(RunOrderingSummary, ConflictsAsTheAccessesDo) {
  std::mt19937_64 rng(loom::test::fresh_seed());
  const std::array<const void*, 2> spaces{&storage_a, &storage_b};
  const auto random_access = [&] {
    const std::uintptr_t lo = rng() % 128;
    return DataAccess{spaces[rng() % 2], lo, lo + 1 + rng() % 24, rng() % 2 == 0};
  };
  const auto conflicts = [](const std::vector<DataAccess>& x, const DataAccess& p) {
    return std::any_of(x.begin(), x.end(), [&](const DataAccess& a) {
      return a.space == p.space && a.lo < p.hi && p.lo < a.hi && (a.write || p.write);
    });
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<DataAccess> accesses;
    const int count = static_cast<int>(rng() % 12);
    for (int k = 0; k < count; ++k) accesses.push_back(random_access());
    const auto summary = loom::detail::summarize(accesses);
    ASSERT_LE(summary.size(), accesses.size());
    for (std::size_t i = 1; i < summary.size(); ++i) {
      const auto& a = summary[i - 1];
      const auto& b = summary[i];
      ASSERT_TRUE(std::tuple(a.space, a.lo) <= std::tuple(b.space, b.lo))
          << "sorted by space, then start";
    }
    for (int probe = 0; probe < 50; ++probe) {
      const DataAccess p = random_access();
      ASSERT_EQ(conflicts(summary, p), conflicts(accesses, p)) << "trial " << trial;
    }
  }
}

// Against a brute-force model, over random runs entering and leaving: every
// run a new run is told to follow truly conflicts with it, and every earlier
// unfinished run it conflicts with is reached through those answers (the
// pruning of covered accesses leans on ordering being transitive).
TEST(RunOrderingRules, RandomRunsAgreeWithTheBruteForceModel) {
  std::mt19937_64 rng(loom::test::fresh_seed());
  const std::array<const void*, 2> spaces{&storage_a, &storage_b};
  struct Live {
    int id;
    std::vector<DataAccess> accesses;  // as the run's tasks made them
    std::vector<DataAccess> entered;   // summarized, as a prepared graph holds them
    std::vector<RunOrdering::RunId> after;
  };
  const auto conflict = [](const std::vector<DataAccess>& x, const std::vector<DataAccess>& y) {
    for (const auto& a : x) {
      for (const auto& b : y) {
        if (a.space == b.space && a.lo < b.hi && b.lo < a.hi && (a.write || b.write)) return true;
      }
    }
    return false;
  };
  RunOrdering o;
  std::vector<int> ids(4000);
  std::vector<Live> live;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      // Runs leave in an order their edges allow: one that follows no live run.
      for (std::size_t i = 0; i < live.size(); ++i) {
        const bool free = std::none_of(live[i].after.begin(), live[i].after.end(), [&](auto r) {
          return std::any_of(live.begin(), live.end(),
                             [&](const Live& l) { return &ids[l.id] == r; });
        });
        if (!free) continue;
        o.leave(&ids[live[i].id], live[i].entered);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      continue;
    }
    std::vector<DataAccess> accesses;
    const int count = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < count; ++k) {
      // Mostly short spans, now and then a long one: the bound on how far
      // back a query starts grows and shrinks.
      const std::uintptr_t lo = rng() % 256;
      const std::uintptr_t length = 1 + (rng() % 8 == 0 ? rng() % 200 : rng() % 16);
      accesses.push_back({spaces[rng() % 2], lo, lo + length, rng() % 2 == 0});
    }
    // Entered summarized (reads inside the run's writes dropped, spans
    // merged), checked against the accesses as made.
    Live run{step, accesses, loom::detail::summarize(accesses), {}};
    o.enter(&ids[step], run.entered, run.after);
    for (auto r : run.after) {
      const auto it =
          std::find_if(live.begin(), live.end(), [&](const Live& l) { return &ids[l.id] == r; });
      ASSERT_NE(it, live.end()) << "step " << step << ": follows a run that left";
      EXPECT_TRUE(conflict(it->accesses, accesses))
          << "step " << step << ": no conflict with " << it->id;
    }
    // Reached: the live runs the new one follows, and theirs, transitively.
    std::vector<RunOrdering::RunId> reached = run.after;
    for (std::size_t i = 0; i < reached.size(); ++i) {
      const auto it = std::find_if(live.begin(), live.end(),
                                   [&](const Live& l) { return &ids[l.id] == reached[i]; });
      if (it == live.end()) continue;  // it left: so did all it followed
      for (auto r : it->after) {
        if (std::find(reached.begin(), reached.end(), r) == reached.end()) reached.push_back(r);
      }
    }
    for (const auto& l : live) {
      if (!conflict(l.accesses, accesses)) continue;
      EXPECT_NE(std::find(reached.begin(), reached.end(), &ids[l.id]), reached.end())
          << "step " << step << ": conflicts with live run " << l.id << " but does not follow it";
    }
    live.push_back(std::move(run));
  }
  for (const auto& l : live) o.leave(&ids[l.id], l.accesses);
  EXPECT_EQ(o.tracked_spaces(), 0U);
}

}  // namespace
