#pragma once
/// @file runtime.hpp
/// The Runtime owns loom's machinery: the memory pools of every space
/// (pageable host, pinned host, each device), the device streams, and the
/// staging workers that copy pageable memory without blocking the caller.
/// Tensors keep the pools they came from alive, so they may outlive it.
///
/// @code
/// loom::Runtime rt;                                     // the GPU if there is one
/// auto host = rt.tensor<float>({1024, 1024}, loom::Memory::pageable);
/// auto dev  = rt.tensor<float>({1024, 1024});            // device 0 (or host without GPU)
/// rt.copy(host, dev).wait();                             // staged, caller not blocked until
/// wait()
/// @endcode
///
/// Thread-safety: every member may be called from any thread.

#include <loom/activity.hpp>
#include <loom/completion.hpp>
#include <loom/dtype.hpp>
#include <loom/executable.hpp>
#include <loom/export.hpp>
#include <loom/future.hpp>
#include <loom/graph.hpp>
#include <loom/memory.hpp>
#include <loom/memory_stats.hpp>
#include <loom/tensor.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom {

/// Which backend runs graphs. automatic: CUDA when a GPU exists, else the
/// CPU; the environment variable LOOM_DEVICE=cpu|cuda (any case) overrides automatic.
enum class Backend { automatic, cpu, cuda };

struct RuntimeOptions {
  /// The device whose memory is the default and whose streams run graphs.
  int device = 0;
  Backend backend = Backend::automatic;
  /// Streams a priority level for graph tasks (independent branches run concurrently).
  int streams_per_priority = 4;
  /// Host workers for host tasks (and every task on the CPU backend); 0: from the core count.
  int workers = 0;
  /// Chrome-trace JSON per run: run N of "t.json" goes to "t.N.json". Empty:
  /// the LOOM_TRACE environment variable, if set.
  std::string trace_path = {};
  /// Bytes a staging chunk (pageable <-> device copies).
  std::size_t staging_chunk_bytes = std::size_t{4} << 20;
  /// Staging workers; 0 picks from the core count (half the cores, 2 to 8).
  int staging_workers = 0;
};

class LOOM_API Runtime {
 public:
  /// @throws NoDevice when the CUDA backend is asked for without a GPU, or
  /// options.device does not exist; InvalidArgument for a bad LOOM_DEVICE.
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// True when this runtime drives a GPU (the CUDA backend).
  bool has_gpu() const noexcept;
  /// Backend::cuda or Backend::cpu.
  Backend backend() const noexcept { return has_gpu() ? Backend::cuda : Backend::cpu; }

  /// Validates the graph and starts running it; returns at once. The run
  /// keeps the graph as it is now: it may be changed or submitted again
  /// meanwhile. The first submit of a graph snapshots, validates and plans
  /// it; submitting it again unchanged reuses all of that. Ordering across
  /// runs follows the data: the run follows every earlier unfinished run or
  /// copy that writes what it touches or touches what it writes; runs over
  /// disjoint data run concurrently.
  /// @throws InvalidArgument (a cycle, bad op inputs, tensors in the wrong
  /// memory space for the backend), naming the task; after a kernel fault
  /// made the device unusable, that fault's CudaError.
  Future submit(const Graph& graph);
  /// Compiles the graph for replay (see executable.hpp): validates and plans
  /// it as submit does, places its unbound intermediates in one arena from
  /// the default memory's pool, and on the CUDA backend captures and
  /// instantiates each group of device tasks as a CUDA graph, here, on the
  /// caller's thread. The graph may change afterwards; the executable keeps
  /// what it was. The executable must not outlive the runtime.
  /// @throws InvalidArgument, naming the task, for what submit refuses, for
  /// an op that cannot be captured (Op::capturable) and for a collective;
  /// OutOfMemory; after a kernel fault, that fault's CudaError.
  Executable compile(const Graph& graph);
  /// Where tensors go by default: the default device, or pageable host memory.
  Memory default_memory() const noexcept;

  /// An uninitialized contiguous tensor from the pool of `memory` (default:
  /// default_memory()). @throws OutOfMemory, InvalidArgument (bad shape),
  /// NoDevice (pinned or device memory without a GPU, or a device that does not exist).
  Tensor tensor(DType dtype, const Shape& shape, std::optional<Memory> memory = std::nullopt);
  template <class T>
  Tensor tensor(const Shape& shape, std::optional<Memory> memory = std::nullopt) {
    return tensor(dtype_of<T>(), shape, memory);
  }

  /// Wraps memory the caller owns, without copying or owning it ("provide").
  /// The memory must stay valid while any tensor views it. Row-major unless
  /// `strides` is given. @throws InvalidArgument for a null pointer with a non-empty shape.
  Tensor provide(void* data, DType dtype, const Shape& shape, Memory memory,
                 std::optional<Strides> strides = std::nullopt);

  /// dst = src, shapes and dtypes equal. The path comes from the two memory
  /// spaces: nothing when they are the same memory; memcpy between host
  /// spaces; cudaMemcpyAsync between pinned host and a device, or within a
  /// device (a gather kernel for strided sources); chunked staging through
  /// pinned buffers between pageable host and a device, so the caller never
  /// waits for the copy; a peer copy between devices (the driver stages it
  /// through host memory where peer access is unavailable).
  /// The copy is ordered like a run of one task: after unfinished runs and
  /// copies that write its source or touch its destination (copies that
  /// involve a device other than the runtime's are ordered after the work
  /// queued on that device's loom stream only). It keeps both tensors alive
  /// until it is done, and nothing after.
  /// @throws InvalidArgument for mismatched tensors, with what was expected;
  /// after a kernel fault, that fault's CudaError.
  Completion copy(const Tensor& src, const Tensor& dst);

  /// A tensor of `shape` in `memory` (default: default_memory()) holding
  /// `values`, row-major; returns once it holds them.
  /// @throws InvalidArgument when values.size() is not shape's element
  /// count; as tensor() and copy().
  /// @code
  ///   std::vector<float> w(512 * 1024, 0.01F);
  ///   auto weights = rt.upload(std::span<const float>(w), {512, 1024});
  /// @endcode
  template <class T>
  Tensor upload(std::span<const T> values, const Shape& shape,
                std::optional<Memory> memory = std::nullopt) {
    Tensor t = tensor<T>(shape, memory);
    upload_into(t, values).wait();
    return t;
  }
  /// dst = `values` (row-major), without waiting: they are copied first, so
  /// `values` may go away as soon as this returns. @throws InvalidArgument
  /// for another dtype or element count; as copy().
  template <class T>
  Completion upload_into(const Tensor& dst, std::span<const T> values) {
    return upload_bytes(dst, dtype_of<T>(), values.data(), values.size());
  }
  /// `src`'s elements, row-major, once every run that writes it is done.
  /// @throws InvalidArgument for another dtype; as copy().
  template <class T>
  std::vector<T> download(const Tensor& src) {
    std::vector<T> out(static_cast<std::size_t>(src.numel()));
    download_into(src, std::span<T>(out)).wait();
    return out;
  }
  /// out = `src`'s elements, row-major, without waiting: `out` must stay
  /// valid until the Completion is done. @throws InvalidArgument for another
  /// dtype or element count; as copy().
  template <class T>
  Completion download_into(const Tensor& src, std::span<T> out) {
    return download_bytes(src, dtype_of<T>(), out.data(), out.size());
  }

  /// Blocks until every run, copy and device operation loom has queued is
  /// done: it returns at the first moment no run is in flight, so runs other
  /// threads submit meanwhile are waited for too (while they keep coming, it
  /// may not return; wait on your own Futures instead). @throws
  /// InvalidArgument inside a task or continuation (it would wait for its
  /// own run).
  void synchronize();

  /// Opens an activity log (see activity.hpp): every run submitted from now
  /// on (Runtime::submit, Executable::run, Runtime::copy within the runtime's
  /// device and host) times its tasks, and hands its spans to the log when it
  /// ends. Timing costs each device task a pair of timing events, and each
  /// run a little host work at its end; with no log open a run pays one
  /// relaxed atomic load. On the CUDA backend this waits for one event on an
  /// idle stream of its own, which ties the device's clock to the host's.
  /// @throws InvalidArgument when a log is already open; CudaError when the
  /// device cannot record that event.
  void start_activity_log();
  /// Closes the activity log: runs submitted from now on are not in it.
  /// Waits for the runs submitted while it was open to end, and returns
  /// their spans. Runs submitted before it opened are absent.
  /// @throws InvalidArgument when no log is open, or inside a task or
  /// continuation (the wait could include its own run).
  /// @code
  /// rt.start_activity_log();
  /// for (int i = 0; i < frames; ++i) exe.run();
  /// const loom::ActivityLog log = rt.stop_activity_log();
  /// std::printf("GPU busy %.0f%%\n", 100 * loom::device_busy_fraction(log, 0, log.duration_us));
  /// @endcode
  ActivityLog stop_activity_log();

  /// The pool's statistics for a memory space. @throws NoDevice for a device
  /// space without a GPU.
  PoolStatistics statistics(Memory memory) const;
  /// Gives a pool's cached blocks back to the system; the bytes released.
  std::size_t release_cached(Memory memory);

  struct Impl;  ///< loom's own (defined in the library)

 private:
  Completion upload_bytes(const Tensor& dst, DType dtype, const void* values, std::size_t count);
  Completion download_bytes(const Tensor& src, DType dtype, void* out, std::size_t count);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom
