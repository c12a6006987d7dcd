// CPU reference for log-softmax: double accumulation, so it is the trusted side of a test.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (rows, n). y = x - logsumexp(x) per row; -inf entries give -inf, and a row that is
// all -inf gives all -inf, like the GPU op.
void logSoftmax(const float* x, float* y, int64_t rows, int64_t n);
// y, dy, dx: (rows, n). dx = dy - exp(y) * sum(dy) per row (overwrites dx).
void logSoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t n);

}  // namespace vkgrad::ops::ref
