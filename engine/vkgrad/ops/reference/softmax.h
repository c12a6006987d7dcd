// CPU reference for softmax: double accumulation, so it is the trusted side of a test.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (rows, n). A row that is all -inf gives zeros, like the GPU op.
void softmax(const float* x, float* y, int64_t rows, int64_t n);
// y, dy, dx: (rows, n). dx = y * (dy - sum(dy * y)) per row (overwrites dx).
void softmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t n);

}  // namespace vkgrad::ops::ref
