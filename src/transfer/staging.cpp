#include "transfer/staging.hpp"

#include "core/completion_state.hpp"
#include "core/log.hpp"
#include "cuda/check.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/event.hpp"

#include <loom/error.hpp>

#include <algorithm>
#include <cstring>

namespace loom::detail {

struct StagingEngine::Job {
  StagingEngine* engine = nullptr;
  bool upload = true;
  const char* src = nullptr;
  char* dst = nullptr;
  std::size_t bytes = 0;
  std::size_t chunks = 0;
  int slices = 0;
  EventPool::Lease start;  // recorded on the caller's stream
  std::shared_ptr<void> keep;
  std::shared_ptr<CompletionState> completion;
  std::atomic<int> remaining{0};
  bool finished = false;  // under the engine's drain mutex
  std::mutex error_mutex;
  std::exception_ptr error;
};

struct StagingEngine::Worker {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Slice> queue;
  bool stop = false;
  // Made by the worker thread on its first slice.
  std::unique_ptr<Stream> stream;
  Allocation buffers[2];
  std::unique_ptr<Event> buffer_free[2];  // the DMA that last used the buffer is done
};

namespace {

constexpr std::size_t kNoFailure = ~std::size_t{0};
std::atomic<std::size_t> g_failing_chunk{kNoFailure};

// The test hook's failure, where chunk `c`'s DMA would be queued.
void fail_if_chosen(std::size_t c) {
  std::size_t chosen = c;
  if (g_failing_chunk.load(std::memory_order_relaxed) == c &&
      g_failing_chunk.compare_exchange_strong(chosen, kNoFailure)) {
    LOOM_CUDA_CHECK(cudaErrorInvalidValue);
  }
}

}  // namespace

void StagingEngine::fail_chunk_for_testing(std::size_t chunk) noexcept {
  g_failing_chunk.store(chunk);
}

StagingEngine::StagingEngine(int device, std::shared_ptr<CachingAllocator> pinned,
                             std::size_t chunk_bytes, int workers)
    : device_(device), pinned_(std::move(pinned)), chunk_(chunk_bytes), start_events_(device) {
  if (chunk_ == 0) throw InvalidArgument("staging chunk size must be positive");
  if (workers <= 0) {
    const int cores = static_cast<int>(std::max(2U, std::thread::hardware_concurrency()));
    // The CPU copy into pinned buffers is the bottleneck (a core copies
    // 5-8 GB/s). 12 workers measured slower than 8 on the H200 host (the
    // caller's 12 wake-ups doubled its blocked time), so 8 at most.
    workers = std::clamp(cores / 2, 2, 8);
  }
  for (int i = 0; i < workers; ++i) {
    workers_.push_back(std::make_unique<Worker>());
  }
  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->thread = std::thread([this, worker] { run(*worker); });
  }
}

StagingEngine::~StagingEngine() {
  drain();
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mutex);
      w->stop = true;
    }
    w->wake.notify_one();
    w->thread.join();
    for (auto& b : w->buffers) pinned_->deallocate(b);
  }
}

Completion StagingEngine::upload(const void* host, void* device, std::size_t bytes,
                                 StreamView after, std::shared_ptr<void> keep) {
  return submit(true, host, device, bytes, after, std::move(keep));
}

Completion StagingEngine::download(const void* device, void* host, std::size_t bytes,
                                   StreamView after, std::shared_ptr<void> keep) {
  return submit(false, device, host, bytes, after, std::move(keep));
}

Completion StagingEngine::submit(bool upload, const void* src, void* dst, std::size_t bytes,
                                 StreamView after, std::shared_ptr<void> keep) {
  reap();
  auto completion = std::make_shared<CompletionState>();
  if (bytes == 0) {
    completion->finish();
    return CompletionAccess::make(completion);
  }
  auto job = std::make_shared<Job>();
  job->engine = this;
  job->upload = upload;
  job->src = static_cast<const char*>(src);
  job->dst = static_cast<char*>(dst);
  job->bytes = bytes;
  job->chunks = (bytes + chunk_ - 1) / chunk_;
  job->slices = static_cast<int>(std::min<std::size_t>(job->chunks, workers_.size()));
  job->remaining = job->slices;
  job->keep = std::move(keep);
  job->completion = completion;
  job->start = start_events_.acquire();
  {
    DeviceGuard guard(device_);
    job->start->record(after);
  }
  {
    std::lock_guard lock(drain_mutex_);
    ++outstanding_;
    active_.push_back(job);
  }
  for (int i = 0; i < job->slices; ++i) {
    Worker& w = *workers_[static_cast<std::size_t>(i)];
    {
      std::lock_guard lock(w.mutex);
      w.queue.push_back(Slice{job, i});
    }
    w.wake.notify_one();
  }
  return CompletionAccess::make(completion);
}

void StagingEngine::run(Worker& worker) {
  for (;;) {
    Slice slice;
    {
      std::unique_lock lock(worker.mutex);
      worker.wake.wait(lock, [&] { return worker.stop || !worker.queue.empty(); });
      if (worker.queue.empty()) return;  // stop requested and nothing left
      slice = std::move(worker.queue.front());
      worker.queue.pop_front();
    }
    Job& job = *slice.job;
    try {
      LOOM_CUDA_CHECK(cudaSetDevice(device_));
      if (!worker.stream) {
        worker.stream = std::make_unique<Stream>(device_, 0);
        for (int b = 0; b < 2; ++b) {
          worker.buffers[b] = pinned_->allocate(chunk_);
          worker.buffer_free[b] = std::make_unique<Event>(device_);
        }
      }
      if (job.upload) {
        upload_slice(worker, slice.job, slice.index);
      } else {
        download_slice(worker, slice.job, slice.index);
      }
    } catch (...) {
      settle(worker);
      slice_done(job, std::current_exception());
    }
  }
}

// A slice that fails midway may have queued chunks already: their DMA still
// reads the source and writes the destination or a pinned buffer. The copy
// reports its error only once they are done, so that the caller may free
// its memory and the buffers are free for the next slice (or the pool).
void StagingEngine::settle(Worker& worker) noexcept {
  if (!worker.stream) return;
  // On a lost device this fails too (logged); nothing queued will run then.
  (void)LOOM_CUDA_ASSERT(cudaStreamSynchronize(worker.stream->view()));
}

void StagingEngine::upload_slice(Worker& worker, const std::shared_ptr<Job>& job_ref, int index) {
  Job& job = *job_ref;
  const StreamView stream = worker.stream->view();
  job.start->make_wait(stream);
  int b = 0;
  for (std::size_t c = static_cast<std::size_t>(index); c < job.chunks;
       c += static_cast<std::size_t>(job.slices)) {
    const std::size_t offset = c * chunk_;
    const std::size_t length = std::min(chunk_, job.bytes - offset);
    worker.buffer_free[b]->synchronize();  // the buffer's previous DMA has finished
    std::memcpy(worker.buffers[b].ptr, job.src + offset, length);
    fail_if_chosen(c);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(job.dst + offset, worker.buffers[b].ptr, length,
                                    cudaMemcpyHostToDevice, stream));
    worker.buffer_free[b]->record(stream);
    b ^= 1;
  }
  // Completion is signalled from the stream itself, once the last DMA is
  // done. The callback runs on a CUDA thread and may not call CUDA: it holds
  // no reference (the engine's active list keeps the job alive until reap(),
  // which runs elsewhere) and only counts.
  Job* raw = job_ref.get();
  const cudaError_t rc = cudaLaunchHostFunc(
      stream,
      [](void* p) {
        auto* finished = static_cast<Job*>(p);
        finished->engine->slice_done(*finished, nullptr);
      },
      raw);
  LOOM_CUDA_CHECK(rc);
}

void StagingEngine::download_slice(Worker& worker, const std::shared_ptr<Job>& job_ref, int index) {
  Job& job = *job_ref;
  const StreamView stream = worker.stream->view();
  job.start->make_wait(stream);
  int b = 0;
  std::size_t pending_offset = 0;
  std::size_t pending_length = 0;
  int pending_buffer = -1;
  const auto drain_pending = [&] {
    if (pending_buffer < 0) return;
    worker.buffer_free[pending_buffer]->synchronize();
    std::memcpy(job.dst + pending_offset, worker.buffers[pending_buffer].ptr, pending_length);
    pending_buffer = -1;
  };
  for (std::size_t c = static_cast<std::size_t>(index); c < job.chunks;
       c += static_cast<std::size_t>(job.slices)) {
    const std::size_t offset = c * chunk_;
    const std::size_t length = std::min(chunk_, job.bytes - offset);
    fail_if_chosen(c);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(worker.buffers[b].ptr, job.src + offset, length,
                                    cudaMemcpyDeviceToHost, stream));
    worker.buffer_free[b]->record(stream);
    drain_pending();  // the CPU copy of the previous chunk overlaps this DMA
    pending_offset = offset;
    pending_length = length;
    pending_buffer = b;
    b ^= 1;
  }
  drain_pending();
  slice_done(job, nullptr);
}

void StagingEngine::slice_done(Job& job, std::exception_ptr error) {
  if (error) {
    std::lock_guard lock(job.error_mutex);
    if (!job.error) job.error = error;
  }
  if (job.remaining.fetch_sub(1) != 1) return;
  // The last slice: the job is complete. Its buffers (and their pool
  // returns, which may call CUDA) are released later by reap(), never here.
  std::exception_ptr first;
  {
    std::lock_guard lock(job.error_mutex);
    first = job.error;
  }
  job.completion->finish(first);
  // The last touch of the job and of the engine, under the drain lock: once
  // it is released, drain() and reap() may free both.
  std::lock_guard lock(drain_mutex_);
  job.finished = true;
  --outstanding_;
  drained_.notify_all();
}

void StagingEngine::reap() {
  std::vector<std::shared_ptr<Job>> done;
  std::lock_guard lock(drain_mutex_);
  std::erase_if(active_, [&](std::shared_ptr<Job>& job) {
    if (!job->finished) return false;
    done.push_back(std::move(job));
    return true;
  });
  // `done` is released here, on this (non-callback) thread.
}

void StagingEngine::drain() {
  {
    std::unique_lock lock(drain_mutex_);
    drained_.wait(lock, [&] { return outstanding_ == 0; });
  }
  reap();
}

}  // namespace loom::detail
