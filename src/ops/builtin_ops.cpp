// The built-in ops: each binds a catalogue kernel and its CPU reference to
// the Op interface, with the checks its kernel needs.
#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>
#include <loom/ops.hpp>

#include "elementwise/map.hpp"
#include "elementwise/vector_add.hpp"
#include "ops/checks.hpp"
#include "testing/spin.hpp"

#include <string>

namespace loom::ops {
namespace {

using detail::count;
using detail::require_f32_contiguous;
using detail::require_same_memory;
using detail::require_same_shape;

class VectorAdd final : public Op {
 public:
  VectorAdd(Tensor a, Tensor b, Tensor c) : a_(std::move(a)), b_(std::move(b)), c_(std::move(c)) {}
  std::string_view name() const noexcept override { return "vector_add"; }
  std::vector<Tensor> reads() const override { return {a_, b_}; }
  std::vector<Tensor> writes() const override { return {c_}; }
  void validate() const override {
    require_f32_contiguous(a_, "vector_add", "a");
    require_f32_contiguous(b_, "vector_add", "b");
    require_f32_contiguous(c_, "vector_add", "c");
    require_same_shape(a_, b_, "vector_add", "a and b");
    require_same_shape(a_, c_, "vector_add", "a and c");
    require_same_memory(a_, b_, "vector_add");
    require_same_memory(a_, c_, "vector_add");
  }
  void run_cpu() const override {
    kernels::vector_add_reference(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(),
                                  count(a_));
  }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::vector_add(a_.data_as<float>(), b_.data_as<float>(), c_.data_as<float>(), count(a_),
                        StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor a_, b_, c_;
};

class Fill final : public Op {
 public:
  Fill(Tensor t, float value) : t_(std::move(t)), value_(value) {}
  std::string_view name() const noexcept override { return "fill"; }
  std::vector<Tensor> reads() const override { return {}; }
  std::vector<Tensor> writes() const override { return {t_}; }
  void validate() const override { require_f32_contiguous(t_, "fill", "t"); }
  void run_cpu() const override { kernels::fill_reference(t_.data_as<float>(), count(t_), value_); }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::fill(t_.data_as<float>(), count(t_), value_, StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor t_;
  float value_;
};

class ScaleCopy final : public Op {
 public:
  ScaleCopy(Tensor src, Tensor dst, float alpha)
      : src_(std::move(src)), dst_(std::move(dst)), alpha_(alpha) {}
  std::string_view name() const noexcept override { return "scale_copy"; }
  std::vector<Tensor> reads() const override { return {src_}; }
  std::vector<Tensor> writes() const override { return {dst_}; }
  void validate() const override {
    require_f32_contiguous(src_, "scale_copy", "src");
    require_f32_contiguous(dst_, "scale_copy", "dst");
    require_same_shape(src_, dst_, "scale_copy", "src and dst");
    require_same_memory(src_, dst_, "scale_copy");
  }
  void run_cpu() const override {
    kernels::scale_copy_reference(src_.data_as<float>(), dst_.data_as<float>(), count(src_),
                                  alpha_);
  }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::scale_copy(src_.data_as<float>(), dst_.data_as<float>(), count(src_), alpha_,
                        StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor src_, dst_;
  float alpha_;
};

class Spin final : public Op {
 public:
  Spin(Tensor t, std::int64_t us) : t_(std::move(t)), us_(us) {}
  std::string_view name() const noexcept override { return "spin"; }
  std::vector<Tensor> reads() const override { return {t_}; }
  std::vector<Tensor> writes() const override { return {t_}; }
  void validate() const override {
    require_f32_contiguous(t_, "spin", "t");
    if (t_.numel() < 1) throw InvalidArgument("spin: t needs at least one element");
    if (us_ < 0) throw InvalidArgument("spin: the duration must not be negative");
  }
  void run_cpu() const override { kernels::spin_reference(t_.data_as<float>(), us_); }
  void run_cuda(const ExecutionContext& ctx) const override {
    kernels::spin(t_.data_as<float>(), us_, StreamView(cuda_stream(ctx)));
  }

 private:
  Tensor t_;
  std::int64_t us_;
};

}  // namespace

OpPtr vector_add(const Tensor& a, const Tensor& b, const Tensor& c) {
  return std::make_shared<VectorAdd>(a, b, c);
}
OpPtr fill(const Tensor& t, float value) { return std::make_shared<Fill>(t, value); }
OpPtr scale_copy(const Tensor& src, const Tensor& dst, float alpha) {
  return std::make_shared<ScaleCopy>(src, dst, alpha);
}
OpPtr spin(const Tensor& t, std::int64_t microseconds) {
  return std::make_shared<Spin>(t, microseconds);
}

}  // namespace loom::ops
