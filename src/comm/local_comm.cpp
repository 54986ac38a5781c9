// The local backend (comm.hpp): P ranks as threads of one process, host
// tensors, collectives that meet in a rendezvous. A collective is a round:
// each rank brings what it holds (an entry), waits for the others, checks
// that all agree, computes its result into scratch of its own while every
// input is still untouched, waits until every rank has done so, and only
// then writes its output (so an output may be an input of its own or of
// another rank: in place works). Every wait is bounded by the timeout.
#include "comm/collective_spec.hpp"
#include "comm/device_reduce.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"

#include <loom/comm.hpp>
#include <loom/error.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace loom::detail {
namespace {

// What one rank brings to a collective: its spec (which the ranks compare)
// and its input.
struct Entry {
  CollectiveSpec spec;
  const unsigned char* in = nullptr;
  unsigned char* out = nullptr;
  int device = -1;  ///< the GPU the tensors are on, -1 for host memory
};

using Kind = CollectiveKind;

// dst[i] = the ranks' src[offset + i], combined in rank order (the same
// order, so the same rounding, on every rank), a rank at a time over the
// whole block so that each pass streams through memory.
template <class T, class Combine>
void reduce_into(unsigned char* dst, const std::vector<const unsigned char*>& srcs,
                 std::int64_t offset, std::int64_t count, Combine combine) {
  auto* out = reinterpret_cast<T*>(dst);
  const T* first = reinterpret_cast<const T*>(srcs[0]) + offset;
  std::copy(first, first + count, out);
  for (std::size_t q = 1; q < srcs.size(); ++q) {
    const T* in = reinterpret_cast<const T*>(srcs[q]) + offset;
    for (std::int64_t i = 0; i < count; ++i) out[i] = combine(out[i], in[i]);
  }
}

template <class T>
void reduce_into(unsigned char* dst, const std::vector<const unsigned char*>& srcs,
                 std::int64_t offset, std::int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return reduce_into<T>(dst, srcs, offset, count,
                            [](T a, T b) { return static_cast<T>(a + b); });
    case ReduceOp::max:
      return reduce_into<T>(dst, srcs, offset, count, [](T a, T b) { return std::max(a, b); });
    case ReduceOp::min:
      return reduce_into<T>(dst, srcs, offset, count, [](T a, T b) { return std::min(a, b); });
  }
}

void reduce_bytes(DType dtype, unsigned char* dst, const std::vector<const unsigned char*>& srcs,
                  std::int64_t offset, std::int64_t count, ReduceOp op) {
  switch (dtype) {
    case DType::f32: return reduce_into<float>(dst, srcs, offset, count, op);
    case DType::i32: return reduce_into<std::int32_t>(dst, srcs, offset, count, op);
    case DType::i64: return reduce_into<std::int64_t>(dst, srcs, offset, count, op);
    case DType::i8: return reduce_into<std::int8_t>(dst, srcs, offset, count, op);
    case DType::u8: return reduce_into<std::uint8_t>(dst, srcs, offset, count, op);
    default: throw InternalError("a reduction over an unchecked dtype");
  }
}

using Clock = std::chrono::steady_clock;

// The ranks of one communicator and the rounds they are in.
class LocalGroup {
 public:
  LocalGroup(int size, CommOptions options)
      : size_(size),
        options_(options),
        next_(static_cast<std::size_t>(size), 0),
        next_split_(static_cast<std::size_t>(size), 0),
        scratch_(static_cast<std::size_t>(size)),
        inputs_(static_cast<std::size_t>(size)),
        tokens_(static_cast<std::size_t>(size), 0),
        lanes_(static_cast<std::size_t>(size)) {
    for (auto& lists : inputs_) {
      lists.host.reserve(static_cast<std::size_t>(size));
      lists.device.reserve(static_cast<std::size_t>(size));
    }
  }
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;
  ~LocalGroup() {
    for (auto& lane : lanes_) lane.release();
  }

  int size() const noexcept { return size_; }
  const CommOptions& options() const noexcept { return options_; }
  // Rank `rank`'s token byte (comm.hpp): never read or written, its address
  // orders the rank's collectives. Lives as long as the group, which every
  // collective holds.
  unsigned char* token_byte(int rank) noexcept { return &tokens_[static_cast<std::size_t>(rank)]; }

  // Rank `rank`'s part of its next collective: returns once `out` holds the
  // result. @throws CommError.
  void run(int rank, const Entry& mine, std::size_t out_bytes) {
    if (mine.device >= 0) return run_on_device(rank, mine, out_bytes);
    // Every input stays untouched until every rank has computed.
    auto& scratch = scratch_[static_cast<std::size_t>(rank)];
    meet(rank, mine, [&](const Round& round) { compute(rank, round, scratch); });
    if (!scratch.empty()) {
      if (scratch.size() != out_bytes)
        throw InternalError("a collective's result has another size");
      std::memcpy(mine.out, scratch.data(), out_bytes);
    }
  }

  // run() for tensors on a GPU: each rank's part goes on a stream of its
  // own. Where no rank's output overlaps an input that is read, each rank
  // writes its output directly (one pass over the bytes); otherwise into
  // device scratch, copied out once every rank has computed.
  void run_on_device(int rank, const Entry& mine, std::size_t out_bytes) {
    DeviceLane* lane = nullptr;
    bool direct = false;
    bool written = false;
    // A failure to set up the rank's stream is the round's failure too.
    meet(rank, mine, [&](const Round& round) {
      lane = &lane_of(rank, mine.device);
      direct = writes_directly(round);
      DeviceGuard device(mine.device);
      unsigned char* dst = direct ? mine.out : lane->scratch(out_bytes);
      written = direct && mine.spec.kind == Kind::all_reduce
                    ? share_all_reduce(rank, round, lane->stream)
                    : compute_on_device(rank, round, dst, lane->stream);
      LOOM_CUDA_CHECK(cudaStreamSynchronize(lane->stream));
    });
    if (!direct && written && out_bytes != 0) {
      DeviceGuard device(mine.device);
      LOOM_CUDA_CHECK(cudaMemcpyAsync(mine.out, lane->buffer, out_bytes, cudaMemcpyDeviceToDevice,
                                      lane->stream));
      LOOM_CUDA_CHECK(cudaStreamSynchronize(lane->stream));
    }
  }

  // One round for rank `rank`: arrive with `mine`, wait for every rank and
  // check that they agree, compute(round) outside the lock (every input
  // untouched meanwhile), then wait until every rank has computed. Returns
  // when the rank may write its output. @throws CommError.
  template <class Compute>
  void meet(int rank, const Entry& mine, Compute compute_part) {
    std::unique_lock lock(mutex_);
    const std::uint64_t seq = next_[static_cast<std::size_t>(rank)]++;
    Round& round = round_at(seq);
    round.entries[static_cast<std::size_t>(rank)] = mine;
    ++round.arrived;
    cv_.notify_all();
    wait_for_all(
        lock, round, [&] { return round.arrived == size_; }, "reach");
    if (round.failure.empty()) round.failure = disagreement(round);
    if (!round.failure.empty()) fail(lock, round, seq);
    lock.unlock();
    try {
      compute_part(static_cast<const Round&>(round));
    } catch (const std::exception& e) {
      lock.lock();
      round.failure = "rank " + std::to_string(rank) + " failed in it: " + e.what();
      cv_.notify_all();
      fail(lock, round, seq);
    }
    lock.lock();
    ++round.computed;
    cv_.notify_all();
    wait_for_all(
        lock, round, [&] { return round.computed == round.arrived; }, "finish");
    if (!round.failure.empty()) fail(lock, round, seq);
    leave(round, seq);
  }

  // Rank `from` hands `bytes` at `data` to rank `to`'s next recv from it,
  // and returns once that recv has copied them. @throws CommError.
  void send(int from, int to, const unsigned char* data, std::size_t bytes, DType dtype,
            int device) {
    std::unique_lock lock(mutex_);
    Message m;
    m.data = data;
    m.bytes = bytes;
    m.dtype = dtype;
    m.device = device;
    require_pair(from, to, "send to rank " + std::to_string(to));
    auto& queue = channels_[{from, to}];
    queue.push_back(&m);
    cv_.notify_all();
    const auto deadline = Clock::now() + options_.timeout;
    if (!cv_.wait_until(lock, deadline, [&] { return m.claimed; })) {
      std::erase(queue, &m);
      throw CommError("send to rank " + std::to_string(to) + ": rank " + std::to_string(to) +
                      " did not receive it within " + std::to_string(options_.timeout.count()) +
                      " ms");
    }
    // Claimed: the receiver copies from `data` now, and says when it is done.
    cv_.wait(lock, [&] { return m.taken; });
    if (!m.failure.empty())
      throw CommError("send to rank " + std::to_string(to) + ": " + m.failure);
  }

  // Rank `to`'s next message from rank `from`, copied into `out`.
  // @throws CommError.
  void recv(int to, int from, unsigned char* out, std::size_t bytes, DType dtype, int device) {
    std::unique_lock lock(mutex_);
    require_pair(from, to, "recv from rank " + std::to_string(from));
    auto& queue = channels_[{from, to}];
    const auto deadline = Clock::now() + options_.timeout;
    if (!cv_.wait_until(lock, deadline, [&] { return !queue.empty(); })) {
      // A send that comes later would meet this pair's next recv: the pair's
      // order is lost, so its later sends and recvs fail at once.
      const std::string why = "recv from rank " + std::to_string(from) + ": nothing came within " +
                              std::to_string(options_.timeout.count()) + " ms";
      broken_pairs_[{from, to}] = why;
      cv_.notify_all();
      throw CommError(why);
    }
    Message& m = *queue.front();
    queue.erase(queue.begin());
    m.claimed = true;
    if (m.bytes != bytes || m.dtype != dtype) {
      m.failure = "rank " + std::to_string(from) + " sent " + std::to_string(m.bytes) +
                  " bytes of " + std::string(to_string(m.dtype)) + ", rank " + std::to_string(to) +
                  " expected " + std::to_string(bytes) + " bytes of " +
                  std::string(to_string(dtype));
      m.taken = true;
      const std::string failure = m.failure;
      cv_.notify_all();
      throw CommError("recv from rank " + std::to_string(from) + ": " + failure);
    }
    lock.unlock();
    if (bytes != 0) {  // the sender waits until `taken`
      try {
        copy_bytes(out, device, m.data, m.device, bytes);
      } catch (const std::exception& e) {
        lock.lock();
        m.failure = std::string("the copy failed: ") + e.what();
        m.taken = true;
        cv_.notify_all();
        throw;
      }
    }
    lock.lock();
    m.taken = true;
    cv_.notify_all();
  }

  // @throws CommError when an earlier recv of the pair timed out.
  void require_pair(int from, int to, const std::string& what) const {
    const auto broken = broken_pairs_.find({from, to});
    if (broken != broken_pairs_.end()) {
      throw CommError(what + ": the pair's messages are out of order since " + broken->second);
    }
  }

  // The groups a split makes: rank `rank`'s new group and its rank there.
  std::pair<std::shared_ptr<LocalGroup>, int> split(int rank, int colour, int key) {
    std::unique_lock lock(mutex_);
    const std::uint64_t seq = next_split_[static_cast<std::size_t>(rank)]++;
    SplitRound& round = splits_[seq];
    if (round.wishes.empty()) round.wishes.resize(static_cast<std::size_t>(size_));
    round.wishes[static_cast<std::size_t>(rank)] = std::pair(colour, key);
    ++round.arrived;
    if (round.arrived == size_) make_groups(round);
    cv_.notify_all();
    const bool all = cv_.wait_until(lock, Clock::now() + options_.timeout,
                                    [&] { return round.arrived == size_; });
    if (!all) {
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (!round.wishes[static_cast<std::size_t>(r)]) {
          missing += ' ';
          missing += std::to_string(r);
        }
      }
      ++round.left;
      if (round.left == round.arrived) splits_.erase(seq);
      throw CommError("split #" + std::to_string(seq) + ": rank(s)" + missing +
                      " did not call it within " + std::to_string(options_.timeout.count()) +
                      " ms");
    }
    auto mine = round.result[static_cast<std::size_t>(rank)];
    ++round.left;
    if (round.left == round.arrived) splits_.erase(seq);
    return mine;
  }

 private:
  struct Round {
    std::vector<std::optional<Entry>> entries;
    int arrived = 0;
    int computed = 0;
    int left = 0;
    std::string failure;
  };
  // A send waiting for its recv; lives on the sender's stack until taken.
  struct Message {
    const unsigned char* data = nullptr;
    std::size_t bytes = 0;
    DType dtype = DType::u8;
    int device = -1;
    bool claimed = false;  // a recv took it off the queue
    bool taken = false;    // ... and is done with `data`
    std::string failure;
  };
  struct SplitRound {
    std::vector<std::optional<std::pair<int, int>>> wishes;  // (colour, key) a rank
    std::vector<std::pair<std::shared_ptr<LocalGroup>, int>> result;
    int arrived = 0;
    int left = 0;
  };

  // A collective's round: made by its first rank, from a node of an earlier
  // round when one is spare (no allocation once warm).
  Round& round_at(std::uint64_t seq) {
    if (const auto found = rounds_.find(seq); found != rounds_.end()) return found->second;
    if (spare_rounds_.empty()) {
      Round& round = rounds_[seq];
      round.entries.resize(static_cast<std::size_t>(size_));
      return round;
    }
    auto node = std::move(spare_rounds_.back());
    spare_rounds_.pop_back();
    node.key() = seq;
    Round& round = node.mapped();
    for (auto& entry : round.entries) entry.reset();
    round.arrived = round.computed = round.left = 0;
    round.failure.clear();
    return rounds_.insert(std::move(node)).position->second;
  }

  // Waits until `done`, the round fails, or the timeout: then it fails,
  // naming the ranks that did not `what` it.
  template <class Done>
  void wait_for_all(std::unique_lock<std::mutex>& lock, Round& round, Done done, const char* what) {
    const bool ok = cv_.wait_until(lock, Clock::now() + options_.timeout,
                                   [&] { return done() || !round.failure.empty(); });
    if (ok || !round.failure.empty()) return;
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      if (!round.entries[static_cast<std::size_t>(r)]) {
        missing += ' ';
        missing += std::to_string(r);
      }
    }
    if (missing.empty()) missing = " (some)";
    round.failure = "rank(s)" + missing + " did not " + what + " it within " +
                    std::to_string(options_.timeout.count()) + " ms";
    cv_.notify_all();
  }

  std::string disagreement(const Round& round) const {
    const CollectiveSpec& first = round.entries[0]->spec;
    for (int r = 1; r < size_; ++r) {
      const CollectiveSpec& e = round.entries[static_cast<std::size_t>(r)]->spec;
      if (e != first) {
        return "the ranks disagree: rank 0 called " + first.describe() + ", rank " +
               std::to_string(r) + " " + e.describe();
      }
      const int device = round.entries[static_cast<std::size_t>(r)]->device;
      const int device0 = round.entries[0]->device;
      if (device != device0) {
        return "the ranks' tensors are in different memory: rank 0's on " + where(device0) +
               ", rank " + std::to_string(r) + "'s on " + where(device) +
               " (the local backend's ranks share one: host memory, or one GPU)";
      }
    }
    return {};
  }

  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, Round& round, std::uint64_t seq) {
    const Entry* mine = nullptr;
    for (const auto& e : round.entries) {
      if (e) mine = &*e;
    }
    const std::string what =
        "collective #" + std::to_string(seq) +
        (mine != nullptr ? std::string(" (") + name_of(mine->spec.kind) + ")" : "") + ": " +
        round.failure;
    leave(round, seq);
    lock.unlock();
    throw CommError(what);
  }

  void leave(Round& round, std::uint64_t seq) {
    ++round.left;
    if (round.left == round.arrived) spare_rounds_.push_back(rounds_.extract(seq));
  }

  // Rank `rank`'s list of every rank's input, reused (touched by its
  // thread only, so no allocation once warm): for the host and device paths.
  const std::vector<const unsigned char*>& host_inputs(int rank, const Round& round) {
    auto& list = inputs_[static_cast<std::size_t>(rank)].host;
    list.clear();
    for (int r = 0; r < size_; ++r) list.push_back(round.entries[static_cast<std::size_t>(r)]->in);
    return list;
  }
  const std::vector<const void*>& device_inputs(int rank, const Round& round) {
    auto& list = inputs_[static_cast<std::size_t>(rank)].device;
    list.clear();
    for (int r = 0; r < size_; ++r) list.push_back(round.entries[static_cast<std::size_t>(r)]->in);
    return list;
  }

  // Host to host with memcpy; any GPU involved with the driver (one address
  // space: the direction is found from the pointers).
  static void copy_bytes(unsigned char* to, int to_device, const unsigned char* from,
                         int from_device, std::size_t bytes) {
    if (to_device < 0 && from_device < 0) {
      std::memcpy(to, from, bytes);
      return;
    }
    DeviceGuard guard(to_device >= 0 ? to_device : from_device);
    LOOM_CUDA_CHECK(cudaMemcpy(to, from, bytes, cudaMemcpyDefault));
  }

  static std::string where(int device) {
    return device < 0 ? std::string("host memory") : "device " + std::to_string(device);
  }

  // True when no rank's output overlaps an input some rank reads: then each
  // rank may write its output while the others still read.
  bool writes_directly(const Round& round) const {
    const CollectiveSpec& spec = round.entries[0]->spec;
    const std::size_t esize = element_bytes(spec.dtype);
    const auto in_bytes = static_cast<std::size_t>(spec.in_count) * esize;
    const auto out_bytes = static_cast<std::size_t>(spec.out_count) * esize;
    for (int w = 0; w < size_; ++w) {
      const Entry& writer = *round.entries[static_cast<std::size_t>(w)];
      if (spec.kind == Kind::broadcast && w == spec.root) continue;  // writes nothing
      for (int r = 0; r < size_; ++r) {
        if (spec.kind == Kind::broadcast && r != spec.root) continue;  // read by nobody
        const Entry& reader = *round.entries[static_cast<std::size_t>(r)];
        const bool apart =
            writer.out + out_bytes <= reader.in || reader.in + in_bytes <= writer.out;
        if (!apart && out_bytes != 0 && in_bytes != 0) return false;
      }
    }
    return true;
  }

  // An all-reduce whose outputs no input overlaps, shared out: rank r
  // reduces block r of the inputs into its own output, then copies the
  // block into every other rank's output. The ranks read the inputs once
  // between them, instead of each rank reading all of them.
  bool share_all_reduce(int rank, const Round& round, cudaStream_t stream) {
    const CollectiveSpec& spec = round.entries[0]->spec;
    const std::size_t esize = element_bytes(spec.dtype);
    // Blocks of whole 256 elements, so that every copy starts aligned.
    const std::int64_t per_rank = (spec.out_count + size_ - 1) / size_;
    const std::int64_t block = (per_rank + 255) / 256 * 256;
    const std::int64_t lo = std::min(spec.out_count, block * rank);
    const std::int64_t hi = std::min(spec.out_count, lo + block);
    if (hi == lo) return true;
    const auto& inputs = device_inputs(rank, round);
    const std::size_t offset = static_cast<std::size_t>(lo) * esize;
    const std::size_t bytes = static_cast<std::size_t>(hi - lo) * esize;
    unsigned char* mine = round.entries[static_cast<std::size_t>(rank)]->out + offset;
    device_reduce(spec.dtype, spec.op, mine, inputs, lo, hi - lo, stream);
    for (int r = 0; r < size_; ++r) {
      if (r == rank) continue;
      LOOM_CUDA_CHECK(cudaMemcpyAsync(round.entries[static_cast<std::size_t>(r)]->out + offset,
                                      mine, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    return true;
  }

  // Enqueues rank `rank`'s result into `dst` on `stream`; false when the
  // rank writes nothing (a broadcast's root).
  bool compute_on_device(int rank, const Round& round, unsigned char* dst, cudaStream_t stream) {
    const CollectiveSpec& mine = round.entries[static_cast<std::size_t>(rank)]->spec;
    const std::size_t esize = element_bytes(mine.dtype);
    const auto input = [&](int r) { return round.entries[static_cast<std::size_t>(r)]->in; };
    const auto copy = [&](unsigned char* to, const unsigned char* from, std::size_t bytes) {
      if (bytes != 0) {
        LOOM_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
      }
    };
    const auto& inputs = device_inputs(rank, round);
    switch (mine.kind) {
      case Kind::all_reduce:
        device_reduce(mine.dtype, mine.op, dst, inputs, 0, mine.out_count, stream);
        return true;
      case Kind::reduce_scatter:
        device_reduce(mine.dtype, mine.op, dst, inputs, rank * mine.out_count, mine.out_count,
                      stream);
        return true;
      case Kind::all_gather: {
        const std::size_t block = static_cast<std::size_t>(mine.in_count) * esize;
        for (int r = 0; r < size_; ++r) {
          copy(dst + static_cast<std::size_t>(r) * block, input(r), block);
        }
        return true;
      }
      case Kind::broadcast:
        if (rank == mine.root) return false;
        copy(dst, input(mine.root), static_cast<std::size_t>(mine.in_count) * esize);
        return true;
      case Kind::ring_exchange:
        copy(dst, input((rank + size_ - 1) % size_),
             static_cast<std::size_t>(mine.in_count) * esize);
        return true;
    }
    return false;
  }

  // A rank's stream and scratch on its GPU, made on first use and kept.
  struct DeviceLane {
    int device = -1;
    cudaStream_t stream = nullptr;
    unsigned char* buffer = nullptr;
    std::size_t bytes = 0;

    unsigned char* scratch(std::size_t want) {
      if (want > bytes) {
        if (buffer != nullptr) LOOM_CUDA_CHECK(cudaFree(buffer));
        buffer = nullptr;
        bytes = 0;
        void* p = nullptr;
        LOOM_CUDA_CHECK(cudaMalloc(&p, want));
        buffer = static_cast<unsigned char*>(p);
        bytes = want;
      }
      return buffer;
    }
    void release() noexcept {
      if (device < 0) return;
      int previous = device;
      LOOM_CUDA_ASSERT(cudaGetDevice(&previous));
      LOOM_CUDA_ASSERT(cudaSetDevice(device));
      if (buffer != nullptr) LOOM_CUDA_ASSERT(cudaFree(buffer));
      if (stream != nullptr) LOOM_CUDA_ASSERT(cudaStreamDestroy(stream));
      LOOM_CUDA_ASSERT(cudaSetDevice(previous));
    }
  };

  DeviceLane& lane_of(int rank, int device) {
    DeviceLane& lane = lanes_[static_cast<std::size_t>(rank)];  // this rank's thread only
    if (lane.device != device) {
      lane.release();
      lane = DeviceLane{};
      DeviceGuard guard(device);
      // The greatest priority: a collective holds every rank up, and on a
      // stream of the default (least) priority its copies would wait behind
      // the compute kernels the ranks have queued meanwhile.
      int least = 0;
      int greatest = 0;
      LOOM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      LOOM_CUDA_CHECK(cudaStreamCreateWithPriority(&lane.stream, cudaStreamNonBlocking, greatest));
      lane.device = device;
    }
    return lane;
  }

  void compute(int rank, const Round& round, std::vector<unsigned char>& scratch) {
    const CollectiveSpec& mine = round.entries[static_cast<std::size_t>(rank)]->spec;
    const std::size_t esize = element_bytes(mine.dtype);
    const auto input = [&](int r) { return round.entries[static_cast<std::size_t>(r)]->in; };
    const auto& inputs = host_inputs(rank, round);
    switch (mine.kind) {
      case Kind::all_reduce:
        scratch.resize(static_cast<std::size_t>(mine.out_count) * esize);
        reduce_bytes(mine.dtype, scratch.data(), inputs, 0, mine.out_count, mine.op);
        break;
      case Kind::reduce_scatter:
        scratch.resize(static_cast<std::size_t>(mine.out_count) * esize);
        reduce_bytes(mine.dtype, scratch.data(), inputs, rank * mine.out_count, mine.out_count,
                     mine.op);
        break;
      case Kind::all_gather: {
        const std::size_t block = static_cast<std::size_t>(mine.in_count) * esize;
        scratch.resize(block * static_cast<std::size_t>(size_));
        for (int r = 0; r < size_; ++r) {
          if (block != 0)
            std::memcpy(scratch.data() + static_cast<std::size_t>(r) * block, input(r), block);
        }
        break;
      }
      case Kind::broadcast: {
        const std::size_t bytes = static_cast<std::size_t>(mine.in_count) * esize;
        if (rank == mine.root) {
          scratch.clear();  // the root's data stays as it is
        } else {
          scratch.assign(input(mine.root), input(mine.root) + bytes);
        }
        break;
      }
      case Kind::ring_exchange: {
        const std::size_t bytes = static_cast<std::size_t>(mine.in_count) * esize;
        const unsigned char* from = input((rank + size_ - 1) % size_);
        scratch.assign(from, from + bytes);
        break;
      }
    }
  }

  void make_groups(SplitRound& round) {
    round.result.resize(static_cast<std::size_t>(size_));
    std::map<int, std::vector<std::pair<int, int>>> members;  // colour -> (key, rank)
    for (int r = 0; r < size_; ++r) {
      const auto& [colour, key] = *round.wishes[static_cast<std::size_t>(r)];
      members[colour].emplace_back(key, r);
    }
    for (auto& [colour, ranks] : members) {
      std::sort(ranks.begin(), ranks.end());
      auto group = std::make_shared<LocalGroup>(static_cast<int>(ranks.size()), options_);
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        round.result[static_cast<std::size_t>(ranks[i].second)] = {group, static_cast<int>(i)};
      }
    }
  }

  const int size_;
  const CommOptions options_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> next_;        // each rank's next collective
  std::vector<std::uint64_t> next_split_;  // each rank's next split
  std::map<std::uint64_t, Round> rounds_;  // nodes stay put while others are added
  std::vector<std::map<std::uint64_t, Round>::node_type> spare_rounds_;  // finished, for reuse
  std::map<std::uint64_t, SplitRound> splits_;
  std::map<std::pair<int, int>, std::vector<Message*>> channels_;  // (from, to): sends in order
  std::map<std::pair<int, int>, std::string> broken_pairs_;        // (from, to): why
  std::vector<std::vector<unsigned char>> scratch_;  // a rank's, touched by its thread only
  struct InputLists {
    std::vector<const unsigned char*> host;
    std::vector<const void*> device;
  };
  std::vector<InputLists> inputs_;  // a rank's, touched by its thread only
  std::vector<unsigned char> tokens_;
  std::vector<DeviceLane> lanes_;  // a rank's, touched by its thread only
};

// What every collective of the local backend shares: its group, its rank,
// the rank's token it writes, host tensors only, no device or capture.
class LocalOp : public Collective {
 public:
  LocalOp(std::shared_ptr<LocalGroup> group, int rank, Tensor token)
      : group_(std::move(group)), rank_(rank), token_(std::move(token)) {}
  const void* communicator() const noexcept override { return group_.get(); }
  bool capturable() const noexcept override { return false; }
  bool runs_on_host() const noexcept override { return true; }
  void run_cuda(const ExecutionContext&) const override {
    throw InternalError(std::string(name()) + ": a local collective was given a stream");
  }

 protected:
  // Host memory, or a GPU: not pinned and a device mixed.
  static int device_of(const Tensor& t) noexcept {
    return t.memory().is_device() ? t.memory().device() : -1;
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
  Tensor token_;
};

// send or recv: between two ranks, in the rank's collective order.
class LocalPointToPoint final : public LocalOp {
 public:
  LocalPointToPoint(std::shared_ptr<LocalGroup> group, int rank, Tensor token, bool sending,
                    Tensor data, int peer)
      : LocalOp(std::move(group), rank, std::move(token)),
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
  void run_cpu() const override {
    auto* bytes = static_cast<unsigned char*>(data_.data());
    if (sending_) {
      group_->send(rank_, peer_, bytes, data_.nbytes(), data_.dtype(), device_of(data_));
    } else {
      group_->recv(rank_, peer_, bytes, data_.nbytes(), data_.dtype(), device_of(data_));
    }
  }

 private:
  bool sending_;
  Tensor data_;
  int peer_;
};

// The collectives every rank of the group takes part in.
class LocalCollective final : public LocalOp {
 public:
  LocalCollective(std::shared_ptr<LocalGroup> group, int rank, Tensor token, Entry entry, Tensor in,
                  Tensor out)
      : LocalOp(std::move(group), rank, std::move(token)),
        entry_(entry),
        in_(std::move(in)),
        out_(std::move(out)) {}

  std::string_view name() const noexcept override { return name_of(entry_.spec.kind); }
  std::vector<Tensor> reads() const override { return {in_}; }
  std::vector<Tensor> writes() const override { return {out_, token_}; }
  void validate() const override { same_memory_at_submit(name_of(entry_.spec.kind), in_, out_); }
  void run_cpu() const override {
    Entry mine = entry_;
    mine.in = static_cast<const unsigned char*>(in_.data());
    mine.out = static_cast<unsigned char*>(out_.data());
    mine.device = device_of(in_);
    group_->run(rank_, mine, out_.nbytes());
  }

 private:
  Entry entry_;
  Tensor in_;
  Tensor out_;
};

class LocalCommunicator final : public SpecCommunicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank), token_(token_over(group_->token_byte(rank_))) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return group_->size(); }
  std::string_view backend() const noexcept override { return "local"; }

  std::shared_ptr<Communicator> split(int colour, int key) const override {
    auto [group, rank] = group_->split(rank_, colour, key);
    return std::make_shared<LocalCommunicator>(std::move(group), rank);
  }

 private:
  CollectivePtr collective(const CollectiveSpec& spec, const Tensor& in,
                           const Tensor& out) const override {
    Entry e;
    e.spec = spec;
    return std::make_shared<LocalCollective>(group_, rank_, token_, e, in, out);
  }
  CollectivePtr point_to_point(bool sending, const Tensor& data, int peer) const override {
    return std::make_shared<LocalPointToPoint>(group_, rank_, token_, sending, data, peer);
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
  Tensor token_;
};

}  // namespace
}  // namespace loom::detail

namespace loom {

std::vector<std::shared_ptr<Communicator>> local_communicators(int ranks, CommOptions options) {
  if (ranks < 1) {
    throw InvalidArgument("local_communicators: " + std::to_string(ranks) + " ranks (at least 1)");
  }
  if (options.timeout.count() <= 0) {
    throw InvalidArgument("local_communicators: a timeout of " +
                          std::to_string(options.timeout.count()) + " ms");
  }
  auto group = std::make_shared<detail::LocalGroup>(ranks, options);
  std::vector<std::shared_ptr<Communicator>> comms;
  for (int r = 0; r < ranks; ++r) {
    comms.push_back(std::make_shared<detail::LocalCommunicator>(group, r));
  }
  return comms;
}

}  // namespace loom
