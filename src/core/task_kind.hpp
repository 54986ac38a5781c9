#pragma once
// What a task is, for the engine and for messages: a collective is an op of
// a communicator (Op::communicator), named "collective" wherever a task's
// kind is shown.

#include <loom/graph.hpp>

#include <string_view>

namespace loom::detail {

/// A collective's task: run on the communication stream.
inline bool is_collective(const Task& task) noexcept {
  return task.kind == TaskKind::op && task.op && task.op->communicator() != nullptr;
}

/// "op", "copy", "host", or "collective".
inline std::string_view kind_name(const Task& task) noexcept {
  return is_collective(task) ? std::string_view("collective") : to_string(task.kind);
}

}  // namespace loom::detail
