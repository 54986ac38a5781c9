#include "compile/compile.hpp"

#include "compile/capture.hpp"
#include "compile/compile_plan.hpp"
#include "compile/compile_profile.hpp"
#include "compile/intermediates.hpp"
#include "core/tensor_access.hpp"
#include "sched/plan.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace loom {

struct Executable::Impl {
  detail::Executor* executor = nullptr;
  std::shared_ptr<const detail::PreparedGraph> prepared;  // the original graph, planned
  std::vector<detail::CompiledStep> steps;
  std::vector<OpPtr> segment_ops;  // by step; null for a step that is not a segment
  detail::PrepareHints hints;      // the segment ops, for the executor
  std::shared_ptr<const detail::CapturedGraphs> captured;
  std::vector<std::size_t> segment_of_step;  // into captured->segments; npos for other steps
  Graph replay;                              // what run() submits
  // What run_n(times) submitted last, kept (when small) for the next call
  // with the same count: built and admitted anew each call, it cost ~1 ms of
  // host time at 1000 nodes (550 µs to build, 330 to admit, H100).
  struct Repeated {
    int times = 0;
    Graph graph;
    detail::PrepareHints hints;
  };
  mutable std::mutex repeated_mutex;
  mutable std::shared_ptr<const Repeated> repeated;  // guarded by repeated_mutex
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

// A view's bytes in its address space: overlap goes by memory, like the
// ordering.
struct Span {
  const void* space = nullptr;
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
  bool overlaps(const Span& o) const { return space == o.space && lo < o.hi && o.lo < hi; }
  bool holds(const Span& o) const { return space == o.space && lo <= o.lo && o.hi <= hi; }
};

Span span_of(const Tensor& t) {
  const auto [lo, hi] = detail::byte_span(t);
  return {detail::address_space(t), lo, hi};
}

// What the compiled graph does with a placeholder's storage.
struct Use {
  bool read = false;
  bool written = false;
};

Use use_of(const detail::PreparedGraph& prepared, const Tensor& placeholder) {
  Use use;
  const Span p = span_of(placeholder);
  for (const auto& a : prepared.accesses) {
    if (!p.overlaps(Span{a.space, a.lo, a.hi})) continue;
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

// Calls fn(offset, value, is_pointer) for every pointer-sized word a
// described launch passes: its pointer-sized parameters, and the pointers
// its class parameters declare.
template <class Fn>
void for_each_word(const detail::LaunchRecord& record, Fn&& fn) {
  const auto word_at = [&](std::size_t offset) {
    std::uintptr_t v = 0;
    std::memcpy(&v, record.bytes.data() + offset, sizeof v);
    return v;
  };
  for (const auto& param : record.params) {
    if (param.size == sizeof(std::uintptr_t))
      fn(param.offset, word_at(param.offset), param.pointer);
  }
  for (const std::size_t offset : record.inner_pointers) fn(offset, word_at(offset), true);
}

// Whether a tensor some task declares begins at `address`: a pointer there
// is that tensor's, even where it is also one past the end of the storage
// before it (the allocator packs tensors end to end).
bool starts_a_tensor(const Executable::Impl& impl, std::uintptr_t address) {
  for (const auto& task : impl.prepared->tasks()) {
    for (const auto* list : {&task.reads, &task.writes}) {
      for (const auto& x : *list) {
        if (x.defined() && reinterpret_cast<std::uintptr_t>(x.data()) == address) return true;
      }
    }
  }
  return false;
}

// Whether some described launch may reach `placeholder` in a way that
// re-pointing would miss: a pointer just past its end, a pointer into its
// storage outside it (a base pointer and an offset), or a number whose
// value is one of its addresses (an address passed as an integer). Then a
// copy binds it: a copy is always right.
bool ambiguous_parameters(const Executable::Impl& impl, const Tensor& placeholder,
                          std::string* why) {
  const detail::CapturedGraphs& graphs = *impl.captured;
  const auto [lo, hi] = detail::byte_span(placeholder);
  const auto& storage = *detail::TensorAccess::storage(placeholder);
  const auto base = reinterpret_cast<std::uintptr_t>(storage.base);
  const std::uintptr_t end = base + storage.bytes;
  for (std::size_t s = 0; s < graphs.segments.size(); ++s) {
    const auto& launches = graphs.segments[s]->launches;
    for (std::size_t l = 0; l < launches.size(); ++l) {
      bool ambiguous = false;
      for_each_word(launches[l].record, [&](std::size_t offset, std::uintptr_t v, bool pointer) {
        const bool inside = v >= lo && v < hi;
        const bool here = pointer ? (!inside && v >= std::min(base, lo) && v <= std::max(end, hi) &&
                                     !starts_a_tensor(impl, v))
                                  : (v >= lo && v <= hi);
        if (here && !ambiguous && why != nullptr) {
          *why = "launch " + std::to_string(l) + " of segment " + std::to_string(s) +
                 (pointer ? " passes a pointer at the edge of or beside it"
                          : " passes a number equal to one of its addresses") +
                 " (parameter bytes at offset " + std::to_string(offset) + ", " +
                 std::to_string(v - std::min(base, lo)) + " bytes from its storage's start of " +
                 std::to_string(end - base) + ")";
        }
        ambiguous = ambiguous || here;
      });
      if (ambiguous) return true;
    }
  }
  return false;
}

// Whether binding `i` may re-point the kernel nodes that use its placeholder
// instead of copying through it: every task that touches the placeholder's
// bytes is a described launch (capture.hpp) and touches them only within
// the placeholder, and no other binding's placeholder overlaps it.
bool can_repoint(const Executable::Impl& impl, const std::vector<Binding>& bindings, std::size_t i,
                 std::string* why) {
  const auto no = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (!impl.captured) return no("nothing was captured");
  // A described kernel may have been chosen for its pointers' alignment (a
  // vectorized variant, a peeled head): the bound tensor must sit the same
  // way against every boundary such a choice looks at.
  constexpr std::uintptr_t kAlignmentKernelsLookAt = 256;
  const auto address = [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data()); };
  if (address(bindings[i].tensor) % kAlignmentKernelsLookAt !=
      address(bindings[i].placeholder) % kAlignmentKernelsLookAt) {
    return no("its tensor sits at another alignment than its placeholder");
  }
  const Span p = span_of(bindings[i].placeholder);
  for (std::size_t j = 0; j < bindings.size(); ++j) {
    if (j != i && span_of(bindings[j].placeholder).overlaps(p)) {
      return no("its placeholder overlaps binding " + std::to_string(j) + "'s");
    }
  }
  const auto& tasks = impl.prepared->tasks();
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    for (const auto* list : {&tasks[t].reads, &tasks[t].writes}) {
      for (const auto& x : *list) {
        if (!x.defined()) continue;
        const Span s = span_of(x);
        if (!s.overlaps(p)) continue;
        if (!impl.captured->described[t]) return no("task " + tasks[t].name + " is captured");
        if (!p.holds(s)) return no("task " + tasks[t].name + " reaches beyond the placeholder");
      }
    }
  }
  if (ambiguous_parameters(impl, bindings[i].placeholder, why)) return false;
  if (why != nullptr) *why = "re-pointed";
  return true;
}

// Whether re-pointed binding `i`'s tensor keeps clear of the rest of the
// replay. The graph's edges were made for the placeholders' bytes: a bound
// tensor that meets memory a task still uses at its own address, or another
// re-pointed binding's tensor (say, one tensor bound to an input and an
// output), would be read and written by nodes no edge orders. Copies, which
// are tasks of the run ordered by their data, bind it instead.
bool clear_of_the_graph(const Executable::Impl& impl, const std::vector<Binding>& bindings,
                        const std::vector<char>& repoint, std::size_t i) {
  const Span bound = span_of(bindings[i].tensor);
  for (std::size_t j = 0; j < bindings.size(); ++j) {
    if (j != i && repoint[j] && span_of(bindings[j].tensor).overlaps(bound)) return false;
  }
  const auto moved = [&](const Span& s) {
    for (std::size_t j = 0; j < bindings.size(); ++j) {
      if (repoint[j] && span_of(bindings[j].placeholder).overlaps(s)) return true;
    }
    return false;
  };
  for (const auto& task : impl.prepared->tasks()) {
    for (const auto* list : {&task.reads, &task.writes}) {
      for (const auto& x : *list) {
        if (!x.defined()) continue;
        const Span s = span_of(x);
        if (s.overlaps(bound) && !moved(s)) return false;
      }
    }
  }
  return true;
}

// Which bindings re-point described launches (1) and which are copied (0);
// `reasons`, when given, gets why for each.
std::vector<char> bindings_to_repoint(const Executable::Impl& impl,
                                      const std::vector<Binding>& bindings,
                                      std::vector<std::string>* reasons) {
  std::vector<char> repoint(bindings.size(), 0);
  if (reasons != nullptr) reasons->assign(bindings.size(), "");
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    std::string* why = reasons != nullptr ? &(*reasons)[i] : nullptr;
    if (same_view(bindings[i].tensor, bindings[i].placeholder)) {
      if (why != nullptr) *why = "bound to itself";
      continue;
    }
    repoint[i] = can_repoint(impl, bindings, i, why) ? 1 : 0;
  }
  // Dropping one binding back to copies can leave another's tensor meeting
  // memory that now stays where it is: until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      if (repoint[i] && !clear_of_the_graph(impl, bindings, repoint, i)) {
        repoint[i] = 0;
        changed = true;
        if (reasons != nullptr) (*reasons)[i] = "its tensor meets memory the replay still uses";
      }
    }
  }
  return repoint;
}

// The pointer parameters of every described launch of segment `segment`
// that point into a re-pointed placeholder, moved to the same place in its
// bound tensor.
std::shared_ptr<detail::Repointing> repointing_for(const detail::CapturedSegment& segment,
                                                   const std::vector<Binding>& bindings,
                                                   const std::vector<char>& repoint) {
  auto result = std::make_shared<detail::Repointing>();
  for (std::size_t l = 0; l < segment.launches.size(); ++l) {
    const auto& record = segment.launches[l].record;
    std::vector<unsigned char> bytes;
    for_each_word(record, [&](std::size_t offset, std::uintptr_t value, bool pointer) {
      if (!pointer) return;
      for (std::size_t i = 0; i < bindings.size(); ++i) {
        if (!repoint[i]) continue;
        const auto [lo, hi] = detail::byte_span(bindings[i].placeholder);
        if (value < lo || value >= hi) continue;
        if (bytes.empty()) bytes = record.bytes;
        const auto moved =
            reinterpret_cast<std::uintptr_t>(bindings[i].tensor.data()) + (value - lo);
        std::memcpy(bytes.data() + offset, &moved, sizeof moved);
        break;
      }
    });
    if (!bytes.empty()) result->changes.push_back({l, std::move(bytes)});
  }
  return result;
}

// A step's reads or writes with each re-pointed placeholder's bytes replaced
// by its bound tensor (whole), for the run's ordering.
std::vector<Tensor> rebound(std::vector<Tensor> tensors, const std::vector<Binding>& bindings,
                            const std::vector<char>& repoint) {
  for (auto& x : tensors) {
    if (!x.defined()) continue;
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      if (repoint[i] && span_of(bindings[i].placeholder).overlaps(span_of(x))) {
        x = bindings[i].tensor;
        break;
      }
    }
  }
  return tensors;
}

// Compile refuses what a capture cannot hold, on every backend, so that a
// graph that compiles on the CPU compiles on a GPU.
void check_compilable(const Graph& graph) {
  for (const auto& t : graph.tasks()) {
    std::string why;
    const bool refused = t.kind == TaskKind::op && (!t.op->capturable() || t.op->runs_on_host());
    if (refused && detail::is_collective(t)) {
      why = "collective " + t.name + " ('" + std::string(t.op->name()) +
            "') cannot be compiled: its communicator's backend does not capture collectives "
            "into CUDA graphs (the nccl backend does); submit the graph instead";
    } else if (refused) {
      why = "op " + t.name + " ('" + std::string(t.op->name()) +
            "') cannot be captured into a CUDA graph (" +
            (t.op->runs_on_host() ? "it runs on a host worker" : "Op::capturable() is false") +
            "); submit the graph instead of compiling it";
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
  // Bindings whose placeholder only described launches use are re-pointed
  // in the instantiated graphs; the others are copied in before the replay
  // and out after it, as tasks of the same run.
  const std::vector<char> repoint = bindings_to_repoint(impl, bindings, nullptr);
  const bool any_repoint =
      std::any_of(repoint.begin(), repoint.end(), [](char r) { return r != 0; });
  Graph g;
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (!repoint[i] && uses[i].read && !same_view(b.tensor, b.placeholder)) {
      g.copy(b.tensor, b.placeholder, {.name = "bind in #" + std::to_string(i)});
    }
  }
  detail::PrepareHints hints = impl.hints;
  detail::append_steps(g, *impl.prepared, impl.steps, [&](std::size_t step) -> OpPtr {
    const std::size_t s = impl.segment_of_step[step];
    if (!any_repoint || s == detail::kNotASegment) return impl.segment_ops[step];
    auto repointing = repointing_for(*impl.captured->segments[s], bindings, repoint);
    if (repointing->changes.empty()) return impl.segment_ops[step];
    std::vector<Tensor> reads;
    std::vector<Tensor> writes;
    detail::step_accesses(*impl.prepared, impl.steps[step], reads, writes);
    OpPtr op = detail::repointed_segment_op(impl.captured, s, std::move(repointing),
                                            rebound(std::move(reads), bindings, repoint),
                                            rebound(std::move(writes), bindings, repoint));
    hints.device_graph_ops.push_back(op.get());
    return op;
  });
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (!repoint[i] && uses[i].written && !same_view(b.tensor, b.placeholder)) {
      g.copy(b.placeholder, b.tensor, {.name = "bind out #" + std::to_string(i)});
    }
  }
  return impl.executor->submit(g, hints);
}

namespace {

// The most tasks a kept run_n graph may hold (one task where the executable
// is one CUDA graph, whatever the count).
constexpr std::size_t kKeptRepeatedTasks = 4096;

// The graph run_n(times) submits: one task of `times` launches where the
// executable is one CUDA graph (unless it holds collectives, whose timeout
// counts from a launch's start); otherwise the steps `times` over.
std::shared_ptr<const Executable::Impl::Repeated> repeated_graph(const Executable::Impl& impl,
                                                                 int times) {
  auto r = std::make_shared<Executable::Impl::Repeated>();
  r->times = times;
  r->hints = impl.hints;
  Graph& g = r->graph;
  if (impl.steps.size() == 1 && impl.steps[0].segment && impl.captured &&
      impl.captured->segments[impl.segment_of_step[0]]->collectives.empty()) {
    std::vector<Tensor> reads;
    std::vector<Tensor> writes;
    detail::step_accesses(*impl.prepared, impl.steps[0], reads, writes);
    OpPtr op = detail::repeated_segment_op(impl.captured, impl.segment_of_step[0], times,
                                           std::move(reads), std::move(writes));
    r->hints.device_graph_ops.push_back(op.get());
    g.add(op, {impl.steps[0].name + " x" + std::to_string(times),
               impl.prepared->tasks()[impl.steps[0].tasks.front()].priority});
    return r;
  }
  // Each step follows its own copy in the replay before (a host task that
  // touches no data would otherwise overlap itself), and the rest follows
  // the data, as across runs.
  std::vector<TaskId> before;
  for (int i = 0; i < times; ++i) {
    std::vector<TaskId> ids = detail::append_steps(
        g, *impl.prepared, impl.steps, [&](std::size_t step) { return impl.segment_ops[step]; });
    for (std::size_t s = 0; s < before.size(); ++s) g.precede(before[s], ids[s]);
    before = std::move(ids);
  }
  return r;
}

}  // namespace

Future Executable::run_n(int times) const {
  const Impl& impl = checked(impl_);
  if (times < 0) {
    throw InvalidArgument("Executable::run_n: a negative count (" + std::to_string(times) + ")");
  }
  if (times == 1) return run();
  if (times == 0) return impl.executor->submit(Graph{});
  std::shared_ptr<const Impl::Repeated> r;
  {
    std::lock_guard lock(impl.repeated_mutex);
    r = impl.repeated;
  }
  if (!r || r->times != times) {
    // Built outside the lock: two first calls may both build; either serves.
    r = repeated_graph(impl, times);
    // Kept only while it is small: the steps `times` over would otherwise
    // stay in memory as long as the executable.
    if (r->graph.size() <= kKeptRepeatedTasks) {
      std::lock_guard lock(impl.repeated_mutex);
      impl.repeated = r;
    }
  }
  return impl.executor->submit(r->graph, r->hints);
}

Future Executable::run_until(std::function<bool()> predicate) const {
  const Impl& impl = checked(impl_);
  if (!predicate) throw InvalidArgument("Executable::run_until: an empty predicate");
  // A host task that replays until the predicate holds: it touches no data,
  // so the replays it waits for are never ordered after its own run.
  Graph g;
  g.host("run_until", [self = *this, predicate = std::move(predicate)] {
    while (!predicate()) self.run().wait();
  });
  return impl.executor->submit(g);
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

const CapturedGraphs* captured_graphs(const Executable& exe) noexcept {
  return exe.impl_ ? exe.impl_->captured.get() : nullptr;
}

std::vector<std::string> explain_bindings(const Executable& exe,
                                          const std::vector<Binding>& bindings) {
  std::vector<std::string> reasons;
  if (exe.impl_) bindings_to_repoint(*exe.impl_, bindings, &reasons);
  return reasons;
}

CompileProfile*& compile_profile() noexcept {
  thread_local CompileProfile* profile = nullptr;
  return profile;
}

Executable compile_graph(const Graph& graph, const CompileServices& services) {
  Executor& executor = services.executor;
  // Counted as work in flight: a runtime being destroyed waits for it, and
  // refuses one that comes after it closed.
  const Executor::CompileInFlight in_flight(executor);
  executor.throw_if_poisoned();
  check_compilable(graph);
  auto impl = std::make_shared<Executable::Impl>();
  impl->executor = &executor;
  // Memory first: the plan's data accesses are spans of bound memory.
  const ArenaPlan arena = [&] {
    const CompilePhase phase(&CompileProfile::bind_us);
    return bind_in_arena(graph, services.arena_owner);
  }();
  impl->arena_bytes = arena.arena_bytes;
  impl->intermediate_bytes = arena.requested_bytes;
  {
    const CompilePhase phase(&CompileProfile::prepare_us);
    impl->prepared = executor.prepare(graph);
  }
  {
    const CompilePhase phase(&CompileProfile::steps_us);
    impl->steps = compile_steps(*impl->prepared);
  }
  if (executor.cuda()) {
    CaptureOptions options{executor.device(), &services.copies, executor.entry_stream()};
    impl->captured = capture_segments(*impl->prepared, impl->steps, options, impl->segment_ops);
  } else {
    impl->segment_ops.assign(impl->steps.size(), nullptr);
  }
  impl->segment_of_step.assign(impl->steps.size(), kNotASegment);
  std::size_t next_segment = 0;
  for (std::size_t i = 0; i < impl->steps.size(); ++i) {
    if (impl->captured && impl->steps[i].segment) impl->segment_of_step[i] = next_segment++;
  }
  for (const auto& op : impl->segment_ops) {
    if (op) impl->hints.device_graph_ops.push_back(op.get());
  }
  for (const auto& step : impl->steps) {
    if (!step.segment) continue;
    ++impl->segments;
    impl->captured_tasks += step.tasks.size();
  }
  const CompilePhase replay_phase(&CompileProfile::replay_us);
  if (impl->segments == 0) {
    // Every step is one task of the graph, as the graph has it (name,
    // priority, edges): the replay is the graph itself, a copy that shares
    // its tasks (copy on write) and, in a slot of its own (the caller may
    // change or resubmit the graph), what was prepared from them.
    impl->replay = graph;
    executor.adopt(impl->replay, impl->prepared);
  } else {
    const auto* self = impl.get();
    append_steps(impl->replay, *impl->prepared, impl->steps,
                 [self](std::size_t step) { return self->segment_ops[step]; });
  }
  // Planned now, on the caller's thread, so that run() only submits.
  if (!impl->replay.empty()) (void)executor.prepare(impl->replay, impl->hints);
  return ExecutableAccess::make(std::move(impl));
}

}  // namespace detail

}  // namespace loom
