#pragma once
/// @file loom.hpp
/// The umbrella header: everything public and CUDA-free. (CUDA handles are
/// in loom/cuda_interop.hpp, included on purpose only.)

#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/log.hpp>
#include <loom/priority.hpp>
#include <loom/version.hpp>
