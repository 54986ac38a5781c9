// The pipeline (include/loom/pipeline.hpp) over the public API, and core's
// helping wait (a producer or consumer that is a host task blocks as in
// Future::wait: another worker takes its place). A frame is an upload
// graph, one replay a stage and a download graph, submitted in frame order; loom's ordering by data
// does the rest. One mutex guards the slots; continuations (on host workers, never the scheduling
// thread) take it briefly to finish a frame.

#include <loom/executable.hpp>
#include <loom/future.hpp>
#include <loom/pipeline.hpp>
#include <loom/runtime.hpp>

#include "core/log.hpp"
#include "core/thread_role.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <string_view>
#include <utility>

namespace loom {

namespace {

using Clock = std::chrono::steady_clock;

enum class Role { input, between, output };

struct BufferDecl {
  std::string name;
  DType dtype;
  Shape shape;
  Role role;
  std::size_t position;  // among the buffers of its role
};

struct StageDecl {
  std::string name;
  StageBuild build;
};

// Where a slot stands. A slot is `filling` from acquire to push, `in_flight`
// until its last run ends, `complete` until pop, `delivered` until the Frame
// is dropped.
enum class Phase { free, filling, in_flight, complete, delivered };

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// Each builder's handles carry its number: another pipeline refuses them.
std::atomic<std::uint64_t> pipeline_serials{0};

// A cause's text inside another error: without its "loom: ", and without the
// task's name when the outer error names that task already.
std::string nested_text(const std::exception& cause, bool outer_names_task) {
  std::string_view what = cause.what();
  const auto drop = [&](std::string_view prefix) {
    if (what.substr(0, prefix.size()) == prefix) what.remove_prefix(prefix.size());
  };
  if (const auto* e = dynamic_cast<const Error*>(&cause)) {
    drop("loom: ");
    if (outer_names_task && !e->task().empty()) drop("task '" + e->task() + "': ");
  }
  return std::string(what);
}

}  // namespace

struct StageSlot::Buffers {
  std::vector<BufferDecl> decls;
  std::vector<std::vector<Tensor>> device;  // [buffer][slot], in the default memory
  std::size_t slots = 0;
  std::string pipeline;
  std::uint64_t id = 0;  // the builder's number, in every handle it made

  const BufferDecl& decl(PipelineBuffer b) const {
    if (b.pipeline == 0)
      throw InvalidArgument("pipeline " + in_quotes(pipeline) +
                            ": an empty buffer handle (use the ones this pipeline's builder "
                            "gave out)");
    if (b.pipeline != id || b.index >= decls.size())
      throw InvalidArgument("pipeline " + in_quotes(pipeline) + ": buffer handle " +
                            std::to_string(b.index) +
                            " belongs to another pipeline (use the ones this pipeline's builder "
                            "gave out)");
    return decls[b.index];
  }
};

Tensor StageSlot::operator[](PipelineBuffer buffer) const {
  buffers_->decl(buffer);
  return buffers_->device[buffer.index][slot_];
}

Tensor StageSlot::delayed(PipelineBuffer buffer, std::size_t k) const {
  const BufferDecl& d = buffers_->decl(buffer);
  if (k < 1 || k >= buffers_->slots)
    throw InvalidArgument("pipeline " + in_quotes(buffers_->pipeline) + ": buffer " +
                          in_quotes(d.name) + " delayed by " + std::to_string(k) +
                          " frames; a delay must be at least 1 and under the slot count (" +
                          std::to_string(buffers_->slots) + ")");
  const std::size_t n = buffers_->slots;
  return buffers_->device[buffer.index][(slot_ + n - k) % n];
}

PipelineError::PipelineError(const std::string& pipeline, std::string stage, std::uint64_t frame,
                             std::exception_ptr cause)
    : Error(
          [&] {
            std::string inner = "unknown error";
            try {
              if (cause) std::rethrow_exception(cause);
            } catch (const std::exception& e) {
              inner = nested_text(e, true);  // this error names the cause's task
            } catch (...) {
            }
            return "pipeline " + in_quotes(pipeline) + ": stage " + in_quotes(stage) +
                   " failed on frame " + std::to_string(frame) + ": " + inner;
          }(),
          [&] {
            ErrorContext context;
            try {
              if (cause) std::rethrow_exception(cause);
            } catch (const Error& e) {
              context.task = e.task();
            } catch (...) {
            }
            return context;
          }()),
      stage_(std::move(stage)),
      frame_(frame),
      cause_(std::move(cause)) {}

struct InputFrame::State {
  struct Slot {
    Phase phase = Phase::free;
    std::uint64_t frame = 0;
    std::vector<Tensor> host_in;   // by input position
    std::vector<Tensor> host_out;  // by output position
    Graph upload, download;
    std::vector<Executable> stages;
    int pending = 0;                        // runs of the frame not over yet
    std::vector<std::exception_ptr> steps;  // each step's error: upload, stages, download
    Clock::time_point pushed_at;
    double latency_us = 0;
  };

  Runtime* runtime = nullptr;
  PipelineOptions options;
  Memory host_memory = Memory::pageable;
  StageSlot::Buffers buffers;
  std::vector<std::uint32_t> inputs, outputs;  // buffer indices by position
  std::vector<std::string> step_names;         // "upload", the stages, "download"
  std::vector<Slot> slots;

  mutable std::mutex mutex;
  std::condition_variable producer, consumer, idle;
  std::uint64_t next_push = 0, next_pop = 0;
  bool closed = false, outstanding = false;
  // The consumer waits in pop for this frame: the producer must not drop it.
  bool consumer_waiting = false;
  std::uint64_t awaited = 0;
  std::size_t continuations = 0;  // registered with Future::then, not yet over
  std::exception_ptr error;       // the failure of the earliest failed frame
  std::uint64_t error_frame = std::numeric_limits<std::uint64_t>::max();
  std::size_t in_flight = 0;
  PipelineStats counts;
  Clock::time_point first_push, last_complete;
  std::vector<double> latency_ring;
  std::vector<std::uint64_t> frame_ring;

  std::size_t step_count() const noexcept { return step_names.size(); }

  void rebuild_download(std::size_t s) {
    Slot& slot = slots[s];
    slot.download = Graph();
    for (std::size_t j = 0; j < outputs.size(); ++j)
      slot.download.copy(buffers.device[outputs[j]][s], slot.host_out[j],
                         {.name = "download " + buffers.decls[outputs[j]].name});
  }

  // Slot `s` goes in flight as frame next_push.
  void start_frame_locked(std::size_t s) {
    throw_if_failed_locked();
    if (closed)
      throw InvalidArgument("pipeline " + in_quotes(options.name) +
                            " was closed: the frame was not pushed");
    Slot& slot = slots[s];
    slot.phase = Phase::in_flight;
    slot.pending = static_cast<int>(step_count());
    std::fill(slot.steps.begin(), slot.steps.end(), nullptr);
    slot.pushed_at = Clock::now();
    if (counts.pushed == 0) first_push = slot.pushed_at;
    ++counts.pushed;
    ++in_flight;
    ++next_push;
  }

  void submitted_locked() {
    outstanding = false;
    consumer.notify_all();
  }

  void throw_if_failed_locked() const {
    if (error) std::rethrow_exception(error);
  }

  void record_latency_locked(Slot& slot, Clock::time_point now) {
    slot.latency_us = micros(now - slot.pushed_at);
    const std::size_t i = counts.completed % latency_ring.size();
    latency_ring[i] = slot.latency_us;
    frame_ring[i] = slot.frame;
    ++counts.completed;
    last_complete = now;
  }

  // A run of frame `frame` (step `step`) is over; the frame is complete once all are.
  void step_done(std::size_t s, std::uint64_t frame, std::size_t step, std::exception_ptr e) {
    const Clock::time_point now = Clock::now();
    std::lock_guard lock(mutex);
    Slot& slot = slots[s];
    if (slot.frame != frame || slot.phase != Phase::in_flight) return;  // cannot happen
    slot.steps[step] = std::move(e);
    if (--slot.pending > 0) return;
    record_latency_locked(slot, now);
    for (std::size_t i = 0; i < slot.steps.size(); ++i) {
      if (!slot.steps[i]) continue;
      if (frame < error_frame) {
        error_frame = frame;
        error = std::make_exception_ptr(
            PipelineError(options.name, step_names[i], frame, slot.steps[i]));
      }
      break;
    }
    slot.phase = Phase::complete;
    --in_flight;
    consumer.notify_all();
    producer.notify_all();
    idle.notify_all();
  }
};

// ---------------------------------------------------------------- builder

struct PipelineBuilder::Impl {
  Runtime* runtime;
  PipelineOptions options;
  std::uint64_t id = ++pipeline_serials;
  std::vector<BufferDecl> decls;
  std::vector<StageDecl> stages;
  std::size_t counts[3] = {0, 0, 0};
  bool spent = false;

  // Buffers and stages are named apart: a stage may share its buffer's name.
  void check_name(const std::string& what, const std::string& name) const {
    const std::string who = "pipeline " + in_quotes(options.name);
    if (name.empty()) throw InvalidArgument(who + ": a " + what + " needs a name");
    if (what == "buffer") {
      for (const BufferDecl& d : decls)
        if (d.name == name) throw InvalidArgument(who + ": two buffers named " + in_quotes(name));
    } else {
      for (const StageDecl& st : stages)
        if (st.name == name) throw InvalidArgument(who + ": two stages named " + in_quotes(name));
    }
  }

  void check_live() const {
    if (spent)
      throw InvalidArgument("pipeline " + in_quotes(options.name) +
                            ": the builder was used by build() already");
  }

  PipelineBuffer declare(std::string name, DType dtype, const Shape& shape, Role role) {
    check_live();
    check_name("buffer", name);
    check_element_count(dtype, shape);
    const std::size_t position = counts[static_cast<int>(role)]++;
    decls.push_back({std::move(name), dtype, shape, role, position});
    return PipelineBuffer{static_cast<std::uint32_t>(decls.size() - 1), id};
  }
};

PipelineBuilder::PipelineBuilder(Runtime& runtime, PipelineOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->runtime = &runtime;
  impl_->options = std::move(options);
}

PipelineBuilder::~PipelineBuilder() = default;

PipelineBuffer PipelineBuilder::input(std::string name, DType dtype, const Shape& shape) {
  return impl_->declare(std::move(name), dtype, shape, Role::input);
}

PipelineBuffer PipelineBuilder::buffer(std::string name, DType dtype, const Shape& shape) {
  return impl_->declare(std::move(name), dtype, shape, Role::between);
}

PipelineBuffer PipelineBuilder::output(std::string name, DType dtype, const Shape& shape) {
  return impl_->declare(std::move(name), dtype, shape, Role::output);
}

PipelineBuilder& PipelineBuilder::stage(std::string name, StageBuild build) {
  impl_->check_live();
  impl_->check_name("stage", name);
  if (name == "upload" || name == "download")
    throw InvalidArgument("pipeline " + in_quotes(impl_->options.name) + ": stage name " +
                          in_quotes(name) + " is the pipeline's own");
  if (!build)
    throw InvalidArgument("pipeline " + in_quotes(impl_->options.name) + ": stage " +
                          in_quotes(name) + " has no build function");
  impl_->stages.push_back({std::move(name), std::move(build)});
  return *this;
}

namespace {

Tensor zeroed_host(Runtime& rt, DType dtype, const Shape& shape, Memory memory) {
  Tensor t = rt.tensor(dtype, shape, memory);
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

void check_options(const PipelineOptions& o, std::size_t stages) {
  const std::string who = "pipeline " + in_quotes(o.name);
  if (stages == 0) throw InvalidArgument(who + " has no stages");
  if (o.slots < 2)
    throw InvalidArgument(who + ": slots must be at least 2 (got " + std::to_string(o.slots) + ")");
  if (o.latency_history == 0) throw InvalidArgument(who + ": latency_history must be positive");
}

}  // namespace

Pipeline PipelineBuilder::build() {
  Impl& b = *impl_;
  b.check_live();
  check_options(b.options, b.stages.size());
  b.spent = true;
  Runtime& rt = *b.runtime;
  const std::size_t n = b.options.slots;

  auto st = std::make_shared<InputFrame::State>();
  st->runtime = &rt;
  st->options = b.options;
  st->host_memory = rt.has_gpu() ? Memory::pinned : Memory::pageable;
  st->buffers.decls = b.decls;
  st->buffers.slots = n;
  st->buffers.pipeline = b.options.name;
  st->buffers.id = b.id;
  st->latency_ring.assign(b.options.latency_history, 0.0);
  st->frame_ring.assign(b.options.latency_history, 0);

  // Every slot of every buffer starts as zeros: a delayed read before frame k sees them.
  std::vector<Completion> zeroing;
  for (std::uint32_t i = 0; i < b.decls.size(); ++i) {
    const BufferDecl& d = b.decls[i];
    if (d.role == Role::input) st->inputs.push_back(i);
    if (d.role == Role::output) st->outputs.push_back(i);
    const Tensor zeros = zeroed_host(rt, d.dtype, d.shape, Memory::pageable);
    std::vector<Tensor>& device = st->buffers.device.emplace_back();
    for (std::size_t s = 0; s < n; ++s) {
      device.push_back(rt.tensor(d.dtype, d.shape));
      zeroing.push_back(rt.copy(zeros, device.back()));
    }
  }
  for (const Completion& c : zeroing) c.wait();

  if (!st->inputs.empty()) st->step_names.push_back("upload");
  for (const StageDecl& stage : b.stages) st->step_names.push_back(stage.name);
  if (!st->outputs.empty()) st->step_names.push_back("download");

  st->slots.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    InputFrame::State::Slot& slot = st->slots[s];
    for (std::uint32_t i : st->inputs) {
      const BufferDecl& d = b.decls[i];
      slot.host_in.push_back(zeroed_host(rt, d.dtype, d.shape, st->host_memory));
      slot.upload.copy(slot.host_in.back(), st->buffers.device[i][s], {.name = "upload " + d.name});
    }
    for (std::uint32_t i : st->outputs) {
      const BufferDecl& d = b.decls[i];
      slot.host_out.push_back(zeroed_host(rt, d.dtype, d.shape, st->host_memory));
    }
    st->rebuild_download(s);
    slot.steps.resize(st->step_count());
    for (const StageDecl& stage : b.stages) {
      try {
        Graph g;
        stage.build(g, StageSlot(st->buffers, s));
        slot.stages.push_back(rt.compile(g));
      } catch (const std::exception& e) {
        throw InvalidArgument("pipeline " + in_quotes(b.options.name) + ", stage " +
                              in_quotes(stage.name) + " (slot " + std::to_string(s) +
                              "): " + nested_text(e, false));
      }
    }
  }
  return Pipeline(std::move(st));
}

// ------------------------------------------------------------ input frame

InputFrame::InputFrame(InputFrame&& other) noexcept
    : state_(std::move(other.state_)), slot_(other.slot_), number_(other.number_) {}

InputFrame& InputFrame::operator=(InputFrame&& other) noexcept {
  if (this != &other) {
    InputFrame old(std::move(*this));  // gives its slot back
    state_ = std::move(other.state_);
    slot_ = other.slot_;
    number_ = other.number_;
  }
  return *this;
}

InputFrame::~InputFrame() {
  if (!state_) return;
  const std::shared_ptr<State> st = std::move(state_);  // outlives the lock below
  std::lock_guard lock(st->mutex);
  State::Slot& slot = st->slots[slot_];
  if (slot.phase == Phase::filling && slot.frame == number_) slot.phase = Phase::free;
  st->outstanding = false;
  st->producer.notify_all();
}

const Tensor& InputFrame::input(PipelineBuffer buffer) const {
  if (!state_) throw InvalidArgument("an empty or pushed InputFrame has no inputs");
  const BufferDecl& d = state_->buffers.decl(buffer);
  if (d.role != Role::input)
    throw InvalidArgument("pipeline " + in_quotes(state_->options.name) + ": buffer " +
                          in_quotes(d.name) + " is not an input");
  return state_->slots[slot_].host_in[d.position];
}

// ------------------------------------------------------------------ frame

Frame::Frame(std::shared_ptr<InputFrame::State> state, std::size_t slot, std::uint64_t number,
             double latency_us)
    : state_(std::move(state)), slot_(slot), number_(number), latency_us_(latency_us) {
  taken_.assign(state_->outputs.size(), false);
}

Frame::Frame(Frame&& other) noexcept
    : state_(std::move(other.state_)),
      slot_(other.slot_),
      number_(other.number_),
      latency_us_(other.latency_us_),
      taken_(std::move(other.taken_)) {}

Frame& Frame::operator=(Frame&& other) noexcept {
  if (this != &other) {
    Frame old(std::move(*this));  // gives its slot back
    state_ = std::move(other.state_);
    slot_ = other.slot_;
    number_ = other.number_;
    latency_us_ = other.latency_us_;
    taken_ = std::move(other.taken_);
  }
  return *this;
}

Frame::~Frame() {
  if (!state_) return;
  const std::shared_ptr<InputFrame::State> st = std::move(state_);  // outlives the lock below
  std::lock_guard lock(st->mutex);
  InputFrame::State::Slot& slot = st->slots[slot_];
  if (slot.phase == Phase::delivered && slot.frame == number_) slot.phase = Phase::free;
  st->producer.notify_all();
}

const Tensor& Frame::output(PipelineBuffer buffer) const {
  if (!state_) throw InvalidArgument("a moved-from Frame has no outputs");
  const BufferDecl& d = state_->buffers.decl(buffer);
  if (d.role != Role::output)
    throw InvalidArgument("pipeline " + in_quotes(state_->options.name) + ": buffer " +
                          in_quotes(d.name) + " is not an output");
  if (taken_[d.position])
    throw InvalidArgument("pipeline " + in_quotes(state_->options.name) + ": output " +
                          in_quotes(d.name) + " of frame " + std::to_string(number_) +
                          " was taken already");
  return state_->slots[slot_].host_out[d.position];
}

Tensor Frame::take(PipelineBuffer buffer) {
  Tensor kept = output(buffer);
  const BufferDecl& d = state_->buffers.decl(buffer);
  // The slot is this frame's until it is dropped: nothing else touches it.
  InputFrame::State::Slot& slot = state_->slots[slot_];
  slot.host_out[d.position] = state_->runtime->tensor(d.dtype, d.shape, state_->host_memory);
  state_->rebuild_download(slot_);
  taken_[d.position] = true;
  return kept;
}

// --------------------------------------------------------------- pipeline

Pipeline::Pipeline(std::shared_ptr<InputFrame::State> state) : state_(std::move(state)) {}

Pipeline::Pipeline(Pipeline&& other) noexcept = default;

Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
  if (this != &other) {
    Pipeline old(std::move(*this));  // closes and drains the one it held
    state_ = std::move(other.state_);
  }
  return *this;
}

Pipeline::~Pipeline() {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->closed = true;
  state_->consumer.notify_all();
  state_->producer.notify_all();
  // Every continuation over, too: none may be the last owner of the state
  // (and so free its executables and tensors) after the pipeline is gone.
  const auto drained = [&] { return state_->in_flight == 0 && state_->continuations == 0; };
  try {
    detail::wait_helping(lock, state_->idle, drained, "~Pipeline");
  } catch (const std::exception& e) {
    // A thread that may not wait, or no thread to put in its place: wait as before.
    detail::logger().error("{}", e.what());
    if (!lock.owns_lock()) lock.lock();
    state_->idle.wait(lock, drained);
  }
}

const std::string& Pipeline::name() const { return state_->options.name; }
std::size_t Pipeline::slots() const { return state_->options.slots; }

namespace {

void check_valid(const std::shared_ptr<InputFrame::State>& st) {
  if (!st) throw InvalidArgument("a moved-from Pipeline cannot be used");
}

}  // namespace

InputFrame Pipeline::acquire() {
  check_valid(state_);
  const std::shared_ptr<InputFrame::State> keep = state_;  // the pipeline may go meanwhile
  InputFrame::State& st = *keep;
  std::unique_lock lock(st.mutex);
  const std::string who = "pipeline " + in_quotes(st.options.name);
  st.throw_if_failed_locked();
  if (st.closed) throw InvalidArgument(who + " is closed: no more frames");
  if (st.outstanding)
    throw InvalidArgument(who + ": an InputFrame is out already; push it or drop it first");
  const std::uint64_t frame = st.next_push;
  const std::size_t s = frame % st.options.slots;
  InputFrame::State::Slot& slot = st.slots[s];
  const auto may_drop = [&] {
    return slot.phase == Phase::complete && st.options.overflow == Overflow::drop_oldest &&
           !(st.consumer_waiting && st.awaited == slot.frame);
  };
  const auto changed = [&] {
    return st.error || st.closed || slot.phase == Phase::free || may_drop();
  };
  for (;;) {
    st.throw_if_failed_locked();
    if (st.closed) throw InvalidArgument(who + " was closed while waiting for a slot");
    if (slot.phase == Phase::free) break;
    if (may_drop()) {
      slot.phase = Phase::free;  // pop sees the slot moved on, and skips the frame
      ++st.counts.dropped;
      break;
    }
    detail::wait_helping(lock, st.producer, changed, "Pipeline::acquire()");
  }
  slot.phase = Phase::filling;
  slot.frame = frame;
  st.outstanding = true;
  return InputFrame(keep, s, frame);
}

namespace {

// Submits the frame's steps in order. A step that cannot be submitted counts
// as done with its error, so the frame still completes, and fails.
void submit_steps(const std::shared_ptr<InputFrame::State>& state, std::size_t s,
                  std::uint64_t frame, Graph* custom_upload) {
  InputFrame::State& st = *state;
  InputFrame::State::Slot& slot = st.slots[s];
  std::weak_ptr<InputFrame::State> weak = state;
  std::size_t step = 0;
  auto launch = [&](auto&& start) {
    const std::size_t mine = step++;
    Future run;
    try {
      run = start();
    } catch (...) {
      st.step_done(s, frame, mine, std::current_exception());
      return;
    }
    {
      std::lock_guard lock(st.mutex);
      ++st.continuations;
    }
    run.then([weak, s, frame, mine](const Future& done) {
      std::shared_ptr<InputFrame::State> alive = weak.lock();
      if (!alive) return;
      alive->step_done(s, frame, mine, done.error());
      // Drop this reference first: ~Pipeline waits for the count, so the
      // state lives until the count is down, and this was never its last owner.
      InputFrame::State* raw = alive.get();
      alive.reset();
      std::lock_guard lock(raw->mutex);
      --raw->continuations;
      raw->idle.notify_all();
    });
  };
  Runtime& rt = *st.runtime;
  if (!st.inputs.empty())
    launch([&] { return rt.submit(custom_upload != nullptr ? *custom_upload : slot.upload); });
  for (const Executable& stage : slot.stages) launch([&] { return stage.run(); });
  if (!st.outputs.empty()) launch([&] { return rt.submit(slot.download); });
}

}  // namespace

std::uint64_t Pipeline::push(InputFrame&& frame) {
  check_valid(state_);
  const std::shared_ptr<InputFrame::State> keep = state_;
  InputFrame::State& st = *keep;
  if (frame.state_ != state_)
    throw InvalidArgument("pipeline " + in_quotes(st.options.name) +
                          ": push of an InputFrame it did not give out (or one pushed already)");
  InputFrame in = std::move(frame);
  const std::size_t s = in.slot_;
  const std::uint64_t number = in.number_;
  {
    std::lock_guard lock(st.mutex);
    st.start_frame_locked(s);
  }
  in.state_.reset();  // the slot is in flight: dropping `in` must not free it
  submit_steps(keep, s, number, nullptr);
  std::lock_guard lock(st.mutex);
  st.submitted_locked();
  return number;
}

std::uint64_t Pipeline::push(std::vector<Tensor> inputs) {
  check_valid(state_);
  const std::shared_ptr<InputFrame::State> keep = state_;
  InputFrame::State& st = *keep;
  const std::string who = "pipeline " + in_quotes(st.options.name);
  if (inputs.size() != st.inputs.size())
    throw InvalidArgument(who + ": push of " + std::to_string(inputs.size()) + " tensors; it has " +
                          std::to_string(st.inputs.size()) + " inputs");
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    const BufferDecl& d = st.buffers.decls[st.inputs[j]];
    const Tensor& t = inputs[j];
    if (!t.defined() || t.dtype() != d.dtype || !(t.shape() == d.shape) ||
        t.memory().kind() == Memory::Kind::device)
      throw InvalidArgument(who + ": input " + in_quotes(d.name) + " expects a host tensor " +
                            std::string(to_string(d.dtype)) + " " + d.shape.to_string() + ", got " +
                            (t.defined() ? t.describe() : std::string("none")));
  }
  InputFrame in = acquire();
  Graph upload;
  for (std::size_t j = 0; j < inputs.size(); ++j)
    upload.copy(inputs[j], st.buffers.device[st.inputs[j]][in.slot_],
                {.name = "upload " + st.buffers.decls[st.inputs[j]].name});
  const std::size_t s = in.slot_;
  const std::uint64_t number = in.number_;
  {
    std::lock_guard lock(st.mutex);
    st.start_frame_locked(s);
  }
  in.state_.reset();
  // The run keeps the caller's tensors until their upload is done.
  submit_steps(keep, s, number, &upload);
  std::lock_guard lock(st.mutex);
  st.submitted_locked();
  return number;
}

namespace {

struct Ready {
  std::size_t slot;
  std::uint64_t number;
  double latency_us;
};

// The next frame in order, once complete (waiting for it when `wait`).
std::optional<Ready> next_ready(InputFrame::State& st, bool wait) {
  std::unique_lock lock(st.mutex);
  const auto failed = [&] { return st.error && st.next_pop >= st.error_frame; };
  for (;;) {
    if (failed()) std::rethrow_exception(st.error);
    if (st.next_pop == st.next_push) {
      if (st.closed || !wait) return std::nullopt;
      detail::wait_helping(
          lock, st.consumer, [&] { return failed() || st.closed || st.next_pop != st.next_push; },
          "Pipeline::pop()");
      continue;
    }
    const std::size_t s = st.next_pop % st.options.slots;
    InputFrame::State::Slot& slot = st.slots[s];
    if (slot.frame != st.next_pop || slot.phase == Phase::free) {
      ++st.next_pop;  // dropped: its slot moved on
      continue;
    }
    if (slot.phase == Phase::complete) {
      slot.phase = Phase::delivered;
      ++st.counts.delivered;
      return Ready{s, st.next_pop++, slot.latency_us};
    }
    if (!wait) return std::nullopt;
    st.consumer_waiting = true;  // this frame is owed to the consumer: not to be dropped
    st.awaited = st.next_pop;
    try {
      detail::wait_helping(
          lock, st.consumer,
          [&] {
            return failed() || slot.frame != st.next_pop || slot.phase == Phase::free ||
                   slot.phase == Phase::complete;
          },
          "Pipeline::pop()");
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      st.consumer_waiting = false;
      throw;
    }
    st.consumer_waiting = false;
  }
}

}  // namespace

std::optional<Frame> Pipeline::pop() {
  check_valid(state_);
  const std::shared_ptr<InputFrame::State> keep = state_;  // the pipeline may go meanwhile
  const std::optional<Ready> r = next_ready(*keep, true);
  if (!r) return std::nullopt;
  return Frame(keep, r->slot, r->number, r->latency_us);
}

std::optional<Frame> Pipeline::try_pop() {
  check_valid(state_);
  const std::optional<Ready> r = next_ready(*state_, false);
  if (!r) return std::nullopt;
  return Frame(state_, r->slot, r->number, r->latency_us);
}

void Pipeline::close() {
  check_valid(state_);
  std::lock_guard lock(state_->mutex);
  state_->closed = true;
  state_->consumer.notify_all();
  state_->producer.notify_all();
}

PipelineStats Pipeline::stats() const {
  check_valid(state_);
  const InputFrame::State& st = *state_;
  std::vector<double> latencies;
  PipelineStats out;
  {
    std::lock_guard lock(st.mutex);
    out = st.counts;
    const std::size_t kept = std::min<std::size_t>(st.counts.completed, st.latency_ring.size());
    latencies.assign(st.latency_ring.begin(), st.latency_ring.begin() + kept);
    if (st.counts.completed > 0) {
      const double seconds = micros(st.last_complete - st.first_push) * 1e-6;
      out.frames_per_second = seconds > 0 ? st.counts.completed / seconds : 0.0;
    }
  }
  if (latencies.empty()) return out;
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(q * static_cast<double>(latencies.size() - 1) + 0.5);
    return latencies[std::min(i, latencies.size() - 1)];
  };
  out.latency_p50_us = at(0.50);
  out.latency_p99_us = at(0.99);
  out.latency_max_us = latencies.back();
  double sum = 0;
  for (double l : latencies) sum += l;
  out.latency_mean_us = sum / static_cast<double>(latencies.size());
  return out;
}

std::vector<double> Pipeline::latencies_us() const {
  check_valid(state_);
  const InputFrame::State& st = *state_;
  std::vector<std::pair<std::uint64_t, double>> kept;
  {
    std::lock_guard lock(st.mutex);
    const std::size_t n = std::min<std::size_t>(st.counts.completed, st.latency_ring.size());
    for (std::size_t i = 0; i < n; ++i) kept.emplace_back(st.frame_ring[i], st.latency_ring[i]);
  }
  std::sort(kept.begin(), kept.end());
  std::vector<double> out;
  out.reserve(kept.size());
  for (const auto& [frame, latency] : kept) out.push_back(latency);
  return out;
}

}  // namespace loom
