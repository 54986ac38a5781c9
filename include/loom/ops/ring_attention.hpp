#pragma once
/// @file ops/ring_attention.hpp
/// Ring attention (Lecture 13): attention over a sequence split across the
/// ranks of a communicator. Each rank keeps its block of queries; at each of
/// P steps (P = comm.size()) it runs flash attention against the key/value
/// block it holds while passing that block to rank + 1 (k and v packed into
/// one ring_exchange on the communication stream, into the next of three
/// buffers, so the next block arrives while this one is computed, and the
/// exchanges may run a step ahead); the partial results merge by
/// their log-sum-exp in f32. The result on each rank equals attention over
/// the whole sequence, for that rank's queries.
///
/// The functions add tasks to a graph; they are not ops. Every rank builds
/// the same calls with its own communicator (the collectives meet in the
/// order they were added) and submits or compiles its graph. The tasks are
/// named after options.name ("ring_attention.step1", ...) so an error names
/// the step it came from.
///
/// Shapes: q, k, v and out are this rank's blocks, [B, H, L, D] like
/// flash_attention's (bf16 or f16, D 64 or 128, the last dimension
/// contiguous); L is the same for q, k and v and on every rank (a rank whose
/// blocks differ in size from its neighbour's makes the ring_exchange fail
/// on both, naming it). lse (optional) gets the whole sequence's log-sum-exp
/// of this rank's rows, f32 [B, H, L].
///
/// Sequence layout. Without a causal mask which positions a rank holds does
/// not change the result. With one, the layout says which positions each
/// rank's block holds (ring_ranges, ring_shard and ring_unshard lay a whole
/// sequence out in that order and back):
/// - contiguous: rank r holds positions [r L, (r + 1) L). Rank P - 1 then
///   attends to every block and rank 0 to its own only: unbalanced.
/// - zigzag (the default): the sequence in 2P chunks of L / 2; rank r holds
///   chunks r and 2P - 1 - r. Every rank does the same work at every step
///   (half a block's product: its own block under the mask, otherwise the
///   first half of an earlier rank's keys, or all keys of a later rank for
///   its second half of queries). L must be even.
///
/// @code
///   auto comm = loom::world_communicator(rt);
///   loom::ops::ring_attention(g, *comm, q, k, v, out, lse, {.causal = true});
/// @endcode

#include <loom/comm.hpp>
#include <loom/export.hpp>
#include <loom/graph.hpp>
#include <loom/ops/attention.hpp>
#include <loom/tensor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::ops {

enum class RingLayout : std::uint8_t { contiguous, zigzag };

struct RingAttentionOptions {
  bool causal = false;
  /// Multiplies q . k; 0 means 1 / sqrt(D).
  float scale = 0.0F;
  RingLayout layout = RingLayout::zigzag;
  /// The prefix of the tasks' names.
  std::string name = "ring_attention";
};

/// Adds the forward pass's tasks to `g`: out (and lse, when defined) = this
/// rank's rows of attention over the whole sequence. Scratch (three packed
/// key/value buffers, two partial results, an f32 running result) is graph
/// intermediates. @throws InvalidArgument for shapes that cannot form a ring
/// (the message says why); the tensors' other checks are flash_attention's,
/// at submit, naming the step.
LOOM_API void ring_attention(Graph& g, const Communicator& comm, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse = Tensor{},
                             const RingAttentionOptions& options = {});

/// Adds the backward pass's tasks: the gradients of this rank's q, k and v
/// given dout, from the forward's out and lse (lse is required). dQ is summed
/// here in f32; dK and dV are summed in f32 buffers that travel the ring with
/// their key/value block and come home after P steps. The same options as
/// the forward. @throws InvalidArgument as ring_attention.
LOOM_API void ring_attention_backward(Graph& g, const Communicator& comm, const Tensor& q,
                                      const Tensor& k, const Tensor& v, const Tensor& out,
                                      const Tensor& lse, const Tensor& dout,
                                      const AttentionGradients& grads,
                                      const RingAttentionOptions& options = {});

/// Positions [start, stop) of a whole sequence.
struct SequenceRange {
  std::int64_t start = 0;
  std::int64_t stop = 0;
};

/// The positions rank `rank` of `ranks` holds, in its block's order, for a
/// sequence of `length` (a multiple of ranks; of 2 ranks for zigzag).
/// @throws InvalidArgument otherwise.
LOOM_API std::vector<SequenceRange> ring_ranges(std::int64_t length, int rank, int ranks,
                                                RingLayout layout);

/// Adds the copies of rank `rank`'s positions of `whole` (the sequence along
/// dimension `dim`, 2 for [B, H, S, D] and for lse's [B, H, S]) into `local`
/// (whole's shape with S / ranks along dim); f32, f16 or bf16 tensors of one
/// type, any strides (the copies are casts to the same type). @throws
/// InvalidArgument for shapes that do not match; the types are checked at submit.
LOOM_API void ring_shard(Graph& g, const Tensor& whole, const Tensor& local, int rank, int ranks,
                         RingLayout layout, int dim = 2);
/// The reverse: `local` into its positions of `whole`.
LOOM_API void ring_unshard(Graph& g, const Tensor& local, const Tensor& whole, int rank, int ranks,
                           RingLayout layout, int dim = 2);

}  // namespace loom::ops
