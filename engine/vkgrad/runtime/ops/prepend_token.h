// A vision transformer's class token in front of its patch rows, as a graph op
// (ops/prepend_token.h; defined in prepend_token.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// x (B,T,C), token (C) -> (B,T+1,C): the token as row 0 of every batch, x's rows after it.
Tensor prependToken(Graph& g, Tensor x, Tensor token);

}  // namespace vkgrad::graph
