#pragma once
// Copies between pageable host memory and a device, staged through pinned
// buffers from the pinned pool, so that the caller never blocks: the caller
// records one event and queues one slice a worker; the workers copy chunks
// pageable -> pinned (a CPU memcpy, several workers in parallel) and
// pinned -> device (cudaMemcpyAsync), two buffers each so that the CPU copy
// of one chunk overlaps the DMA of the one before. Downloads run the other
// way. Completion comes from a CUDA host callback (uploads) or the worker
// (downloads).
//
// Thread-safety: upload/download may be called from any thread. The workers
// block on their own events; they are not the scheduling thread.

#include "cuda/event_pool.hpp"
#include "cuda/stream.hpp"
#include "memory/caching_allocator.hpp"

#include <loom/completion.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::detail {

class StagingEngine {
 public:
  /// `pinned` supplies the staging buffers (two of `chunk_bytes` a worker,
  /// taken on first use and kept). `workers` 0 picks from the core count.
  StagingEngine(int device, std::shared_ptr<CachingAllocator> pinned, std::size_t chunk_bytes,
                int workers);
  ~StagingEngine();
  StagingEngine(const StagingEngine&) = delete;
  StagingEngine& operator=(const StagingEngine&) = delete;

  /// host (pageable) -> device, after the work already on `after`. `keep`
  /// stays alive until the copy completes.
  Completion upload(const void* host, void* device, std::size_t bytes, StreamView after,
                    std::shared_ptr<void> keep);
  /// device -> host (pageable), after the work already on `after`.
  Completion download(const void* device, void* host, std::size_t bytes, StreamView after,
                      std::shared_ptr<void> keep);

  /// Blocks until every queued copy has completed.
  void drain();
  int workers() const noexcept { return static_cast<int>(workers_.size()); }
  /// For tests: chunk `chunk` (0, 1, ...) of the next copy that has one
  /// fails as a failed cudaMemcpyAsync would, after the chunks a worker
  /// queued before it. Process-wide; thread-safe.
  static void fail_chunk_for_testing(std::size_t chunk) noexcept;
  std::size_t chunk_bytes() const noexcept { return chunk_; }

 private:
  struct Job;
  struct Slice {
    std::shared_ptr<Job> job;
    int index;  // this worker takes chunks index, index + workers, ...
  };
  struct Worker;

  Completion submit(bool upload, const void* src, void* dst, std::size_t bytes, StreamView after,
                    std::shared_ptr<void> keep);
  void run(Worker& worker);
  void upload_slice(Worker& worker, const std::shared_ptr<Job>& job, int index);
  void download_slice(Worker& worker, const std::shared_ptr<Job>& job, int index);
  void slice_done(Job& job, std::exception_ptr error);
  void settle(Worker& worker) noexcept;
  void reap();

  int device_;
  std::shared_ptr<CachingAllocator> pinned_;
  std::size_t chunk_;
  EventPool start_events_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex drain_mutex_;
  std::condition_variable drained_;
  int outstanding_ = 0;  // under drain_mutex_
  std::vector<std::shared_ptr<Job>>
      active_;  // under drain_mutex_; released by reap(), never in a callback
};

}  // namespace loom::detail
