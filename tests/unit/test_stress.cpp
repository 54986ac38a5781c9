// A stress test on the CPU backend, bounded in time: several threads submit
// random graphs over shared tensors (some through a second wrapper of the
// same memory), with host tasks that fail, random cancels, waits, nested
// submits and continuations; runtimes are destroyed with work in flight while
// continuations still submit, and some are destroyed by the continuation that
// held their last reference. Every pair of conflicting accesses must never
// run at once (a writer runs alone; readers run together), every run must
// end, and every failure must name its task.
//
// LOOM_STRESS_SECONDS sets the time budget (default 3 s; the sanitizer
// passes run the same budget, so fewer rounds).
#include <loom/error.hpp>
#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include "support/cpu.hpp"
#include "support/seed.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using loom::DType;
using loom::Graph;
using loom::Memory;

constexpr int kTensors = 8;
constexpr std::int64_t kElements = 64;

double budget_seconds() {
  if (const char* s = std::getenv("LOOM_STRESS_SECONDS"); s != nullptr && *s != '\0') {
    return std::strtod(s, nullptr);
  }
  return 3.0;
}

// Who is inside a tensor now: a writer must be alone, readers need no writer.
struct Occupancy {
  std::atomic<int> writers{0};
  std::atomic<int> readers{0};
};

struct Shared {
  std::vector<float> memory = std::vector<float>(kTensors * kElements, 0.0F);
  Occupancy occupancy[kTensors];
  std::atomic<int> violations{0};
  std::atomic<int> refused_submits{0};
  std::atomic<long> tasks_run{0};
};

// One runtime's life. Its tasks and continuations hold the round, which
// holds the runtime: whichever lets go last destroys it (the test's thread,
// or a loom worker, which hands the teardown off).
class Round : public std::enable_shared_from_this<Round> {
 public:
  Round(Shared& shared, std::shared_ptr<loom::Runtime> rt) : s_(shared), rt_(std::move(rt)) {
    for (int i = 0; i < kTensors; ++i) {
      float* p = s_.memory.data() + i * kElements;
      tensors_.push_back(rt_->provide(p, DType::f32, {kElements}, Memory::pageable));
      aliases_.push_back(rt_->provide(p, DType::f32, {kElements}, Memory::pageable));
    }
  }

  // A random graph of host tasks (and an op now and then) over the tensors.
  Graph random_graph(std::mt19937_64& rng, bool allow_nested) {
    Graph g;
    const int tasks = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < tasks; ++k) {
      const int i = static_cast<int>(rng() % kTensors);
      const bool write = rng() % 2 == 0;
      const loom::Tensor& t = rng() % 3 == 0 ? aliases_[i] : tensors_[i];
      const bool fails = rng() % 20 == 0;
      const bool nested = allow_nested && rng() % 15 == 0;
      const auto pause = std::chrono::microseconds(rng() % 300);
      const std::string name = std::string(write ? "write " : "read ") + std::to_string(i);
      g.host(
          name,
          [self = shared_from_this(), i, write, fails, nested, pause, name] {
            self->enter(i, write);
            std::this_thread::sleep_for(pause);
            if (write) self->s_.memory[static_cast<std::size_t>(i * kElements)] += 1.0F;
            self->leave(i, write);
            ++self->s_.tasks_run;
            if (nested) self->nested_submit();
            if (fails) throw std::runtime_error("planned failure in " + name);
          },
          write ? std::vector<loom::Tensor>{} : std::vector<loom::Tensor>{t},
          write ? std::vector<loom::Tensor>{t} : std::vector<loom::Tensor>{});
    }
    return g;
  }

  // What a submitting thread does: submit, then wait, cancel, continue or keep.
  void drive(std::uint64_t seed, Clock::time_point until, std::vector<loom::Future>& kept) {
    std::mt19937_64 rng(seed);
    while (Clock::now() < until) {
      auto run = rt_->submit(random_graph(rng, true));
      switch (rng() % 5) {
        case 0: run.cancel(); break;
        case 1: try { run.wait();
          } catch (const loom::Error&) {
          }
          break;
        case 2:
          run.then([self = shared_from_this(), seed = rng()](const loom::Future&) {
            self->continuation(seed);
          });
          break;
        default: break;
      }
      kept.push_back(run);
    }
  }

  // Continuations run until the runtime's shutdown is over, and may submit
  // (and wait) meanwhile.
  void continuation(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    try {
      auto run = rt_->submit(random_graph(rng, false));
      if (rng() % 2 == 0) {
        try {
          run.wait();
        } catch (const loom::Error&) {
        }
      }
    } catch (const loom::InvalidArgument&) {
      ++s_.refused_submits;
    }
  }

 private:
  void enter(int i, bool write) {
    Occupancy& o = s_.occupancy[i];
    if (write) {
      if (o.writers.fetch_add(1) != 0 || o.readers.load() != 0) ++s_.violations;
    } else {
      o.readers.fetch_add(1);
      if (o.writers.load() != 0) ++s_.violations;
    }
  }
  void leave(int i, bool write) {
    Occupancy& o = s_.occupancy[i];
    (write ? o.writers : o.readers).fetch_sub(1);
  }
  // Over data of its own: a nested run over the shared tensors could be
  // ordered after the very run that waits for it (a deadlock by design).
  void nested_submit() {
    auto own = rt_->tensor<float>({kElements});
    Graph g;
    g.add(loom::ops::fill(own, 1.0F));
    g.host("nested",
           [own] {
             if (own.data_as<float>()[0] != 1.0F) throw std::logic_error("nested run out of order");
           },
           {own}, {});
    rt_->submit(g).wait();  // a nested wait on a host worker: another worker takes over
  }

  Shared& s_;
  std::shared_ptr<loom::Runtime> rt_;
  std::vector<loom::Tensor> tensors_;
  std::vector<loom::Tensor> aliases_;
};

void check_outcome(const loom::Future& run) {
  ASSERT_TRUE(run.wait_for(30s)) << "a run never ended";
  try {
    run.wait();
  } catch (const loom::Cancelled&) {
  } catch (const loom::Error& e) {
    EXPECT_FALSE(e.task().empty()) << "a failure without its task: " << e.what();
    EXPECT_NE(std::string(e.what()).find("planned failure"), std::string::npos) << e.what();
  }
}

TEST(Stress, RandomGraphsCancelsFailuresWaitsAndShutdownsHoldTheOrder) {
  const auto seed = loom::test::fresh_seed();
  std::mt19937_64 rng(seed);
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(budget_seconds()));
  Shared shared;
  int rounds = 0;
  long runs = 0;
  do {
    const int threads = 2 + static_cast<int>(rng() % 3);
    const auto round_end = std::min(end, Clock::now() + 300ms);
    std::vector<std::vector<loom::Future>> kept(static_cast<std::size_t>(threads));
    auto rt = std::make_shared<loom::Runtime>(loom::test::cpu(1 + static_cast<int>(rng() % 3)));
    const std::weak_ptr<loom::Runtime> watch = rt;
    auto round = std::make_shared<Round>(shared, rt);
    {
      std::vector<std::thread> submitters;
      for (int k = 0; k < threads; ++k) {
        submitters.emplace_back([&, k, thread_seed = rng()] {
          round->drive(thread_seed, round_end, kept[static_cast<std::size_t>(k)]);
        });
      }
      for (auto& t : submitters) t.join();
    }
    // Destroyed with work in flight, by this thread (which then waits for
    // it) or by the last task or continuation that holds it (on a loom
    // worker, which hands the teardown off); continuations still submit.
    if (rng() % 2 == 0) {
      round.reset();
      rt.reset();
    } else {
      rt.reset();
      round.reset();
    }
    const auto deadline = Clock::now() + 30s;
    while (!watch.expired() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(watch.expired()) << "a runtime was never destroyed";
    for (const auto& list : kept) {
      for (const auto& run : list) check_outcome(run);
      runs += static_cast<long>(list.size());
    }
    ++rounds;
  } while (Clock::now() < end);
  std::printf("stress: %d runtimes, %ld runs, %ld host tasks, %d conflicting overlaps\n", rounds,
              runs, shared.tasks_run.load(), shared.violations.load());
  EXPECT_EQ(shared.violations.load(), 0) << "conflicting accesses ran at once";
  EXPECT_EQ(shared.refused_submits.load(), 0) << "a submit during shutdown was refused";
  EXPECT_GT(rounds, 0);
}

}  // namespace
