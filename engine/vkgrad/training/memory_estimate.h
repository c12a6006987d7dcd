// Device memory known before it is spent: what a ParameterStore, Datasets and compiled graphs
// (an Executor, a Trainer) will take, computed on the host from shapes and memory plans with
// nothing allocated. With a planning store (StoreMemory::Planning) and declared datasets
// (declareWindows), a model of any size is estimated in moments and refused before its first
// allocation when it cannot fit (checkMemoryFits).
//
// It matches what is allocated because it reads the numbers the allocating code uses: an
// Executor allocates its plan's arena (GraphPlan::memory, in chunks of at most one allocation)
// and state buffers (GraphPlan::state_bytes) from planGraph at arenaAlignment() and the
// device's maxMemoryAllocationSize; a store's pages hold what
// ParameterStore::deviceBytes() says; an upload takes its values' bytes; the allocator rounds
// each allocation up to its alignment. So vk::Allocator::bytesInUse(use) grows by exactly the
// estimate's figure for that use, except that a device store spread over several pages (64 MiB
// blocks) takes up to one allocator alignment more per extra page.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/runtime/graph.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::vk {
class Context;
}

namespace vkgrad::graph {

class ParameterStore;

struct MemoryEstimate {
  int64_t parameter_count = 0;  // elements of the store's parameters
  // Bytes, each allocation rounded up to the allocator's alignment.
  uint64_t parameters = 0;   // the store's pages (vk::Use::Parameters)
  uint64_t gradients = 0;    // parameter gradients, in the graphs' state buffers
  uint64_t optimizer = 0;    // the graphs' State tensors: AdamW's moments and step, the loss
                             // scale, generators, status words (state buffers)
  uint64_t activations = 0;  // the graphs' arenas (vk::Use::Activations)
  uint64_t datasets = 0;     // vk::Use::Datasets
  uint64_t other = 0;        // inputs and constants, and the state buffers' rounding
  // Each graph's arena as planned (Executor::arenaBytes()), in the order they were added.
  std::vector<uint64_t> arenas;
  // The largest single tensor a kernel binds: no binding may pass maxStorageBufferRange.
  uint64_t largest_tensor = 0;

  // Everything above at once: nothing is freed while a model trains.
  uint64_t peak() const {
    return parameters + gradients + optimizer + activations + datasets + other;
  }
  uint64_t graphState() const { return gradients + optimizer + other; }  // vk::Use::GraphState
  MemoryEstimate& operator+=(const MemoryEstimate& more);
};

// A store's parameters (a planning store's included).
MemoryEstimate estimateStore(const ParameterStore& store);
// Uploaded or declared datasets; datasets that share one upload (one buffer) count it once.
MemoryEstimate estimateDatasets(vk::Context& context, std::span<const Dataset* const> datasets);
// What an Executor of g allocates: its arena and state buffer (not the parameters and
// datasets it reads). Plans g as the Executor would; throws planGraph's Errors.
MemoryEstimate estimateExecutor(vk::Context& context, const Graph& g, bool reuse_memory = true);
// What a Trainer built from these arguments takes, with the store and datasets it reads: its
// training graph, and with `evaluation` the forward graph its first evaluate() compiles. The
// store may be a planning one and the datasets declared ones. Throws what building the graphs
// throws (ShapeError, Error).
MemoryEstimate estimateTrainer(vk::Context& context, const ParameterStore& store,
                               std::span<const Dataset* const> datasets, const LossFn& loss,
                               const TrainerOptions& options, bool evaluation);

// The estimate as a table, one line per row with MiB/GiB and the exact bytes:
//   parameters (85,804,800)     327.3 MiB    343,219,200 bytes
std::string memoryTable(const MemoryEstimate& estimate);

// Throws Error (the reason, then memoryTable) when the estimate's peak, on top of what the
// context's allocator already holds, passes its memory limit (ContextOptions::memory_limit,
// VKGRAD_MEMORY_LIMIT) or the device's largest device-local heap, or a tensor is larger than
// one binding may be. The limit counts 64 MiB blocks, so a peak just under it may still not
// fit; the allocator then throws OutOfMemoryError as before.
void checkMemoryFits(vk::Context& context, const MemoryEstimate& estimate);

}  // namespace vkgrad::graph
