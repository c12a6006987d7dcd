#include "vkgrad/runtime/planner.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "vkgrad/core/error.h"

namespace vkgrad::graph {
namespace {

uint64_t alignUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// The first offset at or after `from` where `size` bytes (at most a chunk) lie inside one
// chunk of the arena; chunk 0: the arena is one piece.
uint64_t insideChunk(uint64_t from, uint64_t size, uint64_t chunk) {
  if (!chunk || from / chunk == (from + size - 1) / chunk) return from;
  return (from / chunk + 1) * chunk;
}

// Free ranges of the arena, offset -> size, adjacent ranges merged.
class FreeList {
 public:
  void release(uint64_t offset, uint64_t size) {
    auto next = ranges_.lower_bound(offset);
    if (next != ranges_.end() && offset + size == next->first) {
      size += next->second;
      next = ranges_.erase(next);
    }
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    ranges_[offset] = size;
  }

  // The smallest free range that holds size bytes inside one chunk; else the free range
  // ending at the arena's end, grown; else fresh bytes at the end. What a chunk boundary
  // skips stays free.
  uint64_t take(uint64_t size, uint64_t& arena_end, uint64_t chunk) {
    auto best = ranges_.end();
    for (auto it = ranges_.begin(); it != ranges_.end(); ++it)
      if (insideChunk(it->first, size, chunk) + size <= it->first + it->second &&
          (best == ranges_.end() || it->second < best->second))
        best = it;
    if (best != ranges_.end()) {
      const uint64_t begin = best->first, end = best->first + best->second;
      const uint64_t offset = insideChunk(begin, size, chunk);
      ranges_.erase(best);
      if (offset > begin) ranges_[begin] = offset - begin;
      if (offset + size < end) ranges_[offset + size] = end - offset - size;
      return offset;
    }
    if (!ranges_.empty()) {
      auto last = std::prev(ranges_.end());
      if (last->first + last->second == arena_end) {
        const uint64_t begin = last->first, offset = insideChunk(begin, size, chunk);
        ranges_.erase(last);
        if (offset > begin) ranges_[begin] = offset - begin;
        arena_end = offset + size;
        return offset;
      }
    }
    const uint64_t offset = insideChunk(arena_end, size, chunk);
    if (offset > arena_end) release(arena_end, offset - arena_end);
    arena_end = offset + size;
    return offset;
  }

 private:
  std::map<uint64_t, uint64_t> ranges_;
};

}  // namespace

MemoryPlan planMemory(std::span<const Lifetime> items, uint64_t alignment, bool reuse,
                      uint64_t chunk_bytes) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    throw Error("planMemory: alignment " + std::to_string(alignment) + " is not a power of two");
  MemoryPlan plan;
  plan.chunk_bytes = chunk_bytes / alignment * alignment;
  if (chunk_bytes && !plan.chunk_bytes)
    throw Error("planMemory: chunks of " + std::to_string(chunk_bytes) +
                " bytes are smaller than the alignment " + std::to_string(alignment));
  for (size_t i = 0; i < items.size(); ++i)
    if (plan.chunk_bytes && alignUp(items[i].bytes, alignment) > plan.chunk_bytes)
      throw Error("planMemory: item " + std::to_string(i) + " of " +
                  std::to_string(items[i].bytes) + " bytes is larger than a chunk (" +
                  std::to_string(plan.chunk_bytes) + " bytes)");
  plan.offsets.assign(items.size(), 0);
  std::vector<size_t> by_first(items.size());
  std::iota(by_first.begin(), by_first.end(), size_t(0));
  // Larger first among equal starts: big tensors get the best-fitting holes.
  std::stable_sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) {
    return items[a].first != items[b].first ? items[a].first < items[b].first
                                            : items[a].bytes > items[b].bytes;
  });
  FreeList free;
  std::vector<size_t> live;
  uint64_t end = 0;
  for (size_t i : by_first) {
    const uint64_t size = alignUp(std::max<uint64_t>(items[i].bytes, 1), alignment);
    plan.naive_bytes += size;
    if (!reuse) {
      plan.offsets[i] = insideChunk(end, size, plan.chunk_bytes);
      end = plan.offsets[i] + size;
      continue;
    }
    // Ranges of tensors dead before this one starts are free again.
    std::erase_if(live, [&](size_t j) {
      if (items[j].last >= items[i].first) return false;
      free.release(plan.offsets[j], alignUp(std::max<uint64_t>(items[j].bytes, 1), alignment));
      return true;
    });
    plan.offsets[i] = free.take(size, end, plan.chunk_bytes);
    live.push_back(i);
  }
  plan.arena_bytes = end;
  return plan;
}

void checkPlan(std::span<const Lifetime> items, const MemoryPlan& plan, uint64_t alignment) {
  if (plan.offsets.size() != items.size()) throw Error("checkPlan: one offset per item expected");
  for (size_t i = 0; i < items.size(); ++i) {
    if (plan.offsets[i] % alignment)
      throw Error("checkPlan: item " + std::to_string(i) + " at a misaligned offset");
    if (plan.offsets[i] + items[i].bytes > plan.arena_bytes)
      throw Error("checkPlan: item " + std::to_string(i) + " runs past the arena");
    if (plan.chunk_bytes && items[i].bytes &&
        plan.offsets[i] / plan.chunk_bytes !=
            (plan.offsets[i] + items[i].bytes - 1) / plan.chunk_bytes)
      throw Error("checkPlan: item " + std::to_string(i) + " crosses a chunk boundary");
    for (size_t j = 0; j < i; ++j) {
      const bool together = items[i].first <= items[j].last && items[j].first <= items[i].last;
      const bool share = plan.offsets[i] < plan.offsets[j] + items[j].bytes &&
                         plan.offsets[j] < plan.offsets[i] + items[i].bytes;
      if (together && share)
        throw Error("checkPlan: items " + std::to_string(j) + " and " + std::to_string(i) +
                    " are live together (steps " + std::to_string(items[j].first) + "-" +
                    std::to_string(items[j].last) + " and " + std::to_string(items[i].first) + "-" +
                    std::to_string(items[i].last) + ") and share bytes");
    }
  }
}

bool isPersistent(const TensorInfo& root) {
  switch (root.kind) {
    case TensorKind::Activation:
      return false;
    case TensorKind::Gradient:
      return root.persistent;
    default:
      return true;
  }
}

namespace {

// Which nodes run: backwards from the outputs, the parameter gradients and the nodes that
// update state. Every writer of a needed root runs (gradient contributions accumulate into
// one root).
std::vector<bool> liveNodes(const Graph& g) {
  const auto& nodes = g.nodes();
  const size_t tensors = g.tensors().size();
  auto root = [&](int t) { return g.tensor(t).root; };
  std::vector<bool> needed(tensors, false);
  for (int o : g.outputs()) needed[size_t(root(o))] = true;
  // Parameter gradients are kept (and computed) even without an optimizer: callers read them.
  for (size_t t = 0; t < tensors; ++t)
    if (g.tensor(int(t)).kind == TensorKind::Gradient && g.tensor(int(t)).persistent)
      needed[t] = true;
  std::vector<bool> runs(nodes.size(), false);
  for (size_t n = nodes.size(); n-- > 0;) {
    const Node& node = nodes[n];
    bool live = node.sideEffects();
    for (int out : node.outputs) live = live || (out >= 0 && needed[size_t(root(out))]);
    if (!live) continue;
    runs[n] = true;
    for (int in : node.inputs)
      if (in >= 0) needed[size_t(root(in))] = true;
  }

  return runs;
}

// Which root each arena root lives in (itself, or the input an in-place output took over);
// a host's `last` grows to its guest's.
std::vector<int> inPlaceHosts(const Graph& g, const std::vector<int>& order,
                              const std::vector<int>& first, std::vector<int>& last, bool reuse) {
  const auto& nodes = g.nodes();
  const size_t tensors = g.tensors().size();
  const int end = int(order.size());
  auto root = [&](int t) { return g.tensor(t).root; };
  // In place: where an op may write its output over an input (OpDef::in_place: an activation
  // over x, an add over a, an activation's dx over dy) and that input's last use is this node, the
  // output takes the input's bytes. host[r] is the root whose range r occupies.
  std::vector<int> host(tensors);
  for (size_t t = 0; t < tensors; ++t) host[t] = int(t);
  if (reuse) {
    for (int step = 0; step < end; ++step) {
      const Node& node = nodes[size_t(order[size_t(step)])];
      const int slot = node.def().in_place;
      const int over = slot >= 0 ? node.inputs[size_t(slot)] : -1;  // the input it may overwrite
      if (over < 0 || node.outputs.empty() || node.outputs[0] < 0) continue;
      const int in = root(over), out = root(node.outputs[0]);
      const bool arena = !isPersistent(g.tensor(in)) && !isPersistent(g.tensor(out));
      if (arena && in != out && host[size_t(out)] == out && last[size_t(in)] == step &&
          first[size_t(out)] == step && g.tensor(in).bytes() == g.tensor(out).bytes()) {
        const int h = host[size_t(in)];
        host[size_t(out)] = h;
        last[size_t(h)] = last[size_t(out)];
      }
    }
  }

  return host;
}

// A tensor larger than a chunk (one allocation) cannot be placed: names it.
[[noreturn]] void tooLarge(const TensorInfo& t, uint64_t most) {
  throw ShapeError("planGraph: " + t.name + " " + t.shape.str() + " is " +
                   std::to_string(t.bytes()) + " bytes, more than one allocation may hold (" +
                   std::to_string(most) + " bytes, maxMemoryAllocationSize)");
}

// The graph's own persistent tensors that run (GraphPlan::state_*): in tensor order on the
// alignment, in as few buffers of at most `chunk` bytes (0: one buffer) as hold them.
void layOutState(const Graph& g, uint64_t alignment, uint64_t chunk, GraphPlan& plan) {
  const size_t tensors = g.tensors().size();
  plan.state_buffer.assign(tensors, -1);
  plan.state_offset.assign(tensors, -1);
  for (size_t t = 0; t < tensors; ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (int(t) != info.root || !plan.used[t] || !isPersistent(info) ||
        info.kind == TensorKind::Parameter || info.kind == TensorKind::Dataset)
      continue;
    const uint64_t bytes = alignUp(info.bytes(), alignment);
    if (chunk && bytes > chunk) tooLarge(info, chunk);
    if (plan.state_bytes.empty() || (chunk && plan.state_bytes.back() + bytes > chunk))
      plan.state_bytes.push_back(0);
    plan.state_buffer[t] = int(plan.state_bytes.size()) - 1;
    plan.state_offset[t] = int64_t(plan.state_bytes.back());
    plan.state_bytes.back() += bytes;
  }
  for (size_t t = 0; t < tensors; ++t) {
    const size_t r = size_t(g.tensor(int(t)).root);
    plan.state_buffer[t] = plan.state_buffer[r];
    plan.state_offset[t] = plan.state_offset[r];
  }
}

}  // namespace

GraphPlan planGraph(const Graph& g, uint64_t alignment, bool reuse, uint64_t chunk_bytes) {
  const auto& nodes = g.nodes();
  const size_t tensors = g.tensors().size();
  auto root = [&](int t) { return g.tensor(t).root; };

  const std::vector<bool> runs = liveNodes(g);

  GraphPlan plan;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (runs[n]) plan.order.push_back(int(n));
  const int end = int(plan.order.size());

  std::vector<int> first(tensors, -1), last(tensors, -1);
  std::vector<bool> written(tensors, false);
  plan.used.assign(tensors, false);
  for (int step = 0; step < end; ++step) {
    const Node& node = nodes[size_t(plan.order[size_t(step)])];
    auto touch = [&](int t) {
      const size_t r = size_t(root(t));
      if (first[r] < 0) first[r] = step;
      last[r] = step;
      plan.used[r] = true;
    };
    // A view reads and writes nothing: its output is its input's bytes.
    if (node.isView()) continue;
    for (int in : node.inputs) {
      if (in < 0) continue;
      const int r = root(in);
      if (!isPersistent(g.tensor(r)) && !written[size_t(r)])
        throw Error(std::string("planGraph: ") + opName(node.op) + " reads " + g.tensor(in).name +
                    " before anything writes it");
      touch(in);
    }
    for (int out : node.outputs) {
      if (out < 0) continue;
      touch(out);
      written[size_t(root(out))] = true;
    }
  }
  for (int o : g.outputs())
    if (first[size_t(root(o))] >= 0) last[size_t(root(o))] = end;

  const std::vector<int> host = inPlaceHosts(g, plan.order, first, last, reuse);

  plan.offset.assign(tensors, -1);
  for (size_t t = 0; t < tensors; ++t) {
    if (int(t) != root(int(t)) || host[t] != int(t) || first[t] < 0 ||
        isPersistent(g.tensor(int(t))))
      continue;
    plan.arena_roots.push_back(int(t));
    // Whole words: a 16-bit tensor of odd length is zeroed (vkCmdFillBuffer) a word at a time.
    plan.lifetimes.push_back({(g.tensor(int(t)).bytes() + 3) / 4 * 4, first[t], last[t]});
  }
  // A tensor larger than a chunk (one allocation) cannot be placed: name it.
  const uint64_t chunk = chunk_bytes / alignment * alignment;
  for (size_t i = 0; i < plan.arena_roots.size(); ++i)
    if (chunk && alignUp(plan.lifetimes[i].bytes, alignment) > chunk)
      tooLarge(g.tensor(plan.arena_roots[i]), chunk);
  plan.memory = planMemory(plan.lifetimes, alignment, reuse, chunk);
  // The naive layout gives every tensor its own range, in-place outputs included.
  for (size_t t = 0; t < tensors; ++t)
    if (int(t) == root(int(t)) && host[t] != int(t))
      plan.memory.naive_bytes += (g.tensor(int(t)).bytes() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < plan.arena_roots.size(); ++i)
    plan.offset[size_t(plan.arena_roots[i])] = int64_t(plan.memory.offsets[i]);
  for (size_t t = 0; t < tensors; ++t) {
    plan.offset[t] = plan.offset[size_t(host[size_t(root(int(t)))])];
    plan.used[t] = plan.used[size_t(root(int(t)))];
  }
  layOutState(g, alignment, chunk, plan);
  return plan;
}

}  // namespace vkgrad::graph
