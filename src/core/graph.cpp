#include <loom/error.hpp>
#include <loom/graph.hpp>

#include "core/prepared_slot.hpp"
#include "core/storage.hpp"
#include "core/task_kind.hpp"
#include "core/tensor_access.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace loom {

std::string_view to_string(TaskKind kind) noexcept {
  switch (kind) {
    case TaskKind::op: return "op";
    case TaskKind::copy: return "copy";
    case TaskKind::host: return "host";
  }
  return "unknown";
}

// names_ holds each name asked for, not the generated ones (a graph of
// 65,536 "scale_copy" tasks keeps one entry): a name asked for again becomes
// "name#k", k counting on from its next_suffix past names users gave; a name
// a user gives in that form is taken when k is below its base's next_suffix.
bool Graph::generated_taken(std::string_view name) const {
  const auto hash = name.rfind('#');
  if (hash == std::string_view::npos || hash + 1 >= name.size() || name[hash + 1] == '0') {
    return false;
  }
  int k = 0;
  const char* end = name.data() + name.size();
  const auto [at, rc] = std::from_chars(name.data() + hash + 1, end, k);
  if (rc != std::errc() || at != end || k < 1) return false;
  const auto it = names_.find(std::string(name.substr(0, hash)));
  return it != names_.end() && k < it->second.next_suffix;
}

std::string Graph::unique_name(std::string base) {
  if (base.empty()) base = "task";
  NameUse& use = names_[base];  // a node: stays put while names_ grows
  if (use.asked++ == 0 && !generated_taken(base)) return base;
  std::string name;
  for (int k = use.next_suffix;; ++k) {
    char digits[16];
    const char* end = std::to_chars(digits, digits + sizeof digits, k).ptr;
    name.assign(base);
    name += '#';
    name.append(digits, static_cast<std::size_t>(end - digits));
    if (names_.find(name) == names_.end()) {  // not a name a user gave
      use.next_suffix = k + 1;
      return name;
    }
  }
}

void Graph::changed() {
  // Tasks shared with a copy or a prepared snapshot stay with them: this
  // graph changes a copy of its own.
  (void)tasks_.own();
  // A slot shared with a copy stays with the copy; an unshared one is emptied.
  if (!prepared_ || prepared_.use_count() > 1) {
    prepared_ = std::make_shared<detail::PreparedSlot>();
  } else {
    // Unshared, but a runtime's thread may have filled it last.
    std::lock_guard lock(prepared_->mutex);
    prepared_->owner = 0;
    prepared_->value.reset();
  }
}

Graph detail::GraphAccess::snapshot(const Graph& g) {
  Graph copy;
  copy.tasks_ = g.tasks_;  // shared, not copied: g copies them before it changes
  copy.intermediates_ = g.intermediates_;
  copy.edges_ = g.edges_;
  copy.backward_edges_ = g.backward_edges_;
  return copy;  // no slot: prepared_ stays null
}

void Graph::add_edge(std::uint32_t from, std::uint32_t to) {
  if (from == to) return;
  auto& preds = tasks_.own()[to].predecessors;
  const auto it = std::lower_bound(preds.begin(), preds.end(), from);
  if (it != preds.end() && *it == from) return;
  preds.insert(it, from);
  auto& succs = tasks_.own()[from].successors;
  succs.insert(std::lower_bound(succs.begin(), succs.end(), to), to);
  ++edges_;
}

// --- Hazard inference -------------------------------------------------------
//
// The rules: a read depends on the earlier writes it overlaps; a write on
// the earlier reads and writes it overlaps; a write prunes the accesses it
// covers (they are ordered before it, so later tasks need only depend on
// the write), but never the task's own.
//
// So that building stays linear: reads and writes are kept apart (a read
// looks at writes only), and grouped by exact span (many readers of one
// tensor are one entry, which a read never looks at, and a covering write
// drops at once). A lane with few spans scans them all (the first is kept
// inline: most storages see one span). One with many keeps them in ordered
// maps, one per bit width of the span's length: a query there looks at the
// spans that start less than the map's longest length before it, the
// neighbours of a slice among many slices, whatever else the lane holds.
// The predecessors of a task are gathered, sorted and stored once, so that
// neither the order spans are found in nor their number costs insertions.

namespace {
constexpr std::size_t kFewSpans = 8;
}  // namespace

void Graph::SpanTasks::add(std::uint32_t task) {
  if ((rest.empty() ? first : rest.back()) != task) rest.push_back(task);
}

bool Graph::SpanTasks::keep_only(std::uint32_t task) {
  // Tasks are added in increasing order: `task`, the newest, can only be last.
  if ((rest.empty() ? first : rest.back()) != task) return false;
  first = task;
  rest.clear();
  return true;
}

template <class F>
void Graph::SpanTasks::for_each(F&& f) const {
  f(first);
  for (const auto t : rest) f(t);
}

void Graph::AccessLane::add(std::uint32_t task, std::uintptr_t lo, std::uintptr_t hi) {
  if (buckets_.empty()) {
    for (std::size_t i = 0; i < few_; ++i) {
      auto& s = few(i);
      if (s.lo == lo && s.hi == hi) return s.add(task);
    }
    if (few_ < kFewSpans) {
      if (few_ == 0) {
        head_.lo = lo;
        head_.hi = hi;
        head_.first = task;
        head_.rest.clear();
      } else {
        more_.push_back(SpanTasks{lo, hi, task, {}});
      }
      ++few_;
      return;
    }
    index_spans();
  }
  auto& spans = bucket_for(hi - lo).spans;
  const auto [it, inserted] = spans.try_emplace({lo, hi}, SpanTasks{lo, hi, task, {}});
  if (!inserted) it->second.add(task);
}

Graph::AccessLane::Bucket& Graph::AccessLane::bucket_for(std::uintptr_t length) {
  const int width = std::bit_width(length);
  auto b = std::find_if(buckets_.begin(), buckets_.end(),
                        [&](const Bucket& k) { return k.width == width; });
  if (b == buckets_.end()) {
    b = buckets_.insert(b, Bucket{});
    b->width = width;
  }
  b->max_length = std::max(b->max_length, length);
  return *b;
}

void Graph::AccessLane::index_spans() {
  for (std::size_t i = 0; i < few_; ++i) {
    auto& s = few(i);
    bucket_for(s.hi - s.lo).spans.emplace(std::pair{s.lo, s.hi}, std::move(s));
  }
  few_ = 0;
  head_.rest.clear();
  more_.clear();
}

void Graph::AccessLane::drop_few(std::size_t i) {
  const std::size_t last = few_ - 1;
  if (i != last) few(i) = std::move(few(last));
  if (last == 0) {
    head_.rest.clear();
  } else {
    more_.pop_back();
  }
  --few_;
}

void Graph::AccessLane::absorb(const AccessLane& other) {
  const auto take = [this](const SpanTasks& s) {
    s.for_each([&](std::uint32_t t) { add(t, s.lo, s.hi); });
  };
  for (std::size_t i = 0; i < other.few_; ++i) take(i == 0 ? other.head_ : other.more_[i - 1]);
  for (const auto& b : other.buckets_) {
    for (const auto& [span, tasks] : b.spans) take(tasks);
  }
}

template <class F>
void Graph::AccessLane::for_each_overlapping(std::uintptr_t lo, std::uintptr_t hi, F&& f) const {
  for (std::size_t i = 0; i < few_; ++i) {
    const auto& s = i == 0 ? head_ : more_[i - 1];
    if (s.lo < hi && lo < s.hi) s.for_each(f);
  }
  for (const auto& b : buckets_) {
    // A span that starts at or before lo - max_length ends at or before lo.
    const std::uintptr_t from = lo >= b.max_length ? lo - b.max_length + 1 : 0;
    for (auto it = b.spans.lower_bound({from, 0}); it != b.spans.end() && it->first.first < hi;
         ++it) {
      if (lo < it->first.second) it->second.for_each(f);
    }
  }
}

void Graph::AccessLane::prune_covered(std::uintptr_t lo, std::uintptr_t hi, std::uint32_t keep) {
  for (std::size_t i = 0; i < few_;) {
    auto& s = few(i);
    if (lo <= s.lo && s.hi <= hi && !s.keep_only(keep)) {
      drop_few(i);
    } else {
      ++i;
    }
  }
  for (std::size_t k = 0; k < buckets_.size();) {
    auto& b = buckets_[k];
    if ((std::uintptr_t{1} << (b.width - 1)) <= hi - lo) {  // its shortest spans could fit
      for (auto it = b.spans.lower_bound({lo, 0}); it != b.spans.end() && it->first.first < hi;) {
        if (it->first.second <= hi && !it->second.keep_only(keep)) {
          it = b.spans.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (b.spans.empty()) {
      if (k + 1 != buckets_.size()) b = std::move(buckets_.back());
      buckets_.pop_back();
    } else {
      ++k;
    }
  }
}

// Memory is keyed by where it is, not by the handle: two provide() calls on
// one pointer are the same data. Memory loom handed out (rt.tensor) never
// aliases other such memory, so its storage is its key (one small lane
// each: the fast path). Provided memory may alias anything in its address
// space: the first time a graph meets it there, that space's histories
// merge into one keyed by the space, with absolute spans, and stay so. An
// intermediate has no memory until the graph is submitted or compiled: its
// storage is its key, with spans relative to its start, for as long as the
// graph lives (binding it later must not split its history).
Graph::StorageHistory& Graph::history_for(const Tensor& tensor, std::uintptr_t& lo,
                                          std::uintptr_t& hi) {
  const auto& storage = detail::TensorAccess::storage(tensor);
  if (storage->intermediate) {
    const auto start = reinterpret_cast<std::uintptr_t>(storage->base);
    lo -= start;
    hi -= start;
    return history_[storage.get()];
  }
  const void* space = detail::address_space(tensor);
  const bool by_address = std::find(spaces_by_address_.begin(), spaces_by_address_.end(), space) !=
                          spaces_by_address_.end();
  if (by_address) return history_[space];
  if (!storage->owned) {
    key_space_by_address(space);
    return history_[space];
  }
  StorageHistory& history = history_[storage.get()];
  history.space = space;
  return history;
}

void Graph::key_space_by_address(const void* space) {
  spaces_by_address_.push_back(space);
  StorageHistory& merged = history_[space];  // a node: stays put while others go
  merged.space = space;
  for (auto it = history_.begin(); it != history_.end();) {
    if (it->first != space && it->second.space == space) {
      // Distinct storages of loom's own never overlap: their spans are new here.
      merged.reads.absorb(it->second.reads);
      merged.writes.absorb(it->second.writes);
      it = history_.erase(it);
    } else {
      ++it;
    }
  }
}

void Graph::infer(std::uint32_t task, const Tensor& tensor, bool write) {
  if (!tensor.defined() || tensor.numel() == 0) return;
  auto [lo, hi] = detail::byte_span(tensor);
  StorageHistory& history = history_for(tensor, lo, hi);
  const auto depend = [&](std::uint32_t from) {
    if (from != task) inferred_.push_back(from);
  };
  history.writes.for_each_overlapping(lo, hi, depend);
  if (write) {
    history.reads.for_each_overlapping(lo, hi, depend);
    history.reads.prune_covered(lo, hi, task);
    history.writes.prune_covered(lo, hi, task);
    history.writes.add(task, lo, hi);
  } else {
    history.reads.add(task, lo, hi);
  }
}

TaskId Graph::append(Task&& task) {
  changed();
  auto& tasks = tasks_.own();
  const auto index = static_cast<std::uint32_t>(tasks.size());
  task.name = unique_name(std::move(task.name));
  tasks.push_back(std::move(task));
  Task& t = tasks.back();
  // Reads first: a task that reads and writes a tensor depends on earlier
  // writers (as a reader) and on earlier readers (as a writer).
  inferred_.clear();
  for (const auto& r : t.reads) infer(index, r, false);
  for (const auto& w : t.writes) infer(index, w, true);
  if (!inferred_.empty()) {
    std::sort(inferred_.begin(), inferred_.end());
    inferred_.erase(std::unique(inferred_.begin(), inferred_.end()), inferred_.end());
    t.predecessors.assign(inferred_.begin(), inferred_.end());
    // The new task's index is above every successor already listed.
    for (const auto from : inferred_) tasks[from].successors.push_back(index);
    edges_ += inferred_.size();
    inferred_.clear();
  }
  return handle(index);
}

TaskId Graph::add(OpPtr op, TaskOptions options) {
  if (!op) throw InvalidArgument("Graph::add: a null op");
  Task t;
  t.kind = TaskKind::op;
  t.name = options.name.empty() ? std::string(op->name()) : std::move(options.name);
  t.priority = options.priority;
  t.reads = op->reads();
  t.writes = op->writes();
  t.op = std::move(op);
  return append(std::move(t));
}

TaskId Graph::copy(const Tensor& src, const Tensor& dst, TaskOptions options) {
  Task t;
  t.kind = TaskKind::copy;
  t.name = options.name.empty() ? std::string("copy") : std::move(options.name);
  t.priority = options.priority;
  t.reads = {src};
  t.writes = {dst};
  t.copy_src = src;
  t.copy_dst = dst;
  return append(std::move(t));
}

TaskId Graph::host(std::string name, std::function<void()> fn, std::vector<Tensor> reads,
                   std::vector<Tensor> writes, Priority priority) {
  if (!fn) throw InvalidArgument("Graph::host: task '" + name + "' has an empty function");
  Task t;
  t.kind = TaskKind::host;
  t.name = name.empty() ? std::string("host") : std::move(name);
  t.priority = priority;
  t.reads = std::move(reads);
  t.writes = std::move(writes);
  t.host = std::move(fn);
  return append(std::move(t));
}

TaskId Graph::host(std::function<void()> fn, std::vector<Tensor> reads, std::vector<Tensor> writes,
                   TaskOptions options) {
  return host(std::move(options.name), std::move(fn), std::move(reads), std::move(writes),
              options.priority);
}

Tensor Graph::intermediate(DType dtype, const Shape& shape) {
  check_element_count(dtype, shape);
  auto storage = std::make_shared<detail::Storage>();
  storage->intermediate = true;
  storage->bytes = bytes_for(dtype, static_cast<std::uint64_t>(shape.product()));
  intermediates_.push_back(
      detail::TensorAccess::make(std::move(storage), dtype, shape, contiguous_strides(shape), 0));
  changed();
  return intermediates_.back();
}

TaskId Graph::collective(CollectivePtr collective, TaskOptions options) {
  if (!collective) throw InvalidArgument("Graph::collective: a null collective");
  return add(std::move(collective), std::move(options));
}

void Graph::check_id(TaskId id, const char* call) const {
  if (id.graph_ != nullptr && id.graph_ != this) {
    throw InvalidArgument(std::string(call) + ": task id " + std::to_string(id.index) +
                          " belongs to another graph");
  }
  if (id.index >= tasks().size()) {
    throw InvalidArgument(std::string(call) + ": task id " + std::to_string(id.index) +
                          " is not in this graph of " + std::to_string(tasks().size()) + " tasks");
  }
}

Graph& TaskId::graph() const {
  if (graph_ == nullptr) {
    throw InvalidArgument("task id " + std::to_string(index) +
                          " was not returned by a Graph: it cannot order, name or prioritize");
  }
  return *graph_;
}

const std::string& TaskId::name() const {
  Graph& g = graph();
  g.check_id(*this, "TaskId::name");
  return g.tasks()[index].name;
}

TaskId& TaskId::name(std::string name) {
  Graph& g = graph();
  g.check_id(*this, "TaskId::name");
  g.changed();
  g.tasks_.own()[index].name = g.unique_name(std::move(name));
  return *this;
}

Priority TaskId::priority() const {
  Graph& g = graph();
  g.check_id(*this, "TaskId::priority");
  return g.tasks()[index].priority;
}

TaskId& TaskId::priority(Priority priority) {
  Graph& g = graph();
  g.check_id(*this, "TaskId::priority");
  g.changed();
  g.tasks_.own()[index].priority = priority;
  return *this;
}

void Graph::precede(TaskId before, TaskId after) {
  check_id(before, "Graph::precede");
  check_id(after, "Graph::precede");
  if (before.index == after.index) {
    throw InvalidArgument("Graph::precede: task '" + tasks()[before.index].name +
                          "' cannot precede itself");
  }
  changed();
  add_edge(before.index, after.index);
  if (before.index > after.index) backward_edges_ = true;
}

bool Graph::has_edge(TaskId from, TaskId to) const {
  const auto& preds = tasks().at(to.index).predecessors;
  return std::binary_search(preds.begin(), preds.end(), from.index);
}

void Graph::validate() const {
  if (backward_edges_) find_cycle();
  validate_tasks();
}

void Graph::find_cycle() const {
  // Iterative depth-first search; on a back edge, the grey path from the
  // target to the current task is the cycle.
  enum Colour : unsigned char { white, grey, black };
  std::vector<Colour> colour(tasks().size(), white);
  std::vector<std::uint32_t> parent(tasks().size(), 0);
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;
  for (std::uint32_t root = 0; root < tasks().size(); ++root) {
    if (colour[root] != white) continue;
    stack.emplace_back(root, 0);
    colour[root] = grey;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const auto& succs = tasks()[node].successors;
      if (next == succs.size()) {
        colour[node] = black;
        stack.pop_back();
        continue;
      }
      const std::uint32_t s = succs[next++];
      if (colour[s] == white) {
        colour[s] = grey;
        parent[s] = node;
        stack.emplace_back(s, 0);
      } else if (colour[s] == grey) {
        std::vector<std::uint32_t> cycle{node};
        for (std::uint32_t v = node; v != s;) cycle.push_back(v = parent[v]);
        std::reverse(cycle.begin(), cycle.end());
        std::string names;
        for (auto v : cycle) names += "'" + tasks()[v].name + "' -> ";
        names += "'" + tasks()[s].name + "'";
        throw InvalidArgument("the graph has a cycle: " + names);
      }
    }
  }
}

void Graph::validate_tasks() const {
  for (const auto& t : tasks()) {
    try {
      if (t.op) t.op->validate();
      if (t.kind == TaskKind::op) {
        // Every op's (and kernel task's) outputs, whatever the op checks:
        // elements that share bytes would be written by several threads.
        for (std::size_t i = 0; i < t.writes.size(); ++i) {
          const Tensor& w = t.writes[i];
          if (!w.defined() || w.numel() == 0 || detail::elements_distinct(w)) continue;
          throw InvalidArgument(std::string(detail::kind_name(t)) + " " + t.name + " ('" +
                                std::string(t.op->name()) + "'): output " + std::to_string(i) +
                                " " + w.describe() +
                                " has elements that share memory (a zero or overlapping "
                                "stride); write to a tensor whose elements are distinct");
        }
      }
      if (t.kind == TaskKind::host) {
        // As an op's inputs are checked: a tensor declared but undefined is a mistake.
        for (std::size_t i = 0; i < t.reads.size(); ++i) {
          if (!t.reads[i].defined()) {
            throw InvalidArgument("host task: read " + std::to_string(i) +
                                  " is an undefined tensor");
          }
        }
        for (std::size_t i = 0; i < t.writes.size(); ++i) {
          if (!t.writes[i].defined()) {
            throw InvalidArgument("host task: write " + std::to_string(i) +
                                  " is an undefined tensor");
          }
        }
      }
      if (t.kind == TaskKind::copy) {
        if (!t.copy_src.defined() || !t.copy_dst.defined()) {
          throw InvalidArgument("copy needs two defined tensors");
        }
        if (t.copy_src.dtype() != t.copy_dst.dtype() ||
            !(t.copy_src.shape() == t.copy_dst.shape())) {
          throw InvalidArgument(
              "copy: the destination must have the source's dtype and shape; "
              "source is " +
              t.copy_src.describe() + ", destination is " + t.copy_dst.describe());
        }
      }
    } catch (const Error& e) {
      std::rethrow_exception(e.with_task(t.name));
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      // An op's own validate() that fails in its own way is bad input too.
      throw InvalidArgument(
          std::string(detail::kind_name(t)) + " " + t.name + ": validate() threw: " + e.what(),
          {"", "", 0, t.name});
    }
  }
}

}  // namespace loom
