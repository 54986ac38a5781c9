#include "compile/intermediates.hpp"

#include "core/log.hpp"
#include "core/task_kind.hpp"
#include "core/tensor_access.hpp"

#include <loom/error.hpp>

#include <mutex>
#include <string>
#include <unordered_set>
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

void check_foreign_intermediates(const Graph& graph) {
  std::unordered_set<const Storage*> own;
  bool own_listed = false;
  const auto check = [&](const Task& task, const Tensor& x, const char* role) {
    if (!x.defined()) return;
    const Storage* storage = TensorAccess::storage(x).get();
    if (!storage->intermediate) return;
    if (!own_listed) {
      for (const auto& t : graph.intermediates()) own.insert(TensorAccess::storage(t).get());
      own_listed = true;
    }
    if (own.count(storage) != 0) return;
    bool bound = false;
    {
      std::lock_guard lock(binding_mutex());  // its graph may be binding it now
      bound = storage->bound;
    }
    if (bound) return;
    throw InvalidArgument(std::string(detail::kind_name(task)) + " " + task.name + ": the " + role +
                              " " + x.describe() +
                              " is an intermediate of another graph that was never submitted or "
                              "compiled, so it has no memory: submit or compile that graph first, "
                              "or use a tensor of the runtime's (Runtime::tensor)",
                          {"", "", 0, task.name});
  };
  for (const auto& t : graph.tasks()) {
    for (const auto& r : t.reads) check(t, r, "input");
    for (const auto& w : t.writes) check(t, w, "output");
    if (t.kind == TaskKind::copy) {
      check(t, t.copy_src, "source");
      check(t, t.copy_dst, "destination");
    }
  }
}

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
