// rope over some heads only, as a graph op (ops/rope.h; defined in rope.cpp beside
// Graph::rope, which is this with every head).
#pragma once

#include <cstdint>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// Graph::rope turning only heads [0, rotated_heads) of x (B,T,H,D), 1 <= rotated_heads <= H,
// and copying the others: a fused q, k, v projection reshaped to (B,T,Hq+2Hkv,D) (a view) gets
// its q and k heads rotated and its v heads passed through in one pass, the gradient alike.
Tensor ropeHeads(Graph& g, Tensor x, float theta, Tensor position, int64_t rotated_heads);

}  // namespace vkgrad::graph
