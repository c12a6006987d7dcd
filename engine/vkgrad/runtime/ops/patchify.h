// A vision transformer's first step as a graph op (ops/patchify.h; defined in patchify.cpp).
#pragma once

#include <cstdint>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// images (B,H,W) f32 -> (B, (H/patch)*(W/patch), patch*patch): non-overlapping squares,
// row-major over the patch grid, pixels row-major within each; H and W multiples of patch.
Tensor patchify(Graph& g, Tensor images, int64_t patch);

}  // namespace vkgrad::graph
