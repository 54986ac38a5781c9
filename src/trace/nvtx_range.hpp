#pragma once
// An NVTX range for the scope's lifetime, named after a task, so that
// Nsight Systems shows each task's launch (or host run) on its thread.

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace loom::detail {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace loom::detail
