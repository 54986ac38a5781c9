// Writes latency plots, reads each PNG back with a decoder written here
// (bitwise CRC, so a mistake in the writer's table shows) and checks its
// structure and a few pixels; then the error cases.
//
// Usage: loom_sample_latency_plot_test [plot.png]  (keeps the main plot there)
#include "latency_plot.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using loom_sample::PlotOptions;
using loom_sample::PlotSeries;
using Bytes = std::vector<std::uint8_t>;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

std::uint32_t be32(const Bytes& b, std::size_t at) {
  return std::uint32_t(b[at]) << 24 | std::uint32_t(b[at + 1]) << 16 |
         std::uint32_t(b[at + 2]) << 8 | b[at + 3];
}

std::uint32_t bitwise_crc32(const Bytes& b, std::size_t begin, std::size_t end) {
  std::uint32_t c = 0xFFFFFFFFU;
  for (std::size_t i = begin; i < end; ++i) {
    c ^= b[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320U & (0U - (c & 1U)));
  }
  return ~c;
}

std::uint32_t adler32(const Bytes& b) {
  std::uint32_t a = 1;
  std::uint32_t s = 0;
  for (const std::uint8_t x : b) {
    a = (a + x) % 65521;
    s = (s + a) % 65521;
  }
  return s << 16 | a;
}

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Image {
  int width = 0;
  int height = 0;
  Bytes rgb;  // rows top to bottom, 3 bytes a pixel

  const std::uint8_t* at(int x, int y) const {
    return &rgb[(std::size_t(y) * std::size_t(width) + std::size_t(x)) * 3];
  }
};

/// The stored blocks of a zlib stream, concatenated; checks the header, each
/// block's LEN/NLEN and the Adler-32. Empty on error.
Bytes unwrap_stored_zlib(const Bytes& z) {
  if (z.size() < 6 || (z[0] & 0x0F) != 8 || (z[0] * 256 + z[1]) % 31 != 0) {
    check(false, "zlib header");
    return {};
  }
  Bytes raw;
  std::size_t at = 2;
  for (bool final_block = false; !final_block;) {
    if (at + 5 > z.size()) return check(false, "zlib stream ends inside a block header"), Bytes{};
    final_block = (z[at] & 1) != 0;
    if ((z[at] >> 1) != 0) return check(false, "deflate block is not stored (BTYPE 00)"), Bytes{};
    const std::size_t len = z[at + 1] | z[at + 2] << 8;
    const std::size_t nlen = z[at + 3] | z[at + 4] << 8;
    if ((len ^ 0xFFFF) != nlen) return check(false, "stored block NLEN"), Bytes{};
    at += 5;
    if (at + len > z.size()) return check(false, "stored block past the end"), Bytes{};
    raw.insert(raw.end(), z.begin() + std::ptrdiff_t(at), z.begin() + std::ptrdiff_t(at + len));
    at += len;
  }
  check(at + 4 == z.size(), "zlib stream ends with the Adler-32");
  check(at + 4 <= z.size() && be32(z, at) == adler32(raw), "Adler-32");
  return raw;
}

/// Parses the PNG at `path` and checks every chunk; returns its pixels.
Image decode_png(const std::filesystem::path& path, int width, int height) {
  const Bytes png = read_file(path);
  const Bytes signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  check(png.size() > 8 && Bytes(png.begin(), png.begin() + 8) == signature, "PNG signature");
  Image image;
  Bytes idat;
  std::vector<std::string> types;
  for (std::size_t at = 8; at + 12 <= png.size();) {
    const std::size_t length = be32(png, at);
    if (at + 12 + length > png.size()) return check(false, "chunk past the end"), image;
    const std::string type(png.begin() + std::ptrdiff_t(at + 4),
                           png.begin() + std::ptrdiff_t(at + 8));
    check(be32(png, at + 8 + length) == bitwise_crc32(png, at + 4, at + 8 + length),
          "CRC of chunk " + type);
    types.push_back(type);
    if (type == "IHDR") {
      check(length == 13, "IHDR length");
      image.width = int(be32(png, at + 8));
      image.height = int(be32(png, at + 12));
      check(png[at + 16] == 8, "bit depth 8");
      check(png[at + 17] == 2, "colour type 2 (RGB)");
      check(png[at + 18] == 0 && png[at + 19] == 0 && png[at + 20] == 0,
            "deflate, filter method 0, no interlace");
    } else if (type == "IDAT") {
      idat.insert(idat.end(), png.begin() + std::ptrdiff_t(at + 8),
                  png.begin() + std::ptrdiff_t(at + 8 + length));
    }
    at += 12 + length;
  }
  check(types.size() >= 3 && types.front() == "IHDR" && types.back() == "IEND",
        "chunks IHDR ... IEND");
  check(image.width == width && image.height == height,
        "IHDR size " + std::to_string(image.width) + " x " + std::to_string(image.height));
  const Bytes raw = unwrap_stored_zlib(idat);
  const std::size_t row = 1 + 3 * std::size_t(width);
  check(raw.size() == std::size_t(height) * row, "image data is height * (1 + 3 * width) bytes");
  if (raw.size() != std::size_t(height) * row || image.width != width) return image;
  for (int y = 0; y < height; ++y) {
    check(raw[std::size_t(y) * row] == 0, "filter byte 0 on row " + std::to_string(y));
    image.rgb.insert(image.rgb.end(), raw.begin() + std::ptrdiff_t(y * row + 1),
                     raw.begin() + std::ptrdiff_t((y + 1) * row));
  }
  return image;
}

bool has_colour(const std::uint8_t* p, const PlotSeries& s) {
  return p[0] == s.r && p[1] == s.g && p[2] == s.b;
}

/// Pixels of the series' colour in the middle of the image, where the plot area is.
int count_in_plot_area(const Image& image, const PlotSeries& s) {
  int n = 0;
  for (int y = image.height / 4; y < image.height * 3 / 4; ++y)
    for (int x = image.width / 4; x < image.width * 3 / 4; ++x) n += has_colour(image.at(x, y), s);
  return n;
}

double white_fraction(const Image& image) {
  std::size_t white = 0;
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      const std::uint8_t* p = image.at(x, y);
      white += p[0] == 255 && p[1] == 255 && p[2] == 255;
    }
  return double(white) / (double(image.width) * image.height);
}

/// A noisy frame time around 12 ms with a slow drift and a spike every 50 frames,
/// and a flat 16.7 ms budget line inside its range.
std::vector<PlotSeries> two_series() {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.6);
  PlotSeries noisy{"pipeline", {}, 31, 119, 180};
  PlotSeries flat{"budget 60 fps", std::vector<double>(300, 16.7), 255, 127, 14};
  for (int i = 0; i < 300; ++i) {
    noisy.values.push_back(12 + 3 * std::sin(i / 20.0) + noise(rng) + (i % 50 == 49 ? 8 : 0));
  }
  return {noisy, flat};
}

template <class Exception, class F>
void expect_throw(F&& f, const std::string& what, const std::string& message_has = "") {
  try {
    f();
    check(false, what + ": nothing thrown");
  } catch (const Exception& e) {
    check(std::string(e.what()).find(message_has) != std::string::npos,
          what + ": message '" + e.what() + "' should name '" + message_has + "'");
  } catch (const std::exception& e) {
    check(false, what + ": wrong exception type: " + e.what());
  }
}

void test_two_series(const std::filesystem::path& path) {
  const auto series = two_series();
  const PlotOptions options{.title = "image pipeline: per-frame latency"};
  loom_sample::write_plot_png(path.string(), series, options);
  const Image image = decode_png(path, options.width, options.height);
  if (image.rgb.empty()) return;
  for (const PlotSeries& s : series) {
    const int n = count_in_plot_area(image, s);
    check(n > image.width / 4, "series '" + s.label + "' drawn (" + std::to_string(n) + " px)");
  }
  check(white_fraction(image) > 0.7, "background mostly white");
}

void test_dense_log_and_small(const std::filesystem::path& dir) {
  PlotSeries dense{"dense", {}, 200, 30, 30};
  for (int i = 0; i < 5000; ++i) dense.values.push_back(0.5 + 100.0 * (i % 97) / 97.0);
  const PlotOptions log{.title = "log y", .width = 640, .height = 360, .log_y = true};
  loom_sample::write_plot_png((dir / "log.png").string(), {dense}, log);
  check(count_in_plot_area(decode_png(dir / "log.png", 640, 360), dense) > 100, "dense log plot");

  const PlotOptions small{.title = "small", .width = 200, .height = 150};
  const PlotSeries one{"one value", {3.0}, 0, 160, 0};
  loom_sample::write_plot_png((dir / "small.png").string(), {one, two_series()[0]}, small);
  check(!decode_png(dir / "small.png", 200, 150).rgb.empty(), "200 x 150 plot");
}

void test_errors(const std::filesystem::path& dir) {
  const auto good = two_series();
  const PlotOptions options;
  const std::string path = (dir / "error.png").string();
  using loom_sample::write_plot_png;
  expect_throw<std::invalid_argument>([&] { write_plot_png(path, {}, options); }, "no series",
                                      "at least one series");
  expect_throw<std::invalid_argument>(
      [&] {
        write_plot_png(path, {good[0], {"empty", {}, 0, 0, 0}}, options);
      },
      "empty series", "empty");
  auto nan = good;
  nan[1].values[42] = std::numeric_limits<double>::quiet_NaN();
  expect_throw<std::invalid_argument>([&] { write_plot_png(path, nan, options); }, "NaN", "42");
  auto inf = good;
  inf[0].values[0] = std::numeric_limits<double>::infinity();
  expect_throw<std::invalid_argument>([&] { write_plot_png(path, inf, options); }, "infinity");
  expect_throw<std::invalid_argument>(
      [&] { write_plot_png(path, good, {.width = 199, .height = 150}); }, "199 x 150", "200 x 150");
  expect_throw<std::invalid_argument>(
      [&] { write_plot_png(path, good, {.width = 200, .height = 149}); }, "200 x 149", "200 x 150");
  auto zero = good;
  zero[0].values[3] = 0;
  expect_throw<std::invalid_argument>([&] { write_plot_png(path, zero, {.log_y = true}); },
                                      "0 on a log axis", "log_y");
  const std::string unwritable = (dir / "no such folder" / "plot.png").string();
  expect_throw<std::runtime_error>([&] { write_plot_png(unwritable, good, options); },
                                   "unwritable path", unwritable);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("loom_latency_plot_test_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  try {
    test_two_series(argc > 1 ? fs::path(argv[1]) : dir / "plot.png");
    test_dense_log_and_small(dir);
    test_errors(dir);
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  fs::remove_all(dir);
  if (failures == 0) std::printf("latency plot: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
