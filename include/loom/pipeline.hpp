#pragma once
/// @file pipeline.hpp
/// A real-time stream of iterations (frames) through compiled stages.
///
/// A pipeline has buffers and stages. A buffer holds one tensor a slot: an
/// input is filled by the producer in host memory (pinned where there is a
/// GPU) and uploaded before the first stage; a plain buffer lives in the
/// runtime's default memory between stages; an output is computed there and
/// downloaded into host memory for the consumer. A stage is a graph, built
/// once per slot by a function of that slot's tensors and compiled
/// (Runtime::compile): a frame costs a replay a stage, an upload and a
/// download, and allocates nothing.
///
/// Frame f uses slot f % slots. Its upload, stages and download are submitted
/// in order, so loom's ordering by data puts each after what it reads and
/// frames in different slots overlap (frame f+1 uploads while frame f
/// computes). A stage may read a buffer as it was k frames ago
/// (StageSlot::delayed, 1 <= k < slots): frame f then reads slot (f - k) %
/// slots, written by frame f - k; before frame k every buffer reads as zeros.
///
/// Ownership. The producer fills the pinned tensors of an InputFrame
/// (acquire) and hands it back (push), or hands its own host tensors (push of
/// tensors: the pipeline keeps them until their upload is done, and uploads
/// from them directly). The consumer receives Frames in frame order (pop); a
/// Frame's outputs stay valid and untouched until the Frame is dropped, which
/// gives the slot back; Frame::take keeps an output's memory for good (the
/// pipeline puts a fresh tensor in that slot).
///
/// Back-pressure. A frame holds its slot from acquire until its Frame is
/// dropped, so at most `slots` frames are in flight or waiting for the
/// consumer. When the producer needs a slot whose frame the consumer has not
/// taken yet, Overflow::block makes it wait (never a lost, reordered or
/// duplicated frame), and Overflow::drop_oldest drops that frame (the oldest
/// one: it is counted, and pop skips it) unless the consumer is already
/// waiting for it. Either way the producer waits for the GPU to finish a
/// frame, and for a Frame the consumer holds. So a single thread that both
/// produces and consumes must pop before it acquires more than `slots`
/// frames (Overflow::block), and a consumer must not hold `slots` Frames
/// while it waits in pop.
///
/// Errors. When a stage fails on frame f, every frame before f is still
/// delivered, frame f and every later frame are not (never half of one), and
/// pop, acquire and push then throw a PipelineError naming the pipeline, the
/// stage and the frame, with the original error as its cause.
///
/// @code
/// loom::PipelineBuilder b(rt, {.name = "video", .slots = 3});
/// auto rgb  = b.input("rgb", loom::DType::u8, {h, w, 3});
/// auto gray = b.buffer("gray", loom::DType::f32, {h, w});
/// auto mean = b.output("mean", loom::DType::f32, {1});
/// b.stage("gray", [&](loom::Graph& g, const loom::StageSlot& s) {
///   g.add(loom::ops::rgb_to_gray(s[rgb], s[gray]));
/// });
/// b.stage("mean", [&](loom::Graph& g, const loom::StageSlot& s) {
///   g.add(loom::ops::sum(s[gray], s[mean]));
/// });
/// loom::Pipeline p = b.build();                 // compiles every stage for every slot
/// std::thread consumer([&] { while (auto f = p.pop()) use(f->output(mean)); });
/// for (int i = 0; i < 300; ++i) {
///   loom::InputFrame in = p.acquire();          // waits for a free slot
///   draw(in.input(rgb));                         // pinned host memory
///   p.push(std::move(in));
/// }
/// p.close();                                     // pop returns nullopt after the last frame
/// consumer.join();
/// @endcode
///
/// Thread-safety: one producer and one consumer thread (or the same one);
/// stats() from any thread. The producer and the consumer may be host tasks
/// (or continuations) of the runtime itself: while acquire, push or pop
/// waits there, or ~Pipeline waits for the frames in flight, another worker
/// takes the waiting one's place, as in Future::wait, so one worker is
/// enough. Inside an op's run_cuda (loom's scheduling thread) they throw
/// InvalidArgument instead of waiting. A pipeline, its frames and input frames must not
/// outlive the runtime.

#include <loom/dtype.hpp>
#include <loom/error.hpp>
#include <loom/export.hpp>
#include <loom/graph.hpp>
#include <loom/tensor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom {

class Runtime;
class Pipeline;

/// What the producer meets when the slot it needs holds a frame the consumer
/// has not taken yet.
enum class Overflow {
  block,        ///< wait for the consumer: every frame is delivered, in order
  drop_oldest,  ///< drop that frame (the oldest undelivered one) and count it
};

struct PipelineOptions {
  std::string name = "pipeline";  ///< names the pipeline in errors
  std::size_t slots = 3;  ///< frames in flight or waiting (>= 2): 2 double-, 3 triple-buffers
  Overflow overflow = Overflow::block;
  std::size_t latency_history = std::size_t{1} << 16;  ///< frames the latency statistics keep
};

/// A buffer of a pipeline (a handle PipelineBuilder gives out). It belongs
/// to its builder and the pipeline built from it: any other refuses it.
struct PipelineBuffer {
  std::uint32_t index = ~std::uint32_t{0};
  std::uint64_t pipeline = 0;  ///< which builder made it (0: none)
};

/// A stage failed on a frame. cause() is the original error.
class LOOM_API PipelineError : public Error {
 public:
  /// what() reads "loom: task 't': pipeline 'p': stage 's' failed on frame
  /// f: <the cause's text without its own "loom: task 't': ">".
  PipelineError(const std::string& pipeline, std::string stage, std::uint64_t frame,
                std::exception_ptr cause);
  std::exception_ptr with_task(std::string_view task) const override {
    return named_copy(*this, task);
  }
  const std::string& stage() const noexcept { return stage_; }
  std::uint64_t frame() const noexcept { return frame_; }
  std::exception_ptr cause() const noexcept { return cause_; }

 private:
  std::string stage_;
  std::uint64_t frame_;
  std::exception_ptr cause_;
};

/// One slot's tensors, as a stage's build function sees them.
class LOOM_API StageSlot {
 public:
  /// The slot, 0 <= slot() < slots.
  std::size_t slot() const noexcept { return slot_; }
  /// This frame's tensor of `buffer` (for inputs and outputs, the copy in
  /// the default memory). @throws InvalidArgument for a foreign handle.
  Tensor operator[](PipelineBuffer buffer) const;
  /// `buffer` as frame f - k left it. @throws InvalidArgument unless 1 <= k < slots.
  Tensor delayed(PipelineBuffer buffer, std::size_t k) const;

  struct Buffers;  ///< loom's own

 private:
  friend class PipelineBuilder;
  StageSlot(const Buffers& buffers, std::size_t slot) : buffers_(&buffers), slot_(slot) {}
  const Buffers* buffers_;
  std::size_t slot_;
};

/// A stage: adds its tasks to `graph` for the slot's tensors.
using StageBuild = std::function<void(Graph& graph, const StageSlot& slot)>;

class LOOM_API PipelineBuilder {
 public:
  explicit PipelineBuilder(Runtime& runtime, PipelineOptions options = {});
  ~PipelineBuilder();
  PipelineBuilder(const PipelineBuilder&) = delete;
  PipelineBuilder& operator=(const PipelineBuilder&) = delete;

  /// A frame's input: host memory the producer fills, uploaded each frame.
  PipelineBuffer input(std::string name, DType dtype, const Shape& shape);
  /// A buffer between stages, in the default memory.
  PipelineBuffer buffer(std::string name, DType dtype, const Shape& shape);
  /// A frame's result: computed in the default memory, downloaded for the consumer.
  PipelineBuffer output(std::string name, DType dtype, const Shape& shape);
  /// Appends a stage; stages run in the order they are added.
  PipelineBuilder& stage(std::string name, StageBuild build);

  /// Allocates every slot (zeroed), builds and compiles every stage for
  /// every slot. The builder is spent afterwards. @throws InvalidArgument
  /// naming the stage or buffer at fault (no stages, slots < 2, a repeated
  /// or empty name, what compile refuses).
  Pipeline build();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A slot for the producer to fill; push() hands it back. Dropping it
/// unpushed gives the slot back.
class LOOM_API InputFrame {
 public:
  InputFrame() = default;
  InputFrame(InputFrame&&) noexcept;
  InputFrame& operator=(InputFrame&&) noexcept;
  ~InputFrame();

  /// The frame's number (0, 1, 2, ... in push order).
  std::uint64_t number() const noexcept { return number_; }
  /// The host tensor of input `buffer` to fill. @throws InvalidArgument for a
  /// buffer that is not an input, or a handle of another pipeline.
  const Tensor& input(PipelineBuffer buffer) const;

  struct State;  ///< loom's own

 private:
  friend class Pipeline;
  InputFrame(std::shared_ptr<State> state, std::size_t slot, std::uint64_t number)
      : state_(std::move(state)), slot_(slot), number_(number) {}
  std::shared_ptr<State> state_;
  std::size_t slot_ = 0;
  std::uint64_t number_ = 0;
};

/// A finished frame for the consumer. Dropping it gives its slot back.
class LOOM_API Frame {
 public:
  Frame(Frame&&) noexcept;
  Frame& operator=(Frame&&) noexcept;
  ~Frame();

  std::uint64_t number() const noexcept { return number_; }
  /// From push to the end of its download, in microseconds.
  double latency_us() const noexcept { return latency_us_; }
  /// The host tensor of output `buffer`. @throws InvalidArgument for a
  /// buffer that is not an output, one taken already, or a handle of
  /// another pipeline.
  const Tensor& output(PipelineBuffer buffer) const;
  /// Keeps output `buffer`'s memory: the caller owns the tensor, and the
  /// pipeline gives the slot a fresh one. @throws as output().
  Tensor take(PipelineBuffer buffer);

 private:
  friend class Pipeline;
  Frame(std::shared_ptr<InputFrame::State> state, std::size_t slot, std::uint64_t number,
        double latency_us);
  std::shared_ptr<InputFrame::State> state_;
  std::size_t slot_ = 0;
  std::uint64_t number_ = 0;
  double latency_us_ = 0;
  std::vector<bool> taken_;  // by output position
};

/// Counters and latency percentiles (push to the end of the download).
struct PipelineStats {
  std::uint64_t pushed = 0;
  std::uint64_t completed = 0;  ///< frames whose download finished (delivered or not)
  std::uint64_t delivered = 0;  ///< frames pop returned
  std::uint64_t dropped = 0;    ///< frames Overflow::drop_oldest dropped
  double latency_p50_us = 0, latency_p99_us = 0, latency_max_us = 0, latency_mean_us = 0;
  /// Completed frames a second, from the first push to the last completion.
  double frames_per_second = 0;
};

class LOOM_API Pipeline {
 public:
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  /// Closes the pipeline and waits for the frames in flight (not for the consumer).
  ~Pipeline();

  const std::string& name() const;
  std::size_t slots() const;

  /// The next frame's input slot; waits while it is busy (see Overflow).
  /// @throws PipelineError after a failure; InvalidArgument after close(), or
  /// while another InputFrame is out.
  InputFrame acquire();
  /// Starts the frame; returns its number. @throws as acquire (after close(),
  /// the frame is not pushed and its slot is given back); InvalidArgument
  /// for a frame of another pipeline or one pushed already.
  std::uint64_t push(InputFrame&& frame);
  /// Acquires a slot and uploads the caller's host tensors, in the order the
  /// inputs were declared (dtype and shape as declared, any host memory).
  /// The pipeline keeps them alive until their upload is done; the caller
  /// must not write them before the frame is popped. This path puts an
  /// upload graph together (and plans it) every push; acquire() and push()
  /// of an InputFrame allocate nothing.
  std::uint64_t push(std::vector<Tensor> inputs);

  /// The next frame in order; waits for it. nullopt once closed and every
  /// pushed frame was delivered or dropped. @throws PipelineError when the
  /// next frame failed (or a frame before it that was never delivered).
  std::optional<Frame> pop();
  /// As pop, but returns nullopt at once when the next frame is not ready.
  std::optional<Frame> try_pop();
  /// No more frames: pop returns nullopt after the last one.
  void close();

  PipelineStats stats() const;
  /// Latency of each completed frame still in the history, by frame number.
  std::vector<double> latencies_us() const;

 private:
  friend class PipelineBuilder;
  explicit Pipeline(std::shared_ptr<InputFrame::State> state);
  std::shared_ptr<InputFrame::State> state_;
};

}  // namespace loom
