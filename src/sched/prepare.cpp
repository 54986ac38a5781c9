#include "sched/prepare.hpp"

#include "core/prepared_slot.hpp"
#include "core/storage.hpp"
#include "core/task_kind.hpp"
#include "core/tensor_access.hpp"
#include "sched/copy_engine.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

namespace loom::detail {

namespace {
std::atomic<std::uint64_t> preparer_serials{0};
}  // namespace

std::vector<Placement> placements(const Graph& graph, bool cuda) {
  std::vector<Placement> out;
  out.reserve(graph.size());
  for (const auto& t : graph.tasks()) {
    if (!cuda || t.kind == TaskKind::host ||
        (t.kind == TaskKind::op && t.op && t.op->runs_on_host())) {
      out.push_back(Placement::host);
    } else if (t.kind == TaskKind::copy) {
      const Memory a = t.copy_src.memory();
      const Memory b = t.copy_dst.memory();
      if (a.is_host() && b.is_host()) {
        out.push_back(Placement::host);
      } else if (a == Memory::pageable || b == Memory::pageable) {
        out.push_back(Placement::async);
      } else {
        out.push_back(Placement::device);
      }
    } else {
      out.push_back(Placement::device);
    }
  }
  return out;
}

std::shared_ptr<PreparedGraph> make_prepared(const Graph& graph,
                                             const std::vector<Placement>& placement,
                                             int streams_per_priority) {
  auto prepared = std::make_shared<PreparedGraph>();
  // The tasks alone: the graph's build history is never read by a run.
  prepared->graph = GraphAccess::snapshot(graph);
  prepared->plan = make_plan(prepared->graph, placement, streams_per_priority);
  const Plan& plan = prepared->plan;
  prepared->stream_plan.assign(static_cast<std::size_t>(plan.stream_count), {});
  prepared->stream_pos.assign(prepared->tasks().size(), 0);
  for (auto t : plan.order) {
    if (plan.tasks[t].placement == Placement::device) {
      auto& list = prepared->stream_plan[static_cast<std::size_t>(plan.tasks[t].stream)];
      prepared->stream_pos[t] = static_cast<std::uint32_t>(list.size());
      list.push_back(t);
      prepared->device_order.push_back(t);
      prepared->uses_streams = true;
    } else {
      prepared->device_only = false;
    }
    if (prepared->tasks()[t].predecessors.empty()) prepared->roots.push_back(t);
  }
  prepared->accesses = summarize_accesses(prepared->tasks());
  auto names = std::make_shared<std::vector<std::string>>();
  names->reserve(prepared->tasks().size());
  for (const auto& t : prepared->tasks()) names->push_back(t.name);
  prepared->names = std::move(names);
  return prepared;
}

Preparer::Preparer(PrepareOptions options, const CopyEngine& copies)
    : options_(options), copies_(copies), serial_(++preparer_serials) {}

void Preparer::check(const Graph& graph, const PrepareHints& hints) const {
  if (options_.check_graph) options_.check_graph(graph);
  for (const auto& t : graph.tasks()) {
    if (t.kind == TaskKind::copy) {
      // Before launch, like an op's inputs: the path's own refusals, by name.
      try {
        copies_.check(t.copy_src, t.copy_dst);
      } catch (const Error& e) {
        std::rethrow_exception(e.with_task(t.name));
      }
    }
    if (!options_.cuda && t.kind == TaskKind::op && !t.op->has_cpu()) {
      throw InvalidArgument(std::string(kind_name(t)) + " " + t.name + " ('" +
                                std::string(t.op->name()) +
                                "') has no CPU implementation, and this runtime runs the CPU "
                                "backend",
                            {"", "", 0, t.name});
    }
    if (t.kind != TaskKind::op) continue;
    // A collective's backend checks its memory (nccl: its GPU's; mpi: host,
    // or a device staged through pinned memory).
    if (is_collective(t)) continue;
    // A captured segment's copies may read or write pinned memory.
    const bool segment = t.kind == TaskKind::op &&
                         std::find(hints.device_graph_ops.begin(), hints.device_graph_ops.end(),
                                   t.op.get()) != hints.device_graph_ops.end();
    const auto check_space = [&](const Tensor& x, const char* role) {
      // A token (a collective's, inside a compiled segment too) is never touched.
      if (!x.defined() || TensorAccess::storage(x)->order_only) return;
      const Memory m = x.memory();
      const bool ok = options_.cuda ? m == Memory::on_device(options_.device) ||
                                          (segment && m == Memory::pinned)
                                    : m.is_host();
      if (!ok) {
        const std::string expected = options_.cuda ? Memory::on_device(options_.device).to_string()
                                                   : std::string("host memory");
        throw InvalidArgument(std::string(kind_name(t)) + " " + t.name + ": the " + role + " " +
                                  x.describe() + " is not on " + expected +
                                  ", where this runtime's " + (options_.cuda ? "CUDA" : "CPU") +
                                  " backend runs it",
                              {"", "", 0, t.name});
      }
    };
    for (const auto& r : t.reads) check_space(r, "input");
    for (const auto& w : t.writes) check_space(w, "output");
  }
}

void Preparer::adopt(Graph& graph, std::shared_ptr<const PreparedGraph> prepared) const {
  auto slot = std::make_shared<PreparedSlot>();
  slot->owner = serial_;
  slot->value = std::move(prepared);
  GraphAccess::give_slot(graph, std::move(slot));
}

std::shared_ptr<const PreparedGraph> Preparer::prepare(const Graph& graph,
                                                       const PrepareHints& hints) {
  const auto& slot = GraphAccess::slot(graph);
  if (slot) {
    std::lock_guard lock(slot->mutex);
    if (slot->owner == serial_ && slot->value) {
      return std::static_pointer_cast<const PreparedGraph>(slot->value);
    }
  }
  graph.validate();
  check(graph, hints);
  std::shared_ptr<const PreparedGraph> prepared =
      make_prepared(graph, placements(graph, options_.cuda), options_.streams_per_priority);
  if (slot) {
    std::lock_guard lock(slot->mutex);
    slot->owner = serial_;
    slot->value = prepared;
  }
  return prepared;
}

}  // namespace loom::detail
