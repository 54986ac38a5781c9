// The mpi backend (comm.hpp): one process a rank, collectives over MPI on
// host memory, device tensors staged through pinned host memory. A
// collective runs on a host worker (Op::runs_on_host) and blocks there:
//  1. the ranks compare what they called (one small all-gather), so that a
//     mismatch is reported on every rank instead of corrupting or hanging;
//  2. the data moves with MPI's non-blocking call, tested until done or
//     until the timeout, which leaves the communicator unusable (MPI cannot
//     take back a collective that some rank never joined).
#include "comm/mpi_comm.hpp"

#include "comm/collective_spec.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_session.hpp"
#include "comm/shared_device.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <loom/error.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace loom::detail {
namespace {

// Appends n's decimal digits without a temporary string.
void append_number(std::string& s, std::uint64_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof(digits), n).ptr;
  s.append(digits, end);
}

using Clock = std::chrono::steady_clock;

// A send's tag says its dtype, so that a recv can tell a mismatch.
constexpr int kTagBase = 100;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    default: return MPI_BYTE;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

// Elements moved with mpi_type(t): MPI_BYTE moves bytes.
std::int64_t mpi_elements(DType t, std::int64_t count) {
  return mpi_type(t) == MPI_BYTE ? count * static_cast<std::int64_t>(element_bytes(t)) : count;
}

// MPI counts are ints (MPI 3.1).
int mpi_count(const char* call, DType t, std::int64_t count) {
  const std::int64_t n = mpi_elements(t, count);
  if (n > INT_MAX) {
    throw InvalidArgument(std::string(call) + ": the mpi backend moves at most " +
                          std::to_string(INT_MAX) + " elements of " + std::string(to_string(t)) +
                          " a call; split the tensor");
  }
  return static_cast<int>(n);
}

// What a timed-out MPI request may still write into: kept for the process's
// life, reachable from here (so that leak checkers see it kept, not lost).
void keep_forever(std::shared_ptr<void> kept) {
  static std::mutex mutex;
  static auto* graveyard = new std::vector<std::shared_ptr<void>>();
  std::lock_guard lock(mutex);
  graveyard->push_back(std::move(kept));
}

template <class T>
void keep_forever(std::unique_ptr<T> kept) {
  keep_forever(std::shared_ptr<void>(std::move(kept)));
}

// Pinned host memory that device tensors stage through: grown when a larger
// tensor comes, kept until the communicator goes.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_ != nullptr) LOOM_CUDA_ASSERT(cudaFreeHost(data_));
  }
  unsigned char* get(std::size_t bytes) {
    if (bytes > bytes_) {
      if (data_ != nullptr) LOOM_CUDA_CHECK(cudaFreeHost(data_));
      data_ = nullptr;
      bytes_ = 0;
      void* p = nullptr;
      // Portable: pinned for every device this process uses, whichever is current.
      LOOM_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
      data_ = static_cast<unsigned char*>(p);
      bytes_ = bytes;
    }
    return data_;
  }
  // Never freed: an MPI request that timed out may still write into it.
  void leak() noexcept { data_ = nullptr; }

 private:
  unsigned char* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// One rank's view of an MPI communicator: a communicator for the data, and
// a second one for splits (made on the caller's thread while collectives run
// on workers: MPI orders collectives by communicator, not by thread).
class MpiGroup final : public RankExchange {
 public:
  MpiGroup(MPI_Comm data, MPI_Comm control, CommOptions options)
      : data_(data), control_(control), options_(options) {
    auto lock = MpiSession::get().lock();
    LOOM_MPI_CHECK(MPI_Comm_rank(data_, &rank_));
    LOOM_MPI_CHECK(MPI_Comm_size(data_, &size_));
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  ~MpiGroup() override {
    if (!broken_.empty()) {
      keep_forever(std::make_unique<std::vector<unsigned char>>(std::move(exchange_mine_)));
      keep_forever(std::make_unique<std::vector<unsigned char>>(std::move(exchange_all_)));
      // A request that timed out may still complete into these buffers (and
      // the abandoned tensors): they stay allocated for the process's life.
      staging_in_.leak();
      staging_out_.leak();
      keep_forever(std::make_unique<std::vector<unsigned char>>(std::move(scratch_)));
      keep_forever(std::make_unique<std::vector<std::int64_t>>(std::move(all_words_)));
      keep_forever(std::make_unique<std::vector<std::int64_t>>(std::move(my_words_)));
      keep_forever(std::make_unique<std::vector<std::int64_t>>(std::move(split_words_)));
      keep_forever(std::make_unique<std::vector<Tensor>>(std::move(abandoned_)));
    }
    // Freeing waits for nothing; after MPI_Finalize it is not allowed.
    if (!MpiSession::finalized()) {
      auto lock = MpiSession::get().lock();
      if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
      if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
    }
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  MPI_Comm data() const noexcept { return data_; }
  MPI_Comm control() const noexcept { return control_; }
  const CommOptions& options() const noexcept { return options_; }
  unsigned char* token_byte() noexcept { return &token_; }

  // @throws CommError naming `call` when an earlier collective left the
  // communicator unusable. From any thread (split() calls it on the user's
  // while collectives run on workers).
  void check_usable(const char* call) {
    std::lock_guard lock(state_);
    if (!broken_.empty()) {
      throw CommError(std::string(call) + ": the communicator is unusable since " + broken_);
    }
  }

  // The next collective's number and a name for messages ("collective #7
  // (send) to rank 2" with a direction and a peer), written into a buffer
  // the communicator keeps: its collectives (ops ordered by its token, run
  // on host workers) run one at a time, and once the buffer has grown,
  // naming one allocates nothing. Valid until the next begin(); only
  // collectives call it. @throws CommError when an earlier collective left
  // the communicator unusable.
  const std::string& begin(const char* name, const char* direction = nullptr, int peer = -1) {
    const std::uint64_t seq = sequence_.fetch_add(1);
    // Room for the longest: 20 digits, a name, a direction and 10 digits.
    if (what_.capacity() < 128) what_.reserve(128);
    what_.clear();
    what_ += "collective #";
    append_number(what_, seq);
    what_ += " (";
    what_ += name;
    what_ += ')';
    if (direction != nullptr) {
      what_ += direction;
      append_number(what_, static_cast<std::uint64_t>(peer));
    }
    std::lock_guard lock(state_);
    if (!broken_.empty()) {
      throw CommError(what_ + ": the communicator is unusable since " + broken_);
    }
    return what_;
  }

  // Tests `requests` until all are done; past the timeout the communicator
  // is unusable and `what` fails. @throws CommError.
  // MPI moves a large message a fragment for each test (no progress thread
  // in most MPIs): while `bytes` may still be moving, it tests without
  // napping, yielding the core between tests.
  void wait(MPI_Request* requests, int count, const std::string& what, std::size_t bytes = 0) {
    auto& session = MpiSession::get();
    const auto start = Clock::now();
    const auto deadline = start + options_.timeout;
    // 2 ms, plus the time the bytes take at 1 GB/s.
    const auto busy = std::chrono::microseconds(2000 + bytes / 1000);
    for (int spins = 0;; ++spins) {
      int done = 0;
      {
        auto lock = session.lock();
        LOOM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
      }
      if (done != 0) return;
      const auto now = Clock::now();
      if (now > deadline) {
        const std::string why =
            what + " did not complete within " + std::to_string(options_.timeout.count()) +
            " ms: some rank did not reach it (it failed before it, exited, or is stuck)";
        {
          std::lock_guard lock(state_);
          if (broken_.empty()) broken_ = why;
        }
        throw CommError(why + "; the communicator is unusable from now on");
      }
      // Then nap, so that a rank waiting long for another leaves the cores
      // to the ranks that share them.
      if (now - start < busy) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(spins < 20000 ? 20 : 200));
      }
    }
  }

  // True once a timeout left a request behind.
  bool broken() {
    std::lock_guard lock(state_);
    return !broken_.empty();
  }
  // Makes the communicator unusable (a timeout MPI cannot take back).
  void break_with(const std::string& why) {
    std::lock_guard lock(state_);
    if (broken_.empty()) broken_ = why;
  }
  // Tensors a timed-out request may still write or read: kept alive.
  void abandon(std::vector<Tensor> tensors) {
    std::lock_guard lock(state_);
    for (auto& t : tensors) abandoned_.push_back(std::move(t));
  }

  // Every rank's spec, compared: @throws CommError on every rank when they
  // differ. Returns whether every rank's tensors are on the same GPU (the
  // same `where`, not host memory).
  bool agree(const CollectiveSpec& mine, const std::array<std::int64_t, 2>& where,
             const std::string& what) {
    constexpr std::size_t kWords = CollectiveSpec::kWords + 2;
    const auto words = mine.words();
    my_words_.assign(words.begin(), words.end());
    my_words_.insert(my_words_.end(), where.begin(), where.end());
    all_words_.resize(kWords * static_cast<std::size_t>(size_));
    all_gather_bytes(my_words_.data(), all_words_.data(), kWords * sizeof(std::int64_t), what);
    const CollectiveSpec first = CollectiveSpec::from_words(all_words_.data());
    bool one_device = where[0] != 0 || where[1] != 0;
    for (int r = 0; r < size_; ++r) {
      const std::int64_t* theirs = all_words_.data() + kWords * static_cast<std::size_t>(r);
      const CollectiveSpec other = CollectiveSpec::from_words(theirs);
      if (other != first) {
        throw CommError(what + ": the ranks disagree: rank 0 called " + first.describe() +
                        ", rank " + std::to_string(r) + " " + other.describe());
      }
      one_device = one_device && theirs[CollectiveSpec::kWords] == where[0] &&
                   theirs[CollectiveSpec::kWords + 1] == where[1];
    }
    return one_device;
  }

  void all_gather_bytes(const void* mine, void* all, std::size_t bytes,
                        const std::string& what) override {
    const auto* in = static_cast<const unsigned char*>(mine);
    exchange_mine_.assign(in, in + bytes);
    exchange_all_.resize(bytes * static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Iallgather(exchange_mine_.data(), static_cast<int>(bytes), MPI_BYTE,
                                    exchange_all_.data(), static_cast<int>(bytes), MPI_BYTE, data_,
                                    &request));
    }
    wait(&request, 1, what);
    std::memcpy(all, exchange_all_.data(), exchange_all_.size());
  }

  void barrier(const std::string& what) override {
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Ibarrier(data_, &request));
    }
    wait(&request, 1, what);
  }

  // Device windows for ranks that share a GPU (one collective at a time).
  SharedDeviceWindows& windows() noexcept { return windows_; }

  // Staging for device tensors and scratch for overlapping host ones, used
  // by one collective at a time (a communicator's collectives are ordered).
  PinnedBuffer& staging_in() noexcept { return staging_in_; }
  PinnedBuffer& staging_out() noexcept { return staging_out_; }
  std::vector<unsigned char>& scratch() noexcept { return scratch_; }
  // A split's wishes: this rank's, and every rank's (kept here, not on a
  // stack: a request that times out may still write them).
  std::array<std::int64_t, 2>& split_wish() noexcept { return split_wish_; }
  std::vector<std::int64_t>& split_words() noexcept { return split_words_; }

 private:
  MPI_Comm data_;
  MPI_Comm control_;
  CommOptions options_;
  int rank_ = 0;
  int size_ = 1;
  unsigned char token_ = 0;
  std::atomic<std::uint64_t> sequence_{0};
  std::string what_;  // begin()'s
  std::mutex state_;
  std::string broken_;
  std::vector<std::int64_t> my_words_;
  std::vector<std::int64_t> all_words_;
  std::array<std::int64_t, 2> split_wish_{};
  std::vector<std::int64_t> split_words_;
  std::vector<Tensor> abandoned_;
  PinnedBuffer staging_in_;
  PinnedBuffer staging_out_;
  std::vector<unsigned char> scratch_;
  std::vector<unsigned char> exchange_mine_;
  std::vector<unsigned char> exchange_all_;
  SharedDeviceWindows windows_;
};

// A tensor's bytes on the host while a collective runs: the tensor itself,
// or a pinned copy that goes back to the device afterwards.
class HostView {
 public:
  HostView(const Tensor& t, PinnedBuffer& staging, bool load) : tensor_(t) {
    if (!t.memory().is_device()) {
      bytes_ = static_cast<unsigned char*>(t.data());
      return;
    }
    bytes_ = staging.get(t.nbytes());
    if (load && t.nbytes() != 0) {
      DeviceGuard device(t.memory().device());
      LOOM_CUDA_CHECK(cudaMemcpy(bytes_, t.data(), t.nbytes(), cudaMemcpyDeviceToHost));
    }
  }
  unsigned char* bytes() const noexcept { return bytes_; }
  bool staged() const noexcept { return tensor_.memory().is_device(); }
  // Sends the result back to the device tensor.
  void store() const {
    if (!staged() || tensor_.nbytes() == 0) return;
    DeviceGuard device(tensor_.memory().device());
    LOOM_CUDA_CHECK(cudaMemcpy(tensor_.data(), bytes_, tensor_.nbytes(), cudaMemcpyHostToDevice));
  }

 private:
  Tensor tensor_;
  unsigned char* bytes_ = nullptr;
};

// What every collective of the mpi backend shares.
class MpiOp : public Collective {
 public:
  MpiOp(std::shared_ptr<MpiGroup> group, Tensor token)
      : group_(std::move(group)), token_(std::move(token)) {}
  const void* communicator() const noexcept override { return group_.get(); }
  bool runs_on_host() const noexcept override { return true; }
  bool capturable() const noexcept override { return false; }
  void run_cuda(const ExecutionContext&) const override {
    throw InternalError(std::string(name()) + ": an mpi collective was given a stream");
  }

 protected:
  std::shared_ptr<MpiGroup> group_;
  Tensor token_;
};

class MpiCollective final : public MpiOp {
 public:
  MpiCollective(std::shared_ptr<MpiGroup> group, Tensor token, CollectiveSpec spec, Tensor in,
                Tensor out)
      : MpiOp(std::move(group), std::move(token)),
        spec_(spec),
        in_(std::move(in)),
        out_(std::move(out)) {
    in_count_ = mpi_count(name_of(spec_.kind), spec_.dtype, spec_.in_count);
    out_count_ = mpi_count(name_of(spec_.kind), spec_.dtype, spec_.out_count);
  }

  std::string_view name() const noexcept override { return name_of(spec_.kind); }
  std::vector<Tensor> reads() const override { return {in_}; }
  std::vector<Tensor> writes() const override { return {out_, token_}; }
  void validate() const override { same_memory_at_submit(name_of(spec_.kind), in_, out_); }

  void run_cpu() const override {
    MpiGroup& g = *group_;
    const std::string& what = g.begin(name_of(spec_.kind));
    const bool one_device = g.agree(spec_, where(), what);
    if (one_device && through_windows(g, what)) return;
    const bool in_place = in_place_here();
    const bool load =
        in_place && (spec_.kind != CollectiveKind::broadcast || g.rank() == spec_.root);
    const HostView out(out_, g.staging_out(), load);
    const unsigned char* in = in_place ? nullptr : input();
    std::array<MPI_Request, 2> requests = issue(in, out.bytes(), in_place);
    try {
      g.wait(requests.data(), static_cast<int>(requests.size()), what,
             in_.nbytes() + out_.nbytes());
    } catch (const CommError&) {
      g.abandon({in_, out_});
      throw;
    }
    out.store();
  }

 private:
  // Moves the data through the ranks' device windows; false when they
  // cannot be used (then on every rank). A failure on this rank alone
  // leaves the others waiting at a barrier: they time out, and this
  // communicator is unusable here too.
  bool through_windows(MpiGroup& g, const std::string& what) const {
    try {
      return g.windows().run(g, where(), spec_, in_, out_, what);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      g.break_with(what + " failed on rank " + std::to_string(g.rank()) + ": " + e.what());
      throw;
    }
  }

  // The GPU that both tensors are on; zeros when they are not on one GPU,
  // or overlap in a way the windows do not take (they go a chunk at a time:
  // out may be in itself, or in's block of out, but not shifted against it).
  std::array<std::int64_t, 2> where() const {
    const auto in = device_identity(in_);
    if (in != device_identity(out_) || !windows_take_overlap()) return {};
    return in;
  }

  bool windows_take_overlap() const noexcept {
    if (!overlaps(in_, out_) || in_.data() == out_.data()) return true;
    const auto* in = static_cast<const unsigned char*>(in_.data());
    const auto* out = static_cast<const unsigned char*>(out_.data());
    const auto rank = static_cast<std::size_t>(group_->rank());
    switch (spec_.kind) {
      case CollectiveKind::all_gather: return in == out + rank * in_.nbytes();
      case CollectiveKind::reduce_scatter: return out == in + rank * out_.nbytes();
      default: return false;
    }
  }

  // Whether MPI takes the input from the output (MPI_IN_PLACE): it is where
  // MPI's in-place form expects it. A broadcast always is.
  bool in_place_here() const noexcept {
    const auto* in = static_cast<const unsigned char*>(in_.data());
    const auto* out = static_cast<const unsigned char*>(out_.data());
    switch (spec_.kind) {
      case CollectiveKind::all_reduce: return in == out;
      // The input is larger than the output: in place only where no staging
      // copy of the output stands for it.
      case CollectiveKind::reduce_scatter: return in == out && !in_.memory().is_device();
      case CollectiveKind::all_gather:
        return in == out + static_cast<std::size_t>(group_->rank()) * in_.nbytes();
      case CollectiveKind::broadcast: return true;
      case CollectiveKind::ring_exchange: return false;
    }
    return false;
  }

  // The input's bytes on the host, apart from the output's (MPI forbids an
  // overlap other than in place).
  const unsigned char* input() const {
    MpiGroup& g = *group_;
    if (in_.memory().is_device()) return HostView(in_, g.staging_in(), true).bytes();
    const auto* in = static_cast<const unsigned char*>(in_.data());
    if (!overlaps(in_, out_)) return in;
    auto& scratch = g.scratch();
    scratch.assign(in, in + in_.nbytes());
    return scratch.data();
  }

  std::array<MPI_Request, 2> issue(const unsigned char* in, unsigned char* out,
                                   bool in_place) const {
    MpiGroup& g = *group_;
    const MPI_Datatype type = mpi_type(spec_.dtype);
    const void* send = in_place ? MPI_IN_PLACE : in;
    std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    auto lock = MpiSession::get().lock();
    switch (spec_.kind) {
      case CollectiveKind::all_reduce:
        LOOM_MPI_CHECK(
            MPI_Iallreduce(send, out, out_count_, type, mpi_op(spec_.op), g.data(), &requests[0]));
        break;
      case CollectiveKind::all_gather:
        LOOM_MPI_CHECK(
            MPI_Iallgather(send, in_count_, type, out, in_count_, type, g.data(), &requests[0]));
        break;
      case CollectiveKind::reduce_scatter:
        LOOM_MPI_CHECK(MPI_Ireduce_scatter_block(send, out, out_count_, type, mpi_op(spec_.op),
                                                 g.data(), &requests[0]));
        break;
      case CollectiveKind::broadcast:
        LOOM_MPI_CHECK(MPI_Ibcast(out, out_count_, type, spec_.root, g.data(), &requests[0]));
        break;
      case CollectiveKind::ring_exchange: {
        const int next = (g.rank() + 1) % g.size();
        const int previous = (g.rank() + g.size() - 1) % g.size();
        LOOM_MPI_CHECK(
            MPI_Irecv(out, out_count_, type, previous, kTagBase, g.data(), &requests[0]));
        LOOM_MPI_CHECK(MPI_Isend(in, in_count_, type, next, kTagBase, g.data(), &requests[1]));
        break;
      }
    }
    return requests;
  }

  CollectiveSpec spec_;
  Tensor in_;
  Tensor out_;
  int in_count_ = 0;
  int out_count_ = 0;
};

class MpiPointToPoint final : public MpiOp {
 public:
  MpiPointToPoint(std::shared_ptr<MpiGroup> group, Tensor token, bool sending, Tensor data,
                  int peer)
      : MpiOp(std::move(group), std::move(token)),
        sending_(sending),
        data_(std::move(data)),
        peer_(peer),
        bytes_(mpi_count(sending ? "send" : "recv", DType::u8,
                         static_cast<std::int64_t>(data_.nbytes()))) {}

  std::string_view name() const noexcept override { return sending_ ? "send" : "recv"; }
  std::vector<Tensor> reads() const override {
    if (sending_) return {data_};
    return {};
  }
  std::vector<Tensor> writes() const override {
    if (sending_) return {token_};
    return {data_, token_};
  }

  void run_cpu() const override {
    MpiGroup& g = *group_;
    const std::string& what =
        sending_ ? g.begin("send", " to rank ", peer_) : g.begin("recv", " from rank ", peer_);
    if (sending_) {
      const HostView data(data_, g.staging_in(), true);
      MPI_Request request = MPI_REQUEST_NULL;
      {
        auto lock = MpiSession::get().lock();
        // Synchronous: done once the matching recv has begun taking it.
        LOOM_MPI_CHECK(
            MPI_Issend(data.bytes(), bytes_, MPI_BYTE, peer_, tag(), g.data(), &request));
      }
      try {
        g.wait(&request, 1, what, data_.nbytes());
      } catch (const CommError&) {
        g.abandon({data_});
        throw;
      }
    } else {
      receive(g, what);
    }
  }

 private:
  int tag() const noexcept { return kTagBase + 1 + static_cast<int>(data_.dtype()); }

  void receive(MpiGroup& g, const std::string& what) const {
    const HostView data(data_, g.staging_out(), false);
    // Probe first: a message of another size or dtype is taken off the
    // line (so that the next one matches the next recv) and reported.
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    const auto deadline = Clock::now() + g.options().timeout;
    for (;;) {
      int found = 0;
      {
        auto lock = MpiSession::get().lock();
        LOOM_MPI_CHECK(MPI_Improbe(peer_, MPI_ANY_TAG, g.data(), &found, &message, &status));
      }
      if (found != 0) break;
      if (Clock::now() > deadline) {
        // A message that comes later would be taken by the next recv: the
        // order of this pair's messages is lost, and the communicator with it.
        const std::string why =
            what + ": nothing came within " + std::to_string(g.options().timeout.count()) + " ms";
        g.break_with(why);
        throw CommError(why + "; the communicator is unusable from now on");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    int count = 0;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
    }
    if (count != bytes_ || status.MPI_TAG != tag()) {
      std::vector<unsigned char> discard(static_cast<std::size_t>(count));
      {
        auto lock = MpiSession::get().lock();
        LOOM_MPI_CHECK(MPI_Mrecv(discard.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE));
      }
      const int their = status.MPI_TAG - kTagBase - 1;
      throw CommError(what + ": rank " + std::to_string(peer_) + " sent " + std::to_string(count) +
                      " bytes of " + std::string(to_string(static_cast<DType>(their))) +
                      ", this rank expected " + std::to_string(bytes_) + " bytes of " +
                      std::string(to_string(data_.dtype())));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Imrecv(data.bytes(), bytes_, MPI_BYTE, &message, &request));
    }
    try {
      g.wait(&request, 1, what, data_.nbytes());
    } catch (const CommError&) {
      g.abandon({data_});
      throw;
    }
    data.store();
  }

  bool sending_;
  Tensor data_;
  int peer_;
  int bytes_;
};

// A duplicate of `parent` whose errors come back as codes, made without
// blocking past the timeout. @throws CommError.
MPI_Comm duplicate(MPI_Comm parent, const CommOptions& options, const char* what) {
  // On the heap: left behind (never freed) if the duplicate times out, since
  // MPI may still write the handle.
  auto copy = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto lock = MpiSession::get().lock();
    LOOM_MPI_CHECK(MPI_Comm_idup(parent, copy.get(), &request));
  }
  const auto deadline = Clock::now() + options.timeout;
  for (;;) {
    int done = 0;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    }
    if (done != 0) break;
    if (Clock::now() > deadline) {
      keep_forever(std::move(copy));
      throw CommError(std::string(what) + ": not every rank took part within " +
                      std::to_string(options.timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  auto lock = MpiSession::get().lock();
  LOOM_MPI_CHECK(MPI_Comm_set_errhandler(*copy, MPI_ERRORS_RETURN));
  return *copy;
}

class MpiCommunicator final : public SpecCommunicator {
 public:
  explicit MpiCommunicator(std::shared_ptr<MpiGroup> group)
      : group_(std::move(group)), token_(token_over(group_->token_byte())) {}

  int rank() const noexcept override { return group_->rank(); }
  int size() const noexcept override { return group_->size(); }
  std::string_view backend() const noexcept override { return "mpi"; }

  std::shared_ptr<Communicator> split(int colour, int key) const override {
    MpiGroup& g = *group_;
    g.check_usable("split");
    // Everyone's wish first, so that a missing rank fails in bounded time;
    // then the split itself, which no longer waits for anyone. Only the
    // control communicator is used here: the data one belongs to the
    // collectives running on host workers meanwhile.
    g.split_wish() = {colour, key};
    g.split_words().assign(2 * static_cast<std::size_t>(size()), 0);
    MPI_Request request = MPI_REQUEST_NULL;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Iallgather(g.split_wish().data(), 2, MPI_INT64_T, g.split_words().data(),
                                    2, MPI_INT64_T, g.control(), &request));
    }
    g.wait(&request, 1, "split");
    MPI_Comm data = MPI_COMM_NULL;
    MPI_Comm control = MPI_COMM_NULL;
    {
      auto lock = MpiSession::get().lock();
      LOOM_MPI_CHECK(MPI_Comm_split(g.control(), colour, key, &control));
      LOOM_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
      LOOM_MPI_CHECK(MPI_Comm_dup(control, &data));
      LOOM_MPI_CHECK(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN));
    }
    return std::make_shared<MpiCommunicator>(
        std::make_shared<MpiGroup>(data, control, g.options()));
  }

 private:
  CollectivePtr collective(const CollectiveSpec& spec, const Tensor& in,
                           const Tensor& out) const override {
    return std::make_shared<MpiCollective>(group_, token_, spec, in, out);
  }
  CollectivePtr point_to_point(bool sending, const Tensor& data, int peer) const override {
    return std::make_shared<MpiPointToPoint>(group_, token_, sending, data, peer);
  }

  std::shared_ptr<MpiGroup> group_;
  Tensor token_;
};

}  // namespace

std::shared_ptr<Communicator> mpi_world(const CommOptions& options) {
  MpiSession::get();
  MPI_Comm data = duplicate(MPI_COMM_WORLD, options, "mpi communicator");
  MPI_Comm control = MPI_COMM_NULL;
  try {
    control = duplicate(MPI_COMM_WORLD, options, "mpi communicator");
  } catch (...) {
    auto lock = MpiSession::get().lock();
    MPI_Comm_free(&data);
    throw;
  }
  return std::make_shared<MpiCommunicator>(std::make_shared<MpiGroup>(data, control, options));
}

namespace {

// A private duplicate of MPI_COMM_WORLD for one exchange, freed afterwards.
class ScratchWorld {
 public:
  explicit ScratchWorld(const CommOptions& options)
      : comm_(duplicate(MPI_COMM_WORLD, options, "mpi bootstrap")),
        group_(comm_, MPI_COMM_NULL, options) {}
  MpiGroup& group() noexcept { return group_; }

 private:
  MPI_Comm comm_;
  MpiGroup group_;
};

}  // namespace

std::vector<std::int64_t> mpi_world_all_gather(std::int64_t value, const CommOptions& options) {
  MpiSession::get();
  ScratchWorld world(options);
  MpiGroup& g = world.group();
  // On the heap, left behind on a timeout (MPI may still write them).
  auto mine = std::make_unique<std::int64_t>(value);
  auto all = std::make_unique<std::vector<std::int64_t>>(static_cast<std::size_t>(g.size()));
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto lock = MpiSession::get().lock();
    LOOM_MPI_CHECK(MPI_Iallgather(mine.get(), 1, MPI_INT64_T, all->data(), 1, MPI_INT64_T, g.data(),
                                  &request));
  }
  try {
    g.wait(&request, 1, "mpi bootstrap (all-gather)");
  } catch (const CommError&) {
    keep_forever(std::move(mine));
    keep_forever(std::move(all));
    throw;
  }
  return *all;
}

void mpi_world_broadcast(void* data, std::size_t bytes, int root, const CommOptions& options) {
  MpiSession::get();
  ScratchWorld world(options);
  MpiGroup& g = world.group();
  // Through a heap copy, left behind on a timeout (MPI may still write it).
  const auto* bytes_in = static_cast<const unsigned char*>(data);
  auto copy = std::make_unique<std::vector<unsigned char>>(bytes_in, bytes_in + bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  {
    auto lock = MpiSession::get().lock();
    LOOM_MPI_CHECK(
        MPI_Ibcast(copy->data(), static_cast<int>(bytes), MPI_BYTE, root, g.data(), &request));
  }
  try {
    g.wait(&request, 1, "mpi bootstrap (broadcast)");
  } catch (const CommError&) {
    keep_forever(std::move(copy));
    throw;
  }
  std::copy(copy->begin(), copy->end(), static_cast<unsigned char*>(data));
}

int mpi_world_rank() {
  MpiSession::get();
  int rank = 0;
  auto lock = MpiSession::get().lock();
  LOOM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int mpi_world_size() {
  MpiSession::get();
  int size = 1;
  auto lock = MpiSession::get().lock();
  LOOM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

}  // namespace loom::detail
