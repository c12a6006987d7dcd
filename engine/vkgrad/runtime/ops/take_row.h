// A vision transformer's class-token row taken back for its head, as a graph op
// (ops/take_row.h; defined in take_row.cpp).
#pragma once

#include <cstdint>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// x (B,T,C) -> (B,C): row `index` (0 <= index < T) of every batch.
Tensor takeRow(Graph& g, Tensor x, int64_t index);

}  // namespace vkgrad::graph
