#include "testing/spin_op.hpp"

#include "common/checks.hpp"
#include "testing/spin.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/error.hpp>

#include <string>

namespace loom::testing {
namespace {

using ops::detail::require_f32_contiguous;

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

OpPtr spin(const Tensor& t, std::int64_t microseconds) {
  return std::make_shared<Spin>(t, microseconds);
}

}  // namespace loom::testing
