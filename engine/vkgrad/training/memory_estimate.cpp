#include "vkgrad/training/memory_estimate.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/planner.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::graph {
namespace {

uint64_t alignUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// "812.0 KiB", "327.3 MiB", "2.41 GiB".
std::string sizeText(uint64_t bytes) {
  char text[32];
  const double b = double(bytes);
  if (bytes < (uint64_t(1) << 20))
    std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
  else if (bytes < (uint64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.1f MiB", b / 1048576.0);
  else
    std::snprintf(text, sizeof text, "%.2f GiB", b / 1073741824.0);
  return text;
}

// 85804800 -> "85,804,800".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The largest device-local heap (any heap where none is marked device-local).
uint64_t largestHeap(const vk::DeviceInfo& info) {
  uint64_t local = 0, any = 0;
  for (const vk::MemoryHeap& h : info.heaps) {
    any = std::max(any, h.bytes);
    if (h.device_local) local = std::max(local, h.bytes);
  }
  return local ? local : any;
}

}  // namespace

MemoryEstimate& MemoryEstimate::operator+=(const MemoryEstimate& more) {
  parameter_count += more.parameter_count;
  parameters += more.parameters;
  gradients += more.gradients;
  optimizer += more.optimizer;
  activations += more.activations;
  datasets += more.datasets;
  other += more.other;
  arenas.insert(arenas.end(), more.arenas.begin(), more.arenas.end());
  return *this;
}

MemoryEstimate estimateStore(const ParameterStore& store) {
  MemoryEstimate e;
  e.parameter_count = store.elements();
  e.parameters = store.deviceBytes();
  return e;
}

MemoryEstimate estimateDatasets(vk::Context& context, std::span<const Dataset* const> datasets) {
  // Per upload: the bytes its datasets reach (an upload is its values, from byte 0).
  std::map<const vk::Buffer*, uint64_t> uploads;
  for (const Dataset* d : datasets) {
    uint64_t& end = uploads[d->buffer.get()];
    end = std::max(end, d->offset + uint64_t(d->extent()) * 4);
  }
  const uint64_t align = context.allocator().alignment();
  MemoryEstimate e;
  for (const auto& [buffer, end] : uploads)
    e.datasets += buffer && *buffer ? buffer->capacity() : alignUp(end, align);
  return e;
}

MemoryEstimate estimateExecutor(vk::Context& context, const Graph& g, bool reuse_memory) {
  const uint64_t align = arenaAlignment(context);
  const uint64_t allocation = context.allocator().alignment();
  // As the Executor plans it: the arena and the state in allocations of at most `most`.
  const uint64_t most = context.info().max_allocation_bytes / align * align;
  const GraphPlan plan = planGraph(g, align, reuse_memory, most);
  MemoryEstimate e;
  e.arenas.push_back(plan.memory.arena_bytes);
  const uint64_t chunk = plan.memory.chunk_bytes, arena = plan.memory.arena_bytes;
  for (uint64_t at = 0; at < arena; at += chunk ? chunk : arena)
    e.activations += alignUp(chunk ? std::min(chunk, arena - at) : arena, allocation);
  // The state buffer, tensor by tensor, as planGraph laid it out.
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (info.root != int(t) || plan.state_offset[t] < 0) continue;
    const uint64_t bytes = alignUp(info.bytes(), align);
    if (info.kind == TensorKind::Gradient)
      e.gradients += bytes;
    else if (info.kind == TensorKind::State)
      e.optimizer += bytes;
    else
      e.other += bytes;
  }
  for (const uint64_t bytes : plan.state_bytes) e.other += alignUp(bytes, allocation) - bytes;
  return e;
}

MemoryEstimate estimateTrainer(vk::Context& context, const ParameterStore& store,
                               std::span<const Dataset* const> datasets, const LossFn& loss,
                               const TrainerOptions& options, bool evaluation) {
  MemoryEstimate e = estimateStore(store);
  e += estimateDatasets(context, datasets);
  // One graph at a time: a large model's graph is itself a few MiB of host memory.
  e += estimateExecutor(context, buildTrainerGraph(datasets, loss, options, true).g);
  if (evaluation)
    e += estimateExecutor(context, buildTrainerGraph(datasets, loss, options, false).g);
  return e;
}

std::string memoryTable(const MemoryEstimate& e) {
  std::string out;
  auto row = [&](const std::string& name, uint64_t bytes, const std::string& note = "") {
    char line[160];
    std::snprintf(line, sizeof line, "  %-18s %11s %15" PRIu64 " bytes%s\n", name.c_str(),
                  sizeText(bytes).c_str(), bytes, note.empty() ? "" : ("  " + note).c_str());
    out += line;
  };
  row("parameters", e.parameters, "(" + grouped(e.parameter_count) + " parameters)");
  row("gradients", e.gradients);
  row("optimizer state", e.optimizer);
  std::string arenas;
  if (e.arenas.size() > 1) {
    arenas = "(";
    for (size_t i = 0; i < e.arenas.size(); ++i) arenas += (i ? " + " : "") + sizeText(e.arenas[i]);
    arenas += ": " + std::to_string(e.arenas.size()) + " graphs)";
  }
  row("activation arena", e.activations, arenas);
  row("datasets", e.datasets);
  row("other", e.other, "(inputs, constants, rounding)");
  row("peak", e.peak());
  return out;
}

void checkMemoryFits(vk::Context& context, const MemoryEstimate& e) {
  const uint64_t held = context.allocator().bytesInUse();
  const uint64_t need = held + e.peak();
  const uint64_t limit = context.allocator().limit(), heap = largestHeap(context.info());
  std::string over;
  if (limit && need > limit)
    over = "the " + sizeText(limit) +
           " memory limit (ContextOptions::memory_limit or VKGRAD_MEMORY_LIMIT)";
  else if (heap && need > heap)
    over = context.info().name + "'s largest device-local heap (" + sizeText(heap) + ")";
  if (over.empty()) return;
  throw Error("the predicted peak, " + sizeText(e.peak()) + " of device memory" +
              (held ? " besides the " + sizeText(held) + " already in use" : "") +
              ", is more than " + over + "; nothing was allocated for it:\n" + memoryTable(e));
}

}  // namespace vkgrad::graph
