#pragma once
/// @file executable.hpp
/// A compiled graph (Runtime::compile): planned once, replayed often.
///
/// On the CUDA backend each maximal group of device tasks that are
/// consecutive in the plan (ops, and copies that are stream-ordered: within
/// a device, or between pinned memory and a device) is built once into a
/// CUDA graph with exactly the graph's dependency edges (transitively
/// reduced where one predecessor already follows another): each task's
/// nodes hang off the last nodes of the tasks it depends on, with no event,
/// fork, join or bookkeeping node, whatever streams an eager run would use.
/// A copy within one device becomes a copy kernel's node (a memcpy node in a
/// graph moves about two thirds of what the eager copy moves); copies
/// between pinned memory and a device memcpy nodes. Each graph is
/// instantiated once; run() launches each group's graph in turn (one
/// cudaGraphLaunch a group), with
/// host tasks, host-to-host copies, staged pageable copies and peer copies
/// between groups, run as in an eager submit. The graph's intermediates (Graph::intermediate) live
/// in one arena allocated at compile time, packed by their lifetimes; scratch
/// memory an op asks for (ExecutionContext::workspace) is given once, at
/// capture, and kept. A replay therefore allocates no pool memory and creates
/// no stream or event. On the CPU backend an executable runs the same plan on
/// the host workers, with the same arena.
///
/// Runs are ordered as eager runs are: by the data they touch. Replays of one
/// executable touch the same memory, so each follows the previous one; a
/// replay and an eager run or copy over the same tensors are ordered likewise.
///
/// Rebinding (run(bindings)): a binding names a tensor the graph was built
/// with (a placeholder) and a caller's tensor of the same dtype, shape and
/// memory space, contiguous. Two ways, chosen per binding:
///  - In place, without a copy, when every task that touches the
///    placeholder's bytes launched all its work through loom::launch with
///    parameters that are pointers, numbers or enums (a kernel_task written
///    as kernel_task.hpp shows), no other bound placeholder overlaps it, and
///    its bound tensor overlaps neither memory the graph uses nor another
///    re-pointed binding's tensor (the graph's edges were drawn for the
///    placeholders' addresses; one tensor bound to an input and an output is
///    therefore copied):
///    each kernel parameter that points into the placeholder is moved to the
///    same place in the bound tensor (cudaGraphExecKernelNodeSetParams) for
///    this run, and back for a later run that does not bind it. The
///    placeholder is neither read nor written by that run.
///  - Otherwise by copies: the executable copies each bound input into its
///    placeholder before the replay, and each bound output out of it after,
///    as tasks of the same run (stream-ordered), so a bound input's
///    placeholder holds the bound values afterwards, and a bound output's
///    placeholder holds the output as well as the bound tensor. A built-in
///    op's kernels, and a launch with a parameter of class type, are opaque
///    to loom (their argument layout and any pointer derived from a tensor
///    are their own business), so the only update that is always right for
///    them is a copy.
/// That run's graph is put together and planned on the calling thread, per
/// call: host work linear in the tasks and bindings, no pool memory, no
/// capture. A binding that would change
/// the graph (another dtype, shape or memory space, a strided view, or a
/// tensor the graph does not use) is refused with InvalidArgument saying so;
/// so is binding an intermediate (its bytes are shared with others over the
/// run: bind tensors made outside the graph).
///
/// @code
/// loom::Graph g;
/// auto x = rt.tensor<float>({n});
/// auto tmp = g.intermediate(loom::DType::f32, {n});  // memory planned by compile
/// g.add(loom::ops::scale_copy(x, tmp, 2.0f));
/// g.add(loom::ops::vector_add(tmp, x, y));
/// loom::Executable exe = rt.compile(g);              // captures, instantiates, plans
/// for (int i = 0; i < 100; ++i) exe.run();           // ordered replays, no allocation
/// exe.run({{x, other_x}, {y, other_y}}).wait();      // the same graph on other tensors
/// @endcode
///
/// Thread-safety: run() may be called from any thread. An executable holds
/// its runtime's executor: destroy it (and let its runs finish) before the
/// runtime.

#include <loom/export.hpp>
#include <loom/future.hpp>
#include <loom/tensor.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loom {

class Executable;
namespace detail {
class CapturedGraphs;
const CapturedGraphs* captured_graphs(const Executable& exe) noexcept;
}  // namespace detail

/// A placeholder the graph was built with, and the tensor a run uses instead.
struct Binding {
  Tensor placeholder;
  Tensor tensor;
};

namespace detail {
/// For each binding, whether a run would re-point it ("re-pointed") or
/// copy it, and why: for tests and diagnostics.
std::vector<std::string> explain_bindings(const Executable& exe,
                                          const std::vector<Binding>& bindings);
}  // namespace detail

class LOOM_API Executable {
 public:
  /// An empty executable; valid() is false.
  Executable() = default;

  bool valid() const noexcept { return impl_ != nullptr; }
  /// Replays the graph; returns at once. @throws InvalidArgument for an
  /// empty executable; after a kernel fault, that fault's CudaError.
  Future run() const;
  /// Replays with `bindings`. @throws InvalidArgument for a binding that
  /// would change the graph, saying what was expected.
  Future run(const std::vector<Binding>& bindings) const;
  /// `times` replays in one run; returns at once. Each task's replay follows
  /// its replay before (a task never overlaps itself), and the rest follows
  /// the data, as across runs.
  /// An executable that is one CUDA graph and nothing else (and holds no
  /// collective) launches it `times` times on one stream: one trip through
  /// the scheduler for all of them. run_n(0) is a run that does nothing. @throws InvalidArgument
  /// for a negative count, or as run().
  Future run_n(int times) const;
  /// Replays until `predicate` returns true, evaluated on a loom worker
  /// before each replay, after the one before has finished (so a predicate
  /// true at once replays nothing). The Future is the loop's: it fails with
  /// the first failing replay's error. Returns at once. @throws
  /// InvalidArgument for an empty predicate, or as run().
  Future run_until(std::function<bool()> predicate) const;

  /// Bytes of the intermediates' arena, and of the intermediates laid side by side.
  std::size_t arena_bytes() const noexcept;
  std::size_t intermediate_bytes() const noexcept;
  /// CUDA graphs captured (0 on the CPU backend), and the tasks in them.
  std::size_t segments() const noexcept;
  std::size_t captured_tasks() const noexcept;

  struct Impl;  ///< loom's own (defined in the library)

 private:
  friend struct ExecutableAccess;
  friend const detail::CapturedGraphs* detail::captured_graphs(const Executable&) noexcept;
  friend std::vector<std::string> detail::explain_bindings(const Executable&,
                                                           const std::vector<Binding>&);
  explicit Executable(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// loom's way to make an Executable.
struct ExecutableAccess {
  static Executable make(std::shared_ptr<const Executable::Impl> impl) {
    return Executable(std::move(impl));
  }
};

}  // namespace loom
