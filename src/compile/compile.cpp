#include "compile/compile.hpp"

#include "compile/capture.hpp"
#include "compile/compile_plan.hpp"
#include "compile/intermediates.hpp"
#include "core/tensor_access.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <string>

namespace loom {

struct Executable::Impl {
  detail::Executor* executor = nullptr;
  std::shared_ptr<const detail::PreparedGraph> prepared;  // the original graph, planned
  std::vector<detail::CompiledStep> steps;
  std::vector<OpPtr> segment_ops;  // by step; null for a step that is not a segment
  detail::PrepareHints hints;      // the segment ops, for the executor
  std::shared_ptr<const detail::CapturedGraphs> captured;
  Graph replay;  // what run() submits
  std::size_t arena_bytes = 0;
  std::size_t intermediate_bytes = 0;
  std::size_t segments = 0;
  std::size_t captured_tasks = 0;
};

namespace {

const Executable::Impl& checked(const std::shared_ptr<const Executable::Impl>& impl) {
  if (!impl)
    throw InvalidArgument("Executable::run: an empty executable (make one with Runtime::compile)");
  return *impl;
}

// What the compiled graph does with a placeholder's storage.
struct Use {
  bool read = false;
  bool written = false;
};

Use use_of(const detail::PreparedGraph& prepared, const Tensor& placeholder) {
  Use use;
  // By memory, like the ordering: any access that overlaps its bytes.
  const void* space = detail::address_space(placeholder);
  const auto [lo, hi] = detail::byte_span(placeholder);
  for (const auto& a : prepared.accesses) {
    if (a.space != space || !(a.lo < hi && lo < a.hi)) continue;
    (a.write ? use.written : use.read) = true;
  }
  return use;
}

[[noreturn]] void refuse_binding(const Binding& b, const std::string& why) {
  throw InvalidArgument(
      "Executable::run: cannot bind " +
      (b.tensor.defined() ? b.tensor.describe() : std::string("an undefined tensor")) +
      " to placeholder " +
      (b.placeholder.defined() ? b.placeholder.describe() : std::string("(undefined)")) + ": " +
      why +
      "; a binding keeps the compiled graph as it is (same dtype, shape and "
      "memory space, contiguous, a tensor the graph uses)");
}

Use check_binding(const detail::PreparedGraph& prepared, const Binding& b) {
  if (!b.placeholder.defined() || !b.tensor.defined()) refuse_binding(b, "both must be defined");
  if (detail::TensorAccess::storage(b.placeholder)->intermediate) {
    // Its bytes may be shared with other intermediates at other times of
    // the run: a copy in before the run or out after it would meet them.
    refuse_binding(b,
                   "the placeholder is a graph-scoped intermediate, whose memory the graph "
                   "shares out; bind a tensor made outside the graph");
  }
  const Use use = use_of(prepared, b.placeholder);
  if (!use.read && !use.written) refuse_binding(b, "the graph does not use the placeholder");
  if (b.tensor.dtype() != b.placeholder.dtype()) refuse_binding(b, "the dtype differs");
  if (!(b.tensor.shape() == b.placeholder.shape())) refuse_binding(b, "the shape differs");
  if (b.tensor.memory() != b.placeholder.memory()) refuse_binding(b, "the memory space differs");
  if (!b.tensor.is_contiguous() || !b.placeholder.is_contiguous()) {
    refuse_binding(b, "both must be contiguous");
  }
  return use;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.shares_storage_with(b) && a.data() == b.data();
}

// Compile refuses what a capture cannot hold, on every backend, so that a
// graph that compiles on the CPU compiles on a GPU.
void check_compilable(const Graph& graph) {
  for (const auto& t : graph.tasks()) {
    std::string why;
    if (t.kind == TaskKind::op && !t.op->capturable()) {
      why = "op " + t.name + " ('" + std::string(t.op->name()) +
            "') cannot be captured into a CUDA graph (Op::capturable() is false); submit the "
            "graph instead of compiling it";
    } else if (t.kind == TaskKind::collective) {
      why = "collective " + t.name + " cannot be compiled; submit the graph instead";
    }
    if (why.empty()) continue;
    throw InvalidArgument(std::move(why), {"", "", 0, t.name});
  }
}

}  // namespace

Future Executable::run() const {
  const Impl& impl = checked(impl_);
  return impl.executor->submit(impl.replay, impl.hints);
}

Future Executable::run(const std::vector<Binding>& bindings) const {
  const Impl& impl = checked(impl_);
  if (bindings.empty()) return run();
  std::vector<Use> uses;
  uses.reserve(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    uses.push_back(check_binding(*impl.prepared, bindings[i]));
    for (std::size_t j = 0; j < i; ++j) {
      if (same_view(bindings[j].placeholder, bindings[i].placeholder)) {
        refuse_binding(bindings[i], "the placeholder is bound twice");
      }
    }
  }
  // The replay between copies in and copies out (a run of its own graph:
  // the instantiated CUDA graphs are shared, untouched).
  Graph g;
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (uses[i].read && !same_view(b.tensor, b.placeholder)) {
      g.copy(b.tensor, b.placeholder, {.name = "bind in #" + std::to_string(i)});
    }
  }
  detail::append_steps(g, *impl.prepared, impl.steps,
                       [&](std::size_t step) { return impl.segment_ops[step]; });
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (uses[i].written && !same_view(b.tensor, b.placeholder)) {
      g.copy(b.placeholder, b.tensor, {.name = "bind out #" + std::to_string(i)});
    }
  }
  return impl.executor->submit(g, impl.hints);
}

std::size_t Executable::arena_bytes() const noexcept { return impl_ ? impl_->arena_bytes : 0; }
std::size_t Executable::intermediate_bytes() const noexcept {
  return impl_ ? impl_->intermediate_bytes : 0;
}
std::size_t Executable::segments() const noexcept { return impl_ ? impl_->segments : 0; }
std::size_t Executable::captured_tasks() const noexcept {
  return impl_ ? impl_->captured_tasks : 0;
}

namespace detail {

Executable compile_graph(const Graph& graph, const CompileServices& services) {
  Executor& executor = services.executor;
  executor.throw_if_poisoned();
  check_compilable(graph);
  auto impl = std::make_shared<Executable::Impl>();
  impl->executor = &executor;
  // Memory first: the plan's data accesses are spans of bound memory.
  const ArenaPlan arena = bind_in_arena(graph, services.arena_owner);
  impl->arena_bytes = arena.arena_bytes;
  impl->intermediate_bytes = arena.requested_bytes;
  impl->prepared = executor.prepare(graph);
  impl->steps = compile_steps(*impl->prepared);
  if (executor.cuda()) {
    CaptureOptions options{executor.device(), &services.copies, executor.entry_stream()};
    impl->captured = capture_segments(*impl->prepared, impl->steps, options, impl->segment_ops);
  } else {
    impl->segment_ops.assign(impl->steps.size(), nullptr);
  }
  for (const auto& op : impl->segment_ops) {
    if (op) impl->hints.device_graph_ops.push_back(op.get());
  }
  for (const auto& step : impl->steps) {
    if (!step.segment) continue;
    ++impl->segments;
    impl->captured_tasks += step.tasks.size();
  }
  const auto* self = impl.get();
  append_steps(impl->replay, *impl->prepared, impl->steps,
               [self](std::size_t step) { return self->segment_ops[step]; });
  // Planned now, on the caller's thread, so that run() only submits.
  if (!impl->replay.empty()) (void)executor.prepare(impl->replay, impl->hints);
  return ExecutableAccess::make(std::move(impl));
}

}  // namespace detail

}  // namespace loom
