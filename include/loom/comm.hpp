#pragma once
/// @file comm.hpp
/// Communicators: the ranks a collective spans. Each collective is an op
/// (collective.hpp) to add to a graph, g.collective(comm->all_reduce(x, x)):
/// it reads and writes its tensors like any task, and the collectives of one
/// communicator run on each rank in the order they were submitted (each
/// writes the communicator's own token, so edges and the ordering across
/// runs keep them in line), overlapping the rest of the graph.
///
/// Backends:
/// - nccl: one rank a GPU, device tensors; collectives are enqueued on the
///   communication stream and captured into compiled graphs. Across
///   processes (world_communicator under mpirun, MPI broadcasting NCCL's id),
///   or one process driving several GPUs (nccl_communicators).
/// - mpi: one process a rank, over MPI: host tensors, and device tensors
///   staged through pinned host memory. For the CPU backend and for ranks
///   that share a GPU (NCCL takes one rank a GPU). Its collectives run on a
///   host worker, and are not compiled.
/// - local: P ranks inside one process, one thread (and one Runtime) a rank:
///   local_communicators(P). Host tensors on the CPU backend, or device
///   tensors, the ranks sharing one GPU (their collectives reduce on the
///   device). For tests and for developing a multi-rank program on one
///   machine.
///
/// world_communicator picks one: the environment variable LOOM_COMM (nccl,
/// mpi, local or automatic, any case) or, by default, nccl when the runtime
/// runs on a GPU that no other rank of the job drives, mpi otherwise, and a
/// one-rank communicator outside mpirun. MPI is initialized when the program
/// has not (MPI_THREAD_MULTIPLE; finalized at exit). A program that
/// initializes it itself asks for MPI_THREAD_MULTIPLE; with
/// MPI_THREAD_SERIALIZED loom serializes its own MPI calls, and the program
/// makes none of its own while runs holding mpi collectives are in flight.
///
/// A collective whose ranks disagree (another collective, size, dtype, root
/// or reduction) fails on every rank with a CommError saying how; so does one
/// that some rank does not reach within CommOptions::timeout, naming the
/// ranks that were missing. Never a silent hang. On the mpi backend a
/// collective that times out leaves the communicator unusable (its later
/// collectives fail at once, saying why); on the nccl backend a mismatch
/// between ranks is not seen by NCCL and shows as that timeout.

#include <loom/collective.hpp>
#include <loom/export.hpp>
#include <loom/tensor.hpp>

#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

namespace loom {

class Runtime;

/// How an all-reduce or a reduce-scatter combines the ranks' elements.
enum class ReduceOp { sum, max, min };

struct CommOptions {
  /// How long a rank waits inside a collective for the other ranks before the
  /// collective fails with a CommError.
  std::chrono::milliseconds timeout{30000};
};

class LOOM_API Communicator {
 public:
  virtual ~Communicator() = default;
  /// This rank, in [0, size()).
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// "nccl", "mpi" or "local".
  virtual std::string_view backend() const noexcept = 0;

  // Collectives: each checks its tensors when built (@throws InvalidArgument:
  // contiguous tensors, matching dtypes and element counts, a dtype the
  // reduction supports: f32, i32, i64, i8, u8) and checks the other ranks'
  // agreement when it runs. Input and output may be the same tensor.

  /// out = in combined elementwise over the ranks.
  virtual CollectivePtr all_reduce(const Tensor& in, const Tensor& out,
                                   ReduceOp op = ReduceOp::sum) const = 0;
  /// out = every rank's `in`, in rank order (out has size() x in's elements).
  virtual CollectivePtr all_gather(const Tensor& in, const Tensor& out) const = 0;
  /// out = block rank() of `in` combined over the ranks (in has size() x
  /// out's elements).
  virtual CollectivePtr reduce_scatter(const Tensor& in, const Tensor& out,
                                       ReduceOp op = ReduceOp::sum) const = 0;
  /// data = rank `root`'s data, on every rank.
  virtual CollectivePtr broadcast(const Tensor& data, int root) const = 0;
  /// recv = the `send` of rank - 1 (mod size): every rank sends to rank + 1
  /// and receives from rank - 1 in one step, as a ring does.
  virtual CollectivePtr ring_exchange(const Tensor& send, const Tensor& recv) const = 0;
  /// Hands `data` to rank `peer`'s matching recv (the k-th send to a peer
  /// meets its k-th recv from this rank); done once the recv has the data,
  /// like MPI_Ssend: two ranks that both send to each other first wait for
  /// each other until the timeout (use ring_exchange for that).
  virtual CollectivePtr send(const Tensor& data, int peer) const = 0;
  /// data = what rank `peer` sent; its size and dtype must match.
  virtual CollectivePtr recv(const Tensor& data, int peer) const = 0;

  /// A communicator of the ranks that pass the same `colour`, ordered by
  /// `key`, then by rank. Every rank calls it (directly, not as a task), and
  /// it returns once all have. @throws CommError when some rank does not
  /// call it within the timeout.
  virtual std::shared_ptr<Communicator> split(int colour, int key) const = 0;
};

/// The local backend: `ranks` communicators, element r being rank r's. Give
/// each rank a thread and a Runtime of its own (a collective waits on a host
/// worker for the other ranks). @throws InvalidArgument for ranks < 1.
LOOM_API std::vector<std::shared_ptr<Communicator>> local_communicators(int ranks,
                                                                        CommOptions options = {});

/// Every process of the job (MPI_COMM_WORLD under mpirun; one rank
/// outside), for the program whose runtime is `rt`: see the backends above
/// for which is chosen. Every process calls it. @throws CommError (a
/// process missing past the timeout, no MPI in this build where one is
/// needed), NcclError, MpiError, InvalidArgument (a bad LOOM_COMM).
LOOM_API std::shared_ptr<Communicator> world_communicator(const Runtime& rt,
                                                          CommOptions options = {});

/// The nccl backend in one process: a communicator a device, element r
/// being rank r's on devices[r]; give each a Runtime on that device.
/// @throws InvalidArgument (a device listed twice or missing), NcclError.
LOOM_API std::vector<std::shared_ptr<Communicator>> nccl_communicators(
    const std::vector<int>& devices, CommOptions options = {});

}  // namespace loom
