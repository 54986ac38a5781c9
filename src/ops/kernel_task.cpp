// Kernel tasks (a user's launcher as an op) and the defaults of the Op
// interface and of what a running device task is lent.
#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/kernel_task.hpp>
#include <loom/op.hpp>

#include <string>

namespace loom {

void Op::run_cpu() const {
  throw InvalidArgument("op '" + std::string(name()) + "' has no CPU implementation");
}

void* ExecutionContext::workspace(std::size_t bytes) const {
  if (resources_ == nullptr) {
    throw InvalidArgument("workspace(): only a task that loom runs can have scratch memory");
  }
  return resources_->workspace(bytes);
}

const DeviceProperties& ExecutionContext::properties() const {
  if (resources_ == nullptr) {
    throw InvalidArgument("properties(): only a task that loom runs has a device");
  }
  return resources_->properties();
}

namespace {

class KernelTaskOp final : public Op {
 public:
  KernelTaskOp(std::string name, std::vector<Tensor> reads, std::vector<Tensor> writes,
               KernelLauncher cuda, std::function<void()> cpu, KernelTaskOptions options)
      : name_(std::move(name)),
        reads_(std::move(reads)),
        writes_(std::move(writes)),
        cuda_(std::move(cuda)),
        cpu_(std::move(cpu)),
        options_(std::move(options)) {}
  std::string_view name() const noexcept override { return name_; }
  std::vector<Tensor> reads() const override { return reads_; }
  std::vector<Tensor> writes() const override { return writes_; }
  void validate() const override {
    const auto check = [&](const std::vector<Tensor>& ts, const char* role) {
      for (std::size_t i = 0; i < ts.size(); ++i) {
        if (!ts[i].defined()) {
          throw InvalidArgument("kernel task '" + name_ + "': " + role + " " + std::to_string(i) +
                                " is an undefined tensor");
        }
      }
    };
    check(reads_, "read");
    check(writes_, "write");
    if (options_.validate) options_.validate();
  }
  bool has_cpu() const noexcept override { return static_cast<bool>(cpu_); }
  bool capturable() const noexcept override { return options_.capturable; }
  // A launcher written as kernel_task.hpp shows launches through loom::launch;
  // one that does more is found out at compile and captured instead.
  bool launches_through_loom() const noexcept override { return true; }
  void run_cpu() const override {
    if (!cpu_) Op::run_cpu();
    cpu_();
  }
  void run_cuda(const ExecutionContext& ctx) const override {
    KernelContext k(ctx);
    cuda_(k);
  }

 private:
  std::string name_;
  std::vector<Tensor> reads_;
  std::vector<Tensor> writes_;
  KernelLauncher cuda_;
  std::function<void()> cpu_;
  KernelTaskOptions options_;
};

}  // namespace

OpPtr kernel_task(std::string name, std::vector<Tensor> reads, std::vector<Tensor> writes,
                  KernelLauncher cuda, std::function<void()> cpu) {
  return kernel_task(std::move(name), std::move(reads), std::move(writes), std::move(cuda),
                     std::move(cpu), KernelTaskOptions{});
}

OpPtr kernel_task(std::string name, std::vector<Tensor> reads, std::vector<Tensor> writes,
                  KernelLauncher cuda, std::function<void()> cpu, KernelTaskOptions options) {
  if (name.empty()) throw InvalidArgument("kernel_task: a task needs a name");
  if (!cuda) throw InvalidArgument("kernel_task '" + name + "': an empty launcher");
  return std::make_shared<KernelTaskOp>(std::move(name), std::move(reads), std::move(writes),
                                        std::move(cuda), std::move(cpu), std::move(options));
}

}  // namespace loom
