// Graph attention's softmax over each node's incoming edges as a graph op (runtime/sparse.h,
// ops/edge_softmax.h; defined in edge_softmax.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::graph {

// scores (E, H) f32 -> (E, H): softmax over each destination's incoming edges, per head
// (runtime/sparse.h's edge order). Deterministic; a node without incoming edges has none.
Tensor edgeSoftmax(Graph& g, const SparseGraph& a, Tensor scores);

}  // namespace vkgrad::graph
