// A graph neural network's pooling over a batch's graphs as a graph op (ops/segment_pool.h;
// defined in segment_pool.cpp).
#pragma once

#include "vkgrad/ops/segment_pool.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// x (N, F) f32 pooled over contiguous node ranges: segments (G+1) u32 (a dataset or input
// tensor: offsets, first 0, non-decreasing, last N) -> (G, F). Sum, Mean or Max. An empty
// range pools to 0; offsets the host never checked are clamped (ops/segment_pool.h).
Tensor segmentPool(Graph& g, Tensor x, Tensor segments, ops::Pool kind);

}  // namespace vkgrad::graph
