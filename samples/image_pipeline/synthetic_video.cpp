#include "synthetic_video.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace loom_sample {

namespace {
constexpr int kBits = 32;      // frame-number bits in the strip
constexpr int kBitWidth = 16;  // pixels a bit
constexpr int kStrip = 8;      // strip height
}  // namespace

SyntheticVideo::SyntheticVideo(int width, int height)
    : width_(width), height_(height), side_(std::max(8, std::min(width, height) / 8)) {
  if (width < kBits * kBitWidth || height < 4 * kStrip)
    throw std::invalid_argument("synthetic video: frames must be at least " +
                                std::to_string(kBits * kBitWidth) + " x " +
                                std::to_string(4 * kStrip) + " pixels");
  background_.resize(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      std::uint8_t* p = &background_[(static_cast<std::size_t>(y) * width + x) * 3];
      p[0] = static_cast<std::uint8_t>(x * 255 / (width - 1));
      p[1] = static_cast<std::uint8_t>(y * 255 / (height - 1));
      p[2] = static_cast<std::uint8_t>((x ^ y) & 0xff);
    }
}

SyntheticVideo::Square SyntheticVideo::square_at(std::uint64_t frame) const {
  // Bounces between the edges, below the strip, a few pixels a frame.
  const int span_x = width_ - side_, span_y = height_ - side_ - kStrip;
  const auto bounce = [](std::uint64_t t, int span) {
    const auto period = static_cast<std::uint64_t>(2 * span);
    const int p = static_cast<int>(t % period);
    return p <= span ? p : 2 * span - p;
  };
  return {bounce(frame * 7, span_x), kStrip + bounce(frame * 5, span_y)};
}

void SyntheticVideo::restore(std::uint8_t* rgb, Square s) const {
  for (int y = s.y; y < s.y + side_; ++y) {
    const std::size_t at = (static_cast<std::size_t>(y) * width_ + s.x) * 3;
    std::memcpy(rgb + at, background_.data() + at, static_cast<std::size_t>(side_) * 3);
  }
}

void SyntheticVideo::paint(std::uint8_t* rgb, Square s, std::uint64_t frame) const {
  const auto shade = static_cast<std::uint8_t>(160 + frame % 96);
  for (int y = s.y; y < s.y + side_; ++y) {
    std::uint8_t* row = rgb + (static_cast<std::size_t>(y) * width_ + s.x) * 3;
    for (int x = 0; x < side_; ++x) {
      row[3 * x + 0] = shade;
      row[3 * x + 1] = static_cast<std::uint8_t>(255 - shade);
      row[3 * x + 2] = static_cast<std::uint8_t>((x + y) & 0x3f);
    }
  }
}

void SyntheticVideo::stamp_number(std::uint8_t* rgb, std::uint64_t frame) const {
  for (int y = 0; y < kStrip; ++y)
    for (int b = 0; b < kBits; ++b) {
      const std::uint8_t v = ((frame >> b) & 1U) != 0 ? 255 : 0;
      std::memset(rgb + (static_cast<std::size_t>(y) * width_ + b * kBitWidth) * 3, v,
                  static_cast<std::size_t>(kBitWidth) * 3);
    }
}

void SyntheticVideo::draw(std::uint8_t* rgb, std::uint64_t frame) {
  auto seen = last_square_.find(rgb);
  if (seen == last_square_.end()) {
    std::memcpy(rgb, background_.data(), background_.size());
  } else {
    restore(rgb, seen->second);
  }
  const Square s = square_at(frame);
  paint(rgb, s, frame);
  stamp_number(rgb, frame);
  last_square_[rgb] = s;
}

}  // namespace loom_sample
