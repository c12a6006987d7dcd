// CPU reference of ops::topKWeights (ops/sample.h), in double.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// logits, weights: (rows, cols). top_k 0 keeps every logit.
void topKWeights(const float* logits, float* weights, int64_t rows, int64_t cols, float temperature,
                 int64_t top_k);

}  // namespace vkgrad::ops::ref
