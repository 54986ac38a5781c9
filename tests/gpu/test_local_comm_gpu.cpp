// The local backend on one GPU: P ranks as threads, each with a CUDA
// Runtime of its own, collectives over device tensors (copies and a
// reduction kernel on the GPU, the rendezvous on the host), against
// references computed here from fresh random inputs, outputs poisoned first.
#include "support/gpu.hpp"
#include "support/ranks.hpp"
#include "support/seed.hpp"

#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using loom::Communicator;
using loom::ReduceOp;

// Runs body(rank, comm, runtime) on one thread a rank, a CUDA runtime each.
void on_ranks(const std::vector<std::shared_ptr<Communicator>>& comms,
              const std::function<void(int, Communicator&, loom::Runtime&)>& body) {
  loom::test::on_ranks(comms, loom::RuntimeOptions{}, body);
}

class LocalCommGpu : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_GPU();
    seed_ = loom::test::fresh_seed();
  }

  // Rank r's input for `salt`, the same wherever it is asked for.
  template <class T>
  std::vector<T> input_of(int rank, std::int64_t n, int salt) const {
    std::mt19937_64 gen(seed_ + static_cast<std::uint64_t>(rank) * 7919 +
                        static_cast<std::uint64_t>(salt) * 104729);
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) {
      if constexpr (std::is_floating_point_v<T>) {
        x = std::uniform_real_distribution<T>(-1, 1)(gen);
      } else {
        x = static_cast<T>(std::uniform_int_distribution<int>(-1000, 1000)(gen));
      }
    }
    return v;
  }

  std::uint64_t seed_ = 0;
};

template <class T>
loom::Tensor upload(loom::Runtime& rt, const std::vector<T>& values) {
  const auto n = static_cast<std::int64_t>(values.size());
  auto host = rt.tensor<T>({n}, loom::Memory::pageable);
  std::copy(values.begin(), values.end(), host.template data_as<T>());
  auto dev = rt.tensor<T>({n});
  rt.copy(host, dev).wait();
  return dev;
}

template <class T>
std::vector<T> download(loom::Runtime& rt, const loom::Tensor& t) {
  auto host = rt.tensor<T>({t.numel()}, loom::Memory::pageable);
  rt.copy(t, host).wait();
  return std::vector<T>(host.template data_as<T>(), host.template data_as<T>() + t.numel());
}

// A device tensor of n elements, every byte 0xFF (NaN for floats).
template <class T>
loom::Tensor poisoned(loom::Runtime& rt, std::int64_t n) {
  std::vector<T> bytes(static_cast<std::size_t>(n));
  std::memset(bytes.data(), 0xFF, bytes.size() * sizeof(T));
  return upload(rt, bytes);
}

TEST_P(LocalCommGpu, AllReduceSumMaxMinAndReduceScatter) {
  const int p = GetParam();
  const std::int64_t n = 100003;  // not a multiple of a block
  auto comms = loom::local_communicators(p);
  on_ranks(comms, [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto x = upload(rt, input_of<float>(rank, n, 1));
    auto sum = poisoned<float>(rt, n);
    auto ints = upload(rt, input_of<std::int32_t>(rank, n, 2));
    auto top = poisoned<std::int32_t>(rt, n);
    auto low = poisoned<std::int32_t>(rt, n);
    auto scatter_in = upload(rt, input_of<float>(rank, n * p, 3));
    auto part = poisoned<float>(rt, n);
    loom::Graph g;
    g.collective(comm.all_reduce(x, sum));
    g.collective(comm.all_reduce(ints, top, ReduceOp::max));
    g.collective(comm.all_reduce(ints, low, ReduceOp::min));
    g.collective(comm.reduce_scatter(scatter_in, part));
    rt.submit(g).wait();
    std::vector<float> want_sum = input_of<float>(0, n, 1);
    std::vector<std::int32_t> want_top = input_of<std::int32_t>(0, n, 2);
    std::vector<std::int32_t> want_low = want_top;
    std::vector<float> want_part(static_cast<std::size_t>(n));
    const auto first_scatter = input_of<float>(0, n * p, 3);
    std::copy_n(first_scatter.begin() + rank * n, n, want_part.begin());
    for (int r = 1; r < p; ++r) {
      const auto xs = input_of<float>(r, n, 1);
      const auto is = input_of<std::int32_t>(r, n, 2);
      const auto ss = input_of<float>(r, n * p, 3);
      for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
        want_sum[i] += xs[i];  // in rank order, as the kernel adds
        want_top[i] = std::max(want_top[i], is[i]);
        want_low[i] = std::min(want_low[i], is[i]);
        want_part[i] += ss[static_cast<std::size_t>(rank * n) + i];
      }
    }
    EXPECT_EQ(download<float>(rt, sum), want_sum) << "a sum in rank order is exact, bit for bit";
    EXPECT_EQ(download<std::int32_t>(rt, top), want_top);
    EXPECT_EQ(download<std::int32_t>(rt, low), want_low);
    EXPECT_EQ(download<float>(rt, part), want_part);
  });
}

TEST_P(LocalCommGpu, AllGatherBroadcastAndRingExchange) {
  const int p = GetParam();
  const std::int64_t n = 4099;
  auto comms = loom::local_communicators(p);
  on_ranks(comms, [&](int rank, Communicator& comm, loom::Runtime& rt) {
    const int root = p - 1;
    auto mine = upload(rt, input_of<std::int64_t>(rank, n, 10));
    auto all = poisoned<std::int64_t>(rt, n * p);
    auto shared = rank == root ? upload(rt, input_of<std::int64_t>(root, n, 11))
                               : poisoned<std::int64_t>(rt, n);
    auto from_left = poisoned<float>(rt, n);
    auto send = upload(rt, input_of<float>(rank, n, 12));
    auto in_place = upload(rt, input_of<float>(rank, n, 13));  // written through scratch
    loom::Graph g;
    g.collective(comm.all_gather(mine, all));
    g.collective(comm.broadcast(shared, root));
    g.collective(comm.ring_exchange(send, from_left));
    g.collective(comm.ring_exchange(in_place, in_place));
    rt.submit(g).wait();
    std::vector<std::int64_t> want_all;
    for (int r = 0; r < p; ++r) {
      const auto part = input_of<std::int64_t>(r, n, 10);
      want_all.insert(want_all.end(), part.begin(), part.end());
    }
    const int left = (rank + p - 1) % p;
    EXPECT_EQ(download<std::int64_t>(rt, all), want_all);
    EXPECT_EQ(download<std::int64_t>(rt, shared), input_of<std::int64_t>(root, n, 11));
    EXPECT_EQ(download<float>(rt, from_left), input_of<float>(left, n, 12));
    EXPECT_EQ(download<float>(rt, in_place), input_of<float>(left, n, 13));
  });
}

TEST_P(LocalCommGpu, SendRecvPairsAndRepeatedRuns) {
  const int p = GetParam();
  const std::int64_t n = 777;
  auto comms = loom::local_communicators(p);
  on_ranks(comms, [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto out = upload(rt, input_of<std::uint8_t>(rank, n, 20));
    auto in = poisoned<std::uint8_t>(rt, n);
    const int partner = rank ^ 1;
    loom::Graph g;
    if (partner < p) {
      // The lower rank sends first; a send is done once its recv has the data.
      if (rank < partner) {
        g.collective(comm.send(out, partner));
        g.collective(comm.recv(in, partner));
      } else {
        g.collective(comm.recv(in, partner));
        g.collective(comm.send(out, partner));
      }
    }
    auto acc = upload(rt, std::vector<float>(64, static_cast<float>(rank + 1)));
    g.collective(comm.all_reduce(acc, acc));
    // The same graph three times: the in-place sum grows by p each run.
    for (int run = 0; run < 3; ++run) rt.submit(g).wait();
    if (partner < p) {
      EXPECT_EQ(download<std::uint8_t>(rt, in), input_of<std::uint8_t>(partner, n, 20));
    }
    float total = 0;
    for (int r = 0; r < p; ++r) total += static_cast<float>(r + 1);
    float want = static_cast<float>(rank + 1);
    for (int run = 0; run < 3; ++run) want = run == 0 ? total : want * static_cast<float>(p);
    EXPECT_EQ(download<float>(rt, acc), std::vector<float>(64, want));
  });
}

TEST(LocalCommGpuErrors, RanksWithHostAndDeviceTensorsFailSayingSo) {
  LOOM_REQUIRE_GPU();
  auto comms = loom::local_communicators(2, {.timeout = std::chrono::milliseconds(5000)});
  on_ranks(comms, [&](int rank, Communicator& comm, loom::Runtime& rt) {
    auto x = rank == 0 ? rt.tensor<float>({16}, loom::Memory::pinned) : rt.tensor<float>({16});
    loom::Graph g;
    g.collective(comm.all_reduce(x, x), {.name = "mixed"});
    try {
      rt.submit(g).wait();
      ADD_FAILURE() << "rank " << rank << ": host and device ranks reduced together";
    } catch (const loom::CommError& e) {
      EXPECT_EQ(e.task(), "mixed");
      EXPECT_NE(std::string(e.what()).find("different memory"), std::string::npos) << e.what();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalCommGpu, ::testing::Values(2, 4, 8),
                         [](const auto& param) { return std::to_string(param.param) + "_ranks"; });

}  // namespace
