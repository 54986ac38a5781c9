// loom allreduce: the bus bandwidth of an all-reduce (or a ring exchange)
// over message sizes, printed in nccl-tests' columns, on whichever backend
// world_communicator picks (LOOM_COMM overrides it):
//
//   mpirun -np 4 ./loom_allreduce                    # one GPU each: nccl
//   mpirun -np 2 ./loom_allreduce --max 256M         # two ranks, one GPU: mpi
//   LOOM_DEVICE=cpu mpirun -np 2 ./loom_allreduce    # the CPU backend: mpi
//
// Each size is checked against the sum every rank expects (#wrong), out of
// place and in place. On the nccl backend the step is compiled once and
// replayed; the others submit it. The time is the slowest rank's.
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/executable.hpp>
#include <loom/graph.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

struct Options {
  std::int64_t min_bytes = 1 << 10;
  std::int64_t max_bytes = std::int64_t{64} << 20;
  int factor = 4;
  int iterations = 20;
  int warmup = 5;
  bool ring = false;  // ring_exchange instead of all_reduce
};

std::int64_t parse_bytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  switch (end != nullptr ? *end : '\0') {
    case 'K':
    case 'k': value *= 1 << 10; break;
    case 'M':
    case 'm': value *= 1 << 20; break;
    case 'G':
    case 'g': value *= 1 << 30; break;
    default: break;
  }
  return static_cast<std::int64_t>(value);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--min" && next) {
      o.min_bytes = parse_bytes(next);
      ++i;
    } else if (arg == "--max" && next) {
      o.max_bytes = parse_bytes(next);
      ++i;
    } else if (arg == "--factor" && next) {
      o.factor = std::max(2, std::atoi(next));
      ++i;
    } else if (arg == "--iters" && next) {
      o.iterations = std::max(1, std::atoi(next));
      ++i;
    } else if (arg == "--warmup" && next) {
      o.warmup = std::max(0, std::atoi(next));
      ++i;
    } else if (arg == "--ring") {
      o.ring = true;
    } else {
      std::fprintf(stderr,
                   "usage: loom_allreduce [--min 1K] [--max 64M] [--factor 4] [--iters 20] "
                   "[--warmup 5] [--ring]\n");
      std::exit(2);
    }
  }
  return o;
}

// Rank r's element i: small integers, so that a float sum is exact.
float value_of(int rank, std::int64_t i) { return static_cast<float>((i + 3 * rank) % 17); }

class Bench {
 public:
  Bench(loom::Runtime& rt, std::shared_ptr<loom::Communicator> comm, const Options& o)
      : rt_(rt), comm_(std::move(comm)), options_(o) {}

  // Seconds a step of `g`, the slowest rank's, after `warmup` steps.
  double time_steps(const loom::Graph& g) {
    std::optional<loom::Executable> compiled;
    if (comm_->backend() == "nccl") compiled = rt_.compile(g);
    const auto step = [&] {
      if (compiled) {
        compiled->run().wait();
      } else {
        rt_.submit(g).wait();
      }
    };
    for (int i = 0; i < options_.warmup; ++i) step();
    barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options_.iterations; ++i) step();
    const double mine =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        options_.iterations;
    return slowest(mine);
  }

  // The wrong elements of `out` after one step, every rank's added.
  std::int64_t wrong(const loom::Tensor& out) {
    auto host = rt_.tensor<float>({out.numel()}, loom::Memory::pageable);
    rt_.copy(out, host).wait();
    const float* got = host.data_as<float>();
    std::int64_t bad = 0;
    const int p = comm_->size();
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      float want = 0;
      if (options_.ring) {
        want = value_of((comm_->rank() + p - 1) % p, i);
      } else {
        for (int r = 0; r < p; ++r) want += value_of(r, i);
      }
      if (got[i] != want) ++bad;
    }
    return static_cast<std::int64_t>(sum_over_ranks(static_cast<double>(bad)));
  }

  void fill(const loom::Tensor& t) {
    auto host = rt_.tensor<float>({t.numel()}, loom::Memory::pageable);
    float* p = host.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = value_of(comm_->rank(), i);
    rt_.copy(host, t).wait();
  }

 private:
  void barrier() { (void)slowest(0.0); }

  double slowest(double mine) { return reduce_scalar(mine, loom::ReduceOp::max); }
  double sum_over_ranks(double mine) { return reduce_scalar(mine, loom::ReduceOp::sum); }

  // A scalar combined over the ranks, through loom itself (f32 is enough
  // for a time or a count of wrong elements below 2^24).
  double reduce_scalar(double mine, loom::ReduceOp op) {
    auto host = rt_.tensor<float>({1}, loom::Memory::pageable);
    host.data_as<float>()[0] = static_cast<float>(mine);
    auto x = rt_.tensor<float>({1});
    rt_.copy(host, x).wait();
    loom::Graph g;
    g.collective(comm_->all_reduce(x, x, op));
    rt_.submit(g).wait();
    rt_.copy(x, host).wait();
    return host.data_as<float>()[0];
  }

  loom::Runtime& rt_;
  std::shared_ptr<loom::Communicator> comm_;
  Options options_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    loom::Runtime rt;
    auto comm = loom::world_communicator(rt);
    const int p = comm->size();
    const bool root = comm->rank() == 0;
    if (root) {
      std::printf("# loom %s: %d rank(s), backend %s, %s memory\n",
                  o.ring ? "ring_exchange" : "all_reduce", p, std::string(comm->backend()).c_str(),
                  rt.default_memory().to_string().c_str());
      std::printf("#%11s %12s %6s %6s   %9s %7s %7s %6s   %9s %7s %7s %6s\n", "", "", "", "",
                  "out-of-place", "", "", "", "in-place", "", "", "");
      std::printf("#%11s %12s %6s %6s   %9s %7s %7s %6s   %9s %7s %7s %6s\n", "size", "count",
                  "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                  "#wrong");
      std::printf("#%11s %12s %6s %6s   %9s %7s %7s %6s   %9s %7s %7s %6s\n", "(B)", "(elements)",
                  "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    Bench bench(rt, comm, o);
    std::int64_t total_wrong = 0;
    for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
      const std::int64_t count = std::max<std::int64_t>(1, bytes / 4);
      auto in = rt.tensor<float>({count});
      auto out = rt.tensor<float>({count});
      double seconds[2] = {};
      std::int64_t wrong[2] = {};
      for (int in_place = 0; in_place < 2; ++in_place) {
        const loom::Tensor& dst = in_place != 0 ? in : out;
        loom::Graph g;
        g.collective(o.ring ? comm->ring_exchange(in, dst) : comm->all_reduce(in, dst));
        // A step that reads its result back would be one step late: the
        // check runs one step on fresh inputs, the timing many.
        bench.fill(in);
        seconds[in_place] = bench.time_steps(g);
        bench.fill(in);
        if (in_place == 0) {
          loom::Graph once;
          once.collective(o.ring ? comm->ring_exchange(in, out) : comm->all_reduce(in, out));
          rt.submit(once).wait();
        } else {
          loom::Graph once;
          once.collective(o.ring ? comm->ring_exchange(in, in) : comm->all_reduce(in, in));
          rt.submit(once).wait();
        }
        wrong[in_place] = bench.wrong(dst);
        total_wrong += wrong[in_place];
      }
      if (root) {
        const double moved = static_cast<double>(count) * 4;
        // nccl-tests' bus bandwidth: what each link carries in a ring.
        const double bus = o.ring ? 1.0 : 2.0 * (p - 1) / p;
        std::printf("%12lld %12lld %6s %6s", static_cast<long long>(count * 4),
                    static_cast<long long>(count), "float", o.ring ? "none" : "sum");
        for (int k = 0; k < 2; ++k) {
          const double algbw = moved / seconds[k] / 1e9;
          std::printf("   %9.1f %7.2f %7.2f %6lld", seconds[k] * 1e6, algbw,
                      p > 1 || o.ring ? algbw * bus : 0.0, static_cast<long long>(wrong[k]));
        }
        std::printf("\n");
      }
    }
    if (root) std::printf("# wrong elements in all: %lld\n", static_cast<long long>(total_wrong));
    return total_wrong == 0 ? 0 : 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom_allreduce: %s\n", e.what());
    return 1;
  }
}
