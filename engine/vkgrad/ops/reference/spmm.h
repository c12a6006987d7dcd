// CPU reference of ops/spmm.h, in double: the aggregation, its transpose and the weights'
// gradient, straight from the formulas over the CSR arrays.
#pragma once

#include <cstdint>
#include <vector>

namespace vkgrad::ops::ref {

// offsets: (N+1); sources: (E); w: (E, H), or nullptr for all-ones (then heads is 1);
// x: (N, F). Returns y (N, F).
std::vector<float> spmm(const std::vector<uint32_t>& offsets, const std::vector<uint32_t>& sources,
                        const float* w, int64_t heads, const std::vector<float>& x, int64_t cols);
// The transpose, from the same arrays: dx[i] = sum over edges e with sources[e] = i of
// w[e] dy[destination of e]. Returns dx (N, F).
std::vector<float> spmmTransposed(const std::vector<uint32_t>& offsets,
                                  const std::vector<uint32_t>& sources, const float* w,
                                  int64_t heads, const std::vector<float>& dy, int64_t cols);
// dw (E, H): per edge and head, dy[destination] . x[source] over the head's features.
std::vector<float> spmmWeightsBackward(const std::vector<uint32_t>& offsets,
                                       const std::vector<uint32_t>& sources, int64_t heads,
                                       const std::vector<float>& x, const std::vector<float>& dy,
                                       int64_t cols);

}  // namespace vkgrad::ops::ref
