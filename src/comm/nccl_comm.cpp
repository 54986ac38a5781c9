// The nccl backend (comm.hpp): one rank a GPU, collectives enqueued by NCCL
// on the communication stream, so that they overlap compute and are captured
// into compiled graphs. Communicators are made non-blocking, so that making
// one fails past the timeout instead of waiting forever for a missing rank.
#include "comm/nccl_comm.hpp"

#include "comm/collective_spec.hpp"
#include "comm/nccl_check.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <loom/error.hpp>

#if defined(LOOM_HAS_MPI)
#include "comm/mpi_comm.hpp"
#endif

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace loom::detail {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i8: return ncclInt8;
    case DType::u8: return ncclUint8;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::i4: break;
  }
  throw InternalError("an NCCL transfer of an unchecked dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

// Waits until `comm` has finished what it was last asked (a non-blocking
// communicator answers ncclInProgress meanwhile), at most `timeout`: empty
// when it has, else why not (the caller aborts the communicator).
std::string wait_ready(ncclComm_t comm, const std::string& what,
                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
    if (state == ncclSuccess) return {};
    if (state != ncclInProgress) return what + ": NCCL reported " + ncclGetErrorString(state);
    if (Clock::now() > deadline) {
      return what + ": not every rank took part within " + std::to_string(timeout.count()) + " ms";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A communicator being made that did not become ready: aborted, and why thrown.
void give_up_on(ncclComm_t comm, const std::string& why) {
  ncclCommAbort(comm);
  throw CommError(why);
}

ncclConfig_t non_blocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// One rank's NCCL communicator on its device.
class NcclGroup {
 public:
  NcclGroup(ncclComm_t comm, int device, CommOptions options)
      : comm_(comm), device_(device), options_(options) {
    LOOM_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
    LOOM_NCCL_CHECK(ncclCommCount(comm_, &size_));
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  ~NcclGroup() {
    if (aborted_) return;
    // Finalizing waits for the communicator's work (bounded by the
    // timeout); a communicator that cannot finish is aborted instead.
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto deadline = Clock::now() + options_.timeout;
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    if (switched) cudaSetDevice(previous);
  }

  ncclComm_t comm() const noexcept { return comm_; }
  int device() const noexcept { return device_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  const CommOptions& options() const noexcept { return options_; }
  unsigned char* token_byte() noexcept { return &token_; }

  // Why the communicator cannot be used, or empty.
  std::string unusable() {
    std::lock_guard lock(mutex_);
    return why_;
  }

  // Op::overdue for one of this communicator's collectives: past the
  // timeout, or once NCCL reports an error, the communicator is aborted (its
  // kernels end) and the reason returned.
  std::string overdue(std::string_view name, std::chrono::nanoseconds waited) {
    if (std::string why = unusable(); !why.empty()) return why;
    // Never wait here (the scheduling thread): a split in progress is asked
    // about on the next poll.
    std::unique_lock calls(calls_, std::try_to_lock);
    if (!calls.owns_lock()) return {};
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
    if (state != ncclSuccess && state != ncclInProgress) {
      return abort(std::string(name) + ": NCCL reported " + ncclGetErrorString(state));
    }
    if (waited < options_.timeout) return {};
    return abort(std::string(name) + " did not complete within " +
                 std::to_string(options_.timeout.count()) +
                 " ms of being issued: some rank did not take part (it failed, exited, or "
                 "called another collective)");
  }

  // After an enqueue: NCCL may still be enqueueing (non-blocking). Past the
  // timeout, or on an NCCL error, the communicator is aborted.
  // @throws CommError.
  void settle(const std::string& what) {
    if (std::string why = wait_ready(comm_, what, options_.timeout); !why.empty()) {
      throw CommError(abort(std::move(why)));
    }
  }

  // Held around every call on the communicator: NCCL's are not thread-safe,
  // and a split (the caller's thread) meets collectives and aborts (the
  // scheduling thread). Recursive: an abort happens inside a held call.
  std::unique_lock<std::recursive_mutex> lock_calls() { return std::unique_lock(calls_); }

  std::string abort(std::string why) {
    auto calls = lock_calls();
    std::lock_guard lock(mutex_);
    if (!why_.empty()) return why_;
    why_ = std::move(why) + "; the communicator is aborted";
    aborted_ = true;
    ncclCommAbort(comm_);
    return why_;
  }

 private:
  ncclComm_t comm_;
  int device_;
  CommOptions options_;
  std::recursive_mutex calls_;
  std::mutex mutex_;
  std::string why_;
  std::atomic<bool> aborted_{false};
  int rank_ = 0;
  int size_ = 1;
  unsigned char token_ = 0;
};

class NcclOp : public Collective {
 public:
  NcclOp(std::shared_ptr<NcclGroup> group, Tensor token)
      : group_(std::move(group)), token_(std::move(token)) {}
  const void* communicator() const noexcept override { return group_.get(); }
  bool has_cpu() const noexcept override { return false; }
  std::string overdue(std::chrono::nanoseconds waited) const override {
    return group_->overdue(name(), waited);
  }
  void run_cpu() const override {
    throw InvalidArgument(std::string(name()) + ": the nccl backend runs on a GPU only");
  }

 protected:
  void require_usable() const {
    if (std::string why = group_->unusable(); !why.empty()) {
      throw CommError(std::string(name()) + ": the communicator is unusable since " + why);
    }
  }
  void require_device(const Tensor& t) const {
    if (!t.memory().is_device() || t.memory().device() != group_->device()) {
      throw InvalidArgument(std::string(name()) + ": the nccl backend takes tensors on device " +
                            std::to_string(group_->device()) + ", got " + t.describe());
    }
  }
  static cudaStream_t stream_of(const ExecutionContext& ctx) noexcept {
    return static_cast<cudaStream_t>(ctx.native_stream());
  }

  std::shared_ptr<NcclGroup> group_;
  Tensor token_;
};

class NcclCollective final : public NcclOp {
 public:
  NcclCollective(std::shared_ptr<NcclGroup> group, Tensor token, CollectiveSpec spec, Tensor in,
                 Tensor out)
      : NcclOp(std::move(group), std::move(token)),
        spec_(spec),
        in_(std::move(in)),
        out_(std::move(out)) {}

  std::string_view name() const noexcept override { return name_of(spec_.kind); }
  std::vector<Tensor> reads() const override { return {in_}; }
  std::vector<Tensor> writes() const override { return {out_, token_}; }
  void validate() const override {
    require_device(in_);
    require_device(out_);
    same_memory_at_submit(name_of(spec_.kind), in_, out_);
  }

  void run_cuda(const ExecutionContext& ctx) const override {
    NcclGroup& g = *group_;
    auto calls = g.lock_calls();
    require_usable();
    const cudaStream_t stream = stream_of(ctx);
    const void* in = input(ctx);
    void* out = out_.data();
    const ncclDataType_t type = nccl_type(spec_.dtype);
    const auto in_count = static_cast<std::size_t>(spec_.in_count);
    const auto out_count = static_cast<std::size_t>(spec_.out_count);
    switch (spec_.kind) {
      case CollectiveKind::all_reduce:
        LOOM_NCCL_CHECK(
            ncclAllReduce(in, out, out_count, type, nccl_op(spec_.op), g.comm(), stream));
        break;
      case CollectiveKind::all_gather:
        LOOM_NCCL_CHECK(ncclAllGather(in, out, in_count, type, g.comm(), stream));
        break;
      case CollectiveKind::reduce_scatter:
        LOOM_NCCL_CHECK(
            ncclReduceScatter(in, out, out_count, type, nccl_op(spec_.op), g.comm(), stream));
        break;
      case CollectiveKind::broadcast:
        LOOM_NCCL_CHECK(ncclBroadcast(out, out, out_count, type, spec_.root, g.comm(), stream));
        break;
      case CollectiveKind::ring_exchange: {
        if (g.size() == 1) {
          if (out_.nbytes() != 0) {
            LOOM_CUDA_CHECK(
                cudaMemcpyAsync(out, in, out_.nbytes(), cudaMemcpyDeviceToDevice, stream));
          }
          return;
        }
        const int next = (g.rank() + 1) % g.size();
        const int previous = (g.rank() + g.size() - 1) % g.size();
        LOOM_NCCL_CHECK(ncclGroupStart());
        LOOM_NCCL_CHECK(ncclSend(in, in_count, type, next, g.comm(), stream));
        LOOM_NCCL_CHECK(ncclRecv(out, out_count, type, previous, g.comm(), stream));
        LOOM_NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
    g.settle(name_of(spec_.kind));
  }

 private:
  // NCCL's in-place forms: the input where NCCL expects it in the output.
  bool nccl_in_place() const noexcept {
    const auto* in = static_cast<const unsigned char*>(in_.data());
    const auto* out = static_cast<const unsigned char*>(out_.data());
    const auto rank = static_cast<std::size_t>(group_->rank());
    switch (spec_.kind) {
      case CollectiveKind::all_reduce:
      case CollectiveKind::broadcast: return in == out;
      case CollectiveKind::all_gather: return in == out + rank * in_.nbytes();
      case CollectiveKind::reduce_scatter: return out == in + rank * out_.nbytes();
      case CollectiveKind::ring_exchange: return false;
    }
    return false;
  }

  // The input, copied aside (stream-ordered) when it overlaps the output in
  // a way NCCL does not take.
  const void* input(const ExecutionContext& ctx) const {
    if (nccl_in_place() || !overlaps(in_, out_)) return in_.data();
    void* copy = ctx.workspace(in_.nbytes());
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(copy, in_.data(), in_.nbytes(), cudaMemcpyDeviceToDevice, stream_of(ctx)));
    return copy;
  }

  CollectiveSpec spec_;
  Tensor in_;
  Tensor out_;
};

class NcclPointToPoint final : public NcclOp {
 public:
  NcclPointToPoint(std::shared_ptr<NcclGroup> group, Tensor token, bool sending, Tensor data,
                   int peer)
      : NcclOp(std::move(group), std::move(token)),
        sending_(sending),
        data_(std::move(data)),
        peer_(peer) {}

  std::string_view name() const noexcept override { return sending_ ? "send" : "recv"; }
  std::vector<Tensor> reads() const override {
    if (sending_) return {data_};
    return {};
  }
  std::vector<Tensor> writes() const override {
    if (sending_) return {token_};
    return {data_, token_};
  }
  void validate() const override { require_device(data_); }
  void run_cuda(const ExecutionContext& ctx) const override {
    NcclGroup& g = *group_;
    auto calls = g.lock_calls();
    require_usable();
    const auto count = static_cast<std::size_t>(data_.numel());
    const ncclDataType_t type = nccl_type(data_.dtype());
    if (sending_) {
      LOOM_NCCL_CHECK(ncclSend(data_.data(), count, type, peer_, g.comm(), stream_of(ctx)));
    } else {
      LOOM_NCCL_CHECK(ncclRecv(data_.data(), count, type, peer_, g.comm(), stream_of(ctx)));
    }
    g.settle(sending_ ? "send" : "recv");
  }

 private:
  bool sending_;
  Tensor data_;
  int peer_;
};

class NcclCommunicator final : public SpecCommunicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<NcclGroup> group)
      : group_(std::move(group)), token_(token_over(group_->token_byte())) {}

  int rank() const noexcept override { return group_->rank(); }
  int size() const noexcept override { return group_->size(); }
  std::string_view backend() const noexcept override { return "nccl"; }

  std::shared_ptr<Communicator> split(int colour, int key) const override {
    NcclGroup& g = *group_;
    DeviceGuard device(g.device());
    auto calls = g.lock_calls();
    if (std::string why = g.unusable(); !why.empty()) {
      throw CommError("split: the communicator is unusable since " + why);
    }
    ncclConfig_t config = non_blocking();
    ncclComm_t part = nullptr;
    LOOM_NCCL_CHECK(ncclCommSplit(g.comm(), colour, key, &part, &config));
    g.settle("split");
    if (part == nullptr) throw InternalError("ncclCommSplit gave no communicator");
    if (std::string why = wait_ready(part, "split", g.options().timeout); !why.empty()) {
      give_up_on(part, why);
    }
    return std::make_shared<NcclCommunicator>(
        std::make_shared<NcclGroup>(part, g.device(), g.options()));
  }

 private:
  CollectivePtr collective(const CollectiveSpec& spec, const Tensor& in,
                           const Tensor& out) const override {
    return std::make_shared<NcclCollective>(group_, token_, spec, in, out);
  }
  CollectivePtr point_to_point(bool sending, const Tensor& data, int peer) const override {
    return std::make_shared<NcclPointToPoint>(group_, token_, sending, data, peer);
  }

  std::shared_ptr<NcclGroup> group_;
  Tensor token_;
};

std::shared_ptr<Communicator> make_communicator(ncclComm_t comm, int device,
                                                const CommOptions& options, const char* what) {
  if (std::string why = wait_ready(comm, what, options.timeout); !why.empty()) {
    give_up_on(comm, why);
  }
  return std::make_shared<NcclCommunicator>(std::make_shared<NcclGroup>(comm, device, options));
}

}  // namespace

std::shared_ptr<Communicator> nccl_world(int device, bool over_mpi, const CommOptions& options) {
  int rank = 0;
  int ranks = 1;
  ncclUniqueId id{};
#if defined(LOOM_HAS_MPI)
  if (over_mpi) {
    rank = mpi_world_rank();
    ranks = mpi_world_size();
    if (rank == 0) LOOM_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi_world_broadcast(&id, sizeof id, 0, options);
  }
#else
  if (over_mpi) {
    throw CommError("nccl across processes: this build of loom has no MPI to bootstrap NCCL with");
  }
#endif
  if (ranks == 1) LOOM_NCCL_CHECK(ncclGetUniqueId(&id));
  DeviceGuard guard(device);
  ncclConfig_t config = non_blocking();
  ncclComm_t comm = nullptr;
  LOOM_NCCL_CHECK(ncclCommInitRankConfig(&comm, ranks, id, rank, &config));
  return make_communicator(comm, device, options, "nccl communicator");
}

bool gpus_are_distinct(int device, const CommOptions& options) {
#if defined(LOOM_HAS_MPI)
  char bus[64] = {};
  LOOM_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto key =
      static_cast<std::int64_t>(std::hash<std::string>{}(std::string(host) + "/" + bus));
  auto all = mpi_world_all_gather(key, options);
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) == all.end();
#else
  (void)device;
  (void)options;
  return false;
#endif
}

}  // namespace loom::detail

namespace loom {

std::vector<std::shared_ptr<Communicator>> nccl_communicators(const std::vector<int>& devices,
                                                              CommOptions options) {
  if (devices.empty()) throw InvalidArgument("nccl_communicators: no devices");
  if (options.timeout.count() <= 0) {
    throw InvalidArgument("nccl_communicators: a timeout of " +
                          std::to_string(options.timeout.count()) + " ms");
  }
  int count = 0;
  LOOM_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= count) {
      throw InvalidArgument("nccl_communicators: device " + std::to_string(devices[i]) +
                            " does not exist; there are " + std::to_string(count));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (devices[i] == devices[j]) {
        throw InvalidArgument("nccl_communicators: device " + std::to_string(devices[i]) +
                              " is listed twice (NCCL takes one rank a GPU)");
      }
    }
  }
  ncclUniqueId id{};
  LOOM_NCCL_CHECK(ncclGetUniqueId(&id));
  const int ranks = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  LOOM_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < ranks; ++r) {
    detail::DeviceGuard guard(devices[static_cast<std::size_t>(r)]);
    ncclConfig_t config = detail::non_blocking();
    LOOM_NCCL_CHECK(
        ncclCommInitRankConfig(&comms[static_cast<std::size_t>(r)], ranks, id, r, &config));
  }
  LOOM_NCCL_CHECK(ncclGroupEnd());
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < ranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      out.push_back(detail::make_communicator(comms[i], devices[i], options, "nccl_communicators"));
    } catch (...) {
      for (std::size_t j = i + 1; j < comms.size(); ++j) ncclCommAbort(comms[j]);
      throw;
    }
  }
  return out;
}

}  // namespace loom
