#pragma once
/// @file graph.hpp
/// A task graph, built in plain C++. Tasks are appended in program order;
/// each declares the tensors it reads and writes, and the graph derives the
/// edges from them (read-after-write, write-after-read, write-after-write,
/// for overlapping bytes of the same storage). Explicit edges may be added
/// too. validate() rejects cycles (naming the tasks on one) and bad op
/// inputs (naming the task and what was expected).
///
/// @code
/// loom::Graph g;
/// auto a = g.add(loom::ops::fill(x, 1.0f));
/// auto b = g.add(loom::ops::vector_add(x, y, z));   // after a: it reads x
/// g.host("log", [] { std::puts("done"); }, {z}, {});  // after b: it reads z
/// @endcode
///
/// Thread-safety: a Graph is not safe to modify from two threads at once;
/// a built graph may be submitted from any thread, many times. A graph
/// submitted again unchanged reuses what the runtime derived from it the
/// first time (validation, stream plan): build a graph once, submit it often.

#include <loom/collective.hpp>
#include <loom/export.hpp>
#include <loom/op.hpp>
#include <loom/priority.hpp>
#include <loom/tensor.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace loom {

namespace detail {
struct PreparedSlot;
struct GraphAccess;
}  // namespace detail

enum class TaskKind { op, copy, host };

LOOM_API std::string_view to_string(TaskKind kind) noexcept;

class Graph;

struct TaskOptions {
  std::string
      name;  ///< defaults to the op's name; a name taken gets a number ("fill#1"), never one taken
  Priority priority = Priority::normal;
};

/// A task of a graph: its index, and a handle to order, name and prioritize
/// it, as in Taskflow. The handles that Graph returns refer to their graph,
/// which must stay alive at the same address while they are used; one made
/// from an index alone (TaskId{3}) only names a task for Graph's own calls.
///
/// @code
/// auto load = g.host([&] { read(file, x); }, {}, {x}, {.name = "load"});
/// auto sum  = g.add(loom::ops::vector_add(x, y, z));
/// auto log  = g.host([] { std::puts("done"); });
/// log.succeed(sum);                  // log runs after sum
/// load.precede(sum).priority(loom::Priority::high);
/// @endcode
///
/// Thread-safety: as its graph's (not safe to modify from two threads at once).
class LOOM_API TaskId {
 public:
  std::uint32_t index = 0;

  constexpr TaskId() = default;
  constexpr explicit TaskId(std::uint32_t i) noexcept : index(i) {}

  /// This task runs before each of `others`. @throws InvalidArgument for a
  /// handle without a graph, of another graph, or a task preceding itself.
  template <class... More>
  TaskId& precede(TaskId other, More... others);
  /// This task runs after each of `others`. @throws as precede().
  template <class... More>
  TaskId& succeed(TaskId other, More... others);
  /// The task's name (unique in its graph).
  const std::string& name() const;
  /// Renames the task; a name already taken gets a number, as in add().
  TaskId& name(std::string name);
  Priority priority() const;
  TaskId& priority(Priority priority);

  friend bool operator==(TaskId a, TaskId b) noexcept { return a.index == b.index; }

 private:
  friend class Graph;
  TaskId(Graph* graph, std::uint32_t i) noexcept : index(i), graph_(graph) {}
  Graph& graph() const;
  Graph* graph_ = nullptr;
};

/// What the graph stores of a task.
struct Task {
  TaskKind kind = TaskKind::op;
  std::string name;
  Priority priority = Priority::normal;
  std::vector<Tensor> reads;
  std::vector<Tensor> writes;
  OpPtr op;                    ///< kind op (a collective is an op: Op::communicator)
  std::function<void()> host;  ///< kind host
  Tensor copy_src;             ///< kind copy
  Tensor copy_dst;
  std::vector<std::uint32_t> predecessors;  ///< deduplicated, sorted
  std::vector<std::uint32_t> successors;
};

class LOOM_API Graph {
 public:
  /// Appends an op. @throws InvalidArgument for a null op.
  TaskId add(OpPtr op, TaskOptions options = {});
  /// Appends a copy dst = src; its path follows the two memory spaces.
  TaskId copy(const Tensor& src, const Tensor& dst, TaskOptions options = {});
  /// Appends a host function that reads and writes the given tensors.
  TaskId host(std::string name, std::function<void()> fn, std::vector<Tensor> reads = {},
              std::vector<Tensor> writes = {}, Priority priority = Priority::normal);
  /// The same, with the options add() and copy() take (name defaults to "host").
  TaskId host(std::function<void()> fn, std::vector<Tensor> reads = {},
              std::vector<Tensor> writes = {}, TaskOptions options = {});
  /// Appends a collective (implemented by communicators): add() by another
  /// name. @throws InvalidArgument for a null collective.
  TaskId collective(CollectivePtr collective, TaskOptions options = {});

  /// A graph-scoped intermediate: a contiguous tensor whose memory belongs to
  /// the graph's runs rather than to the caller. It has no memory until the
  /// graph is submitted or compiled: Runtime::submit gives it memory from the
  /// pool of the runtime's default space at the graph's first submit (kept
  /// while any tensor or task refers to it); Runtime::compile places every
  /// intermediate of the graph in one arena, planned from their lifetimes
  /// (two share bytes only when every use of one is ordered before every use
  /// of the other). Its data() is null until then. An intermediate belongs to
  /// one graph: its memory is given once, by the first submit or compile.
  /// Another graph that uses it before that is refused at submit or compile,
  /// naming the task. @throws InvalidArgument for a bad shape.
  Tensor intermediate(DType dtype, const Shape& shape);
  /// The intermediates, in the order they were declared.
  const std::vector<Tensor>& intermediates() const noexcept { return intermediates_; }

  /// `before` runs before `after`. @throws InvalidArgument for unknown ids.
  void precede(TaskId before, TaskId after);
  /// `after` runs after `before`.
  void succeed(TaskId after, TaskId before) { precede(before, after); }

  /// Rejects cycles (the message names the tasks on one, in order), ops
  /// whose inputs are invalid or whose validate() throws anything, and ops
  /// (kernel tasks too) with an output whose elements share memory (a zero
  /// stride); the message names the task. @throws InvalidArgument.
  void validate() const;

  std::size_t size() const noexcept { return tasks().size(); }
  bool empty() const noexcept { return tasks().empty(); }
  /// References into the tasks (these, a task's name) hold until the graph
  /// next changes: a graph whose tasks a copy or a submit shares copies them
  /// at its next change.
  const Task& task(TaskId id) const { return tasks().at(id.index); }
  const std::vector<Task>& tasks() const noexcept { return tasks_.get(); }
  /// Number of edges (inferred and explicit).
  std::size_t edge_count() const noexcept { return edges_; }
  /// True when the graph has an edge from -> to (not transitive).
  bool has_edge(TaskId from, TaskId to) const;

 private:
  // Hazard inference (see graph.cpp): per storage, the reads and the writes
  // not yet pruned by a covering write, apart, grouped by byte span.
  struct SpanTasks {  ///< the tasks that access one span, ascending, each once
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    std::uint32_t first = 0;
    std::vector<std::uint32_t> rest;
    void add(std::uint32_t task);
    /// Keeps only `task` if it is there; false if nothing is left.
    bool keep_only(std::uint32_t task);
    template <class F>
    void for_each(F&& f) const;
  };
  class AccessLane {  ///< one storage's reads, or its writes
   public:
    void add(std::uint32_t task, std::uintptr_t lo, std::uintptr_t hi);
    /// Calls f(task) for each access that overlaps [lo, hi).
    template <class F>
    void for_each_overlapping(std::uintptr_t lo, std::uintptr_t hi, F&& f) const;
    /// Drops the accesses inside [lo, hi), except those of task `keep`.
    void prune_covered(std::uintptr_t lo, std::uintptr_t hi, std::uint32_t keep);
    /// Adds every access of `other`, whose spans this lane does not hold.
    void absorb(const AccessLane& other);

   private:
    struct Bucket {  ///< spans whose length has one bit width
      int width = 0;
      std::uintptr_t max_length = 0;
      std::map<std::pair<std::uintptr_t, std::uintptr_t>, SpanTasks> spans;
    };
    Bucket& bucket_for(std::uintptr_t length);
    void index_spans();
    SpanTasks& few(std::size_t i) { return i == 0 ? head_ : more_[i - 1]; }
    void drop_few(std::size_t i);
    // While there are few spans: head_, then more_ (in no order), few_ in all.
    std::uint32_t few_ = 0;
    SpanTasks head_;
    std::vector<SpanTasks> more_;
    std::vector<Bucket> buckets_;  // once there are many (few_ is 0 then)
  };
  struct StorageHistory {
    AccessLane reads;
    AccessLane writes;
    const void* space = nullptr;  ///< a storage's address space; null for intermediates
  };
  TaskId append(Task&& task);
  TaskId handle(std::uint32_t index) noexcept { return TaskId(this, index); }
  void check_id(TaskId id, const char* call) const;
  friend class TaskId;
  void infer(std::uint32_t task, const Tensor& tensor, bool write);
  StorageHistory& history_for(const Tensor& tensor, std::uintptr_t& lo, std::uintptr_t& hi);
  void key_space_by_address(const void* space);
  void add_edge(std::uint32_t from, std::uint32_t to);
  std::string unique_name(std::string base);
  bool generated_taken(std::string_view name) const;
  void find_cycle() const;
  void validate_tasks() const;
  void changed();

  friend struct detail::GraphAccess;

  // A graph's tasks, shared by its copies (a copy of a graph shares them,
  // their ops and host functions too, as every run of one graph does) and
  // by what runtimes prepare from it (GraphAccess::snapshot), until one side
  // changes them: copying marks both sides shared, and own() copies shared
  // tasks before handing them out to change. So a submit or a compile
  // copies no task. The mark is a flag, not the reference count, which
  // another thread's release could change under a reader.
  class SharedTasks {
   public:
    SharedTasks() = default;
    SharedTasks(const SharedTasks& other) : tasks_(other.tasks_) { mark_both(other); }
    SharedTasks(SharedTasks&& other) noexcept
        : tasks_(std::move(other.tasks_)), shared_(other.shared_.exchange(false)) {}
    SharedTasks& operator=(const SharedTasks& other) {
      if (this != &other) {
        tasks_ = other.tasks_;
        mark_both(other);
      }
      return *this;
    }
    SharedTasks& operator=(SharedTasks&& other) noexcept {
      if (this != &other) {
        tasks_ = std::move(other.tasks_);
        shared_.store(other.shared_.exchange(false));
      }
      return *this;
    }
    ~SharedTasks() = default;

    const std::vector<Task>& get() const noexcept { return tasks_ ? *tasks_ : none(); }
    /// The tasks to change: this side's own (copied first when shared).
    std::vector<Task>& own() {
      if (!tasks_) {
        tasks_ = std::make_shared<std::vector<Task>>();
      } else if (shared_.exchange(false)) {
        tasks_ = std::make_shared<std::vector<Task>>(*tasks_);
      }
      return *tasks_;
    }

   private:
    void mark_both(const SharedTasks& other) {
      const bool any = tasks_ != nullptr;
      other.shared_.store(other.shared_.load() || any);
      shared_.store(any);
    }
    static const std::vector<Task>& none() noexcept {
      static const std::vector<Task> empty;
      return empty;
    }
    std::shared_ptr<std::vector<Task>> tasks_;  // null: no tasks yet
    mutable std::atomic<bool> shared_{false};
  };
  SharedTasks tasks_;
  std::vector<Tensor> intermediates_;
  std::size_t edges_ = 0;
  // An edge from a later task to an earlier one (precede): only then can the
  // graph have a cycle; inferred edges always point forward.
  bool backward_edges_ = false;
  // By storage; in an address space where the graph met provided memory
  // (which may alias anything there), by the space (history_key()).
  std::unordered_map<const void*, StorageHistory> history_;
  std::vector<const void*> spaces_by_address_;
  std::vector<std::uint32_t> inferred_;  // the appended task's inferred predecessors
  struct NameUse {
    int asked = 0;        ///< times this exact name was asked for
    int next_suffix = 1;  ///< suffixes below this were handed out as "name#k" (or skipped)
  };
  std::unordered_map<std::string, NameUse> names_;
  // What a runtime derived from this exact graph (validated, planned), so
  // that submitting it again costs no copy and no planning. Shared by
  // copies until one of them changes.
  std::shared_ptr<detail::PreparedSlot> prepared_;
};

template <class... More>
TaskId& TaskId::precede(TaskId other, More... others) {
  graph().precede(*this, other);
  if constexpr (sizeof...(others) > 0) precede(others...);
  return *this;
}

template <class... More>
TaskId& TaskId::succeed(TaskId other, More... others) {
  graph().precede(other, *this);
  if constexpr (sizeof...(others) > 0) succeed(others...);
  return *this;
}

}  // namespace loom
