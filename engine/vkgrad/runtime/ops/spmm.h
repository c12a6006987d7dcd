// A graph neural network's aggregation over a sparse graph as a graph op (runtime/sparse.h,
// ops/spmm.h; defined in spmm.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::graph {

// A (sparse) times x (N, F) f32 -> (N, F): y[j] = sum over j's incoming edges e of
// w[e] * x[source of e]; weights: none (1), (E) or (E, H) f32 with H dividing F (head h
// weighs features [h F/H, (h+1) F/H)). Gradients for x (through the transpose) and for
// weights (a per-edge dot product); deterministic, no atomics. The SparseGraph must outlive
// the compiled graph.
Tensor spmm(Graph& g, const SparseGraph& a, Tensor x, Tensor weights = {});

}  // namespace vkgrad::graph
