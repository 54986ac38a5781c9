// loom's flagship sample: a real-time image pipeline. Synthetic 4K RGB
// frames are drawn on the host into pinned slots, uploaded, turned to gray,
// blurred, reduced to a 256-bin histogram and downloaded, a few hundred
// frames, through a loom::Pipeline (triple-buffered, each stage a compiled
// CUDA graph, frames overlapping). The same work is then done the naive way
// (pageable memory, synchronous copies, one frame at a time) and the two are
// printed side by side: frames/s, latency percentiles, GPU busy fraction.
// Every histogram the two have in common must be equal.
//
//   loom_image_pipeline [--frames N] [--width W] [--height H] [--radius R]
//                       [--slots S] [--trace trace.json] [--plot latency.png]
//
// Without a GPU it runs on the CPU backend, on smaller frames, and says so.

#include "latency_plot.hpp"
#include "naive.hpp"
#include "pipelined.hpp"
#include "synthetic_video.hpp"

#include <loom/activity.hpp>
#include <loom/loom.hpp>
#include <loom/ops.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using loom_sample::Histogram;

struct Options {
  std::uint64_t frames = 300;
  int width = 3840, height = 2160, radius = 3;
  std::size_t slots = 3;
  std::string trace, plot;
  bool size_given = false, frames_given = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "loom_image_pipeline: %s\nusage: loom_image_pipeline [--frames N] [--width W] "
               "[--height H] [--radius R] [--slots S] [--trace file.json] [--plot file.png]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage("a real-time image pipeline against the naive way");
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    const long n = std::strtol(v, nullptr, 10);
    if (a == "--frames")
      o.frames = static_cast<std::uint64_t>(n), o.frames_given = true;
    else if (a == "--width")
      o.width = static_cast<int>(n), o.size_given = true;
    else if (a == "--height")
      o.height = static_cast<int>(n), o.size_given = true;
    else if (a == "--radius")
      o.radius = static_cast<int>(n);
    else if (a == "--slots")
      o.slots = static_cast<std::size_t>(n);
    else if (a == "--trace")
      o.trace = v;
    else if (a == "--plot")
      o.plot = v;
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.frames == 0 || o.width <= 0 || o.height <= 0 || o.radius < 0 || o.slots < 2)
    usage("frames, width and height must be positive, radius >= 0, slots >= 2");
  return o;
}

struct Summary {
  double fps = 0, p50_ms = 0, p99_ms = 0, max_ms = 0, busy = 0;
};

Summary summarize(std::vector<double> latencies_us, double seconds, double busy) {
  Summary s;
  s.fps = static_cast<double>(latencies_us.size()) / seconds;
  s.p50_ms = loom_sample::percentile(latencies_us, 0.5) * 1e-3;
  s.p99_ms = loom_sample::percentile(latencies_us, 0.99) * 1e-3;
  s.max_ms = loom_sample::percentile(latencies_us, 1.0) * 1e-3;
  s.busy = busy;
  return s;
}

double mean_of(const Histogram& h) {
  double sum = 0, n = 0;
  for (int v = 0; v < 256; ++v) sum += static_cast<double>(v) * h[v], n += h[v];
  return n > 0 ? sum / n : 0.0;
}

void print_row(const char* name, const Summary& s, bool gpu) {
  std::printf("  %-22s %10.1f %9.3f %9.3f %9.3f", name, s.fps, s.p50_ms, s.p99_ms, s.max_ms);
  if (gpu) std::printf(" %9.2f", s.busy);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    loom::Runtime rt;
    const bool gpu = rt.has_gpu();
    if (!gpu) {
      if (!o.size_given) o.width = 1280, o.height = 720;
      if (!o.frames_given) o.frames = 30;
    }
    loom_sample::SyntheticVideo video(o.width, o.height);
    const double mb = static_cast<double>(video.frame_bytes()) / 1e6;
    if (gpu) {
      std::printf(
          "loom image pipeline on %s: %llu frames of %dx%d RGB (%.1f MB), blur radius %d,"
          " %zu slots\n",
          loom::device_properties(0).name.c_str(), static_cast<unsigned long long>(o.frames),
          o.width, o.height, mb, o.radius, o.slots);
    } else {
      std::printf(
          "no GPU: running on loom's CPU backend, %llu frames of %dx%d RGB (%.1f MB), blur"
          " radius %d (pass --frames, --width, --height for more)\n",
          static_cast<unsigned long long>(o.frames), o.width, o.height, mb, o.radius);
    }
    const std::size_t keep = std::min<std::uint64_t>(o.frames, 64);

    // The naive run's GPU time: its kernels (the activity log sees loom's
    // runs) plus its synchronous copies (timed on the host: an upper bound).
    rt.start_activity_log();
    const loom_sample::NaiveRun naive = loom_sample::run_naive(rt, video, o.frames, o.radius, keep);
    const loom::ActivityLog naive_log = rt.stop_activity_log();
    const double naive_busy =
        std::min(1.0, naive.copy_us * 1e-6 / naive.seconds +
                          loom::device_busy_fraction(naive_log, 0, naive_log.duration_us));
    loom_sample::PipelinedRun piped =
        loom_sample::run_pipelined(rt, video, {o.frames, o.radius, o.slots}, keep);
    const double piped_busy =
        loom::device_busy_fraction(piped.activity, 0, piped.activity.duration_us);

    const Summary a = summarize(naive.latencies_us, naive.seconds, naive_busy);
    const Summary b = summarize(piped.latencies_us, piped.seconds, piped_busy);
    std::printf("\n  %-22s %10s %9s %9s %9s%s\n", "", "frames/s", "p50 ms", "p99 ms", "max ms",
                gpu ? "  GPU busy" : "");
    print_row("naive (sync, pageable)", a, gpu);
    print_row("loom pipeline", b, gpu);
    if (gpu)
      std::printf(
          "  (the naive GPU busy is an upper bound: its synchronous copies timed on the\n"
          "   host, staging included, plus its kernels from the activity log)\n");
    std::printf("\n  speed-up %.2fx; input %.1f GB/s against %.1f GB/s\n", b.fps / a.fps,
                b.fps * mb * 1e-3, a.fps * mb * 1e-3);

    std::size_t mismatches = 0;
    const std::size_t compared = std::min(naive.histograms.size(), piped.histograms.size());
    for (std::size_t i = 0; i < compared; ++i)
      if (naive.histograms[i] != piped.histograms[i]) ++mismatches;
    std::printf(
        "  check: %zu of %zu histograms equal to the naive run's, %llu bad totals;"
        " mean gray of frame 0: %.2f\n",
        compared - mismatches, compared, static_cast<unsigned long long>(piped.bad_totals),
        compared > 0 ? mean_of(piped.histograms[0]) : 0.0);

    if (!o.trace.empty()) {
      loom::write_chrome_trace(piped.activity, o.trace);
      std::printf("  trace of the pipeline's frames: %s (open in ui.perfetto.dev)\n",
                  o.trace.c_str());
    }
    if (!o.plot.empty()) {
      auto ms = [](const std::vector<double>& us) {
        std::vector<double> v;
        for (double x : us) v.push_back(x * 1e-3);
        return v;
      };
      loom_sample::write_plot_png(
          o.plot,
          {{"naive", ms(naive.latencies_us), 200, 60, 40},
           {"loom pipeline", ms(piped.latencies_us), 30, 90, 200}},
          {.title = "per-frame latency, " + std::to_string(o.width) + "x" +
                    std::to_string(o.height) + " RGB" + (gpu ? "" : " (CPU backend)")});
      std::printf("  latency plot: %s\n", o.plot.c_str());
    }
    return mismatches == 0 && piped.bad_totals == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_image_pipeline: %s\n", e.what());
    return 1;
  }
}
