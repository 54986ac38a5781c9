#include "common/launch.hpp"

namespace loom::detail {
namespace {
thread_local TaskResources* t_launch_describer = nullptr;
}  // namespace

TaskResources* thread_launch_describer() noexcept { return t_launch_describer; }

ThreadLaunchDescriber::ThreadLaunchDescriber(TaskResources* resources) noexcept
    : previous_(t_launch_describer) {
  t_launch_describer = resources;
}

ThreadLaunchDescriber::~ThreadLaunchDescriber() { t_launch_describer = previous_; }

}  // namespace loom::detail
