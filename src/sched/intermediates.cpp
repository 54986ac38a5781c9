#include "sched/intermediates.hpp"

#include "core/log.hpp"
#include "core/tensor_access.hpp"

#include <mutex>
#include <vector>

namespace loom::detail {

namespace {

std::mutex& binding_mutex() {
  static std::mutex m;
  return m;
}

std::vector<Tensor> unbound(const Graph& graph) {
  std::vector<Tensor> out;
  for (const auto& t : graph.intermediates()) {
    if (!TensorAccess::storage(t)->bound) out.push_back(t);
  }
  return out;
}

// The intermediate's bytes are `memory`'s, from `offset` on.
void bind_storage(Storage& storage, const std::shared_ptr<Storage>& memory, std::size_t offset) {
  storage.base = static_cast<char*>(memory->base) + offset;
  storage.memory = memory->memory;
  storage.stream = memory->stream;
  // The pool's owner answers for the intermediate as for provided memory
  // (copy paths tell it about other streams; not owned, so never freed here).
  storage.owner = memory->owner;
  storage.keep_alive = memory;
  storage.bound = true;
}

}  // namespace

void bind_from_pool(const Graph& graph, MemoryOwner& owner) {
  std::lock_guard lock(binding_mutex());
  for (const auto& t : unbound(graph)) {
    Storage& storage = *TensorAccess::storage(t);
    bind_storage(storage, owner.allocate(storage.bytes), 0);
  }
}

ArenaPlan bind_in_arena(const Graph& graph, MemoryOwner& owner) {
  std::lock_guard lock(binding_mutex());
  const auto tensors = unbound(graph);
  ArenaPlan plan = plan_tensors(graph, tensors);
  if (tensors.empty()) return plan;
  const auto arena = owner.allocate(plan.arena_bytes);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    bind_storage(*TensorAccess::storage(tensors[i]), arena, plan.offsets[i]);
  }
  logger().debug("compile: {} intermediates of {} bytes in an arena of {} bytes on {}",
                 tensors.size(), plan.requested_bytes, plan.arena_bytes,
                 owner.memory().to_string());
  return plan;
}

}  // namespace loom::detail
