#include <loom/device.hpp>
#include <loom/error.hpp>
#include <loom/runtime.hpp>

#include "compile/compile.hpp"
#include "compile/intermediates.hpp"
#include "core/completion_state.hpp"
#include "core/log.hpp"
#include "core/storage.hpp"
#include "core/tensor_access.hpp"
#include "cuda/check.hpp"
#include "cuda/cuda_upstreams.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/device_owner.hpp"
#include "cuda/event_pool.hpp"
#include "memory/host_owner.hpp"
#include "sched/executor.hpp"
#include "transfer/copy_paths.hpp"
#include "transfer/staging.hpp"
#include "transfer/strided.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace loom {

using detail::CachingAllocator;
using detail::DeviceOwner;
using detail::HostOwner;

struct Runtime::Impl final : detail::CopyEngine {
  RuntimeOptions options;
  bool gpu = false;
  bool cpu_asked = false;
  std::shared_ptr<HostOwner> pageable;
  std::shared_ptr<HostOwner> pinned;
  std::shared_ptr<detail::CudaEventSource> events;
  std::vector<std::shared_ptr<DeviceOwner>> devices;  // made on first use
  std::vector<std::unique_ptr<detail::EventPool>> completion_events;
  std::unique_ptr<detail::StagingEngine> staging;  // for the default device
  std::mutex mutex;                                // guards lazy creation

  DeviceOwner& device_owner(int device) {
    if (!gpu) {
      throw NoDevice(NoDevice::Reason::no_device,
                     "device memory needs a GPU: " +
                         (cpu_asked ? std::string("this runtime runs the CPU backend")
                                    : cuda_availability().reason));
    }
    if (device < 0 || device >= static_cast<int>(devices.size())) {
      throw NoDevice(NoDevice::Reason::device_out_of_range,
                     "device " + std::to_string(device) + " does not exist; there are " +
                         std::to_string(devices.size()) + " CUDA device(s)");
    }
    std::lock_guard lock(mutex);
    auto& owner = devices[static_cast<std::size_t>(device)];
    if (!owner) {
      auto pool = std::make_shared<CachingAllocator>(detail::make_device_upstream(device), events);
      owner =
          std::make_shared<DeviceOwner>(device, std::move(pool), detail::device_strided_copier());
      completion_events[static_cast<std::size_t>(device)] =
          std::make_unique<detail::EventPool>(device);
    }
    return *owner;
  }

  HostOwner& pinned_owner() {
    if (!gpu) {
      throw NoDevice(NoDevice::Reason::no_device,
                     "pinned memory needs a CUDA driver: " +
                         (cpu_asked ? std::string("this runtime runs the CPU backend")
                                    : cuda_availability().reason));
    }
    return *pinned;
  }

  detail::MemoryOwner& owner_of(Memory memory) {
    switch (memory.kind()) {
      case Memory::Kind::pageable: return *pageable;
      case Memory::Kind::pinned: return pinned_owner();
      case Memory::Kind::device: return device_owner(memory.device());
    }
    throw InternalError("unknown memory kind");
  }

  detail::StagingEngine& staging_for(int device) {
    if (device != options.device) {
      throw InvalidArgument("pageable copies stage through device " +
                            std::to_string(options.device) + " only; device " +
                            std::to_string(device) + " needs a pinned or device tensor");
    }
    std::lock_guard lock(mutex);
    if (!staging) {
      staging = std::make_unique<detail::StagingEngine>(
          device, pinned->pool_ptr(), options.staging_chunk_bytes, options.staging_workers);
    }
    return *staging;
  }

  std::unique_ptr<detail::Executor> executor;  // made last, destroyed first

  /// The shutdown protocol: runs in flight finish with everything alive,
  /// then the executor, the staging engine and the streams go, and the pools
  /// forget them (tensors may outlive the runtime). Idempotent.
  void shut_down() noexcept;

  // A fault seen only while the executor drained its runs at shutdown.
  bool executor_poisoned_late() const {
    detail::DeviceGuard guard(options.device);
    const cudaError_t rc = cudaStreamQuery(nullptr);
    if (rc == cudaSuccess || rc == cudaErrorNotReady) return false;
    (void)cudaGetLastError();
    return detail::is_sticky_cuda_error(static_cast<int>(rc));
  }

  // CopyEngine: the paths the executor's copy tasks take.
  void enqueue(const Tensor& src, const Tensor& dst, StreamView stream) override;
  Completion start(const Tensor& src, const Tensor& dst) override;
  void host_copy(const Tensor& src, const Tensor& dst) override {
    detail::copy_strided_on_host(src, dst);
  }
  void check(const Tensor& src, const Tensor& dst) const override;
  // Scratch memory from the default device's pool, for use on `stream`.
  std::shared_ptr<detail::Storage> workspace(std::size_t bytes, StreamView stream) override {
    auto& owner = device_owner(options.device);
    auto storage = std::make_shared<detail::Storage>();
    storage->stream = detail::key_of(stream);
    storage->allocation = owner.pool().allocate(bytes, storage->stream);
    storage->base = storage->allocation.ptr;
    storage->bytes = bytes;
    storage->memory = Memory::on_device(options.device);
    storage->owned = true;
    storage->owner = owner.shared_from_this();
    return storage;
  }

  // A completion that is ready when the work queued so far on `owner`'s
  // stream is. It owns its event (not a pooled one): it may outlive the runtime.
  Completion stream_completion(DeviceOwner& owner) {
    auto event = std::make_shared<detail::Event>(owner.device());
    event->record(owner.stream());
    auto state = std::make_shared<detail::CompletionState>();
    state->poll = [event] { return event->completed(); };
    state->block = [event] { event->synchronize(); };
    return detail::CompletionAccess::make(state);
  }
};

namespace {

Backend backend_from_environment(Backend asked) {
  if (asked != Backend::automatic) return asked;
  const char* env = std::getenv("LOOM_DEVICE");
  if (env == nullptr || *env == '\0') return Backend::automatic;
  // Case-insensitive, like LOOM_LOG_LEVEL: CPU, Cuda.
  const std::string value = env;
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "cpu") return Backend::cpu;
  if (lower == "cuda") return Backend::cuda;
  throw InvalidArgument("LOOM_DEVICE='" + value + "' is neither 'cpu' nor 'cuda'");
}

}  // namespace

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.options = options;
  const Backend backend = backend_from_environment(options.backend);
  if (backend == Backend::cuda && !cuda_availability().available) {
    throw NoDevice(
        NoDevice::Reason::no_device,
        "the CUDA backend was asked for, but CUDA is unavailable: " + cuda_availability().reason);
  }
  m.cpu_asked = backend == Backend::cpu;
  m.gpu = !m.cpu_asked && cuda_availability().available;
  m.pageable = std::make_shared<HostOwner>(
      Memory::pageable, std::make_shared<CachingAllocator>(detail::make_host_upstream(), nullptr),
      detail::host_strided_copier());
  if (m.gpu) {
    if (options.device < 0 || options.device >= device_count()) {
      throw NoDevice(NoDevice::Reason::device_out_of_range,
                     "RuntimeOptions::device is " + std::to_string(options.device) +
                         " but there are " + std::to_string(device_count()) + " CUDA device(s)");
    }
    m.events = std::make_shared<detail::CudaEventSource>();
    m.pinned = std::make_shared<HostOwner>(
        Memory::pinned,
        std::make_shared<CachingAllocator>(detail::make_pinned_upstream(), m.events),
        detail::host_strided_copier());
    m.devices.resize(static_cast<std::size_t>(device_count()));
    m.completion_events.resize(static_cast<std::size_t>(device_count()));
    detail::logger().info("loom runtime: CUDA backend on device {} ({} device(s))", options.device,
                          device_count());
  } else {
    detail::logger().info("loom runtime: CPU backend ({})",
                          m.cpu_asked ? "asked for" : cuda_availability().reason);
  }
  detail::ExecutorOptions exec;
  exec.cuda = m.gpu;
  exec.device = options.device;
  exec.streams_per_priority = options.streams_per_priority;
  exec.workers = options.workers;
  exec.trace_path = options.trace_path;
  exec.check_graph = [](const Graph& graph) { detail::check_foreign_intermediates(graph); };
  if (m.gpu) exec.entry_stream = m.device_owner(options.device).stream().native();
  if (exec.trace_path.empty()) {
    if (const char* env = std::getenv("LOOM_TRACE"); env != nullptr) exec.trace_path = env;
  }
  m.executor = std::make_unique<detail::Executor>(exec, m);
}

namespace {

// Runtimes destroyed on one of their own threads (a continuation or task
// held the last reference) are torn down here, each on a thread of its own:
// a worker cannot join itself. Joined when the program's statics go, so
// that none outlives what it uses.
class Reaper {
 public:
  void adopt(std::unique_ptr<Runtime::Impl> impl) {
    std::lock_guard lock(mutex_);
    std::erase_if(teardowns_, [](Teardown& t) {
      if (!t.done->load()) return false;
      t.thread.join();
      return true;
    });
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread thread([impl = std::move(impl), done]() mutable {
      impl->shut_down();
      impl.reset();
      done->store(true);
    });
    teardowns_.push_back(Teardown{std::move(thread), std::move(done)});
  }
  ~Reaper() {
    std::vector<Teardown> all;
    {
      std::lock_guard lock(mutex_);
      all.swap(teardowns_);
    }
    for (auto& t : all) t.thread.join();
  }

 private:
  struct Teardown {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex mutex_;
  std::vector<Teardown> teardowns_;
};

Reaper& reaper() {
  static Reaper r;
  return r;
}

}  // namespace

Runtime::~Runtime() {
  if (!impl_) return;
  if (impl_->executor->runs_on_own_thread()) {
    // Waiting here would wait for this very thread: the teardown is handed
    // off, and runs once this task or continuation has returned.
    detail::logger().debug(
        "loom runtime destroyed on one of its own threads: torn down on another");
    reaper().adopt(std::move(impl_));
    return;
  }
  impl_->shut_down();
}

void Runtime::Impl::shut_down() noexcept {
  auto& m = *this;
  if (!m.executor) return;
  const bool poisoned = m.executor->poisoned();
  try {
    // Lets submitted runs finish (on a poisoned device they fail at once),
    // with what they submit meanwhile; then refuses new work. The executor
    // stays reachable until then: a task submitting meanwhile finds it.
    m.executor->shutdown();
    m.executor.reset();  // its streams go away
  } catch (const std::exception& e) {
    detail::logger().error("loom runtime shutdown: {}", e.what());
  }
  if (m.gpu) {
    if (poisoned || m.executor_poisoned_late()) {
      // A staged upload's end is a host callback that a lost device may
      // never run: the engine stays behind (its threads idle) rather than
      // wait forever or free what such a callback would touch.
      (void)m.staging.release();
    }
    try {
      if (m.staging) m.staging->drain();
    } catch (const std::exception& e) {
      detail::logger().error("loom runtime shutdown: {}", e.what());
    }
    for (auto& owner : m.devices) {
      if (!owner) continue;
      detail::DeviceGuard guard(owner->device());
      LOOM_CUDA_ASSERT(cudaStreamSynchronize(owner->stream()));
    }
  }
  // Every stream is idle now (or the device is lost): tensors that outlive
  // the runtime must not record markers on streams that no longer exist
  // when they are freed.
  for (auto& owner : m.devices) {
    if (owner) owner->pool().forget_streams(detail::key_of(owner->stream()));
  }
  if (m.pinned) m.pinned->pool().forget_streams(0);
}

Future Runtime::submit(const Graph& graph) {
  if (!graph.intermediates().empty()) {
    impl_->executor->throw_if_poisoned();
    detail::bind_from_pool(graph, impl_->owner_of(default_memory()));
  }
  return impl_->executor->submit(graph);
}

Executable Runtime::compile(const Graph& graph) {
  auto& m = *impl_;
  return detail::compile_graph(
      graph, detail::CompileServices{*m.executor, m, m.owner_of(default_memory())});
}

bool Runtime::has_gpu() const noexcept { return impl_->gpu; }

Memory Runtime::default_memory() const noexcept {
  return impl_->gpu ? Memory::on_device(impl_->options.device) : Memory::pageable;
}

Tensor Runtime::tensor(DType dtype, const Shape& shape, std::optional<Memory> memory) {
  for (auto extent : shape) {
    if (extent < 0) throw InvalidArgument("tensor: negative extent in shape " + shape.to_string());
  }
  check_element_count(dtype, shape);
  const Memory where = memory.value_or(default_memory());
  if (!where.is_host() || where == Memory::pinned) impl_->executor->throw_if_poisoned();
  auto& owner = impl_->owner_of(where);
  const auto bytes = bytes_for(dtype, static_cast<std::uint64_t>(shape.product()));
  try {
    return detail::TensorAccess::make(owner.allocate(static_cast<std::size_t>(bytes)), dtype, shape,
                                      contiguous_strides(shape), 0);
  } catch (const CudaError&) {
    impl_->executor->note_error(std::current_exception());
    throw;
  }
}

Tensor Runtime::provide(void* data, DType dtype, const Shape& shape, Memory memory,
                        std::optional<Strides> strides) {
  if (data == nullptr && shape.product() != 0) {
    throw InvalidArgument("provide: a null pointer for a non-empty " +
                          std::string(to_string(dtype)) + shape.to_string() + " tensor");
  }
  auto& owner = impl_->owner_of(memory);  // validates the space
  auto storage = std::make_shared<detail::Storage>();
  storage->base = data;
  storage->memory = memory;
  storage->owned = false;
  storage->owner = owner.shared_from_this();
  check_element_count(dtype, shape);
  const Strides s = strides.value_or(contiguous_strides(shape));
  if (s.rank() != shape.rank()) {
    throw InvalidArgument("provide: strides " + s.to_string() + " do not match shape " +
                          shape.to_string());
  }
  std::int64_t span = shape.product() == 0 ? 0 : 1;
  for (int i = 0; span > 0 && i < shape.rank(); ++i) {
    span += (shape[i] - 1) * std::max<std::int64_t>(s[i], 0);
  }
  storage->bytes = static_cast<std::size_t>(bytes_for(dtype, static_cast<std::uint64_t>(span)));
  if (memory.is_device()) {
    storage->stream = detail::key_of(impl_->device_owner(memory.device()).stream());
  }
  return detail::TensorAccess::make(std::move(storage), dtype, shape, s, 0);
}

void Runtime::Impl::check(const Tensor& src, const Tensor& dst) const {
  detail::check_copy(src, dst);
}

// @pre check(src, dst) passed (at submit).
void Runtime::Impl::enqueue(const Tensor& src, const Tensor& dst, StreamView stream) {
  detail::enqueue_stream_copy(src, dst, stream);
}

// A staged copy between pageable host memory and a device. The run that
// starts it holds both tensors until it has seen the copy end.
// @pre check(src, dst) passed (at submit).
Completion Runtime::Impl::start(const Tensor& src, const Tensor& dst) {
  const bool upload = dst.memory().is_device();
  auto& owner = device_owner((upload ? dst : src).memory().device());
  auto& engine = staging_for(owner.device());
  if (upload) return engine.upload(src.data(), dst.data(), src.nbytes(), owner.stream(), nullptr);
  return engine.download(src.data(), dst.data(), src.nbytes(), owner.stream(), nullptr);
}

namespace {

void require_elements(const char* call, const Tensor& t, DType dtype, std::size_t count) {
  if (t.dtype() != dtype) {
    throw InvalidArgument(std::string(call) + ": the tensor is " + t.describe() +
                          ", the values are " + std::string(to_string(dtype)));
  }
  if (static_cast<std::size_t>(t.numel()) != count) {
    throw InvalidArgument(std::string(call) + ": the tensor " + t.describe() + " holds " +
                          std::to_string(t.numel()) + " elements, the values " +
                          std::to_string(count));
  }
}

}  // namespace

Completion Runtime::upload_bytes(const Tensor& dst, DType dtype, const void* values,
                                 std::size_t count) {
  require_elements("upload", dst, dtype, count);
  // Into loom's own host memory first: the caller's may go away at return.
  Tensor host = tensor(dtype, dst.shape(), Memory::pageable);
  if (host.nbytes() != 0) std::memcpy(host.data(), values, host.nbytes());
  return copy(host, dst);
}

Completion Runtime::download_bytes(const Tensor& src, DType dtype, void* out, std::size_t count) {
  require_elements("download", src, dtype, count);
  return copy(src, provide(out, dtype, src.shape(), Memory::pageable));
}

Completion Runtime::copy(const Tensor& src, const Tensor& dst) {
  auto& m = *impl_;
  m.executor->throw_if_poisoned();
  detail::check_copy_pair(src, dst);
  if (detail::same_view(src, dst) || src.numel() == 0) return Completion();
  const Memory from = src.memory();
  const Memory to = dst.memory();
  const auto other_device = [&](Memory x) {
    return x.is_device() && x.device() != m.options.device;
  };
  if (!other_device(from) && !other_device(to)) {
    // A run of one copy task: ordered after unfinished runs over the same
    // data, and later runs over it follow the copy.
    return m.executor->submit_copy(src, dst);
  }
  detail::check_copy_path(src, dst);
  // Another device's memory: on the loom stream of the destination's device
  // (or the source's), ordered after the work queued there, not after runs.
  auto& owner = m.device_owner(to.is_device() ? to.device() : from.device());
  if (from.is_device() && to.is_device() && from.device() != to.device()) {
    // The destination's stream waits for the source device's earlier work.
    auto& src_owner = m.device_owner(from.device());
    auto ready = m.completion_events[static_cast<std::size_t>(from.device())]->acquire();
    ready->record(src_owner.stream());
    detail::DeviceGuard guard(to.device());
    ready->make_wait(owner.stream());
  }
  m.enqueue(src, dst, owner.stream());
  return m.stream_completion(owner);
}

void Runtime::synchronize() {
  auto& m = *impl_;
  m.executor->wait_idle();
  if (!m.gpu) return;
  detail::StagingEngine* staging = nullptr;
  {
    std::lock_guard lock(m.mutex);
    staging = m.staging.get();
  }
  // Not under the runtime's lock: the scheduling thread takes it to start
  // staged copies, and must never wait for a drain.
  if (staging != nullptr) staging->drain();
  for (auto& owner : m.devices) {
    if (owner) {
      detail::DeviceGuard guard(owner->device());
      LOOM_CUDA_CHECK(cudaStreamSynchronize(owner->stream()));
    }
  }
}

void Runtime::start_activity_log() { impl_->executor->start_activity_log(); }

ActivityLog Runtime::stop_activity_log() { return impl_->executor->stop_activity_log(); }

PoolStatistics Runtime::statistics(Memory memory) const {
  auto& owner = impl_->owner_of(memory);
  if (memory.is_device()) return static_cast<DeviceOwner&>(owner).pool().statistics();
  return static_cast<HostOwner&>(owner).pool().statistics();
}

std::size_t Runtime::release_cached(Memory memory) {
  auto& owner = impl_->owner_of(memory);
  if (memory.is_device()) return static_cast<DeviceOwner&>(owner).pool().release_cached();
  return static_cast<HostOwner&>(owner).pool().release_cached();
}

}  // namespace loom
