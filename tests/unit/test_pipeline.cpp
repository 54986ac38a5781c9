// The pipeline on the CPU backend: every frame in order under a slow
// consumer, the drop policy's count, delay buffers, a failing stage that
// stops the pipeline naming itself with no frame half-delivered, take and
// provide, statistics, and the refusals.

#include "support/cpu.hpp"

#include <loom/error.hpp>
#include <loom/ops.hpp>
#include <loom/pipeline.hpp>
#include <loom/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::DType;
using loom::Frame;
using loom::Graph;
using loom::InputFrame;
using loom::Pipeline;
using loom::PipelineBuffer;
using loom::PipelineBuilder;
using loom::PipelineOptions;
using loom::StageSlot;
using loom::test::cpu;

constexpr std::int64_t kN = 1000;

// Frame f's input: f + i / 1024 at element i (exact in f32 for the sizes here).
void fill_input(const loom::Tensor& t, std::uint64_t frame) {
  float* p = t.data_as<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(frame) + static_cast<float>(i) / 1024.0f;
}

// in -> "scale" (tmp = 2 in) -> "add" (out = tmp + in): out = 3 in.
struct ThreeX {
  PipelineBuffer in, tmp, out;
  Pipeline pipeline;

  ThreeX(loom::Runtime& rt, PipelineOptions options) : pipeline(build(rt, std::move(options))) {}

  Pipeline build(loom::Runtime& rt, PipelineOptions options) {
    PipelineBuilder b(rt, std::move(options));
    in = b.input("x", DType::f32, {kN});
    tmp = b.buffer("twice", DType::f32, {kN});
    out = b.output("y", DType::f32, {kN});
    b.stage("scale", [this](Graph& g, const StageSlot& s) {
      g.add(loom::ops::scale_copy(s[in], s[tmp], 2.0f));
    });
    b.stage("add", [this](Graph& g, const StageSlot& s) {
      g.add(loom::ops::vector_add(s[tmp], s[in], s[out]));
    });
    return b.build();
  }

  std::uint64_t push(std::uint64_t expected_number) {
    InputFrame f = pipeline.acquire();
    EXPECT_EQ(f.number(), expected_number);
    fill_input(f.input(in), f.number());
    return pipeline.push(std::move(f));
  }
};

// Whether frame `f`'s output is 3 times its input, element by element.
bool holds_three_x(const loom::Tensor& out, std::uint64_t frame) {
  const float* p = out.data_as<float>();
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const float x = static_cast<float>(frame) + static_cast<float>(i) / 1024.0f;
    if (p[i] != 2.0f * x + x) return false;
  }
  return true;
}

TEST(Pipeline, EveryFrameArrivesOnceAndInOrderUnderASlowConsumer) {
  loom::Runtime rt(cpu(4));
  ThreeX p(rt, {.name = "slow consumer", .slots = 3});
  constexpr std::uint64_t frames = 150;
  std::vector<std::uint64_t> seen;
  std::atomic<int> wrong{0};
  std::thread consumer([&] {
    while (std::optional<Frame> f = p.pipeline.pop()) {
      if (f->number() % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!holds_three_x(f->output(p.out), f->number())) ++wrong;
      seen.push_back(f->number());
    }
  });
  for (std::uint64_t i = 0; i < frames; ++i) p.push(i);
  p.pipeline.close();
  consumer.join();
  ASSERT_EQ(seen.size(), frames);
  for (std::uint64_t i = 0; i < frames; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(wrong.load(), 0);
  const loom::PipelineStats s = p.pipeline.stats();
  EXPECT_EQ(s.pushed, frames);
  EXPECT_EQ(s.completed, frames);
  EXPECT_EQ(s.delivered, frames);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_GT(s.frames_per_second, 0.0);
  EXPECT_LE(s.latency_p50_us, s.latency_p99_us);
  EXPECT_LE(s.latency_p99_us, s.latency_max_us);
  EXPECT_GT(s.latency_p50_us, 0.0);
  EXPECT_EQ(p.pipeline.latencies_us().size(), frames);
}

TEST(Pipeline, DropOldestDropsWhatTheConsumerHasNotTakenAndCountsIt) {
  loom::Runtime rt(cpu(2));
  ThreeX p(rt, {.name = "drops", .slots = 3, .overflow = loom::Overflow::drop_oldest});
  // Nobody pops while 40 frames go in: each new frame drops the one three before it.
  for (std::uint64_t i = 0; i < 40; ++i) p.push(i);
  p.pipeline.close();
  std::vector<std::uint64_t> seen;
  while (std::optional<Frame> f = p.pipeline.pop()) {
    EXPECT_TRUE(holds_three_x(f->output(p.out), f->number())) << "frame " << f->number();
    seen.push_back(f->number());
  }
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{37, 38, 39}));
  const loom::PipelineStats s = p.pipeline.stats();
  EXPECT_EQ(s.dropped, 37u);
  EXPECT_EQ(s.delivered + s.dropped, s.pushed);
}

TEST(Pipeline, ADelayBufferReadsTheFrameKFramesAgo) {
  loom::Runtime rt(cpu(4));
  PipelineBuilder b(rt, {.name = "delay", .slots = 4});
  auto in = b.input("x", DType::f32, {kN});
  auto kept = b.buffer("kept", DType::f32, {kN});
  auto diff = b.output("x minus x two frames ago", DType::f32, {kN});
  b.stage("keep", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::scale_copy(s[in], s[kept], 1.0f));
  });
  b.stage("diff", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::axpby(1.0f, s[kept], -1.0f, s.delayed(kept, 2), s[diff]));
  });
  Pipeline p = b.build();
  std::thread producer([&] {
    for (int i = 0; i < 30; ++i) {
      InputFrame f = p.acquire();
      fill_input(f.input(in), f.number());
      p.push(std::move(f));
    }
    p.close();
  });
  std::uint64_t next = 0;
  while (std::optional<Frame> f = p.pop()) {
    ASSERT_EQ(f->number(), next++);
    const float* d = f->output(diff).data_as<float>();
    for (std::int64_t i = 0; i < kN; ++i) {
      // Before frame 2 the delayed buffer reads as zeros.
      const float expected =
          f->number() >= 2 ? 2.0f
                           : static_cast<float>(f->number()) + static_cast<float>(i) / 1024.0f;
      ASSERT_EQ(d[i], expected) << "frame " << f->number() << " element " << i;
    }
  }
  producer.join();
  EXPECT_EQ(next, 30u);
}

// "copy" (y = x), then "check", which fails on frame 7.
struct Faulty {
  PipelineBuffer in, out;
  Pipeline pipeline;

  Faulty(loom::Runtime& rt, std::size_t slots) : pipeline(build(rt, slots)) {}

  Pipeline build(loom::Runtime& rt, std::size_t slots) {
    PipelineBuilder b(rt, {.name = "faulty", .slots = slots});
    in = b.input("x", DType::f32, {kN});
    out = b.output("y", DType::f32, {kN});
    b.stage("copy", [this](Graph& g, const StageSlot& s) {
      g.add(loom::ops::scale_copy(s[in], s[out], 1.0f));
    });
    b.stage("check", [this](Graph& g, const StageSlot& s) {
      const loom::Tensor x = s[in];
      g.host("reject frame 7",
             [x] {
               if (x.data_as<float>()[0] == 7.0f) throw std::runtime_error("frame seven is cursed");
             },
             {x});
    });
    return b.build();
  }
};

TEST(Pipeline, AFailingStageStopsThePipelineNamingItAndNoFrameIsHalfDelivered) {
  loom::Runtime rt(cpu(4));
  Faulty faulty(rt, 3);
  Pipeline& p = faulty.pipeline;
  const PipelineBuffer in = faulty.in, out = faulty.out;
  std::vector<std::uint64_t> delivered;
  std::string consumer_error;
  std::thread consumer([&] {
    try {
      while (std::optional<Frame> f = p.pop()) {
        const float* y = f->output(out).data_as<float>();
        if (y[0] != static_cast<float>(f->number())) ADD_FAILURE() << "frame " << f->number();
        delivered.push_back(f->number());
      }
    } catch (const loom::PipelineError& e) {
      consumer_error = e.what();
      EXPECT_EQ(e.stage(), "check");
      EXPECT_EQ(e.frame(), 7u);
      EXPECT_TRUE(e.cause() != nullptr);
    }
  });
  bool producer_stopped = false;
  for (int i = 0; i < 100 && !producer_stopped; ++i) {
    try {
      InputFrame f = p.acquire();
      fill_input(f.input(in), f.number());
      p.push(std::move(f));
    } catch (const loom::PipelineError& e) {
      producer_stopped = true;
      EXPECT_EQ(e.frame(), 7u);
    }
  }
  EXPECT_TRUE(producer_stopped);
  consumer.join();
  EXPECT_EQ(delivered, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_NE(consumer_error.find("pipeline 'faulty'"), std::string::npos) << consumer_error;
  EXPECT_NE(consumer_error.find("stage 'check'"), std::string::npos) << consumer_error;
  EXPECT_NE(consumer_error.find("frame 7"), std::string::npos) << consumer_error;
  EXPECT_NE(consumer_error.find("frame seven is cursed"), std::string::npos) << consumer_error;
  // It stays stopped, and push throws as pop and acquire do.
  EXPECT_THROW(p.pop(), loom::PipelineError);
  EXPECT_THROW(p.acquire(), loom::PipelineError);
  std::vector<float> mine(kN, 1.0f);
  EXPECT_THROW(p.push({rt.provide(mine.data(), DType::f32, {kN}, loom::Memory::pageable)}),
               loom::PipelineError);
}

// The README: after a stage fails, "pop, acquire and push throw a
// PipelineError naming the pipeline, the stage and the frame, with the
// original error as its cause": a frame acquired before the failure and
// pushed after it is refused too, and the cause is the task's own error.
TEST(Pipeline, AfterAFailurePushThrowsAndTheCauseIsTheTasksError) {
  loom::Runtime rt(cpu(4));
  Faulty faulty(rt, 10);  // frames 0..8 each have a slot: nobody needs to pop
  Pipeline& p = faulty.pipeline;
  std::optional<InputFrame> late;
  try {
    for (;;) {
      InputFrame f = p.acquire();
      fill_input(f.input(faulty.in), f.number());
      if (f.number() == 8) {
        late.emplace(std::move(f));  // acquired; pushed once frame 7 has failed
        break;
      }
      p.push(std::move(f));
    }
  } catch (const loom::PipelineError&) {
    // the failure came before frame 8 was acquired: nothing to push late
  }
  // Wait for frame 7's failure to stop the pipeline.
  std::exception_ptr failure;
  try {
    while (std::optional<Frame> f = p.pop()) f.reset();
  } catch (const loom::PipelineError&) {
    failure = std::current_exception();
  }
  ASSERT_TRUE(failure) << "frame 7 did not stop the pipeline";
  if (late) {
    try {
      p.push(std::move(*late));
      ADD_FAILURE() << "a frame acquired before the failure was pushed after it";
    } catch (const loom::PipelineError& e) {
      EXPECT_EQ(e.frame(), 7u);
    }
  }
  try {
    std::rethrow_exception(failure);
  } catch (const loom::PipelineError& e) {
    EXPECT_EQ(e.stage(), "check");
    EXPECT_EQ(e.frame(), 7u);
    ASSERT_TRUE(e.cause() != nullptr);
    try {
      std::rethrow_exception(e.cause());
    } catch (const loom::Error& cause) {
      EXPECT_EQ(cause.task(), "reject frame 7");
      EXPECT_NE(std::string(cause.what()).find("frame seven is cursed"), std::string::npos)
          << cause.what();
    } catch (...) {
      ADD_FAILURE() << "the cause is not a loom::Error naming its task";
    }
  }
}

// The frames before the failing one are complete but not yet taken when it
// fails (nobody pops until the producer has stopped): they are still
// delivered, and nothing from the failing frame on.
TEST(Pipeline, FramesFinishedBeforeAFailureAreStillDelivered) {
  loom::Runtime rt(cpu(4));
  Faulty faulty(rt, 10);
  Pipeline& p = faulty.pipeline;
  const PipelineBuffer in = faulty.in, out = faulty.out;
  // Frames 0..9 fill the ten slots; acquiring frame 10 waits for slot 0 until the failure.
  std::uint64_t pushed = 0;
  try {
    for (;;) {
      InputFrame f = p.acquire();
      fill_input(f.input(in), f.number());
      p.push(std::move(f));
      ++pushed;
    }
  } catch (const loom::PipelineError& e) {
    EXPECT_EQ(e.frame(), 7u);
  }
  EXPECT_GE(pushed, 8u);
  for (std::uint64_t i = 0; i < 7; ++i) {
    std::optional<Frame> f = p.pop();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->number(), i);
    EXPECT_EQ(f->output(out).data_as<float>()[0], static_cast<float>(i));
  }
  EXPECT_THROW(p.pop(), loom::PipelineError);
  EXPECT_EQ(p.stats().delivered, 7u);
}

// A consumer that waits for the oldest frame keeps it: the producer, which
// needs that frame's slot, does not drop it when it completes.
TEST(Pipeline, DropOldestNeverDropsTheFrameTheConsumerWaitsFor) {
  loom::Runtime rt(cpu(4));
  PipelineBuilder b(rt, {.name = "gated", .slots = 2, .overflow = loom::Overflow::drop_oldest});
  auto in = b.input("x", DType::f32, {4});
  auto out = b.output("y", DType::f32, {4});
  std::atomic<bool> open{false};
  b.stage("gate", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::scale_copy(s[in], s[out], 1.0f));
    g.host("wait for the gate", [&open] {
      while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  });
  Pipeline p = b.build();
  for (int i = 0; i < 2; ++i) {
    InputFrame f = p.acquire();
    fill_input(f.input(in), f.number());
    p.push(std::move(f));
  }
  std::optional<Frame> got;
  std::thread consumer([&] { got = p.pop(); });  // waits for frame 0
  std::thread producer([&] {
    InputFrame f = p.acquire();  // needs frame 0's slot
    p.push(std::move(f));
  });
  // Both wait now (a generous pause: the assertion holds however long it is).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  open = true;
  consumer.join();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->number(), 0u);
  got.reset();
  producer.join();
  EXPECT_EQ(p.stats().dropped, 0u);
  p.close();
}

// The README: "A frame holds its slot until the consumer drops its Frame":
// under drop_oldest too, a frame the consumer has popped and still holds is
// neither dropped nor overwritten; the producer that needs its slot waits.
TEST(Pipeline, AHeldFrameKeepsItsSlotUnderDropOldest) {
  loom::Runtime rt(cpu(2));
  ThreeX p(rt, {.name = "held", .slots = 2, .overflow = loom::Overflow::drop_oldest});
  p.push(0);
  std::optional<Frame> held = p.pipeline.pop();
  ASSERT_TRUE(held);
  ASSERT_EQ(held->number(), 0u);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    p.push(1);  // slot 1
    ++pushed;
    p.push(2);  // slot 0: the consumer holds frame 0 there
    ++pushed;
  });
  // Frame 1 goes in; then a generous pause (the assertions hold however
  // long it is) in which frame 2 must not.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pushed.load() < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(pushed.load(), 1) << "frame 2 took the held frame's slot";
  EXPECT_EQ(p.pipeline.stats().dropped, 0u);
  EXPECT_TRUE(holds_three_x(held->output(p.out), 0)) << "the held frame's output was overwritten";
  held.reset();  // the slot goes back: frame 2 proceeds
  producer.join();
  EXPECT_EQ(pushed.load(), 2);
  p.pipeline.close();
  std::vector<std::uint64_t> seen;
  while (std::optional<Frame> f = p.pipeline.pop()) {
    EXPECT_TRUE(holds_three_x(f->output(p.out), f->number())) << "frame " << f->number();
    seen.push_back(f->number());
  }
  // Frame 1 was never taken, so frame 2 may have dropped it; none is lost uncounted.
  const loom::PipelineStats s = p.pipeline.stats();
  EXPECT_EQ(s.delivered + s.dropped, s.pushed);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 2u);
}

// The README: "a frame ... allocates nothing": once the pools have grown to
// what a burst needs, more frames take no new memory.
TEST(Pipeline, SteadyStateFramesAllocateNothing) {
  loom::Runtime rt(cpu(2));
  ThreeX p(rt, {.name = "steady", .slots = 3});
  std::uint64_t next = 0;
  const auto burst = [&] {
    std::thread consumer([&] {
      for (int i = 0; i < 30; ++i) {
        std::optional<Frame> f = p.pipeline.pop();
        EXPECT_TRUE(f);  // no ASSERT: returning early would leave the producer waiting
        if (f) {
          EXPECT_TRUE(holds_three_x(f->output(p.out), f->number()));
        }
      }
    });
    for (int i = 0; i < 30; ++i) p.push(next++);
    consumer.join();
  };
  burst();
  burst();
  const auto before = rt.statistics(loom::Memory::pageable);
  burst();
  burst();
  const auto after = rt.statistics(loom::Memory::pageable);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.upstream_allocations, before.upstream_allocations);
}

TEST(Pipeline, PushOfTheCallersBuffersAndTakeOfAnOutput) {
  loom::Runtime rt(cpu(2));
  ThreeX p(rt, {.name = "ownership", .slots = 2});
  std::vector<float> mine(kN);
  for (std::uint64_t i = 0; i < kN; ++i) mine[i] = static_cast<float>(i) / 1024.0f + 100.0f;
  // "Provide": the caller's memory, uploaded from directly.
  const std::uint64_t n0 =
      p.pipeline.push({rt.provide(mine.data(), DType::f32, {kN}, loom::Memory::pageable)});
  EXPECT_EQ(n0, 0u);
  std::optional<Frame> f = p.pipeline.pop();
  ASSERT_TRUE(f);
  // frame 0's input was 100 + i/1024: holds_three_x of "frame 100", which no frame here is.
  EXPECT_TRUE(holds_three_x(f->output(p.out), 100));
  // "Take": the output is the caller's now; later frames in that slot do not touch it.
  loom::Tensor taken = f->take(p.out);
  EXPECT_THROW(f->output(p.out), loom::InvalidArgument);
  f.reset();
  for (std::uint64_t i = 1; i < 6; ++i) {
    p.push(i);
    std::optional<Frame> g = p.pipeline.pop();
    ASSERT_TRUE(g);
    EXPECT_TRUE(holds_three_x(g->output(p.out), i));
  }
  EXPECT_TRUE(holds_three_x(taken, 100));
  // Wrong tensors are refused, saying what was expected.
  try {
    p.pipeline.push({rt.tensor<float>({kN + 1}, loom::Memory::pageable)});
    ADD_FAILURE() << "a wrong shape was accepted";
  } catch (const loom::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p.pipeline.push(std::vector<loom::Tensor>{}), loom::InvalidArgument);
}

TEST(Pipeline, AnUnpushedInputFrameGivesItsSlotBack) {
  loom::Runtime rt(cpu(2));
  ThreeX p(rt, {.slots = 2});
  {
    InputFrame f = p.pipeline.acquire();
    EXPECT_EQ(f.number(), 0u);
    EXPECT_THROW(p.pipeline.acquire(), loom::InvalidArgument);  // one out at a time
  }
  p.push(0);  // the same number again
  std::optional<Frame> f = p.pipeline.pop();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->number(), 0u);
  EXPECT_TRUE(holds_three_x(f->output(p.out), 0));
  EXPECT_FALSE(p.pipeline.try_pop());
  p.pipeline.close();
  EXPECT_THROW(p.pipeline.acquire(), loom::InvalidArgument);
  f.reset();
  EXPECT_FALSE(p.pipeline.pop());
}

TEST(Pipeline, DestroyingItWithFramesInFlightWaitsForThemOnly) {
  loom::Runtime rt(cpu(2));
  std::atomic<int> finished{0};
  PipelineBuffer out;
  std::optional<Frame> held;
  {
    PipelineBuilder b(rt, {.slots = 3});
    auto in = b.input("x", DType::f32, {kN});
    out = b.output("y", DType::f32, {kN});
    b.stage("slow", [&](Graph& g, const StageSlot& s) {
      g.add(loom::ops::scale_copy(s[in], s[out], 3.0f));
      g.host("count", [&finished] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++finished;
      });
    });
    Pipeline p = b.build();
    for (int i = 0; i < 3; ++i) {
      InputFrame f = p.acquire();
      fill_input(f.input(in), f.number());
      p.push(std::move(f));
    }
    held = p.pop();  // frame 0: a frame outlives the pipeline; nobody pops 1 and 2
  }
  EXPECT_EQ(finished.load(), 3);  // the destructor waited for frames 1 and 2
  ASSERT_TRUE(held);
  EXPECT_EQ(held->number(), 0u);
  EXPECT_TRUE(holds_three_x(held->output(out), 0));
}

TEST(Pipeline, BuildRefusesWhatCannotWorkNamingIt) {
  loom::Runtime rt(cpu(2));
  auto expect_refused = [](auto&& make, const std::string& words) {
    try {
      make();
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const loom::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { PipelineBuilder(rt, {.name = "empty"}).build(); }, "has no stages");
  expect_refused(
      [&] {
        PipelineBuilder b(rt, {.name = "one slot", .slots = 1});
        b.stage("s", [](Graph&, const StageSlot&) {});
        b.build();
      },
      "at least 2");
  expect_refused(
      [&] {
        PipelineBuilder b(rt);
        b.buffer("a", DType::f32, {4});
        b.output("a", DType::f32, {4});
      },
      "two buffers named 'a'");
  expect_refused(
      [&] {
        PipelineBuilder b(rt, {.name = "late", .slots = 3});
        auto a = b.buffer("a", DType::f32, {4});
        auto o = b.output("o", DType::f32, {4});
        b.stage("too late", [&](Graph& g, const StageSlot& s) {
          g.add(loom::ops::scale_copy(s.delayed(a, 3), s[o], 1.0f));
        });
        b.build();
      },
      "stage 'too late'");
  expect_refused(
      [&] {
        PipelineBuilder b(rt);
        b.stage("upload", [](Graph&, const StageSlot&) {});
      },
      "the pipeline's own");
  expect_refused(
      [&] {
        PipelineBuilder b(rt);
        b.buffer("gray", DType::f32, {4});
        b.stage("gray", [](Graph&, const StageSlot&) {});  // a stage may share a buffer's name
        b.stage("gray", [](Graph&, const StageSlot&) {});
      },
      "two stages named 'gray'");
}

// Producer and consumer as host tasks of the runtime they use, with one
// worker: each blocking call (acquire waiting for a slot, pop waiting for a
// frame, push of the caller's tensors waiting in acquire) lets another
// thread take its worker's place, as Future::wait does. Were it not so, the
// producer would hold the only worker while the frames it waits for need it.
TEST(Pipeline, ProducerAndConsumerAsHostTasksNeedOnlyOneWorker) {
  loom::Runtime rt(cpu(1));
  ThreeX p(rt, {.name = "one worker", .slots = 2});
  constexpr std::uint64_t frames = 24;
  std::vector<std::uint64_t> seen;
  std::atomic<int> wrong{0};
  Graph producer, consumer;
  producer.host("produce", [&] {
    for (std::uint64_t i = 0; i < frames; ++i) {
      if (i % 2 == 0) {
        p.push(i);
      } else {
        // The caller's own tensor, one a frame: it is not written again before the frame is popped.
        loom::Tensor x = rt.tensor<float>({kN}, loom::Memory::pageable);
        fill_input(x, i);
        p.pipeline.push({x});
      }
    }
    p.pipeline.close();
  });
  consumer.host("consume", [&] {
    while (std::optional<Frame> f = p.pipeline.pop()) {
      if (!holds_three_x(f->output(p.out), f->number())) ++wrong;
      seen.push_back(f->number());
    }
  });
  loom::Future produced = rt.submit(producer);
  loom::Future consumed = rt.submit(consumer);
  const bool finished =
      produced.wait_for(std::chrono::seconds(20)) && consumed.wait_for(std::chrono::seconds(20));
  if (!finished) p.pipeline.close();  // unblocks both, so the test fails instead of hanging
  ASSERT_TRUE(finished) << "the producer and the consumer hung on one worker";
  EXPECT_NO_THROW(produced.wait());
  EXPECT_NO_THROW(consumed.wait());
  ASSERT_EQ(seen.size(), frames);
  for (std::uint64_t i = 0; i < frames; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(wrong.load(), 0);
}

// Destroying a pipeline waits for its frames in flight; inside a host task
// on the only worker, the frames still get a thread to finish on.
TEST(Pipeline, DestroyingItInsideAHostTaskWithOneWorkerWaitsForItsFrames) {
  loom::Runtime rt(cpu(1));
  std::atomic<int> finished{0};
  std::optional<Pipeline> p;
  {
    PipelineBuilder b(rt, {.name = "destroyed in a task", .slots = 3});
    auto in = b.input("x", DType::f32, {kN});
    auto out = b.output("y", DType::f32, {kN});
    b.stage("slow", [&](Graph& g, const StageSlot& s) {
      g.add(loom::ops::scale_copy(s[in], s[out], 3.0f));
      g.host("count", [&finished] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ++finished;
      });
    });
    p.emplace(b.build());
    for (int i = 0; i < 3; ++i) {
      InputFrame f = p->acquire();
      fill_input(f.input(in), f.number());
      p->push(std::move(f));
    }
  }
  Graph destroy;
  destroy.host("destroy the pipeline", [&] { p.reset(); });
  loom::Future done = rt.submit(destroy);
  if (!done.wait_for(std::chrono::seconds(20))) {
    // Nothing can unblock it (it holds the only worker): stop rather than hang the suite.
    std::fputs("FAILED: ~Pipeline hung inside a host task on the only worker\n", stderr);
    std::_Exit(1);
  }
  EXPECT_NO_THROW(done.wait());
  EXPECT_EQ(finished.load(), 3);
}

}  // namespace

namespace {

// The cause's "loom: task '...': " is the PipelineError's own prefix: the
// text says it once.
TEST(Pipeline, APipelineErrorSaysItsPrefixOnce) {
  loom::Runtime rt(cpu(2));
  Faulty faulty(rt, 10);  // frame 10 waits for slot 0 until frame 7 fails
  Pipeline& p = faulty.pipeline;
  std::string what;
  try {
    for (int i = 0; i < 11; ++i) {
      InputFrame f = p.acquire();
      fill_input(f.input(faulty.in), f.number());
      p.push(std::move(f));
    }
  } catch (const loom::PipelineError& e) {
    what = e.what();
    EXPECT_EQ(e.task(), "reject frame 7");
  }
  ASSERT_FALSE(what.empty()) << "the pipeline never failed";
  EXPECT_EQ(what.find("loom: "), 0U) << what;
  EXPECT_EQ(what.find("loom: ", 1), std::string::npos) << what;
  EXPECT_EQ(what.find("task 'reject frame 7'"), what.rfind("task 'reject frame 7'")) << what;
  EXPECT_NE(what.find("frame seven is cursed"), std::string::npos) << what;
}

// A handle is its builder's: another pipeline refuses it, even where it has
// a buffer at the same index.
TEST(Pipeline, ABufferHandleOfAnotherPipelineIsRefused) {
  loom::Runtime rt(cpu(2));
  ThreeX mine(rt, {.name = "mine"});
  ThreeX theirs(rt, {.name = "theirs"});
  InputFrame f = mine.pipeline.acquire();
  try {
    (void)f.input(theirs.in);
    FAIL() << "a foreign handle was accepted";
  } catch (const loom::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pipeline 'mine'"), std::string::npos) << what;
    EXPECT_NE(what.find("buffer handle 0"), std::string::npos) << what;
    EXPECT_NE(what.find("another pipeline"), std::string::npos) << what;
  }
  EXPECT_THROW((void)f.input(PipelineBuffer{}), loom::InvalidArgument);
  PipelineBuilder b(rt, {.name = "builder"});
  const PipelineBuffer own = b.input("x", DType::f32, {kN});
  const PipelineBuffer out = b.output("y", DType::f32, {kN});
  b.stage("copy", [&](Graph& g, const StageSlot& s) {
    EXPECT_THROW((void)s[mine.in], loom::InvalidArgument);
    g.add(loom::ops::scale_copy(s[own], s[out], 1.0f));
  });
  (void)b.build();
}

}  // namespace
