#include "memory/caching_allocator.hpp"

#include "core/log.hpp"

#include <loom/error.hpp>

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

namespace loom {

std::string format_bytes(std::size_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  }
  return text;
}

std::string to_string(const PoolStatistics& s) {
  char rates[96];
  std::snprintf(rates, sizeof rates, "%.1f%% cache hits, fragmentation %.2f",
                100.0 * s.cache_hit_rate(), s.fragmentation());
  return "reserved " + format_bytes(s.reserved_bytes) + " (peak " +
         format_bytes(s.peak_reserved_bytes) + "), in use " + format_bytes(s.in_use_bytes) +
         " (peak " + format_bytes(s.peak_in_use_bytes) + "), " + std::to_string(s.allocations) +
         " allocations, " + rates + ", " + std::to_string(s.upstream_allocations) +
         " upstream allocations";
}

namespace detail {

namespace bi = boost::intrusive;
using FreeHook = bi::set_member_hook<bi::link_mode<bi::safe_link>>;
using PendingHook = bi::list_member_hook<bi::link_mode<bi::safe_link>>;

struct Block {
  char* ptr = nullptr;
  std::size_t size = 0;
  StreamKey stream = 0;
  bool small = false;
  bool allocated = false;
  bool pending = false;   // freed, waiting for markers on other streams
  Block* prev = nullptr;  // neighbours inside the segment, by address
  Block* next = nullptr;
  Block* next_spare = nullptr;               // the recycled-records list
  std::vector<StreamKey> used_on;            // other streams (record_stream)
  std::vector<EventSource::Marker> markers;  // recorded at free time
  FreeHook free_hook;
  PendingHook pending_hook;

  bool whole_segment() const noexcept { return prev == nullptr && next == nullptr; }
};

namespace {

struct BlockOrder {
  bool operator()(const Block& a, const Block& b) const noexcept {
    return std::tie(a.stream, a.size, a.ptr) < std::tie(b.stream, b.size, b.ptr);
  }
};

using FreeSet = bi::multiset<Block, bi::member_hook<Block, FreeHook, &Block::free_hook>,
                             bi::compare<BlockOrder>>;
using PendingList = bi::list<Block, bi::member_hook<Block, PendingHook, &Block::pending_hook>>;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// A miss that would take the pool past this multiple of the memory in use
// first gives wholly free segments back to the upstream.
constexpr double kGrowthLimit = 1.25;

std::size_t segment_size(std::size_t rounded) {
  if (rounded <= CachingAllocator::kSmallLimit) return CachingAllocator::kSmallSegment;
  if (rounded <= CachingAllocator::kMediumLimit) return CachingAllocator::kMediumSegment;
  return round_up(rounded, CachingAllocator::kLargeRound);
}

bool worth_splitting(const Block& block, std::size_t rounded) {
  const std::size_t remainder = block.size - rounded;
  return block.small ? remainder >= CachingAllocator::kRoundTo
                     : remainder > CachingAllocator::kSmallLimit;
}

}  // namespace

struct CachingAllocator::Impl {
  std::unique_ptr<Upstream> upstream;
  std::shared_ptr<EventSource> events;
  mutable std::mutex mutex;
  FreeSet small_free;
  FreeSet large_free;
  PendingList pending;
  std::vector<std::unique_ptr<Block>> records;  // owns every Block record
  Block* spare = nullptr;                       // recycled records
  std::vector<Block*> segments;                 // segment heads, for teardown
  PoolStatistics stats;

  FreeSet& free_set(bool small) { return small ? small_free : large_free; }

  // Two spare records (a segment head and a split remainder) and room for
  // one more segment: taken before anything changes, so that an allocation
  // failure of our own bookkeeping leaves the pool consistent.
  void reserve_bookkeeping() {
    for (int i = 0; i < 2; ++i) {
      int spares = 0;
      for (Block* b = spare; b != nullptr && spares < 2; b = b->next_spare) ++spares;
      if (spares >= 2) break;
      records.push_back(std::make_unique<Block>());
      Block* b = records.back().get();
      b->next_spare = spare;
      spare = b;
    }
    if (segments.size() == segments.capacity()) {
      segments.reserve(std::max<std::size_t>(8, 2 * segments.size()));
    }
  }

  // Takes a spare record when there is one (reserve_bookkeeping() makes sure).
  Block* new_record() {
    if (spare != nullptr) {
      Block* b = spare;
      spare = b->next_spare;
      b->next_spare = nullptr;
      return b;
    }
    records.push_back(std::make_unique<Block>());
    return records.back().get();
  }

  void recycle(Block* b) {
    b->ptr = nullptr;
    b->size = 0;
    b->prev = b->next = nullptr;
    b->allocated = b->pending = false;
    b->used_on.clear();  // keeps capacity: no allocation next time
    b->markers.clear();
    b->next_spare = spare;
    spare = b;
  }

  Block* find_free(std::size_t rounded, StreamKey stream, bool small) {
    FreeSet& set = free_set(small);
    Block key;
    key.stream = stream;
    key.size = rounded;
    auto it = set.lower_bound(key, BlockOrder{});
    if (it == set.end() || it->stream != stream) return nullptr;
    Block* b = &*it;
    set.erase(it);
    return b;
  }

  // The best-fitting free block of another stream that is idle, handed to
  // `stream`: all work that used it has completed, so no event is needed.
  Block* take_from_idle_stream(std::size_t rounded, StreamKey stream, bool small) {
    if (!events) return nullptr;
    FreeSet& set = free_set(small);
    Block* best = nullptr;
    for (auto it = set.begin(); it != set.end();) {
      const StreamKey other = it->stream;
      Block key;
      key.stream = other;
      key.size = rounded;
      auto fit = set.lower_bound(key, BlockOrder{});
      if (other != stream && fit != set.end() && fit->stream == other &&
          (best == nullptr || fit->size < best->size) && events->stream_idle(other)) {
        best = &*fit;
      }
      key.size = ~std::size_t{0};
      key.ptr = reinterpret_cast<char*>(~std::uintptr_t{0});
      it = set.upper_bound(key, BlockOrder{});  // the next stream's blocks
    }
    if (best == nullptr) return nullptr;
    set.erase(set.iterator_to(*best));
    best->stream = stream;
    ++stats.cross_stream_reuses;
    return best;
  }

  // Segments taken out of the pool under the lock (out of every index and
  // statistic), to be given back to the upstream outside it. Their records,
  // chained through next_spare, are recycled under the lock afterwards.
  struct Detached {
    Block* head = nullptr;
    std::size_t bytes = 0;
  };

  bool wholly_free(const Block* b) const noexcept {
    return b->whole_segment() && !b->allocated && !b->pending;
  }

  void detach(Block* b, Detached& out) noexcept {
    free_set(b->small).erase(free_set(b->small).iterator_to(*b));
    ++stats.upstream_frees;
    stats.reserved_bytes -= b->size;
    out.bytes += b->size;
    b->next_spare = out.head;
    out.head = b;
  }

  // Before growing past kGrowthLimit x what is in use, take wholly free
  // cached segments out: a miss is slow anyway, and this keeps the cache
  // from filling with pieces that no request fits (fragmentation).
  Detached detach_before_growing(std::size_t bytes, std::size_t rounded) noexcept {
    Detached out;
    const auto limit = static_cast<double>(stats.in_use_bytes + rounded) * kGrowthLimit;
    for (auto it = segments.begin(); it != segments.end();) {
      if (static_cast<double>(stats.reserved_bytes + bytes) <= limit) break;
      Block* b = *it;
      if (wholly_free(b)) {
        detach(b, out);
        ++stats.cache_trims;
        it = segments.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  // Every wholly free segment, once pending blocks whose markers completed
  // have been freed (and merged).
  Detached detach_cached() {
    if (events) process_pending();
    Detached out;
    for (auto it = segments.begin(); it != segments.end();) {
      Block* b = *it;
      if (wholly_free(b)) {
        detach(b, out);
        it = segments.erase(it);
      } else {
        ++it;
      }
    }
    if (out.bytes > 0) ++stats.cache_releases;
    return out;
  }

  // Without the lock: the detached records are reachable from nowhere else.
  void give_back(const Detached& d) noexcept {
    for (Block* b = d.head; b != nullptr; b = b->next_spare) upstream->deallocate(b->ptr, b->size);
  }

  // Under the lock, once give_back() is done.
  void recycle_detached(Detached& d) noexcept {
    for (Block* b = d.head; b != nullptr;) {
      Block* next = b->next_spare;
      recycle(b);
      b = next;
    }
    d = {};
  }

  // A fresh upstream segment joins the pool for `stream`. Needs the spare
  // record and segment capacity of reserve_bookkeeping(); does not throw then.
  Block* adopt_segment(void* p, std::size_t bytes, StreamKey stream, bool small) {
    ++stats.upstream_allocations;
    stats.reserved_bytes += bytes;
    stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
    Block* b = new_record();
    b->ptr = static_cast<char*>(p);
    b->size = bytes;
    b->stream = stream;
    b->small = small;
    segments.push_back(b);
    return b;
  }

  // A free block (out of the free sets) goes to the caller: split off what
  // it does not need, count it. Needs a spare record; does not throw then.
  Allocation hand_out(Block* b, std::size_t bytes, std::size_t rounded) {
    if (worth_splitting(*b, rounded)) split(b, rounded);
    b->allocated = true;
    ++stats.allocations;
    stats.in_use_bytes += b->size;
    stats.peak_in_use_bytes = std::max(stats.peak_in_use_bytes, stats.in_use_bytes);
    return {b->ptr, bytes, b};
  }

  void split(Block* b, std::size_t rounded) {
    Block* rest = new_record();
    rest->ptr = b->ptr + rounded;
    rest->size = b->size - rounded;
    rest->stream = b->stream;
    rest->small = b->small;
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    free_set(rest->small).insert(*rest);
  }

  // A free neighbour merges when it is safe for the stream of the block
  // being freed: the same stream, or a stream with no work left.
  bool mergeable(const Block* n, const Block* b) {
    if (n == nullptr || n->allocated || n->pending) return false;
    if (n->stream == b->stream) return true;
    try {
      return events && events->stream_idle(n->stream);
    } catch (...) {
      return false;  // unknown: keep them apart
    }
  }

  // A block becomes free: merge with free neighbours, then cache it. The
  // result belongs to the freed block's stream (its work may be pending there).
  void make_free(Block* b) {
    b->allocated = false;
    b->pending = false;
    FreeSet& set = free_set(b->small);
    if (mergeable(b->prev, b)) {
      Block* p = b->prev;
      set.erase(set.iterator_to(*p));
      p->size += b->size;
      p->next = b->next;
      p->stream = b->stream;
      if (b->next != nullptr) b->next->prev = p;
      recycle(b);
      b = p;
    }
    if (mergeable(b->next, b)) {
      Block* n = b->next;
      set.erase(set.iterator_to(*n));
      b->size += n->size;
      b->next = n->next;
      if (n->next != nullptr) n->next->prev = b;
      recycle(n);
    }
    set.insert(*b);
  }

  void process_pending() {
    for (auto it = pending.begin(); it != pending.end();) {
      Block& b = *it;
      const bool done = std::all_of(b.markers.begin(), b.markers.end(),
                                    [this](EventSource::Marker m) { return events->completed(m); });
      if (!done) {
        ++it;
        continue;
      }
      for (auto m : b.markers) events->release(m);
      b.markers.clear();
      it = pending.erase(it);
      --stats.pending_reuse;
      make_free(&b);
    }
  }

  [[noreturn]] void throw_out_of_memory(std::size_t bytes, std::size_t rounded,
                                        const PoolStatistics& snapshot) {
    const std::string message =
        upstream->name() + " pool: out of memory allocating " + format_bytes(bytes) + " (" +
        std::to_string(bytes) + " bytes, a " + format_bytes(segment_size(rounded)) +
        " segment) after releasing the cache and retrying once; pool: " + to_string(snapshot);
    throw OutOfMemory(bytes, message);
  }
};

CachingAllocator::CachingAllocator(std::unique_ptr<Upstream> upstream,
                                   std::shared_ptr<EventSource> events)
    : impl_(std::make_unique<Impl>()) {
  impl_->upstream = std::move(upstream);
  impl_->events = std::move(events);
}

// Nobody else uses a pool being destroyed; the lock only orders this
// thread's view after theirs. The segments go back outside it all the same.
CachingAllocator::~CachingAllocator() {
  Impl& m = *impl_;
  std::vector<Block*> segments;
  std::size_t in_use = 0;
  {
    std::lock_guard lock(m.mutex);
    in_use = m.stats.in_use_bytes;
    for (Block& b : m.pending) {
      for (auto marker : b.markers) m.events->release(marker);
    }
    m.pending.clear();
    m.small_free.clear();
    m.large_free.clear();
    segments.swap(m.segments);
  }
  if (in_use > 0) {
    logger().warn("{} pool destroyed with {} still in use; that memory is released now",
                  m.upstream->name(), format_bytes(in_use));
  }
  for (Block* head : segments) {
    std::size_t bytes = 0;
    for (Block* b = head; b != nullptr; b = b->next) bytes += b->size;
    m.upstream->deallocate(head->ptr, bytes);
  }
}

std::size_t CachingAllocator::rounded_size(std::size_t bytes) noexcept {
  return round_up(std::max<std::size_t>(bytes, 1), kRoundTo);
}

Allocation CachingAllocator::allocate(std::size_t bytes, StreamKey stream) {
  if (bytes == 0) return {};
  const std::size_t rounded = rounded_size(bytes);
  if (rounded < bytes || rounded > ~std::size_t{0} - kLargeRound) {
    throw OutOfMemory(bytes, name() + " pool: an allocation of " + std::to_string(bytes) +
                                 " bytes is larger than any memory can be");
  }
  const bool small = rounded <= kSmallLimit;
  Impl& m = *impl_;
  std::unique_lock lock(m.mutex);
  m.reserve_bookkeeping();
  if (m.events && !m.pending.empty()) m.process_pending();
  Block* b = m.find_free(rounded, stream, small);
  if (b == nullptr) b = m.take_from_idle_stream(rounded, stream, small);
  if (b != nullptr) {
    ++m.stats.cache_hits;
    return m.hand_out(b, bytes, rounded);
  }

  // A miss. Decide under the lock, call the upstream without it: other
  // threads (the scheduler) keep using the pool meanwhile, and may grow it
  // too. Segments detached here are out of the pool already.
  const std::size_t segment = segment_size(rounded);
  Impl::Detached trimmed = m.detach_before_growing(segment, rounded);
  Impl::Detached released;
  lock.unlock();
  m.give_back(trimmed);
  void* p = nullptr;
  try {
    p = m.upstream->allocate(segment);
    if (p == nullptr) {
      lock.lock();
      released = m.detach_cached();
      lock.unlock();
      m.give_back(released);
      logger().warn(
          "{} pool: upstream out of memory for {}; released {} of cached blocks, retrying",
          m.upstream->name(), format_bytes(segment), format_bytes(released.bytes));
      p = m.upstream->allocate(segment);
    }
  } catch (...) {
    // What was detached has gone back already; the pool is consistent.
    if (!lock.owns_lock()) lock.lock();
    m.recycle_detached(trimmed);
    m.recycle_detached(released);
    throw;
  }
  lock.lock();
  m.recycle_detached(trimmed);
  m.recycle_detached(released);
  if (p == nullptr) {
    const PoolStatistics snapshot = m.stats;
    lock.unlock();
    m.throw_out_of_memory(bytes, rounded, snapshot);
  }
  try {
    m.reserve_bookkeeping();  // other threads may have used what was reserved
  } catch (...) {
    lock.unlock();
    m.upstream->deallocate(p, segment);
    throw;
  }
  return m.hand_out(m.adopt_segment(p, segment, stream, small), bytes, rounded);
}

void CachingAllocator::deallocate(const Allocation& allocation) noexcept {
  Block* b = allocation.block;
  if (b == nullptr) return;
  std::lock_guard lock(impl_->mutex);
  impl_->stats.in_use_bytes -= b->size;
  if (b->used_on.empty()) {
    impl_->make_free(b);
    return;
  }
  try {
    for (StreamKey s : b->used_on) b->markers.push_back(impl_->events->record(s));
    b->used_on.clear();
    b->allocated = false;
    b->pending = true;
    impl_->pending.push_back(*b);
    ++impl_->stats.pending_reuse;
  } catch (const std::exception& e) {
    // Without a marker we cannot know when the other streams are done: keep
    // the block out of circulation rather than hand out memory still in use.
    logger().error("{} pool: could not record a reuse marker ({}); the block of {} is retired",
                   impl_->upstream->name(), e.what(), format_bytes(b->size));
    for (auto m : b->markers) impl_->events->release(m);
    b->markers.clear();
    b->allocated = true;  // never merged, never reused
  }
}

void CachingAllocator::record_stream(const Allocation& allocation, StreamKey stream) {
  Block* b = allocation.block;
  if (b == nullptr) return;
  std::lock_guard lock(impl_->mutex);
  if (!impl_->events) {
    throw InvalidArgument(impl_->upstream->name() +
                          " pool has no event source: its blocks cannot be used on other streams");
  }
  if (stream == b->stream) return;
  if (std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end()) {
    b->used_on.push_back(stream);
  }
}

void CachingAllocator::forget_streams(StreamKey keep) noexcept {
  Impl& m = *impl_;
  std::lock_guard lock(m.mutex);
  // Free blocks are ordered by stream: take them out, re-key, put them back.
  std::vector<Block*> free_blocks;
  for (FreeSet* set : {&m.small_free, &m.large_free}) {
    while (!set->empty()) {
      Block& b = *set->begin();
      set->erase(set->iterator_to(b));
      free_blocks.push_back(&b);
    }
  }
  for (Block* head : m.segments) {
    for (Block* b = head; b != nullptr; b = b->next) {
      b->used_on.clear();
      b->stream = keep;
    }
  }
  for (Block* b : free_blocks) m.free_set(b->small).insert(*b);
}

std::size_t CachingAllocator::release_cached() {
  Impl& m = *impl_;
  std::unique_lock lock(m.mutex);
  Impl::Detached released = m.detach_cached();
  lock.unlock();
  m.give_back(released);
  lock.lock();
  const std::size_t bytes = released.bytes;
  m.recycle_detached(released);
  return bytes;
}

PoolStatistics CachingAllocator::statistics() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

std::string CachingAllocator::name() const { return impl_->upstream->name(); }

}  // namespace detail
}  // namespace loom
