// The pipeline on the CUDA backend: frames in order with exact results under
// a slow consumer (pinned slots, compiled stages overlapping), delay buffers
// across slots, the image pipeline (gray -> blur -> histogram) against the
// CPU backend frame by frame, no pool allocation and no stream or event
// creation in steady state, and a failing stage stopping it by name.
#include "support/gpu.hpp"

#include "cuda/object_counts.hpp"

#include <loom/error.hpp>
#include <loom/ops.hpp>
#include <loom/pipeline.hpp>
#include <loom/runtime.hpp>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using loom::DType;
using loom::Frame;
using loom::Graph;
using loom::InputFrame;
using loom::Memory;
using loom::Pipeline;
using loom::PipelineBuilder;
using loom::StageSlot;

constexpr std::int64_t kN = (1 << 20) + 3;

// Frame f's input: f + (i % 4096) / 4096, exact in f32 for the frames here.
float input_value(std::uint64_t frame, std::int64_t i) {
  return static_cast<float>(frame) + static_cast<float>(i % 4096) / 4096.0f;
}

void fill_input(const loom::Tensor& t, std::uint64_t frame) {
  float* p = t.data_as<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = input_value(frame, i);
}

struct ThreeX {
  loom::PipelineBuffer in, tmp, out;
  Pipeline pipeline;
  ThreeX(loom::Runtime& rt, loom::PipelineOptions o) : pipeline(build(rt, std::move(o))) {}
  Pipeline build(loom::Runtime& rt, loom::PipelineOptions o) {
    PipelineBuilder b(rt, std::move(o));
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
};

TEST(PipelineGpu, FramesArriveInOrderWithExactResultsUnderASlowConsumer) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ThreeX p(rt, {.name = "gpu", .slots = 3});
  EXPECT_EQ(p.pipeline.slots(), 3u);
  constexpr std::uint64_t frames = 120;
  std::vector<std::uint64_t> seen;
  std::size_t wrong = 0;
  std::thread consumer([&] {
    while (std::optional<Frame> f = p.pipeline.pop()) {
      EXPECT_EQ(f->output(p.out).memory(), Memory::pinned);
      if (f->number() % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      const float* y = f->output(p.out).data_as<float>();
      for (std::int64_t i = 0; i < kN; ++i)
        if (y[i] != 3.0f * input_value(f->number(), i)) {
          ++wrong;
          break;
        }
      seen.push_back(f->number());
    }
  });
  for (std::uint64_t i = 0; i < frames; ++i) {
    InputFrame in = p.pipeline.acquire();
    EXPECT_EQ(in.input(p.in).memory(), Memory::pinned);
    fill_input(in.input(p.in), in.number());
    p.pipeline.push(std::move(in));
  }
  p.pipeline.close();
  consumer.join();
  ASSERT_EQ(seen.size(), frames);
  for (std::uint64_t i = 0; i < frames; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_EQ(wrong, 0u);
  const loom::PipelineStats s = p.pipeline.stats();
  EXPECT_EQ(s.delivered, frames);
  EXPECT_EQ(s.dropped, 0u);
}

TEST(PipelineGpu, ADelayBufferReadsTheFrameKFramesAgo) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  PipelineBuilder b(rt, {.name = "delay", .slots = 3});
  auto in = b.input("x", DType::f32, {kN});
  auto kept = b.buffer("kept", DType::f32, {kN});
  auto diff = b.output("diff", DType::f32, {kN});
  b.stage("keep", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::scale_copy(s[in], s[kept], 1.0f));
  });
  b.stage("diff", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::axpby(1.0f, s[kept], -1.0f, s.delayed(kept, 2), s[diff]));
  });
  Pipeline p = b.build();
  std::thread producer([&] {
    for (int i = 0; i < 40; ++i) {
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
      const float expected = f->number() >= 2 ? 2.0f : input_value(f->number(), i);
      ASSERT_EQ(d[i], expected) << "frame " << f->number() << " element " << i;
    }
  }
  producer.join();
  EXPECT_EQ(next, 40u);
}

// gray -> blur -> histogram of random frames on the GPU pipeline, each
// histogram equal to the CPU backend's for the same frame.
TEST(PipelineGpu, ImagePipelineMatchesTheCpuBackendFrameByFrame) {
  LOOM_REQUIRE_GPU();
  constexpr std::int64_t h = 361, w = 643;
  constexpr int radius = 3, frames = 12;
  std::mt19937 rng(static_cast<unsigned>(loom::test::fresh_seed()));
  std::vector<std::vector<std::uint8_t>> inputs(frames, std::vector<std::uint8_t>(h * w * 3));
  for (auto& frame : inputs)
    for (auto& v : frame) v = static_cast<std::uint8_t>(rng() % 64 + (rng() % 3) * 64);

  loom::RuntimeOptions cpu_options;
  cpu_options.backend = loom::Backend::cpu;
  loom::Runtime cpu(cpu_options);
  std::vector<std::vector<std::int32_t>> expected;
  {
    auto rgb = cpu.tensor<std::uint8_t>({h, w, 3});
    auto gray = cpu.tensor<std::uint8_t>({h, w});
    auto blurred = cpu.tensor<std::uint8_t>({h, w});
    auto counts = cpu.tensor<std::int32_t>({256});
    Graph g;
    g.add(loom::ops::rgb_to_gray(rgb, gray));
    g.add(loom::ops::box_blur(gray, blurred, radius));
    g.add(loom::ops::histogram(blurred, counts));
    for (const auto& frame : inputs) {
      std::memcpy(rgb.data(), frame.data(), frame.size());
      cpu.submit(g).wait();
      const std::int32_t* c = counts.data_as<std::int32_t>();
      expected.emplace_back(c, c + 256);
    }
  }

  loom::Runtime rt;
  PipelineBuilder b(rt, {.name = "image", .slots = 3});
  auto rgb = b.input("rgb", DType::u8, {h, w, 3});
  auto gray = b.buffer("gray", DType::u8, {h, w});
  auto blurred = b.buffer("blurred", DType::u8, {h, w});
  auto hist = b.output("histogram", DType::i32, {256});
  b.stage("gray",
          [&](Graph& g, const StageSlot& s) { g.add(loom::ops::rgb_to_gray(s[rgb], s[gray])); });
  b.stage("blur", [&](Graph& g, const StageSlot& s) {
    g.add(loom::ops::box_blur(s[gray], s[blurred], radius));
  });
  b.stage("histogram",
          [&](Graph& g, const StageSlot& s) { g.add(loom::ops::histogram(s[blurred], s[hist])); });
  Pipeline p = b.build();
  std::thread producer([&] {
    for (const auto& frame : inputs) {
      InputFrame f = p.acquire();
      std::memcpy(f.input(rgb).data(), frame.data(), frame.size());
      p.push(std::move(f));
    }
    p.close();
  });
  std::size_t n = 0;
  while (std::optional<Frame> f = p.pop()) {
    const std::int32_t* c = f->output(hist).data_as<std::int32_t>();
    EXPECT_EQ(std::vector<std::int32_t>(c, c + 256), expected[f->number()])
        << "frame " << f->number();
    ++n;
  }
  producer.join();
  EXPECT_EQ(n, static_cast<std::size_t>(frames));
}

TEST(PipelineGpu, SteadyStateAllocatesNothingAndCreatesNoStreamOrEvent) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  ThreeX p(rt, {.name = "steady", .slots = 3});
  const auto burst = [&](std::uint64_t first) {
    std::thread consumer([&] {
      for (int i = 0; i < 30; ++i) {
        std::optional<Frame> f = p.pipeline.pop();
        // No ASSERT here: returning early would leave the producer waiting.
        EXPECT_TRUE(f);
        if (f) {
          EXPECT_EQ(f->number(), first + static_cast<std::uint64_t>(i));
        }
      }
    });
    for (int i = 0; i < 30; ++i) {
      InputFrame in = p.pipeline.acquire();
      fill_input(in.input(p.in), in.number());
      p.pipeline.push(std::move(in));
    }
    consumer.join();
  };
  burst(0);
  burst(30);  // pools and event pools grow to what a burst needs
  const auto device_before = rt.statistics(Memory::on_device(0));
  const auto pinned_before = rt.statistics(Memory::pinned);
  const auto objects_before = loom::detail::cuda_object_counts();
  burst(60);
  burst(90);
  const auto device_after = rt.statistics(Memory::on_device(0));
  const auto pinned_after = rt.statistics(Memory::pinned);
  const auto objects_after = loom::detail::cuda_object_counts();
  EXPECT_EQ(device_after.allocations, device_before.allocations);
  EXPECT_EQ(pinned_after.allocations, pinned_before.allocations);
  EXPECT_EQ(objects_after.streams_created, objects_before.streams_created);
  EXPECT_EQ(objects_after.events_created, objects_before.events_created);
}

// Nobody pops until the producer has been stopped by the failure, so frames
// 0..4 are complete and waiting when frame 5 fails: they are delivered, and
// nothing after.
TEST(PipelineGpu, AFailingStageStopsItNamingTheStageAndFrame) {
  LOOM_REQUIRE_GPU();
  loom::Runtime rt;
  PipelineBuilder b(rt, {.name = "faulty", .slots = 8});
  auto in = b.input("x", DType::f32, {kN});
  auto out = b.output("y", DType::f32, {kN});
  b.stage("copy",
          [&](Graph& g, const StageSlot& s) { g.add(loom::ops::scale_copy(s[in], s[out], 1.0f)); });
  b.stage("check", [&](Graph& g, const StageSlot& s) {
    auto probe = rt.tensor<float>({1}, Memory::pinned);
    g.copy(s[in].slice(0, 0, 1), probe);
    g.host("reject frame 5",
           [probe] {
             if (probe.data_as<float>()[0] == 5.0f) throw std::runtime_error("frame five refused");
           },
           {probe});
  });
  Pipeline p = b.build();
  try {
    for (int i = 0; i < 50; ++i) {
      InputFrame f = p.acquire();
      fill_input(f.input(in), f.number());
      p.push(std::move(f));
    }
    ADD_FAILURE() << "the producer was never stopped";
  } catch (const loom::PipelineError& e) {
    EXPECT_EQ(e.stage(), "check");
    EXPECT_EQ(e.frame(), 5u);
  }
  std::vector<std::uint64_t> delivered;
  std::string error;
  try {
    while (std::optional<Frame> f = p.pop()) {
      EXPECT_EQ(f->output(out).data_as<float>()[0], static_cast<float>(f->number()));
      delivered.push_back(f->number());
    }
  } catch (const loom::PipelineError& e) {
    error = e.what();
  }
  EXPECT_EQ(delivered, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(error.find("stage 'check' failed on frame 5"), std::string::npos) << error;
  EXPECT_NE(error.find("frame five refused"), std::string::npos) << error;
}

}  // namespace
