#include "pipelined.hpp"

#include <loom/graph.hpp>
#include <loom/ops.hpp>
#include <loom/pipeline.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <thread>

namespace loom_sample {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double rank = q * static_cast<double>(values.size() - 1) + 0.5;
  return values[std::min(values.size() - 1, static_cast<std::size_t>(rank))];
}

// Pops every frame; checks and keeps the measured ones.
void consume(loom::Pipeline& p, loom::PipelineBuffer hist, std::uint64_t warm, std::size_t keep,
             std::int64_t pixels, PipelinedRun& out, Clock::time_point& last_frame) {
  while (std::optional<loom::Frame> f = p.pop()) {
    if (f->number() < warm) continue;
    const std::uint64_t video_frame = f->number() - warm;
    const Histogram& counts = *static_cast<const Histogram*>(f->output(hist).data());
    std::int64_t n = 0;
    for (std::int32_t c : counts) n += c;
    if (n != pixels) ++out.bad_totals;
    if (video_frame < keep) out.histograms.push_back(counts);
    out.latencies_us.push_back(f->latency_us());
    last_frame = Clock::now();
  }
}

// The pipeline proper. Frames 0..warm-1 warm it up (streams, pools, the
// first replays); the measured frames follow with the same numbering the
// naive run uses (frame f of the video), so their histograms can be compared.
PipelinedRun run_pipelined(loom::Runtime& rt, SyntheticVideo& video, const PipelinedOptions& o,
                           std::size_t keep) {
  const std::int64_t h = video.height(), w = video.width();
  loom::PipelineBuilder b(rt, {.name = "image", .slots = o.slots});
  const auto rgb = b.input("rgb", loom::DType::u8, {h, w, 3});
  const auto gray = b.buffer("gray", loom::DType::u8, {h, w});
  const auto blurred = b.buffer("blurred", loom::DType::u8, {h, w});
  const auto hist = b.output("histogram", loom::DType::i32, {256});
  b.stage("gray", [&](loom::Graph& g, const loom::StageSlot& s) {
    g.add(loom::ops::rgb_to_gray(s[rgb], s[gray]));
  });
  b.stage("blur", [&](loom::Graph& g, const loom::StageSlot& s) {
    g.add(loom::ops::box_blur(s[gray], s[blurred], o.radius));
  });
  b.stage("histogram", [&](loom::Graph& g, const loom::StageSlot& s) {
    g.add(loom::ops::histogram(s[blurred], s[hist]));
  });
  loom::Pipeline p = b.build();

  const std::uint64_t warm = 2 * o.slots;
  const std::uint64_t total = warm + o.frames;
  PipelinedRun out;
  out.latencies_us.reserve(o.frames);
  Clock::time_point last_frame;
  std::exception_ptr consumer_error;
  std::thread consumer([&] {
    try {
      consume(p, hist, warm, keep, h * w, out, last_frame);
    } catch (...) {
      consumer_error = std::current_exception();  // the producer sees it too, and stops
    }
  });
  Clock::time_point start;
  bool logging = false;
  try {
    video.forget_buffers();
    for (std::uint64_t f = 0; f < total; ++f) {
      if (f == warm) {
        // Measure from here: the warm-up frames are through.
        while (p.stats().completed < warm)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        rt.start_activity_log();
        logging = true;
        start = Clock::now();
      }
      loom::InputFrame in = p.acquire();
      video.draw(static_cast<std::uint8_t*>(in.input(rgb).data()), f < warm ? f : f - warm);
      p.push(std::move(in));
    }
    p.close();
  } catch (...) {
    p.close();
    consumer.join();
    if (logging) (void)rt.stop_activity_log();
    if (consumer_error) std::rethrow_exception(consumer_error);  // the first cause
    throw;
  }
  consumer.join();
  out.activity = rt.stop_activity_log();
  if (consumer_error) std::rethrow_exception(consumer_error);
  out.seconds = std::chrono::duration<double>(last_frame - start).count();
  return out;
}

}  // namespace loom_sample
