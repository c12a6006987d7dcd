// CPU reference of ops/segment_pool.h, in double, with the same clamping of bad segments.
#pragma once

#include <cstdint>
#include <vector>

#include "vkgrad/ops/segment_pool.h"

namespace vkgrad::ops::ref {

// x: (nodes, features); segments: (G + 1). Returns (G, features); for Max, *argmax gets
// the (G, features) argmax (kNoNode for an empty graph).
std::vector<float> segmentPool(Pool kind, const std::vector<float>& x, int64_t features,
                               const std::vector<uint32_t>& segments,
                               std::vector<uint32_t>* argmax = nullptr);
// The gradient of segmentPool for dout (G, features), as (nodes, features), for
// non-decreasing segments (each node in at most one graph).
std::vector<float> segmentPoolBackward(Pool kind, int64_t nodes, int64_t features,
                                       const std::vector<uint32_t>& segments,
                                       const std::vector<uint32_t>& argmax,
                                       const std::vector<float>& dout);

}  // namespace vkgrad::ops::ref
