// loom::ops::ring_attention and its backward: the ring's tasks (flash
// attention on each key/value block, ring exchanges, merges by log-sum-exp,
// with the merge and accumulate ops of op.cpp), and the helpers that lay a
// sequence out over the ranks.
#include <loom/error.hpp>
#include <loom/ops/elementwise.hpp>
#include <loom/ops/ring_attention.hpp>

#include "attention/ring_op.hpp"
#include "common/checks.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::ops {
namespace {

using detail::reject;

// ---- the ring's plan, shared by the forward and the backward ----

// Which rows of this rank's queries and which keys of the block it holds
// take part at one step, and whether under the causal mask (aligned top left).
struct StepWork {
  bool any = false;
  bool causal = false;
  std::int64_t q_begin = 0, q_end = 0;  // rows of this rank's block
  std::int64_t k_begin = 0, k_end = 0;  // rows of the held key block
};

// At step s rank r holds the key/value block of rank j = (r - s) mod P.
StepWork step_work(int rank, int holder, std::int64_t length, const RingAttentionOptions& o) {
  StepWork w{true, false, 0, length, 0, length};
  if (!o.causal) return w;
  if (holder == rank) {
    // Its own block: the mask in local order is the global one (both
    // layouts keep positions increasing within a block).
    w.causal = true;
    return w;
  }
  if (o.layout == RingLayout::contiguous) {
    w.any = holder < rank;  // an earlier block is seen whole; a later one not at all
    return w;
  }
  // zigzag: chunk r and 2P - 1 - r here, chunk j and 2P - 1 - j there.
  const std::int64_t half = length / 2;
  if (holder < rank) {
    w.k_end = half;  // every query sees chunk j, none sees chunk 2P - 1 - j
  } else {
    w.q_begin = half;  // only chunk 2P - 1 - r sees them, and sees both chunks
  }
  return w;
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  if (begin == 0 && end == t.size(2)) return t;
  return t.slice(2, begin, end);
}

void check_ring(const Communicator& comm, const Tensor& q, const Tensor& k, const Tensor& v,
                const RingAttentionOptions& o, std::string_view op) {
  for (const auto& [t, role] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    if (!t->defined()) reject(op, std::string(role) + " is required (an undefined tensor)");
    if (t->rank() != 4) {
      reject(op, std::string(role) + " must be [B, H, L, D], got " + t->shape().to_string());
    }
  }
  if (k.shape() != q.shape() || v.shape() != q.shape()) {
    reject(op, "q, k and v must be blocks of one length [B, H, L, D]: q is " +
                   q.shape().to_string() + ", k " + k.shape().to_string() + ", v " +
                   v.shape().to_string());
  }
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    reject(op, "q, k and v must have one dtype: q is " + std::string(to_string(q.dtype())) +
                   ", k " + std::string(to_string(k.dtype())) + ", v " +
                   std::string(to_string(v.dtype())));
  }
  if (o.layout != RingLayout::contiguous && o.layout != RingLayout::zigzag) {
    reject(op, "unknown layout " + std::to_string(static_cast<int>(o.layout)));
  }
  if (o.causal && o.layout == RingLayout::zigzag && comm.size() > 1 && q.size(2) % 2 != 0) {
    reject(op, "the zigzag layout holds two chunks a rank: the block length must be even, got " +
                   std::to_string(q.size(2)));
  }
}

std::string step_name(const RingAttentionOptions& o, int s, std::string_view what) {
  return o.name + ".step" + std::to_string(s) + "." + std::string(what);
}

AttentionOptions flash_options(const RingAttentionOptions& o, bool causal) {
  return {.causal = causal, .alignment = CausalAlignment::top_left, .scale = o.scale};
}

// Writes `src` into `dst` (contiguous): a copy task where `src` is
// contiguous too, else a cast to the same type (which reads strided views).
void place(Graph& g, const Tensor& src, const Tensor& dst, const std::string& name) {
  if (src.is_contiguous()) {
    g.copy(src, dst, {.name = name});
  } else {
    g.add(cast(src, dst), {.name = name});
  }
}

void exchange(Graph& g, const Communicator& comm, const Tensor& send, const Tensor& recv,
              const std::string& name) {
  g.collective(comm.ring_exchange(send, recv), {.name = name});
}

// Two tensors of one shape [B, H, L, D] that travel the ring together, packed
// along the batch as [2B, H, L, D] so that a step passes them on in one
// exchange (one rendezvous, one message) instead of two. `buffers` of them
// rotate: at step s the pair held is s % buffers, and the exchange of step s
// fills the next. With two, that exchange overwrites the pair step s - 1
// read, so it waits for that step's work; with three it waits for step
// s - 2's, and the exchanges may run a step ahead of the work.
class TravellingPair {
 public:
  TravellingPair(Graph& g, DType dtype, const Shape& shape, int buffers) : batch_(shape[0]) {
    const Shape doubled{2 * shape[0], shape[1], shape[2], shape[3]};
    for (int i = 0; i < buffers; ++i) pairs_.push_back(g.intermediate(dtype, doubled));
  }

  const Tensor& held(int s) const { return pairs_[static_cast<std::size_t>(s) % pairs_.size()]; }
  Tensor first(int s) const { return held(s).slice(0, 0, batch_); }
  Tensor second(int s) const { return held(s).slice(0, batch_, 2 * batch_); }

  // Passes the pair held at step s on to rank + 1, receiving rank - 1's.
  void pass_on(Graph& g, const Communicator& comm, int s, const std::string& name) const {
    exchange(g, comm, held(s), held(s + 1), name);
  }

 private:
  std::int64_t batch_;
  std::vector<Tensor> pairs_;
};

// The key/value blocks of the ring: at step 0 the rank's own (read where
// they are, and packed once to be sent), then each earlier rank's in turn.
// Three buffers (two at P = 2, where one exchange is all): a local exchange
// is a host rendezvous of every rank, and one that also waited for the
// previous step's kernels would hold the next step's up (measured on an
// H100 at P = 8: sends of 0.6-1 ms against flash steps of 0.25 ms).
class KeyValueRing {
 public:
  KeyValueRing(Graph& g, const Tensor& k, const Tensor& v, int ranks, const std::string& name)
      : k_(k), v_(v), pairs_(g, k.dtype(), k.shape(), std::min(3, ranks)) {
    place(g, k, pairs_.first(0), name + ".pack_k");
    place(g, v, pairs_.second(0), name + ".pack_v");
  }
  Tensor k(int s) const { return s == 0 ? k_ : pairs_.first(s); }
  Tensor v(int s) const { return s == 0 ? v_ : pairs_.second(s); }
  // Sends the block held at step s on while step s uses it (both only read it).
  void pass_on(Graph& g, const Communicator& comm, int s, const RingAttentionOptions& o) const {
    if (s + 1 < comm.size()) pairs_.pass_on(g, comm, s, step_name(o, s, "send_kv"));
  }

 private:
  Tensor k_, v_;
  TravellingPair pairs_;
};

}  // namespace

void ring_attention(Graph& g, const Communicator& comm, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Tensor& out, const Tensor& lse,
                    const RingAttentionOptions& o) {
  check_ring(comm, q, k, v, o, o.name);
  const int ranks = comm.size();
  const int rank = comm.rank();
  const std::int64_t length = q.size(2);
  if (ranks == 1) {
    g.add(flash_attention(q, k, v, out, lse, flash_options(o, o.causal)),
          {.name = step_name(o, 0, "flash")});
    return;
  }
  const Shape& shape = q.shape();
  const Shape lse_shape{shape[0], shape[1], shape[2]};
  const Tensor parts[2] = {g.intermediate(q.dtype(), shape), g.intermediate(q.dtype(), shape)};
  const Tensor part_lses[2] = {g.intermediate(DType::f32, lse_shape),
                               g.intermediate(DType::f32, lse_shape)};
  const Tensor acc = g.intermediate(DType::f32, shape);
  const Tensor acc_lse = g.intermediate(DType::f32, lse_shape);

  const KeyValueRing blocks(g, k, v, ranks, o.name);
  bool written = false;  // whether out (and lse) have their result
  for (int s = 0; s < ranks; ++s) {
    blocks.pass_on(g, comm, s, o);
    const int holder = (rank - s + ranks) % ranks;
    const StepWork w = step_work(rank, holder, length, o);
    if (!w.any) continue;
    const Tensor& part = parts[s % 2];
    const Tensor& part_lse = part_lses[s % 2];
    const std::int64_t qb = w.q_begin;
    const std::int64_t qe = w.q_end;
    g.add(flash_attention(rows(q, qb, qe), rows(blocks.k(s), w.k_begin, w.k_end),
                          rows(blocks.v(s), w.k_begin, w.k_end), rows(part, qb, qe),
                          rows(part_lse, qb, qe), flash_options(o, w.causal)),
          {.name = step_name(o, s, "flash")});
    // The last merge writes the result when it covers every row.
    const bool last = s + 1 == ranks && qb == 0 && qe == length;
    g.add(detail::attention_merge(rows(acc, qb, qe), rows(acc_lse, qb, qe), rows(part, qb, qe),
                                  rows(part_lse, qb, qe), last ? out : Tensor{},
                                  last && lse.defined() ? lse : Tensor{}, s == 0),
          {.name = step_name(o, s, "merge")});
    written = last;
  }
  if (!written) {
    g.add(detail::gradient_accumulate(acc, Tensor{}, out, false), {.name = o.name + ".finish"});
    if (lse.defined()) g.copy(acc_lse, lse, {.name = o.name + ".finish_lse"});
  }
}

void ring_attention_backward(Graph& g, const Communicator& comm, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& dout, const AttentionGradients& grads,
                             const RingAttentionOptions& o) {
  const std::string op = o.name + "_backward";
  check_ring(comm, q, k, v, o, op);
  if (!lse.defined()) reject(op, "lse is required (the forward's log-sum-exp)");
  const int ranks = comm.size();
  const int rank = comm.rank();
  const std::int64_t length = q.size(2);
  if (ranks == 1) {
    g.add(flash_attention_backward(q, k, v, out, lse, dout, grads, flash_options(o, o.causal)),
          {.name = step_name(o, 0, "flash_backward")});
    return;
  }
  const Shape& shape = q.shape();
  // Per-step gradients (the kernel's type), two sets so that a step's
  // kernels run while the one before is summed.
  Tensor step_grads[2][3];
  for (auto& set : step_grads) {
    for (auto& t : set) t = g.intermediate(q.dtype(), shape);
  }
  const Tensor dq_sum = g.intermediate(DType::f32, shape);
  const KeyValueRing blocks(g, k, v, ranks, o.name);
  // dK and dV travel with their block, in f32: summed here, passed on,
  // summed there; after P hops they are home. Two buffers: each hop needs
  // the sums of the step before anyway.
  const TravellingPair sums(g, DType::f32, shape, 2);
  // Collectives run in the order they are added: each key/value exchange
  // goes before the gradients' exchange of the step before it, which waits
  // for that step's kernels, so that the blocks keep travelling meanwhile.
  blocks.pass_on(g, comm, 0, o);
  for (int s = 0; s < ranks; ++s) {
    const int holder = (rank - s + ranks) % ranks;
    const StepWork w = step_work(rank, holder, length, o);
    if (w.any) {
      const Tensor* step = step_grads[s % 2];
      const std::int64_t qb = w.q_begin;
      const std::int64_t qe = w.q_end;
      const std::int64_t kb = w.k_begin;
      const std::int64_t ke = w.k_end;
      g.add(flash_attention_backward(rows(q, qb, qe), rows(blocks.k(s), kb, ke),
                                     rows(blocks.v(s), kb, ke), rows(out, qb, qe),
                                     rows(lse, qb, qe), rows(dout, qb, qe),
                                     {.dq = rows(step[0], qb, qe),
                                      .dk = rows(step[1], kb, ke),
                                      .dv = rows(step[2], kb, ke)},
                                     flash_options(o, w.causal)),
            {.name = step_name(o, s, "flash_backward")});
      // Step 0 is the rank's own block, which covers every row.
      const auto sum = [&](const Tensor& into, const Tensor& part, std::int64_t b, std::int64_t e,
                           std::string_view what) {
        g.add(detail::gradient_accumulate(rows(into, b, e), rows(part, b, e), Tensor{}, s == 0),
              {.name = step_name(o, s, what)});
      };
      sum(dq_sum, step[0], qb, qe, "sum_dq");
      sum(sums.first(s), step[1], kb, ke, "sum_dk");
      sum(sums.second(s), step[2], kb, ke, "sum_dv");
    }
    if (s + 1 < ranks) blocks.pass_on(g, comm, s + 1, o);
    sums.pass_on(g, comm, s, step_name(o, s, "send_dkv"));
  }
  const auto finish = [&](const Tensor& sum, const Tensor& grad, std::string_view what) {
    g.add(detail::gradient_accumulate(sum, Tensor{}, grad, false),
          {.name = o.name + "." + std::string(what)});
  };
  finish(dq_sum, grads.dq, "finish_dq");
  finish(sums.first(ranks), grads.dk, "finish_dk");
  finish(sums.second(ranks), grads.dv, "finish_dv");
}

std::vector<SequenceRange> ring_ranges(std::int64_t length, int rank, int ranks,
                                       RingLayout layout) {
  constexpr std::string_view op = "ring_ranges";
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    reject(op, "rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  }
  const std::int64_t parts = layout == RingLayout::zigzag ? 2 * std::int64_t{ranks} : ranks;
  if (length < 0 || length % parts != 0) {
    reject(op, "the sequence length must be a multiple of " + std::to_string(parts) + " (ranks" +
                   (layout == RingLayout::zigzag ? " x 2 for zigzag" : "") + "), got " +
                   std::to_string(length));
  }
  const std::int64_t chunk = length / parts;
  if (layout == RingLayout::contiguous) return {{rank * chunk, (rank + 1) * chunk}};
  const std::int64_t late = parts - 1 - rank;
  return {{rank * chunk, (rank + 1) * chunk}, {late * chunk, (late + 1) * chunk}};
}

namespace {

void check_shard_shapes(const Tensor& whole, const Tensor& local, int ranks, int dim,
                        std::string_view op) {
  detail::require_defined(whole, op, "whole");
  detail::require_defined(local, op, "local");
  if (dim < 0 || dim >= whole.rank() || whole.rank() != local.rank()) {
    reject(op, "dim " + std::to_string(dim) + " of a " + std::to_string(whole.rank()) +
                   "-dimensional whole and a " + std::to_string(local.rank()) +
                   "-dimensional local tensor");
  }
  for (int d = 0; d < whole.rank(); ++d) {
    const std::int64_t expected = d == dim ? whole.size(d) / std::max(ranks, 1) : whole.size(d);
    if (local.size(d) != expected || (d == dim && whole.size(d) % std::max(ranks, 1) != 0)) {
      reject(op, "local must be whole's shape " + whole.shape().to_string() + " with the extent " +
                     std::to_string(whole.size(dim)) + " / " + std::to_string(ranks) +
                     " along dim " + std::to_string(dim) + ", got " + local.shape().to_string());
    }
  }
}

// The copies between whole's ranges and local's consecutive pieces: casts
// to the same type, which read and write strided views on every backend
// (a copy task writes contiguous tensors only).
template <class Add>
void for_each_piece(const Tensor& whole, const Tensor& local, int rank, int ranks,
                    RingLayout layout, int dim, std::string_view op, Add&& add) {
  check_shard_shapes(whole, local, ranks, dim, op);
  std::int64_t at = 0;
  int piece = 0;
  for (const SequenceRange& r : ring_ranges(whole.size(dim), rank, ranks, layout)) {
    const std::int64_t n = r.stop - r.start;
    add(whole.slice(dim, r.start, r.stop), local.slice(dim, at, at + n), piece++);
    at += n;
  }
}

}  // namespace

void ring_shard(Graph& g, const Tensor& whole, const Tensor& local, int rank, int ranks,
                RingLayout layout, int dim) {
  for_each_piece(whole, local, rank, ranks, layout, dim, "ring_shard",
                 [&](const Tensor& w, const Tensor& l, int piece) {
                   g.add(cast(w, l), {.name = "ring_shard." + std::to_string(piece)});
                 });
}

void ring_unshard(Graph& g, const Tensor& local, const Tensor& whole, int rank, int ranks,
                  RingLayout layout, int dim) {
  for_each_piece(whole, local, rank, ranks, layout, dim, "ring_unshard",
                 [&](const Tensor& w, const Tensor& l, int piece) {
                   g.add(cast(l, w), {.name = "ring_unshard." + std::to_string(piece)});
                 });
}

}  // namespace loom::ops
