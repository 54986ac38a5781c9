#include <loom/error.hpp>

namespace loom {

Error::Error(std::string message, ErrorContext context)
    : message_(std::move(message)), context_(std::move(context)) {
  format();
}

std::exception_ptr Error::with_task(std::string_view task) const { return named_copy(*this, task); }

void Error::name_task(std::string_view task) {
  if (task.empty() || task == context_.task) return;
  // The first task keeps its part: it is where the error came from.
  if (origin_task_.empty()) origin_task_ = context_.task;
  if (origin_task_ == task) origin_task_.clear();  // back where it came from
  context_.task = std::string(task);
  format();
}

void Error::format() {
  what_ = "loom: ";
  if (!context_.task.empty()) what_ += "task '" + context_.task + "': ";
  if (!origin_task_.empty()) what_ += "because of task '" + origin_task_ + "': ";
  if (!context_.call.empty()) what_ += context_.call + " failed: ";
  what_ += message_;
  if (!context_.file.empty()) {
    what_ += " [" + context_.file + ":" + std::to_string(context_.line) + "]";
  }
}

}  // namespace loom
