#pragma once
/// @file loom.hpp
/// The umbrella header: everything public and CUDA-free. (CUDA handles are
/// in loom/cuda_interop.hpp, included on purpose only.)

#include <loom/activity.hpp>
#include <loom/completion.hpp>
#include <loom/device.hpp>
#include <loom/dtype.hpp>
#include <loom/error.hpp>
#include <loom/kernel_task.hpp>
#include <loom/log.hpp>
#include <loom/memory.hpp>
#include <loom/memory_stats.hpp>
#include <loom/pipeline.hpp>
#include <loom/priority.hpp>
#include <loom/runtime.hpp>
#include <loom/tensor.hpp>
#include <loom/version.hpp>
