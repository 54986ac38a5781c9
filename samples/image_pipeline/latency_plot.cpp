// The plot in three layers: a canvas (pixels, lines, rectangles, text in a
// built-in bitmap font), the axes (nice ticks, value-to-pixel mapping, layout)
// and a PNG encoder. The encoder stores the pixels uncompressed (deflate's
// stored blocks): a 960 x 540 plot takes 1.5 MB where zlib would make it tens
// of kilobytes, and in exchange the sample needs no zlib.
#include "latency_plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string_view>

namespace loom_sample {
namespace {

// ---------------------------------------------------------------- canvas

struct Rgb {
  std::uint8_t r, g, b;
};

constexpr Rgb kInk{30, 30, 30};
constexpr Rgb kGrid{228, 228, 228};

class Canvas {
 public:
  Canvas(int width, int height)
      : width_(width), height_(height), pixels_(std::size_t(width) * height * 3, 255) {}  // white
  int width() const { return width_; }
  int height() const { return height_; }
  /// Points outside the canvas are dropped, so callers may draw across the edge.
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    std::uint8_t* p = &pixels_[(std::size_t(y) * width_ + x) * 3];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  const std::uint8_t* row(int y) const { return &pixels_[std::size_t(y) * width_ * 3]; }

 private:
  int width_;
  int height_;
  std::vector<std::uint8_t> pixels_;
};

void fill_rect(Canvas& canvas, int x, int y, int w, int h, Rgb c) {
  for (int j = y; j < y + h; ++j)
    for (int i = x; i < x + w; ++i) canvas.set(i, j, c);
}

struct Stroke {
  Rgb color;
  int width = 1;
  int dash = 0;  ///< length of each dash and each gap, in steps; 0 draws a solid line
};

/// Bresenham's line; a wider stroke repeats it across the line's main direction.
void draw_line(Canvas& canvas, int x0, int y0, int x1, int y1, const Stroke& stroke) {
  const int dx = std::abs(x1 - x0);
  const int dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1;
  const int sy = y0 < y1 ? 1 : -1;
  const bool mostly_horizontal = dx >= -dy;
  int err = dx + dy;
  for (int step = 0;; ++step) {
    if (stroke.dash == 0 || (step / stroke.dash) % 2 == 0) {
      for (int k = 0; k < stroke.width; ++k) {
        if (mostly_horizontal) {
          canvas.set(x0, y0 + k, stroke.color);
        } else {
          canvas.set(x0 + k, y0, stroke.color);
        }
      }
    }
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

// ------------------------------------------------------------------ font

constexpr int kGlyphWidth = 5;
constexpr int kCapHeight = 7;                 // rows down to the baseline
constexpr int kGlyphHeight = kCapHeight + 2;  // and 2 for descenders
constexpr int kGlyphAdvance = kGlyphWidth + 1;

/// Rows top to bottom; bit 4 is the leftmost column.
struct Glyph {
  char c;
  std::uint8_t rows[kGlyphHeight];
};

constexpr Glyph kFont[] = {
    {' ', {0, 0, 0, 0, 0, 0, 0}},
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
    {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
    {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
    {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
    {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
    {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
    {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}},
    {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
    {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}},
    {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
    {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}},
    {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
    {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}},
    {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
    {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}},
    {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
    {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}},
    {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
    {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}},
    {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}},
    {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}},
    {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}},
    {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
    {'Y', {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04}},
    {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
    {'a', {0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
    {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
    {'c', {0, 0, 0x0E, 0x10, 0x10, 0x11, 0x0E}},
    {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
    {'e', {0, 0, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
    {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
    {'g', {0, 0, 0x0F, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
    {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'i', {0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E}},
    {'j', {0x02, 0, 0x06, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
    {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}},
    {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'m', {0, 0, 0x1A, 0x15, 0x15, 0x15, 0x15}},
    {'n', {0, 0, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'o', {0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
    {'p', {0, 0, 0x1E, 0x11, 0x11, 0x11, 0x1E, 0x10, 0x10}},
    {'q', {0, 0, 0x0F, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x01}},
    {'r', {0, 0, 0x16, 0x19, 0x10, 0x10, 0x10}},
    {'s', {0, 0, 0x0F, 0x10, 0x0E, 0x01, 0x1E}},
    {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
    {'u', {0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D}},
    {'v', {0, 0, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'w', {0, 0, 0x11, 0x11, 0x15, 0x15, 0x0A}},
    {'x', {0, 0, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
    {'y', {0, 0, 0x11, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
    {'z', {0, 0, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
    {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},
    {',', {0, 0, 0, 0, 0, 0x0C, 0x0C, 0x04, 0x08}},
    {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
    {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},
    {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
    {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},
    {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
    {'_', {0, 0, 0, 0, 0, 0, 0, 0x1F}},
    {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
    {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04}},
};

const Glyph& glyph_for(char c) {
  for (const Glyph& g : kFont)
    if (g.c == c) return g;
  return glyph_for('?');
}

int text_width(std::string_view text, int scale) {
  return text.empty() ? 0 : (int(text.size()) * kGlyphAdvance - 1) * scale;
}

int text_height(int scale) { return kGlyphHeight * scale; }

/// From the top of a line of text to the middle of its capitals, to centre text on a mark.
int text_middle(int scale) { return kCapHeight * scale / 2; }

enum class Direction { kRight, kUp };

/// kRight: (x, y) is the text's top-left corner. kUp: the text turned a quarter
/// turn counter-clockwise (read bottom to top), (x, y) its bottom-left corner.
void draw_text(Canvas& canvas, int x, int y, std::string_view text, int scale, Rgb color,
               Direction direction = Direction::kRight) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const Glyph& glyph = glyph_for(text[i]);
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (((glyph.rows[row] >> (kGlyphWidth - 1 - col)) & 1) == 0) continue;
        const int along = (int(i) * kGlyphAdvance + col) * scale;  // along the text
        const int across = row * scale;                            // down the glyph
        if (direction == Direction::kRight) {
          fill_rect(canvas, x + along, y + across, scale, scale, color);
        } else {
          fill_rect(canvas, x + across, y - along - scale + 1, scale, scale, color);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ axes

constexpr int kMinTicks = 5;
constexpr int kMaxTicks = 8;

struct Axis {
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::vector<std::string> labels;

  /// Where v lies between lo (0) and hi (1).
  double fraction(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

std::string format_number(double v, int decimals) {
  if (std::abs(v) < 1e-12) v = 0;  // no "-0.0"
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", std::max(decimals, 0), v);
  return buffer;
}

/// Decimals that show v's leading digit (1 for 0.5, 0 for 20).
int decimals_for(double v) { return int(-std::floor(std::log10(v) + 1e-9)); }

/// The ticks at multiples of `step` over [lo, hi]: either spanning it (the
/// axis ends on ticks) or within it (the axis ends at the data).
Axis axis_at_step(double lo, double hi, double step, bool ends_on_ticks) {
  constexpr double kEps = 1e-9;  // 0.3 / 0.1 is 2.9999999999999996
  const double first = ends_on_ticks ? std::floor(lo / step + kEps) : std::ceil(lo / step - kEps);
  const double last = ends_on_ticks ? std::ceil(hi / step - kEps) : std::floor(hi / step + kEps);
  Axis axis;
  axis.lo = ends_on_ticks ? first * step : lo;
  axis.hi = ends_on_ticks ? last * step : hi;
  for (double k = first; k <= last; ++k) {
    axis.ticks.push_back(k * step);
    axis.labels.push_back(format_number(k * step, decimals_for(step)));
  }
  return axis;
}

/// 1, 2 and 5 x 10^k, ascending, no finer than min_step: from steps too fine
/// for kMaxTicks ticks over `range` to one coarser than the range.
std::vector<double> nice_steps(double range, double min_step) {
  std::vector<double> steps;
  for (double decade = std::pow(10.0, std::floor(std::log10(range / kMaxTicks)));
       decade <= range * 10; decade *= 10) {
    for (const double mantissa : {1.0, 2.0, 5.0}) {
      if (mantissa * decade >= min_step) steps.push_back(mantissa * decade);
    }
  }
  return steps;
}

/// The finest nice step that gives 5-8 ticks, preferring an axis that ends on
/// ticks to one that ends at the data (0-14.1 has neither 0-16 by 2, 9 ticks,
/// nor 0-15 by 5, 4 ticks, but has 0-14 by 2 inside).
Axis linear_axis(double lo, double hi, double min_step = 0) {
  const std::vector<double> steps = nice_steps(hi - lo, min_step);
  for (const bool ends_on_ticks : {true, false}) {
    for (const double step : steps) {
      Axis axis = axis_at_step(lo, hi, step, ends_on_ticks);
      if (axis.ticks.size() >= kMinTicks && axis.ticks.size() <= kMaxTicks) return axis;
    }
  }
  return axis_at_step(lo, hi, steps.front(), true);  // a short x axis: fewer, whole-frame ticks
}

/// Ticks at 1, 2 and 5 x 10^k where at most 8 of them span the data, else at
/// powers of ten (every n-th decade where there are many).
Axis log_axis(double lo, double hi) {
  constexpr double kEps = 1e-12;
  const int first_decade = int(std::floor(std::log10(lo) + kEps));
  const int last_decade = std::max(int(std::ceil(std::log10(hi) - kEps)), first_decade + 1);
  std::vector<double> candidates;  // ascending
  for (int d = first_decade; d <= last_decade; ++d)
    for (const double m : {1.0, 2.0, 5.0}) candidates.push_back(m * std::pow(10.0, d));
  const auto below = std::upper_bound(candidates.begin(), candidates.end(), lo * (1 + kEps)) - 1;
  const auto above = std::lower_bound(candidates.begin(), candidates.end(), hi * (1 - kEps));
  Axis axis;
  axis.log = true;
  if (above - below + 1 <= kMaxTicks) {
    axis.ticks.assign(below, above + 1);
  } else {
    const int stride = (last_decade - first_decade + kMaxTicks - 2) / (kMaxTicks - 1);
    int d = first_decade;
    axis.ticks.push_back(std::pow(10.0, d));
    while (axis.ticks.back() < hi * (1 - kEps)) axis.ticks.push_back(std::pow(10.0, d += stride));
  }
  axis.lo = axis.ticks.front();
  axis.hi = axis.ticks.back();
  for (const double t : axis.ticks) axis.labels.push_back(format_number(t, decimals_for(t)));
  return axis;
}

/// Widens a flat range and leaves a little room so curves do not run along the frame.
std::pair<double, double> padded_range(double lo, double hi) {
  if (hi - lo < 1e-6 * std::max(1.0, std::abs(hi))) {  // tick labels need 7 digits at most
    const double half = lo == 0 ? 1 : std::abs(lo) * 0.1;
    return {lo - half, hi + half};
  }
  const double pad = (hi - lo) * 0.03;
  return {lo >= 0 ? std::max(0.0, lo - pad) : lo - pad, hi + pad};
}

double percentile_99(std::vector<double> values) {
  const std::size_t rank = std::size_t(std::ceil(0.99 * double(values.size()))) - 1;
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(rank), values.end());
  return values[rank];
}

// ---------------------------------------------------------------- layout

struct LegendEntry {
  std::string text;
  Rgb color;
  int x, y;
};

struct Layout {
  int scale;                     // of the text; lengths below grow with it
  int margin;                    // around the image's edge and between its parts
  int tick;                      // length of a tick mark
  int left, top, right, bottom;  // the plot area's frame, inclusive
  std::vector<LegendEntry> legend;

  int pixel_x(const Axis& axis, double v) const {
    return left + int(std::lround(axis.fraction(v) * (right - left)));
  }
  int pixel_y(const Axis& axis, double v) const {
    return bottom - int(std::lround(axis.fraction(v) * (bottom - top)));
  }
};

int swatch_width(int scale) { return 14 * scale; }

std::string legend_text(const PlotSeries& series, double p99) {
  const std::string p99_text = "p99 " + format_number(p99, 2);
  return series.label.empty() ? p99_text : series.label + " (" + p99_text + ")";
}

Layout plan_layout(const std::vector<PlotSeries>& series, const std::vector<double>& p99s,
                   const PlotOptions& options, const Axis& x_axis, const Axis& y_axis) {
  Layout layout;
  const int s = layout.scale = options.width >= 640 && options.height >= 360 ? 2 : 1;
  const int margin = layout.margin = 6 * s;
  const int tick = layout.tick = 4 * s;
  const int line = text_height(s) + 4 * s;

  int widest_y_label = 0;
  for (const auto& label : y_axis.labels) {
    widest_y_label = std::max(widest_y_label, text_width(label, s));
  }
  layout.left = margin + text_height(s) + 2 * margin + widest_y_label + tick;
  layout.right = options.width - 1 - margin - text_width(x_axis.labels.back(), s) / 2;
  layout.bottom = options.height - 1 - margin - 2 * text_height(s) - 2 * margin - tick;

  int y = margin + (options.title.empty() ? 0 : line);
  int x = layout.left;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const std::string text = legend_text(series[i], p99s[i]);
    const int w = swatch_width(s) + 4 * s + text_width(text, s);
    if (x > layout.left && x + w > options.width - margin) {  // wrap to a new row
      x = layout.left;
      y += line;
    }
    layout.legend.push_back({text, {series[i].r, series[i].g, series[i].b}, x, y});
    x += w + 16 * s;
  }
  layout.top = y + line + margin;
  if (layout.right - layout.left < 40 || layout.bottom - layout.top < 30) {
    throw std::invalid_argument("write_plot_png: a " + std::to_string(options.width) + " x " +
                                std::to_string(options.height) + " image is too small for " +
                                std::to_string(series.size()) + " series and their legend");
  }
  return layout;
}

// --------------------------------------------------------------- drawing

void draw_axes(Canvas& canvas, const Layout& l, const Axis& x_axis, const Axis& y_axis,
               const PlotOptions& options) {
  const int s = l.scale;
  for (std::size_t i = 0; i < x_axis.ticks.size(); ++i) {
    const int x = l.pixel_x(x_axis, x_axis.ticks[i]);
    draw_line(canvas, x, l.top, x, l.bottom, {kGrid});
    draw_line(canvas, x, l.bottom, x, l.bottom + l.tick, {kInk, s});
    draw_text(canvas, x - text_width(x_axis.labels[i], s) / 2, l.bottom + l.tick + l.margin / 2,
              x_axis.labels[i], s, kInk);
  }
  for (std::size_t i = 0; i < y_axis.ticks.size(); ++i) {
    const int y = l.pixel_y(y_axis, y_axis.ticks[i]);
    draw_line(canvas, l.left, y, l.right, y, {kGrid});
    draw_line(canvas, l.left - l.tick, y, l.left, y, {kInk, s});
    draw_text(canvas, l.left - l.tick - l.margin / 2 - text_width(y_axis.labels[i], s),
              y - text_middle(s), y_axis.labels[i], s, kInk);
  }
  const int plot_middle_x = (l.left + l.right) / 2;
  const int plot_middle_y = (l.top + l.bottom) / 2;
  draw_text(canvas, plot_middle_x - text_width(options.x_label, s) / 2,
            canvas.height() - l.margin - text_height(s), options.x_label, s, kInk);
  draw_text(canvas, l.margin, plot_middle_y + text_width(options.y_label, s) / 2, options.y_label,
            s, kInk, Direction::kUp);
  draw_text(canvas, (canvas.width() - text_width(options.title, s)) / 2, l.margin, options.title, s,
            kInk);
}

void draw_series(Canvas& canvas, const Layout& l, const Axis& x_axis, const Axis& y_axis,
                 const PlotSeries& series, double p99) {
  const Rgb color{series.r, series.g, series.b};
  const auto px = [&](std::size_t i) { return l.pixel_x(x_axis, double(i)); };
  const auto py = [&](double v) { return l.pixel_y(y_axis, v); };
  draw_line(canvas, l.left, py(p99), l.right, py(p99), {color, 1, 6 * l.scale});
  // Where points outnumber pixel columns, a polyline would fill the band
  // between its extremes; dots keep the spread visible.
  const bool dense = int(series.values.size()) > l.right - l.left;
  for (std::size_t i = 0; i < series.values.size(); ++i) {
    const int x = px(i);
    const int y = py(series.values[i]);
    if (dense || series.values.size() == 1) {
      fill_rect(canvas, x, y, l.scale, l.scale, color);
    } else if (i > 0) {
      draw_line(canvas, px(i - 1), py(series.values[i - 1]), x, y, {color, l.scale});
    }
  }
}

void draw_legend(Canvas& canvas, const Layout& l) {
  const int s = l.scale;
  for (const LegendEntry& e : l.legend) {
    fill_rect(canvas, e.x, e.y + text_middle(s) - s, swatch_width(s), 3 * s, e.color);
    draw_text(canvas, e.x + swatch_width(s) + 4 * s, e.y, e.text, s, kInk);
  }
}

void draw_frame(Canvas& canvas, const Layout& l) {
  draw_line(canvas, l.left, l.top, l.right, l.top, {kInk});
  draw_line(canvas, l.left, l.bottom, l.right, l.bottom, {kInk});
  draw_line(canvas, l.left, l.top, l.left, l.bottom, {kInk});
  draw_line(canvas, l.right, l.top, l.right, l.bottom, {kInk});
}

// ------------------------------------------------------------------- PNG

std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

const std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

std::uint32_t crc32(const std::vector<std::uint8_t>& bytes) {
  std::uint32_t c = 0xFFFFFFFFU;
  for (const std::uint8_t b : bytes) c = kCrcTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

std::uint32_t adler32(const std::vector<std::uint8_t>& bytes) {
  constexpr std::uint32_t kMod = 65521;
  std::uint32_t a = 1;
  std::uint32_t b = 0;
  for (const std::uint8_t byte : bytes) {
    a = (a + byte) % kMod;
    b = (b + a) % kMod;
  }
  return (b << 16) | a;
}

void append_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(std::uint8_t(v >> shift));
}

/// Each row behind filter type 0 (none), as PNG's image data expects.
std::vector<std::uint8_t> scanlines(const Canvas& canvas) {
  const std::size_t row_bytes = std::size_t(canvas.width()) * 3;
  std::vector<std::uint8_t> out;
  out.reserve((row_bytes + 1) * std::size_t(canvas.height()));
  for (int y = 0; y < canvas.height(); ++y) {
    out.push_back(0);
    out.insert(out.end(), canvas.row(y), canvas.row(y) + row_bytes);
  }
  return out;
}

/// A zlib stream of stored deflate blocks: header, blocks of at most 65535
/// bytes (each LEN and its complement, little-endian), Adler-32 big-endian.
std::vector<std::uint8_t> zlib_stored(const std::vector<std::uint8_t>& raw) {
  constexpr std::size_t kMaxBlock = 65535;
  std::vector<std::uint8_t> out = {0x78, 0x01};  // deflate, 32K window, (0x7801 % 31 == 0)
  std::size_t offset = 0;
  do {
    const std::size_t n = std::min(kMaxBlock, raw.size() - offset);
    const bool final_block = offset + n == raw.size();
    out.push_back(final_block ? 1 : 0);
    const auto len = std::uint16_t(n);
    const auto nlen = std::uint16_t(~len);
    out.insert(out.end(), {std::uint8_t(len), std::uint8_t(len >> 8), std::uint8_t(nlen),
                           std::uint8_t(nlen >> 8)});
    out.insert(out.end(), raw.begin() + std::ptrdiff_t(offset),
               raw.begin() + std::ptrdiff_t(offset + n));
    offset += n;
  } while (offset < raw.size());
  append_be32(out, adler32(raw));
  return out;
}

void append_chunk(std::vector<std::uint8_t>& png, std::string_view type,
                  const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> body(type.begin(), type.end());  // the CRC covers type and data
  body.insert(body.end(), data.begin(), data.end());
  append_be32(png, std::uint32_t(data.size()));
  png.insert(png.end(), body.begin(), body.end());
  append_be32(png, crc32(body));
}

std::vector<std::uint8_t> encode_png(const Canvas& canvas) {
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<std::uint8_t> header;
  append_be32(header, std::uint32_t(canvas.width()));
  append_be32(header, std::uint32_t(canvas.height()));
  header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit, RGB, deflate, no filter set, no interlace
  append_chunk(png, "IHDR", header);
  append_chunk(png, "IDAT", zlib_stored(scanlines(canvas)));
  append_chunk(png, "IEND", {});
  return png;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw std::runtime_error("write_plot_png: cannot open '" + path + "' for writing");
  file.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  file.close();
  if (!file) throw std::runtime_error("write_plot_png: cannot write '" + path + "'");
}

// ------------------------------------------------------------ validation

void check_input(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  if (options.width < 200 || options.height < 150) {
    throw std::invalid_argument("write_plot_png: expected a size of at least 200 x 150, got " +
                                std::to_string(options.width) + " x " +
                                std::to_string(options.height));
  }
  if (series.empty()) throw std::invalid_argument("write_plot_png: expected at least one series");
  for (const PlotSeries& s : series) {
    if (s.values.empty()) {
      throw std::invalid_argument("write_plot_png: series '" + s.label + "' has no values");
    }
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const double v = s.values[i];
      if (!std::isfinite(v) || (options.log_y && v <= 0)) {
        throw std::invalid_argument(
            "write_plot_png: series '" + s.label + "' value at index " + std::to_string(i) +
            " is " + std::to_string(v) +
            (options.log_y ? "; expected finite values > 0 (log_y)" : "; expected finite values"));
      }
    }
  }
}

}  // namespace

void write_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                    const PlotOptions& options) {
  check_input(series, options);
  std::size_t longest = 0;
  double lo = series.front().values.front();
  double hi = lo;
  std::vector<double> p99s;
  for (const PlotSeries& s : series) {
    longest = std::max(longest, s.values.size());
    const auto [lowest, highest] = std::minmax_element(s.values.begin(), s.values.end());
    lo = std::min(lo, *lowest);
    hi = std::max(hi, *highest);
    p99s.push_back(percentile_99(s.values));
  }
  const Axis x_axis = linear_axis(0, std::max(1.0, double(longest - 1)), 1);
  Axis y_axis;
  if (options.log_y) {
    y_axis = log_axis(lo, hi);
  } else {
    const auto [padded_lo, padded_hi] = padded_range(lo, hi);
    y_axis = linear_axis(padded_lo, padded_hi);
  }
  const Layout layout = plan_layout(series, p99s, options, x_axis, y_axis);

  Canvas canvas(options.width, options.height);
  draw_axes(canvas, layout, x_axis, y_axis, options);
  for (std::size_t i = 0; i < series.size(); ++i) {
    draw_series(canvas, layout, x_axis, y_axis, series[i], p99s[i]);
  }
  draw_frame(canvas, layout);
  draw_legend(canvas, layout);
  write_file(path, encode_png(canvas));
}

}  // namespace loom_sample
