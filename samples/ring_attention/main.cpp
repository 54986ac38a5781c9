// loom ring attention: attention over a sequence split across ranks
// (loom/ops/ring_attention.hpp), checked against one flash attention call
// over the whole sequence, timed against it:
//
//   mpirun -np 8 ./loom_ring_attention --seq 131072 --dim 128 --causal   # a GPU a rank
//   ./loom_ring_attention --local 4 --seq 16384 --causal                 # 4 ranks, one GPU
//   LOOM_DEVICE=cpu mpirun -np 3 ./loom_ring_attention --seq 96 --check  # the CPU backend
//
// Every rank draws its block of q, k, v (and dout) from one formula of the
// position, so no rank needs the whole sequence unless it checks. --check
// (the default up to 4096 positions) has each rank run flash attention over
// the whole sequence by itself and compare its rows. The time is the
// slowest rank's, per iteration; efficiency = ideal / ring, where ideal is
// one flash call over the whole sequence divided by the number of GPUs the
// ranks run on (one for --local and ranks sharing a GPU, P for nccl).
#include <loom/activity.hpp>
#include <loom/comm.hpp>
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/ops/ring_attention.hpp>
#include <loom/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::DType;
using loom::Tensor;
using loom::ops::RingLayout;

struct Options {
  std::int64_t seq = 4096, dim = 128, heads = 8, batch = 1;
  bool causal = false;
  RingLayout layout = RingLayout::zigzag;
  DType dtype = DType::bf16;
  bool backward = false;
  int iterations = 10, warmup = 3;
  int local = 0;   // ranks in this process (0: the job's world communicator)
  int check = -1;  // -1: when seq <= 4096
  std::string trace;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: loom_ring_attention [--seq 4096] [--dim 128] [--heads 8] [--batch 1] "
               "[--causal] [--layout zigzag|contiguous] [--f16] [--backward] [--iters 10] "
               "[--warmup 3] [--local P] [--check|--no-check] [--trace file.json]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    const auto number = [&] {
      if (next == nullptr) usage();
      ++i;
      return std::atoll(next);
    };
    if (arg == "--seq") {
      o.seq = number();
    } else if (arg == "--dim") {
      o.dim = number();
    } else if (arg == "--heads") {
      o.heads = number();
    } else if (arg == "--batch") {
      o.batch = number();
    } else if (arg == "--iters") {
      o.iterations = static_cast<int>(std::max<long long>(1, number()));
    } else if (arg == "--warmup") {
      o.warmup = static_cast<int>(std::max<long long>(0, number()));
    } else if (arg == "--local") {
      o.local = static_cast<int>(number());
    } else if (arg == "--causal") {
      o.causal = true;
    } else if (arg == "--f16") {
      o.dtype = DType::f16;
    } else if (arg == "--backward") {
      o.backward = true;
    } else if (arg == "--check") {
      o.check = 1;
    } else if (arg == "--no-check") {
      o.check = 0;
    } else if (arg == "--layout" && next != nullptr) {
      o.layout = std::string(next) == "contiguous" ? RingLayout::contiguous : RingLayout::zigzag;
      ++i;
    } else if (arg == "--trace" && next != nullptr) {
      o.trace = next;
      ++i;
    } else {
      usage();
    }
  }
  if (o.check < 0) o.check = o.seq <= 4096 ? 1 : 0;
  return o;
}

// Input `which` at (batch x head, position, element): uniform in [-1, 1),
// the same wherever it is asked for.
float input_value(int which, std::int64_t bh, std::int64_t pos, std::int64_t e) {
  std::uint64_t x = (static_cast<std::uint64_t>(which) << 56) ^
                    (static_cast<std::uint64_t>(bh) << 40) ^
                    (static_cast<std::uint64_t>(pos) << 12) ^ static_cast<std::uint64_t>(e);
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0F;
}

// Input `which` over `ranges` of positions, [B, H, n, D] as `dtype`: filled
// on the host in f32, converted by a cast task of `g`.
Tensor input(loom::Runtime& rt, loom::Graph& g, const Options& o, int which,
             const std::vector<loom::ops::SequenceRange>& ranges) {
  std::int64_t n = 0;
  for (const auto& r : ranges) n += r.stop - r.start;
  std::vector<float> host;
  host.reserve(static_cast<std::size_t>(o.batch * o.heads * n * o.dim));
  for (std::int64_t bh = 0; bh < o.batch * o.heads; ++bh) {
    for (const auto& r : ranges) {
      for (std::int64_t p = r.start; p < r.stop; ++p) {
        for (std::int64_t e = 0; e < o.dim; ++e) host.push_back(input_value(which, bh, p, e));
      }
    }
  }
  const loom::Shape shape{o.batch, o.heads, n, o.dim};
  const Tensor f32 = rt.upload(std::span<const float>(host), shape);
  Tensor t = rt.tensor(o.dtype, shape);
  g.add(loom::ops::cast(f32, t));
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The largest of every rank's `value` (an all-reduce also makes a barrier).
double across_ranks_max(loom::Runtime& rt, const loom::Communicator& comm, double value) {
  const float v = static_cast<float>(value);
  Tensor t = rt.upload(std::span<const float>(&v, 1), {1});
  loom::Graph g;
  g.collective(comm.all_reduce(t, t, loom::ReduceOp::max));
  rt.submit(g).wait();
  return rt.download<float>(t)[0];
}

// The largest |a - b|, and the largest |b| (a and b of one shape).
struct Difference {
  double max_error = 0, max_value = 0;
};
Difference compare(loom::Runtime& rt, const Tensor& mine, const Tensor& reference) {
  loom::Graph g;
  const auto widen = [&](const Tensor& x) {
    Tensor t = rt.tensor<float>(x.shape());
    g.add(loom::ops::cast(x, t));
    return t;
  };
  const Tensor a = widen(mine);
  const Tensor b = widen(reference);
  rt.submit(g).wait();
  const auto va = rt.download<float>(a);
  const auto vb = rt.download<float>(b);
  Difference d;
  for (std::size_t i = 0; i < va.size(); ++i) {
    d.max_error = std::max(d.max_error, static_cast<double>(std::fabs(va[i] - vb[i])));
    d.max_value = std::max(d.max_value, static_cast<double>(std::fabs(vb[i])));
  }
  return d;
}

struct Result {
  double ring_s = 0, whole_s = 0;
  bool checked = false, ok = true;
  std::string report;
};

// Flops of the forward (two products of 2 B H S^2 D, halved under a causal
// mask); the backward does 2.5 times as many (five products).
double flops(const Options& o) {
  const double f = 4.0 * static_cast<double>(o.batch * o.heads) * static_cast<double>(o.seq) *
                   static_cast<double>(o.seq) * static_cast<double>(o.dim);
  return (o.causal ? 0.5 : 1.0) * f * (o.backward ? 3.5 : 1.0);
}

// One rank's part: its block, the ring, the timing, the check.
Result run_rank(const Options& o, const loom::Communicator& comm, loom::Runtime& rt) {
  const int ranks = comm.size();
  const int rank = comm.rank();
  const std::int64_t block = o.seq / ranks;
  const auto ranges = loom::ops::ring_ranges(o.seq, rank, ranks, o.layout);
  const loom::Shape shape{o.batch, o.heads, block, o.dim};
  const loom::ops::RingAttentionOptions ro{.causal = o.causal, .layout = o.layout};

  loom::Graph setup;
  const Tensor q = input(rt, setup, o, 0, ranges);
  const Tensor k = input(rt, setup, o, 1, ranges);
  const Tensor v = input(rt, setup, o, 2, ranges);
  const Tensor dout = input(rt, setup, o, 3, ranges);
  rt.submit(setup).wait();
  const Tensor out = rt.tensor(o.dtype, shape);
  const Tensor lse = rt.tensor<float>({o.batch, o.heads, block});
  const Tensor dq = rt.tensor(o.dtype, shape);
  const Tensor dk = rt.tensor(o.dtype, shape);
  const Tensor dv = rt.tensor(o.dtype, shape);
  loom::Graph ring;
  loom::ops::ring_attention(ring, comm, q, k, v, out, lse, ro);
  if (o.backward) {
    loom::ops::ring_attention_backward(ring, comm, q, k, v, out, lse, dout,
                                       {.dq = dq, .dk = dk, .dv = dv}, ro);
  }

  for (int i = 0; i < o.warmup; ++i) rt.submit(ring).wait();
  double total = 0;
  for (int i = 0; i < o.iterations; ++i) {
    (void)across_ranks_max(rt, comm, 0);  // start together
    const auto t0 = std::chrono::steady_clock::now();
    rt.submit(ring).wait();
    total += across_ranks_max(rt, comm, seconds_since(t0));
  }
  Result result;
  result.ring_s = total / o.iterations;
  if (!o.trace.empty() && rank == 0) rt.start_activity_log();
  (void)across_ranks_max(rt, comm, 0);
  rt.submit(ring).wait();
  if (!o.trace.empty() && rank == 0) {
    const loom::ActivityLog log = rt.stop_activity_log();
    loom::write_chrome_trace(log, o.trace);
    // How long the communication stream and the compute kernels were busy
    // at the same time, against the compute's busy time.
    double compute = 0, both = 0;
    for (const auto& a : log.spans) {
      if (a.task.find("flash") == std::string::npos) continue;
      compute += a.duration_us;
      for (const auto& b : log.spans) {
        if (b.task.find(".send_") == std::string::npos) continue;
        both += std::max(0.0, std::min(a.start_us + a.duration_us, b.start_us + b.duration_us) -
                                  std::max(a.start_us, b.start_us));
      }
    }
    result.report += "trace " + o.trace + ": rank 0's sends overlap " +
                     std::to_string(compute > 0 ? 100.0 * both / compute : 0.0) +
                     "% of its flash time\n";
  }

  // One flash call over the whole sequence, on rank 0 while the others wait:
  // the ideal's measure, and with --check every rank's reference.
  const std::vector<loom::ops::SequenceRange> everything{{0, o.seq}};
  for (int turn = 0; turn < ranks; ++turn) {
    const bool mine = turn == rank && (o.check != 0 || rank == 0);
    if (mine) {
      loom::Graph wg;
      const Tensor wq = input(rt, wg, o, 0, everything);
      const Tensor wk = input(rt, wg, o, 1, everything);
      const Tensor wv = input(rt, wg, o, 2, everything);
      const Tensor wdout = input(rt, wg, o, 3, everything);
      rt.submit(wg).wait();
      const loom::Shape whole{o.batch, o.heads, o.seq, o.dim};
      const Tensor wout = rt.tensor(o.dtype, whole);
      const Tensor wlse = rt.tensor<float>({o.batch, o.heads, o.seq});
      const Tensor wdq = rt.tensor(o.dtype, whole);
      const Tensor wdk = rt.tensor(o.dtype, whole);
      const Tensor wdv = rt.tensor(o.dtype, whole);
      loom::Graph one;
      const loom::ops::AttentionOptions ao{.causal = o.causal};
      one.add(loom::ops::flash_attention(wq, wk, wv, wout, wlse, ao));
      if (o.backward) {
        one.add(loom::ops::flash_attention_backward(wq, wk, wv, wout, wlse, wdout,
                                                    {.dq = wdq, .dk = wdk, .dv = wdv}, ao));
      }
      for (int i = 0; i < o.warmup; ++i) rt.submit(one).wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iterations; ++i) rt.submit(one).wait();
      if (rank == 0) result.whole_s = seconds_since(t0) / o.iterations;
      if (o.check != 0) {
        // Its rows of the whole result, in the block's order.
        loom::Graph rows;
        const auto my_rows = [&](const Tensor& w) {
          Tensor t =
              rt.tensor(w.dtype(), w.rank() == 4 ? shape : loom::Shape{o.batch, o.heads, block});
          loom::ops::ring_shard(rows, w, t, rank, ranks, o.layout);
          return t;
        };
        const Tensor ref_out = my_rows(wout), ref_lse = my_rows(wlse);
        const Tensor ref_dq = my_rows(wdq), ref_dk = my_rows(wdk), ref_dv = my_rows(wdv);
        rt.submit(rows).wait();
        std::vector<std::pair<const char*, Difference>> diffs{{"out", compare(rt, out, ref_out)},
                                                              {"lse", compare(rt, lse, ref_lse)}};
        if (o.backward) {
          diffs.emplace_back("dq", compare(rt, dq, ref_dq));
          diffs.emplace_back("dk", compare(rt, dk, ref_dk));
          diffs.emplace_back("dv", compare(rt, dv, ref_dv));
        }
        result.checked = true;
        for (const auto& [what, d] : diffs) {
          // Both results round each value to 16 bits once; the ring merges
          // partial results rounded to 16 bits: a few units of the last place.
          const double tol = std::string(what) == "lse" ? 1e-3 : 2e-2 * std::max(d.max_value, 1e-3);
          const bool ok = d.max_error <= tol;
          result.ok = result.ok && ok;
          char line[160];
          std::snprintf(line, sizeof line,
                        "rank %d %s: max |ring - whole| %.3g (max |whole| %.3g) %s\n", rank, what,
                        d.max_error, d.max_value, ok ? "ok" : "WRONG");
          result.report += line;
        }
      }
    }
    (void)across_ranks_max(rt, comm, 0);  // one rank at a time
  }
  return result;
}

void print_summary(const Options& o, int ranks, int ranks_per_gpu, const Result& r) {
  const double ideal = r.whole_s * ranks_per_gpu / ranks;
  std::printf("ring attention: %d ranks (%d a GPU), seq %lld, B %lld, H %lld, D %lld, %s%s, %s%s\n",
              ranks, ranks_per_gpu, static_cast<long long>(o.seq), static_cast<long long>(o.batch),
              static_cast<long long>(o.heads), static_cast<long long>(o.dim),
              o.dtype == DType::bf16 ? "bf16" : "f16", o.causal ? ", causal" : "",
              o.layout == RingLayout::zigzag ? "zigzag" : "contiguous",
              o.backward ? ", forward + backward" : ", forward");
  std::printf("%-28s %12s %12s\n", "", "ms", "TFLOP/s");
  std::printf("%-28s %12.3f %12.1f\n", "ring (slowest rank)", r.ring_s * 1e3,
              flops(o) / r.ring_s * 1e-12);
  std::printf("%-28s %12.3f %12.1f\n", "one flash call, whole seq", r.whole_s * 1e3,
              flops(o) / r.whole_s * 1e-12);
  std::printf("efficiency (ideal %.3f ms / ring): %.3f\n", ideal * 1e3, ideal / r.ring_s);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.local > 0) {
    // P ranks in this process, a thread and a Runtime each, on one device.
    const auto comms = loom::local_communicators(o.local);
    std::vector<Result> results(comms.size());
    std::vector<std::string> errors;
    std::mutex m;
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < comms.size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          loom::Runtime rt;
          results[r] = run_rank(o, *comms[r], rt);
        } catch (const std::exception& e) {
          const std::lock_guard lock(m);
          errors.push_back("rank " + std::to_string(r) + ": " + e.what());
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
    if (!errors.empty()) return 1;
    bool ok = true;
    for (const auto& r : results) {
      std::fputs(r.report.c_str(), stdout);
      ok = ok && r.ok;
    }
    print_summary(o, o.local, o.local, results[0]);
    return ok ? 0 : 1;
  }
  loom::Runtime rt;
  const auto world = loom::world_communicator(rt);
  const Result r = run_rank(o, *world, rt);
  // Every rank's check, in rank order.
  for (int turn = 0; turn < world->size(); ++turn) {
    if (turn == world->rank()) {
      std::fputs(r.report.c_str(), stdout);
      std::fflush(stdout);
    }
    (void)across_ranks_max(rt, *world, 0);
  }
  const bool all_ok = across_ranks_max(rt, *world, r.ok ? 0.0 : 1.0) == 0.0;
  if (world->rank() == 0) {
    const int per_gpu = world->backend() == "nccl" ? 1 : world->size();
    print_summary(o, world->size(), per_gpu, r);
  }
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "loom_ring_attention: %s\n", e.what());
  return 1;
}
