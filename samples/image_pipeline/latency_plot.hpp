// A small PNG line plot of per-frame figures (latency, frame time) for the
// image-pipeline sample. Dependency-free on purpose: a sample should build
// with nothing but a C++20 compiler, so the canvas, the font and the PNG
// encoder (stored, uncompressed deflate) are all in latency_plot.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom_sample {

/// One curve of the plot: values[i] is drawn at x = i, in colour (r, g, b).
struct PlotSeries {
  std::string label = {};
  std::vector<double> values = {};
  std::uint8_t r = 0;
  std::uint8_t g = 0;
  std::uint8_t b = 0;
};

/// The plot's text and size. The image is width x height pixels, at least 200 x 150.
struct PlotOptions {
  std::string title = {};
  std::string x_label = "frame";
  std::string y_label = "latency (ms)";
  int width = 960;
  int height = 540;
  bool log_y = false;  ///< a logarithmic y axis (every value must then be > 0)
};

/// Writes an 8-bit RGB PNG of `series` to `path`: one polyline per series (dots where a
/// series has more points than the plot has pixel columns), x = index in the series,
/// y = value; both axes with 5-8 ticks at 1, 2 or 5 x 10^k and their numeric labels; the
/// title, the axis labels; a legend with each series' colour, label and 99th percentile;
/// and a dashed horizontal line per series at that percentile.
///
/// Text uses a built-in font of ASCII letters, digits and ` .,-+()/:%_=?`; other
/// characters are drawn as `?`.
///
/// @throws std::invalid_argument when `series` is empty, a series has no values, a value
///         is not finite (or not > 0 with log_y), or the size is under 200 x 150.
/// @throws std::runtime_error naming `path` when the file cannot be written.
/// Thread-safe: it touches no shared state (two calls must not write the same path).
///
/// @code
///   loom_sample::write_plot_png("latency.png", {{"frame", latencies_ms, 31, 119, 180}},
///                               {.title = "image pipeline"});
/// @endcode
void write_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                    const PlotOptions& options);

}  // namespace loom_sample
