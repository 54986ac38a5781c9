#pragma once
// Synthetic RGB video for the image-pipeline sample: a fixed gradient
// background with a bright square that moves every frame and a strip of
// frame-number bits along the top. A frame is drawn into a buffer that may
// hold an older frame: only what changed (the old and the new square, the
// strip) is written, so the producer costs little next to a 4K upload; a
// buffer seen for the first time gets the whole background once.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace loom_sample {

class SyntheticVideo {
 public:
  SyntheticVideo(int width, int height);

  int width() const noexcept { return width_; }
  int height() const noexcept { return height_; }
  std::size_t frame_bytes() const noexcept { return background_.size(); }

  /// Draws frame `frame` into `rgb` (interleaved, width * height * 3 bytes).
  void draw(std::uint8_t* rgb, std::uint64_t frame);
  /// Forgets what the buffers drawn into so far hold: the next draw into any
  /// buffer writes it whole (call it when buffers may have been freed).
  void forget_buffers() { last_square_.clear(); }

 private:
  struct Square {
    int x = 0, y = 0;
  };
  Square square_at(std::uint64_t frame) const;
  void restore(std::uint8_t* rgb, Square s) const;
  void paint(std::uint8_t* rgb, Square s, std::uint64_t frame) const;
  void stamp_number(std::uint8_t* rgb, std::uint64_t frame) const;

  int width_, height_, side_;
  std::vector<std::uint8_t> background_;
  std::unordered_map<const std::uint8_t*, Square> last_square_;  // by buffer
};

}  // namespace loom_sample
