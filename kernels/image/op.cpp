// The image ops: rgb_to_gray, box_blur and histogram bound to the Op interface, with
// the checks their kernels need.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops/image.hpp>

#include "common/checks.hpp"
#include "image/blur.hpp"
#include "image/gray.hpp"
#include "image/histogram.hpp"

#include <climits>
#include <cstdint>
#include <string>

namespace loom::ops {
namespace {

using detail::reject;
using detail::require_contiguous;
using detail::require_dtype;
using detail::require_rank;
using detail::require_same_memory;

void require_u8_image(const Tensor& t, std::string_view op, std::string_view role) {
  require_dtype(t, DType::u8, op, role);
  require_contiguous(t, op, role);
}

void require_int_extents(const Tensor& t, std::string_view op, std::string_view role) {
  for (std::int64_t e : t.shape()) {
    if (e > INT_MAX) {
      reject(op, std::string(role) + " has an extent over 2^31 - 1: " + t.describe());
    }
  }
}

class RgbToGray final : public Op {
 public:
  RgbToGray(Tensor rgb, Tensor gray, RgbLayout layout, GrayVariant variant)
      : rgb_(std::move(rgb)), gray_(std::move(gray)), layout_(layout), variant_(variant) {}
  std::string_view name() const noexcept override { return "rgb_to_gray"; }
  std::vector<Tensor> reads() const override { return {rgb_}; }
  std::vector<Tensor> writes() const override { return {gray_}; }

  void validate() const override {
    constexpr std::string_view op = "rgb_to_gray";
    require_u8_image(rgb_, op, "rgb");
    require_u8_image(gray_, op, "gray");
    require_rank(rgb_, 3, op, "rgb");
    require_rank(gray_, 2, op, "gray");
    require_same_memory(rgb_, gray_, op);
    const kernels::RgbLayout layout = kernel_layout();  // rejects what it cannot read
    const auto& s = rgb_.shape();
    const std::int64_t h = layout == kernels::RgbLayout::interleaved ? s[0] : s[1];
    const std::int64_t w = layout == kernels::RgbLayout::interleaved ? s[1] : s[2];
    if (gray_.shape()[0] != h || gray_.shape()[1] != w) {
      reject(op, "gray must be [" + std::to_string(h) + ", " + std::to_string(w) + "] for rgb " +
                     s.to_string() + " (" + std::string(kernels::to_string(layout)) + "), got " +
                     gray_.shape().to_string());
    }
    if (rgb_.shares_storage_with(gray_)) reject(op, "gray must not share storage with rgb");
    (void)variant();
  }
  void run_cpu() const override {
    kernels::rgb_to_gray_reference(rgb_.data_as<std::uint8_t>(), gray_.data_as<std::uint8_t>(),
                                   pixels(), kernel_layout());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::rgb_to_gray(rgb_.data_as<std::uint8_t>(), gray_.data_as<std::uint8_t>(), pixels(),
                         kernel_layout(), StreamView(cuda_stream(ctx)), variant());
  }

 private:
  std::size_t pixels() const { return static_cast<std::size_t>(gray_.numel()); }

  kernels::RgbLayout kernel_layout() const {
    const auto& s = rgb_.shape();
    switch (layout_) {
      case RgbLayout::interleaved:
        if (s[2] != 3)
          reject("rgb_to_gray", "interleaved rgb must be [H, W, 3], got " + s.to_string());
        return kernels::RgbLayout::interleaved;
      case RgbLayout::planar:
        if (s[0] != 3) reject("rgb_to_gray", "planar rgb must be [3, H, W], got " + s.to_string());
        return kernels::RgbLayout::planar;
      case RgbLayout::detect: break;
    }
    if (s[0] == 3 && s[2] == 3) {
      reject("rgb_to_gray", "rgb " + s.to_string() +
                                " could be interleaved or planar; pass RgbLayout::interleaved or "
                                "RgbLayout::planar");
    }
    if (s[2] == 3) return kernels::RgbLayout::interleaved;
    if (s[0] == 3) return kernels::RgbLayout::planar;
    reject("rgb_to_gray",
           "rgb must have 3 channels, as [H, W, 3] or [3, H, W]; got " + rgb_.describe());
  }

  GrayVariant variant() const {
    detail::require_known_variant(variant_, "rgb_to_gray");
    return variant_;
  }

  Tensor rgb_, gray_;
  RgbLayout layout_;
  GrayVariant variant_;
};

class BoxBlur final : public Op {
 public:
  BoxBlur(Tensor src, Tensor dst, int radius, BlurVariant variant)
      : src_(std::move(src)), dst_(std::move(dst)), radius_(radius), variant_(variant) {}
  std::string_view name() const noexcept override { return "box_blur"; }
  std::vector<Tensor> reads() const override { return {src_}; }
  std::vector<Tensor> writes() const override { return {dst_}; }

  void validate() const override {
    constexpr std::string_view op = "box_blur";
    require_u8_image(src_, op, "src");
    require_u8_image(dst_, op, "dst");
    if (src_.rank() != 2 && src_.rank() != 3) {
      reject(op,
             "src must be [H, W] or [C, H, W] (planes blurred one by one), got " + src_.describe());
    }
    detail::require_same_shape(src_, dst_, op, "src and dst");
    require_same_memory(src_, dst_, op);
    require_int_extents(src_, op, "src");
    if (radius_ < 0 || radius_ > kernels::kBlurMaxRadius) {
      reject(op, "the radius must be in [0, " + std::to_string(kernels::kBlurMaxRadius) +
                     "], got " + std::to_string(radius_));
    }
    if (src_.shares_storage_with(dst_)) {
      reject(op, "dst must not share storage with src (the window reads its neighbours)");
    }
    (void)variant();
  }
  void run_cpu() const override {
    kernels::box_blur_reference(src_.data_as<std::uint8_t>(), dst_.data_as<std::uint8_t>(),
                                planes(), height(), width(), radius_);
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    const std::size_t bytes =
        kernels::box_blur_workspace_bytes(planes(), height(), width(), radius_, variant());
    void* workspace = bytes > 0 ? ctx.workspace(bytes) : nullptr;
    kernels::box_blur(src_.data_as<std::uint8_t>(), dst_.data_as<std::uint8_t>(), planes(),
                      height(), width(), radius_, StreamView(cuda_stream(ctx)), variant(),
                      workspace);
  }

 private:
  std::int64_t planes() const { return src_.rank() == 3 ? src_.shape()[0] : 1; }
  std::int64_t height() const { return src_.shape()[src_.rank() - 2]; }
  std::int64_t width() const { return src_.shape()[src_.rank() - 1]; }

  BlurVariant variant() const {
    detail::require_known_variant(variant_, "box_blur");
    return variant_;
  }

  Tensor src_, dst_;
  int radius_;
  BlurVariant variant_;
};

class Histogram final : public Op {
 public:
  Histogram(Tensor image, Tensor counts, HistogramVariant variant)
      : image_(std::move(image)), counts_(std::move(counts)), variant_(variant) {}
  std::string_view name() const noexcept override { return "histogram"; }
  std::vector<Tensor> reads() const override { return {image_}; }
  std::vector<Tensor> writes() const override { return {counts_}; }

  void validate() const override {
    constexpr std::string_view op = "histogram";
    require_u8_image(image_, op, "image");
    require_dtype(counts_, DType::i32, op, "counts");
    require_contiguous(counts_, op, "counts");
    if (counts_.rank() != 1 || counts_.shape()[0] != kernels::kHistogramBins) {
      reject(op, "counts must be [" + std::to_string(kernels::kHistogramBins) +
                     "] (one bin per u8 value), got " + counts_.describe());
    }
    require_same_memory(image_, counts_, op);
    if (static_cast<std::uint64_t>(image_.numel()) > kernels::kHistogramMaxPixels) {
      reject(op, "image has more than 2^31 - 1 pixels, more than the i32 counts hold: " +
                     image_.describe());
    }
    if (image_.shares_storage_with(counts_)) reject(op, "counts must not share storage with image");
    (void)variant();
  }
  void run_cpu() const override {
    kernels::histogram_reference(image_.data_as<std::uint8_t>(), pixels(),
                                 counts_.data_as<std::int32_t>());
  }
  // Its kernels go through launch_on_stream, nothing else: a compiled graph describes them.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::histogram(image_.data_as<std::uint8_t>(), pixels(), counts_.data_as<std::int32_t>(),
                       StreamView(cuda_stream(ctx)), variant());
  }

 private:
  std::size_t pixels() const { return static_cast<std::size_t>(image_.numel()); }

  HistogramVariant variant() const {
    detail::require_known_variant(variant_, "histogram");
    return variant_;
  }

  Tensor image_, counts_;
  HistogramVariant variant_;
};

}  // namespace

OpPtr rgb_to_gray(const Tensor& rgb, const Tensor& gray, RgbLayout layout, GrayVariant variant) {
  return std::make_shared<RgbToGray>(rgb, gray, layout, variant);
}

OpPtr box_blur(const Tensor& src, const Tensor& dst, int radius, BlurVariant variant) {
  return std::make_shared<BoxBlur>(src, dst, radius, variant);
}

OpPtr histogram(const Tensor& image, const Tensor& counts, HistogramVariant variant) {
  return std::make_shared<Histogram>(image, counts, variant);
}

}  // namespace loom::ops
