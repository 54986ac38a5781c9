// The job's communicator under mpirun (world_communicator): every collective
// against a reference each rank computes for all ranks from one fresh seed,
// exact for integers and within rounding for floats; send/recv rings; splits;
// and the error paths (ranks that disagree, a rank that fails before a
// collective: the others fail within the timeout, saying why). Runs on the
// runtime's default memory: host tensors on the CPU backend, device tensors
// (the mpi backend staging them, or nccl) on a GPU.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "support/counting_new.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

loom::Runtime& runtime() {
  static loom::Runtime rt;
  return rt;
}

// One seed for the whole job, fresh each run, printed for a replay.
std::uint64_t job_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t s = std::random_device{}();
    MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return s;
  }();
  return seed;
}

// Rank r's input of n elements for test `salt`: the same on every rank that asks.
template <class T>
std::vector<T> input_of(int rank, std::int64_t n, int salt) {
  std::mt19937_64 gen(job_seed() * 1000003 + static_cast<std::uint64_t>(rank) * 7919 +
                      static_cast<std::uint64_t>(salt));
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = std::uniform_real_distribution<T>(-1, 1)(gen);
    } else if constexpr (std::is_signed_v<T>) {
      x = static_cast<T>(std::uniform_int_distribution<int>(-20, 20)(gen));
    } else {
      x = static_cast<T>(std::uniform_int_distribution<int>(0, 50)(gen));
    }
  }
  return v;
}

// A tensor in the runtime's default memory holding `values`.
template <class T>
loom::Tensor upload(const std::vector<T>& values) {
  auto& rt = runtime();
  const auto n = static_cast<std::int64_t>(values.size());
  auto host = rt.tensor<T>({n}, loom::Memory::pageable);
  std::copy(values.begin(), values.end(), host.template data_as<T>());
  if (!rt.default_memory().is_device()) return host;
  auto dev = rt.tensor<T>({n});
  rt.copy(host, dev).wait();
  return dev;
}

template <class T>
std::vector<T> download(const loom::Tensor& t) {
  auto& rt = runtime();
  auto host = rt.tensor<T>({t.numel()}, loom::Memory::pageable);
  rt.copy(t, host).wait();
  const T* p = host.template data_as<T>();
  return std::vector<T>(p, p + t.numel());
}

// An output poisoned first, so that an untouched one shows.
template <class T>
loom::Tensor poisoned(std::int64_t n) {
  return upload(std::vector<T>(static_cast<std::size_t>(n), static_cast<T>(77)));
}

template <class T>
T combine(T a, T b, loom::ReduceOp op) {
  switch (op) {
    case loom::ReduceOp::sum: return static_cast<T>(a + b);
    case loom::ReduceOp::max: return std::max(a, b);
    case loom::ReduceOp::min: return std::min(a, b);
  }
  return a;
}

// Element i combined over the ranks, in rank order.
template <class T>
std::vector<T> reduced(int ranks, std::int64_t n, int salt, loom::ReduceOp op) {
  std::vector<T> out = input_of<T>(0, n, salt);
  for (int r = 1; r < ranks; ++r) {
    const auto in = input_of<T>(r, n, salt);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = combine(out[i], in[i], op);
  }
  return out;
}

template <class T>
void expect_near_all(const std::vector<T>& got, const std::vector<T>& want, int ranks,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      // MPI may add in another order: a float sum of P terms of size <= 1.
      ASSERT_NEAR(got[i], want[i], 1e-6 * ranks) << what << " at " << i;
    } else {
      ASSERT_EQ(got[i], want[i]) << what << " at " << i;
    }
  }
}

class MpiComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* want = std::getenv("LOOM_EXPECT_COMM"); want != nullptr) {
      ASSERT_EQ(loom::world_communicator(runtime(), options())->backend(), want);
    }
    comm_ = loom::world_communicator(runtime(), options());
    rank_ = comm_->rank();
    size_ = comm_->size();
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    ASSERT_EQ(size_, world);
  }
  virtual loom::CommOptions options() const { return {}; }

  std::shared_ptr<loom::Communicator> comm_;
  int rank_ = 0;
  int size_ = 1;
};

template <class T>
void check_all_reduce(const loom::Communicator& comm, loom::ReduceOp op, int salt) {
  const std::int64_t n = 1000 + salt;
  auto in = upload(input_of<T>(comm.rank(), n, salt));
  auto out = poisoned<T>(n);
  loom::Graph g;
  g.collective(comm.all_reduce(in, out, op));
  runtime().submit(g).wait();
  expect_near_all(download<T>(out), reduced<T>(comm.size(), n, salt, op), comm.size(),
                  "all_reduce salt " + std::to_string(salt));
}

TEST_F(MpiComm, AllReduceEveryDtypeAndReduction) {
  int salt = 0;
  for (auto op : {loom::ReduceOp::sum, loom::ReduceOp::max, loom::ReduceOp::min}) {
    check_all_reduce<float>(*comm_, op, ++salt);
    check_all_reduce<std::int32_t>(*comm_, op, ++salt);
    check_all_reduce<std::int64_t>(*comm_, op, ++salt);
    check_all_reduce<std::int8_t>(*comm_, op, ++salt);
    check_all_reduce<std::uint8_t>(*comm_, op, ++salt);
  }
}

TEST_F(MpiComm, InPlaceAllReduceAndManyInOneGraphKeepTheirOrder) {
  // Eight collectives of different sizes in one graph, on disjoint tensors:
  // every rank must issue them in the same order or they would not match.
  std::vector<loom::Tensor> xs;
  loom::Graph g;
  for (int k = 0; k < 8; ++k) {
    xs.push_back(upload(input_of<float>(rank_, 64 * (k + 1), 100 + k)));
    g.collective(comm_->all_reduce(xs.back(), xs.back()));
  }
  runtime().submit(g).wait();
  for (int k = 0; k < 8; ++k) {
    expect_near_all(download<float>(xs[static_cast<std::size_t>(k)]),
                    reduced<float>(size_, 64 * (k + 1), 100 + k, loom::ReduceOp::sum), size_,
                    "in-place all_reduce " + std::to_string(k));
  }
}

TEST_F(MpiComm, AllGatherAndReduceScatter) {
  const std::int64_t n = 333;
  auto in = upload(input_of<std::int32_t>(rank_, n, 200));
  auto gathered = poisoned<std::int32_t>(n * size_);
  auto sums_in = upload(input_of<std::int64_t>(rank_, n * size_, 201));
  auto mine = poisoned<std::int64_t>(n);
  loom::Graph g;
  g.collective(comm_->all_gather(in, gathered));
  g.collective(comm_->reduce_scatter(sums_in, mine, loom::ReduceOp::sum));
  runtime().submit(g).wait();
  std::vector<std::int32_t> want_gather;
  for (int r = 0; r < size_; ++r) {
    const auto part = input_of<std::int32_t>(r, n, 200);
    want_gather.insert(want_gather.end(), part.begin(), part.end());
  }
  EXPECT_EQ(download<std::int32_t>(gathered), want_gather);
  const auto all = reduced<std::int64_t>(size_, n * size_, 201, loom::ReduceOp::sum);
  const std::vector<std::int64_t> want_mine(all.begin() + rank_ * n, all.begin() + (rank_ + 1) * n);
  EXPECT_EQ(download<std::int64_t>(mine), want_mine);
}

TEST_F(MpiComm, InPlaceAllGatherFromEachRanksBlock) {
  const std::int64_t n = 100;
  std::vector<float> mine(static_cast<std::size_t>(n * size_), -5.0F);
  const auto block = input_of<float>(rank_, n, 210);
  std::copy(block.begin(), block.end(), mine.begin() + rank_ * n);
  auto all = upload(mine);
  loom::Graph g;
  g.collective(comm_->all_gather(all.slice(0, rank_ * n, (rank_ + 1) * n), all));
  runtime().submit(g).wait();
  std::vector<float> want;
  for (int r = 0; r < size_; ++r) {
    const auto part = input_of<float>(r, n, 210);
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(download<float>(all), want);
}

TEST_F(MpiComm, BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    const std::int64_t n = 257;
    auto data = upload(rank_ == root ? input_of<std::uint8_t>(root, n, 300 + root)
                                     : std::vector<std::uint8_t>(static_cast<std::size_t>(n), 9));
    loom::Graph g;
    g.collective(comm_->broadcast(data, root));
    runtime().submit(g).wait();
    EXPECT_EQ(download<std::uint8_t>(data), input_of<std::uint8_t>(root, n, 300 + root))
        << "root " << root;
  }
}

TEST_F(MpiComm, RingExchangeOutOfPlaceAndInPlace) {
  const std::int64_t n = 4096;
  const int previous = (rank_ + size_ - 1) % size_;
  auto send = upload(input_of<float>(rank_, n, 400));
  auto recv = poisoned<float>(n);
  auto both = upload(input_of<float>(rank_, n, 401));
  loom::Graph g;
  g.collective(comm_->ring_exchange(send, recv));
  g.collective(comm_->ring_exchange(both, both));
  runtime().submit(g).wait();
  EXPECT_EQ(download<float>(recv), input_of<float>(previous, n, 400));
  EXPECT_EQ(download<float>(both), input_of<float>(previous, n, 401));
}

// Rank r's n elements for test `salt`, cheap enough for tens of millions.
template <class T>
std::vector<T> pattern_of(int rank, std::int64_t n, int salt) {
  std::vector<T> v(static_cast<std::size_t>(n));
  std::uint64_t x = job_seed() ^ (static_cast<std::uint64_t>(rank) << 40) ^
                    (static_cast<std::uint64_t>(salt) << 20);
  for (auto& e : v) {
    x += 0x9E3779B97F4A7C15ULL;  // splitmix64
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    if constexpr (std::is_floating_point_v<T>) {
      e = static_cast<T>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    } else {
      e = static_cast<T>(z % 41) - static_cast<T>(std::is_signed_v<T> ? 20 : 0);
    }
  }
  return v;
}

// Larger than what ranks sharing a GPU move at once (their device windows
// hold 64 MiB), with lengths that leave a partial last chunk.
TEST_F(MpiComm, CollectivesLargerThanOneWindowArriveWhole) {
  if (!runtime().default_memory().is_device()) {
    GTEST_SKIP() << "the windows are for device tensors; host ones go to MPI whole";
  }
  constexpr std::int64_t kWindow = std::int64_t{64} << 20;
  const int previous = (rank_ + size_ - 1) % size_;

  const std::int64_t n = kWindow / 4 + 1001;  // f32: two windows
  auto in = upload(pattern_of<float>(rank_, n, 600));
  auto sum = poisoned<float>(n);
  const std::int64_t m = kWindow / (4 * size_) + 77;  // i32 slices: P * m past a window
  auto slices = upload(pattern_of<std::int32_t>(rank_, m * size_, 601));
  auto mine = poisoned<std::int32_t>(m);
  const std::int64_t b = kWindow + 13;  // bytes
  auto block = upload(pattern_of<std::uint8_t>(rank_, b, 602));
  auto gathered = poisoned<std::uint8_t>(b * size_);
  auto ring_in = upload(pattern_of<std::int8_t>(rank_, b, 603));
  auto ring_out = poisoned<std::int8_t>(b);
  auto shared = upload(rank_ == size_ - 1 ? pattern_of<float>(size_ - 1, n, 604)
                                          : std::vector<float>(static_cast<std::size_t>(n), 3.0F));
  loom::Graph g;
  g.collective(comm_->all_reduce(in, sum, loom::ReduceOp::sum));
  g.collective(comm_->reduce_scatter(slices, mine, loom::ReduceOp::max));
  g.collective(comm_->all_gather(block, gathered));
  g.collective(comm_->ring_exchange(ring_in, ring_out));
  g.collective(comm_->broadcast(shared, size_ - 1));
  runtime().submit(g).wait();

  std::vector<float> want_sum = pattern_of<float>(0, n, 600);
  std::vector<std::int32_t> want_max = pattern_of<std::int32_t>(0, m * size_, 601);
  std::vector<std::uint8_t> want_gathered;
  for (int r = 0; r < size_; ++r) {
    if (r > 0) {
      const auto a = pattern_of<float>(r, n, 600);
      for (std::size_t i = 0; i < a.size(); ++i) want_sum[i] += a[i];
      const auto s = pattern_of<std::int32_t>(r, m * size_, 601);
      for (std::size_t i = 0; i < s.size(); ++i) want_max[i] = std::max(want_max[i], s[i]);
    }
    const auto part = pattern_of<std::uint8_t>(r, b, 602);
    want_gathered.insert(want_gathered.end(), part.begin(), part.end());
  }
  expect_near_all(download<float>(sum), want_sum, size_, "all_reduce past a window");
  EXPECT_EQ(
      download<std::int32_t>(mine),
      std::vector<std::int32_t>(want_max.begin() + rank_ * m, want_max.begin() + (rank_ + 1) * m));
  EXPECT_EQ(download<std::uint8_t>(gathered), want_gathered);
  EXPECT_EQ(download<std::int8_t>(ring_out), pattern_of<std::int8_t>(previous, b, 603));
  EXPECT_EQ(download<float>(shared), pattern_of<float>(size_ - 1, n, 604));
}

// Ranks whose tensors are in different memories (here rank 0's on the host)
// all take the same way, host memory through MPI, and agree.
TEST_F(MpiComm, RanksWithTensorsInDifferentMemoriesStillAgree) {
  if (!runtime().default_memory().is_device()) GTEST_SKIP() << "every tensor is on the host here";
  if (comm_->backend() != "mpi") GTEST_SKIP() << "only the mpi backend takes host tensors on a GPU";
  const std::int64_t n = 5000;
  auto values = input_of<float>(rank_, n, 610);
  // Both of rank 0's on the host: a collective takes its pair from one memory.
  loom::Tensor in =
      rank_ == 0 ? runtime().tensor<float>({n}, loom::Memory::pinned) : upload(values);
  loom::Tensor out =
      rank_ == 0 ? runtime().tensor<float>({n}, loom::Memory::pinned) : poisoned<float>(n);
  if (rank_ == 0) {
    std::copy(values.begin(), values.end(), in.data_as<float>());
    std::fill_n(out.data_as<float>(), n, 77.0F);
  }
  loom::Graph g;
  g.collective(comm_->all_reduce(in, out));
  runtime().submit(g).wait();
  expect_near_all(download<float>(out), reduced<float>(size_, n, 610, loom::ReduceOp::sum), size_,
                  "all_reduce from mixed memories");
}

TEST_F(MpiComm, SendRecvAroundTheRing) {
  if (size_ < 2) GTEST_SKIP() << "a send needs another rank";
  const std::int64_t n = 1500;
  const int next = (rank_ + 1) % size_;
  const int previous = (rank_ + size_ - 1) % size_;
  auto out = upload(input_of<std::int64_t>(rank_, n, 500));
  auto in = poisoned<std::int64_t>(n);
  loom::Graph g;
  // A send completes once its recv has begun: even ranks send first, odd
  // ranks receive first, so that the ring never waits on itself.
  if (rank_ % 2 == 0) {
    g.collective(comm_->send(out, next));
    g.collective(comm_->recv(in, previous));
  } else {
    g.collective(comm_->recv(in, previous));
    g.collective(comm_->send(out, next));
  }
  runtime().submit(g).wait();
  EXPECT_EQ(download<std::int64_t>(in), input_of<std::int64_t>(previous, n, 500));
}

TEST_F(MpiComm, SplitByParityReducesWithinEachPart) {
  auto part = comm_->split(rank_ % 2, -rank_);  // keys reverse the order
  int members = 0;
  for (int r = 0; r < size_; ++r) members += r % 2 == rank_ % 2 ? 1 : 0;
  ASSERT_EQ(part->size(), members);
  auto x = upload(std::vector<std::int32_t>(16, rank_ + 1));
  loom::Graph g;
  g.collective(part->all_reduce(x, x));
  runtime().submit(g).wait();
  int want = 0;
  int my_position = 0;
  for (int r = 0; r < size_; ++r) {
    if (r % 2 != rank_ % 2) continue;
    want += r + 1;
    if (r > rank_) ++my_position;
  }
  EXPECT_EQ(part->rank(), my_position);
  EXPECT_EQ(download<std::int32_t>(x), std::vector<std::int32_t>(16, want));
}

// A product promise: no allocation in steady state. Once warm, a graph of
// collectives submitted again and again allocates nothing through operator
// new on any thread: not the runtime's run, not the mpi backend's naming,
// agreement or requests (MPI's own buffers are its business).
TEST_F(MpiComm, CollectivesAllocateNothingOnceWarm) {
  if (!loom::test::kCountsAllocations) {
    GTEST_SKIP() << "AddressSanitizer replaces operator new: allocations are not counted";
  }
  if (comm_->backend() != "mpi" || runtime().default_memory().is_device()) {
    GTEST_SKIP() << "the mpi backend over host tensors";
  }
  auto in = upload(input_of<float>(rank_, 4096, 91));
  auto out = poisoned<float>(4096);
  auto gathered = poisoned<float>(16 * size_);
  auto ring = poisoned<float>(16);
  loom::Graph g;
  g.collective(comm_->all_reduce(in, out, loom::ReduceOp::sum));
  g.collective(comm_->all_gather(in.slice(0, 0, 16), gathered));
  g.collective(comm_->ring_exchange(in.slice(0, 16, 32), ring));
  auto& rt = runtime();
  // Warm: runs in flight together leave spare run states behind, so that a
  // run whose last references a worker drops late (the ranks may share
  // cores) does not make the next submit allocate one.
  for (int round = 0; round < 3; ++round) {
    std::vector<loom::Future> held;
    for (int i = 0; i < 8; ++i) held.push_back(rt.submit(g));
    for (auto& f : held) f.wait();
  }
  for (int i = 0; i < 30; ++i) rt.submit(g).wait();
  // Ranks enter the count together, and leave it only when every rank has
  // finished its runs (a rank still running would allocate nothing either,
  // but its workers' last references drop just after publishing).
  MPI_Barrier(MPI_COMM_WORLD);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long long before = loom::test::allocations();
  constexpr int kRuns = 100;
  for (int i = 0; i < kRuns; ++i) rt.submit(g).wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long long allocations = loom::test::allocations() - before;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(allocations, 0) << "allocations in " << kRuns << " runs of 3 collectives";
  expect_near_all(download<float>(out), reduced<float>(size_, 4096, 91, loom::ReduceOp::sum), size_,
                  "all_reduce after the counted runs");
}

TEST_F(MpiComm, RanksThatDisagreeOnTheSizeAllFailSayingHow) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks to disagree";
  const std::int64_t n = rank_ == 0 ? 100 : 101;
  auto x = upload(input_of<float>(rank_, n, 600));
  loom::Graph g;
  g.collective(comm_->all_reduce(x, x), {.name = "grad all-reduce"});
  try {
    runtime().submit(g).wait();
    FAIL() << "a size mismatch went through";
  } catch (const loom::CommError& e) {
    EXPECT_EQ(e.task(), "grad all-reduce");
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("100"), std::string::npos) << e.what();
  }
  // The ranks stay in step: the communicator still works.
  check_all_reduce<std::int32_t>(*comm_, loom::ReduceOp::sum, 601);
}

// The last rank calls another collective, dtype, root or reduction than the
// others: every rank fails, naming its own task and both sides, and the
// ranks stay in step.
TEST_F(MpiComm, RanksThatDisagreeOnTheCollectiveDtypeRootOrReductionAllFailSayingHow) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks to disagree";
  if (comm_->backend() == "nccl") GTEST_SKIP() << "NCCL does not check that ranks agree";
  const bool odd = rank_ == size_ - 1;
  const std::int64_t n = 40;
  struct Case {
    std::string on;
    loom::CollectivePtr collective;
    std::vector<std::string> says;
  };
  auto f = upload(input_of<float>(rank_, n, 610));
  auto i = upload(input_of<std::int32_t>(rank_, n, 611));
  auto gathered = poisoned<float>(n * size_);
  const std::vector<Case> cases = {
      {"collective",
       odd ? comm_->all_gather(f, gathered) : comm_->all_reduce(f, f),
       {"all_reduce of 40 f32", "all_gather of 40 f32"}},
      {"dtype",
       odd ? comm_->all_reduce(i, i) : comm_->all_reduce(f, f),
       {"all_reduce of 40 f32", "all_reduce of 40 i32"}},
      {"root",
       comm_->broadcast(f, odd ? 1 : 0),
       {"broadcast of 40 f32 from rank 0", "broadcast of 40 f32 from rank 1"}},
      {"reduction",
       comm_->all_reduce(f, f, odd ? loom::ReduceOp::max : loom::ReduceOp::sum),
       {"all_reduce of 40 f32 (sum)", "all_reduce of 40 f32 (max)"}},
  };
  int salt = 620;
  for (const auto& c : cases) {
    const std::string task = c.on + " on rank " + std::to_string(rank_);
    loom::Graph g;
    g.collective(c.collective, {.name = task});
    try {
      runtime().submit(g).wait();
      ADD_FAILURE() << task << ": ranks that disagree on the " << c.on << " ran";
    } catch (const loom::CommError& e) {
      EXPECT_EQ(e.task(), task) << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find("disagree"), std::string::npos) << what;
      EXPECT_NE(what.find("rank " + std::to_string(size_ - 1)), std::string::npos) << what;
      for (const auto& s : c.says) EXPECT_NE(what.find(s), std::string::npos) << what;
    }
    // The ranks stay in step: the communicator still works.
    check_all_reduce<std::int32_t>(*comm_, loom::ReduceOp::sum, ++salt);
  }
}

class MpiCommShortTimeout : public MpiComm {
 protected:
  loom::CommOptions options() const override {
    return {.timeout = std::chrono::milliseconds(1500)};
  }
};

TEST_F(MpiCommShortTimeout, ARankThatFailsBeforeACollectiveFailsTheOthersInBoundedTime) {
  if (size_ < 2) GTEST_SKIP() << "needs another rank to fail";
  auto x = upload(input_of<float>(rank_, 64, 700));
  loom::Graph g;
  g.host("load batch",
         [rank = rank_] {
           if (rank == 1) throw std::runtime_error("the data file is missing");
         },
         {}, {x});
  g.collective(comm_->all_reduce(x, x), {.name = "grad all-reduce"});
  const auto start = std::chrono::steady_clock::now();
  try {
    runtime().submit(g).wait();
    FAIL() << "rank " << rank_ << ": the run succeeded";
  } catch (const loom::CommError& e) {
    EXPECT_NE(rank_, 1) << e.what();
    EXPECT_EQ(e.task(), "grad all-reduce");
    EXPECT_NE(std::string(e.what()).find("within 1500 ms"), std::string::npos) << e.what();
  } catch (const loom::Error& e) {
    EXPECT_EQ(rank_, 1) << e.what();
    EXPECT_EQ(e.task(), "load batch") << e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0) << "bounded by the timeout, with room for a loaded machine";
  if (rank_ != 1) {
    // The collective rank 1 never joined cannot be taken back: later ones
    // fail at once, saying why, instead of matching the wrong partner.
    loom::Graph again;
    again.collective(comm_->all_reduce(x, x), {.name = "next all-reduce"});
    try {
      runtime().submit(again).wait();
      FAIL() << "an unusable communicator ran a collective";
    } catch (const loom::CommError& e) {
      EXPECT_NE(std::string(e.what()).find("unusable"), std::string::npos) << e.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(MpiCommShortTimeout, ARecvThatTimesOutLeavesTheCommunicatorUnusable) {
  if (size_ < 2 || comm_->backend() != "mpi") GTEST_SKIP() << "needs two ranks on the mpi backend";
  if (rank_ == 1) {
    auto x = upload(input_of<float>(rank_, 16, 900));
    loom::Graph g;
    g.collective(comm_->recv(x, 0), {.name = "early recv"});
    try {
      runtime().submit(g).wait();
      FAIL() << "a recv with no send finished";
    } catch (const loom::CommError& e) {
      EXPECT_NE(std::string(e.what()).find("nothing came"), std::string::npos) << e.what();
    }
    // A send that came now would meet the next recv: nothing more runs.
    loom::Graph next;
    next.collective(comm_->all_reduce(x, x), {.name = "next"});
    try {
      runtime().submit(next).wait();
      FAIL() << "the communicator ran a collective after losing its order";
    } catch (const loom::CommError& e) {
      EXPECT_NE(std::string(e.what()).find("unusable"), std::string::npos) << e.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(MpiComm, ACompiledStepReplaysItsAllReduceWhereTheBackendCapturesIt) {
  const std::int64_t n = 2048;
  auto x = upload(input_of<float>(rank_, n, 800));
  auto y = poisoned<float>(n);
  loom::Graph g;
  g.collective(comm_->all_reduce(x, y), {.name = "grad all-reduce"});
  if (comm_->backend() != "nccl") {
    try {
      (void)runtime().compile(g);
      FAIL() << comm_->backend() << " collectives compiled";
    } catch (const loom::InvalidArgument& e) {
      EXPECT_EQ(e.task(), "grad all-reduce");
      EXPECT_NE(std::string(e.what()).find("nccl backend does"), std::string::npos) << e.what();
    }
    return;
  }
  auto step = runtime().compile(g);
  for (int round = 0; round < 3; ++round) {
    const int salt = 801 + round;
    auto fresh = upload(input_of<float>(rank_, n, salt));
    runtime().copy(fresh, x).wait();
    runtime().copy(poisoned<float>(n), y).wait();
    step.run().wait();
    expect_near_all(download<float>(y), reduced<float>(size_, n, salt, loom::ReduceOp::sum), size_,
                    "replay " + std::to_string(round));
  }
}

TEST(MpiCommChecks, BadTensorsAreRefusedWhenTheCollectiveIsBuilt) {
  auto comm = loom::world_communicator(runtime());
  auto f = upload(std::vector<float>(8, 1.0F));
  auto i = upload(std::vector<std::int32_t>(8, 1));
  auto small = upload(std::vector<float>(3, 1.0F));
  EXPECT_THROW((void)comm->all_reduce(f, i), loom::InvalidArgument);
  EXPECT_THROW((void)comm->all_reduce(f, small), loom::InvalidArgument);
  EXPECT_THROW((void)comm->broadcast(f, comm->size()), loom::InvalidArgument);
  EXPECT_THROW((void)comm->send(f, comm->rank()), loom::InvalidArgument);
  if (comm->size() > 1) {
    EXPECT_THROW((void)comm->all_gather(f, f), loom::InvalidArgument)
        << "an all-gather's output is size() times its input";
  }
  auto h = upload(std::vector<loom::half>(8, loom::half{0}));
  EXPECT_THROW((void)comm->all_reduce(h, h), loom::InvalidArgument) << "no f16 reduction";
}

// LOOM_COMM=local under mpirun: one process's ranks cannot span a job of
// several, so world_communicator refuses it there, saying why, and gives a
// job of one process its one local rank. Runs only where ctest sets
// LOOM_EXPECT_WORLD (the other runs' fixtures would meet the refusal).
TEST(MpiWorld, LoomCommLocalGivesOneRankAndRefusesAJobOfSeveral) {
  if (std::getenv("LOOM_EXPECT_WORLD") == nullptr) {
    GTEST_SKIP() << "run through ctest, which sets LOOM_COMM and LOOM_EXPECT_WORLD";
  }
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1) {
    auto comm = loom::world_communicator(runtime());
    EXPECT_EQ(comm->backend(), "local");
    EXPECT_EQ(comm->size(), 1);
    return;
  }
  try {
    (void)loom::world_communicator(runtime());
    FAIL() << "LOOM_COMM=local spanned " << world << " processes";
  } catch (const loom::CommError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("LOOM_COMM=local"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(world) + " processes"), std::string::npos) << what;
  }
}

}  // namespace
