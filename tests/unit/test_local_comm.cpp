// The local backend (comm.hpp): P ranks as threads of one process, each
// with a CPU Runtime of its own; collectives as graph tasks, checked against
// references computed here, in submission order, failing by name and in
// bounded time when ranks disagree or one does not come. And the local
// backend as world_communicator's choice outside mpirun (LOOM_COMM).
#include "support/ranks.hpp"
#include "support/seed.hpp"

#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::CommOptions;
using loom::Communicator;
using loom::ReduceOp;

loom::Runtime cpu_runtime() {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  o.workers = 2;
  return loom::Runtime(o);
}

// Runs body(rank, comm, runtime) on one thread a rank, a CPU runtime each.
void on_ranks(const std::vector<std::shared_ptr<Communicator>>& comms,
              const std::function<void(int, Communicator&, loom::Runtime&)>& body) {
  loom::RuntimeOptions o;
  o.backend = loom::Backend::cpu;
  o.workers = 2;
  loom::test::on_ranks(comms, o, body);
}

// Rank r's values: distinct across ranks, fresh each test.
std::vector<std::int32_t> ints_of(std::uint64_t seed, int rank, std::int64_t n) {
  std::mt19937_64 rng(seed + static_cast<std::uint64_t>(rank) * 7919U);
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<std::int32_t>(rng() % 2001) - 1000;
  return v;
}

std::vector<float> floats_of(std::uint64_t seed, int rank, std::int64_t n) {
  std::mt19937_64 rng(seed + static_cast<std::uint64_t>(rank) * 104729U);
  std::uniform_real_distribution<float> d(-1.0F, 1.0F);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

template <class T>
loom::Tensor tensor_of(loom::Runtime& rt, const std::vector<T>& values) {
  auto t = rt.tensor<T>({static_cast<std::int64_t>(values.size())});
  std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values_of(const loom::Tensor& t) {
  std::vector<T> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

template <class T>
void poison(const loom::Tensor& t) {
  std::fill_n(t.data_as<T>(), t.numel(), static_cast<T>(-77));
}

class LocalComm : public ::testing::TestWithParam<int> {};

TEST_P(LocalComm, AllReduceIsExactForIntegersAndWithinRoundingForFloats) {
  const int p = GetParam();
  const std::uint64_t seed = loom::test::fresh_seed();
  constexpr std::int64_t n = 1031;
  on_ranks(loom::local_communicators(p), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), p);
    EXPECT_EQ(comm.backend(), "local");
    auto ints = tensor_of(rt, ints_of(seed, rank, n));
    auto floats = tensor_of(rt, floats_of(seed, rank, n));
    std::vector<loom::Tensor> outs;
    loom::Graph g;
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      outs.push_back(rt.tensor<std::int32_t>({n}));
      poison<std::int32_t>(outs.back());
      g.collective(comm.all_reduce(ints, outs.back(), op));
    }
    auto fsum = rt.tensor<float>({n});
    poison<float>(fsum);
    g.collective(comm.all_reduce(floats, fsum));
    rt.submit(g).wait();
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t sum = 0;
      std::int32_t hi = -100000;
      std::int32_t lo = 100000;
      double fs = 0;
      for (int q = 0; q < p; ++q) {
        const auto v = ints_of(seed, q, n)[static_cast<std::size_t>(i)];
        sum += v;
        hi = std::max(hi, v);
        lo = std::min(lo, v);
        fs += floats_of(seed, q, n)[static_cast<std::size_t>(i)];
      }
      ASSERT_EQ(outs[0].data_as<std::int32_t>()[i], sum) << i;
      ASSERT_EQ(outs[1].data_as<std::int32_t>()[i], hi) << i;
      ASSERT_EQ(outs[2].data_as<std::int32_t>()[i], lo) << i;
      ASSERT_NEAR(fsum.data_as<float>()[i], fs, 1e-5 * p) << i;
    }
  });
}

TEST_P(LocalComm, FloatSumsAreEqualOnEveryRank) {
  const int p = GetParam();
  const std::uint64_t seed = loom::test::fresh_seed();
  constexpr std::int64_t n = 4099;
  std::vector<std::vector<float>> results(static_cast<std::size_t>(p));
  on_ranks(loom::local_communicators(p), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto x = tensor_of(rt, floats_of(seed, rank, n));
    loom::Graph g;
    g.collective(comm.all_reduce(x, x));  // in place
    rt.submit(g).wait();
    results[static_cast<std::size_t>(rank)] = values_of<float>(x);
  });
  for (int r = 1; r < p; ++r) {
    EXPECT_EQ(std::memcmp(results[0].data(), results[static_cast<std::size_t>(r)].data(),
                          results[0].size() * sizeof(float)),
              0)
        << "rank " << r << " holds another sum than rank 0";
  }
}

TEST_P(LocalComm, GatherScatterBroadcastAndRing) {
  const int p = GetParam();
  const std::uint64_t seed = loom::test::fresh_seed();
  constexpr std::int64_t n = 257;
  on_ranks(loom::local_communicators(p), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto mine = tensor_of(rt, ints_of(seed, rank, n));
    auto gathered = rt.tensor<std::int32_t>({p * n});
    auto big = tensor_of(rt, ints_of(seed, rank, p * n));
    auto scattered = rt.tensor<std::int32_t>({n});
    auto shared = tensor_of(rt, ints_of(seed, rank, n));
    auto received = rt.tensor<std::int32_t>({n});
    poison<std::int32_t>(gathered);
    poison<std::int32_t>(scattered);
    poison<std::int32_t>(received);
    const int root = p - 1;
    loom::Graph g;
    g.collective(comm.all_gather(mine, gathered));
    g.collective(comm.reduce_scatter(big, scattered, ReduceOp::max));
    g.collective(comm.broadcast(shared, root));
    g.collective(comm.ring_exchange(mine, received));
    rt.submit(g).wait();
    for (int q = 0; q < p; ++q) {
      const auto theirs = ints_of(seed, q, n);
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(gathered.data_as<std::int32_t>()[q * n + i], theirs[static_cast<std::size_t>(i)]);
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      std::int32_t hi = -100000;
      for (int q = 0; q < p; ++q) {
        hi = std::max(hi, ints_of(seed, q, p * n)[static_cast<std::size_t>(rank * n + i)]);
      }
      ASSERT_EQ(scattered.data_as<std::int32_t>()[i], hi) << i;
      ASSERT_EQ(shared.data_as<std::int32_t>()[i],
                ints_of(seed, root, n)[static_cast<std::size_t>(i)]);
      ASSERT_EQ(received.data_as<std::int32_t>()[i],
                ints_of(seed, (rank + p - 1) % p, n)[static_cast<std::size_t>(i)]);
    }
  });
}

// Independent collectives of one communicator, in one graph and across runs
// submitted without waiting, keep the order they were submitted in on every
// rank (they would otherwise meet other ranks' collectives in another order).
TEST_P(LocalComm, CollectivesKeepTheirSubmissionOrder) {
  const int p = GetParam();
  constexpr int k = 6;
  on_ranks(loom::local_communicators(p, {.timeout = std::chrono::seconds(20)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             std::vector<loom::Tensor> xs;
             std::vector<loom::Future> runs;
             for (int run = 0; run < 2; ++run) {
               loom::Graph g;
               for (int i = 0; i < k; ++i) {
                 // Sizes differ, so a collective met out of order is a disagreement.
                 xs.push_back(tensor_of(
                     rt, std::vector<std::int32_t>(static_cast<std::size_t>(10 + i), rank + i)));
                 g.collective(comm.all_reduce(xs.back(), xs.back()));
               }
               runs.push_back(rt.submit(g));
             }
             for (auto& f : runs) f.wait();
             for (int j = 0; j < 2 * k; ++j) {
               const int i = j % k;
               for (auto v : values_of<std::int32_t>(xs[static_cast<std::size_t>(j)])) {
                 ASSERT_EQ(v, p * i + p * (p - 1) / 2);
               }
             }
           });
}

// A ring of sends and recvs: rank 0 sends first, every other rank receives
// first (a send waits for its recv, so all sending first would wait).
TEST_P(LocalComm, SendsMeetTheirRecvsInOrder) {
  const int p = GetParam();
  if (p < 2) GTEST_SKIP() << "a send needs another rank";
  const std::uint64_t seed = loom::test::fresh_seed();
  constexpr std::int64_t n = 333;
  on_ranks(loom::local_communicators(p), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto first = tensor_of(rt, ints_of(seed, rank, n));
    auto second = tensor_of(rt, ints_of(seed + 1, rank, n));
    auto got_first = rt.tensor<std::int32_t>({n});
    auto got_second = rt.tensor<std::int32_t>({n});
    poison<std::int32_t>(got_first);
    poison<std::int32_t>(got_second);
    const int next = (rank + 1) % p;
    const int prev = (rank + p - 1) % p;
    loom::Graph g;
    if (rank == 0) {
      g.collective(comm.send(first, next));
      g.collective(comm.send(second, next));
      g.collective(comm.recv(got_first, prev));
      g.collective(comm.recv(got_second, prev));
    } else {
      g.collective(comm.recv(got_first, prev));
      g.collective(comm.recv(got_second, prev));
      g.collective(comm.send(first, next));
      g.collective(comm.send(second, next));
    }
    rt.submit(g).wait();
    EXPECT_EQ(values_of<std::int32_t>(got_first), ints_of(seed, prev, n));
    EXPECT_EQ(values_of<std::int32_t>(got_second), ints_of(seed + 1, prev, n));
  });
}

// The README: all_reduce's "sum, max, min over f32, i32, i64, i8, u8" (the
// test above covers i32 and the f32 sum): the other dtypes, exact, and the
// f32 max and min, exact too.
TEST_P(LocalComm, AllReduceOfEveryDtypeAndReduction) {
  const int p = GetParam();
  const std::uint64_t seed = loom::test::fresh_seed();
  constexpr std::int64_t n = 131;
  // Small values, so that no sum of four ranks overflows an i8 or a u8.
  const auto value = [&](int rank, std::int64_t i) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(rank * 1000003 + i));
    return static_cast<int>(rng() % 61) - 30;
  };
  const auto check = [&]<class T>(loom::Runtime& rt, Communicator& comm, int rank, int offset) {
    std::vector<T> mine(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      mine[static_cast<std::size_t>(i)] = static_cast<T>(value(rank, i) + offset);
    }
    auto in = tensor_of(rt, mine);
    std::vector<loom::Tensor> outs;
    loom::Graph g;
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      outs.push_back(rt.tensor<T>({n}));
      poison<T>(outs.back());
      g.collective(comm.all_reduce(in, outs.back(), op));
    }
    rt.submit(g).wait();
    for (std::int64_t i = 0; i < n; ++i) {
      T sum = 0;
      T hi = static_cast<T>(value(0, i) + offset);
      T lo = hi;
      for (int q = 0; q < p; ++q) {
        const auto v = static_cast<T>(value(q, i) + offset);
        sum = static_cast<T>(sum + v);
        hi = std::max(hi, v);
        lo = std::min(lo, v);
      }
      ASSERT_EQ(outs[0].data_as<T>()[i], sum) << i;
      ASSERT_EQ(outs[1].data_as<T>()[i], hi) << i;
      ASSERT_EQ(outs[2].data_as<T>()[i], lo) << i;
    }
  };
  on_ranks(loom::local_communicators(p), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    check.template operator()<std::int64_t>(rt, comm, rank, 1 << 20);
    check.template operator()<std::int8_t>(rt, comm, rank, 0);
    check.template operator()<std::uint8_t>(rt, comm, rank, 30);
    check.template operator()<float>(rt, comm, rank, 0);  // integers: every sum exact
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalComm, ::testing::Values(1, 2, 3, 4));

// The README: "The local backend adds a float sum's ranks in rank order":
// 1e8 + 1 rounds back to 1e8 in f32, so ranks holding 1e8, 1, -1e8, 1 sum
// to exactly 1 in rank order, and to 0 or 2 in most others.
TEST(LocalCommOrder, AFloatSumAddsTheRanksInRankOrder) {
  const float values[] = {1e8F, 1.0F, -1e8F, 1.0F};
  const float in_rank_order = ((values[0] + values[1]) + values[2]) + values[3];
  ASSERT_EQ(in_rank_order, 1.0F);
  on_ranks(loom::local_communicators(4), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto x = tensor_of(rt, std::vector<float>(3, values[rank]));
    loom::Graph g;
    g.collective(comm.all_reduce(x, x));
    rt.submit(g).wait();
    for (float v : values_of<float>(x)) EXPECT_EQ(v, in_rank_order) << "rank " << rank;
  });
}

// The README: compile "refuses the other backends' collectives, naming the
// task"; the same graph still runs eagerly.
TEST(LocalCommCompile, CompileRefusesALocalCollectiveNamingTheTask) {
  on_ranks(loom::local_communicators(1), [&](int, Communicator& comm, loom::Runtime& rt) {
    auto x = tensor_of(rt, std::vector<float>(8, 2.0F));
    loom::Graph g;
    g.collective(comm.all_reduce(x, x), {.name = "grads"});
    try {
      (void)rt.compile(g);
      ADD_FAILURE() << "a local collective was compiled";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "grads") << e.what();
    }
    rt.submit(g).wait();
    for (float v : values_of<float>(x)) EXPECT_EQ(v, 2.0F);
  });
}

TEST(LocalCommErrors, ASendAndARecvThatDisagreeBothFail) {
  on_ranks(loom::local_communicators(2, {.timeout = std::chrono::seconds(20)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             auto x = rt.tensor<float>({rank == 0 ? 16 : 8});
             loom::Graph g;
             if (rank == 0) {
               g.collective(comm.send(x, 1), {.name = "halo out"});
             } else {
               g.collective(comm.recv(x, 0), {.name = "halo in"});
             }
             try {
               rt.submit(g).wait();
               ADD_FAILURE() << "rank " << rank << ": mismatched sizes went through";
             } catch (const loom::CommError& e) {
               EXPECT_EQ(e.task(), rank == 0 ? "halo out" : "halo in");
               EXPECT_NE(std::string(e.what()).find("rank 0 sent 64 bytes of f32, rank 1 expected "
                                                    "32 bytes of f32"),
                         std::string::npos)
                   << e.what();
             }
           });
}

TEST(LocalCommErrors, ASendNobodyReceivesFailsInBoundedTime) {
  on_ranks(loom::local_communicators(2, {.timeout = std::chrono::milliseconds(200)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             if (rank == 1) return;
             auto x = rt.tensor<float>({4});
             loom::Graph g;
             g.collective(comm.send(x, 1), {.name = "orphan"});
             try {
               rt.submit(g).wait();
               ADD_FAILURE() << "a send without a recv finished";
             } catch (const loom::CommError& e) {
               EXPECT_EQ(e.task(), "orphan");
               EXPECT_NE(std::string(e.what()).find("rank 1 did not receive it"), std::string::npos)
                   << e.what();
             }
           });
}

// A recv that timed out would take the pair's next send: instead the pair's
// later sends and recvs fail at once, saying why, and other pairs go on.
TEST(LocalCommErrors, ARecvThatTimesOutBreaksItsPairOnly) {
  std::barrier timed_out(3);
  on_ranks(loom::local_communicators(3, {.timeout = std::chrono::milliseconds(200)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             auto x = rt.tensor<float>({4});
             std::fill_n(x.data_as<float>(), 4, static_cast<float>(rank));
             if (rank == 1) {
               loom::Graph g;
               g.collective(comm.recv(x, 0), {.name = "early recv"});
               EXPECT_THROW(rt.submit(g).wait(), loom::CommError);
             }
             timed_out.arrive_and_wait();
             loom::Graph late;
             if (rank == 0) late.collective(comm.send(x, 1), {.name = "late send"});
             if (rank == 1) late.collective(comm.recv(x, 0), {.name = "next recv"});
             if (rank != 2) {
               try {
                 rt.submit(late).wait();
                 ADD_FAILURE() << "rank " << rank << ": the broken pair moved a message";
               } catch (const loom::CommError& e) {
                 EXPECT_NE(std::string(e.what()).find("out of order"), std::string::npos)
                     << e.what();
               }
             }
             // Ranks 2 -> 1 still work.
             loom::Graph other;
             if (rank == 2) other.collective(comm.send(x, 1));
             if (rank == 1) other.collective(comm.recv(x, 2));
             if (rank != 0) {
               rt.submit(other).wait();
               if (rank == 1) {
                 EXPECT_EQ(x.data_as<float>()[0], 2.0F);
               }
             }
           });
}

TEST(LocalCommErrors, RanksThatDisagreeAllFailSayingHow) {
  std::atomic<int> failed{0};
  on_ranks(loom::local_communicators(2, {.timeout = std::chrono::seconds(20)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             auto x = rt.tensor<float>({rank == 0 ? 16 : 8});
             loom::Graph g;
             g.collective(comm.all_reduce(x, x), {.name = "grads"});
             try {
               rt.submit(g).wait();
               ADD_FAILURE() << "rank " << rank << ": a size mismatch between ranks ran";
             } catch (const loom::CommError& e) {
               EXPECT_EQ(e.task(), "grads") << e.what();
               const std::string what = e.what();
               EXPECT_NE(what.find("disagree"), std::string::npos) << what;
               EXPECT_NE(what.find("16"), std::string::npos) << what;
               EXPECT_NE(what.find("8"), std::string::npos) << what;
               ++failed;
             }
           });
  EXPECT_EQ(failed.load(), 2);
}

// One way the last rank can disagree with the others on a collective: what
// each rank calls, and what the error must say (the others' side and its).
struct Disagreement {
  std::string on;
  std::function<loom::CollectivePtr(bool odd, const Communicator&, loom::Runtime&)> call;
  std::vector<std::string> says;
};

std::vector<Disagreement> disagreements() {
  return {
      {"collective",
       [](bool odd, const Communicator& c, loom::Runtime& rt) {
         auto x = rt.tensor<float>({8});
         return odd ? c.all_gather(x, rt.tensor<float>({8 * c.size()})) : c.all_reduce(x, x);
       },
       {"all_reduce of 8 f32", "all_gather of 8 f32"}},
      {"dtype",
       [](bool odd, const Communicator& c, loom::Runtime& rt) {
         auto x = odd ? rt.tensor<std::int32_t>({8}) : rt.tensor<float>({8});
         return c.all_reduce(x, x);
       },
       {"all_reduce of 8 f32", "all_reduce of 8 i32"}},
      {"root",
       [](bool odd, const Communicator& c, loom::Runtime& rt) {
         return c.broadcast(rt.tensor<float>({8}), odd ? 1 : 0);
       },
       {"broadcast of 8 f32 from rank 0", "broadcast of 8 f32 from rank 1"}},
      {"reduction",
       [](bool odd, const Communicator& c, loom::Runtime& rt) {
         auto x = rt.tensor<float>({8});
         return c.all_reduce(x, x, odd ? ReduceOp::max : ReduceOp::sum);
       },
       {"all_reduce of 8 f32 (sum)", "all_reduce of 8 f32 (max)"}},
  };
}

// Only the last rank differs: the ranks that agree with each other fail too,
// each under its own task's name, and all stay in step for the next one.
TEST(LocalCommErrors, RanksThatDisagreeOnTheCollectiveDtypeRootOrReductionAllFailSayingHow) {
  constexpr int kRanks = 3;
  const auto cases = disagreements();
  std::atomic<int> failed{0};
  on_ranks(loom::local_communicators(kRanks, {.timeout = std::chrono::seconds(20)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             for (const auto& c : cases) {
               const std::string task = c.on + " on rank " + std::to_string(rank);
               loom::Graph g;
               g.collective(c.call(rank == kRanks - 1, comm, rt), {.name = task});
               try {
                 rt.submit(g).wait();
                 ADD_FAILURE() << task << ": ranks that disagree on the " << c.on << " ran";
               } catch (const loom::CommError& e) {
                 EXPECT_EQ(e.task(), task) << e.what();
                 const std::string what = e.what();
                 EXPECT_NE(what.find("disagree"), std::string::npos) << what;
                 EXPECT_NE(what.find("rank " + std::to_string(kRanks - 1)), std::string::npos)
                     << what;
                 for (const auto& s : c.says) EXPECT_NE(what.find(s), std::string::npos) << what;
                 ++failed;
               }
               auto y = tensor_of(rt, std::vector<std::int32_t>(4, rank + 1));
               loom::Graph next;
               next.collective(comm.all_reduce(y, y), {.name = "after the " + c.on});
               rt.submit(next).wait();
               for (auto v : values_of<std::int32_t>(y)) ASSERT_EQ(v, 1 + 2 + 3) << c.on;
             }
           });
  EXPECT_EQ(failed.load(), kRanks * static_cast<int>(cases.size()));
}

// The ranks that came fail naming rank 1 among those missing (a rank that
// comes after another has already given up waits on its own, and names
// that one too: on a slow machine ranks 0 and 2 need not overlap).
TEST(LocalCommErrors, ARankThatNeverComesFailsTheOthersInBoundedTime) {
  on_ranks(
      loom::local_communicators(3, {.timeout = std::chrono::milliseconds(1000)}),
      [&](int rank, Communicator& comm, loom::Runtime& rt) {
        if (rank == 1) return;  // leaves early
        auto x = rt.tensor<float>({4});
        loom::Graph g;
        g.collective(comm.all_reduce(x, x), {.name = "step"});
        try {
          rt.submit(g).wait();
          ADD_FAILURE() << "rank " << rank << ": an all-reduce without rank 1 finished";
        } catch (const loom::CommError& e) {
          EXPECT_EQ(e.task(), "step");
          const std::string what = e.what();
          const auto from = what.find("rank(s)");
          const auto to = what.find(" did not reach");
          ASSERT_NE(from, std::string::npos) << what;
          ASSERT_NE(to, std::string::npos) << what;
          const std::string missing = what.substr(from + 7, to - from - 7) + " ";
          EXPECT_NE(missing.find(" 1 "), std::string::npos) << what;
          EXPECT_EQ(missing.find(std::string(" ") + std::to_string(rank) + " "), std::string::npos)
              << "a rank that came is not missing: " << what;
        }
      });
}

TEST(LocalCommErrors, ARankWhoseGraphFailsFirstFailsTheOthersInBoundedTime) {
  on_ranks(loom::local_communicators(2, {.timeout = std::chrono::milliseconds(300)}),
           [&](int rank, Communicator& comm, loom::Runtime& rt) {
             auto x = rt.tensor<float>({4});
             loom::Graph g;
             if (rank == 0) {
               g.host("loss", [] { throw std::runtime_error("nan in the loss"); }, {}, {x});
             }
             g.collective(comm.all_reduce(x, x), {.name = "grads"});
             try {
               rt.submit(g).wait();
               ADD_FAILURE() << "rank " << rank << " finished";
             } catch (const loom::Error& e) {
               const std::string what = e.what();
               if (rank == 0) {
                 EXPECT_NE(what.find("nan in the loss"), std::string::npos) << what;
               } else {
                 EXPECT_NE(what.find("rank(s) 0 did not reach"), std::string::npos) << what;
               }
             }
           });
}

TEST(LocalCommSplit, ColoursMakeGroupsOrderedByKey) {
  on_ranks(loom::local_communicators(4), [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto sub = comm.split(rank % 2, -rank);
    ASSERT_EQ(sub->size(), 2);
    // Keys -rank: the higher old rank comes first.
    EXPECT_EQ(sub->rank(), rank < 2 ? 1 : 0) << "rank " << rank;
    auto x = tensor_of(rt, std::vector<std::int32_t>(5, rank));
    loom::Graph g;
    g.collective(sub->all_reduce(x, x));
    rt.submit(g).wait();
    const int partner = rank % 2 == 0 ? (rank == 0 ? 2 : 0) : (rank == 1 ? 3 : 1);
    for (auto v : values_of<std::int32_t>(x)) ASSERT_EQ(v, rank + partner);
  });
}

TEST(LocalCommErrors, BadCallsAreRefusedWhenBuilt) {
  auto rt = cpu_runtime();
  auto comms = loom::local_communicators(2);
  auto& c = *comms[0];
  auto f = rt.tensor<float>({8});
  auto i = rt.tensor<std::int32_t>({8});
  auto small = rt.tensor<float>({4});
  EXPECT_THROW((void)c.all_reduce(f, i), loom::InvalidArgument) << "dtypes differ";
  EXPECT_THROW((void)c.all_reduce(f, small), loom::InvalidArgument) << "sizes differ";
  EXPECT_THROW((void)c.all_gather(f, f), loom::InvalidArgument) << "out must be 2x";
  EXPECT_THROW((void)c.reduce_scatter(f, f), loom::InvalidArgument) << "in must be 2x";
  EXPECT_THROW((void)c.broadcast(f, 2), loom::InvalidArgument) << "no rank 2";
  EXPECT_THROW((void)c.send(f, 0), loom::InvalidArgument) << "to itself";
  EXPECT_THROW((void)c.recv(f, 5), loom::InvalidArgument) << "no rank 5";
  EXPECT_THROW((void)c.ring_exchange(f, f.slice(0, 0, 8, 2)), loom::InvalidArgument);
  auto f16 = rt.tensor<loom::half>({8});
  EXPECT_THROW((void)c.all_reduce(f16, f16), loom::InvalidArgument) << "no f16 reduction";
  EXPECT_NO_THROW((void)c.all_gather(f16, rt.tensor<loom::half>({16})));
  EXPECT_THROW((void)loom::local_communicators(0), loom::InvalidArgument);
  EXPECT_THROW((void)loom::local_communicators(2, {.timeout = std::chrono::milliseconds(0)}),
               loom::InvalidArgument);
}

// world_communicator outside mpirun on the CPU backend, as LOOM_COMM (read
// in any case) picks it: ctest runs this once a setting (tests/CMakeLists.txt),
// LOOM_EXPECT_WORLD saying what should come of it.
TEST(WorldCommunicator, ChoosesItsBackendFromTheEnvironment) {
  const char* expect_env = std::getenv("LOOM_EXPECT_WORLD");
  if (expect_env == nullptr) GTEST_SKIP() << "run through ctest, which sets LOOM_EXPECT_WORLD";
  const std::string expect = expect_env;
  const char* choice = std::getenv("LOOM_COMM");
  auto rt = cpu_runtime();
  if (expect == "local") {
    auto world = loom::world_communicator(rt);
    ASSERT_EQ(world->backend(), "local");
    EXPECT_EQ(world->size(), 1);
    EXPECT_EQ(world->rank(), 0);
    // A usable communicator, not merely a named one: one rank's sum is its own.
    auto x = tensor_of(rt, std::vector<std::int32_t>{3, -4, 5});
    loom::Graph g;
    g.collective(world->all_reduce(x, x));
    rt.submit(g).wait();
    EXPECT_EQ(values_of<std::int32_t>(x), (std::vector<std::int32_t>{3, -4, 5}));
  } else if (expect == "invalid") {
    ASSERT_NE(choice, nullptr);
    try {
      (void)loom::world_communicator(rt);
      FAIL() << "LOOM_COMM=" << choice << " was taken";
    } catch (const loom::InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("LOOM_COMM='" + std::string(choice) + "'"), std::string::npos) << what;
      for (const char* allowed : {"nccl", "mpi", "local", "automatic"}) {
        EXPECT_NE(what.find(allowed), std::string::npos) << allowed << " unnamed: " << what;
      }
    }
  } else if (expect == "needs-gpu") {
    try {
      (void)loom::world_communicator(rt);
      FAIL() << "LOOM_COMM=" << (choice != nullptr ? choice : "") << " gave a CPU runtime nccl";
    } catch (const loom::CommError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("LOOM_COMM=nccl"), std::string::npos) << what;
      EXPECT_NE(what.find("GPU"), std::string::npos) << what;
    }
  } else {
    FAIL() << "LOOM_EXPECT_WORLD=" << expect << " is none of local, invalid and needs-gpu";
  }
}

}  // namespace
