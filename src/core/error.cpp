#include <loom/error.hpp>

namespace loom {

Error::Error(std::string message, ErrorContext context)
    : message_(std::move(message)), context_(std::move(context)) {
  format();
}

void Error::attach_task(std::string_view task) {
  if (!context_.task.empty() || task.empty()) return;
  context_.task = std::string(task);
  format();
}

void Error::format() {
  what_ = "loom: ";
  if (!context_.task.empty()) what_ += "task '" + context_.task + "': ";
  if (!context_.call.empty()) what_ += context_.call + " failed: ";
  what_ += message_;
  if (!context_.file.empty()) {
    what_ += " [" + context_.file + ":" + std::to_string(context_.line) + "]";
  }
}

}  // namespace loom
