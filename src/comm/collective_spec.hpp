#pragma once
// What every backend shares about a collective: what it is (a spec that two
// ranks compare to agree), the checks made when it is built, and the token
// tensor whose writes keep one rank's collectives of a communicator in order.

#include <loom/comm.hpp>
#include <loom/tensor.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace loom::detail {

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, broadcast, ring_exchange };

const char* name_of(CollectiveKind kind) noexcept;
const char* name_of(ReduceOp op) noexcept;

/// One rank's view of a collective. Two ranks agree when their specs are equal.
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::all_reduce;
  DType dtype = DType::f32;
  std::int64_t in_count = 0;
  std::int64_t out_count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::sum;

  static constexpr std::size_t kWords = 6;
  /// As integers, for a backend that compares specs across processes.
  std::array<std::int64_t, kWords> words() const noexcept;
  static CollectiveSpec from_words(const std::int64_t* words) noexcept;

  bool operator==(const CollectiveSpec&) const = default;
  /// "all_reduce of 1024 f32 (sum)".
  std::string describe() const;
};

/// Bytes an element of `t` (a whole number: require_contiguous checked it).
inline std::size_t element_bytes(DType t) noexcept {
  return static_cast<std::size_t>(bits_of(t) / 8);
}

/// The dtypes every backend reduces over: f32, i32, i64, i8, u8.
bool reducible(DType t) noexcept;

// The checks made when a collective is built (@throws InvalidArgument): each
// returns the spec the ranks compare when it runs. `ranks` is the
// communicator's size.
CollectiveSpec all_reduce_spec(const Tensor& in, const Tensor& out, ReduceOp op);
CollectiveSpec all_gather_spec(const Tensor& in, const Tensor& out, int ranks);
CollectiveSpec reduce_scatter_spec(const Tensor& in, const Tensor& out, ReduceOp op, int ranks);
CollectiveSpec broadcast_spec(const Tensor& data, int root, int ranks);
CollectiveSpec ring_exchange_spec(const Tensor& send, const Tensor& recv);
/// send or recv: contiguous whole-byte data, and a peer that is another rank.
void check_point_to_point(const char* call, const Tensor& data, int peer, int rank, int ranks);
/// Whether `t` is a graph intermediate that no runtime has bound yet (no
/// memory: it takes the runtime's default space at submit or compile).
bool unbound_intermediate(const Tensor& t) noexcept;
/// @throws InvalidArgument when in and out are in different memory spaces
/// (collectives check at build, and again at submit, where an intermediate
/// has its memory).
void same_memory_at_submit(const char* call, const Tensor& in, const Tensor& out);

/// A byte of host memory as a one-element u8 tensor, never read or written
/// by anyone: a collective lists it among its writes so that the graph's
/// edges and the ordering across runs keep one rank's collectives of a
/// communicator in the order they were submitted. The byte must outlive the
/// tensor (the communicator's state owns it).
Tensor token_over(unsigned char* byte);

/// Whether two tensors' bytes overlap.
bool overlaps(const Tensor& a, const Tensor& b) noexcept;

/// What every backend's communicator shares: each collective is checked
/// (the *_spec functions) and then built by the backend from its spec.
class SpecCommunicator : public Communicator {
 public:
  CollectivePtr all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) const final {
    return collective(all_reduce_spec(in, out, op), in, out);
  }
  CollectivePtr all_gather(const Tensor& in, const Tensor& out) const final {
    return collective(all_gather_spec(in, out, size()), in, out);
  }
  CollectivePtr reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) const final {
    return collective(reduce_scatter_spec(in, out, op, size()), in, out);
  }
  CollectivePtr broadcast(const Tensor& data, int root) const final {
    return collective(broadcast_spec(data, root, size()), data, data);
  }
  CollectivePtr ring_exchange(const Tensor& send, const Tensor& recv) const final {
    return collective(ring_exchange_spec(send, recv), send, recv);
  }
  CollectivePtr send(const Tensor& data, int peer) const final {
    check_point_to_point("send", data, peer, rank(), size());
    return point_to_point(true, data, peer);
  }
  CollectivePtr recv(const Tensor& data, int peer) const final {
    check_point_to_point("recv", data, peer, rank(), size());
    return point_to_point(false, data, peer);
  }

 protected:
  /// The backend's collective for a checked spec.
  virtual CollectivePtr collective(const CollectiveSpec& spec, const Tensor& in,
                                   const Tensor& out) const = 0;
  /// The backend's send (`sending`) or recv of checked data.
  virtual CollectivePtr point_to_point(bool sending, const Tensor& data, int peer) const = 0;
};

}  // namespace loom::detail
