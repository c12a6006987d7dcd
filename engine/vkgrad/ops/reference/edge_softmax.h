// CPU reference of ops/edge_softmax.h, in double, over the same clamped offsets: edges no
// node's range covers keep the value they came with.
#pragma once

#include <cstdint>
#include <vector>

namespace vkgrad::ops::ref {

// offsets: (nodes + 1); scores: (E, H). Returns alpha (E, H), starting from `init`'s values
// (edges no range covers keep them).
std::vector<float> edgeSoftmax(const std::vector<uint32_t>& offsets,
                               const std::vector<float>& scores, int64_t heads,
                               const std::vector<float>& init);
// dscores (E, H) = init + the gradient (init all zeros for an overwrite).
std::vector<float> edgeSoftmaxBackward(const std::vector<uint32_t>& offsets,
                                       const std::vector<float>& alpha,
                                       const std::vector<float>& dalpha, int64_t heads,
                                       const std::vector<float>& init);

}  // namespace vkgrad::ops::ref
