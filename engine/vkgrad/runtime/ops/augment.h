// Training images shifted and mirrored on the device, as a graph op (ops/augment.h; defined
// in augment.cpp).
#pragma once

#include <cstdint>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// images (B,H,W) f32 -> (B,H,W): each image shifted by (dx, dy) uniform in [-pad, pad] and,
// with flip, mirrored left to right with probability 1/2 (first), `fill` shifted in from
// outside, by the graph's generator as dropout's: fresh draws every step.
// 0 <= pad < min(H, W). Returns images itself when pad is 0 without flip, or when the graph
// is not for training. Not differentiable (images are data).
Tensor augment(Graph& g, Tensor images, int64_t pad, bool flip, float fill = 0.0f);

}  // namespace vkgrad::graph
