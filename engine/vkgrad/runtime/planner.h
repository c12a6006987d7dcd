// Memory planning: which nodes run and in what order, how long each tensor lives, and where
// in one arena each non-persistent tensor goes. Tensors whose lifetimes do not intersect may
// share bytes; placement is best-fit over the ranges freed by tensors already dead. Where an
// op may write its output over an input (activations, add, an activation's dx over dy) and
// that input is last used there, the output takes the input's range (in place).
// Persistent tensors (inputs, parameters, constants, state, parameter gradients) are not in
// the arena; those the graph owns (all but parameters and datasets) are packed into its state
// (GraphPlan::state_offset). No Vulkan here: the executor allocates what the plan says, and a
// memory estimate (training/memory_estimate.h) reads the same plan.
// The arena may span several allocations (chunks of at most maxMemoryAllocationSize): no
// tensor crosses a chunk boundary, so each lies wholly in one buffer. Kernels bind each
// tensor as its own range (offset, size), so only a single tensor above the device's
// maxStorageBufferRange (or one allocation) is a problem: the planner names one larger than
// a chunk, and the op launchers reject one larger than a binding when the graph is compiled.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// One arena allocation: live from step `first` to step `last`, both included.
struct Lifetime {
  uint64_t bytes = 0;
  int first = 0, last = 0;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per Lifetime, multiples of the alignment
  uint64_t arena_bytes = 0;       // the arena's size
  uint64_t naive_bytes = 0;       // the sum of all (aligned) sizes: one buffer each
  uint64_t chunk_bytes = 0;       // the arena's allocations: this many bytes each; 0: one
};

// Best-fit placement. alignment: a power of two (offsets and sizes are rounded to it).
// reuse false gives every item its own range (the naive layout, for comparisons).
// chunk_bytes > 0 (rounded down to the alignment): no item crosses a multiple of it, so the
// arena can be allocated as chunks of that size; throws Error for an item larger than one.
MemoryPlan planMemory(std::span<const Lifetime> items, uint64_t alignment, bool reuse = true,
                      uint64_t chunk_bytes = 0);
// Throws Error naming both items when two whose lifetimes intersect share a byte, or when an
// offset is misaligned, an item runs past the arena or crosses a chunk boundary.
void checkPlan(std::span<const Lifetime> items, const MemoryPlan& plan, uint64_t alignment);

// Whether a tensor lives outside the arena (see the file comment).
bool isPersistent(const TensorInfo& root);

struct GraphPlan {
  std::vector<int> order;        // the nodes that run, in execution order
  std::vector<int> arena_roots;  // the root tensor of each Lifetime below
  std::vector<Lifetime> lifetimes;
  MemoryPlan memory;
  std::vector<int64_t> offset;  // per tensor id: its root's arena offset; -1 if not in the arena
  std::vector<bool> used;       // per tensor id: some node that runs touches its root
  // The graph's own persistent tensors (inputs, constants, state, parameter gradients) that a
  // node uses, in tensor order, each on the alignment: one buffer, so the optimizer updates all
  // of them in one dispatch (ops::adamwMany) and a gradient norm reads them in one; or, where
  // that would be more than a chunk, as few buffers of at most a chunk as hold them.
  std::vector<int> state_buffer;      // per tensor id: its root's state buffer; -1 if none
  std::vector<int64_t> state_offset;  // per tensor id: its root's offset there; -1 if none
  std::vector<uint64_t> state_bytes;  // per state buffer, its size
};

// Nodes that lead neither to a marked output nor to a parameter's gradient, and update no
// state, are dropped. Outputs live to
// the end of the step so they can be read back. Throws Error if a node reads a tensor that
// nothing before it wrote (an activation used before it is produced).
// chunk_bytes as planMemory's, for the arena and the state buffers; a tensor larger than a
// chunk is a ShapeError naming it.
GraphPlan planGraph(const Graph& g, uint64_t alignment, bool reuse = true,
                    uint64_t chunk_bytes = 0);

}  // namespace vkgrad::graph
