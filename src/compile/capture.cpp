#include "compile/capture.hpp"

#include "core/task_context.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/event.hpp"
#include "cuda/stream.hpp"
#include "transfer/copy_paths.hpp"

#include <loom/cuda_interop.hpp>
#include <loom/device.hpp>
#include <loom/error.hpp>

#include <algorithm>
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

// A launch reported by loom::launch while its task was captured, with the
// nodes it should hang off (checked once the capture is over).
struct ReportedLaunch {
  DescribedLaunch launch;
  NodeSet expected;
  std::uint32_t task = 0;
};

// What a task may ask for while it is captured: scratch memory that the
// executable keeps (a replay reuses the addresses captured), and the
// reports of its loom::launch calls.
class CaptureResources final : public TaskResources {
 public:
  CaptureResources(const CaptureOptions& options, CapturedGraphs& graphs, cudaStream_t lane)
      : options_(options), graphs_(graphs), lane_(lane) {}
  void* workspace(std::size_t bytes) override {
    graphs_.workspaces.push_back(
        options_.copies->workspace(bytes, StreamView(options_.resource_stream)));
    return graphs_.workspaces.back()->base;
  }
  const DeviceProperties& properties() override {
    if (!properties_) properties_ = device_properties(options_.device);
    return *properties_;
  }
  bool records_launches() const noexcept override { return true; }
  void launched(LaunchRecord&& record) override {
    if (!described_) return;
    const NodeSet tails = capture_tails(lane_);
    if (!record.plain || tails.size() != 1) {
      described_ = false;
      return;
    }
    ReportedLaunch r;
    r.launch.node = tails.front();
    r.launch.record = std::move(record);
    r.expected = std::move(expected_);
    r.task = task_;
    reported_.push_back(std::move(r));
    expected_ = tails;
  }

  /// Task `task` begins, hanging off `deps`.
  void begin(std::uint32_t task, const NodeSet& deps) {
    task_ = task;
    expected_ = sorted(deps);
    described_ = true;
    first_report_ = reported_.size();
  }
  /// Task ends with `tails` as the capture's last nodes: described when they
  /// are those of its last reported launch (or its dependencies, for a task
  /// that enqueued nothing). Forgets the reports of a task that is not.
  bool end(const NodeSet& tails) {
    const bool described = described_ && sorted(tails) == expected_;
    if (!described) reported_.resize(first_report_);
    return described;
  }
  std::vector<ReportedLaunch>& reported() noexcept { return reported_; }

 private:
  const CaptureOptions& options_;
  CapturedGraphs& graphs_;
  cudaStream_t lane_;
  std::optional<DeviceProperties> properties_;
  std::uint32_t task_ = 0;
  NodeSet expected_;
  bool described_ = true;
  std::size_t first_report_ = 0;
  std::vector<ReportedLaunch> reported_;
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
                  TaskResources& resources) {
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

// Whether a reported launch's node is a kernel node hanging off exactly what
// it should (checked now that the graph is complete), and its parameters as
// captured. A query the driver refuses (an edge with data, a kernel it cannot
// name) only makes the launch's task opaque: the error is cleared, so that no
// later check reads it as a task's own.
bool read_described_launch(ReportedLaunch& r) {
  cudaGraphNodeType type{};
  std::size_t count = 0;
  if (cudaGraphNodeGetType(r.launch.node, &type) != cudaSuccess ||
      type != cudaGraphNodeTypeKernel ||
      cudaGraphNodeGetDependencies(r.launch.node, nullptr, nullptr, &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  NodeSet deps(count);
  if (count > 0 &&
      cudaGraphNodeGetDependencies(r.launch.node, deps.data(), nullptr, &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  deps.resize(count);
  if (sorted(std::move(deps)) != r.expected) return false;
  if (cudaGraphKernelNodeGetParams(r.launch.node, &r.launch.params) != cudaSuccess ||
      r.launch.params.func == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  r.launch.params.kernelParams = nullptr;  // pointed at the bytes at each update
  r.launch.params.extra = nullptr;
  return true;
}

// Keeps the reported launches of the tasks all of whose launches read as
// described; a task with one that does not is opaque after all.
void keep_described_launches(std::vector<ReportedLaunch>& reported, CapturedSegment& segment,
                             std::vector<char>& described) {
  for (auto& r : reported) {
    if (described[r.task] && !read_described_launch(r)) described[r.task] = 0;
  }
  for (auto& r : reported) {
    if (described[r.task]) segment.launches.push_back(std::move(r.launch));
  }
}

std::unique_ptr<CapturedSegment> capture_segment(const PreparedGraph& prepared,
                                                 const CompiledStep& step,
                                                 const CaptureOptions& options,
                                                 CapturedGraphs& graphs) {
  const auto& tasks = prepared.tasks();
  std::vector<char> in_step(tasks.size(), 0);
  for (auto t : step.tasks) in_step[t] = 1;
  auto segment = std::make_unique<CapturedSegment>();
  // The stream is made before the capture begins: nothing but stream-ordered
  // work is asked of the driver while it records. The capture makes its own
  // graph (not cudaStreamBeginCaptureToGraph into one of ours): what becomes
  // of a graph given to a capture that is then invalidated is not documented
  // (a driver was seen freeing one, a conditional node's body:
  // NVIDIA/cuda-python#2918), so the segment owns a graph only once
  // cudaStreamEndCapture hands one over, as documented. Node handles read
  // during the capture stay valid in the graph it returns.
  Stream lane(options.device, 0);
  const cudaStream_t native = lane.view().native();
  CaptureResources resources(options, graphs, native);
  std::vector<NodeSet> tails(tasks.size());
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(native, cudaStreamCaptureModeRelaxed));
  try {
    for (auto t : step.tasks) {
      NodeSet deps;
      for (auto p : needed_predecessors(tasks, t, in_step)) {
        deps.insert(deps.end(), tails[p].begin(), tails[p].end());
      }
      deps = sorted(std::move(deps));
      LOOM_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(native, deps.data(), nullptr, deps.size(),
                                                          cudaStreamSetCaptureDependencies));
      resources.begin(t, deps);
      capture_task(tasks[t], lane.view(), options, resources);
      tails[t] = capture_tails(native);
      graphs.described[t] = resources.end(tails[t]) ? 1 : 0;
    }
    // Every task's last nodes are leaves of the graph already: the capture
    // ends where it is.
  } catch (...) {
    abandon_capture(native);
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(native, &segment->graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    throw InvalidArgument(
        step.name + " could not be captured into a CUDA graph: " + cudaGetErrorString(ended),
        {"", "", 0, tasks[step.tasks.front()].name});
  }
  keep_described_launches(resources.reported(), *segment, graphs.described);
  LOOM_CUDA_CHECK(cudaGraphGetNodes(segment->graph, nullptr, &segment->nodes));
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
    graphs->segments.push_back(capture_segment(prepared, steps[i], options, *graphs));
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
