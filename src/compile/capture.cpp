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

#include <optional>
#include <string>

namespace loom::detail {

CapturedGraphs::~CapturedGraphs() {
  for (auto exec : execs) {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  }
}

namespace {

// Replays one segment: a single asynchronous launch of its graph.
class SegmentOp final : public Op {
 public:
  SegmentOp(std::shared_ptr<const CapturedGraphs> graphs, std::size_t index,
            std::vector<Tensor> reads, std::vector<Tensor> writes)
      : graphs_(std::move(graphs)),
        index_(index),
        reads_(std::move(reads)),
        writes_(std::move(writes)) {}
  std::string_view name() const noexcept override { return "cuda_graph"; }
  std::vector<Tensor> reads() const override { return reads_; }
  std::vector<Tensor> writes() const override { return writes_; }
  bool has_cpu() const noexcept override { return false; }
  void run_cuda(const ExecutionContext& ctx) const override {
    LOOM_CUDA_CHECK(cudaGraphLaunch(graphs_->execs[index_], cuda_stream(ctx)));
  }

 private:
  std::shared_ptr<const CapturedGraphs> graphs_;
  std::size_t index_;
  std::vector<Tensor> reads_;
  std::vector<Tensor> writes_;
};

// What a task may ask for while it is captured: scratch memory that the
// executable keeps (a replay reuses the addresses captured).
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

 private:
  const CaptureOptions& options_;
  CapturedGraphs& graphs_;
  std::optional<DeviceProperties> properties_;
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

// Enqueues op task t on `lane` while it is being captured; refuses it, by
// name, when it broke the capture.
void capture_task(const Task& task, StreamView lane, const CaptureOptions& options,
                  CapturedGraphs& graphs) {
  const TaskScope scope(task.name);
  CaptureResources resources(options, graphs);
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

// Ends a capture that failed, dropping what it captured.
void abandon_capture(cudaStream_t origin) noexcept {
  cudaGraph_t partial = nullptr;
  (void)cudaStreamEndCapture(origin, &partial);
  if (partial != nullptr) (void)cudaGraphDestroy(partial);
  (void)cudaGetLastError();
}

cudaGraphExec_t capture_segment(const PreparedGraph& prepared, const CompiledStep& step,
                                const CaptureOptions& options, CapturedGraphs& graphs) {
  const auto& plan = prepared.plan;
  const auto& tasks = prepared.tasks();
  // Which tasks of the segment a later one waits for (an event each).
  std::vector<char> in_step(tasks.size(), 0);
  std::vector<char> awaited(tasks.size(), 0);
  for (auto t : step.tasks) in_step[t] = 1;
  for (auto t : step.tasks) {
    for (auto p : plan.tasks[t].waits) {
      if (in_step[p]) awaited[p] = 1;
    }
  }
  // Streams and events are made before the capture begins: nothing but
  // stream-ordered work is asked of the driver while it records.
  Stream origin(options.device, 0);
  std::vector<std::optional<Stream>> lanes(static_cast<std::size_t>(plan.stream_count));
  std::vector<std::optional<Event>> done(tasks.size());
  for (auto t : step.tasks) {
    auto& lane = lanes[static_cast<std::size_t>(plan.tasks[t].stream)];
    if (!lane) lane.emplace(options.device, 0);
    if (awaited[t]) done[t].emplace(options.device);
  }
  std::vector<Event> joins;
  joins.reserve(lanes.size());
  for (const auto& lane : lanes) {
    if (lane) joins.emplace_back(options.device);
  }
  Event fork(options.device);
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(origin.view().native(), cudaStreamCaptureModeRelaxed));
  try {
    fork.record(origin.view());
    for (auto& lane : lanes) {
      if (lane) fork.make_wait(lane->view());
    }
    for (auto t : step.tasks) {
      const StreamView lane = lanes[static_cast<std::size_t>(plan.tasks[t].stream)]->view();
      for (auto p : plan.tasks[t].waits) {
        if (in_step[p]) done[p]->make_wait(lane);
      }
      capture_task(tasks[t], lane, options, graphs);
      if (awaited[t]) done[t]->record(lane);
    }
    std::size_t j = 0;
    for (auto& lane : lanes) {
      if (!lane) continue;
      joins[j].record(lane->view());
      joins[j].make_wait(origin.view());
      ++j;
    }
  } catch (...) {
    abandon_capture(origin.view().native());
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(origin.view().native(), &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw InvalidArgument(
        step.name + " could not be captured into a CUDA graph: " + cudaGetErrorString(ended),
        {"", "", 0, tasks[step.tasks.front()].name});
  }
  std::size_t nodes = 0;
  (void)cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  check_cuda(made, "cudaGraphInstantiate", __FILE__, __LINE__);
  graphs.nodes.push_back(nodes);
  return exec;
}

}  // namespace

std::shared_ptr<CapturedGraphs> capture_segments(const PreparedGraph& prepared,
                                                 const std::vector<CompiledStep>& steps,
                                                 const CaptureOptions& options,
                                                 std::vector<OpPtr>& segment_ops) {
  const DeviceGuard guard(options.device);
  auto graphs = std::make_shared<CapturedGraphs>();
  segment_ops.assign(steps.size(), nullptr);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].segment) continue;
    graphs->execs.push_back(nullptr);
    graphs->execs.back() = capture_segment(prepared, steps[i], options, *graphs);
    std::vector<Tensor> reads;
    std::vector<Tensor> writes;
    step_accesses(prepared, steps[i], reads, writes);
    segment_ops[i] = std::make_shared<SegmentOp>(graphs, graphs->execs.size() - 1, std::move(reads),
                                                 std::move(writes));
  }
  return graphs;
}

}  // namespace loom::detail
