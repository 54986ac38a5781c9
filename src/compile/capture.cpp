#include "compile/capture.hpp"

#include "common/launch.hpp"
#include "compile/compile_profile.hpp"

#include "core/task_context.hpp"
#include "core/task_kind.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "transfer/copy_paths.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

namespace loom::detail {

CapturedSegment::~CapturedSegment() {
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
}

CapturedGraphs::~CapturedGraphs() = default;

namespace {

void set_launch_bytes(const CapturedSegment& segment, std::size_t index,
                      const std::vector<unsigned char>& bytes) {
  const DescribedLaunch& launch = segment.launches[index];
  std::vector<void*> pointers;
  pointers.reserve(launch.record.params.size());
  for (const auto& p : launch.record.params) {
    pointers.push_back(const_cast<unsigned char*>(bytes.data() + p.offset));
  }
  cudaKernelNodeParams params = launch.params;
  params.kernelParams = pointers.empty() ? nullptr : pointers.data();
  params.extra = nullptr;
  LOOM_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(segment.exec, launch.node, &params));
}

}  // namespace

void CapturedSegment::launch(cudaStream_t stream,
                             const std::shared_ptr<const Repointing>& repointing) {
  if (applied != repointing) {
    // Back to the placeholders' pointers where the last launch differed,
    // then this launch's; an update never touches a launch in flight.
    if (applied) {
      for (const auto& change : applied->changes) {
        set_launch_bytes(*this, change.launch, launches[change.launch].record.bytes);
      }
    }
    // Recorded before the nodes change: should an update fail part way, the
    // next launch still puts back every node this one may have moved.
    applied = repointing;
    if (repointing) {
      for (const auto& change : repointing->changes) {
        set_launch_bytes(*this, change.launch, change.bytes);
      }
    }
  }
  LOOM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
}

namespace {

// Replays one segment: a single asynchronous launch of its graph (or
// `times` of them), with the pointers of `repointing` (null: as compiled).
class SegmentOp final : public Op {
 public:
  SegmentOp(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
            std::shared_ptr<const Repointing> repointing, int times, std::vector<Tensor> reads,
            std::vector<Tensor> writes)
      : graphs_(std::move(graphs)),
        index_(index),
        repointing_(std::move(repointing)),
        times_(times),
        reads_(std::move(reads)),
        writes_(std::move(writes)) {}
  std::string_view name() const noexcept override { return "cuda_graph"; }
  std::vector<Tensor> reads() const override { return reads_; }
  std::vector<Tensor> writes() const override { return writes_; }
  bool has_cpu() const noexcept override { return false; }
  void run_cuda(const ExecutionContext& ctx) const override {
    CapturedSegment& segment = *graphs_->segments[index_];
    for (int i = 0; i < times_; ++i) segment.launch(cuda_stream(ctx), repointing_);
  }
  // A segment holding collectives runs where collectives do: on the
  // communication stream, in submission order, so that its collectives keep
  // one order with the eager ones on every rank. It is watched as they are,
  // but which of its collectives is running cannot be seen from the host:
  // each is asked whether it gives up with the time since the graph's start
  // (run_n does not give such a segment more than one launch), and every one
  // past its timeout aborts its communicator, so that the graph's work ends.
  const void* communicator() const noexcept override {
    const auto& collectives = graphs_->segments[index_]->collectives;
    return collectives.empty() ? nullptr : collectives.front().op->communicator();
  }
  std::string overdue(std::chrono::nanoseconds waited) const override {
    std::string why;
    for (const auto& c : graphs_->segments[index_]->collectives) {
      const std::string its = c.op->overdue(waited);
      if (its.empty()) continue;
      why += (why.empty() ? "" : "; ") + ("collective " + c.task + ": " + its);
    }
    if (why.empty()) return why;
    return "inside a compiled graph (its timeout counts from the graph's start): " + why;
  }

 private:
  std::shared_ptr<const CapturedGraphs> graphs_;
  std::size_t index_;
  std::shared_ptr<const Repointing> repointing_;
  int times_;
  std::vector<Tensor> reads_;
  std::vector<Tensor> writes_;
};

using NodeSet = std::vector<cudaGraphNode_t>;

NodeSet sorted(NodeSet nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

// The capture's current dependency set on `lane`: the last nodes so far.
NodeSet capture_tails(cudaStream_t lane) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  std::size_t count = 0;
  LOOM_CUDA_CHECK(
      cudaStreamGetCaptureInfo(lane, &status, nullptr, nullptr, &deps, nullptr, &count));
  // Only an active capture's dependencies are valid (an invalidated one is
  // refused by name once its task returns).
  if (status != cudaStreamCaptureStatusActive || count == 0) return {};
  return NodeSet(deps, deps + count);
}

// What a task may ask for while a segment is built: scratch memory that
// the executable keeps (a replay reuses the addresses given at compile), and,
// while the task is described, its loom::launch calls.
class CaptureResources final : public TaskResources {
 public:
  CaptureResources(const CaptureOptions& options, CapturedGraphs& graphs)
      : options_(options), graphs_(graphs) {}
  void* workspace(std::size_t bytes) override {
    graphs_.workspaces.push_back(
        options_.copies->workspace(bytes, StreamView(options_.resource_stream)));
    return graphs_.workspaces.back()->base;
  }
  const DeviceProperties& properties() override {
    if (!properties_) properties_ = device_properties(options_.device);
    return *properties_;
  }
  bool describes_launches() const noexcept override { return describing_; }
  void describe_launch(LaunchRecord&& record) override { described_.push_back(std::move(record)); }

  /// Launches are described from now on (true) or made (false).
  void describe(bool on) {
    describing_ = on;
    if (on) described_.clear();
  }
  std::vector<LaunchRecord>& described() noexcept { return described_; }

 private:
  const CaptureOptions& options_;
  CapturedGraphs& graphs_;
  std::optional<DeviceProperties> properties_;
  bool describing_ = false;
  std::vector<LaunchRecord> described_;
};

bool is_capture_error(cudaError_t rc) {
  switch (rc) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread: return true;
    default: return false;
  }
}

[[noreturn]] void refuse_capture(const Task& task, const std::string& why) {
  throw InvalidArgument(std::string(to_string(task.kind)) + " " + task.name +
                            " cannot be captured into a CUDA graph: " + why +
                            " (a compiled op must only enqueue stream-ordered work: see "
                            "Op::capturable)",
                        {"", "", 0, task.name});
}

// Enqueues task `task` on `lane` while it is being captured; refuses it, by
// name, when it broke the capture.
void capture_task(const Task& task, StreamView lane, const CaptureOptions& options,
                  TaskResources& resources, bool check_status = true) {
  const TaskScope scope(task.name);
  const ExecutionContext ctx(options.device, lane.native(), &resources);
  try {
    switch (task.kind) {
      case TaskKind::op: task.op->run_cuda(ctx); break;
      case TaskKind::copy: enqueue_captured_copy(task.copy_src, task.copy_dst, lane); break;
      default: throw InternalError("only ops and stream copies are captured: " + task.name);
    }
  } catch (const CudaError& e) {
    if (is_capture_error(static_cast<cudaError_t>(e.code()))) refuse_capture(task, e.message());
    throw;
  } catch (const Error&) {
    std::rethrow_exception(naming_task(std::current_exception(), task.name));
  }
  const cudaError_t rc = cudaGetLastError();
  if (is_capture_error(rc)) refuse_capture(task, cudaGetErrorString(rc));
  if (rc != cudaSuccess) {
    const std::string what = std::string(to_string(task.kind)) + " '" + task.name + "' capture";
    throw_cuda_error(rc, what.c_str(), __FILE__, __LINE__);
  }
  if (!check_status) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LOOM_CUDA_CHECK(cudaStreamIsCapturing(lane.native(), &status));
  if (status != cudaStreamCaptureStatusActive) {
    refuse_capture(task, "it invalidated the capture (a synchronizing or unsupported call)");
  }
}

// Ends a capture that failed, dropping what it captured (an invalidated
// capture's graph is the driver's to free: it returns none).
void abandon_capture(cudaStream_t origin) noexcept {
  cudaGraph_t partial = nullptr;
  (void)cudaStreamEndCapture(origin, &partial);
  if (partial != nullptr) (void)cudaGraphDestroy(partial);
  (void)cudaGetLastError();
}

// The predecessors of task t within the segment that the graph needs: one
// that is also a predecessor of another predecessor is implied by it.
std::vector<std::uint32_t> needed_predecessors(const std::vector<Task>& tasks, std::uint32_t t,
                                               const std::vector<char>& in_step) {
  std::vector<std::uint32_t> preds;
  for (auto p : tasks[t].predecessors) {
    if (in_step[p]) preds.push_back(p);
  }
  if (preds.size() < 2) return preds;
  std::vector<std::uint32_t> needed;
  for (auto p : preds) {
    const bool implied = std::any_of(preds.begin(), preds.end(), [&](std::uint32_t q) {
      const auto& of_q = tasks[q].predecessors;  // sorted
      return q != p && std::binary_search(of_q.begin(), of_q.end(), p);
    });
    if (!implied) needed.push_back(p);
  }
  return needed;
}

// The nodes of `graph` so far.
std::size_t node_count(cudaGraph_t graph) {
  std::size_t count = 0;
  LOOM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  return count;
}

// Runs task `task` on `stream` with its launches described (the stream is
// a probe being captured into `probe_graph`, so that other work shows): the
// launches, when that is all the task did, else nothing. Other work is any
// node the task added to the probe's graph, not only one the probe's
// dependencies end at: work forked to another stream and never joined back
// lands in the graph too (captured on the lane instead, it is refused there).
// The launches stay in `resources` (its described(), whose capacity the next
// task reuses) until the next task is described.
std::vector<LaunchRecord>* describe_task(const Task& task, cudaStream_t stream,
                                         cudaGraph_t probe_graph, const CaptureOptions& options,
                                         CaptureResources& resources) {
  LOOM_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, nullptr, nullptr, 0,
                                                      cudaStreamSetCaptureDependencies));
  const std::size_t nodes_before = node_count(probe_graph);
  resources.describe(true);
  try {
    const ThreadLaunchDescriber built_in_launches(&resources);
    capture_task(task, StreamView(stream), options, resources);
  } catch (...) {
    resources.describe(false);
    throw;
  }
  resources.describe(false);
  const bool other_work = node_count(probe_graph) != nodes_before;
  auto& records = resources.described();
  const bool plain =
      std::all_of(records.begin(), records.end(), [](const LaunchRecord& r) { return r.plain; });
  if (other_work || !plain) return nullptr;
  return &records;
}

// Runs task `task` on the probe `stream` with its launches described,
// trusting that it did nothing else: its launches when they are all plain,
// else nothing. Whether some task did other work is asked once a segment
// (probe_is_clean), as is whether one broke the probe's capture, which saves
// three driver calls a task; a segment where one did is built again
// carefully, which names the task. The launches stay in `resources`, as
// describe_task's do.
std::vector<LaunchRecord>* describe_task_quickly(const Task& task, cudaStream_t stream,
                                                 const CaptureOptions& options,
                                                 CaptureResources& resources) {
  resources.describe(true);
  try {
    const ThreadLaunchDescriber built_in_launches(&resources);
    capture_task(task, StreamView(stream), options, resources, false);
  } catch (...) {
    resources.describe(false);
    throw;
  }
  resources.describe(false);
  auto& records = resources.described();
  const bool plain =
      std::all_of(records.begin(), records.end(), [](const LaunchRecord& r) { return r.plain; });
  if (!plain) return nullptr;
  return &records;
}

// Whether a capture is still active on `stream` (a task may have broken it
// and ignored the error).
bool still_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t rc = cudaStreamIsCapturing(stream, &status);
  if (rc != cudaSuccess || status != cudaStreamCaptureStatusActive) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// Whether the probe is still capturing and holds no work: no task described
// quickly did more than loom::launch.
bool probe_is_clean(cudaStream_t probe, cudaGraph_t probe_graph) {
  return still_capturing(probe) && node_count(probe_graph) == 0;
}

// Thrown inside capture_segment when a task described quickly did other
// work: the segment is captured again, task by task.
struct CaptureCarefully {};

// Adds `records` to `graph` as kernel nodes in a row after `deps` (moved
// into the segment); returns the last one (or `deps` when there is none).
// `args`: scratch for the parameters' addresses, reused task after task.
NodeSet add_described_launches(const Task& task, cudaGraph_t graph, NodeSet deps,
                               std::vector<LaunchRecord>& records, CapturedSegment& segment,
                               std::vector<void*>& args) {
  const TaskScope scope(task.name);  // a refused node names the task
  for (auto& record : records) {
    args.clear();
    for (const auto& p : record.params) args.push_back(record.bytes.data() + p.offset);
    cudaKernelNodeParams params{};
    params.func = const_cast<void*>(record.function);
    params.gridDim = dim3(record.grid[0], record.grid[1], record.grid[2]);
    params.blockDim = dim3(record.block[0], record.block[1], record.block[2]);
    params.sharedMemBytes = static_cast<unsigned>(record.shared_bytes);
    params.kernelParams = args.empty() ? nullptr : args.data();
    params.extra = nullptr;
    cudaGraphNode_t node = nullptr;
    const cudaError_t rc = cudaGraphAddKernelNode(&node, graph, deps.data(), deps.size(), &params);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      throw_launch_error(rc, "cudaGraphAddKernelNode (a described launch)", __FILE__, __LINE__);
    }
    params.kernelParams = nullptr;  // pointed at the bytes at each update
    segment.launches.push_back(DescribedLaunch{node, params, std::move(record)});
    deps.assign(1, node);
  }
  return deps;
}

std::unique_ptr<CapturedSegment> capture_segment(const PreparedGraph& prepared,
                                                 const CompiledStep& step,
                                                 const CaptureOptions& options,
                                                 CapturedGraphs& graphs, bool carefully) {
  const auto& tasks = prepared.tasks();
  const auto described = [&](std::uint32_t t) {
    return tasks[t].kind == TaskKind::op && tasks[t].op->launches_through_loom();
  };
  std::vector<char> in_step(tasks.size(), 0);
  bool any_described = false;
  for (auto t : step.tasks) {
    in_step[t] = 1;
    any_described = any_described || described(t);
  }
  auto segment = std::make_unique<CapturedSegment>();
  // Streams are made before the captures begin: nothing but stream-ordered
  // work is asked of the driver while they record. The capture makes its
  // own graph (not cudaStreamBeginCaptureToGraph into one of ours): what
  // becomes of a graph given to a capture that is then invalidated is not
  // documented (a driver was seen freeing one, a conditional node's body:
  // NVIDIA/cuda-python#2918), so the segment owns a graph only once
  // cudaStreamEndCapture hands one over. Meanwhile the capture's graph takes
  // nodes added directly (cudaStreamGetCaptureInfo: every operation but
  // destroying it and removing nodes is allowed during the capture); node
  // handles stay valid in the graph it returns.
  Stream lane(options.device, 0);
  std::optional<Stream> probe;  // where described tasks run: other work shows there
  if (any_described) probe.emplace(options.device, 0);
  const cudaStream_t native = lane.view().native();
  CaptureResources resources(options, graphs);
  std::vector<NodeSet> tails(tasks.size());
  std::vector<void*> argument_scratch;
  segment->launches.reserve(step.tasks.size());
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(native, cudaStreamCaptureModeRelaxed));
  try {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t building = nullptr;
    LOOM_CUDA_CHECK(
        cudaStreamGetCaptureInfo(native, &status, nullptr, &building, nullptr, nullptr, nullptr));
    cudaGraph_t probe_graph = nullptr;
    if (probe) {
      LOOM_CUDA_CHECK(cudaStreamBeginCapture(probe->view().native(), cudaStreamCaptureModeRelaxed));
      LOOM_CUDA_CHECK(cudaStreamGetCaptureInfo(probe->view().native(), &status, nullptr,
                                               &probe_graph, nullptr, nullptr, nullptr));
    }
    for (auto t : step.tasks) {
      NodeSet deps;
      for (auto p : needed_predecessors(tasks, t, in_step)) {
        deps.insert(deps.end(), tails[p].begin(), tails[p].end());
      }
      deps = sorted(std::move(deps));
      const Task& task = tasks[t];
      if (is_collective(task)) segment->collectives.push_back({task.op, task.name});
      if (described(t)) {
        std::vector<LaunchRecord>* records = nullptr;
        std::optional<CompilePhase> describing(std::in_place, &CompileProfile::describe_us);
        if (carefully) {
          records = describe_task(task, probe->view().native(), probe_graph, options, resources);
        } else {
          // A task that broke the probe's capture and ignored it is found
          // when a later task's calls fail, or at the segment's end
          // (probe_is_clean): the careful pass names it.
          try {
            records = describe_task_quickly(task, probe->view().native(), options, resources);
          } catch (...) {
            if (!still_capturing(probe->view().native())) throw CaptureCarefully{};
            throw;
          }
        }
        describing.reset();
        if (records) {
          const CompilePhase adding(&CompileProfile::add_nodes_us);
          tails[t] = add_described_launches(task, building, std::move(deps), *records, *segment,
                                            argument_scratch);
          graphs.described[t] = 1;
          continue;
        }
        // It did more than loom::launch: captured as it is, below.
      }
      LOOM_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(native, deps.data(), nullptr, deps.size(),
                                                          cudaStreamSetCaptureDependencies));
      capture_task(task, lane.view(), options, resources);
      tails[t] = capture_tails(native);
    }
    const CompilePhase ending(&CompileProfile::end_capture_us);
    if (probe && !carefully && !probe_is_clean(probe->view().native(), probe_graph)) {
      throw CaptureCarefully{};
    }
    // Every task's last nodes are leaves of the graph already: the capture
    // ends where it is. The probe's graph holds only work that was captured
    // again on the lane.
    if (probe) abandon_capture(probe->view().native());
  } catch (...) {
    if (probe) abandon_capture(probe->view().native());
    abandon_capture(native);
    throw;
  }
  std::optional<CompilePhase> ending(std::in_place, &CompileProfile::end_capture_us);
  const cudaError_t ended = cudaStreamEndCapture(native, &segment->graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    throw InvalidArgument(
        step.name + " could not be captured into a CUDA graph: " + cudaGetErrorString(ended),
        {"", "", 0, tasks[step.tasks.front()].name});
  }
  LOOM_CUDA_CHECK(cudaGraphGetNodes(segment->graph, nullptr, &segment->nodes));
  ending.reset();
  const CompilePhase instantiating(&CompileProfile::instantiate_us);
  check_cuda(cudaGraphInstantiate(&segment->exec, segment->graph, 0), "cudaGraphInstantiate",
             __FILE__, __LINE__);
  return segment;
}

}  // namespace

std::shared_ptr<CapturedGraphs> capture_segments(const PreparedGraph& prepared,
                                                 const std::vector<CompiledStep>& steps,
                                                 const CaptureOptions& options,
                                                 std::vector<OpPtr>& segment_ops) {
  const DeviceGuard guard(options.device);
  auto graphs = std::make_shared<CapturedGraphs>();
  graphs->described.assign(prepared.tasks().size(), 0);
  segment_ops.assign(steps.size(), nullptr);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].segment) continue;
    std::unique_ptr<CapturedSegment> segment;
    const std::size_t workspaces = graphs->workspaces.size();
    try {
      segment = capture_segment(prepared, steps[i], options, *graphs, false);
    } catch (const CaptureCarefully&) {
      // What the abandoned pass asked for goes back; the careful pass asks again.
      graphs->workspaces.erase(graphs->workspaces.begin() + static_cast<std::ptrdiff_t>(workspaces),
                               graphs->workspaces.end());
      for (auto t : steps[i].tasks) graphs->described[t] = 0;
      segment = capture_segment(prepared, steps[i], options, *graphs, true);
    }
    graphs->segments.push_back(std::move(segment));
    const CompilePhase making(&CompileProfile::segment_ops_us);
    std::vector<Tensor> reads;
    std::vector<Tensor> writes;
    step_accesses(prepared, steps[i], reads, writes);
    segment_ops[i] = std::make_shared<SegmentOp>(graphs, graphs->segments.size() - 1, nullptr, 1,
                                                 std::move(reads), std::move(writes));
  }
  return graphs;
}

OpPtr repointed_segment_op(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
                           std::shared_ptr<const Repointing> repointing, std::vector<Tensor> reads,
                           std::vector<Tensor> writes) {
  return std::make_shared<SegmentOp>(std::move(graphs), index, std::move(repointing), 1,
                                     std::move(reads), std::move(writes));
}

OpPtr repeated_segment_op(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
                          int times, std::vector<Tensor> reads, std::vector<Tensor> writes) {
  return std::make_shared<SegmentOp>(std::move(graphs), index, nullptr, times, std::move(reads),
                                     std::move(writes));
}

}  // namespace loom::detail
