#include "comm/collective_spec.hpp"

#include "core/storage.hpp"
#include "core/tensor_access.hpp"

#include <loom/error.hpp>

#include <memory>
#include <string>

namespace loom::detail {

const char* name_of(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::ring_exchange: return "ring_exchange";
  }
  return "?";
}

const char* name_of(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

std::array<std::int64_t, CollectiveSpec::kWords> CollectiveSpec::words() const noexcept {
  return {
      static_cast<std::int64_t>(kind), static_cast<std::int64_t>(dtype), in_count, out_count, root,
      static_cast<std::int64_t>(op)};
}

CollectiveSpec CollectiveSpec::from_words(const std::int64_t* w) noexcept {
  CollectiveSpec s;
  s.kind = static_cast<CollectiveKind>(w[0]);
  s.dtype = static_cast<DType>(w[1]);
  s.in_count = w[2];
  s.out_count = w[3];
  s.root = static_cast<int>(w[4]);
  s.op = static_cast<ReduceOp>(w[5]);
  return s;
}

std::string CollectiveSpec::describe() const {
  std::string s = name_of(kind);
  s += " of ";
  s += std::to_string(in_count);
  s += ' ';
  s += to_string(dtype);
  if (kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter) {
    s += " (";
    s += name_of(op);
    s += ')';
  }
  if (kind == CollectiveKind::broadcast) {
    s += " from rank ";
    s += std::to_string(root);
  }
  return s;
}

bool reducible(DType t) noexcept {
  return t == DType::f32 || t == DType::i32 || t == DType::i64 || t == DType::i8 || t == DType::u8;
}

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument(what);
}

void require_contiguous(const char* call, const Tensor& t, const char* role) {
  if (!t.defined()) throw InvalidArgument(std::string(call) + ": an undefined " + role + " tensor");
  if (!t.is_contiguous()) {
    throw InvalidArgument(std::string(call) + ": the " + role + " tensor must be contiguous, got " +
                          t.describe());
  }
  if (bits_of(t.dtype()) % 8 != 0) {
    throw InvalidArgument(std::string(call) + ": " + std::string(to_string(t.dtype())) +
                          " elements are not whole bytes");
  }
}

bool unbound_intermediate(const Tensor& t) noexcept {
  const Storage* s = TensorAccess::storage(t).get();
  return s != nullptr && s->intermediate && !s->bound;
}

// Same dtype, same memory space, and element counts as the collective wants them.
void check_pair(const char* call, const Tensor& in, const Tensor& out, std::int64_t in_side,
                std::int64_t out_side) {
  require_contiguous(call, in, "input");
  require_contiguous(call, out, "output");
  require(in.dtype() == out.dtype(), std::string(call) + ": input " + in.describe() +
                                         " and output " + out.describe() +
                                         " have different dtypes");
  // An intermediate has no memory until its graph is submitted or compiled:
  // the collective's validate() compares the two then (same_memory_at_submit).
  if (!unbound_intermediate(in) && !unbound_intermediate(out)) same_memory_at_submit(call, in, out);
  require(in_side == out_side, std::string(call) + ": input " + in.describe() + " and output " +
                                   out.describe() + " do not match in size");
}

void require_reducible(const char* call, DType t) {
  require(reducible(t), std::string(call) + ": no reduction over " + std::string(to_string(t)) +
                            " (f32, i32, i64, i8 or u8)");
}

CollectiveSpec spec(CollectiveKind kind, const Tensor& in, const Tensor& out, ReduceOp op,
                    int root) {
  CollectiveSpec s;
  s.kind = kind;
  s.dtype = in.dtype();
  s.in_count = in.numel();
  s.out_count = out.numel();
  s.root = root;
  s.op = op;
  return s;
}

}  // namespace

CollectiveSpec all_reduce_spec(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_pair("all_reduce", in, out, in.numel(), out.numel());
  require_reducible("all_reduce", in.dtype());
  return spec(CollectiveKind::all_reduce, in, out, op, 0);
}

CollectiveSpec all_gather_spec(const Tensor& in, const Tensor& out, int ranks) {
  check_pair("all_gather", in, out, in.numel() * ranks, out.numel());
  return spec(CollectiveKind::all_gather, in, out, ReduceOp::sum, 0);
}

CollectiveSpec reduce_scatter_spec(const Tensor& in, const Tensor& out, ReduceOp op, int ranks) {
  check_pair("reduce_scatter", in, out, in.numel(), out.numel() * ranks);
  require_reducible("reduce_scatter", in.dtype());
  return spec(CollectiveKind::reduce_scatter, in, out, op, 0);
}

CollectiveSpec broadcast_spec(const Tensor& data, int root, int ranks) {
  require_contiguous("broadcast", data, "data");
  require(root >= 0 && root < ranks, "broadcast: root " + std::to_string(root) +
                                         " is not a rank of this communicator of " +
                                         std::to_string(ranks));
  return spec(CollectiveKind::broadcast, data, data, ReduceOp::sum, root);
}

CollectiveSpec ring_exchange_spec(const Tensor& send, const Tensor& recv) {
  check_pair("ring_exchange", send, recv, send.numel(), recv.numel());
  return spec(CollectiveKind::ring_exchange, send, recv, ReduceOp::sum, 0);
}

void check_point_to_point(const char* call, const Tensor& data, int peer, int rank, int ranks) {
  require_contiguous(call, data, "data");
  require(peer >= 0 && peer < ranks && peer != rank,
          std::string(call) + ": peer " + std::to_string(peer) + " is not another rank of this " +
              "communicator of " + std::to_string(ranks) + " (this is rank " +
              std::to_string(rank) + ")");
}

Tensor token_over(unsigned char* byte) {
  auto storage = std::make_shared<Storage>();
  storage->base = byte;
  storage->bytes = 1;
  storage->memory = Memory::pageable;
  storage->owned = false;
  storage->order_only = true;
  return TensorAccess::make(std::move(storage), DType::u8, Shape{1}, contiguous_strides(Shape{1}),
                            0);
}

bool overlaps(const Tensor& a, const Tensor& b) noexcept {
  const auto* pa = static_cast<const unsigned char*>(a.data());
  const auto* pb = static_cast<const unsigned char*>(b.data());
  if (pa == nullptr || pb == nullptr || a.nbytes() == 0 || b.nbytes() == 0) return false;
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void same_memory_at_submit(const char* call, const Tensor& in, const Tensor& out) {
  require(in.memory() == out.memory(), std::string(call) + ": input " + in.describe() +
                                           " and output " + out.describe() +
                                           " are in different memory spaces");
}

}  // namespace loom::detail
