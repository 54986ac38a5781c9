#pragma once
// A pool of expensive-to-create objects (CUDA streams, events) handed out as
// exclusive leases and recycled on release, so that a steady state creates
// nothing. Generic and CUDA-free, so its logic is tested on the CPU with a
// fake factory.
//
// Thread-safety: acquire, release (a lease's destruction) and the counters
// may be called from any thread; they take one short mutex, never held while
// an object is created. The pool must outlive its leases.

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace loom::detail {

template <class T>
class RecyclingPool {
 public:
  using Factory = std::function<T()>;

  /// An exclusive lease of one pooled object; returns it to the pool when
  /// destroyed. Move-only. The object itself never moves: the pool owns it.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          object_(std::exchange(other.object_, nullptr)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        release();
        pool_ = std::exchange(other.pool_, nullptr);
        object_ = std::exchange(other.object_, nullptr);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }

    explicit operator bool() const noexcept { return object_ != nullptr; }
    T& operator*() const noexcept { return *object_; }
    T* operator->() const noexcept { return object_; }
    T* get() const noexcept { return object_; }

    /// Returns the object to the pool now.
    void release() noexcept {
      if (pool_ != nullptr && object_ != nullptr) pool_->give_back(object_);
      object_ = nullptr;
      pool_ = nullptr;
    }

   private:
    friend class RecyclingPool;
    Lease(RecyclingPool* pool, T* object) noexcept : pool_(pool), object_(object) {}

    RecyclingPool* pool_ = nullptr;
    T* object_ = nullptr;
  };

  explicit RecyclingPool(Factory factory) : factory_(std::move(factory)) {}
  RecyclingPool(const RecyclingPool&) = delete;
  RecyclingPool& operator=(const RecyclingPool&) = delete;

  /// A cached object if there is one, else a new one from the factory.
  /// @throws whatever the factory throws; the pool is unchanged then.
  Lease acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        T* object = free_.back();
        free_.pop_back();
        ++in_use_;
        return Lease(this, object);
      }
    }
    auto owned = std::make_unique<T>(factory_());
    T* object = owned.get();
    std::lock_guard lock(mutex_);
    // Room for every object the pool owns, so give_back never allocates.
    free_.reserve(owned_.size() + 1);
    owned_.push_back(std::move(owned));
    ++in_use_;
    return Lease(this, object);
  }

  /// Creates objects until `count` are cached, so later acquires create none.
  void reserve(std::size_t count) {
    std::vector<Lease> leases;
    leases.reserve(count);
    while (cached() + leases.size() < count) leases.push_back(acquire());
  }

  /// Objects the factory has made over the pool's lifetime.
  std::size_t created() const {
    std::lock_guard lock(mutex_);
    return owned_.size();
  }
  /// Objects idle in the pool.
  std::size_t cached() const {
    std::lock_guard lock(mutex_);
    return free_.size();
  }
  /// Objects currently leased.
  std::size_t in_use() const {
    std::lock_guard lock(mutex_);
    return in_use_;
  }

 private:
  void give_back(T* object) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(object);  // capacity reserved at creation: no allocation
    --in_use_;
  }

  Factory factory_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<T>> owned_;
  std::vector<T*> free_;
  std::size_t in_use_ = 0;
};

}  // namespace loom::detail
