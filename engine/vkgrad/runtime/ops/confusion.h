// A classifier's confusion matrix counted on the device, as a graph op (ops/confusion.h;
// defined in confusion.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// logits (..., C) f32, labels (...) u32 -> (C,C) u32, counts[label][argmax of the row]
// (ops/confusion.h: the first maximum on ties, a NaN beats any number, labels >= C counted
// nowhere), zeroed and counted anew every step. Not differentiable.
Tensor confusion(Graph& g, Tensor logits, Tensor labels);

}  // namespace vkgrad::graph
